"""From a finished run to the shared records and a summary.

Per-request records use the shared schema (ridgeline.metrics): TTFT from the arrival to the
end of the step that emitted the first token, E2E to the end of the last, queueing from the
arrival to the first admission, TPOT = (E2E - TTFT) / (N - 1). Over time, from the engines'
step rows: batch size, queue, KV utilisation, MFU = FLOPs / (time x GPUs x peak) and
MBU = bytes / (time x GPUs x bandwidth), with FLOPs and bytes from the core's ledger.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import accumulate, pairwise, repeat
from operator import add, mul, sub
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
    cols = latency_columns(reqs, ttft_offset_s)
    ttft, e2e, queue = cols["ttft_s"], cols["e2e_s"], cols["queue_s"]
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


def latency_columns(reqs: Requests, ttft_offset_s: float) -> dict[str, list[Any]]:
    """Each request's TTFT, TPOT, E2E and queueing (metrics.LATENCY_KEYS) as lists, as its
    record states them; TPOT is None for a one-token answer."""
    arrival, offset = reqs.arrival_s, repeat(ttft_offset_s)
    ttft = list(map(add, map(sub, reqs.first_s, arrival), offset))  # (first - arrival) + offset
    e2e = list(map(add, map(sub, reqs.finish_s, arrival), offset))
    steps = reqs.output  # N - 1: the tokens after the first; metrics.tpot_s, request by request
    tpot = [(e - t) / m if m > 0 else None for e, t, m in zip(e2e, ttft, steps, strict=True)]
    queue = list(map(sub, reqs.admit_s, arrival))
    return {"ttft_s": ttft, "tpot_s": tpot, "e2e_s": e2e, "queue_s": queue}


def summarize_requests(
    reqs: Requests, ttft_offset_s: float, duration_s: float, slo: metrics.Slo | None
) -> metrics.Summary:
    """`summarize(make_records(...))`, to the last digit, from the request columns: no record
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
    a = reqs.arrival_s
    n = len(a)
    if n < 3 or max(a) <= min(a):
        return 0.0
    q = list(map(sub, reqs.admit_s, a))
    da = list(map(sub, a, repeat(math.fsum(a) / n)))
    dq = map(sub, q, repeat(math.fsum(q) / n))
    return math.fsum(map(mul, da, dq)) / math.fsum(map(mul, da, da))


def overloaded(reqs: Requests, closed: bool, growth: float) -> bool:
    """Arrivals outrun the service: the queueing delay keeps growing through the run (its
    `queue_growth`), by more than OVERLOAD_SLOPE of the elapsed time and by more than a
    second in all."""
    if closed or len(reqs) < 3:
        return False
    span = max(reqs.arrival_s) - min(reqs.arrival_s)
    return growth > OVERLOAD_SLOPE and growth * span > 1.0


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
    it, for requests of these mean lengths; None without a profile, in the engine's own
    process (no server) or below it."""
    if m.engine is None or m.in_process or rate_per_s is None:
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


NUMPY_ROWS = 20_000  # step rows above which the over-time sums load numpy (about 50 ms) to save time


def load_band(
    m: Deployment,
    s: metrics.Summary,
    saturated: bool,
    server_share: float = 0.0,
    ends: tuple[metrics.Summary, metrics.Summary] | None = None,
) -> dict[str, Any] | None:
    """The engine profile's band under load on this run (engines.toml's `uncertainty.load`:
    an 80% interval of the engine's speed, how many times as slow it must be to predict
    published runs under load that no fit saw): the run's median TTFT, TPOT and E2E with the
    engine as slow as each end, and, where the run is `saturated` (a closed loop, or
    arrivals faster than the fleet, or its slow end, serves them: its throughput is the
    engine's, not the arrivals'), its output throughput (else None: a faster or slower
    engine that keeps up serves the same arrivals). A closed loop's slowed run is the same
    run with every time that many times as long, so without `ends` the times are scaled; an
    open-loop run's queue magnifies a slower engine's steps, so its `ends` are the runs
    again on the engine at each end, fast then slow (simulate's `band_runs`). A run whose
    API server is busy `server_share` of it or more takes the profile's server band, which
    holds the server's own misses, in part (Deployment.load_band). None without an engine
    profile that has such a band. The band was made of medians and throughputs, so it
    bounds those; a p99 is further from any published run."""
    band = m.load_band(server_share)
    if band is None or m.engine is None:
        return None
    lo, hi = band
    throughput = s.throughput_tokens_per_s
    if ends is None:

        def times(p: metrics.Percentiles) -> list[float] | None:
            return None if p.p50 is None else [lo * p.p50, hi * p.p50]

        ttft, tpot, e2e = times(s.ttft_s), times(s.tpot_s), times(s.e2e_s)
        served = [throughput / hi, throughput / lo] if saturated else None
    else:
        fast, slow = ends

        def between(key: str) -> list[float] | None:
            low, high = fast.latency(key).p50, slow.latency(key).p50
            return None if low is None or high is None else sorted([low, high])

        ttft, tpot, e2e = between("ttft_s"), between("tpot_s"), between("e2e_s")
        served = sorted([slow.throughput_tokens_per_s, fast.throughput_tokens_per_s]) if saturated else None
    return {
        "profile": m.engine.name,
        "time_ratio": [lo, hi],
        "server_share": server_share,
        "ttft_p50_s": ttft,
        "tpot_p50_s": tpot,
        "e2e_p50_s": e2e,
        "throughput_tokens_per_s": served,
        # terms no published run moved, whose priors stand: the band, made of other runs, may
        # be too narrow here (as `estimate` says)
        "unmeasured": m.engine.unmeasured(m),
        "one_source": m.engine.one_source(m),  # terms one source alone moved (as `estimate` says)
    }


def inter_token_latency(engines: Sequence[Engine]) -> metrics.Percentiles:
    """Each decode token's wait since its sequence's last (ITL per token, as `measure` reads
    a stream): a step's time once for every sequence that emitted a token in it (a
    closed-form run of k steps, its mean step k times), and, for the sequences that waited
    out steps that ran prefills alone, those steps' time too on their next token. A
    request's first token waits its TTFT, not an ITL; so over a run without preemptions the
    mean, weighted by tokens, is the requests' E2E less TTFT over their decode tokens. A
    multi-step run's tokens leave together at its end; each is its own step's time here,
    about the run's mean step, which `measure` reads (a chunk's gap over its tokens). No
    interval on the p99: the tokens of one step share its time, so they are not
    independent samples of it."""
    values: list[float] = []
    counts: list[int] = []
    for e in engines:
        tr = e.trace
        stalls: list[tuple[int, float]] = []  # (decoders there, time): prefill-only steps
        for dt, k, n, paused in zip(tr.dt_s, tr.steps, tr.emitting, tr.paused, strict=True):
            if not n:
                if paused:
                    stalls.append((paused, dt))
                continue
            step = dt / k
            held = 0
            if stalls:
                # the decoders there at a stalled step waited it and every one after it: a
                # cohort for each step at which more were there than before (a prefill ended)
                waited = math.fsum(d for _, d in stalls)
                for present, stalled in stalls:
                    joined = min(present, n) - held
                    if joined > 0:
                        values.append(step + waited)
                        counts.append(joined)
                        held += joined
                    waited -= stalled
                stalls = []
            values.append(step)
            counts.append(n * k - held)
    return replace(metrics.weighted_percentiles(values, counts, "itl_s"), p99_ci95=None)


def utilisation(engines: Sequence[Engine], m: Deployment, makespan_s: float, bins: int = 60) -> Utilisation:
    """Batch, queue, KV utilisation, MFU and MBU: over the run, and over time in `bins`.
    Each step row's amounts (its time, batch x time, ..., its FLOPs and bytes from the
    core's ledger) are spread evenly over the row's span and summed per bin. A short run
    does this row by row in plain Python; past NUMPY_ROWS rows, on numpy's arrays."""
    gpus = m.par.gpus
    span = max(makespan_s, 1e-12)
    edges = [span * i / bins for i in range(bins)] + [span]
    acc = {k: [0.0] * bins for k in AMOUNTS}
    steps = iterations = 0
    batch_max = 0
    kv_peak = 0.0
    rows = sum(len(e.trace.t_s) for e in engines)
    for e in engines:
        if not len(e.trace.t_s):
            continue
        if rows > NUMPY_ROWS:
            cols = _amounts_numpy(e, m)
            sums = binned_numpy(cols.t, cols.dt, cols.amounts, edges)
        else:
            cols = _amounts(e, m)
            sums = binned(cols.t, cols.dt, cols.amounts, edges)
        for key, per_bin in zip(AMOUNTS, sums, strict=True):
            acc[key] = [x + y for x, y in zip(acc[key], per_bin, strict=True)]
        steps += cols.steps
        iterations += len(cols.t)
        batch_max = max(batch_max, cols.batch_max)
        kv_peak = max(kv_peak, cols.kv_peak)
    width = [(hi - lo) * len(engines) for lo, hi in pairwise(edges)]
    total = {key: math.fsum(values) for key, values in acc.items()}
    busy, run_s = total["busy"], span * len(engines)
    peak = m.peak_flops * gpus
    bandwidth = m.hw.bandwidth_bytes_per_s * gpus

    def per_width(key: str, scale: float = 1.0) -> list[float]:
        return [x / (w * scale) for x, w in zip(acc[key], width, strict=True)]

    return Utilisation(
        steps=steps,
        iterations=iterations,
        busy_fraction=busy / run_s,
        mean_batch=total["batch"] / busy if busy else 0.0,
        max_batch=batch_max,
        mean_waiting=total["waiting"] / run_s,
        kv_utilisation_mean=total["kv"] / run_s,
        kv_utilisation_peak=kv_peak,
        mfu=total["flops"] / (run_s * peak),
        mbu=total["bytes"] / (run_s * bandwidth),
        timeseries={
            "t_s": edges[:-1],
            "busy": per_width("busy"),
            "batch": _ratio(acc["batch"], acc["busy"]),
            "waiting": per_width("waiting"),
            "kv_utilisation": per_width("kv"),
            "mfu": per_width("flops", peak),
            "mbu": per_width("bytes", bandwidth),
        },
    )


AMOUNTS = ("busy", "batch", "waiting", "kv", "flops", "bytes")


@dataclass
class _Rows:
    """One engine's step rows: when each began, how long it took, and its AMOUNTS."""

    t: Any
    dt: Any
    amounts: list[Any]
    steps: int
    batch_max: int
    kv_peak: float


def _amounts(e: Engine, m: Deployment) -> _Rows:
    """The rows' amounts, row by row."""
    tr = e.trace
    t, dt, k = tr.t_s.tolist(), tr.dt_s.tolist(), tr.steps.tolist()
    running, waiting, used = tr.running.tolist(), tr.waiting.tolist(), tr.used_blocks.tolist()
    layers = e.model.layers
    pairs = list(zip(*(g.tolist() for g in tr.pairs), strict=True))
    cached = list(zip(*(g.tolist() for g in tr.cached), strict=True))
    work = [
        ledger.work_from_totals(
            m.arch, m.prec, float(n), list(zip(layers, p, strict=True)), list(zip(layers, c, strict=True))
        )
        for n, p, c in zip(tr.tokens.tolist(), pairs, cached, strict=True)
    ]
    kv = [u / e.blocks for u in used]
    return _Rows(
        t,
        dt,
        [
            dt,
            [r * d for r, d in zip(running, dt, strict=True)],
            [w * d for w, d in zip(waiting, dt, strict=True)],
            [x * d for x, d in zip(kv, dt, strict=True)],
            [j * w.flops for j, w in zip(k, work, strict=True)],
            [j * w.bytes for j, w in zip(k, work, strict=True)],
        ],
        sum(k),
        max(running),
        max(kv),
    )


def _amounts_numpy(e: Engine, m: Deployment) -> _Rows:
    """The rows' amounts, as numpy arrays: the same arithmetic, element by element."""
    import numpy as np

    tr = e.trace
    dt = np.frombuffer(tr.dt_s, dtype=float)
    k = np.frombuffer(tr.steps, dtype=np.int64).astype(float)
    running = np.frombuffer(tr.running, dtype=np.int64).astype(float)
    waiting = np.frombuffer(tr.waiting, dtype=np.int64).astype(float)
    kv = np.frombuffer(tr.used_blocks, dtype=np.int64) / e.blocks
    layers = e.model.layers
    work = ledger.work_from_totals(
        m.arch,
        m.prec,
        np.frombuffer(tr.tokens, dtype=np.int64).astype(float),
        [(n, np.frombuffer(p, dtype=float)) for n, p in zip(layers, tr.pairs, strict=True)],
        [(n, np.frombuffer(c, dtype=float)) for n, c in zip(layers, tr.cached, strict=True)],
    )
    return _Rows(
        np.frombuffer(tr.t_s, dtype=float),
        dt,
        [dt, running * dt, waiting * dt, kv * dt, k * work.flops, k * work.bytes],
        int(k.sum()),
        int(running.max()),
        float(kv.max()),
    )


def binned(
    t: list[float], dt: list[float], amounts: list[list[float]], edges: list[float]
) -> list[list[float]]:
    """Each row's amount spread evenly over its span [t, t + dt), summed per bin: the
    cumulative amount is piecewise linear in time, so read it at the edges and difference."""
    x = [v for start, d in zip(t, dt, strict=True) for v in (start, start + d)]
    out = []
    for a in amounts:
        end = list(accumulate(a))
        y = [v for done, amount in zip(end, a, strict=True) for v in (done - amount, done)]
        at = [_interp(edge, x, y) for edge in edges]
        out.append([hi - lo for lo, hi in pairwise(at)])
    return out


def _interp(at: float, x: list[float], y: list[float]) -> float:
    """np.interp at one point of a piecewise linear function (x ascending): y held flat
    beyond the ends, and y itself where `at` is a knot."""
    j = bisect_right(x, at) - 1  # the last knot at or before `at`
    if j < 0:
        return y[0]
    if x[j] == at or j == len(x) - 1:
        return y[j]
    slope = (y[j + 1] - y[j]) / (x[j + 1] - x[j])
    return slope * (at - x[j]) + y[j]


def binned_numpy(t: Any, dt: Any, amounts: list[Any], edges: list[float]) -> list[list[float]]:
    """`binned` on numpy's arrays."""
    import numpy as np

    x = np.empty(2 * len(t))
    x[0::2], x[1::2] = t, t + dt
    out = []
    for a in amounts:
        end = np.cumsum(a)
        y = np.empty(2 * len(t))
        y[0::2], y[1::2] = end - a, end
        out.append(np.diff(np.interp(edges, x, y)).tolist())
    return out


def _ratio(num: Any, den: Any) -> list[float]:
    return [float(a / b) if b > 0 else 0.0 for a, b in zip(num, den, strict=True)]


def finite(x: float) -> float | None:
    return x if math.isfinite(x) else None
