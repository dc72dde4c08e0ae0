"""Capacity planning: the highest request rate a replica takes inside an SLO, the replicas and
GPUs a target rate needs, and what a million tokens then costs.

A rate meets the SLO when a run of Poisson (or gamma) arrivals at that rate has p99 TTFT,
p99 TPOT and p99 E2E within their targets and is not overloaded. Whether one run meets it
is itself random: near capacity a p99 rests on a few bursts of arrivals, and the system
forgets a burst only after about one turnover (the in-system count L = rate x E2E, by
Little's law, replaced once). So each run spans about RUN_TURNOVERS turnovers, and the
search repeats over seeds: for each seed the highest meeting rate is found by bracketing
and bisection (to 1%), and the plan takes mean - 2 sd of those rates (and no more than the
lowest): a rate that runs of this length meet about 98% of the time.

Cost at a fleet rate R: replicas = ceil(R / rate per replica), GPUs = replicas x GPUs per
replica, $ per hour = GPUs x price, and $ per million tokens = $ per hour / (R x tokens per
request x 3600) x 1e6, counting input and output tokens (and output tokens alone).

Every step of the search simulates `requests` for each seed and deployment, so the plan
refuses more than MAX_PLAN_WORK of them (deployments x seeds x requests per run, the
automatic run length counted at its largest), as well as more than MAX_SEEDS seeds,
MAX_RUN_REQUESTS requests a run or MAX_DEPLOYMENTS deployments: a plan ends in minutes.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ridgeline import metrics, request
from ridgeline.checks import check_number, check_price, check_size
from ridgeline.deployment import Deployment
from ridgeline.engines import LOAD
from ridgeline.errors import RidgelineError
from ridgeline.simulate import report
from ridgeline.simulate.engine import EngineConfig, replica_limits
from ridgeline.simulate.kvcache import kv_cache
from ridgeline.simulate.run import Result as SimResult
from ridgeline.simulate.run import check_slo, mean_tokens, simulate
from ridgeline.simulate.workload import MAX_RATE_PER_S, MAX_SEED, MAX_SPAN_S, Workload, check_context

TOLERANCE = 1.01  # bisection stops when hi / lo is below this
NEAR = 1.05  # first step when bracketing from the core's guess or the seeds already found
BRACKET = 1.25  # largest step
MAX_BRACKET_STEPS = 40
MAX_DOWN_STEPS = 1000  # bracketing down stops at the floor long before this
RUN_TURNOVERS = 150  # requests per run / in-system requests
MIN_REQUESTS, MAX_REQUESTS = 2000, 40000
SCREEN_TURNOVERS = 20  # requests per screening run / in-system requests
MIN_SCREEN_REQUESTS = 1000
CONFIRM_SEEDS = 2  # fresh seeds the chosen rate must meet in full-length runs
MAX_CONFIRM_STEPS = 8  # steps down when a confirming run misses, at most
# What a user may ask for: the search runs several trial rates per seed, each a run of
# `requests` for every seed and deployment, so their product bounds the work.
MAX_SEEDS = 100
MAX_RUN_REQUESTS = 1_000_000  # --requests per run
MAX_PLAN_WORK = 8_000_000  # deployments x seeds x requests per run
MAX_DEPLOYMENTS = 16  # --compare entries
MIN_TARGET_RATE_PER_S = 1e-6  # a request every 11.6 days
LATENCY = ("ttft_s", "tpot_s", "e2e_s")  # the targets an SLO may set, each on its p99

Tick = Callable[[], None]


@dataclass(frozen=True)
class Trial:
    """One simulated run at one rate."""

    rate_per_s: float
    seed: int
    met: bool
    overloaded: bool
    ttft_p99_s: float | None
    tpot_p99_s: float | None
    e2e_p99_s: float | None


@dataclass(frozen=True)
class Capacity:
    """One deployment's answer."""

    deployment: dict[str, Any]
    slo: dict[str, float | None]
    requests_per_run: int
    seeds: int
    max_rate_per_replica: float
    seed_rates: list[float]
    at_max: dict[str, Any]
    target_rate_per_s: float | None
    replicas: int
    gpus: int
    price_per_gpu_hour_usd: float
    usd_per_hour: float
    usd_per_million_tokens: float
    usd_per_million_output_tokens: float
    confidence: Confidence
    uncertainty: Band | None = None  # the plan at its engine's band's ends (`banded`)
    trials: list[Trial] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # the check run's: its API server (report.SERVER_BOUND)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Confidence:
    """How sure the rate is: the seeds' screening runs and their spread, then the full-length
    runs at the chosen rate, each with a seed the search never saw, and how many met."""

    screen_requests: int  # requests per screening run
    seed_rate_sd: float  # the seeds' rates: standard deviation / mean
    confirm_requests: int  # requests per confirming run
    confirm_runs: int  # at the chosen rate
    confirm_met: int


@dataclass(frozen=True)
class Band:
    """The plan again with the engine as slow as each end of its band under load (its
    profile's `uncertainty.load`, moved to its `uncertainty.server` as the share of the
    time a replica's API server is busy at the planned rate, `server_share`, goes to a
    fifth (Deployment.load_band): published runs under load that no fit saw took from
    `time_ratio[0]` to `time_ratio[1]` times the predicted time, 80% of them): every step
    and first token that many times as long (Deployment.slowed). Each figure is [low, high]:
    the rate a replica takes from the slow end's to the fast end's, the replicas, GPUs and
    cost from the fast end's to the slow end's. Where an end has no plan (no rate meets the
    SLO at the slow end), its figures are None and `slow_end` or `fast_end` says why."""

    profile: str
    time_ratio: list[float]
    server_share: float  # of the planned rate's time, a replica's API server's (Deployment.server_share)
    max_rate_per_replica: list[float | None]
    replicas: list[int | None]
    gpus: list[int | None]
    usd_per_million_tokens: list[float | None]
    usd_per_million_output_tokens: list[float | None]
    slow_end: str | None = None
    fast_end: str | None = None
    unmeasured: list[str] = field(default_factory=list)  # terms whose priors stand (EngineProfile.unmeasured)
    one_source: list[str] = field(default_factory=list)  # one source alone moved (EngineProfile.one_source)


def banded(m: Deployment, plan_on: Callable[[Deployment], Capacity], planned: Capacity) -> Band | None:
    """`plan_on` again on `m` with its engine as slow as each end of its band under load, at
    the share of the time its API server is busy at the `planned` rate
    (Deployment.load_band); None without an engine profile that has one."""
    engine = m.engine
    if engine is None or m.band(LOAD) is None:
        return None
    at = planned.at_max
    busy = m.server_share(at["rate_per_s"], at["prompt_tokens_mean"], at["output_tokens_mean"])
    band = m.load_band(busy)
    assert band is not None  # a profile with a load band has one at any share
    lo, hi = band
    fast, fast_why = _plan_or_why(plan_on, m, lo)
    slow, slow_why = _plan_or_why(plan_on, m, hi)

    def ends(key: str, rising: bool) -> list[Any]:
        """[low, high] of a figure: the slow end's first where it rises with speed."""
        low, high = (slow, fast) if rising else (fast, slow)
        return [None if p is None else getattr(p, key) for p in (low, high)]

    return Band(
        profile=engine.name,
        time_ratio=[lo, hi],
        server_share=busy,
        max_rate_per_replica=ends("max_rate_per_replica", True),
        replicas=ends("replicas", False),
        gpus=ends("gpus", False),
        usd_per_million_tokens=ends("usd_per_million_tokens", False),
        usd_per_million_output_tokens=ends("usd_per_million_output_tokens", False),
        slow_end=slow_why,
        fast_end=fast_why,
        unmeasured=engine.unmeasured(m),
        one_source=engine.one_source(m),
    )


def _plan_or_why(
    plan_on: Callable[[Deployment], Capacity], m: Deployment, factor: float
) -> tuple[Capacity | None, str | None]:
    """The plan with the engine `factor` times as slow, or why there is none."""
    try:
        return plan_on(m.slowed(factor)), None
    except RidgelineError as e:
        return None, f"at {factor:.3g}x the predicted time, {e}"


def parse_deployments(spec: str, weights: str | None) -> list[tuple[str, int, str | None]]:
    """`GPU[:TP[:WEIGHTS]]`, comma-separated: `h100-sxm:1:bf16,h200:1:fp8,a100-80gb-sxm:2`."""
    items = spec.split(",")
    if len(items) > MAX_DEPLOYMENTS:
        raise RidgelineError(
            f"--compare lists {len(items):,} deployments; plan at most {MAX_DEPLOYMENTS} at a time"
        )
    out = []
    for item in items:
        parts = [p.strip() for p in item.strip().split(":")]
        if not parts[0] or len(parts) > 3:
            raise RidgelineError(
                f"--compare entry {item!r} is not GPU[:TP[:WEIGHTS]]; e.g. h100-sxm:1:bf16,h200:1:fp8"
            )
        text = parts[1] if len(parts) > 1 and parts[1] else "1"
        tp = int(text) if text.isascii() and text.isdigit() and len(text) <= 30 else 0
        if tp < 1:
            raise RidgelineError(
                f"--compare entry {item!r}: TP {text!r} must be a whole number of GPUs, such as 1, 2, 4 or 8"
            )
        out.append((parts[0], tp, parts[2] if len(parts) > 2 and parts[2] else weights))
    return out


def check_plan(
    target_rate_per_s: float | None, requests: int | None, seeds: int, deployments: int = 1
) -> None:
    """The plan's own inputs, and the bound on its work."""
    if target_rate_per_s is not None:
        check_number(
            "--rate",
            target_rate_per_s,
            lo=MIN_TARGET_RATE_PER_S,
            hi=MAX_RATE_PER_S,
            hint=" (the fleet's target, requests per second)",
        )
    try:
        if requests is not None:
            check_size("--requests", requests, 100, MAX_RUN_REQUESTS)
    except RidgelineError as exc:
        raise RidgelineError(f"{exc}: a p99 needs 100 requests a run") from None
    try:
        check_size("--seeds", seeds, 2, MAX_SEEDS)
    except RidgelineError as exc:
        raise RidgelineError(f"{exc}: two runs at least measure the run-to-run spread") from None
    per_run = MAX_REQUESTS if requests is None else requests
    work = deployments * seeds * per_run
    if work > MAX_PLAN_WORK:
        raise RidgelineError(
            f"the plan would simulate {deployments} deployment(s) x {seeds} seeds x {per_run:,} requests "
            f"= {work:,} requests at each step of its search, more than {MAX_PLAN_WORK:,}: "
            "fewer --seeds, --requests or --compare entries"
        )


@dataclass(frozen=True)
class Judged:
    """One simulated run judged against an SLO: the verdict `plan` bisects on and `search`
    records for every point. Percentiles are metrics.percentiles' (linear interpolation);
    goodput counts the requests that meet every target, each on its own (metrics.Slo.met)."""

    met: bool
    overloaded: bool
    requests: int
    ttft_s: metrics.Percentiles
    tpot_s: metrics.Percentiles
    e2e_s: metrics.Percentiles
    goodput_requests_per_s: float
    slo_attainment: float
    throughput_tokens_per_s: float  # output tokens
    makespan_s: float  # from time 0 to the last finish
    prompt_tokens_mean: float
    output_tokens_mean: float  # tokens emitted, M + 1
    kv_tokens: int


def judge_run(
    m: Deployment,
    w: Workload,
    cfg: EngineConfig,
    slo: metrics.Slo,
    *,
    replicas: int = 1,
    router: str = "round-robin",
    attainment: float | None = None,
) -> Judged:
    """Simulate one open-loop run and judge it. It meets the SLO when it is not overloaded
    and every p99 is within its target, or, with `attainment`, when at least that share of
    the requests meets every target (goodput / request rate)."""
    res = simulate(m, w, engine=cfg, replicas=replicas, router=router, summarize=False)
    reqs = res.reqs
    cols = report.latency_columns(reqs, m.ttft_offset_s)
    pct = {key: metrics.percentiles(cols[key], key) for key in LATENCY}
    overloaded = report.overloaded(reqs, False, report.queue_growth(reqs))
    good = slo.met_count(cols["ttft_s"], cols["tpot_s"], cols["e2e_s"])
    makespan = max(max(reqs.finish_s), 1e-12)  # from time 0, as simulate's summary counts it
    if attainment is None:
        met = not overloaded
        for key in LATENCY:
            limit, value = getattr(slo, key), pct[key].p99
            if limit is not None and value is not None and value > limit:
                met = False
    else:
        met = not overloaded and good >= attainment * len(reqs)
    return Judged(
        met=met,
        overloaded=overloaded,
        requests=len(reqs),
        ttft_s=pct["ttft_s"],
        tpot_s=pct["tpot_s"],
        e2e_s=pct["e2e_s"],
        goodput_requests_per_s=good / makespan,
        slo_attainment=good / len(reqs),
        throughput_tokens_per_s=(sum(reqs.output) + len(reqs)) / makespan,
        makespan_s=makespan,
        prompt_tokens_mean=mean_tokens(reqs.prompt),
        output_tokens_mean=mean_tokens(reqs.output) + 1,
        kv_tokens=res.kv.tokens,
    )


def trial(
    m: Deployment, w: Workload, cfg: EngineConfig, slo: metrics.Slo, rate: float, seed: int, requests: int
) -> Trial:
    """Simulate one run and judge it against the SLO."""
    if not rate <= MAX_RATE_PER_S:
        raise RidgelineError(
            f"the search reached {rate:.3g} requests/s per replica, beyond the {MAX_RATE_PER_S:g}/s the "
            "simulator plans for: check the SLO and the workload"
        )
    run = replace(w, rate_per_s=rate, seed=seed, requests=requests, duration_s=None)
    j = judge_run(m, run, cfg, slo)
    return Trial(rate, seed, j.met, j.overloaded, j.ttft_s.p99, j.tpot_s.p99, j.e2e_s.p99)


@dataclass(frozen=True)
class Guess:
    """What the core says a full replica serves, before any simulation."""

    rate_per_s: float
    in_system: float  # L = rate x E2E at that rate

    @property
    def requests(self) -> int:
        """Requests per run: RUN_TURNOVERS turnovers, in thousands, within the bounds."""
        return turnovers(RUN_TURNOVERS, self.in_system, MIN_REQUESTS)

    @property
    def screen_requests(self) -> int:
        """Requests per screening run: SCREEN_TURNOVERS turnovers."""
        return turnovers(SCREEN_TURNOVERS, self.in_system, MIN_SCREEN_REQUESTS)


def turnovers(count: int, in_system: float, least: int) -> int:
    """Requests for `count` turnovers of `in_system` requests, in thousands, within bounds."""
    n = math.ceil(count * in_system / 1000) * 1000
    return min(max(n, least), MAX_REQUESTS)


def first_guess(m: Deployment, w: Workload, cfg: EngineConfig) -> Guess:
    """Each request's prefill plus its share of M decode steps at the batch the KV cache or
    max_num_seqs allows: rate = 1 / (prefill + M x step / batch); E2E = prefill + M x step."""
    prompt, output = w.prompt.mean, w.output.mean
    kv = kv_cache(
        m, cfg.block_tokens, cfg.gpu_memory_utilization, cfg.max_num_seqs, cfg.max_num_batched_tokens
    )
    seqs = replica_limits(cfg, m.par.dp_ranks).max_num_seqs
    batch = max(1, min(seqs, kv.tokens // (prompt + output)))
    step_s = float(request.decode_step(m, prompt + output / 2, batch).time_s)
    prefill_s = float(request.prefill_step(m, prompt).time_s)
    rate = 1.0 / (prefill_s + output * step_s / batch)
    return Guess(rate, min(batch, rate * (prefill_s + output * step_s)))


def seed_rate(
    judge: Callable[[float], Trial], guess: float, floor: float, tick: Tick, step: float = NEAR
) -> tuple[float, list[Trial]]:
    """The highest meeting rate for one seed: bracket from the guess by `step`, squaring the
    step (up to BRACKET) each time the bracket stays open, then bisect (geometric)."""
    trials: list[Trial] = []

    def met(rate: float) -> bool:
        t = judge(rate)
        trials.append(t)
        tick()
        return t.met

    lo, hi = guess, guess
    if met(guess):
        for _ in range(MAX_BRACKET_STEPS):
            hi = lo * step
            if not met(hi):
                break
            lo, step = hi, min(step * step, BRACKET)
        else:
            raise RidgelineError(
                f"every rate up to {hi:.3g}/s meets the SLO; tighten it or check the workload"
            )
    else:
        for _ in range(MAX_DOWN_STEPS):
            lo = hi / step
            if lo <= floor:
                return floor, trials
            if met(lo):
                break
            hi, step = lo, min(step * step, BRACKET)
        else:
            return floor, trials
    while hi / lo > TOLERANCE:
        mid = math.sqrt(lo * hi)
        if met(mid):
            lo = mid
        else:
            hi = mid
    return lo, trials


def capacity(
    deployment: Deployment,
    workload: Workload,
    slo: metrics.Slo,
    target_rate_per_s: float | None = None,
    engine: EngineConfig | None = None,
    requests: int | None = None,
    seeds: int = 5,
    price_per_gpu_hour: float | None = None,
    tick: Tick | None = None,
    exhaustive: bool = False,
    settle: bool = True,
) -> Capacity:
    """The plan for one deployment; `requests` per run defaults to RUN_TURNOVERS turnovers.
    The seeds' rates are found with screening runs of SCREEN_TURNOVERS turnovers and the
    chosen rate confirmed at full length (`exhaustive`: every run at full length, one
    confirming run). Where the screens leave the fleet's size open, the seeds are searched
    again at full length; without `settle` the screens' estimate is confirmed as it is (a
    band's ends: `banded`)."""
    cfg = engine or EngineConfig()
    tick = tick or (lambda: None)
    check_plan(target_rate_per_s, requests, seeds)
    if not isinstance(workload, Workload) or not isinstance(cfg, EngineConfig):
        raise RidgelineError("capacity() takes a Workload and an EngineConfig")
    if not isinstance(slo, metrics.Slo):
        raise RidgelineError(f"slo must be a metrics.Slo, got {type(slo).__name__}")
    check_slo(slo)
    after = seeds + CONFIRM_SEEDS * MAX_CONFIRM_STEPS  # the screen's seeds, then the confirming runs'
    if workload.seed + after > MAX_SEED:
        raise RidgelineError(
            f"--seed {workload.seed} leaves no room for the {after} seeds after it; "
            f"give at most {MAX_SEED - after}"
        )
    m = deployment
    price = (
        m.hw.price_per_hour_usd if price_per_gpu_hour is None else check_price("--price", price_per_gpu_hour)
    )
    check_context(workload, m.arch.max_context, m.arch.name)
    first = first_guess(m, workload, cfg)
    if not (math.isfinite(first.rate_per_s) and first.rate_per_s > 0):
        raise RidgelineError(
            f"the core's first guess of the rate is {first.rate_per_s!r}; cannot plan from it"
        )
    n = first.requests if requests is None else requests
    if max(n, 200) / (first.rate_per_s / 1000) > MAX_SPAN_S:
        raise RidgelineError(
            f"one request takes about {1 / first.rate_per_s:.3g} s of a full replica on {m.par.gpus}x "
            f"{m.hw.name}: too slow to plan runs of {n:,} requests; choose a faster deployment"
        )
    floor = alone_check(m, workload, cfg, slo, first.rate_per_s, tick)

    def screen(requests: int) -> tuple[list[float], list[Trial]]:
        """Each seed's highest meeting rate in runs of `requests`, from the core's guess."""
        rates: list[float] = []
        trials: list[Trial] = []
        for i in range(seeds):

            def judge(rate: float, seed: int = workload.seed + i) -> Trial:
                return trial(m, workload, cfg, slo, rate, seed, requests)

            found, tried = seed_rate(
                judge, statistics.fmean(rates) if rates else first.rate_per_s, floor, tick
            )
            rates.append(found)
            trials += tried
        return rates, trials

    screen_n = n if exhaustive else min(n, first.screen_requests)
    rates, trials = screen(screen_n)
    if settle and screen_n < n and not settled(rates, target_rate_per_s):
        screen_n = n  # the short runs' spread leaves the fleet's size open: search at full length
        rates, more = screen(n)
        trials += more
    mean, sd = statistics.fmean(rates), statistics.stdev(rates)
    best = seeds_estimate(rates)
    runs = 1 if screen_n == n else CONFIRM_SEEDS
    res, confirm = confirmed(m, workload, cfg, slo, best, n, runs, seeds, floor, sd / mean, tick)
    best = confirm[0].rate_per_s
    trials += confirm
    s = res.summary
    assert s is not None  # simulate() summarizes unless told not to
    prompt_mean = mean_tokens(res.reqs.prompt)
    output_mean = mean_tokens(res.reqs.output) + 1  # tokens emitted: M + 1
    fleet_rate = best if target_rate_per_s is None else target_rate_per_s
    replicas = replicas_for(fleet_rate, best)
    gpus = replicas * m.par.gpus
    usd_per_hour = gpus * price
    tokens_per_hour = fleet_rate * 3600.0
    return Capacity(
        deployment={
            "model": m.arch.name,
            "gpu": m.hw.name,
            "weights": m.prec.weights,
            "tp": m.par.tp,
            "pp": m.par.pp,
            "ep": m.par.ep,
            "dp_attention": m.par.dp_attention,
            "gpus_per_replica": m.par.gpus,
            "kv_tokens": res.kv.tokens,
        },
        slo={"ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s, "e2e_s": slo.e2e_s},
        requests_per_run=n,
        seeds=seeds,
        max_rate_per_replica=best,
        seed_rates=rates,
        at_max={
            "rate_per_s": best,
            "seed": confirm[0].seed,
            "ttft_p99_s": s.ttft_s.p99,
            "tpot_p99_s": s.tpot_s.p99,
            "e2e_p99_s": s.e2e_s.p99,
            "met": s.met,
            "slo_attainment": s.slo_attainment,
            "throughput_tokens_per_s": s.throughput_tokens_per_s,
            "input_tokens_per_s": s.input_tokens_per_s,
            "mean_batch": s.utilisation.mean_batch,
            "prompt_tokens_mean": prompt_mean,
            "output_tokens_mean": output_mean,
        },
        target_rate_per_s=target_rate_per_s,
        replicas=replicas,
        gpus=gpus,
        price_per_gpu_hour_usd=price,
        usd_per_hour=usd_per_hour,
        usd_per_million_tokens=usd_per_hour / (tokens_per_hour * (prompt_mean + output_mean)) * 1e6,
        usd_per_million_output_tokens=usd_per_hour / (tokens_per_hour * output_mean) * 1e6,
        confidence=Confidence(
            screen_requests=screen_n,
            seed_rate_sd=sd / mean,
            confirm_requests=n,
            confirm_runs=len(confirm),
            confirm_met=sum(t.met for t in confirm),
        ),
        trials=trials,
        warnings=[w for w in s.warnings if w.startswith(report.SERVER_BOUND)],
    )


def seeds_estimate(rates: list[float]) -> float:
    """The rate the seeds' runs meet about 98% of the time: mean - 2 sd, and no more than the
    lowest seed's."""
    return min(statistics.fmean(rates) - 2 * statistics.stdev(rates), min(rates))


def replicas_for(fleet_rate_per_s: float, rate_per_replica: float) -> int:
    """Replicas of `rate_per_replica` each that carry the fleet's rate (at least one)."""
    return max(1, math.ceil(fleet_rate_per_s / rate_per_replica - 1e-9))


def settled(rates: list[float], target_rate_per_s: float | None) -> bool:
    """The screen decides the fleet: its estimate (mean - 2 sd) and the seeds' mean rate need
    the same number of replicas for the target. Without a target there is no fleet to size,
    and the screen's estimate stands once confirmed."""
    if target_rate_per_s is None:
        return True
    lo = seeds_estimate(rates)
    if lo <= 0:
        return False
    return replicas_for(target_rate_per_s, lo) == replicas_for(target_rate_per_s, statistics.fmean(rates))


def confirmed(
    m: Deployment,
    w: Workload,
    cfg: EngineConfig,
    slo: metrics.Slo,
    rate: float,
    requests: int,
    runs: int,
    seeds: int,
    floor: float,
    spread: float,
    tick: Tick,
) -> tuple[SimResult, list[Trial]]:
    """Full-length runs at the screened rate, each with a fresh seed: while one misses, step
    the rate down by the seeds' spread (1% at least) and run again, MAX_CONFIRM_STEPS
    times at most. Returns the first run at the rate that stood (summarized: the plan reports its
    p99s) and the trials at that rate."""
    seed = w.seed + seeds  # the seeds after the screen's
    for _ in range(MAX_CONFIRM_STEPS if runs > 1 else 1):
        if rate <= floor:
            raise unreachable(m, slo, w)
        at = replace(w, rate_per_s=rate, seed=seed, requests=requests, duration_s=None)
        res = simulate(m, at, engine=cfg, slo=slo, band=False)  # the plan's band is `banded`'s
        tick()
        s = res.summary
        assert s is not None
        tried = [Trial(rate, seed, s.met, s.overloaded, s.ttft_s.p99, s.tpot_s.p99, s.e2e_s.p99)]
        for k in range(1, runs):
            if not tried[-1].met:
                break
            tried.append(trial(m, w, cfg, slo, rate, seed + k, requests))
            tick()
        seed += runs
        if all(t.met for t in tried) or runs == 1:
            return res, tried
        rate /= 1 + max(spread, TOLERANCE - 1)
    return res, tried


def alone_check(
    m: Deployment, w: Workload, cfg: EngineConfig, slo: metrics.Slo, guess: float, tick: Tick
) -> float:
    """At a rate where requests seldom overlap the SLO must hold, or no rate can meet it.
    Returns that rate: the floor of the search."""
    floor = guess / 1000.0
    t = trial(m, w, cfg, slo, floor, w.seed, 200)
    tick()
    if not t.met:
        raise unreachable(m, slo, w, t)
    return floor


def unreachable(m: Deployment, slo: metrics.Slo, w: Workload, t: Trial | None = None) -> RidgelineError:
    alone = request.request_timeline(m, w.prompt.mean, w.output.mean)
    seen = (
        f"; alone, a request of {w.prompt.mean:,} + {w.output.mean:,} tokens has TTFT "
        f"{alone.ttft_s:.3g} s and TPOT {alone.tpot_s:.3g} s"
    )
    if t is not None:
        seen += f" (p99 of lone requests: TTFT {t.ttft_p99_s:.3g} s, TPOT {t.tpot_p99_s or 0:.3g} s)"
    targets = asdict(slo).items()
    limits = ", ".join(f"{k.replace('_s', '').upper()} < {v:g} s" for k, v in targets if v is not None)
    return RidgelineError(
        f"no request rate meets the p99 SLO ({limits}) on {m.par.gpus}x {m.hw.name}{seen}: "
        "relax the SLO or choose a faster deployment"
    )


def compare(
    deployments: list[Deployment],
    workload: Workload,
    slo: metrics.Slo,
    target_rate_per_s: float | None,
    engine: EngineConfig | None = None,
    requests: int | None = None,
    seeds: int = 5,
    price_per_gpu_hour: float | None = None,
    tick: Tick | None = None,
    exhaustive: bool = False,
    band: bool = False,
) -> list[Capacity]:
    """Each deployment planned on the same workload, cheapest per million tokens first; with
    `band`, each again at its engine's band's ends (`banded`), where its profile has one."""
    if not 1 <= len(deployments) <= MAX_DEPLOYMENTS:
        raise RidgelineError(f"plan 1 to {MAX_DEPLOYMENTS} deployments at a time, not {len(deployments):,}")
    check_plan(target_rate_per_s, requests, seeds, len(deployments))

    def plan_on(d: Deployment, settle: bool = True) -> Capacity:
        args = (workload, slo, target_rate_per_s, engine, requests, seeds, price_per_gpu_hour, tick)
        return capacity(d, *args, exhaustive=exhaustive, settle=settle)

    def end_on(d: Deployment) -> Capacity:
        """A band's end: the screens' estimate, confirmed, is close enough for an end of an
        80% interval, and the fleet they leave open is within the band's width."""
        return plan_on(d, settle=False)

    plans = [plan_on(d) for d in deployments]
    if band:
        pairs = zip(plans, deployments, strict=True)
        plans = [replace(p, uncertainty=banded(d, end_on, p)) for p, d in pairs]
    return sorted(plans, key=lambda p: p.usd_per_million_tokens)
