"""Fit the roofline to a sweep: effective FLOP/s F, effective bandwidth W, a per-step
overhead o and a fixed TTFT offset t0, by weighted least squares.

For each load point the model is

    TTFT = t0 + o + max(FLOPs_prefill / F, bytes_prefill / W) + comm
    TPOT = o + mean over decode steps of max(FLOPs_i / F, bytes_i / W) + comm

With `served` (what `fit --engine` writes), a pass's FLOPs and bytes are an engine's, not
the lesson's: the input embedding looked up, the lm_head run on the sampled tokens alone
(EngineProfile.served_work), and the max is taken twice and summed, once for the matmuls
(their FLOPs against the weights) and once for attention (its FLOPs against the KV cache, at
a bandwidth of its own), so the profile it writes predicts what it was fitted to.

Once each pass is known to be compute- or memory-bound the model is linear in
(t0, o, 1/F, 1/W); the bound is assigned from the current estimate and the fit repeated
until it settles. Rows are weighted by 1/measured, so the fit minimises relative error,
and uncertainties come from the residual variance, s^2 (X^T X)^-1. Parameters the data
cannot determine (too few points, collinear columns, a negative value, a standard error
larger than the value) are held at the preset, and the fit says so.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from ridgeline.calibration import MAX_OVERHEAD_S, Calibration
from ridgeline.calibration import MAX_SHARE as CALIBRATION_SHARE
from ridgeline.deployment import Deployment
from ridgeline.efficiency import Efficiency
from ridgeline.engines import MAX_SECONDS, MAX_SHARE, EngineProfile
from ridgeline.measure.compare import Group, groups, predict
from ridgeline.precision import WEIGHT_DTYPES
from ridgeline.step import Pass, price, rooflines, uniform

PARAMS = ("ttft_offset_s", "step_overhead_s", "seconds_per_flop", "seconds_per_byte", "seconds_per_kv_byte")
HOLD_ORDER = (
    "step_overhead_s",
    "ttft_offset_s",
    "seconds_per_kv_byte",
    "seconds_per_flop",
    "seconds_per_byte",
)
KV = PARAMS.index("seconds_per_kv_byte")
MAX_CONDITION = 1e4  # beyond this the columns are too alike to tell apart


@dataclass(frozen=True)
class Row:
    """One observation: measured seconds, and for each roofline the method sums (the whole
    pass, or each operator) the FLOPs and bytes one GPU handles, with the known fixed time
    (communication, the per-op method's launches) on top. A TPOT row has a row of those for
    each decode step."""

    kind: str  # ttft | tpot
    measured_s: float
    flops: Any  # array: (rooflines,) or (steps, rooflines)
    bytes: Any  # all of them, or (with the KV cache's apart) all but the KV cache's
    comm_s: float
    kv_bytes: Any = 0.0  # the KV cache's, where they have their own rate (fit --engine)


def flat_engine(
    m: Deployment, flops_s: float, bw_s: float, overhead_s: float, ttft_s: float, kv_bw_s: float | None = None
) -> EngineProfile:
    """An engine profile at one FLOP/s and one bandwidth for everything on m's accelerator
    (the KV cache at its own, when given), with one per-step overhead and one TTFT offset:
    the fit's model as a profile."""
    from ridgeline.parallel import COLLECTIVE_LATENCY_S

    gemm, bw = flops_s / m.peak_flops, bw_s / m.hw.bandwidth_bytes_per_s
    kv = bw if kv_bw_s is None else kv_bw_s / m.hw.bandwidth_bytes_per_s
    return EngineProfile(
        name="fit", label="fit", gemm={m.prec.maths: gemm}, half_m_tokens=0.0, attention=gemm,
        experts=1.0, dequant={}, weights=dict.fromkeys(("w16", "w8", "w4"), bw), kv=kv,
        fixed_s=overhead_s, per_layer_s=0.0, per_sequence_s=0.0, tp_scale=0.0, first_token_s=ttft_s,
        collective_latency_s={"none": COLLECTIVE_LATENCY_S}, link_efficiency=1.0,
        vendor={m.hw.vendor_name: 1.0},
    )  # fmt: skip


def rows_of(m: Deployment, gs: list[Group], served: bool = False) -> list[Row]:
    """TTFT rows from the lowest concurrency (higher ones include queueing) and TPOT rows
    from every point with two or more tokens."""
    import numpy as np

    unit = m.at_peak()  # efficiencies 1, no fixed costs: compute_s x peak gives FLOPs per GPU
    if served:  # the same, for the work an engine runs
        unit = replace(unit, engine=flat_engine(m, m.peak_flops, m.hw.bandwidth_bytes_per_s, 0.0, 0.0))
    peak, bw = m.peak_flops, m.hw.bandwidth_bytes_per_s

    def row(kind: str, measured_s: float, p: Pass) -> Row:
        terms = rooflines(unit, p)
        step = price(unit, p)
        # each roofline's terms over the pass's steps (a term that no context moves is one number)
        flops = np.stack(np.broadcast_arrays(*[np.asarray(c, dtype=float) * peak for c, _ in terms]), axis=-1)
        nbytes = np.stack(np.broadcast_arrays(*[np.asarray(b, dtype=float) * bw for _, b in terms]), axis=-1)
        fixed = float(np.mean(np.asarray(step.comm_s) + step.overhead_s))
        if not kv_apart(m, served):
            return Row(kind, measured_s, flops, nbytes, fixed)
        # an engine's two rooflines (step.step_rooflines): the matmuls read the weights,
        # attention the KV cache, which has its own rate
        kv = nbytes * np.array([0.0, 1.0])
        return Row(kind, measured_s, flops, nbytes - kv, fixed, kv)

    low = min((g.concurrency for g in gs), default=1)
    out = []
    for g in gs:
        if g.concurrency == low:
            out.append(row("ttft", g.ttft_s, uniform(m.arch, g.prompt_tokens, 0, 1)))
        if g.tpot_s:
            contexts = g.prompt_tokens + np.arange(g.decode_steps, dtype=float)
            out.append(row("tpot", g.tpot_s, uniform(m.arch, 1, contexts, g.concurrency)))
    return out


def kv_apart(m: Deployment, served: bool) -> bool:
    """Whether the KV cache's bytes get a rate of their own: in an engine profile's fit (a
    profile has its own KV bandwidth; llama.cpp's CPU attention reads its cache far slower
    than its weights) of one roofline a pass."""
    return served and m.method == "lesson"


def design(rows: list[Row], x: Any) -> tuple[Any, Any]:
    """The linear system at the current estimate x = (t0, o, 1/F, 1/W, 1/W_kv): each pass's
    FLOPs or bytes enter the column of whichever side bounds it."""
    import numpy as np

    a_mat, y = [], []
    for r in rows:
        flops, nbytes = np.atleast_2d(r.flops), np.atleast_2d(r.bytes)  # (steps, rooflines)
        kv = np.broadcast_to(np.asarray(r.kv_bytes, dtype=float), nbytes.shape)
        compute = flops * x[2] >= nbytes * x[3] + kv * x[KV]
        a_mat.append(
            [
                1.0 if r.kind == "ttft" else 0.0,
                1.0,
                float(np.mean(np.sum(np.where(compute, flops, 0.0), axis=-1))),
                float(np.mean(np.sum(np.where(compute, 0.0, nbytes), axis=-1))),
                float(np.mean(np.sum(np.where(compute, 0.0, kv), axis=-1))),
            ]
        )
        y.append(r.measured_s - r.comm_s)
    return np.array(a_mat), np.array(y)


def solve(rows: list[Row], x0: Any, free: list[int], start: Any = None) -> tuple[Any, Any, float]:
    """Weighted least squares over the free columns, the rest held at x0; returns x, the
    covariance of the free parameters (None when n <= p) and the residual variance. The
    free ones start from `start` (x0 when not given): where the bounds are first assigned."""
    import numpy as np

    x = x0.copy()
    if start is not None:
        x[free] = start[free]
    cov = None
    s2 = float("nan")
    for _ in range(20):
        a_mat, y = design(rows, x)
        w = 1.0 / np.array([r.measured_s for r in rows])
        # A free column can empty out when the current rates move every row to the other
        # side of the ridge: hold that parameter where it is for this round.
        live = [i for i in free if np.any(a_mat[:, i] != 0)]
        fixed = [i for i in range(len(PARAMS)) if i not in live]
        rhs = (y - a_mat[:, fixed] @ x[fixed]) * w
        lhs = a_mat[:, live] * w[:, None]
        scale = np.linalg.norm(lhs, axis=0)  # columns span 1 s to 1e11 FLOPs: solve them at unit size
        sol, *_ = np.linalg.lstsq(lhs / scale, rhs, rcond=None)
        new = x.copy()
        new[live] = sol / scale
        settled = np.allclose(new, x, rtol=1e-9, atol=0)
        x = new
        if settled:
            break
    n, p = len(rows), len(free)
    a_mat, y = design(rows, x)
    w = 1.0 / np.array([r.measured_s for r in rows])
    resid = (y - a_mat @ x) * w
    if n > p:
        s2 = float(resid @ resid) / (n - p)
        lhs = a_mat[:, free] * w[:, None]
        scale = np.linalg.norm(lhs, axis=0)
        scale[scale == 0] = 1.0  # an empty column: its parameter was held, its variance is 0
        unit = lhs / scale
        cov = s2 * np.linalg.pinv(unit.T @ unit) / np.outer(scale, scale)
    return x, cov, s2


def data_start(rows: list[Row], x0: Any) -> Any:
    """Rates read off the data alone, where the compute/memory assignment starts: each
    prefill as if all arithmetic, each decode step as if all memory (medians). Started from
    the preset instead, a host whose preset calls every pass compute-bound would never
    assign a byte to the bandwidth, and the fit would hold it."""
    import numpy as np

    start = x0.copy()
    per_flop = [
        r.measured_s / float(np.sum(r.flops)) for r in rows if r.kind == "ttft" and np.sum(r.flops) > 0
    ]
    per_byte = [
        r.measured_s / float(np.mean(np.sum(np.atleast_2d(r.bytes) + r.kv_bytes, axis=-1)))
        for r in rows
        if r.kind == "tpot" and np.sum(r.bytes) > 0
    ]
    if per_flop:
        start[2] = float(np.median(per_flop))
    if per_byte:
        start[3] = start[KV] = float(np.median(per_byte))
    return start


def undetermined(x: Any, cov: Any, free: list[int]) -> list[int]:
    """The free parameters the data cannot tell from zero: a standard error above the value
    itself. Columns alike enough to trade one parameter for another (a step overhead against
    a bandwidth, when every decode step reads nearly the same bytes) pass the condition test
    when the times are exact, and the noise of real ones then sends both anywhere."""
    import numpy as np

    if cov is None:
        return []
    return [i for k, i in enumerate(free) if np.sqrt(max(cov[k, k], 0.0)) > abs(x[i])]


def determined(rows: list[Row], x: Any, free: list[int]) -> bool:
    """Enough rows, independent columns, and no column left empty."""
    import numpy as np

    if len(rows) < len(free):
        return False
    a_mat, _ = design(rows, x)
    w = 1.0 / np.array([r.measured_s for r in rows])
    cols = a_mat[:, free] * w[:, None]
    norms = np.linalg.norm(cols, axis=0)
    if np.any(norms == 0):
        return False
    return bool(np.linalg.cond(cols / norms) < MAX_CONDITION)


@dataclass(frozen=True)
class Fit:
    model: str
    gpu: str
    points: int
    rows: int
    effective_flops_per_s: float
    effective_bandwidth_bytes_per_s: float
    effective_kv_bandwidth_bytes_per_s: float  # the bandwidth, unless an engine fit sets it apart
    step_overhead_s: float
    ttft_offset_s: float
    uncertainty: dict[str, float | None]  # one standard deviation, same units
    held: list[str]  # held at the preset
    compute_eff: float  # fractions of the accelerator's peak and bandwidth
    bandwidth_eff: float
    error_before: dict[str, float | None]
    error_after: dict[str, float | None]
    warnings: list[str] = field(default_factory=list)

    def calibration(self, source: str) -> Calibration:
        return Calibration(
            self.effective_flops_per_s,
            self.effective_bandwidth_bytes_per_s,
            self.step_overhead_s,
            self.ttft_offset_s,
            self.model,
            self.gpu,
            source,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def errors(m: Deployment, gs: list[Group]) -> dict[str, float | None]:
    """Mean and worst |predicted / measured - 1| of TTFT (lowest concurrency) and TPOT."""
    low = min((g.concurrency for g in gs), default=1)
    ttft, tpot = [], []
    for g in gs:
        t_pred, s_pred = predict(m, g)
        if g.concurrency == low:
            ttft.append(abs(t_pred / g.ttft_s - 1))
        if g.tpot_s:
            tpot.append(abs(s_pred / g.tpot_s - 1))

    def mean(xs: list[float]) -> float | None:
        return sum(xs) / len(xs) if xs else None

    return {
        "ttft_mean_abs": mean(ttft),
        "ttft_max_abs": max(ttft, default=None),
        "tpot_mean_abs": mean(tpot),
        "tpot_max_abs": max(tpot, default=None),
    }


NAMES = {
    "ttft_offset_s": "the fixed TTFT offset",
    "step_overhead_s": "the per-step overhead",
    "seconds_per_flop": "effective FLOP/s",
    "seconds_per_byte": "effective bandwidth",
    "seconds_per_kv_byte": "effective KV-cache bandwidth",
}


def fit(m: Deployment, records: list[dict[str, Any]], served: bool = False) -> Fit:
    """Fit (t0, o, F, W) to the records; what the data cannot determine stays at the
    machine's own values (the preset, or the calibration it was built with). Records
    arrive checked (finite, in range); a fit that still ends in a non-finite number, or
    in linear algebra that fails, is refused in one line rather than written. `served`:
    fit the work an engine runs (for `fit --engine`), not the lesson's ledger."""
    import math
    import warnings as python_warnings

    import numpy as np

    from ridgeline.errors import RidgelineError

    gs = groups(records)
    if not gs:
        raise RidgelineError("no successful requests in the records: nothing to fit")
    try:
        with np.errstate(all="ignore"), python_warnings.catch_warnings():
            python_warnings.simplefilter("ignore")
            result = _fit(m, gs, served)
    except (np.linalg.LinAlgError, ValueError, ZeroDivisionError, OverflowError) as exc:
        raise RidgelineError(
            f"the fit failed on these records ({type(exc).__name__}): are they one model's sweep?"
        ) from None
    rates = (result.effective_flops_per_s, result.effective_bandwidth_bytes_per_s)
    costs = (result.step_overhead_s, result.ttft_offset_s)
    if not all(math.isfinite(v) and v > 0 for v in rates) or not all(
        math.isfinite(v) and v >= 0 for v in costs
    ):
        raise RidgelineError("the fit found no finite, positive rates in these records: nothing written")
    check_fitted(m, result, served)

    def finite(d: dict[str, float | None]) -> dict[str, float | None]:
        return {k: v if v is not None and math.isfinite(v) else None for k, v in d.items()}

    return replace(
        result,
        uncertainty=finite(result.uncertainty),
        error_before=finite(result.error_before),
        error_after=finite(result.error_after),
    )


def check_fitted(m: Deployment, result: Fit, served: bool) -> None:
    """Refuse in one line a fit whose file would be refused where it is read: a calibration
    holds rates of [MIN_EFFICIENCY, 10] x the peak and fixed costs of at most a minute, an
    engine profile [1e-4, MAX_SHARE] x the peak and at most 10 s. A rate ten times a data
    sheet's, or under a ten-thousandth of it, is not this machine: records of another model,
    accelerator or parallelism, or times that are not what they say."""
    from ridgeline.checks import MIN_EFFICIENCY
    from ridgeline.errors import RidgelineError

    top = MAX_SHARE if served else CALIBRATION_SHARE
    held = "an engine profile" if served else "a calibration"
    why = (
        f"the records are not one sweep of {m.arch.name} on {m.hw.name} (check --model, --gpu, --tp "
        "and the records' prompt lengths and times); nothing written"
    )
    shares = {
        "effective FLOP/s": (result.compute_eff, "peak FLOP/s"),
        "effective bandwidth": (result.bandwidth_eff, "bandwidth"),
        "effective KV-cache bandwidth": (
            result.effective_kv_bandwidth_bytes_per_s / m.hw.bandwidth_bytes_per_s,
            "bandwidth",
        ),
    }
    for name, (share, of) in shares.items():
        if not MIN_EFFICIENCY <= share <= top:
            raise RidgelineError(
                f"the fitted {name} is {share:.3g} x {m.hw.name}'s {of}, outside "
                f"[{MIN_EFFICIENCY:g}, {top:g}], what {held} may hold: {why}"
            )
    most_s = MAX_SECONDS if served else MAX_OVERHEAD_S
    costs = {"per-step overhead": result.step_overhead_s, "TTFT offset": result.ttft_offset_s}
    for name, cost_s in costs.items():
        if cost_s > most_s:
            over = f"over the {most_s:g} s {held} may hold"
            raise RidgelineError(f"the fitted {name} is {cost_s:.3g} s, {over}: {why}")


def _fit(m: Deployment, gs: list[Group], served: bool = False) -> Fit:
    import numpy as np

    rows = rows_of(m, gs, served)
    peak, bw = m.peak_flops, m.hw.bandwidth_bytes_per_s
    x0 = np.array(
        [
            m.eff.ttft_offset_s,
            m.eff.step_overhead_s,
            1 / (m.eff.compute * peak),
            1 / (m.eff.bandwidth * bw),
            1 / (m.eff.bandwidth * bw),
        ]
    )
    apart = kv_apart(m, served)
    free = [i for i in range(len(PARAMS)) if apart or i != KV]
    # the least seconds a FLOP or a byte may take: none for a calibration; for a profile, a
    # rate it can hold (MAX_SHARE of the peak), or the profile it writes would not load
    share = MAX_SHARE if served else math.inf
    floor = np.array([0.0, 0.0, 1 / (share * peak), 1 / (share * bw), 1 / (share * bw)])
    warnings: list[str] = []
    x, cov = x0, None
    start = data_start(rows, x0)
    while free:
        mixed = x0.copy()
        mixed[free] = start[free]
        if not determined(rows, mixed, free):
            drop = next(i for i in (PARAMS.index(p) for p in HOLD_ORDER) if i in free)
            free.remove(drop)
            continue
        x, cov, _ = solve(rows, x0, free, start)
        bad = [i for i in free if not np.isfinite(x[i]) or x[i] < floor[i] or (i >= 2 and x[i] == 0)]
        if not bad:
            loose = undetermined(x, cov, free)
            if not loose:
                break
            bad = [next(i for i in (PARAMS.index(p) for p in HOLD_ORDER) if i in loose)]
        free.remove(bad[0])
        x, cov = x0, None
    held = [PARAMS[i] for i in range(len(PARAMS)) if i not in free and (apart or i != KV)]
    if held:
        warnings.append(
            f"{len(rows)} observations from {len(gs)} load points do not determine "
            + ", ".join(NAMES[p] for p in held)
            + ": held at the preset; sweep more prompt lengths and concurrencies to fit them"
        )
    sigma: dict[str, float | None] = dict.fromkeys(
        ("ttft_offset_s", "step_overhead_s", "flops", "bandwidth", "kv_bandwidth")
    )
    if cov is not None:
        sd = {i: float(np.sqrt(max(cov[k, k], 0.0))) for k, i in enumerate(free)}
        sigma["ttft_offset_s"] = sd.get(0)
        sigma["step_overhead_s"] = sd.get(1)
        sigma["flops"] = sd[2] / x[2] ** 2 if 2 in sd else None  # F = 1/a: sigma_F = sigma_a / a^2
        sigma["bandwidth"] = sd[3] / x[3] ** 2 if 3 in sd else None
        sigma["kv_bandwidth"] = sd[KV] / x[KV] ** 2 if KV in sd else None
    elif free:
        warnings.append("as many parameters as observations: the fit is exact and has no uncertainty")
    flops_s, bw_s = 1 / float(x[2]), 1 / float(x[3])
    kv_s = 1 / float(x[KV]) if apart else bw_s
    after = replace(m, eff=Efficiency(flops_s / peak, bw_s / bw, float(x[1]), float(x[0])))
    if served:
        after = replace(after, engine=flat_engine(m, flops_s, bw_s, float(x[1]), float(x[0]), kv_s))
    return Fit(
        model=m.arch.name,
        gpu=m.hw.name,
        points=len(gs),
        rows=len(rows),
        effective_flops_per_s=flops_s,
        effective_bandwidth_bytes_per_s=bw_s,
        effective_kv_bandwidth_bytes_per_s=kv_s,
        step_overhead_s=float(x[1]),
        ttft_offset_s=float(x[0]),
        uncertainty={
            "effective_flops_per_s": sigma["flops"],
            "effective_bandwidth_bytes_per_s": sigma["bandwidth"],
            "effective_kv_bandwidth_bytes_per_s": sigma["kv_bandwidth"],
            "step_overhead_s": sigma["step_overhead_s"],
            "ttft_offset_s": sigma["ttft_offset_s"],
        },
        held=held,
        compute_eff=flops_s / peak,
        bandwidth_eff=bw_s / bw,
        error_before=errors(m, gs),
        error_after=errors(after, gs),
        warnings=warnings,
    )


def engine_name(spec: str) -> str:
    """A profile's name from --engine: `vllm`, or the stem of `my-engine.toml`."""
    from pathlib import Path

    return Path(spec).stem if spec.endswith(".toml") else spec


def as_engine(result: Fit, m: Deployment, base: EngineProfile, name: str, source: str) -> EngineProfile:
    """The fit as an engine profile: `base` with the rates and costs the measurements fixed.

    The fit's model is one roofline a pass at flat rates, so the profile it writes is that
    (flat_engine): matmuls and attention at the fitted FLOP/s (no small-M penalty, no expert
    factor, no unpacking factor: the measured format's is in it), every weight format and
    the KV cache at the fitted bandwidth, the fitted per-step overhead as its fixed cost and
    the fitted TTFT offset as its first-token cost. Its scheduler, its collectives and its
    server are `base`'s."""
    fitted = f"fitted by {source} on {m.hw.name}"
    flat = flat_engine(
        m,
        result.effective_flops_per_s,
        result.effective_bandwidth_bytes_per_s,
        result.step_overhead_s,
        result.ttft_offset_s,
        result.effective_kv_bandwidth_bytes_per_s,
    )
    return replace(
        flat,
        name=name,
        label=f"{base.label} on {m.hw.name}",
        collective_latency_s=base.collective_latency_s,
        link_efficiency=base.link_efficiency,
        # its one FLOP/s is a share of the fitted run's maths peak: every weight dtype runs it
        maths={} if m.prec.maths == "bf16" else dict.fromkeys(WEIGHT_DTYPES, m.prec.maths),
        scheduler=base.scheduler,
        runs_on=base.runs_on,
        request_s=base.request_s,
        prompt_token_s=base.prompt_token_s,
        stream_token_s=base.stream_token_s,
        source=source,
        provenance={
            f"gemm.{m.prec.maths}": f"{fitted}: effective FLOP/s / peak",
            "weights": f"{fitted}: effective bandwidth / bandwidth, for every format",
            "kv": f"{fitted}: effective KV-cache bandwidth / bandwidth",
            "fixed_s": f"{fitted}: the per-step overhead",
            "first_token_s": f"{fitted}: the TTFT offset",
            "scheduler": f"{base.name}'s",
        },
    )
