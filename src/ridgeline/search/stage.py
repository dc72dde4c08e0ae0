"""The simulate stage: one point, one run, one row.

Every surviving point is simulated once, on its own seed (space.point_seed), with the code
`plan` bisects on (simulate.plan.judge_run): p50, p90 and p99 of TTFT, TPOT and E2E, goodput
and the verdict. What a row holds is COLUMNS, the Parquet file's schema and the `--json`
rows alike. The cost of a point at the fleet's rate R:

    GPUs = replicas x TP x PP;  $ per hour = GPUs x price per GPU-hour
    $ per million tokens = $ per hour / (R x 3600 x (prompt + output tokens per request)) x 1e6

counting every token, input and output (and output alone in usd_per_million_output_tokens);
tokens per request are the run's own means, output counting the tokens emitted (M + 1).

A worker receives the Context once (a pool worker's arguments, a Ray object) and Tasks, so
what crosses to a worker per point is a few numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ridgeline import metrics
from ridgeline.checks import one_line
from ridgeline.deployment import Deployment
from ridgeline.errors import RidgelineError
from ridgeline.simulate.engine import EngineConfig
from ridgeline.simulate.plan import judge_run
from ridgeline.simulate.workload import Workload

# name -> Arrow type; the order is the file's. Nulls: the latencies of an error row, a TPOT
# when no request decoded.
COLUMNS: dict[str, str] = {
    "key": "string",
    "model": "string",
    "gpu": "string",
    "tp": "int64",
    "pp": "int64",
    "ep": "int64",
    "weights": "string",
    "maths": "string",
    "kv_dtype": "string",
    "engine": "string",
    "policy": "string",
    "max_num_seqs": "int64",
    "max_num_batched_tokens": "int64",
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
}
STATUSES = ("met", "missed", "error")


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
    """One point to simulate."""

    key: str
    deployment: int
    max_num_seqs: int
    max_num_batched_tokens: int
    replicas: int
    seed: int


def simulate_task(ctx: Context, task: Task) -> dict[str, Any]:
    """One point's row. A run the simulator refuses (a request too long for the cache,
    a replica past its step limit) is a row with status "error" and the reason."""
    d = ctx.deployments[task.deployment]
    price = d.hw.price_per_hour_usd if ctx.price_per_gpu_hour is None else ctx.price_per_gpu_hour
    gpus = task.replicas * d.gpus
    usd_per_hour = gpus * price
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(
        key=task.key,
        model=ctx.model,
        gpu=d.hw.name,
        tp=d.par.tp,
        pp=d.par.pp,
        ep=d.par.ep,
        weights=d.prec.weights,
        maths=d.prec.maths,
        kv_dtype=d.prec.kv,
        engine=d.engine.name if d.engine is not None else None,
        policy=d.engine.scheduler.policy if d.engine is not None else "vllm",
        max_num_seqs=task.max_num_seqs,
        max_num_batched_tokens=task.max_num_batched_tokens,
        replicas=task.replicas,
        gpus_per_replica=d.gpus,
        gpus=gpus,
        seed=task.seed,
        price_per_gpu_hour_usd=price,
        usd_per_hour=usd_per_hour,
    )
    try:
        cfg = EngineConfig(
            task.max_num_seqs,
            task.max_num_batched_tokens,
            ctx.block_tokens,
            ctx.gpu_memory_utilization,
            True,
            row["policy"],
        )
        w = replace(ctx.workload, seed=task.seed)
        j = judge_run(
            d, w, cfg, ctx.slo, replicas=task.replicas, router=ctx.router, attainment=ctx.attainment
        )
    except RidgelineError as exc:
        row.update(status="error", error=one_line(str(exc), 300))
        return row
    tokens_per_hour = ctx.rate_per_s * 3600.0
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
        usd_per_million_tokens=usd_per_hour
        / (tokens_per_hour * (j.prompt_tokens_mean + j.output_tokens_mean))
        * 1e6,
        usd_per_million_output_tokens=usd_per_hour / (tokens_per_hour * j.output_tokens_mean) * 1e6,
    )
    for name, p in (("ttft", j.ttft_s), ("tpot", j.tpot_s), ("e2e", j.e2e_s)):
        row[f"{name}_p50_s"], row[f"{name}_p90_s"], row[f"{name}_p99_s"] = p.p50, p.p90, p.p99
    return row


# --- in a worker: the context arrives once, the tasks one by one ------------------------------

_CONTEXTS: dict[str, Context] = {}


def pool_worker(ctx: Context, inbox: Any, outbox: Any) -> None:
    """A pool worker: runs of points from `inbox` until a None, each row to `outbox` as it
    finishes. Ctrl-C is the parent's to handle (it keeps every finished row, then stops the
    workers), so a worker ignores SIGINT."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        while (group := inbox.get()) is not None:
            for task in group:
                outbox.put(("row", simulate_task(ctx, task)))
    except Exception as exc:  # a bug: the parent says so in one line
        outbox.put(("error", f"{type(exc).__name__}: {exc}"))


def ray_task(boxed: list[Any], token: str, task: Task) -> dict[str, Any]:
    """A Ray task: the context is fetched once per worker process (it arrives boxed, so Ray
    does not fetch it for every task)."""
    ctx = _CONTEXTS.get(token)
    if ctx is None:
        import ray

        ctx = ray.get(boxed[0])
        _CONTEXTS.clear()
        _CONTEXTS[token] = ctx
    return simulate_task(ctx, task)
