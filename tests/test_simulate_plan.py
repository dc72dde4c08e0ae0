"""Capacity planning: the rate the search finds meets the SLO in at least 4 of 5 fresh seeds,
and 1.1x that rate breaks it in at least 4 of 5; the fleet's size and cost follow from it."""

from __future__ import annotations

import math
import statistics

import pytest

from ridgeline import metrics
from ridgeline.deployment import Deployment
from ridgeline.errors import RidgelineError
from ridgeline.simulate import Lengths, Workload, capacity, simulate
from ridgeline.simulate.plan import parse_deployments, seeds_estimate

SLO = metrics.Slo(ttft_s=1.0, tpot_s=0.05)
WORKLOAD = Workload(prompt=Lengths("fixed", 2000), output=Lengths("fixed", 500))


def meets(rate: float, seed: int, requests: int) -> bool:
    """An independent judge: the run's own summary (metrics.summarize) against the SLO."""
    run = Workload(
        prompt=WORKLOAD.prompt,
        output=WORKLOAD.output,
        rate_per_s=rate,
        requests=requests,
        duration_s=None,
        seed=seed,
    )
    s = simulate(workload=run, slo=SLO).summary
    return s.ttft_s.p99 <= SLO.ttft_s and s.tpot_s.p99 <= SLO.tpot_s and not s.overloaded


def test_the_rate_found_meets_the_slo_and_ten_percent_more_breaks_it() -> None:
    plan = capacity(Deployment.build(), WORKLOAD, SLO, target_rate_per_s=20.0, seeds=5)
    rate, n = plan.max_rate_per_replica, plan.requests_per_run
    fresh = range(100, 105)  # seeds the search never saw
    assert sum(meets(rate, seed, n) for seed in fresh) >= 4
    assert sum(not meets(1.1 * rate, seed, n) for seed in fresh) >= 4
    # the fleet for 20 requests/s and what it costs, by hand from the plan's own figures
    assert plan.replicas == math.ceil(20.0 / rate)
    assert plan.gpus == plan.replicas
    assert plan.usd_per_hour == pytest.approx(plan.gpus * 2.99)
    tokens_per_hour = 20.0 * 3600 * (2000 + 501)  # prompt + the 501 tokens each answer emits
    assert plan.usd_per_million_tokens == pytest.approx(plan.usd_per_hour / tokens_per_hour * 1e6, rel=1e-3)
    assert plan.usd_per_million_output_tokens == pytest.approx(
        plan.usd_per_hour / (20.0 * 3600 * 501) * 1e6, rel=1e-3
    )


def test_an_slo_no_rate_can_meet_is_an_error() -> None:
    """One request alone takes 55.9 ms to its first token on an H100: 10 ms cannot be met."""
    with pytest.raises(RidgelineError, match="no request rate meets"):
        capacity(Deployment.build(), WORKLOAD, metrics.Slo(ttft_s=0.01), requests=200, seeds=2)


def test_compare_syntax() -> None:
    assert parse_deployments("h100-sxm:1:bf16,h200:1:fp8,a100-80gb-sxm:2", "bf16") == [
        ("h100-sxm", 1, "bf16"),
        ("h200", 1, "fp8"),
        ("a100-80gb-sxm", 2, "bf16"),
    ]
    for bad in ("h100-sxm:x", ":1", "a:1:b:c"):
        with pytest.raises(RidgelineError, match="--compare"):
            parse_deployments(bad, "bf16")


SHORT = Workload(prompt=Lengths("fixed", 1000), output=Lengths("fixed", 100))


def test_the_screen_sizes_the_fleet_as_the_full_search_does() -> None:
    """The plan finds each seed's rate with short screening runs, and confirms the chosen
    rate in full-length runs on fresh seeds. Where the screen's spread leaves the fleet's
    size open, it searches again at full length. Either way it sizes the fleet that the
    search with every run at full length sizes."""
    m, slo, n = Deployment.build(), metrics.Slo(ttft_s=0.5, tpot_s=0.03), 4000
    full = capacity(m, SHORT, slo, requests=n, exhaustive=True)
    assert full.confidence.screen_requests == n and full.confidence.confirm_runs == 1
    rate = full.max_rate_per_replica
    far = capacity(m, SHORT, slo, target_rate_per_s=1.5 * rate, requests=n)  # far from 1 or 3 replicas
    # Five replicas at the screen's estimate (mean - 2 sd) and at its seeds' mean straddle a
    # target between them: the screen leaves the fleet's size open there.
    lo, mean = seeds_estimate(far.seed_rates), statistics.fmean(far.seed_rates)
    near = 5 * (lo + mean) / 2
    assert math.ceil(near / lo) != math.ceil(near / mean)
    screened = []
    for target, fast in (
        (1.5 * rate, far),
        (near, capacity(m, SHORT, slo, target_rate_per_s=near, requests=n)),
    ):
        c = fast.confidence
        assert fast.replicas == math.ceil(target / rate) and fast.gpus == fast.replicas
        screened.append(c.screen_requests < n)
        if screened[-1]:  # settled by the screen: confirmed on fresh seeds
            assert c.confirm_runs == c.confirm_met >= 2
            confirming = [t for t in fast.trials if t.rate_per_s == fast.max_rate_per_replica and t.met]
            seen = {t.seed for t in fast.trials if t not in confirming}
            assert len(confirming) >= c.confirm_runs and not {t.seed for t in confirming} & seen
            assert fast.at_max["met"] and fast.at_max["seed"] == confirming[0].seed
        else:  # searched again at full length: the full search's own answer
            assert fast.max_rate_per_replica == rate
    assert screened == [True, False]


def test_a_bands_end_confirms_the_screens_estimate_as_it_is() -> None:
    """Where the screen leaves the fleet's size open, a band's end (`settle=False`) does not
    search its seeds again at full length: it confirms the screen's estimate on fresh seeds."""
    m, slo, n = Deployment.build(), metrics.Slo(ttft_s=0.5, tpot_s=0.03), 4000
    screen = capacity(m, SHORT, slo, requests=n)  # no target: the screen always stands
    lo, mean = seeds_estimate(screen.seed_rates), statistics.fmean(screen.seed_rates)
    near = 5 * (lo + mean) / 2
    assert math.ceil(near / lo) != math.ceil(near / mean)  # open: the plan would search again
    end = capacity(m, SHORT, slo, target_rate_per_s=near, requests=n, settle=False)
    c = end.confidence
    assert c.screen_requests < n and end.seed_rates == screen.seed_rates
    assert end.max_rate_per_replica <= lo and c.confirm_runs == c.confirm_met >= 2
    assert end.replicas == math.ceil(near / end.max_rate_per_replica)
