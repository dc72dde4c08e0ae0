"""One replica's engine: continuous batching over a paged KV cache, one step at a time, or a
whole run of identical decode steps at once.

State is kept so that a decode step costs O(1) whatever the batch: every decoding sequence
gains one token per step the decoders run in (a prefill-only step, which a policy may plan,
leaves the counter alone), so with a step counter s its context is s - base, the batch's
total context is n s - sum(base), and the sequences that need a fresh block this step are
those whose base is congruent to s modulo the block size (a count per residue).

Between an arrival, a completion and the moment the blocks would run out, the batch does not
change and each roofline term grows linearly with the context: the run's time has a closed
form (steptime.DecodeRun), so the engine jumps from event to event instead of stepping token
by token. A sliding window w bends a decoder's terms once, at context w: before it, each
step adds a token to what its sliding layers attend to and read; from it on, none. So each
window keeps its young decoders (context < w) as a count and a sum of bases (`Young`), and a
run also ends where the next of them comes of age.

A step is planned from the requests that had arrived when it was planned: at its start, or,
for an engine that overlaps its scheduling with the GPU (EngineConfig.overlap: SGLang 0.4 on,
TensorRT-LLM's PyTorch runtime), while the step before it ran, from that step's start. A
request that arrives mid-step then waits for one more step; an idle engine plans at once.

With multi-step scheduling (EngineConfig.num_scheduler_steps = N > 1: vLLM 0.6's
`--num-scheduler-steps`, in its V0 engine) the scheduler runs once for N decode steps: a
decode-only batch runs N steps in a row, and a request that arrives meanwhile waits for the
run's end; the tokens of a run reach the client at its end, so a request that finishes
inside one is done when the run is. A prefill runs whole, in a step of its own (the decoders
wait), and its first token leaves at once. Not modelled: a sequence that finishes inside a
run keeps its slot, computing tokens nobody reads, until the run ends (here it leaves at its
last token), and a run stops short when its decoders' fresh blocks run out, where vLLM
reserves the run's slots when it schedules it.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from ridgeline.checks import MAX_COUNT, MAX_TOKENS, check_fraction, check_size
from ridgeline.engines import MAX_SCHEDULER_STEPS, Scheduler, check_dp_limits
from ridgeline.errors import RidgelineError
from ridgeline.ledger import attended_pairs, cached_tokens
from ridgeline.simulate.kvcache import MAX_BLOCK_TOKENS, KvCache
from ridgeline.simulate.policy import Chunk, Policy, SchedulerView, StepPlan
from ridgeline.simulate.requests import DECODE, DONE, PREFILL, WAITING, Requests
from ridgeline.simulate.scheduler import POLICIES
from ridgeline.simulate.steptime import DecodeRun, StepModel

MAX_ITERATIONS = 100_000_000  # engine steps (or jumped runs) of one replica in one run


class Young:
    """The decoders still inside a sliding window w at step s (context s - base < w): their
    count and the sum of their bases, so that the window's totals over every decoder are

        attended pairs = young x s - sum(base) + young / 2 + w x (decoders - young)
        cached tokens  = young x s - sum(base)            + w x (decoders - young)

    (one new token at context c attends to c + 1/2 pairs and reads c tokens below w, w from
    it on: ledger.attended_pairs, cached_tokens). A decoder comes of age at step base + w;
    those of one step are kept together, in a heap by that step. Every call names the
    current step, which never goes back."""

    __slots__ = ("ages", "groups", "n", "sum_base", "window")

    def __init__(self, window: int) -> None:
        self.window = window
        self.n = 0
        self.sum_base = 0
        self.groups: dict[int, list[int]] = {}  # step of age -> [count, sum of bases]
        self.ages: list[int] = []  # heap of those steps

    def age(self, s: int) -> None:
        """Let every decoder of age by step s leave the young."""
        ages, groups = self.ages, self.groups
        while ages and ages[0] <= s:
            count, bases = groups.pop(heapq.heappop(ages))
            self.n -= count
            self.sum_base -= bases

    def join(self, base: int, s: int) -> None:
        self.age(s)
        at = base + self.window
        if at <= s:
            return
        group = self.groups.get(at)
        if group is None:
            self.groups[at] = [1, base]
            heapq.heappush(self.ages, at)
        else:
            group[0] += 1
            group[1] += base
        self.n += 1
        self.sum_base += base

    def leave(self, base: int, s: int) -> None:
        self.age(s)
        at = base + self.window
        if at <= s:
            return
        group = self.groups[at]
        group[0] -= 1
        group[1] -= base
        self.n -= 1
        self.sum_base -= base

    def next_age(self) -> float:
        """The next step at which a decoder comes of age (after the last `age`), or inf."""
        return self.ages[0] if self.ages else math.inf


@dataclass(frozen=True)
class EngineConfig:
    """vLLM's knobs, and the scheduler policy by name (scheduler.POLICIES), checked when built."""

    max_num_seqs: int = Scheduler.max_num_seqs  # vLLM's defaults, as engines.Scheduler states them
    max_num_batched_tokens: int = Scheduler.max_num_batched_tokens
    block_tokens: int = 16
    gpu_memory_utilization: float = 0.9
    jump: bool = True  # closed-form runs of decode steps; False steps one by one
    policy: str = Scheduler.policy
    chunked_prefill: bool = True  # False: a prefill runs whole in one step, never split
    prefix_caching: bool = False  # a preempted request's freed blocks stay cached until reused
    overlap: bool = False  # the next step is planned while this one runs (Scheduler.overlap)
    dp_limits: str = Scheduler.dp_limits  # under data-parallel attention: "replica" or "rank" (Scheduler)
    num_scheduler_steps: int = Scheduler.num_scheduler_steps  # decode steps a scheduling runs (vLLM 0.6)

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        check_size("--max-num-seqs", self.max_num_seqs, 1, MAX_COUNT)
        check_size("--max-num-batched-tokens", self.max_num_batched_tokens, 1, MAX_TOKENS)
        check_size("--block-tokens", self.block_tokens, 1, MAX_BLOCK_TOKENS)
        check_fraction("--gpu-memory-utilization", self.gpu_memory_utilization)
        if not isinstance(self.jump, bool):
            raise RidgelineError(f"jump must be True or False, got {self.jump!r}")
        for name in ("chunked_prefill", "prefix_caching", "overlap"):
            if not isinstance(getattr(self, name), bool):
                raise RidgelineError(f"{name} must be True or False, got {getattr(self, name)!r}")
        check_dp_limits("dp_limits", self.dp_limits)
        check_size("--num-scheduler-steps", self.num_scheduler_steps, 1, MAX_SCHEDULER_STEPS)
        if self.num_scheduler_steps > 1 and self.chunked_prefill:
            raise RidgelineError(
                f"--num-scheduler-steps {self.num_scheduler_steps} runs every prefill whole, as vLLM "
                "0.6's multi-step scheduling does: add --chunked-prefill off"
            )
        if not isinstance(self.policy, str) or self.policy not in POLICIES:
            raise RidgelineError(
                f"scheduler policy {self.policy!r} is unknown: use {' or '.join(map(repr, POLICIES))}"
            )
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise RidgelineError(
                f"--max-num-batched-tokens {self.max_num_batched_tokens} is below --max-num-seqs "
                f"{self.max_num_seqs}: every running sequence needs a token each step; raise it"
            )


@dataclass(frozen=True)
class Limits:
    """What a replica's scheduler works within, one step at a time: its running sequences and
    tokens, and the most tokens one request's chunk may take (a rank's budget: under
    data-parallel attention each request prefills on one GPU, within that GPU's share)."""

    max_num_seqs: int
    max_num_batched_tokens: int
    max_chunk_tokens: int
    ranks: int = 1  # the ranks each running their own chunked prefill


def replica_limits(cfg: EngineConfig, ranks: int) -> Limits:
    """The limits of a replica whose sequences are shared out over `ranks` GPUs (1 without
    data-parallel attention: the config's own). With `dp_limits` "replica" the config's are
    the replica's and a rank's budget is its share (SGLang divides --chunked-prefill-size by
    the DP size); with "rank" each rank has the config's (vLLM's whole-engine DP ranks,
    TensorRT-LLM's per-rank max_batch_size and max_num_tokens), so the replica has ranks x."""
    seqs, tokens = cfg.max_num_seqs, cfg.max_num_batched_tokens
    if ranks == 1:
        return Limits(seqs, tokens, tokens)
    if cfg.dp_limits == "rank":
        return Limits(seqs * ranks, tokens * ranks, tokens, ranks)
    return Limits(seqs, tokens, max(1, tokens // ranks), ranks)


class Trace:
    """What each step (or jumped run of `steps` steps) did, one row each, in typed arrays.
    pairs/cached are per window group and per step (the mean over a run)."""

    def __init__(self, groups: int) -> None:
        self.t_s = array("d")
        self.dt_s = array("d")
        self.steps = array("q")
        self.tokens = array("q")
        self.running = array("q")
        self.waiting = array("q")
        self.used_blocks = array("q")
        self.pairs = [array("d") for _ in range(groups)]
        self.cached = [array("d") for _ in range(groups)]
        # the decoders that emitted a token in each of the row's steps, and those that waited
        # out a step that ran prefills alone (their next token's gap holds it too)
        self.emitting = array("q")
        self.paused = array("q")


class Engine:
    """One replica. It is the SchedulerView its policy reads (policy.py): the attributes and
    the four methods under "what a policy reads"; a policy writes none of them."""

    def __init__(
        self,
        reqs: Requests,
        model: StepModel,
        cfg: EngineConfig,
        kv: KvCache,
        pinned_blocks: int = 0,
        replica: int = 0,
        follow_up: Callable[[int, float], int | None] | None = None,
        trace: bool = True,
    ) -> None:
        """`trace`: keep a row per step for the summary's utilisation (a run judged on its
        requests alone, as a search's, needs none)."""
        self.reqs = reqs
        self.model = model
        self.cfg = cfg
        self.block_tokens = kv.block_tokens
        self.blocks = kv.blocks - pinned_blocks  # shared prefix blocks stay in the cache
        self.free_blocks = self.blocks
        self.taken = 0  # blocks ever taken from the free ones
        # preempted requests whose freed blocks may still be cached: rid -> (blocks taken then,
        # free blocks ahead of its own in the order they are reused, its blocks, its tokens)
        self.cached: dict[int, tuple[int, int, int, int]] | None = {} if cfg.prefix_caching else None
        limits = replica_limits(cfg, model.m.par.dp_ranks)
        self.max_num_batched_tokens = limits.max_num_batched_tokens
        self.max_num_seqs = limits.max_num_seqs
        self.max_chunk_tokens = limits.max_chunk_tokens
        self.dp_ranks = limits.ranks
        self.chunked_prefill = cfg.chunked_prefill
        self.replica = replica
        self.follow_up = follow_up
        self.t = 0.0
        # what the scheduler saw when it planned the step about to start: the queue as it stood
        # then. Planned at its start, t, unless the engine overlaps its scheduling with the GPU
        # (cfg.overlap): then at the start of the step that has just run, `planned`
        self.overlap = cfg.overlap
        self.planned = 0.0
        self.step = 0  # step counter s
        self.pending: list[int] = []  # assigned requests in arrival order
        self.next = 0  # first pending request not yet arrived
        self.waiting: deque[int] = deque()
        self.prefilling: list[int] = []  # running requests still prefilling, admission order
        self.n_decoding = 0
        self.sum_base = 0
        self.sum_end = 0  # the decoders' prompt + output: the contexts at which they finish
        self.cnt = [0] * self.block_tokens  # decoders per base residue
        self.ends: list[tuple[int, int]] = []  # heap of (last step, request)
        self.victims: list[tuple[int, int]] = []  # heap of (-admission, request) of decoders
        self.admitted = 0
        self.preemptions = 0
        self.finished: list[float] = []  # finish times, in order
        self.done: list[int] = []  # the requests that finished, in the same order
        self.iterations = 0  # steps taken one at a time plus closed-form runs
        self.trace = Trace(len(model.groups))
        self.tracing = trace
        tr = self.trace
        self._appends = (
            tr.t_s.append,
            tr.dt_s.append,
            tr.steps.append,
            tr.tokens.append,
            tr.running.append,
            tr.waiting.append,
            tr.used_blocks.append,
            tr.pairs[0].append,
            tr.cached[0].append,
            tr.emitting.append,
            tr.paused.append,
        )
        self.fast = model.global_only and model.exact  # the affine step model, scalars
        # the step model's memo and slopes, read on every step of the fast path
        self.by_tokens = model.by_tokens
        self.host_step, self.host_per_seq = model.host_step, model.host_per_seq
        self.pair_s0 = model.pair_s[0]
        self.cached_s0 = model.cached_s[0]
        # each window group's young decoders (none for a global group)
        self.young = [Young(w) if w else None for w in model.windows]
        self.windowed = not model.global_only
        self.jump = cfg.jump and model.exact
        self.policy: Policy = POLICIES[cfg.policy]()
        self.schedule = self.policy.schedule if self.cached is None else self.schedule_finding_cached
        # where a preempted request rejoins the queue, and how many decode steps may pass
        # before a waiting queue could move, when not only at a finish (policy.py: optional)
        self.requeue_at_head = getattr(self.policy, "requeue_at_head", True)
        self.quiet_steps = getattr(self.policy, "quiet_steps", None)
        # multi-step scheduling: the decode steps a scheduling runs, those left of the run
        # under way (0: none is), and the requests that finished inside it, whose last tokens
        # reach the client when it ends
        self.run_steps = cfg.num_scheduler_steps
        self.locked = 0
        self.unreleased: list[int] = []

    # --- the loop ---------------------------------------------------------------------------
    def add(self, rid: int) -> None:
        self.reqs.replica[rid] = self.replica
        self.pending.append(rid)

    def schedule_finding_cached(self, view: SchedulerView) -> StepPlan:
        """The policy's plan, once each preempted request that waits has found the prefix of
        its tokens whose blocks are still cached (with prefix caching on)."""
        if self.cached:
            self.find_cached()
        return self.policy.schedule(view)

    def find_cached(self) -> None:
        """Like vLLM's free queue, blocks are reused least recently freed first, and a
        request's own last blocks first: a waiting request has lost its tail once the blocks
        taken since it was preempted pass the free blocks that were ahead of its own. What is
        left, whole blocks up to a token short of its target, it need not prefill again."""
        assert self.cached is not None
        r, bs = self.reqs, self.block_tokens
        for rid, (taken, ahead, blocks, tokens) in self.cached.items():
            lost = min(max(self.taken - taken - ahead, 0), blocks)
            kept = (blocks - lost) * bs + r.spared[rid]
            found = min(tokens, kept, r.target[rid] - 1)
            r.computed[rid] = max(r.hit[rid], found - (found - r.hit[rid]) % bs)

    def idle(self) -> bool:
        return not (self.n_decoding or self.prefilling or self.waiting) and self.next >= len(self.pending)

    def run_until(self, barrier: float = math.inf) -> None:
        """Run every step that starts before `barrier` (all of them by default): one step,
        or a closed-form run of decode steps, at a time. The policy plans the step when
        there is something to decide; a decode-only step with room for its blocks needs none."""
        arrival = self.reqs.arrival_s
        pending = self.pending
        waiting = self.waiting
        prefilling, cnt, bs = self.prefilling, self.cnt, self.block_tokens  # never rebound
        schedule, apply, one_step = self.schedule, self.apply, self.one_step
        while True:
            nxt, t = self.next, self.t
            seen = self.planned if self.overlap else t
            while nxt < len(pending) and arrival[pending[nxt]] <= seen:
                waiting.append(pending[nxt])
                nxt += 1
            self.next = nxt
            if not (self.n_decoding or prefilling or waiting):
                if nxt >= len(pending) or arrival[pending[nxt]] >= barrier:
                    return
                # idle, the scheduler sees the next arrival at once, even one that came while
                # the last step ran
                self.t = self.planned = max(t, arrival[pending[nxt]])
                continue
            if t >= barrier:
                return
            if self.iterations >= MAX_ITERATIONS:
                raise RidgelineError(
                    f"a replica has run {MAX_ITERATIONS:,} engine steps, the most one run takes: send "
                    "fewer or shorter requests, add --replicas, or drop --no-jump"
                )
            if self.locked:  # inside a multi-step run: the scheduler waits for its end
                need = cnt[self.step % bs]
                if need <= self.free_blocks:
                    self.free_blocks -= need
                    self.taken += need
                    self.decode_steps(barrier)
                    continue
                self.end_run()  # its fresh blocks ran out: it stops short, and the scheduler makes room
            if waiting or prefilling or not self.n_decoding:
                preempt, chunks, decode = schedule(self)
                if chunks and self.run_steps > 1:
                    decode = False  # V0's prefill step runs alone
                apply(preempt, chunks, decode)
                if chunks or preempt or prefilling or not self.n_decoding:
                    one_step(chunks, decode)
                    continue
            else:
                need = cnt[self.step % bs]  # decoders whose last block is full
                if need > self.free_blocks:
                    preempt, chunks, decode = schedule(self)
                    apply(preempt, chunks, decode)
                    one_step(chunks, decode)
                    continue
                self.free_blocks -= need
                self.taken += need
            if self.run_steps > 1:
                self.locked = self.run_steps  # a decode-only scheduling: a run of them begins
            self.decode_steps(barrier)

    def decode_steps(self, barrier: float) -> None:
        """Decode-only steps: a closed-form run of them, or one; inside a multi-step run, at
        most the steps it has left, and the run ends with its last or its last decoder."""
        start = self.step
        if self.jump:
            self.decode_run_or_step(barrier)
        else:
            self.one_step(())
        if self.locked:
            self.locked -= self.step - start
            if self.locked <= 0 or not self.n_decoding:
                self.end_run()

    def end_run(self) -> None:
        """A multi-step run ends: the tokens it wrote reach their clients, and the requests
        that finished inside it are done now."""
        self.locked = 0
        for rid in self.unreleased:
            self.release(rid, self.t)
        self.unreleased.clear()

    def apply(self, preempt: Sequence[int], chunks: Sequence[Chunk], decode: bool = True) -> None:
        """A policy's plan: preempt, reserve the decoders' fresh blocks (when they run), then
        each chunk's (a prefill holds the blocks of the tokens cached after it); a waiting
        request's chunk admits it."""
        for rid in preempt:
            self.preempt(rid)
        bs = self.block_tokens
        free = self.free_blocks
        if self.n_decoding and decode:
            free -= self.cnt[self.step % bs]
        r = self.reqs
        state, held, spared = r.state, r.held, r.spared
        for rid, new, c in chunks:
            if state[rid] == WAITING:  # admitted: it joins the running prefills
                if self.cached:
                    self.cached.pop(rid, None)
                waiting = self.waiting
                if waiting[0] == rid:
                    waiting.popleft()
                else:
                    waiting.remove(rid)
                state[rid] = PREFILL
                self.admitted += 1
                r.seq[rid] = self.admitted
                if r.admit_s[rid] != r.admit_s[rid]:  # NaN: first admission
                    r.admit_s[rid] = self.t
                self.prefilling.append(rid)
            extra = -(-(c + new - spared[rid]) // bs) - held[rid]
            held[rid] += extra
            free -= extra
        if free < 0:
            raise RuntimeError(
                f"the scheduler policy planned {-free} blocks more than are free: a policy bug"
            )
        self.taken += self.free_blocks - free
        self.free_blocks = free

    # --- what a policy reads (policy.SchedulerView) --------------------------------------------
    def decode_blocks(self) -> int:
        return self.cnt[self.step % self.block_tokens]

    def decode_tokens_left(self) -> int:
        return self.sum_end - (self.n_decoding * self.step - self.sum_base)

    def takes_block(self, rid: int) -> bool:
        bs = self.block_tokens
        return self.reqs.base[rid] % bs == self.step % bs

    def held_blocks(self, rid: int) -> int:
        r = self.reqs
        if r.state[rid] == DECODE:
            return -(-(self.step - r.base[rid] - r.spared[rid]) // self.block_tokens)
        return r.held[rid]

    def decoders(self) -> list[int]:
        r = self.reqs
        state, seq = r.state, r.seq
        return [rid for neg_seq, rid in self.victims if state[rid] == DECODE and seq[rid] == -neg_seq]

    def latest_decoders(self) -> Iterator[int]:
        r = self.reqs
        state, seq = r.state, r.seq
        victims = self.victims
        while victims and (state[victims[0][1]] != DECODE or seq[victims[0][1]] != -victims[0][0]):
            heapq.heappop(victims)  # stale entries of requests that finished or were preempted
        # The heap's entries in order, without changing it: a frontier of (entry, index),
        # from the root; an entry's children are larger. One victim a step is the rule, so
        # this reads a few entries where sorting would read them all.
        frontier = [(victims[0], 0)] if victims else []
        while frontier:
            (neg_seq, rid), i = heapq.heappop(frontier)
            if state[rid] == DECODE and seq[rid] == -neg_seq:
                yield rid
            for child in (2 * i + 1, 2 * i + 2):
                if child < len(victims):
                    heapq.heappush(frontier, (victims[child], child))

    # --- one step ---------------------------------------------------------------------------
    def one_step(self, chunks: Sequence[Chunk], decode: bool = True) -> None:
        """One step of the decoders and the prefill chunks, priced by the step model. Without
        `decode` the chunks run alone: the decoders emit nothing, their clocks only see the
        step's time pass, and the step counter (their contexts) stays."""
        model = self.model
        n = self.n_decoding if decode else 0
        if not n and not chunks:
            raise RuntimeError("an engine step with no tokens to run: a scheduling bug")
        target = self.reqs.target
        tokens = sampled = n  # sampled: one per decoder, and one per prefill the step finishes
        if model.global_only:
            pairs = cached = 0.0
            if n:
                mean = (n * self.step - self.sum_base) / n  # affine in the context: n x the mean
                pairs = n * attended_pairs(1, mean, 0)
                cached = n * cached_tokens(mean, 0)
            for rid, new, c in chunks:
                tokens += new
                pairs += attended_pairs(new, c, 0)
                cached += cached_tokens(c, 0)
                if c + new == target[rid]:
                    sampled += 1
            if self.fast:
                c0, m0, f0 = self.by_tokens.get(tokens) or model.at_tokens(tokens)
                compute = c0 + self.pair_s0 * pairs
                memory = m0 + self.cached_s0 * cached
                if chunks and model.per_sampled:
                    more_c, more_f = model.sampling(tokens, sampled)
                    compute += more_c
                    f0 += more_f
                dt = (compute if compute > memory else memory) + f0
                host = self.host_step + self.host_per_seq * sampled  # StepModel.host_floor, inlined
                if host > dt:
                    dt = host
            else:
                dt = model.time_s(tokens, [pairs], [cached], sampled, self.spread(n, chunks, tokens, pairs))
            self.record(dt, 1, tokens, pairs, cached, n, self.n_decoding - n)
        else:
            if decode:
                group_pairs, group_cached, _ = self.decode_totals()
            else:
                group_pairs, group_cached = [0.0] * len(model.windows), [0.0] * len(model.windows)
            for rid, new, c in chunks:
                tokens += new
                if c + new == target[rid]:
                    sampled += 1
                for g, w in enumerate(model.windows):
                    group_pairs[g] += attended_pairs(new, c, w)
                    group_cached[g] += cached_tokens(c, w)
            spread = self.spread(n, chunks, tokens, sum(group_pairs))
            dt = model.time_s(tokens, group_pairs, group_cached, sampled, spread)
            self.record_groups(dt, tokens, group_pairs, group_cached, 1, n, self.n_decoding - n)
        self.planned = self.t
        t1 = self.t + dt
        self.t = t1
        if decode:
            s = self.step
            self.step = s + 1
            if self.ends and self.ends[0][0] <= s:
                self.complete_decodes(s, t1)
        computed = self.reqs.computed
        for rid, new, _ in chunks:
            done = computed[rid] + new
            computed[rid] = done
            if done == target[rid]:
                self.prefilled(rid, t1)

    def spread(self, n: int, chunks: Sequence[Chunk], tokens: int, pairs: float) -> float:
        """The sequences a step's data-parallel work shares out as, under data-parallel
        attention (the step model's `sequences`; the core's attention_load): the step's own,
        each whole on one GPU (a request waiting to start lightens no GPU's step), unless one
        prompt's chunk, which runs on one GPU, is more of the step's tokens or attended pairs
        than the busiest GPU's ceil(spread / ranks) of them would be. Then its GPU is the
        busiest, with that share s of the work: tp x s of the mean GPU's, which 1 / s
        sequences give. A sequence joining the step never lightens its busiest GPU."""
        spread = n + len(chunks)
        ranks = self.dp_ranks
        if ranks == 1 or not chunks:
            return spread
        windows = self.model.windows
        share = max(
            max(new / tokens, sum(attended_pairs(new, c, w) for w in windows) / pairs if pairs else 0.0)
            for _, new, c in chunks
        )
        return 1.0 / share if share * spread > math.ceil(spread / ranks) else spread

    def decode_totals(self) -> tuple[list[float], list[float], list[int]]:
        """Attended pairs and cached tokens of the decoders at this step, per window group,
        and how many tokens a step adds to each (the decoders, or a window's young ones)."""
        n, s = self.n_decoding, self.step
        total = n * s - self.sum_base  # every decoder's context
        pairs, cached, growth = [], [], []
        for young in self.young:
            if young is None:
                pairs.append(total + n / 2)
                cached.append(float(total))
                growth.append(n)
                continue
            young.age(s)
            inside = young.n * s - young.sum_base
            beyond = young.window * (n - young.n)
            pairs.append(inside + young.n / 2 + beyond)
            cached.append(float(inside + beyond))
            growth.append(young.n)
        return pairs, cached, growth

    def record(
        self, dt: float, steps: int, tokens: int, pairs: float, cached: float, emitting: int, paused: int
    ) -> None:
        self.iterations += 1
        if not self.tracing:
            return
        t, d, k, n, run, wait, used, p, c, e, w = self._appends
        e(emitting)
        w(paused)
        t(self.t)
        d(dt)
        k(steps)
        n(tokens)
        run(self.n_decoding + len(self.prefilling))
        wait(len(self.waiting))
        used(self.blocks - self.free_blocks)
        p(pairs)
        c(cached)

    def record_groups(
        self,
        dt: float,
        tokens: int,
        pairs: list[float],
        cached: list[float],
        steps: int,
        emitting: int,
        paused: int,
    ) -> None:
        self.record(dt, steps, tokens, pairs[0], cached[0], emitting, paused)
        if not self.tracing:
            return
        for g in range(1, len(pairs)):
            self.trace.pairs[g].append(pairs[g])
            self.trace.cached[g].append(cached[g])

    # --- a run of decode steps in closed form ------------------------------------------------
    def decode_run_or_step(self, barrier: float) -> None:
        """Decode-only from here: leap over the run of identical steps up to the next
        completion, the blocks left, the first step that would start at or after the next
        arrival (when the queue is empty; a blocked queue stays blocked until a completion,
        unless the policy's quiet_steps says sooner) or the barrier, and the next decoder
        to come of age in a sliding window. Step 0's blocks are already reserved."""
        n = self.n_decoding
        s = self.step
        if self.windowed:
            model = self.model
            pairs_g, cached_g, growth = self.decode_totals()
            compute, memory, f0 = model.terms(n, pairs_g, cached_g)
            grow_c = sum(a * g for a, g in zip(model.pair_s, growth, strict=True))
            grow_m = sum(b * g for b, g in zip(model.cached_s, growth, strict=True))
            k_age = min(y.next_age() for y in self.young if y is not None) - s
        else:
            mean = (n * s - self.sum_base) / n
            pairs = n * attended_pairs(1, mean, 0)
            cached = n * cached_tokens(mean, 0)
            c0, m0, f0 = self.by_tokens.get(n) or self.model.at_tokens(n)
            compute = c0 + self.pair_s0 * pairs
            memory = m0 + self.cached_s0 * cached
            # the lines' growth a step: the pairs' and cached tokens' growth at each slope
            grow_c = self.pair_s0 * (n * attended_pairs(1, mean + 1, 0) - pairs)
            grow_m = self.cached_s0 * (n * cached_tokens(mean + 1, 0) - cached)
            k_age = math.inf
        host = self.model.host_floor(n)  # the host's work a step: the run's floor
        dt = (compute if compute > memory else memory) + f0  # step 0
        if host > dt:
            dt = host
        r = self.reqs
        ends = self.ends
        state, last_step = r.state, r.last_step
        last, rid = ends[0]
        while state[rid] != DECODE or last_step[rid] != last:
            heapq.heappop(ends)  # stale: preempted since
            last, rid = ends[0]
        k = last - s + 1
        if k > k_age:
            k = int(k_age)
        if self.locked and k > self.locked:
            k = self.locked  # the run's steps left: the scheduler plans the next at its end
        if k > 1:
            delta = barrier - self.t
            if not self.locked and not self.waiting and self.next < len(self.pending):
                arrival = r.arrival_s[self.pending[self.next]]
                if arrival < barrier:
                    delta = arrival - self.t
            if dt >= delta:
                k = 1
            elif k - 1 > self.free_blocks // n * self.block_tokens:  # block_steps' quick answer
                k = self.block_steps(k)
            if k > 1 and self.waiting and self.quiet_steps is not None and not self.locked:
                k = self.quiet_steps(self, k)  # the policy may admit the queue's head sooner
        if k > 1:
            run = DecodeRun(compute, grow_c, memory, grow_m, f0, host)  # the run's two lines, its floor
            if delta < math.inf:
                k, elapsed = run.steps_and_elapsed(delta, k)
            else:
                elapsed = run.elapsed_s(k)
            if k > 1:
                dt = elapsed
                fresh = self.blocks_over(1, k)
                self.free_blocks -= fresh
                self.taken += fresh
        if self.windowed:  # each group's terms at the run's middle step: their mean over it
            mid = (k - 1) / 2.0
            pairs_g = [p + g * mid for p, g in zip(pairs_g, growth, strict=True)]
            cached_g = [c + g * mid for c, g in zip(cached_g, growth, strict=True)]
            self.record_groups(dt, n, pairs_g, cached_g, k, n, 0)
        else:
            if k > 1:
                mean += (k - 1) / 2.0
                pairs = n * attended_pairs(1, mean, 0)
                cached = n * cached_tokens(mean, 0)
            self.record(dt, k, n, pairs, cached, n, 0)
        # the run's last step started after the k - 1 before it
        self.planned = self.t + (run.elapsed_s(k - 1) if self.overlap and k > 1 else 0.0)
        t = self.t + dt
        self.t = t
        self.step = s + k
        if last < s + k:
            self.complete_decodes(s + k - 1, t)

    def block_steps(self, k: int) -> int:
        """The most steps (<= k) whose fresh blocks fit; any bs consecutive steps take one
        block per decoder."""
        n, bs, free = self.n_decoding, self.block_tokens, self.free_blocks
        cycles = free // n
        if (k - 1) <= cycles * bs:
            return k
        room = free - cycles * n
        j = cycles * bs
        while True:
            more = self.cnt[(self.step + j + 1) % bs]
            if more > room:
                return min(k, j + 1)
            room -= more
            j += 1

    def blocks_over(self, first: int, last: int) -> int:
        """Fresh blocks the decoders take over steps first .. last - 1 (counted from now)."""
        length = last - first
        if length <= 0:
            return 0
        bs = self.block_tokens
        total = length // bs * self.n_decoding
        part = length % bs  # the residues of a part cycle: a slice of cnt, or two
        if part:
            cnt = self.cnt
            start = (self.step + first) % bs
            end = start + part
            total += sum(cnt[start:end]) if end <= bs else sum(cnt[start:]) + sum(cnt[: end - bs])
        return total

    # --- sequences joining, leaving and finishing ------------------------------------------
    def prefilled(self, rid: int, t: float) -> None:
        """A (re)prefill reached its target: its last position emits a token."""
        r = self.reqs
        self.prefilling.remove(rid)
        emitted = r.emitted[rid] + 1
        if emitted == 1:
            r.first_s[rid] = t
        left = r.output[rid] + 1 - emitted  # decode steps still to run
        if left == 0:
            self.free_blocks += r.held[rid]
            self.finish(rid, t)
            return
        s = self.step  # the first step it decodes in
        base = s - r.computed[rid]
        r.state[rid] = DECODE
        r.base[rid] = base
        r.first_step[rid] = s
        r.last_step[rid] = s + left - 1
        self.n_decoding += 1
        self.sum_base += base
        self.sum_end += r.prompt[rid] + r.output[rid]
        self.cnt[base % self.block_tokens] += 1
        if self.windowed:
            for young in self.young:
                if young is not None:
                    young.join(base, s)
        heapq.heappush(self.ends, (s + left - 1, rid))
        heapq.heappush(self.victims, (-r.seq[rid], rid))
        if len(self.victims) > 2 * self.n_decoding + 64:
            self.drop_stale_victims()

    def drop_stale_victims(self) -> None:
        """Keep only the live decoders' entries in the victims heap: each decoder that
        finished or was preempted leaves one behind, and a heap of every request ever
        admitted grows with the run, and each push and each walk for a victim with it."""
        r = self.reqs
        state, seq = r.state, r.seq
        live = [
            (neg_seq, rid) for neg_seq, rid in self.victims if state[rid] == DECODE and seq[rid] == -neg_seq
        ]
        heapq.heapify(live)
        self.victims = live

    def preempt(self, rid: int) -> None:
        """Preempt by recompute: free the request's blocks and queue it at the head to prefill
        its prompt plus the tokens it has emitted (the last prefill position emits the next)."""
        r = self.reqs
        blocks = self.held_blocks(rid)
        if self.cached is not None:
            tokens = self.step - r.base[rid] if r.state[rid] == DECODE else r.computed[rid]
            self.cached[rid] = (self.taken, self.free_blocks, blocks, tokens)
        self.free_blocks += blocks
        if r.state[rid] == DECODE:
            r.emitted[rid] += 1 + (self.step - r.first_step[rid])
            self.leave_decode(rid)
        else:
            self.prefilling.remove(rid)
        r.state[rid] = WAITING
        r.target[rid] = r.prompt[rid] + r.emitted[rid]
        r.computed[rid] = r.hit[rid]
        r.held[rid] = 0
        r.preemptions[rid] += 1
        self.preemptions += 1
        if self.requeue_at_head:
            self.waiting.appendleft(rid)
        else:
            self.waiting.append(rid)

    def leave_decode(self, rid: int) -> None:
        r = self.reqs
        base = r.base[rid]
        self.n_decoding -= 1
        self.sum_base -= base
        self.sum_end -= r.prompt[rid] + r.output[rid]
        self.cnt[base % self.block_tokens] -= 1
        if self.windowed:
            for young in self.young:
                if young is not None:
                    young.leave(base, self.step)

    def complete_decodes(self, s: int, t: float) -> None:
        """Decoders whose last step was s finish at t and free their blocks."""
        ends, r, bs = self.ends, self.reqs, self.block_tokens
        state, last_step = r.state, r.last_step
        while ends and ends[0][0] <= s:
            last, rid = heapq.heappop(ends)
            if state[rid] != DECODE or last_step[rid] != last:
                continue
            context = s + 1 - r.base[rid]
            self.free_blocks += -(-(context - r.spared[rid]) // bs)
            self.leave_decode(rid)
            self.finish(rid, t)

    def finish(self, rid: int, t: float) -> None:
        self.reqs.state[rid] = DONE
        if self.locked:
            self.unreleased.append(rid)  # done when the run is
            return
        self.release(rid, t)

    def release(self, rid: int, t: float) -> None:
        """The request's last token reaches its client at t: it is done."""
        self.reqs.finish_s[rid] = t
        self.finished.append(t)
        self.done.append(rid)
        if self.follow_up is not None:
            nxt = self.follow_up(rid, t)
            if nxt is not None:
                self.add(nxt)
