"""The simulator's inter-token latency: every decode token's wait since its sequence's last.
Its percentiles are those of the steps' times, each repeated once for every sequence that
waited it, read without making the repeats; over a run, the tokens' waits add up to each
request's E2E less its TTFT, whichever policy ran the prefills."""

from __future__ import annotations

import random

import pytest

from ridgeline import metrics
from ridgeline.deployment import Deployment
from ridgeline.request import prefill_step
from ridgeline.simulate.engine import EngineConfig
from ridgeline.simulate.run import simulate
from ridgeline.simulate.workload import Lengths, Workload


@pytest.mark.parametrize("rows", [300, 30_000])  # a sort, and numpy's past NUMPY_VALUES
def test_weighted_percentiles_are_those_of_the_repeated_values(rows: int) -> None:
    rng = random.Random(rows)
    values = [rng.choice((rng.random(), 0.25, 0.5)) for _ in range(rows)]
    counts = [rng.randint(0, 7) for _ in range(rows)]
    repeated = [v for v, c in zip(values, counts, strict=True) for _ in range(c)]
    weighted = metrics.weighted_percentiles(values, counts, "x")
    plain = metrics.percentiles(repeated, "x")
    assert (weighted.n, weighted.p50, weighted.p90) == (plain.n, plain.p50, plain.p90)
    assert weighted.p99 == plain.p99
    assert weighted.p99_ci95 == plain.p99_ci95 and weighted.warnings == plain.warnings
    assert weighted.mean == pytest.approx(plain.mean, rel=1e-12)
    assert metrics.weighted_percentiles([1.0, float("nan")], [0, 3], "x").n == 0


@pytest.fixture(scope="module")
def small() -> Deployment:
    return Deployment.build("llama-3.1-8b", "h100-sxm")


@pytest.mark.parametrize(
    "cfg",
    [EngineConfig(), EngineConfig(policy="sglang"), EngineConfig(jump=False)],
    ids=["vllm", "sglang (prefills alone)", "step by step"],
)
def test_the_tokens_waits_add_up_to_each_requests_decode_time(small: Deployment, cfg: EngineConfig) -> None:
    """Under vLLM's policy prefills share steps with the decodes; under SGLang's they run
    alone and the decoders wait them out, which their next tokens' waits must carry."""
    w = Workload(
        prompt=Lengths("lognormal", 1500, 0.5),
        output=Lengths("lognormal", 300, 0.5),
        rate_per_s=12.0,
        requests=400,
    )
    r = simulate(small, w, engine=cfg)
    assert r.summary is not None and r.summary.preemptions == 0
    itl = r.summary.itl_s
    tokens = sum(rec["output_tokens"] - 1 for rec in r.records)
    assert itl.n == tokens
    decode_s = sum(rec["e2e_s"] - rec["ttft_s"] for rec in r.records)
    assert itl.mean == pytest.approx(decode_s / tokens, rel=1e-9)
    assert itl.p99_ci95 is None  # a step's tokens share its time: no interval from their count
    # the median is a decode step; the tail, steps that carried a newcomer's prompt
    assert itl.p99 is not None and itl.p50 is not None
    assert itl.p99 > float(prefill_step(small, 1500, 1).time_s) > itl.p50
