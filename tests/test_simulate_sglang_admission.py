"""SGLang's admission and retraction in the simulator (scheduler.SglangPolicy): "it admits
against a reserve for what is still to be written: the KV tokens free, less new_token_ratio
times each decoder's tokens still to write, less each request admitted in this batch's prompt
and whole max_new_tokens"; "new_token_ratio starts at 0.7, falls by (0.7 - 0.098) / 600 each
decode step to 0.098"; a retraction takes "the decoders that have written least (of those,
the longest prompts first), at least one, until the rest have room for 20 steps each; they
rejoin the queue's tail", and the ratio becomes "the kept decoders' tokens written plus 20
steps each over their max_new_tokens". Each expectation is worked out here from those rules,
and each time from the core's step price."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from conftest import price_s
from ridgeline.deployment import Deployment
from ridgeline.simulate import scheduler
from ridgeline.simulate.engine import Engine, EngineConfig
from ridgeline.simulate.kvcache import KvCache
from ridgeline.simulate.policy import SchedulerView, StepPlan
from ridgeline.simulate.requests import DECODE, Requests
from ridgeline.simulate.run import simulate, step_model
from ridgeline.simulate.workload import Lengths, Workload

REL = 1e-9
BLOCK = 16
DECAY = (0.7 - 0.7 * 0.14) / 600  # SGLang's new_token_ratio decay per decode step


@pytest.fixture(scope="module")
def m() -> Deployment:
    return Deployment.build("llama-3.1-8b", "h100-sxm", engine="sglang")


def engine(m: Deployment, blocks: int, requests: list[tuple[float, int, int]], policy: str) -> Engine:
    """One replica with a cache of exactly `blocks` blocks, these (arrival, prompt, output)."""
    reqs = Requests()
    e = Engine(reqs, step_model(m), EngineConfig(policy=policy), KvCache(BLOCK, blocks, 0.0, 0.0))
    for arrival, prompt, output in requests:
        e.add(reqs.add(arrival, prompt, output))
    return e


def test_a_request_waits_until_the_decoders_reserve_leaves_room_for_its_whole_life(m: Deployment) -> None:
    """A (1,000 in, 1,000 out) and B (1,000 in, 600 out) arrive together at a cache of 200
    blocks (3,200 tokens). A's batch reserves A's prompt and its 1,001 tokens to write, which
    leaves 1,199 and not B's 1,601. Then before each decode step k, B sees the free tokens
    less the ratio at k times A's 1,000 - k still to write; it is admitted at the first k
    where that passes 1,601, and A sits out its prefill."""
    prompt, out_a, out_b, blocks = 1000, 1000, 600, 200
    assert prompt + out_b + 1 >= blocks * BLOCK - (prompt + out_a + 1)  # not in A's batch
    k = 0
    while True:
        ratio = max(0.7 - DECAY * k, 0.7 * 0.14)
        free_tokens = (blocks - math.ceil((prompt + k) / BLOCK)) * BLOCK
        if prompt + out_b + 1 < free_tokens - ratio * (out_a - k):
            break
        k += 1
    assert k == 213
    e = engine(m, blocks, [(0.0, prompt, out_a), (0.0, prompt, out_b)], "sglang")
    e.run_until()
    r = e.reqs
    first_a = price_s(m, [(prompt, 0)], 1)
    admit_b = first_a + sum(price_s(m, [(1, prompt + j)], 1) for j in range(k))
    assert r.first_s[0] == pytest.approx(first_a, rel=REL)
    assert r.admit_s[1] == pytest.approx(admit_b, rel=REL)
    assert r.first_s[1] == pytest.approx(admit_b + price_s(m, [(prompt, 0)], 1), rel=REL)
    # the two lives (125 and 100 blocks) overfill the 200: when the decoders' next blocks
    # do not fit, B, which has written less, is retracted, once
    assert r.preemptions == [0, 1]
    # vLLM's policy admits both at once: their prompts' blocks fit
    v = engine(m, blocks, [(0.0, prompt, out_a), (0.0, prompt, out_b)], "vllm")
    v.run_until()
    assert v.reqs.admit_s == [0.0, 0.0]


class View:
    """A replica's state set by hand: decoders given as (prompt, output, context, admission)."""

    def __init__(self, step_counter: int, free_blocks: int, decoders: list[tuple[int, int, int, int]]):
        self.reqs = Requests()
        self.step = step_counter
        self.block_tokens = BLOCK
        self.blocks = 10_000
        self.free_blocks = free_blocks
        self.finished: list[float] = []
        self.done: list[int] = []
        self.prefilling: list[int] = []
        self.waiting: list[int] = []
        self.max_num_seqs = 1024
        self.max_num_batched_tokens = 8192
        self.max_chunk_tokens = 8192  # one rank: a chunk may take the whole budget
        self.dp_ranks = 1
        for prompt, output, context, admitted in decoders:
            rid = self.reqs.add(0.0, prompt, output)
            self.reqs.state[rid] = DECODE
            self.reqs.base[rid] = step_counter - context
            self.reqs.seq[rid] = admitted
        self.n_decoding = len(decoders)

    def context(self, rid: int) -> int:
        return self.step - self.reqs.base[rid]

    def decode_blocks(self) -> int:
        return sum(self.takes_block(rid) for rid in range(self.n_decoding))

    def takes_block(self, rid: int) -> bool:
        return self.context(rid) % BLOCK == 0

    def held_blocks(self, rid: int) -> int:
        return math.ceil(self.context(rid) / BLOCK)

    def decoders(self) -> list[int]:
        return list(range(self.n_decoding))

    def latest_decoders(self) -> Iterator[int]:
        return iter(sorted(range(self.n_decoding), key=lambda rid: -self.reqs.seq[rid]))

    def blocks_over(self, first: int, last: int) -> int:  # every decoder's next block takes one
        return sum(
            (self.context(rid) + j) % BLOCK == 0 for j in range(first, last) for rid in range(self.n_decoding)
        )

    def decode_tokens_left(self) -> int:
        r = self.reqs
        return sum(r.prompt[i] + r.output[i] - self.context(i) for i in range(self.n_decoding))


def test_a_retraction_takes_the_fewest_written_then_the_longest_prompts_until_twenty_steps_fit() -> None:
    """Four decoders and no block free for r0's next token. Written so far (context - prompt
    + 1): r0 301, r3 31, r1 and r2 11 each, r1 with the longer prompt. r1 leaves first (3
    blocks: 48 tokens, under 20 steps x 3 kept); then r2 (2 more: 80 tokens, over 20 x 2). The
    ratio becomes (301 + 31 + 20 x 2) / (1,001 + 1,001 + 1)."""
    view = View(
        1000,
        0,
        [(100, 1000, 400, 1), (30, 1000, 40, 2), (20, 1000, 30, 3), (200, 1000, 230, 4)],
    )
    assert view.decode_blocks() == 1  # r0's context 400 fills its 25th block
    policy = scheduler.SglangPolicy()
    policy.left_waiting = True  # a busy engine: no idle restart
    preempt, chunks, decode = policy.schedule(view)
    assert list(preempt) == [1, 2]
    assert (list(chunks), decode) == ([], True)
    view.step += 1  # the step it planned: the ratio has not fallen in it
    assert policy.new_token_ratio(view.step) == pytest.approx((301 + 31 + 40) / (1001 + 1001 + 1), rel=REL)
    view.step += 10
    assert policy.new_token_ratio(view.step) == pytest.approx((301 + 31 + 40) / 2003 - 10 * DECAY, rel=REL)


def test_the_ratio_falls_each_decode_step_to_its_floor_and_starts_again_when_the_engine_idles() -> None:
    policy = scheduler.SglangPolicy()
    busy = View(300, 100, [(100, 1000, 400, 1)])
    assert policy.new_token_ratio(busy.step) == pytest.approx(0.7 - 300 * DECAY, rel=REL)
    busy.step = 5000
    assert policy.new_token_ratio(busy.step) == pytest.approx(0.098, rel=REL)
    idle = View(5000, 100, [])
    idle.waiting = [idle.reqs.add(0.0, 100, 10)]
    policy.schedule(idle)  # a request arrives at an idle engine
    assert policy.new_token_ratio(idle.step) == pytest.approx(0.7, rel=REL)


@pytest.mark.parametrize(("output", "admitted"), [(900, True), (950, False)])
def test_a_decoder_reserves_at_most_4096_future_tokens(output: int, admitted: bool) -> None:
    """One decoder with 10,000 tokens still to write holds back 0.7 x 4,096 = 2,867.2 of 300
    free blocks' 4,800 tokens, leaving 1,932.8: a 1,000-token prompt with 901 tokens to write
    (1,901) joins a prefill batch; with 951 (1,951) it waits. Unclipped, the reserve (7,000)
    would leave no room for either."""
    view = View(0, 300 + 7, [])
    view.waiting = [view.reqs.add(0.0, 100, 10_000)]
    policy = scheduler.SglangPolicy()
    assert policy.schedule(view) == ((), [(0, 100, 0)], False)  # admitted, and prefilled:
    view.waiting, view.free_blocks, view.n_decoding = [], 300, 1
    view.reqs.state[0], view.reqs.base[0] = DECODE, -100
    view.waiting = [view.reqs.add(0.0, 1000, output)]
    preempt, chunks, decode = policy.schedule(view)
    assert list(preempt) == []
    if admitted:
        assert (list(chunks), decode) == ([(1, 1000, 0)], False)
    else:
        assert (list(chunks), decode) == ([], True)


class Probe(scheduler.SglangPolicy):
    """SGLang's policy, checking at each plan what the engine tells it: the decoders' tokens
    still to write, and where the requests it retracted went."""

    made: list[Probe] = []  # noqa: RUF012 (every probe the engine made, for the test to read)

    def __init__(self) -> None:
        super().__init__()
        self.retractions = 0
        self.last: list[int] = []
        Probe.made.append(self)

    def schedule(self, view: SchedulerView) -> StepPlan:
        r = view.reqs
        left = sum(
            r.prompt[i] + r.output[i] - (view.step - r.base[i]) for i in range(len(r)) if r.state[i] == DECODE
        )
        assert view.decode_tokens_left() == left
        if self.last:  # they rejoined the queue at its tail, in the order they left
            assert list(view.waiting)[-len(self.last) :] == self.last
        plan = super().schedule(view)
        self.last = list(plan[0])
        self.retractions += len(plan[0])
        return plan


def test_under_pressure_sglang_retracts_far_fewer_than_vllm_preempts(monkeypatch: pytest.MonkeyPatch) -> None:
    """70B in fp8 on two H100s, 2,000 in and 1,500 out at 50 requests/s: the cache holds a few
    dozen lives. vLLM admits on today's blocks and preempts; SGLang's reserve admits fewer,
    and the retractions it still makes rejoin the queue's tail."""
    monkeypatch.setitem(scheduler.POLICIES, "probe", Probe)
    Probe.made.clear()
    tight = Deployment.build("llama-3.1-70b", "h100-sxm", weights="fp8", tp=2)
    fixed = Lengths("fixed", 2000), Lengths("fixed", 1500)
    work = Workload(prompt=fixed[0], output=fixed[1], rate_per_s=50.0, requests=200, duration_s=None)
    runs = {p: simulate(tight, work, engine=EngineConfig(policy=p)) for p in ("vllm", "probe")}
    (probe,) = Probe.made
    assert probe.retractions == runs["probe"].summary.preemptions > 0
    assert runs["probe"].summary.completed == 200
    assert runs["probe"].summary.preemptions < runs["vllm"].summary.preemptions / 2
