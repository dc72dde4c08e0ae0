"""The band under load on `simulate` and `plan`: an engine profile's 80% interval of measured
/ predicted time over published runs under load (engines.toml's `uncertainty.load`, moved to
its `uncertainty.server` as the API server gets busy) on the run's medians and throughput,
and a plan made again with the engine as slow as each end.

The bands are read from the shipped TOML file itself, not through the profile code; the
slowed engine is checked against the plain one by the ratio of their times alone."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import cli_json, run_cli, shipped_bands, shipped_load_band, shipped_server_share
from ridgeline import metrics, request, step
from ridgeline.deployment import Deployment
from ridgeline.engines import get_engine
from ridgeline.errors import RidgelineError
from ridgeline.simulate import Lengths, Workload, capacity, simulate
from ridgeline.simulate.kvcache import kv_cache
from ridgeline.simulate.plan import banded


def shipped_band(engine: str, requests_per_s: float, prompt: float, output: float) -> tuple[float, float]:
    """The shipped band under load of a run at this rate, with prompts of `prompt` tokens
    and `output` tokens after the first (the server streams output + 1)."""
    return shipped_load_band(engine, shipped_server_share(engine, requests_per_s, prompt, output + 1))


SLOWED = [  # one of each kind of term a step's time has
    dict(model="llama-3.1-8b", gpu="h100-sxm", engine="vllm"),  # matmuls, attention, graphs
    dict(model="llama-3.1-70b", gpu="h100-sxm", engine="trtllm", tp=4, weights="fp8"),  # NVLink
    dict(model="llama-3.1-8b", gpu="l40s", engine="trtllm", tp=2),  # PCIe all-reduces
    dict(model="gpt-oss-120b", gpu="a100-80gb-sxm", engine="vllm"),  # experts, sinks, unpacking
    dict(model="llama-3.1-70b", gpu="mi300x", engine="vllm", tp=8, weights="fp8"),  # AMD's factors
    dict(model="llama-3.1-8b", gpu="a100-80gb-sxm", engine="llamacpp", weights="int4"),  # cores' streams
    dict(model="llama-3.1-8b", gpu="gb200", engine="trtllm"),  # a host-bound step at batch 1,024
]


@pytest.mark.parametrize("case", SLOWED, ids=lambda c: f"{c['engine']}-{c['model']}-{c['gpu']}")
@pytest.mark.parametrize("factor", [0.8487, 2.358])
def test_a_slowed_engine_takes_that_many_times_as_long(case: dict[str, object], factor: float) -> None:
    d = Deployment.build(**case)  # type: ignore[arg-type]
    slow = d.slowed(factor)
    for before, after in (
        (step.prefill_step(d, 2000), step.prefill_step(slow, 2000)),
        (step.prefill_step(d, 300, 8), step.prefill_step(slow, 300, 8)),
        (step.decode_step(d, 1000), step.decode_step(slow, 1000)),
        (step.decode_step(d, 1000, 64), step.decode_step(slow, 1000, 64)),
        (step.decode_step(d, 1000, 1024), step.decode_step(slow, 1000, 1024)),
    ):
        assert after.time_s == pytest.approx(factor * before.time_s, rel=1e-12)
    assert slow.ttft_offset_s == pytest.approx(factor * d.ttft_offset_s, rel=1e-12)
    alone, slowly = request.request_timeline(d, 2000, 500), request.request_timeline(slow, 2000, 500)
    assert slowly.total_s == pytest.approx(factor * alone.total_s, rel=1e-12)
    assert d.engine is not None and slow.engine is not None
    assert slow.engine.server_s(100, 20_000, 5_000) == pytest.approx(
        factor * d.engine.server_s(100, 20_000, 5_000), rel=1e-12
    )
    # the memory plan is not a time: the same KV cache
    assert kv_cache(slow, 16, 0.9, 256, 8192).tokens == kv_cache(d, 16, 0.9, 256, 8192).tokens


def test_only_an_engine_can_be_slowed() -> None:
    with pytest.raises(RidgelineError, match="no engine profile"):
        Deployment.build().slowed(2.0)
    for bad in (0.0, -1.0, math.nan, math.inf, 1e6):
        with pytest.raises(RidgelineError):
            Deployment.build(engine="vllm").slowed(bad)


OPEN = Workload(prompt=Lengths("fixed", 1000), output=Lengths("fixed", 200), rate_per_s=2.0, requests=300)


def ends(m: Deployment, w: Workload, band: tuple[float, float]) -> tuple[metrics.Summary, metrics.Summary]:
    """The workload's runs on the engine as slow as each end of a band."""
    lo, hi = band
    fast, slow = (simulate(m.slowed(f), w, band=False).summary for f in (lo, hi))
    assert fast is not None and slow is not None
    return fast, slow


def test_an_open_loop_runs_band_is_the_run_again_at_each_end() -> None:
    """The same arrivals on the engine as slow as each end of its band: far below capacity
    its medians about those of the run scaled by each end (the queue barely grows), and no
    band on the throughput, the arrivals' at either end."""
    lo, hi = shipped_band("vllm", 2.0, 1000, 200)
    m = Deployment.build(engine="vllm")
    s = simulate(m, OPEN).summary
    assert s is not None and s.uncertainty is not None and not s.overloaded
    u = s.uncertainty
    assert u["profile"] == "vllm" and u["time_ratio"] == pytest.approx([lo, hi], rel=1e-12)
    fast, slow = ends(m, OPEN, (lo, hi))
    for key in ("ttft", "tpot", "e2e"):
        assert u[f"{key}_p50_s"] == [fast.latency(f"{key}_s").p50, slow.latency(f"{key}_s").p50]
        p50 = s.latency(f"{key}_s").p50
        assert u[f"{key}_p50_s"] == pytest.approx([lo * p50, hi * p50], rel=0.1)
    assert u["throughput_tokens_per_s"] is None
    assert simulate(m, OPEN, band=False).summary.uncertainty is None  # type: ignore[union-attr]


def test_near_capacity_the_queue_magnifies_the_slow_end() -> None:
    """Ten times the arrivals: the run keeps up, but an engine at the slow end of vLLM's
    band does not, so its medians are far past the run's scaled by that end, and the
    throughput's band opens: the slow end serves less than arrives. At 20 requests a second
    the API server is busy a fifth of the time or more: the band is the server band."""
    m = Deployment.build(engine="vllm")
    w = replace(OPEN, rate_per_s=20.0, requests=600)
    s = simulate(m, w).summary
    assert s is not None and s.uncertainty is not None and not s.overloaded
    assert shipped_server_share("vllm", 20.0, 1000, 201) >= 0.2
    assert s.uncertainty["time_ratio"] == list(shipped_bands("vllm")["server"])
    hi = s.uncertainty["time_ratio"][1]
    fast, slow = ends(m, w, shipped_bands("vllm")["server"])
    assert slow.overloaded and not fast.overloaded  # type: ignore[attr-defined]
    assert s.uncertainty["e2e_p50_s"][1] > 2 * hi * s.e2e_s.p50  # type: ignore[operator]
    assert s.uncertainty["ttft_p50_s"][1] > 2 * hi * s.ttft_s.p50  # type: ignore[operator]
    served = s.uncertainty["throughput_tokens_per_s"]
    assert served == [slow.throughput_tokens_per_s, fast.throughput_tokens_per_s]
    assert served[0] < s.throughput_tokens_per_s <= served[1] * 1.001


def test_a_saturated_run_bands_its_throughput() -> None:
    """A closed loop on a slowed engine is the same run with every time that many times as
    long: its band is its own times and throughput scaled. A flood is made again at each
    end, and serves what each end's engine can."""
    m = Deployment.build(engine="sglang")
    closed = Workload(
        prompt=Lengths("fixed", 1000), output=Lengths("fixed", 200), concurrency=16, requests=200
    )
    s = simulate(m, closed).summary
    assert s is not None and s.uncertainty is not None
    # the rate a closed loop offers: its requests over the span of their arrivals
    assert s.offered_rate_per_s is not None
    lo, hi = shipped_band("sglang", s.offered_rate_per_s, 1000, 200)
    assert s.uncertainty["time_ratio"] == pytest.approx([lo, hi], rel=1e-12)
    served = s.throughput_tokens_per_s
    assert s.uncertainty["throughput_tokens_per_s"] == pytest.approx([served / hi, served / lo], rel=1e-15)
    assert s.uncertainty["tpot_p50_s"] == pytest.approx([lo * s.tpot_s.p50, hi * s.tpot_s.p50], rel=1e-15)  # type: ignore[operator]
    slowed = simulate(m.slowed(hi), closed, band=False).summary
    assert slowed is not None and slowed.tpot_s.p50 == pytest.approx(hi * s.tpot_s.p50, rel=1e-9)  # type: ignore[operator]
    flood = Workload(
        prompt=Lengths("fixed", 1000), output=Lengths("fixed", 200), rate_per_s=1e4, requests=400
    )
    s = simulate(m, flood).summary
    assert s is not None and s.overloaded and s.uncertainty is not None
    fast, slow = ends(m, flood, s.uncertainty["time_ratio"])
    band = s.uncertainty["throughput_tokens_per_s"]
    assert band == [slow.throughput_tokens_per_s, fast.throughput_tokens_per_s]
    assert band[0] < s.throughput_tokens_per_s < band[1]


def test_no_band_without_a_profile_that_has_one(tmp_path: Path) -> None:
    assert simulate(Deployment.build(), OPEN).summary.uncertainty is None  # type: ignore[union-attr]
    mine = tmp_path / "mine.toml"  # a user's profile without bands
    mine.write_text(
        '[mine]\nlabel = "mine"\ncompute = { gemm = { bf16 = 0.6 } }\n'
        "memory = { weights = { w16 = 0.8, w8 = 0.7, w4 = 0.6 } }\n"
    )
    m = Deployment.build(engine=get_engine(str(mine)))
    assert simulate(m, OPEN).summary.uncertainty is None  # type: ignore[union-attr]
    no_plan = lambda d: pytest.fail("no band, no plan")  # noqa: E731
    assert banded(m, no_plan, None) is None  # type: ignore[arg-type]


def test_simulate_json_and_text_carry_the_band() -> None:
    """The command carries the band (the runs at its ends: the API's, above) and `--no-band`
    skips them."""
    args = ["simulate", "--engine", "vllm", "-n", "200", "-p", "1000", "-o", "200"]
    data = cli_json(*args)
    rate = data["offered_rate_per_s"] or data["requests_per_s"]
    lo, hi = shipped_band("vllm", rate, 1000, 200)
    assert data["uncertainty"]["server_share"] == pytest.approx(
        shipped_server_share("vllm", rate, 1000, 201), rel=1e-9
    )
    assert data["uncertainty"]["time_ratio"] == pytest.approx([lo, hi], rel=1e-9)
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        low, high = data["uncertainty"][key.replace("_s", "_p50_s")]
        assert low < data[key]["p50"] < high
    text = run_cli(*args).stdout
    assert f"{lo:.2f}–{hi:.2f}x the predicted time" in " ".join(text.split())
    assert cli_json(*args, "--no-band")["uncertainty"] is None
    assert cli_json("simulate", "-n", "100")["uncertainty"] is None


PLAN_WORKLOAD = Workload(prompt=Lengths("fixed", 1000), output=Lengths("fixed", 200))
PLAN_SLO = metrics.Slo(ttft_s=0.5, tpot_s=0.05)


def test_a_plan_is_the_same_plan_in_slower_time() -> None:
    """An engine r times as slow, judged by an SLO r times as long, is the same system with
    its clock run slower: it takes 1/r of the rate, the same search in every step."""
    m = Deployment.build(engine="vllm")
    base = capacity(m, PLAN_WORKLOAD, PLAN_SLO, requests=600, seeds=2)
    for r in (0.8487, 2.358):
        slo = metrics.Slo(ttft_s=PLAN_SLO.ttft_s * r, tpot_s=PLAN_SLO.tpot_s * r)  # type: ignore[operator]
        dilated = capacity(m.slowed(r), PLAN_WORKLOAD, slo, requests=600, seeds=2)
        assert dilated.max_rate_per_replica == pytest.approx(base.max_rate_per_replica / r, rel=1e-9)


def test_the_plans_band_is_the_plan_at_each_end() -> None:
    m = Deployment.build(engine="vllm")

    def plan_on(d: Deployment):  # type: ignore[no-untyped-def]
        return capacity(d, PLAN_WORKLOAD, PLAN_SLO, target_rate_per_s=20.0, requests=600, seeds=2)

    plan = plan_on(m)
    band = banded(m, plan_on, plan)
    lo, hi = shipped_band("vllm", plan.max_rate_per_replica, 1000, 200)  # at the rate planned
    assert band is not None and band.time_ratio == pytest.approx([lo, hi], rel=1e-12)
    assert band.slow_end is None
    slow, fast = plan_on(m.slowed(hi)), plan_on(m.slowed(lo))
    assert band.max_rate_per_replica == [slow.max_rate_per_replica, fast.max_rate_per_replica]
    assert band.replicas == [fast.replicas, slow.replicas] and band.gpus == [fast.gpus, slow.gpus]
    assert band.usd_per_million_tokens == [fast.usd_per_million_tokens, slow.usd_per_million_tokens]
    # a slower engine takes less of the traffic a replica, and more replicas carry the fleet's
    assert slow.max_rate_per_replica < plan.max_rate_per_replica < fast.max_rate_per_replica
    assert fast.replicas <= plan.replicas <= slow.replicas
    assert slow.max_rate_per_replica < plan.max_rate_per_replica / hi * 1.02  # no better than 1/hi


def test_a_slow_end_that_meets_no_rate_says_so() -> None:
    least = min(shipped_bands("vllm")["load"][1], shipped_bands("vllm")["server"][1])
    m = Deployment.build(engine="vllm")
    alone = request.request_timeline(m, 1000, 200).ttft_s
    slo = metrics.Slo(ttft_s=alone * (1 + least) / 2)  # inside the SLO alone, outside it at any slow end

    def plan_on(d: Deployment):  # type: ignore[no-untyped-def]
        return capacity(d, PLAN_WORKLOAD, slo, requests=600, seeds=2)

    band = banded(m, plan_on, plan_on(m))
    assert band is not None and band.slow_end is not None
    hi = band.time_ratio[1]
    assert band.slow_end.startswith(f"at {hi:.3g}x the predicted time, no request rate meets")
    assert band.max_rate_per_replica[0] is None and band.max_rate_per_replica[1] is not None
    assert band.gpus[1] is None and band.usd_per_million_tokens[1] is None


def test_plan_json_text_and_no_band() -> None:
    args = ["plan", "--engine", "vllm", "-p", "1000", "-o", "200", "--slo-ttft-p99", "0.5"]
    args += ["--requests", "600", "--seeds", "2"]
    data = cli_json(*args)
    u = data["plans"][0]["uncertainty"]
    assert list(u) == [
        *("profile", "time_ratio", "server_share", "max_rate_per_replica", "replicas", "gpus"),
        *("usd_per_million_tokens", "usd_per_million_output_tokens", "slow_end", "fast_end", "unmeasured"),
        "one_source",
    ]
    low, high = u["max_rate_per_replica"]
    assert low < data["plans"][0]["max_rate_per_replica"] < high
    assert cli_json(*args, "--no-band")["plans"][0]["uncertainty"] is None
    text = " ".join(run_cli(*args).stdout.split())
    busy = shipped_server_share("vllm", data["plans"][0]["max_rate_per_replica"], 1000, 201)
    assert u["server_share"] == pytest.approx(busy, rel=1e-9)
    lo, hi = shipped_load_band("vllm", busy)
    assert u["time_ratio"] == pytest.approx([lo, hi], rel=1e-9)
    assert f"80% band (vllm under load with its API server {busy:.0%} busy, {lo:.2f}–{hi:.2f}x" in text
    plain = ["plan", "-p", "1000", "-o", "200", "--slo-ttft-p99", "0.5", "--requests", "600", "--seeds", "2"]
    assert cli_json(*plain)["plans"][0]["uncertainty"] is None


def test_an_end_without_a_plan_is_null_and_says_why() -> None:
    """Whichever end has no plan (here a stand-in planner refuses the faster engine), its
    figures are null and its reason is kept; the other end's plan stands."""
    m = Deployment.build(engine="vllm")
    assert m.engine is not None

    def plan_on(d: Deployment):  # type: ignore[no-untyped-def]
        assert d.engine is not None
        if d.engine.fixed_s < m.engine.fixed_s:  # type: ignore[union-attr]
            raise RidgelineError("refused")
        return capacity(d, PLAN_WORKLOAD, PLAN_SLO, requests=600, seeds=2)

    plan = plan_on(m)
    lo = shipped_band("vllm", plan.max_rate_per_replica, 1000, 200)[0]
    band = banded(m, plan_on, plan)
    assert band is not None and band.fast_end == f"at {lo:.3g}x the predicted time, refused"
    assert band.slow_end is None and band.max_rate_per_replica[1] is None
    assert band.max_rate_per_replica[0] is not None and band.gpus[0] is None


def test_a_band_resting_on_priors_says_so() -> None:
    """A MoE on SGLang rests on expert terms no published SGLang run moved: the band says so,
    as `estimate` does (same list); a dense model on vLLM rests on none."""
    moe = Deployment.build("qwen3-30b-a3b", engine="sglang")
    s = simulate(moe, OPEN).summary
    assert s is not None and s.uncertainty is not None
    assert (
        s.uncertainty["unmeasured"]
        == cli_json("estimate", "-m", "qwen3-30b-a3b", "-e", "sglang")["unmeasured"]
    )
    assert "experts" in s.uncertainty["unmeasured"]
    text = " ".join(run_cli("simulate", "-m", "qwen3-30b-a3b", "-e", "sglang", "-n", "100").stdout.split())
    assert "sglang's profile keeps its priors for experts" in text
    dense = simulate(Deployment.build(engine="vllm"), OPEN).summary
    assert dense is not None and dense.uncertainty is not None and dense.uncertainty["unmeasured"] == []
