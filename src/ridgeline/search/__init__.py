"""`ridgeline search`: the deployment space against an SLO, pruned by the core's closed forms,
its survivors simulated on every core or on a Ray cluster, answered with the cheapest point,
the Pareto front and a launch command.

Laid out by stage: space (the axes and their points), prune (the closed forms), fidelity
(how far each survivor is run: its bounds, a screen, or its whole run), stage (one point's
screen or run, and its row), executors (this process, a process pool, Ray), store (the
Parquet parts), answer (cheapest, front), launch (the engine's command), run (search(), the
whole), commands, render and plot (the command line's face).

Names load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ridgeline.search.executors import Executor
    from ridgeline.search.run import SearchResult, Settings, search
    from ridgeline.search.space import Space, make_space

_WHERE = {
    "Executor": "executors",
    "SearchResult": "run",
    "Settings": "run",
    "search": "run",
    "Space": "space",
    "make_space": "space",
}
__all__ = ["Executor", "SearchResult", "Settings", "Space", "make_space", "search"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'ridgeline.search' has no attribute '{name}'")
    return getattr(importlib.import_module(f"ridgeline.search.{_WHERE[name]}"), name)
