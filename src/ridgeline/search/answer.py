"""The answer: the cheapest point that meets the SLO, and the Pareto front.

Cheapest: the least $ per million tokens among the points whose run met the SLO (ties go to
the lower p99 TTFT, then TPOT, then the key). The front: the points that met it and that no
other such point beats or equals on all three of $ per million tokens, p99 TTFT and p99 TPOT
while beating it on one; cheapest first. When no point met the SLO the front is taken over
every point run whole, to show how near the space came (`front_of` says which); a point
decided on a screen or on its bounds has no p99s to place on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

OBJECTIVES = ("usd_per_million_tokens", "ttft_p99_s", "tpot_p99_s")


def _objectives(row: dict[str, Any]) -> tuple[float, float, float]:
    cost, ttft, tpot = (row[k] for k in OBJECTIVES)
    return (cost, ttft, 0.0 if tpot is None else tpot)


def _order(row: dict[str, Any]) -> tuple[Any, ...]:
    return (*_objectives(row), row["key"])


def cheapest(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    met = [r for r in rows if r["status"] == "met"]
    return min(met, key=_order) if met else None


def pareto_front(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows no other row dominates (minimising every objective), cheapest first. After
    sorting by cost a dominated row is dominated by a row already on the front, so each row
    is held against the front alone."""
    front: list[dict[str, Any]] = []
    ran = (r for r in rows if r["status"] in ("met", "missed") and r["ttft_p99_s"] is not None)
    for row in sorted(ran, key=_order):
        mine = _objectives(row)
        beaten = False
        for other in front:
            theirs = _objectives(other)
            if all(a <= b for a, b in zip(theirs, mine, strict=True)) and theirs != mine:
                beaten = True
                break
        if not beaten:
            front.append(row)
    return front


def answer(rows: Sequence[dict[str, Any]]) -> tuple[dict[str, Any] | None, list[dict[str, Any]], str]:
    """(cheapest, front, front_of): front_of is "met", or "simulated" when none met."""
    met = [r for r in rows if r["status"] == "met"]
    if met:
        return cheapest(met), pareto_front(met), "met"
    return None, pareto_front(rows), "simulated"
