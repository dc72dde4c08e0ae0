"""The iteration-level scheduler policies, by name; vLLM's is the default, TensorRT-LLM's
guaranteed-no-evict (NoEvictPolicy) and SGLang's prefill-first steps with its reserve for
future tokens (SglangPolicy) are the others, below.

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

With chunked prefill off (`EngineConfig.chunked_prefill`, every policy), a prefill is never
split across steps: a waiting request is admitted only when the whole of what it has to
prefill fits the step's budget left. vLLM's V1 scheduler then passes over one that does not
and admits the shorter ones behind it that do (it keeps its place at the head); SGLang's
and TensorRT-LLM's stop at it, so everyone behind it waits too. Blocks and the sequence
limit stop the queue under every policy. run.check_whole_prefills refuses a run in which
some request's prefill could never fit a whole step.

Under data-parallel attention each request runs on one of the replica's GPUs (ranks), so
one request's chunk takes at most a rank's budget (`max_chunk_tokens`), and SGLang's prefill
batch holds one unfinished chunked prefill a rank (`dp_ranks`); engine.replica_limits says
whose the limits are.
"""

from __future__ import annotations

from typing import Any

from ridgeline.simulate.policy import Chunk, Policy, SchedulerView, StepPlan
from ridgeline.simulate.requests import DECODE, DONE


class VllmPolicy:
    """vLLM's scheduler: decodes first, preemption by recompute of the latest admitted,
    chunked prefill within the token budget, first come, first served admission."""

    recomputes = True  # a preempted request prefills its prompt and what it wrote again

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
        budget = view.max_num_batched_tokens - decoding
        cap = view.max_chunk_tokens
        chunks: list[Chunk] = []
        computed, target, held, spared = r.computed, r.target, r.held, r.spared
        i = 0
        while i < end and budget > 0:
            rid = prefilling[i]
            c = computed[rid]
            n = min(target[rid] - c, cap)
            if n > budget:
                n = budget
            fit = (held[rid] + free) * bs + spared[rid] - c  # tokens the free blocks can take
            while fit <= 0:
                end -= 1
                victim = prefilling[end]
                preempt.append(victim)
                free += held[victim]
                if victim == rid:
                    break
                fit = (held[rid] + free) * bs + spared[rid] - c
            if fit <= 0:
                continue  # it preempted itself: end is now i
            if n > fit:
                n = fit
            free -= -(-(c + n - spared[rid]) // bs) - held[rid]
            chunks.append((rid, n, c))
            budget -= n
            i += 1
        if preempt:
            return preempt, chunks, True
        # first come, first served: admit from the head of the queue while everything fits
        running = decoding + end
        limit = view.max_num_seqs
        if budget > 0 and running < limit:
            whole = not view.chunked_prefill
            for rid in view.waiting:
                c = computed[rid]
                n = target[rid] - c
                if n > budget or n > cap:
                    if whole:
                        continue  # it waits, keeping its place, and a shorter one behind may go
                    n = min(budget, cap)
                blocks = -(-(c + n - spared[rid]) // bs)
                if blocks > free:
                    break
                free -= blocks
                chunks.append((rid, n, c))
                budget -= n
                running += 1
                if budget <= 0 or running >= limit:
                    break
        return (), chunks, True

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


# SGLang's admission arithmetic at its defaults (--schedule-conservativeness 1; global_config
# and envs, managers/schedule_policy.py and schedule_batch.py, 0.4 to 0.5)
def token_ratios(conservativeness: float = 1.0) -> tuple[float, float, float]:
    """new_token_ratio's start, floor and fall a decode step, as SGLang's scheduler sets them
    from --schedule-conservativeness: 0.7 x it (SGLANG_INIT_NEW_TOKEN_RATIO), 0.14 x that
    (SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR), the difference over 600 decode steps."""
    start = min(0.7 * conservativeness, 1.0)
    floor = min(start * 0.14, 1.0)
    return start, floor, (start - floor) / 600


INIT_NEW_TOKEN_RATIO, MIN_NEW_TOKEN_RATIO, NEW_TOKEN_RATIO_DECAY = token_ratios()
# --enable-dp-attention multiplies --schedule-conservativeness by 0.3 (ServerArgs)
DP_CONSERVATIVENESS = 0.3
RETRACT_DECODE_STEPS = 20  # a retraction leaves room for this many steps of the decoders kept
CLIP_MAX_NEW_TOKENS = 4096  # SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION: one request's reserve at most


def max_new_reserved(output: int) -> int:
    """What SGLang reserves for a request's max_new_tokens (the output + 1 tokens it emits)."""
    return min(output + 1, CLIP_MAX_NEW_TOKENS)


class SglangPolicy:
    """SGLang's default scheduler (managers/scheduler.py, get_next_batch_to_run, with
    --enable-mixed-chunk off): a step is either a prefill ("extend") batch or a decode step,
    never both. Whenever a prefill batch can be formed it runs first, alone, and the decoding
    sequences emit nothing while it runs; otherwise every decoding sequence runs one step.

    A prefill batch (PrefillAdder) takes the unfinished chunked prefill's next chunk, then
    waiting requests first come, first served, within --chunked-prefill-size tokens
    (max_num_batched_tokens) and --max-running-requests (max_num_seqs). It admits against a
    reserve for what is still to be written: the KV tokens free, less new_token_ratio times
    each decoder's tokens still to write (at most 4,096 each), less each request admitted in
    this batch's prompt and whole max_new_tokens. A request whose prompt and max_new_tokens do
    not fit what is left waits, and so does every request behind it.

    new_token_ratio starts at 0.7, falls by (0.7 - 0.098) / 600 each decode step to 0.098, and
    starts again at 0.7 whenever the engine idles (under --enable-dp-attention 0.3 times each:
    0.21 to 0.0294). When a decode step's fresh KV does not fit,
    SGLang retracts (retract_decode) the decoders that have written least (of those, the
    longest prompts first), at least one, until the rest have room for 20 steps each; they
    rejoin the queue's tail to prefill again, and the ratio becomes the kept decoders' tokens
    written plus 20 steps each over their max_new_tokens (at most 1). So SGLang admits fewer
    requests than vLLM early in a run and preempts fewer.

    Not modelled: the radix cache's evictable tokens (this simulator's prefix cache is its
    shared blocks) and --max-prefill-tokens (16,384 by default, above the chunk size). With
    nothing running, the queue's head is admitted whenever its blocks fit, where SGLang would
    refuse a request whose prompt and max_new_tokens fill the whole pool."""

    requeue_at_head = False  # a retracted request rejoins the queue at its tail
    recomputes = True  # a retracted request prefills its prompt and what it wrote again

    def __init__(self) -> None:
        self.init, self.floor, self.decay = INIT_NEW_TOKEN_RATIO, MIN_NEW_TOKEN_RATIO, NEW_TOKEN_RATIO_DECAY
        self.scaled = False  # whether the ratios have been set for the replica's ranks
        self.ratio_set = INIT_NEW_TOKEN_RATIO  # new_token_ratio as last set, ...
        self.set_at = 0  # ... at this step counter: it has fallen one decay a decode step since
        self.left_waiting = False  # whether the last plan left a request in the queue
        self.long: set[int] = set()  # admitted requests that may write more than the clip

    def conservativeness(self, view: SchedulerView) -> None:
        """Under data-parallel attention SGLang admits less conservatively: its ratios start
        at 0.3 x theirs (DP_CONSERVATIVENESS), once, before the replica's first plan."""
        if self.scaled:
            return
        self.scaled = True
        if view.dp_ranks > 1:
            self.init, self.floor, self.decay = token_ratios(DP_CONSERVATIVENESS)
            self.ratio_set = self.init

    def new_token_ratio(self, step: int) -> float:
        """The ratio as the step at this step counter starts."""
        fallen = self.decay * max(0, step - self.set_at)
        return max(self.ratio_set - fallen, self.floor)

    def to_write(self, view: SchedulerView) -> int:
        """The decoders' tokens still to write, each clipped at CLIP_MAX_NEW_TOKENS."""
        left = view.decode_tokens_left()
        r = view.reqs
        for rid in list(self.long):
            if r.state[rid] == DONE:
                self.long.discard(rid)
            elif r.state[rid] == DECODE:
                to_write = r.prompt[rid] + r.output[rid] - (view.step - r.base[rid])
                left -= max(0, to_write - CLIP_MAX_NEW_TOKENS)
        return left

    def room(self, free_blocks: int, block_tokens: int, step: int, to_write: float) -> float:
        """rem_total_tokens: the KV tokens free less the ratio at this step times the
        decoders' tokens still to write."""
        return free_blocks * block_tokens - self.new_token_ratio(step) * to_write

    def schedule(self, view: SchedulerView) -> StepPlan:
        self.conservativeness(view)
        if not (view.n_decoding or view.prefilling or self.left_waiting):  # it idled
            self.ratio_set, self.set_at = self.init, view.step
        chunks, admitted = self.prefill_batch(view)
        if chunks:
            self.left_waiting = len(view.waiting) > admitted
            return (), chunks, False
        retract = self.retract(view) if view.decode_blocks() > view.free_blocks else []
        self.left_waiting = bool(view.waiting or retract)
        return retract, (), True

    def quiet_steps(self, view: SchedulerView, most: int) -> int:
        """Decode-only steps that may run, from the one about to, before the queue's head
        could be admitted: the first k < `most` at whose start it would pass the reserve,
        the decoders k tokens further on, their blocks taken and the ratio fallen k steps;
        else `most` (a full --max-running-requests, or blocks too few, which only shrink,
        wait for a finish). A decoder whose reserve is clipped: 1, ask at every step."""
        self.conservativeness(view)
        if view.n_decoding + len(view.prefilling) >= view.max_num_seqs:
            return most
        r = view.reqs
        if any(r.state[rid] == DECODE for rid in self.long):
            return 1
        rid = view.waiting[0]
        bs, c = view.block_tokens, r.computed[rid]
        n = r.target[rid] - c
        need = n + max_new_reserved(r.output[rid])
        whole = n <= view.max_chunk_tokens
        left, decoders = self.to_write(view), view.n_decoding
        free = view.free_blocks  # as the step at k starts: fewer by the blocks of steps 1 .. k-1
        if need >= free * bs - self.floor * (left - decoders * (most - 1)):
            return most  # not even the most room the run could leave
        for k in range(1, most):
            if k > 1:
                free -= view.blocks_over(k - 1, k)
            fit = free * bs + r.spared[rid] - c
            if (n > fit) if whole else (fit <= 0):
                return most
            if need < self.room(free, bs, view.step + k, left - decoders * k):
                return k
        return most

    def prefill_batch(self, view: SchedulerView) -> tuple[list[Chunk], int]:
        """The chunks of the next prefill batch, and how many waiting requests it admits."""
        if not (view.waiting or view.prefilling):
            return [], 0
        r = view.reqs
        bs = view.block_tokens
        free = view.free_blocks
        room = self.room(free, bs, view.step, self.to_write(view))
        budget = view.max_num_batched_tokens
        cap = view.max_chunk_tokens
        computed, target, held, spared = r.computed, r.target, r.held, r.spared
        chunks: list[Chunk] = []
        partial = 0  # chunked prefills this batch leaves unfinished: one a rank
        for rid in view.prefilling:  # the chunked prefills carry on first
            c = computed[rid]
            n = min(target[rid] - c, budget, cap, int(room), (held[rid] + free) * bs + spared[rid] - c)
            if n <= 0:
                continue
            free -= -(-(c + n - spared[rid]) // bs) - held[rid]
            room -= n + (max_new_reserved(r.output[rid]) if c + n == target[rid] else 0)
            budget -= n
            chunks.append((rid, n, c))
            partial += c + n < target[rid]
        running = view.n_decoding + len(view.prefilling)
        idle = not running
        admitted = 0
        for rid in view.waiting:
            if running >= view.max_num_seqs or budget <= 0:
                break
            c = computed[rid]
            n = target[rid] - c
            new = max_new_reserved(r.output[rid])  # reserved whole
            if n + new >= room and not (idle and not chunks):
                break
            whole = n <= budget and n <= cap
            if not (whole or view.chunked_prefill) or (not whole and partial >= view.dp_ranks):
                break  # it waits for a batch with room for all of it, or for a rank of its own
            n = min(n, budget, cap, free * bs + spared[rid] - c)
            if n <= 0 or (whole and n < target[rid] - c):
                break  # its blocks are not free
            free -= -(-(c + n - spared[rid]) // bs)
            room -= n + (new if whole else 0)
            budget -= n
            chunks.append((rid, n, c))
            running += 1
            admitted += 1
            if r.output[rid] + 1 > CLIP_MAX_NEW_TOKENS:
                self.long.add(rid)
            if not whole:
                partial += 1
                if partial >= view.dp_ranks:
                    break  # the batch's chunked prefill (one a rank) ends it
        return chunks, admitted

    def retract(self, view: SchedulerView) -> list[int]:
        """retract_decode: the decoders that have written least (then the longest prompts)
        leave, at least one, until the rest have room for RETRACT_DECODE_STEPS steps each;
        new_token_ratio becomes what the rest have written plus those steps, over their
        max_new_tokens."""
        r = view.reqs
        step, bs = view.step, view.block_tokens

        def written(rid: int) -> int:  # output tokens so far: the prefill's and one a step
            return step - r.base[rid] - r.prompt[rid] + 1

        # SGLang's order, its batch's (admission) order among equals: the last leaves first
        kept = sorted(
            view.decoders(), key=lambda rid: (written(rid), -r.prompt[rid], -r.seq[rid]), reverse=True
        )
        need, free = view.decode_blocks(), view.free_blocks
        retract: list[int] = []
        while len(kept) > 1:
            victim = kept.pop()
            retract.append(victim)
            free += view.held_blocks(victim)
            need -= view.takes_block(victim)
            if free * bs >= RETRACT_DECODE_STEPS * len(kept) and need <= free:
                break
        for victim in reversed(view.prefilling):  # a chunked prefill holding the last block
            if need <= free:
                break
            retract.append(victim)
            free += view.held_blocks(victim)
        ratio = (sum(written(rid) for rid in kept) + RETRACT_DECODE_STEPS * len(kept)) / (
            sum(r.output[rid] + 1 for rid in kept) + 1
        )
        self.ratio_set, self.set_at = min(1.0, ratio), step + 1  # its own step does not decay it
        return retract


class NoEvictPolicy:
    """TensorRT-LLM's GUARANTEED_NO_EVICT capacity scheduler: a request is admitted only when
    the blocks of its whole life (prompt and every output token) fit beside those already
    promised to the running requests, so nothing is ever preempted. It admits fewer requests
    than vLLM's on the same cache (the promise counts blocks not yet written), and never
    recomputes one. Prefills are chunked within the token budget as in vLLM's, first come,
    first served; the decoders' blocks always fit, being promised."""

    recomputes = False  # nothing is preempted

    def __init__(self) -> None:
        self.promised = 0  # the blocks of the whole lives of the admitted requests not yet finished
        self.life: dict[int, int] = {}  # each one's
        self.seen = 0  # finishes accounted for

    @staticmethod
    def blocks_for_life(view: SchedulerView, rid: int) -> int:
        r = view.reqs
        return -(-(r.prompt[rid] + r.output[rid] - r.spared[rid]) // view.block_tokens)

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
        cap = view.max_chunk_tokens
        computed, target, held, spared = r.computed, r.target, r.held, r.spared
        chunks: list[Chunk] = []
        for rid in view.prefilling:
            if budget <= 0:
                break
            c = computed[rid]
            n = min(target[rid] - c, budget, cap)
            free -= -(-(c + n - spared[rid]) // bs) - held[rid]
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
            n = target[rid] - c
            if n > budget or n > cap:
                if not view.chunked_prefill:
                    break  # it waits for a step with room for all of it
                n = min(budget, cap)
            free -= -(-(c + n - spared[rid]) // bs)
            spare -= life
            self.promised += life
            self.life[rid] = life
            chunks.append((rid, n, c))
            budget -= n
            running += 1
        assert free >= 0, "promised blocks ran out: a no-evict accounting bug"
        return (), chunks, True


POLICIES: dict[str, type[Policy]] = {"vllm": VllmPolicy, "no-evict": NoEvictPolicy, "sglang": SglangPolicy}


def whole_prefill_tokens(policy: str, new_tokens: Any, output: Any) -> Any:
    """The tokens one step must hold, with chunked prefill off, to prefill a request whole:
    its new prompt tokens (less its prefix-cache hit) and, under a policy that preempts by
    recompute (vLLM's, SGLang's), every output token it may have written by then. Numbers
    or arrays of them."""
    return new_tokens + output if getattr(POLICIES[policy], "recomputes", True) else new_tokens
