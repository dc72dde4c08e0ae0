"""The per-operator ledger of a request's two phases, with both methods' totals."""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from ridgeline.deployment import Deployment
from ridgeline.operators import comm_row, operator_rows, per_op_step
from ridgeline.step import price, uniform


def ledger_view(m: Deployment, prompt: int, batch: int = 1) -> dict[str, Any]:
    """Rows for the prefill of `prompt` tokens and the first decode step at that context;
    each phase also carries its time by the per-op and the lesson methods, and the engine's host
    work a step, which each method's time is at least."""
    lesson = replace(m, method="lesson")
    out: dict[str, Any] = {}
    for phase, (n, c) in (("prefill", (prompt, 0)), ("decode", (1, prompt))):
        shape = uniform(m.arch, n, c, batch)
        rows = operator_rows(m, shape)
        comm = comm_row(m, batch * n)
        per_op = per_op_step(m, shape)
        whole = price(lesson, shape)
        out[phase] = {
            "rows": [asdict(r) for r in rows + ([comm] if comm else [])],
            "per_op_time_s": float(per_op.time_s),
            "lesson_time_s": float(whole.time_s),
            "launch_overhead_s": per_op.overhead_s,
            "host_s": float(per_op.host_s),  # an engine's host work a step: the floor of both methods
            "host_bound": bool(per_op.host_bound),  # whether it, not the GPU, sets the per-op time
        }
    return out
