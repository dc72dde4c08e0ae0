"""The iteration-level scheduler policies, by name; vLLM's is the default, TensorRT-LLM's
guaranteed-no-evict (NoEvictPolicy) and SGLang's prefill-first steps (SglangPolicy) are the
others, below.

vLLM's (VllmPolicy): each step has a token budget (max_num_batched_tokens) and a sequence
limit (max_num_seqs):
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

from ridgeline.simulate.policy import Chunk, Policy, SchedulerView, StepPlan


class VllmPolicy:
    """vLLM's scheduler: decodes first, preemption by recompute of the latest admitted,
    chunked prefill within the token budget, first come, first served admission."""

    mixed = True  # the decoders share each step with the prefill chunks (SglangPolicy's do not)

    def schedule(self, view: SchedulerView) -> StepPlan:
        r = view.reqs
        bs = view.block_tokens
        free = view.free_blocks
        decoding = view.n_decoding
        prefilling = view.prefilling
        end = len(prefilling)  # prefilling[:end] still run: victims leave from the end
        preempt: list[int] = []
        if decoding:
            need = view.decode_blocks()
            if need > free:
                decoding, end, free = self.make_room(view, need, free, preempt)
            else:
                free -= need
        budget = view.max_num_batched_tokens - (decoding if self.mixed else 0)
        chunks: list[Chunk] = []
        computed, target, held, shared = r.computed, r.target, r.held, r.shared
        i = 0
        while i < end and budget > 0:
            rid = prefilling[i]
            c = computed[rid]
            n = target[rid] - c
            if n > budget:
                n = budget
            fit = (held[rid] + free) * bs + shared[rid] - c  # tokens the free blocks can take
            while fit <= 0:
                end -= 1
                victim = prefilling[end]
                preempt.append(victim)
                free += held[victim]
                if victim == rid:
                    break
                fit = (held[rid] + free) * bs + shared[rid] - c
            if fit <= 0:
                continue  # it preempted itself: end is now i
            if n > fit:
                n = fit
            free -= -(-(c + n - shared[rid]) // bs) - held[rid]
            chunks.append((rid, n, c))
            budget -= n
            i += 1
        if preempt:
            return preempt, chunks, self.mixed or not chunks
        # first come, first served: admit from the head of the queue while everything fits
        running = decoding + end
        limit = view.max_num_seqs
        if budget > 0 and running < limit:
            for rid in view.waiting:
                c = computed[rid]
                n = target[rid] - c
                if n > budget:
                    n = budget
                blocks = -(-(c + n - shared[rid]) // bs)
                if blocks > free:
                    break
                free -= blocks
                chunks.append((rid, n, c))
                budget -= n
                running += 1
                if budget <= 0 or running >= limit:
                    break
        return (), chunks, self.mixed or not chunks

    @staticmethod
    def make_room(view: SchedulerView, need: int, free: int, preempt: list[int]) -> tuple[int, int, int]:
        """Preempt the latest admitted running requests into `preempt` until the decoders'
        fresh blocks fit; returns the decoders and prefills left, and the blocks still free
        once the decoders' are reserved."""
        seq = view.reqs.seq
        prefilling = view.prefilling
        end = len(prefilling)
        decoding = view.n_decoding
        decoders = view.latest_decoders()
        decoder = next(decoders, -1)
        while need > free:
            prefill = prefilling[end - 1] if end else -1
            if decoder >= 0 and (prefill < 0 or seq[prefill] <= seq[decoder]):
                victim = decoder
                decoding -= 1
                if view.takes_block(decoder):
                    need -= 1
                decoder = next(decoders, -1)
            else:
                victim = prefill
                end -= 1
            preempt.append(victim)
            free += view.held_blocks(victim)
        return decoding, end, free - need


class SglangPolicy(VllmPolicy):
    """SGLang's default scheduler (python/sglang/srt/managers/scheduler.py,
    Scheduler.get_next_batch_to_run, with --enable-mixed-chunk off): a step is either a
    prefill ("extend") batch or a decode step, never both. Whenever a prefill batch can be
    formed (a chunked prefill is unfinished or a request waits, and the KV cache and
    --max-running-requests, here max_num_seqs, have room) it runs first, alone: the running
    prefills' next chunks, then waiting requests first come, first served, within
    --chunked-prefill-size tokens (max_num_batched_tokens), and the decoding sequences emit
    nothing while it runs. Otherwise every decoding sequence runs one decode step.

    Memory is vLLM's (VllmPolicy), not SGLang's: a prefill is admitted while its blocks fit
    beside the decoders' next blocks, and when those do not fit the latest admitted running
    request is preempted by recompute before anything else is planned. SGLang instead
    admits against a reserve for the running requests' future tokens (new_token_ratio) and,
    when a decode step's memory runs out, retracts decoding requests (retract_decode); that
    bookkeeping is not modelled."""

    mixed = False


class NoEvictPolicy:
    """TensorRT-LLM's GUARANTEED_NO_EVICT capacity scheduler: a request is admitted only when
    the blocks of its whole life (prompt and every output token) fit beside those already
    promised to the running requests, so nothing is ever preempted. It admits fewer requests
    than vLLM's on the same cache (the promise counts blocks not yet written), and never
    recomputes one. Prefills are chunked within the token budget as in vLLM's, first come,
    first served; the decoders' blocks always fit, being promised."""

    def __init__(self) -> None:
        self.promised = 0  # the blocks of the whole lives of the admitted requests not yet finished
        self.life: dict[int, int] = {}  # each one's
        self.seen = 0  # finishes accounted for

    @staticmethod
    def blocks_for_life(view: SchedulerView, rid: int) -> int:
        r = view.reqs
        return -(-(r.prompt[rid] + r.output[rid] - r.shared[rid]) // view.block_tokens)

    def release_finished(self, view: SchedulerView) -> None:
        done = view.done
        for i in range(self.seen, len(done)):
            self.promised -= self.life.pop(done[i])
        self.seen = len(done)

    def schedule(self, view: SchedulerView) -> StepPlan:
        self.release_finished(view)
        r = view.reqs
        bs = view.block_tokens
        free = view.free_blocks - (view.decode_blocks() if view.n_decoding else 0)
        budget = view.max_num_batched_tokens - view.n_decoding
        computed, target, held, shared = r.computed, r.target, r.held, r.shared
        chunks: list[Chunk] = []
        for rid in view.prefilling:
            if budget <= 0:
                break
            c = computed[rid]
            n = min(target[rid] - c, budget)
            free -= -(-(c + n - shared[rid]) // bs) - held[rid]
            chunks.append((rid, n, c))
            budget -= n
        running = view.n_decoding + len(view.prefilling)
        spare = view.blocks - self.promised
        for rid in view.waiting:
            if budget <= 0 or running >= view.max_num_seqs:
                break
            life = self.blocks_for_life(view, rid)
            if life > spare:  # run.check_fits saw that every request fits an empty cache
                break
            c = computed[rid]
            n = min(target[rid] - c, budget)
            free -= -(-(c + n - shared[rid]) // bs)
            spare -= life
            self.promised += life
            self.life[rid] = life
            chunks.append((rid, n, c))
            budget -= n
            running += 1
        assert free >= 0, "promised blocks ran out: a no-evict accounting bug"
        return (), chunks, True


POLICIES: dict[str, type[Policy]] = {"vllm": VllmPolicy, "no-evict": NoEvictPolicy, "sglang": SglangPolicy}
