"""The engine's bookkeeping that keeps a step cheap: the victims of a preemption in admission
order, no-evict's promise released as requests finish, a run judged on its requests alone
without step rows, and the step model's memo reading the core as a fresh call would."""

from __future__ import annotations

import heapq
import math
import random

import pytest

from ridgeline import ledger, step
from ridgeline.deployment import Deployment
from ridgeline.simulate import steptime
from ridgeline.simulate.engine import Engine, EngineConfig
from ridgeline.simulate.kvcache import kv_cache
from ridgeline.simulate.requests import DECODE, DONE, Requests
from ridgeline.simulate.run import simulate
from ridgeline.simulate.steptime import PROBE, DecodeRun, StepModel
from ridgeline.simulate.workload import Lengths, Workload


@pytest.fixture(scope="module")
def small() -> Deployment:
    return Deployment.build("llama-3.1-8b", "h100-sxm")


def engine_with_decoders(m: Deployment, admitted: list[int], live: set[int]) -> Engine:
    """An engine whose victims heap holds `admitted` (admission order = position), of which
    only `live` still decode: the others finished and left their entries behind."""
    reqs = Requests()
    for _ in admitted:
        reqs.add(0.0, 100, 10)
    cfg = EngineConfig()
    e = Engine(reqs, StepModel(m), cfg, kv_cache(m))
    for seq, rid in enumerate(admitted, start=1):
        reqs.seq[rid] = seq
        reqs.state[rid] = DECODE if rid in live else DONE
        heapq.heappush(e.victims, (-seq, rid))
    return e


def test_preemption_takes_the_latest_admitted_decoder_then_the_next(small: Deployment) -> None:
    """vLLM preempts the most recently admitted running request first: the view yields the
    live decoders latest first, skipping those that have finished."""
    rng = random.Random(3)
    admitted = list(range(200))
    rng.shuffle(admitted)
    live = set(rng.sample(admitted, 60))
    e = engine_with_decoders(small, admitted, live)
    latest_first = [rid for rid in reversed(admitted) if rid in live]
    assert list(e.latest_decoders()) == latest_first


def test_the_victims_heap_keeps_only_live_decoders(small: Deployment) -> None:
    e = engine_with_decoders(small, list(range(50)), live={3, 7, 41})
    e.drop_stale_victims()
    assert sorted(rid for _, rid in e.victims) == [3, 7, 41]
    assert list(e.latest_decoders()) == [41, 7, 3]


def test_no_evict_promises_again_what_finished_requests_held(small: Deployment) -> None:
    """Every admitted request's whole life is promised until it finishes; at the end of a
    run nothing is promised."""
    w = Workload(
        prompt=Lengths("fixed", 1500), output=Lengths("lognormal", 300, 0.5), rate_per_s=40.0, requests=400
    )
    r = simulate(small, w, engine=EngineConfig(policy="no-evict"))
    (engine,) = r.engines
    assert r.summary is not None and r.summary.completed == 400
    engine.policy.release_finished(engine)  # type: ignore[attr-defined]
    assert engine.policy.promised == 0  # type: ignore[attr-defined]
    assert engine.policy.life == {}  # type: ignore[attr-defined]
    assert sorted(engine.done) == list(range(400))


def test_a_run_judged_on_its_requests_alone_keeps_no_step_rows_and_the_same_times(small: Deployment) -> None:
    w = Workload(
        prompt=Lengths("lognormal", 1000, 0.5),
        output=Lengths("lognormal", 200, 0.5),
        rate_per_s=20.0,
        requests=300,
    )
    full = simulate(small, w)
    bare = simulate(small, w, summarize=False)
    assert len(bare.engines[0].trace.t_s) == 0
    assert bare.engines[0].iterations == len(full.engines[0].trace.t_s)
    for column in ("admit_s", "first_s", "finish_s"):
        assert getattr(bare.reqs, column) == getattr(full.reqs, column)


def test_the_search_for_a_runs_length_returns_the_sum_it_found() -> None:
    """steps_and_elapsed is steps_before with the elapsed time of those steps."""
    run = DecodeRun(0.010, 2e-5, 0.012, 1e-5, 3e-4)  # the lines cross at j = 200
    for delta in (0.001, 0.0103, 1.0, 2.1, 7.5, 15.0):
        k, elapsed = run.steps_and_elapsed(delta, 1000)
        assert k == run.steps_before(delta, 1000)
        assert elapsed == run.elapsed_s(k)


def test_the_sampled_slope_is_the_core_difference_per_sampled_token() -> None:
    """(compute_s, overhead_s) per token sampled beyond a step of T tokens' own T, read off
    two direct core calls of steps that are not decode-only, and the launches such a step
    pays that a decode step of T sequences replayed as a CUDA graph does not: the per-layer
    cost less its graph share, scaled for TP, up to the largest captured batch and none past it."""
    m = Deployment.build("llama-3.1-70b", "h100-sxm", tp=4, engine="vllm")
    p = m.engine
    assert p is not None and p.graph < 1.0 and p.graph_max_seqs == 512
    model = StepModel(m)
    zeros = (0.0,) * len(model.groups)
    launches = p.per_layer_s * 80 * (1.0 - p.graph) * (1.0 + p.tp_scale * math.log2(4))  # 80 layers
    for tokens in (1, 300, 512, 513, 2257):
        one = step.price(m, ledger.Pass(tokens, zeros, zeros, tokens + 1))
        more = step.price(m, ledger.Pass(tokens, zeros, zeros, tokens + 1 + PROBE))
        per_c, per_f, extra = model.sampled_at(tokens)
        assert per_c == (float(more.compute_s) - float(one.compute_s)) / PROBE
        assert per_f == (float(more.overhead_s) - float(one.overhead_s)) / PROBE
        assert per_f == pytest.approx(p.per_sequence_s, rel=1e-6)
        assert extra == pytest.approx(launches if tokens <= 512 else 0.0, rel=1e-6, abs=1e-12)
        assert not math.isnan(per_c)


@pytest.mark.parametrize(
    "build",
    [
        dict(model="llama-3.1-8b", gpu="h100-sxm"),
        dict(
            model="llama-3.1-70b",
            gpu="h200",
            tp=4,
            weights="fp8",
            maths="fp8",
            kv_dtype="fp8",
            engine="trtllm",
        ),
        dict(model="llama-3.1-70b", gpu="mi300x", tp=2, engine="vllm"),
        dict(model="llama-3.1-405b", gpu="b200", tp=8, weights="fp8", maths="fp8", engine="sglang"),
        dict(model="gemma-2-9b", gpu="l40s", weights="int4-g128", engine="vllm"),
        dict(model="llama-3.2-1b", gpu="a100-80gb-sxm", preset="ideal"),
    ],
)
@pytest.mark.parametrize(("alone", "numpy_loaded"), [(0, False), (5, False), (2048, False), (2048, True)])
def test_the_memo_filled_a_block_at_a_time_is_the_core_one_count_at_a_time(
    build: dict, alone: int, numpy_loaded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After its first ONE_BY_ONE token counts, priced alone (or from the start, once numpy
    is loaded), the step model prices FILL token counts in one call of the core on an array;
    each one is the price of that count alone, to the bit: the lines' intercepts, the core's
    parts and the sampled slopes, read as a direct scalar call reads them. The switch from
    one to the other changes nothing."""
    monkeypatch.setattr(steptime, "ONE_BY_ONE", alone)
    monkeypatch.setattr(steptime, "numpy_loaded", lambda: numpy_loaded)
    build = dict(build)
    model_name, gpu = build.pop("model"), build.pop("gpu")
    m = Deployment.build(model_name, gpu, **build)
    model = StepModel(m)
    assert model.fills
    zeros = (0.0,) * len(model.groups)
    for tokens in (1, 2, 63, 64, 65, 127, 777, 2000, 2047, 8192, 8193, 65_535):
        s = step.price(m, ledger.Pass(tokens, zeros, zeros, tokens))
        compute_s, weight_s, overhead_s = float(s.compute_s), float(s.weight_s), float(s.overhead_s)
        fixed_s = float(s.comm_s) + overhead_s
        if model.apart:
            want = (0.0, float(s.memory_s) - weight_s, fixed_s + max(compute_s, weight_s))
        else:
            want = (compute_s, float(s.memory_s), fixed_s)
        assert model.at_tokens(tokens) == want
        assert model.parts_at[tokens] == (compute_s, weight_s, overhead_s)
        one = step.price(m, ledger.Pass(tokens, zeros, zeros, tokens + 1.0))
        more = step.price(m, ledger.Pass(tokens, zeros, zeros, tokens + 1.0 + PROBE))
        per_f = (float(more.overhead_s) - float(one.overhead_s)) / PROBE
        per_c = (float(more.compute_s) - float(one.compute_s)) / PROBE
        assert model.sampled_at(tokens) == (per_c, per_f, float(one.overhead_s) - overhead_s - per_f)
    if alone < 12 or numpy_loaded:
        assert len(model.by_tokens) > 12  # filled in blocks, not one count at a time
    else:
        assert sorted(model.by_tokens) == [1, 2, 63, 64, 65, 127, 777, 2000, 2047, 8192, 8193, 65_535]


def test_a_moe_and_the_per_op_method_price_one_count_at_a_time() -> None:
    """A MoE's share of experts touched is a power, and the per-op method takes numbers: their
    memos are filled one count at a time, as each step asks."""
    moe, per_op = Deployment.build("mixtral-8x7b", "h100-sxm", tp=2), Deployment.build(method="per-op")
    for m in (moe, per_op):
        model = StepModel(m)
        assert not model.fills
        assert model.block(100) == [100]


def test_a_preempted_prefill_finds_its_blocks_until_they_are_reused(small: Deployment) -> None:
    """With prefix caching, a request preempted after prefilling 1,000 tokens leaves its 63
    blocks cached: had nothing taken them, its 62 whole blocks (992 tokens) are found again.
    Blocks are reused least recently freed first, so it loses none until the blocks free
    before it are gone; 10 more taken after those cost it its last 10 blocks, the part-filled
    one among them: 53 whole blocks are left (848 tokens)."""
    reqs = Requests()
    reqs.add(0.0, 2000, 10)
    e = Engine(reqs, StepModel(small), EngineConfig(prefix_caching=True), kv_cache(small))
    ahead = e.free_blocks - 63
    e.waiting.append(0)
    chunk = [(0, 1000, 0)]
    e.apply((), chunk)
    e.one_step(chunk)
    assert reqs.computed[0] == 1000 and e.taken == 63
    e.apply([0], ())
    assert reqs.computed[0] == 0  # recompute, until the cache is looked up
    e.find_cached()
    assert reqs.computed[0] == 992
    e.taken += ahead
    e.find_cached()
    assert reqs.computed[0] == 992
    e.taken += 10
    e.find_cached()
    assert reqs.computed[0] == (63 - 10) * 16


def test_without_prefix_caching_a_preempted_prefill_starts_again(small: Deployment) -> None:
    reqs = Requests()
    reqs.add(0.0, 2000, 10)
    e = Engine(reqs, StepModel(small), EngineConfig(), kv_cache(small))
    e.waiting.append(0)
    chunk = [(0, 1000, 0)]
    e.apply((), chunk)
    e.one_step(chunk)
    e.apply([0], ())
    assert reqs.computed[0] == 0 and e.cached is None
