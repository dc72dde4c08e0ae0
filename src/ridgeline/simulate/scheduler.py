"""The iteration-level scheduler, in the style of vLLM's: which tokens go into the next step.

Each step has a token budget (max_num_batched_tokens) and a sequence limit (max_num_seqs):
1. every decoding sequence gets its one token; when the blocks for them run out, the most
   recently admitted running request is preempted (recompute: its blocks are freed and it
   returns to the head of the queue, to prefill its prompt and the tokens it had emitted);
2. running prefills get their next chunk of the rest of the budget (chunked prefill, so
   prefills and decodes share the step); a chunk shrinks to the blocks that are free, and a
   prefill that gets none preempts the latest prefill;
3. if nothing was preempted, waiting requests are admitted first come, first served while
   the budget, the sequence limit and the free blocks allow.
Decodes therefore never wait for a prefill: vLLM requires max_num_batched_tokens >=
max_num_seqs, so the decodes always fit.
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

from ridgeline.simulate.requests import DECODE, PREFILL, WAITING

if TYPE_CHECKING:
    from ridgeline.simulate.engine import Engine


def schedule(e: Engine) -> tuple[list[tuple[int, int, int]], bool]:
    """Reserve blocks and pick the step's prefill chunks (request, new tokens, cached
    context). Returns the chunks and whether anything was preempted."""
    r = e.r
    bs = e.bs
    preempted = False
    if e.n_dec:
        need = e.cnt[e.step % bs]  # decoders whose cached tokens fill their last block
        while need > e.free:
            preempt(e, latest(e))
            preempted = True
            need = e.cnt[e.step % bs] if e.n_dec else 0
        e.free -= need
    budget = e.max_tokens - e.n_dec
    chunks: list[tuple[int, int, int]] = []
    computed, target, held, shared = r.computed, r.target, r.held, r.shared
    i = 0
    while i < len(e.prefilling) and budget > 0:
        rid = e.prefilling[i]
        c = computed[rid]
        n = min(target[rid] - c, budget)
        fit = (held[rid] + e.free) * bs + shared[rid] - c  # tokens the free blocks can take
        while fit <= 0:
            victim = e.prefilling[-1]
            preempt(e, victim)
            preempted = True
            if victim == rid:
                break
            fit = (held[rid] + e.free) * bs + shared[rid] - c
        if fit <= 0:
            continue  # it preempted itself; the list is shorter, i is the next one
        n = min(n, fit)
        extra = -(-(c + n - shared[rid]) // bs) - held[rid]
        e.free -= extra
        held[rid] += extra
        chunks.append((rid, n, c))
        budget -= n
        i += 1
    if not preempted:
        admit(e, chunks, budget)
    return chunks, preempted


def admit(e: Engine, chunks: list[tuple[int, int, int]], budget: int) -> None:
    """First come, first served: admit from the head of the queue while everything fits."""
    r = e.r
    waiting = e.waiting
    running = e.n_dec + len(e.prefilling)
    while waiting and budget > 0 and running < e.max_seqs:
        rid = waiting[0]
        c = r.computed[rid]
        n = min(r.target[rid] - c, budget)
        blocks = -(-(c + n - r.shared[rid]) // e.bs)
        if blocks > e.free:
            break
        waiting.popleft()
        e.free -= blocks
        r.held[rid] = blocks
        r.state[rid] = PREFILL
        e.admitted += 1
        r.seq[rid] = e.admitted
        if r.admit_s[rid] != r.admit_s[rid]:  # NaN: first admission
            r.admit_s[rid] = e.t
        e.prefilling.append(rid)
        chunks.append((rid, n, c))
        budget -= n
        running += 1


def latest(e: Engine) -> int:
    """The most recently admitted running request: the preemption victim."""
    r = e.r
    victims = e.victims
    while victims and (r.state[victims[0][1]] != DECODE or r.seq[victims[0][1]] != -victims[0][0]):
        heapq.heappop(victims)  # stale entries of requests that finished or were preempted
    decoder = victims[0][1] if victims else -1
    prefill = e.prefilling[-1] if e.prefilling else -1
    if decoder < 0:
        return prefill
    if prefill < 0:
        return decoder
    return prefill if r.seq[prefill] > r.seq[decoder] else decoder


def preempt(e: Engine, rid: int) -> None:
    """Preempt by recompute: free the request's blocks and queue it at the head to prefill
    its prompt plus the tokens it has emitted (the last prefill position emits the next)."""
    r = e.r
    bs = e.bs
    if r.state[rid] == DECODE:
        context = e.step - r.base[rid]
        emitted = r.emitted[rid] + 1 + (e.step - r.first_step[rid])
        e.free += -(-(context - r.shared[rid]) // bs)
        e.leave_decode(rid)
        r.emitted[rid] = emitted
    else:
        e.free += r.held[rid]
        e.prefilling.remove(rid)
    r.state[rid] = WAITING
    r.target[rid] = r.prompt[rid] + r.emitted[rid]
    r.computed[rid] = r.hit[rid]
    r.held[rid] = 0
    r.preemptions[rid] += 1
    e.preemptions += 1
    e.waiting.appendleft(rid)
