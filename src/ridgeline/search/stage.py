"""The simulate stage's work on one point: its whole run, or a screen of its first requests.

A point's run is on its own seed (space.point_seed) and judged with the code `plan` bisects
on (simulate.plan.judge_run): p50, p90 and p99 of TTFT, TPOT and E2E, goodput and the
verdict. What a row holds is COLUMNS, the Parquet file's schema and the `--json` rows alike.

A screen (`Task.screen` requests) simulates only the first requests of that same run and
returns lower bounds on the whole run's p99s (`Screened`): adding the later requests never
serves an earlier one faster (fidelity.py says why that holds and how it is checked), so each
of the first requests' latencies in the screen is at most its latency in the whole run, and
the k-th largest value of the screen is at most the k-th largest of the run, on which the
run's p99 rests (k = n - floor(0.99 (n - 1)) of n values; metrics.percentiles interpolates
linearly, so the p99 is at least that value). The cost of a point at the fleet's rate R:

    GPUs = replicas x TP x PP;  $ per hour = GPUs x price per GPU-hour
    $ per million tokens = $ per hour / (R x 3600 x (prompt + output tokens per request)) x 1e6

counting every token, input and output (and output alone in usd_per_million_output_tokens);
tokens per request are the run's own means, output counting the tokens emitted (M + 1).

A worker receives the Context once (a pool worker's arguments, a Ray object) and Tasks, so
what crosses to a worker per point is a few numbers.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any

from ridgeline import metrics
from ridgeline.checks import one_line
from ridgeline.deployment import Deployment
from ridgeline.errors import RidgelineError
from ridgeline.simulate import report
from ridgeline.simulate.engine import EngineConfig
from ridgeline.simulate.plan import judge_run
from ridgeline.simulate.run import engine_config, mean_tokens, simulate
from ridgeline.simulate.workload import Trace, Workload, make_requests, request_columns

# name -> Arrow type; the order is the file's. Nulls: the latencies of an error row, a TPOT
# when no request decoded.
COLUMNS: dict[str, str] = {
    "key": "string",
    "model": "string",
    "gpu": "string",
    "tp": "int64",
    "pp": "int64",
    "ep": "int64",
    "dp_attention": "bool",
    "weights": "string",
    "maths": "string",
    "kv_dtype": "string",
    "engine": "string",
    "policy": "string",
    "max_num_seqs": "int64",
    "max_num_batched_tokens": "int64",
    "chunked_prefill": "bool",
    "replicas": "int64",
    "gpus_per_replica": "int64",
    "gpus": "int64",
    "seed": "int64",
    "status": "string",  # met, missed or error
    "error": "string",
    "requests": "int64",
    "kv_tokens": "int64",
    "overloaded": "bool",
    "ttft_p50_s": "double",
    "ttft_p90_s": "double",
    "ttft_p99_s": "double",
    "tpot_p50_s": "double",
    "tpot_p90_s": "double",
    "tpot_p99_s": "double",
    "e2e_p50_s": "double",
    "e2e_p90_s": "double",
    "e2e_p99_s": "double",
    "goodput_requests_per_s": "double",
    "slo_attainment": "double",
    "throughput_tokens_per_s": "double",
    "prompt_tokens_mean": "double",
    "output_tokens_mean": "double",
    "price_per_gpu_hour_usd": "double",
    "usd_per_hour": "double",
    "usd_per_million_tokens": "double",
    "usd_per_million_output_tokens": "double",
    "fidelity": "string",  # full, screen or bound: how much of its run the point needed
    "dominated_by": "string",  # status dominated: the point that beats it
    "ttft_p99_least_s": "double",  # the least the full run's p99 can be (closed form, screen)
    "tpot_p99_least_s": "double",
    "e2e_p99_least_s": "double",
    "slo_attainment_most": "double",  # the most share of requests the full run can have meet
}
STATUSES = ("met", "missed", "dominated", "error")
FIDELITIES = ("full", "screen", "bound")
LEAST = {"ttft_s": "ttft_p99_least_s", "tpot_s": "tpot_p99_least_s", "e2e_s": "e2e_p99_least_s"}
HOW = ("fidelity", "dominated_by", *LEAST.values(), "slo_attainment_most")  # how a point was decided


@dataclass(frozen=True)
class Context:
    """What every point of one search shares."""

    model: str
    workload: Workload  # each point runs it on its own seed
    slo: metrics.Slo
    attainment: float | None  # --goodput: the share of requests that must meet every target
    rate_per_s: float  # the fleet's offered rate, for the cost of a token
    router: str
    block_tokens: int
    gpu_memory_utilization: float
    price_per_gpu_hour: float | None
    deployments: tuple[Deployment, ...]  # Task.deployment indexes it


@dataclass(frozen=True)
class Task:
    """One point to simulate: its whole run, or (`screen` > 0) that many of its first requests."""

    key: str
    deployment: int
    max_num_seqs: int
    max_num_batched_tokens: int
    replicas: int
    seed: int
    screen: int = 0
    chunked_prefill: bool = True

    def price_per_gpu_hour(self, ctx: Context) -> float:
        d = ctx.deployments[self.deployment]
        return d.hw.price_per_hour_usd if ctx.price_per_gpu_hour is None else ctx.price_per_gpu_hour

    def usd_per_hour(self, ctx: Context) -> float:
        return self.replicas * ctx.deployments[self.deployment].gpus * self.price_per_gpu_hour(ctx)


@dataclass(frozen=True)
class Screened:
    """What a screen of a point's first requests says of its whole run: each p99's least
    value (None when the screen holds too few values to say), the most share of requests
    that can meet every target, and the whole run's own token means (its cost)."""

    key: str
    requests: int  # simulated: the screen's
    ttft_s: float | None
    tpot_s: float | None
    e2e_s: float | None
    attainment: float
    prompt_tokens_mean: float
    output_tokens_mean: float  # tokens emitted, M + 1
    kv_tokens: int
    error: str | None = None


def token_costs(
    ctx: Context, usd_per_hour: float, prompt_mean: float, output_mean: float
) -> dict[str, float]:
    """$ per million tokens (input and output) and per million output tokens at the fleet's rate."""
    tokens_per_hour = ctx.rate_per_s * 3600.0
    return {
        "usd_per_million_tokens": usd_per_hour / (tokens_per_hour * (prompt_mean + output_mean)) * 1e6,
        "usd_per_million_output_tokens": usd_per_hour / (tokens_per_hour * output_mean) * 1e6,
    }


def run_means(ctx: Context, task: Task) -> tuple[float, float]:
    """The prompt and emitted-token means of a point's whole run (as judge_run counts them),
    from its requests alone: no simulation."""
    d = ctx.deployments[task.deployment]
    reqs = make_requests(
        replace(ctx.workload, seed=task.seed), d.arch.max_context, ctx.block_tokens, d.arch.name
    )
    return statistics.fmean(reqs.prompt), statistics.fmean(reqs.output) + 1


def engine(ctx: Context, task: Task) -> EngineConfig:
    """The point's knobs over its engine profile's scheduler (policy, prefix caching)."""
    return engine_config(
        ctx.deployments[task.deployment], task.max_num_seqs, task.max_num_batched_tokens,
        ctx.block_tokens, ctx.gpu_memory_utilization, chunked_prefill=task.chunked_prefill,
    )  # fmt: skip


def point_row(ctx: Context, task: Task) -> dict[str, Any]:
    """A row with the point's own columns filled (what it is, what it costs an hour)."""
    d = ctx.deployments[task.deployment]
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(
        key=task.key,
        model=ctx.model,
        gpu=d.hw.name,
        tp=d.par.tp,
        pp=d.par.pp,
        ep=d.par.ep,
        dp_attention=d.par.dp_attention,
        weights=d.prec.weights,
        maths=d.prec.maths,
        kv_dtype=d.prec.kv,
        engine=d.engine.name if d.engine is not None else None,
        policy=d.engine.scheduler.policy if d.engine is not None else "vllm",
        max_num_seqs=task.max_num_seqs,
        max_num_batched_tokens=task.max_num_batched_tokens,
        chunked_prefill=task.chunked_prefill,
        replicas=task.replicas,
        gpus_per_replica=d.gpus,
        gpus=task.replicas * d.gpus,
        seed=task.seed,
        price_per_gpu_hour_usd=task.price_per_gpu_hour(ctx),
        usd_per_hour=task.usd_per_hour(ctx),
    )
    return row


def simulate_task(ctx: Context, task: Task) -> dict[str, Any] | Screened:
    """A point's row from its whole run, or its screen (`task.screen`). A run the simulator
    refuses (a request too long for the cache, a replica past its step limit) is a row with
    status "error" and the reason."""
    if task.screen:
        return screen(ctx, task)
    d = ctx.deployments[task.deployment]
    row = point_row(ctx, task)
    row["fidelity"] = "full"
    try:
        w = replace(ctx.workload, seed=task.seed)
        j = judge_run(
            d,
            w,
            engine(ctx, task),
            ctx.slo,
            replicas=task.replicas,
            router=ctx.router,
            attainment=ctx.attainment,
        )
    except RidgelineError as exc:
        row.update(status="error", error=one_line(str(exc), 300))
        return row
    row.update(
        status="met" if j.met else "missed",
        requests=j.requests,
        kv_tokens=j.kv_tokens,
        overloaded=j.overloaded,
        goodput_requests_per_s=j.goodput_requests_per_s,
        slo_attainment=j.slo_attainment,
        throughput_tokens_per_s=j.throughput_tokens_per_s,
        prompt_tokens_mean=j.prompt_tokens_mean,
        output_tokens_mean=j.output_tokens_mean,
        **token_costs(ctx, row["usd_per_hour"], j.prompt_tokens_mean, j.output_tokens_mean),
    )
    for name, p in (("ttft", j.ttft_s), ("tpot", j.tpot_s), ("e2e", j.e2e_s)):
        row[f"{name}_p50_s"], row[f"{name}_p90_s"], row[f"{name}_p99_s"] = p.p50, p.p90, p.p99
    return row


def p99_rank(n: int) -> int:
    """k: a p99 of n values (linear interpolation) is at least their k-th largest."""
    return n - math.floor(0.99 * (n - 1))


def kth_largest(values: list[float | None], k: int) -> float | None:
    x = sorted(v for v in values if v is not None and v == v)  # without the missing (None, NaN)
    return x[len(x) - k] if len(x) >= k else None


def screen(ctx: Context, task: Task) -> Screened:
    """Simulate the first `task.screen` requests of the point's run (the same requests, the
    same seed, replayed as a trace) and bound the whole run's p99s from below. Round-robin
    routing sends request i to replica i mod R whatever the replicas are doing, so each
    replica serves its own requests alone: the screen is then the first replica's first
    requests, a screen R times as deep into the run for the same work."""

    d = ctx.deployments[task.deployment]
    w = replace(ctx.workload, seed=task.seed)
    alone = ctx.router == "round-robin"
    try:
        arrival, prompt, output, _, _ = request_columns(w, d.arch.max_context, ctx.block_tokens, d.arch.name)
        mine = slice(0, task.screen * task.replicas, task.replicas) if alone else slice(0, task.screen)
        first = Trace(tuple(arrival[mine]), tuple(prompt[mine]), tuple(output[mine]), "screen")
        n = len(first.arrival_s)
        res = simulate(
            d, replace(w, trace=first, requests=None, duration_s=None), engine=engine(ctx, task),
            replicas=1 if alone else task.replicas, router=ctx.router, summarize=False,
        )  # fmt: skip
    except RidgelineError as exc:
        return Screened(task.key, 0, None, None, None, 1.0, math.nan, math.nan, 0, one_line(str(exc), 300))
    cols = report.latency_columns(res.reqs, d.ttft_offset_s)
    whole = len(arrival)
    decoding = sum(1 for m in output if m > 0)
    bad = n - ctx.slo.met_count(cols["ttft_s"], cols["tpot_s"], cols["e2e_s"])  # they miss in the run too
    return Screened(
        key=task.key,
        requests=n,
        ttft_s=kth_largest(cols["ttft_s"], p99_rank(whole)),
        tpot_s=kth_largest(cols["tpot_s"], p99_rank(decoding)) if decoding else None,
        e2e_s=kth_largest(cols["e2e_s"], p99_rank(whole)),
        attainment=(whole - bad) / whole,
        prompt_tokens_mean=mean_tokens(prompt),  # the whole run's, as judge_run takes them
        output_tokens_mean=mean_tokens(output) + 1,
        kv_tokens=res.kv.tokens,
    )


# --- in a worker: the context arrives once, the tasks one by one ------------------------------

_CONTEXTS: dict[str, Context] = {}


def pool_worker(pipe: Any, inbox: Any, outbox: Any) -> None:
    """A pool worker: its context from `pipe` (None: none is coming), then runs of points
    from `inbox` until a None, each result to `outbox` as it finishes, named by its point and
    screen. Ctrl-C is the parent's to handle (it keeps every finished row, then stops the
    workers), so a worker ignores SIGINT."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # forked: not the parent's handler
    import numpy  # noqa: F401  # a long run's need: loaded while the prune stage runs

    try:
        ctx = pipe.recv()
    except EOFError:
        return
    if ctx is None:
        return
    try:
        while (group := inbox.get()) is not None:
            for task in group:
                outbox.put(("done", (task.key, task.screen), simulate_task(ctx, task)))
    except Exception as exc:  # a bug: the parent says so in one line
        outbox.put(("error", None, f"{type(exc).__name__}: {exc}"))


def ray_task(boxed: list[Any], token: str, task: Task) -> dict[str, Any] | Screened:
    """A Ray task: the context is fetched once per worker process (it arrives boxed, so Ray
    does not fetch it for every task)."""
    ctx = _CONTEXTS.get(token)
    if ctx is None:
        import ray

        ctx = ray.get(boxed[0])
        _CONTEXTS.clear()
        _CONTEXTS[token] = ctx
    return simulate_task(ctx, task)
