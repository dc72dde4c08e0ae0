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
