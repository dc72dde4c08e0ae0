"""search(): the space against an SLO, in two stages, to an answer.

1. prune (prune.py): the core's closed forms remove every point whose simulation could not
   keep it: it does not build, does not fit in memory, or misses a target even alone;
2. simulate (fidelity.py, stage.py): every survivor is decided on its own seed, with a
   screen of its first requests or its whole run as the answer needs, on the chosen executor
   (executors.py), its row written to the results folder (store.py) as it is decided;
3. answer (answer.py, launch.py): the cheapest point that met the SLO, the Pareto front of
   $ per million tokens against p99 TTFT and TPOT, and the cheapest point's launch command.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ridgeline import __version__, metrics
from ridgeline.architecture import Architecture
from ridgeline.checks import check_fraction, check_number, check_price, check_size
from ridgeline.engines import LOAD
from ridgeline.errors import RidgelineError
from ridgeline.interrupts import SigtermInterrupts
from ridgeline.search import answer as answers
from ridgeline.search.executors import Executor, PoolSession
from ridgeline.search.fidelity import SCREENS, WHOLE_BATCH, WINDOW, Work, simulate_stage
from ridgeline.search.launch import launch
from ridgeline.search.prune import demand, prune
from ridgeline.search.space import Space, point_seed
from ridgeline.search.stage import Context, Task, simulate_task
from ridgeline.search.store import Store
from ridgeline.simulate.kvcache import MAX_BLOCK_TOKENS
from ridgeline.simulate.report import server_warning
from ridgeline.simulate.router import check_router
from ridgeline.simulate.run import check_slo
from ridgeline.simulate.workload import Lengths, Workload, check_context, make_requests

MAX_SEARCH_REQUESTS = 1_000_000_000  # survivors x requests per point: about 11 hours of one core
TURNOVERS = 10  # --requests auto: requests per point / requests in the fleet at once
MIN_REQUESTS, MAX_REQUESTS = 1000, 20000  # --requests auto's range
DECIDING = {"one_in": list(SCREENS), "window": WINDOW, "whole_batch": WHOLE_BATCH}  # a resumed run's too
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Settings:
    """Everything but the space: the model, the traffic, the SLO and the engine's memory."""

    model: str  # as given: a catalogue name, a config.json, a .gguf or org/name
    arch: Architecture
    workload: Workload  # open loop (a rate) or a trace; `requests` per point
    slo: metrics.Slo
    auto_requests: bool = False  # requests per point from the fleet's turnovers (auto_requests())
    attainment: float | None = None  # --goodput
    router: str = "round-robin"
    block_tokens: int = 16
    gpu_memory_utilization: float = 0.9
    price_per_gpu_hour: float | None = None
    gpu_file: str | None = None
    exhaustive: bool = False  # every survivor run whole, no screen (the answer is the same)


@dataclass
class Stages:
    """How many points each stage removed, and how long it took."""

    points: int = 0  # in the space (an auto replica count removed with its configuration: once)
    invalid: int = 0  # do not build
    memory: int = 0  # do not fit
    latency: int = 0  # miss a target even alone
    survivors: int = 0  # left for the simulate stage
    resumed: int = 0  # of them, already in the results folder
    simulated: int = 0  # decided by this run
    screened: int = 0  # screens run (the first requests of a point's run)
    full: int = 0  # whole runs
    met: int = 0
    missed: int = 0
    dominated: int = 0  # beaten by a point that met: in no answer, whatever their run
    errors: int = 0  # runs the simulator refused
    prune_s: float = 0.0
    simulate_s: float = 0.0


@dataclass
class SearchResult:
    model: str
    workload: dict[str, Any]
    slo: dict[str, Any]
    space: dict[str, Any]
    executor: dict[str, Any]
    stages: Stages
    cheapest: dict[str, Any] | None
    front: list[dict[str, Any]]
    front_of: str
    launch: dict[str, Any] | None
    out: str
    interrupted: str | None  # None, "SIGINT" or "SIGTERM"
    # the cheapest point run again at each end of its engine's band under load (`cheapest_band`)
    cheapest_band: dict[str, Any] | None = None
    notes: dict[str, str] = field(default_factory=dict)  # the prune stage's first reason of each kind
    warnings: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # every survivor's row, in the space's order

    def to_dict(self) -> dict[str, Any]:
        """The `--json` answer (the rows stay in the results folder)."""
        out = asdict(replace(self, rows=[]))  # not a deep copy of every row, to drop them
        del out["rows"]
        return out


def offered_rate(w: Workload) -> float:
    """The fleet's rate: --rate, or a trace's own (its requests over their span)."""
    if w.trace is None:
        assert w.rate_per_s is not None
        return float(w.rate_per_s)
    n = len(w.trace.arrival_s) if w.requests is None else min(w.requests, len(w.trace.arrival_s))
    span = w.trace.arrival_s[n - 1] - w.trace.arrival_s[0]
    if n < 2 or span <= 0:
        raise RidgelineError("the trace needs two requests at different times to have a rate to search for")
    return (n - 1) / span


def describe_workload(w: Workload, rate: float) -> dict[str, Any]:
    def lengths(x: Lengths) -> dict[str, Any]:
        return {"kind": x.kind, "mean": x.mean, "spread": x.spread, "values": len(x.values)}

    return {
        "arrival": "trace" if w.trace is not None else w.arrival,
        "rate_per_s": rate,
        "burstiness": w.burstiness,
        "requests_per_point": w.requests if w.trace is None else None,
        "seed": w.seed,
        "prompt": lengths(w.prompt),
        "output": lengths(w.output),
        "prefix_hit_rate": w.prefix_hit_rate,
        "shared_prefix_tokens": w.shared_prefix_tokens,
        "trace": w.trace.source if w.trace is not None else None,
    }


def fingerprint(s: Settings, rate: float) -> dict[str, Any]:
    """What a point's row depends on besides the point: a resumed folder must match it."""
    w = s.workload
    digest = hashlib.sha256()
    for part in (w.prompt.values, w.output.values):
        digest.update(repr(part).encode())
    if w.trace is not None:
        digest.update(repr((w.trace.arrival_s, w.trace.prompt, w.trace.output)).encode())
    return {
        "version": __version__,
        "model": s.arch.name,
        "workload": describe_workload(w, rate) | {"lengths_sha256": digest.hexdigest()},
        "slo": asdict(s.slo),
        "goodput": s.attainment,
        "router": s.router,
        "block_tokens": s.block_tokens,
        "gpu_memory_utilization": s.gpu_memory_utilization,
        "price_per_gpu_hour": s.price_per_gpu_hour,
        "screens": None if s.exhaustive else DECIDING,
    }


def auto_requests(rate_per_s: float, e2e_s: list[float]) -> int:
    """Requests per point for TURNOVERS turnovers of the fleet: by Little's law the fleet
    holds rate x E2E requests at once, E2E taken as the slowest surviving deployment's lone
    request (a run shorter than a few turnovers is mostly its own warm-up, and flatters a
    point near its capacity). In hundreds, from MIN_REQUESTS to MAX_REQUESTS."""
    in_system = rate_per_s * max(e2e_s, default=0.0)
    n = math.ceil(TURNOVERS * in_system / 100) * 100
    return min(max(n, MIN_REQUESTS), MAX_REQUESTS)


def cheapest_band(ctx: Context, task: Task, point: dict[str, Any]) -> dict[str, Any] | None:
    """The cheapest point's whole run again with its engine as slow as each end of the
    profile's band under load (Deployment.slowed): whether it still meets the SLO, and its
    p99s, at each end; None without a profile that has such a band. The band is the one at
    the share of the time a replica's API server is busy at the fleet's rate, with the
    `point`'s row's token means (Deployment.load_band). The answer is the cheapest point at
    the predicted speed: at the slow end another point may be."""
    d = ctx.deployments[task.deployment]
    if d.engine is None or d.band(LOAD) is None:
        return None
    per_replica = ctx.rate_per_s / task.replicas
    busy = d.server_share(per_replica, point["prompt_tokens_mean"], point["output_tokens_mean"])
    band = d.load_band(busy)
    assert band is not None  # a profile with a load band has one at any share
    ends = {}
    for end, factor in zip(("fast", "slow"), band, strict=True):
        slowed = list(ctx.deployments)
        slowed[task.deployment] = d.slowed(factor)
        row = simulate_task(replace(ctx, deployments=tuple(slowed)), replace(task, screen=0))
        assert isinstance(row, dict)  # a whole run (screen 0) is a row
        keys = ("status", "error", "slo_attainment", "ttft_p99_s", "tpot_p99_s", "e2e_p99_s")
        ends[end] = {k: row[k] for k in keys}
    return {"profile": d.engine.name, "time_ratio": list(band), "server_share": busy, **ends}


def check_settings(s: Settings) -> float:
    """The SLO, the workload against the model, and the fleet's rate; returns the rate."""
    check_slo(s.slo)
    if s.slo.ttft_s is None and s.slo.tpot_s is None and s.slo.e2e_s is None:
        raise RidgelineError("give an SLO to search against: --slo-ttft-p99 and/or --slo-tpot-p99 (seconds)")
    if s.attainment is not None:
        check_number("--goodput", s.attainment, lo=0.0, lo_open=True, hi=1.0, hint=" (a share of requests)")
    check_router(s.router)
    check_size("--block-tokens", s.block_tokens, 1, MAX_BLOCK_TOKENS)
    check_fraction("--gpu-memory-utilization", s.gpu_memory_utilization)
    if s.price_per_gpu_hour is not None:
        check_price("--price", s.price_per_gpu_hour)
    w = s.workload
    if w.closed:
        raise RidgelineError("search serves open-loop traffic: give --rate or --trace, not --concurrency")
    check_context(w, s.arch.max_context, s.arch.name)
    if w.trace is not None:  # a request beyond the context fails the whole search, here
        make_requests(w, s.arch.max_context, s.block_tokens, s.arch.name)
    return offered_rate(w)


def search(
    space: Space,
    s: Settings,
    executor: Executor,
    out: str,
    resume: bool = False,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> SearchResult:
    """Prune, simulate, answer. Ctrl-C (or SIGTERM) stops the simulate stage: every finished
    point is kept in `out`, and the answer covers them (`interrupted` says so)."""
    rate = check_settings(s)
    pool = executor.prestart()  # a local pool starts up while the prune stage runs
    try:
        return _search(space, s, executor, out, resume, overwrite, progress, rate, pool)
    finally:
        if pool is not None:
            pool.close()  # no-op once its session has closed it


def _search(
    space: Space,
    s: Settings,
    executor: Executor,
    out: str,
    resume: bool,
    overwrite: bool,
    progress: Progress | None,
    rate: float,
    pool: PoolSession | None,
) -> SearchResult:
    began = time.perf_counter()
    dem = demand(s.workload, s.arch.max_context, s.block_tokens)
    pruned = prune(
        space, s.arch, dem, s.slo, s.attainment, rate, s.block_tokens, s.gpu_memory_utilization,
        s.price_per_gpu_hour, s.gpu_file,
    )  # fmt: skip
    stages = Stages(
        points=pruned.points,
        invalid=pruned.invalid,
        memory=pruned.memory,
        latency=pruned.latency,
        survivors=len(pruned.survivors),
        prune_s=time.perf_counter() - began,
    )
    if pruned.points == pruned.invalid:
        raise RidgelineError(f"no point of the space builds: {pruned.notes.get('invalid', 'empty space')}")
    if s.auto_requests and s.workload.trace is None:
        n = auto_requests(rate, [b.e2e_s for b in pruned.bounds.values()])
        s = replace(s, workload=replace(s.workload, requests=n, duration_s=None))
    per_point = len(dem.prompt) if dem.exact else int(s.workload.requests or 0)
    requests = len(pruned.survivors) * per_point
    if requests > MAX_SEARCH_REQUESTS:
        raise RidgelineError(
            f"the simulate stage would run {len(pruned.survivors):,} points x {per_point:,} requests = "
            f"{requests:,} requests, more than {MAX_SEARCH_REQUESTS:,}: narrow the space or lower --requests"
        )
    store = Store(out, fingerprint(s, rate), resume, overwrite)
    shapes = list(pruned.deployments)
    index = {shape: i for i, shape in enumerate(shapes)}
    ctx = Context(
        model=s.arch.name,
        workload=s.workload,
        slo=s.slo,
        attainment=s.attainment,
        rate_per_s=rate,
        router=s.router,
        block_tokens=s.block_tokens,
        gpu_memory_utilization=s.gpu_memory_utilization,
        price_per_gpu_hour=s.price_per_gpu_hour,
        deployments=tuple(pruned.deployments[shape] for shape in shapes),
    )
    keys = {p.key: p for p in pruned.survivors}
    rows: dict[str, dict[str, Any]] = {r["key"]: r for r in store.existing if r["key"] in keys}
    stages.resumed = len(rows)
    tasks = [
        Task(p.key, index[p.shape], p.max_num_seqs, p.max_num_batched_tokens, p.replicas,
             point_seed(s.workload.seed, p.key), chunked_prefill=p.chunked_prefill)
        for p in pruned.survivors
    ]  # fmt: skip
    closed = [pruned.bounds[p.shape] for p in pruned.survivors]
    total = len(pruned.survivors)

    def on_row(row: dict[str, Any]) -> None:
        store.add(row)
        stages.simulated += 1
        if progress:
            progress(len(rows), total)

    if progress:
        progress(len(rows), total)
    interrupted: str | None = None
    stop = SigtermInterrupts()
    work = Work()
    simulating = time.perf_counter()
    try:
        with stop, executor.session(ctx, total - len(rows), pool) as session:
            simulate_stage(ctx, tasks, closed, session, rows, on_row, per_point, work, s.exhaustive)
    except KeyboardInterrupt:
        interrupted = stop.signame or "SIGINT"
    finally:
        store.flush()
    stages.screened, stages.full = work.screened, work.full
    stages.simulate_s = time.perf_counter() - simulating
    done = [rows[p.key] for p in pruned.survivors if p.key in rows]
    status = Counter(row["status"] for row in done)
    stages.met, stages.missed, stages.dominated, stages.errors = (
        status[k] for k in ("met", "missed", "dominated", "error")
    )
    best, front, front_of = answers.answer(done)
    command = None
    warnings = []
    band = None
    if best is not None and not interrupted:
        band = cheapest_band(ctx, next(t for t in tasks if t.key == best["key"]), best)
    if best is not None:
        d = pruned.deployments[keys[best["key"]].shape]
        found = launch(best, s.model, d, s.block_tokens, s.gpu_memory_utilization)
        command = found.to_dict() if found else None
        means = best["prompt_tokens_mean"], best["output_tokens_mean"]  # the run's: output is M + 1
        server = server_warning(d, *means, rate, int(best["replicas"]))
        if server:
            warnings.append(f"the cheapest point: {server}")
    if interrupted:
        warnings.append(
            f"interrupted ({interrupted}) after {len(done):,} of {total:,} points: --resume continues"
        )
    if not pruned.survivors:
        least = ", ".join(
            f"{name} {value:.3g} s"
            for name, value in (("TTFT", pruned.least_ttft_s), ("TPOT", pruned.least_tpot_s))
            if value is not None
        )
        warnings.append(
            "no point survives the prune stage" + (f"; the least p99s alone are {least}" if least else "")
        )
    elif best is None and not interrupted:
        warnings.append("no simulated point meets the SLO; the front shows the nearest (front_of: simulated)")
    return SearchResult(
        model=s.arch.name,
        workload=describe_workload(s.workload, rate),
        slo={**asdict(s.slo), "goodput": s.attainment},
        space=space.to_dict(),
        executor=executor.to_dict(),
        stages=stages,
        cheapest=best,
        front=front,
        front_of=front_of,
        launch=command,
        out=str(store.path),
        interrupted=interrupted,
        cheapest_band=band,
        notes=dict(pruned.notes),
        warnings=warnings,
        rows=done,
    )
