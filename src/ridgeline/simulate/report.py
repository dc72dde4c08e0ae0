"""From a finished run to the shared records and a summary.

Per-request records use the shared schema (ridgeline.metrics): TTFT from the arrival to the
end of the step that emitted the first token, E2E to the end of the last, queueing from the
arrival to the first admission, TPOT = (E2E - TTFT) / (N - 1). Over time, from the engines'
step rows: batch size, queue, KV utilisation, MFU = FLOPs / (time x GPUs x peak) and
MBU = bytes / (time x GPUs x bandwidth), with FLOPs and bytes from the core's ledger.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ridgeline import ledger, metrics
from ridgeline.deployment import Deployment
from ridgeline.simulate.engine import Engine
from ridgeline.simulate.requests import Requests

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ridgeline.simulate.workload import Workload

OVERLOAD_SLOPE = 0.05  # queueing delay growing by 5% of elapsed time: rate >= 1.05 x capacity


def make_records(reqs: Requests, ttft_offset_s: float, concurrency: int | None) -> list[dict[str, Any]]:
    """One flat record per request (tokens_source "simulated"), plus its replica."""
    import numpy as np

    arrival = np.asarray(reqs.arrival_s)
    ttft = (np.asarray(reqs.first_s) - arrival + ttft_offset_s).tolist()
    e2e = (np.asarray(reqs.finish_s) - arrival + ttft_offset_s).tolist()
    queue = (np.asarray(reqs.admit_s) - arrival).tolist()
    return [
        metrics.make_record(
            prompt_tokens=reqs.prompt[i],
            output_tokens=reqs.output[i] + 1,
            concurrency=concurrency,
            arrival_s=reqs.arrival_s[i],
            send_s=reqs.arrival_s[i],
            ttft_s=ttft[i],
            e2e_s=e2e[i],
            queue_s=queue[i],
            preemptions=reqs.preemptions[i],
            tokens_source="simulated",
            error=None,
            replica=reqs.replica[i],
        )
        for i in range(len(reqs))
    ]


def latency_columns(reqs: Requests, ttft_offset_s: float) -> dict[str, Any]:
    """Each request's TTFT, TPOT, E2E and queueing (metrics.LATENCY_KEYS) as arrays, as its
    record would state them; TPOT is NaN for a one-token answer."""
    import numpy as np

    arrival = np.asarray(reqs.arrival_s)
    ttft = np.asarray(reqs.first_s) - arrival + ttft_offset_s
    e2e = np.asarray(reqs.finish_s) - arrival + ttft_offset_s
    steps = np.asarray(reqs.output, dtype=np.int64)  # N - 1: the tokens after the first
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(steps > 0, (e2e - ttft) / steps, np.nan)  # metrics.tpot_s, elementwise
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "queue_s": np.asarray(reqs.admit_s) - arrival}


def summarize_requests(
    reqs: Requests, ttft_offset_s: float, duration_s: float, slo: metrics.Slo | None
) -> metrics.Summary:
    """`summarize(make_records(...))`, to the last digit, from the request arrays: no record
    is built (they are, lazily, when --out asks for them)."""
    latencies = latency_columns(reqs, ttft_offset_s)
    slo = slo or metrics.Slo()
    output_tokens = sum(reqs.output) + len(reqs)
    return metrics.summarize_columns(
        latencies,
        requests=len(reqs),
        output_tokens=output_tokens,
        good=slo.met_count(latencies["ttft_s"], latencies["tpot_s"], latencies["e2e_s"]),
        preemptions=sum(reqs.preemptions),
        duration_s=duration_s,
    )


def queue_growth(reqs: Requests) -> float:
    """Least-squares slope of queueing delay against arrival time: about 0 in a steady
    state, about rate / capacity - 1 when arrivals outrun the service (request i arrives at
    i / rate and is admitted near i / capacity)."""
    import numpy as np

    a = np.asarray(reqs.arrival_s)
    q = np.asarray(reqs.admit_s) - a
    if len(a) < 3 or float(np.ptp(a)) <= 0:
        return 0.0
    a = a - a.mean()
    return float(np.dot(a, q - q.mean()) / np.dot(a, a))


def overloaded(reqs: Requests, closed: bool) -> bool:
    """Arrivals outrun the service: the queueing delay keeps growing through the run, by more
    than OVERLOAD_SLOPE of the elapsed time and by more than a second in all."""
    if closed or len(reqs) < 3:
        return False
    import numpy as np

    slope = queue_growth(reqs)
    span = float(np.ptp(np.asarray(reqs.arrival_s)))
    return slope > OVERLOAD_SLOPE and slope * span > 1.0


def offered_rate(workload: Workload, reqs: Requests) -> float | None:
    """The fleet's offered rate: the workload's, or, for a trace or a closed loop, its
    requests over the span of their arrivals (None when they all arrive at once)."""
    if workload.trace is None and not workload.closed:
        return workload.rate_per_s
    arrivals = reqs.arrival_s
    if len(reqs) > 1 and arrivals[-1] > arrivals[0]:
        return finite((len(reqs) - 1) / (arrivals[-1] - arrivals[0]))
    return None


SERVER_BOUND = "server-bound"  # how the warning that a replica's API server is the bottleneck starts


def server_warning(
    m: Deployment, prompt_tokens: float, streamed_tokens: float, rate_per_s: float | None, replicas: int
) -> str | None:
    """An engine's OpenAI server is one process per replica that parses, tokenises and
    streams every request (EngineProfile.server_s: per request, prompt token and streamed
    token), so a replica passes at most 1 / that many requests a second to its engine. The
    simulated steps leave it out (its first-token cost at low load is the profile's
    first_token_s): a warning when the fleet's rate, shared evenly over the replicas, is past
    it, for requests of these mean lengths; None without a profile or below it."""
    if m.engine is None or rate_per_s is None:
        return None
    each_s = float(m.engine.server_s(1, prompt_tokens, streamed_tokens))
    per_replica = rate_per_s / replicas
    if per_replica * each_s <= 1.0:
        return None
    return (
        f"{SERVER_BOUND}: {m.engine.label}'s API server, one process per replica, works "
        f"{each_s * 1e3:.3g} ms on a request (its per-request, prompt-token and streamed-token "
        f"costs), so it passes at most {1 / each_s:.3g} requests/s to its engine, below the "
        f"{per_replica:.3g}/s each replica is offered; the simulated steps leave the server out: "
        "add replicas or API server processes"
    )


@dataclass(frozen=True)
class Utilisation:
    """How busy the fleet was: over the run, and over time (`timeseries`, one value a bin)."""

    steps: int
    iterations: int  # steps taken one at a time plus closed-form runs
    busy_fraction: float
    mean_batch: float
    max_batch: int
    mean_waiting: float
    kv_utilisation_mean: float
    kv_utilisation_peak: float
    mfu: float
    mbu: float
    timeseries: dict[str, list[float]]


def utilisation(engines: Sequence[Engine], m: Deployment, makespan_s: float, bins: int = 60) -> Utilisation:
    """Batch, queue, KV utilisation, MFU and MBU: over the run, and over time in `bins`."""
    import numpy as np

    gpus = m.par.gpus
    span = max(makespan_s, 1e-12)
    edges = np.linspace(0.0, span, bins + 1)
    acc = {k: np.zeros(bins) for k in ("busy", "batch", "waiting", "kv", "flops", "bytes")}
    steps = iterations = 0
    batch_max = 0
    kv_peak = 0.0
    for e in engines:
        tr = e.trace
        if not len(tr.t_s):
            continue
        t = np.frombuffer(tr.t_s, dtype=float)
        dt = np.frombuffer(tr.dt_s, dtype=float)
        k = np.frombuffer(tr.steps, dtype=np.int64).astype(float)
        tokens = np.frombuffer(tr.tokens, dtype=np.int64).astype(float)
        running = np.frombuffer(tr.running, dtype=np.int64).astype(float)
        waiting = np.frombuffer(tr.waiting, dtype=np.int64).astype(float)
        kv = np.frombuffer(tr.used_blocks, dtype=np.int64) / e.blocks
        layers = e.model.layers
        work = ledger.work_from_totals(
            m.arch,
            m.prec,
            tokens,
            [(n, np.frombuffer(p, dtype=float)) for n, p in zip(layers, tr.pairs, strict=True)],
            [(n, np.frombuffer(c, dtype=float)) for n, c in zip(layers, tr.cached, strict=True)],
        )
        for key, values in (
            ("busy", dt),
            ("batch", running * dt),
            ("waiting", waiting * dt),
            ("kv", kv * dt),
            ("flops", k * work.flops),
            ("bytes", k * work.bytes),
        ):
            acc[key] += binned(t, dt, values, edges)
        steps += int(k.sum())
        iterations += len(k)
        batch_max = max(batch_max, int(running.max()))
        kv_peak = max(kv_peak, float(kv.max()))
    width = np.diff(edges) * len(engines)
    busy = float(acc["busy"].sum())
    peak = m.peak_flops * gpus
    bandwidth = m.hw.bandwidth_bytes_per_s * gpus
    return Utilisation(
        steps=steps,
        iterations=iterations,
        busy_fraction=busy / (span * len(engines)),
        mean_batch=float(acc["batch"].sum()) / busy if busy else 0.0,
        max_batch=batch_max,
        mean_waiting=float(acc["waiting"].sum()) / (span * len(engines)),
        kv_utilisation_mean=float(acc["kv"].sum()) / (span * len(engines)),
        kv_utilisation_peak=kv_peak,
        mfu=float(acc["flops"].sum()) / (span * len(engines) * peak),
        mbu=float(acc["bytes"].sum()) / (span * len(engines) * bandwidth),
        timeseries={
            "t_s": edges[:-1].tolist(),
            "busy": (acc["busy"] / width).tolist(),
            "batch": _ratio(acc["batch"], acc["busy"]),
            "waiting": (acc["waiting"] / width).tolist(),
            "kv_utilisation": (acc["kv"] / width).tolist(),
            "mfu": (acc["flops"] / (width * peak)).tolist(),
            "mbu": (acc["bytes"] / (width * bandwidth)).tolist(),
        },
    )


def binned(t: Any, dt: Any, amounts: Any, edges: Any) -> Any:
    """Each row's amount spread evenly over its span [t, t + dt), summed per bin: the
    cumulative amount is piecewise linear in time, so read it at the edges and difference."""
    import numpy as np

    end = np.cumsum(amounts)
    x = np.empty(2 * len(t))
    y = np.empty(2 * len(t))
    x[0::2], x[1::2] = t, t + dt
    y[0::2], y[1::2] = end - amounts, end
    return np.diff(np.interp(edges, x, y))


def _ratio(num: Any, den: Any) -> list[float]:
    return [float(a / b) if b > 0 else 0.0 for a, b in zip(num, den, strict=True)]


def finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
