"""Measured against predicted, from any records (`measure`'s or the simulator's).

Requests are grouped by load point (prompt length, concurrency); each group's medians
are held against the core's prediction for that request shape:

    TTFT_pred  = the prefill of the prompt at batch 1 (+ a calibrated offset)
    TPOT_pred  = the mean decode step at batch C over contexts prompt .. prompt + N - 2
    ceiling    = TPOT at the `ideal` preset (100% of bandwidth and peak) / measured TPOT
                 (the seed's 156 tokens/s over an H100's 208 is 75%)
    offset     = intercept of measured TTFT against predicted prefill time: the fixed
                 part (network, HTTP, queueing) that no prompt length changes
    KV slowdown = 1 - decode rate at the longest prompt / rate at the shortest, measured
                 and predicted, beside the extra bytes per step that the longer KV cache
                 adds (the seed's 156 -> 136 tokens/s, 13% slower, for 13% more bytes)
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

from ridgeline.deployment import Deployment
from ridgeline.request import request_timeline
from ridgeline.step import decode_step


@dataclass(frozen=True)
class Group:
    """One load point's successful requests, as medians."""

    prompt_tokens: int
    concurrency: int
    n: int
    output_tokens: int
    ttft_s: float
    tpot_s: float | None
    e2e_s: float

    @property
    def decode_steps(self) -> int:
        return max(self.output_tokens - 1, 1)


def _median(values: list[Any]) -> float | None:
    xs = [float(v) for v in values if v is not None]
    return statistics.median(xs) if xs else None


def groups(records: list[dict[str, Any]]) -> list[Group]:
    """Successful requests grouped by (target prompt length, concurrency)."""
    buckets: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for r in records:
        if r.get("error") or not r.get("ttft_s") or not r.get("prompt_tokens"):
            continue  # a failure, or no first token: no time to compare (a TTFT of 0 is none)
        key = (int(r.get("target_prompt_tokens") or r["prompt_tokens"]), int(r.get("concurrency") or 1))
        buckets.setdefault(key, []).append(r)
    out = []
    for (_, conc), rs in sorted(buckets.items()):
        out.append(
            Group(
                prompt_tokens=round(_median([r["prompt_tokens"] for r in rs]) or 0),
                concurrency=conc,
                n=len(rs),
                output_tokens=round(_median([r.get("output_tokens") for r in rs]) or 1),
                ttft_s=_median([r["ttft_s"] for r in rs]) or 0.0,
                tpot_s=_median([r.get("tpot_s") for r in rs]),
                e2e_s=_median([r.get("e2e_s") for r in rs]) or 0.0,
            )
        )
    return out


def predict(m: Deployment, g: Group) -> tuple[float, float]:
    """(TTFT, TPOT) the core predicts for this group's request shape."""
    first = request_timeline(m, g.prompt_tokens, 1, 1)
    t = request_timeline(m, g.prompt_tokens, g.decode_steps, g.concurrency)
    return first.ttft_s, t.tpot_s


def decode_parts_s(m: Deployment, g: Group) -> dict[str, float]:
    """The middle decode step's time split into weight reads, KV reads and arithmetic."""
    step = decode_step(m, g.prompt_tokens + g.decode_steps // 2, g.concurrency)
    return {
        "weights_s": float(step.weight_s),
        "kv_s": float(step.kv_s),
        "compute_s": float(step.compute_s),
        "overhead_s": float(step.overhead_s),
        "bytes_per_step": float(step.bytes),
    }


@dataclass(frozen=True)
class Row:
    prompt_tokens: int
    concurrency: int
    n: int
    output_tokens: int
    ttft_s: float
    ttft_pred_s: float
    tpot_s: float | None
    tpot_pred_s: float
    ceiling_fraction: float | None
    effective_bandwidth_bytes_per_s: float | None
    decode_parts_s: dict[str, float]
    # the engine profile's 80% bands on the predictions (`bands`), None without them; TTFT's
    # only at concurrency 1, where the prediction has no queue to leave out
    ttft_band_s: list[float] | None = None
    tpot_band_s: list[float] | None = None


@dataclass(frozen=True)
class Comparison:
    model: str
    gpu: str
    rows: list[Row]
    ttft_offset_s: float | None
    prefill_slope: float | None  # measured prefill time per predicted second
    kv_slowdown: float | None
    kv_slowdown_pred: float | None
    kv_extra_bytes_fraction: float | None
    ceiling_fraction: float | None  # at the lowest concurrency and shortest prompt
    notes: list[str] = field(default_factory=list)
    # how many of the measured medians the engine's bands hold: {"ttft_s": [inside, rows], ...}
    inside_band: dict[str, list[int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ttft_intercept(points: list[tuple[float, float]]) -> tuple[float | None, float | None]:
    """Least-squares line measured = offset + slope x predicted, over (pred, meas)."""
    if not points:
        return None, None
    if len({round(p, 12) for p, _ in points}) < 2:
        pred, meas = points[0]
        return meas - pred, 1.0
    import warnings

    import numpy as np

    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")  # a poorly conditioned line is still the best line
            fitted = np.polyfit([p for p, _ in points], [v for _, v in points], 1)
    except (np.linalg.LinAlgError, ValueError):
        return None, None
    offset, slope = float(fitted[1]), float(fitted[0])
    return (offset, slope) if np.isfinite(offset) and np.isfinite(slope) else (None, None)


def bands(m: Deployment, ttft_pred_s: float, tpot_pred_s: float, concurrency: int) -> tuple[Any, Any]:
    """The engine profile's 80% bands (measured / predicted on held-out published runs) on a
    group's predictions: on TTFT, at concurrency 1 only (above it the measured TTFT waits in
    a queue the prediction leaves out), the prefill band on the prompt's pass and the
    first-token band on the server's first-token cost (Deployment.ttft_band); the decode
    band on TPOT; (None, None) without a profile or its bands."""
    prefill, decode = m.ttft_band(ttft_pred_s, m.ttft_offset_s), m.band("decode")
    ttft = [ttft_pred_s * x for x in prefill] if prefill is not None and concurrency == 1 else None
    return ttft, None if decode is None else [tpot_pred_s * x for x in decode]


def _inside(value: float | None, band: list[float] | None) -> bool | None:
    return None if value is None or band is None else band[0] <= value <= band[1]


def compare(m: Deployment, records: list[dict[str, Any]]) -> Comparison:
    """The records' load points against the prediction; records with no successful request
    are refused in one line, as `fit` refuses them: an empty comparison is no result."""
    from ridgeline.errors import RidgelineError

    gs = groups(records)
    if not gs:
        raise RidgelineError("no successful requests in the records: nothing to compare")
    top = m.at_peak()
    rows = []
    for g in gs:
        ttft_pred, tpot_pred = predict(m, g)
        _, tpot_ideal = predict(top, g)
        parts = decode_parts_s(m, g)
        ttft_band, tpot_band = bands(m, ttft_pred, tpot_pred, g.concurrency)
        rows.append(
            Row(
                g.prompt_tokens,
                g.concurrency,
                g.n,
                g.output_tokens,
                g.ttft_s,
                ttft_pred,
                g.tpot_s,
                tpot_pred,
                tpot_ideal / g.tpot_s if g.tpot_s else None,
                parts["bytes_per_step"] / g.tpot_s if g.tpot_s else None,
                parts,
                ttft_band,
                tpot_band,
            )
        )
    notes = []
    low = min((r.concurrency for r in rows), default=1)
    base = [r for r in rows if r.concurrency == low]
    prefill = [(r.ttft_pred_s - m.ttft_offset_s, r.ttft_s) for r in base]
    offset, slope = ttft_intercept(prefill)
    if low > 1:
        notes.append(f"no concurrency-1 points: TTFT at concurrency {low} includes queueing")
    if any(r.concurrency > 1 for r in rows):
        notes.append("TTFT is predicted unloaded (batch 1); at higher concurrency the gap is queueing")
    slow = slow_pred = extra = None
    timed = [r for r in base if r.tpot_s]
    if len({r.prompt_tokens for r in timed}) >= 2:
        short, long_ = timed[0], timed[-1]
        assert short.tpot_s is not None and long_.tpot_s is not None
        slow = 1 - short.tpot_s / long_.tpot_s
        slow_pred = 1 - short.tpot_pred_s / long_.tpot_pred_s
        b_short, b_long = short.decode_parts_s["bytes_per_step"], long_.decode_parts_s["bytes_per_step"]
        extra = b_long / b_short - 1
    ceiling = timed[0].ceiling_fraction if timed else None
    held: dict[str, list[int]] = {}
    for key in ("ttft_s", "tpot_s"):
        verdicts = [_inside(getattr(r, key), getattr(r, key.replace("_s", "_band_s"))) for r in rows]
        judged = [v for v in verdicts if v is not None]
        if judged:
            held[key] = [sum(judged), len(judged)]
    return Comparison(
        m.arch.name, m.hw.name, rows, offset, slope, slow, slow_pred, extra, ceiling, notes, held or None
    )
