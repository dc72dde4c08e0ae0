"""Overlapped scheduling (SGLang 0.4 on, TensorRT-LLM's PyTorch runtime): the CPU plans step
n + 1 while the GPU runs step n, so the plan of step n + 1 sees the queue as it stood when
step n started. A request that arrives while a step runs is first scheduled two steps on, not
one; an idle engine sees an arrival at once."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ridgeline.accuracy import corpus
from ridgeline.deployment import Deployment
from ridgeline.engines import builtin_engines
from ridgeline.errors import RidgelineError
from ridgeline.simulate.engine import Engine, EngineConfig
from ridgeline.simulate.kvcache import kv_cache
from ridgeline.simulate.requests import Requests
from ridgeline.simulate.run import engine_config, simulate
from ridgeline.simulate.steptime import StepModel
from ridgeline.simulate.workload import Lengths, Workload


@pytest.fixture(scope="module")
def small() -> Deployment:
    return Deployment.build("llama-3.1-8b", "h100-sxm")


def run(m: Deployment, arrivals: list[tuple[float, int, int]], overlap: bool, jump: bool = False) -> Engine:
    reqs = Requests()
    for t, prompt, output in arrivals:
        reqs.add(t, prompt, output)
    e = Engine(reqs, StepModel(m), EngineConfig(overlap=overlap, jump=jump), kv_cache(m))
    for rid in range(len(reqs)):
        e.add(rid)
    e.run_until()
    return e


def step_bounds(e: Engine) -> list[tuple[float, float]]:
    """(start, end) of every step the engine ran, one at a time (jump off)."""
    tr = e.trace
    assert set(tr.steps.tolist()) == {1}
    return [(t, t + dt) for t, dt in zip(tr.t_s.tolist(), tr.dt_s.tolist(), strict=True)]


@pytest.mark.parametrize("overlap", [False, True])
def test_an_arrival_mid_step_is_planned_one_step_later_when_scheduling_overlaps(
    small: Deployment, overlap: bool
) -> None:
    """A decodes alone; B arrives in the middle of A's fifth decode step. Without overlap B's
    prefill runs in the step that starts when that one ends; with it, in the step after."""
    first = run(small, [(0.0, 1000, 200)], overlap)
    bounds = step_bounds(first)
    start, end = bounds[5]  # the prefill, then four decode steps: this is the fifth
    arrive = (start + end) / 2
    e = run(small, [(0.0, 1000, 200), (arrive, 300, 20)], overlap)
    steps = step_bounds(e)
    joins = 7 if overlap else 6  # the step B's whole prompt runs in (8,192 tokens a step)
    assert steps[:joins] == bounds[:joins]  # A alone until then, step for step
    assert steps[joins][1] - steps[joins][0] > bounds[joins][1] - bounds[joins][0]  # B's prompt runs in it
    assert e.reqs.first_s[1] == pytest.approx(steps[joins][1])
    assert e.reqs.admit_s[1] == pytest.approx(steps[joins][0])


def test_an_idle_engine_sees_an_arrival_at_once_with_or_without_overlap(small: Deployment) -> None:
    """Nothing runs when the request arrives: its prefill starts at its arrival either way."""
    arrivals = [(0.0, 500, 10), (5.0, 500, 10)]  # the first is long done by t = 5 s
    on, off = run(small, arrivals, True), run(small, arrivals, False)
    assert on.reqs.admit_s == off.reqs.admit_s == [0.0, 5.0]
    assert on.reqs.first_s == pytest.approx(off.reqs.first_s)
    assert on.reqs.finish_s == pytest.approx(off.reqs.finish_s)


def test_the_closed_form_runs_keep_the_step_an_arrival_waits_for(small: Deployment) -> None:
    """The engine leaps over runs of decode steps; with overlap a leap ends where the next
    arrival came, and the request still waits for the step after. Stepping one by one gives
    the same times."""
    w = Workload(
        prompt=Lengths("lognormal", 800, 0.6),
        output=Lengths("lognormal", 150, 0.6),
        rate_per_s=6.0,
        requests=300,
    )
    runs = {jump: simulate(small, w, engine=EngineConfig(overlap=True, jump=jump)) for jump in (True, False)}
    leap, step = (runs[j].records for j in (True, False))
    assert [r["ttft_s"] for r in leap] == pytest.approx([r["ttft_s"] for r in step], rel=1e-9, abs=1e-12)
    assert [r["e2e_s"] for r in leap] == pytest.approx([r["e2e_s"] for r in step], rel=1e-9, abs=1e-12)


def test_overlap_lengthens_ttft_under_load_by_about_a_decode_step(small: Deployment) -> None:
    """At a rate that keeps the engine busy, the median TTFT grows by about one step (the
    step B sits out), and the decode steps themselves do not change."""
    w = Workload(
        prompt=Lengths("fixed", 500), output=Lengths("fixed", 300), rate_per_s=20.0, requests=600, seed=7
    )
    on, off = (simulate(small, w, engine=EngineConfig(overlap=o)).summary for o in (True, False))
    assert on is not None and off is not None
    assert on.ttft_s.p50 > off.ttft_s.p50
    extra = on.ttft_s.p50 - off.ttft_s.p50
    assert 0.5 * off.tpot_s.p50 < extra < 2.0 * off.tpot_s.p50
    assert on.tpot_s.p50 == pytest.approx(off.tpot_s.p50, rel=0.05)


def test_profiles_say_which_engines_overlap_and_the_corpus_says_which_runs_did_not() -> None:
    engines = builtin_engines()
    assert engines["sglang"].scheduler.overlap and engines["trtllm"].scheduler.overlap
    assert engines["vllm"].scheduler.overlap  # async scheduling, vLLM's default since late 2025
    assert not engines["llamacpp"].scheduler.overlap
    m = Deployment.build("llama-3.1-8b", "h100-sxm", engine=engines["sglang"])
    assert engine_config(m).overlap and not engine_config(m, overlap=False).overlap
    rows = {r.id: r for r in corpus.rows()}
    assert rows["M03"].overlap is False  # SGLang 0.3.0, before the overlap scheduler
    assert rows["K10"].overlap is None  # the profile's: on
    assert rows["T01"].overlap is False  # TensorRT-LLM 0.13's C++ runtime
    # every vLLM run before async scheduling became its default (0.6 to 0.11) says off; 0.22's is on
    vllm = [r for r in corpus.rows() + corpus.check_rows() if r.engine == "vllm"]
    assert {r.id for r in vllm if r.overlap} == {f"Q0{i}" for i in range(1, 7)}
    assert all(r.overlap is False for r in vllm if not r.id.startswith("Q"))


def test_a_config_whose_overlap_is_not_a_flag_is_one_clear_error() -> None:
    with pytest.raises(RidgelineError, match="overlap must be True or False"):
        replace(EngineConfig(), overlap=1)  # type: ignore[arg-type]
