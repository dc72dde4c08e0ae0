"""The serving simulator: continuous batching over a paged KV cache, priced step by step by
the core, and capacity planning on top of it.

Laid out by concept: workload (arrivals, lengths), requests (per-request arrays), kvcache
(blocks from the memory plan), steptime (a step's time from the core), scheduler (which
tokens go into a step), engine (one replica), router (a fleet), report (records, summary),
plan (rate search, cost), commands and render (the command line).

Names load on first use, so `ridgeline --help` does not pay for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ridgeline.simulate.engine import EngineConfig
    from ridgeline.simulate.plan import Capacity, capacity, compare
    from ridgeline.simulate.run import Result, simulate
    from ridgeline.simulate.workload import Lengths, Trace, Workload

_WHERE = {
    "EngineConfig": "engine",
    "Capacity": "plan",
    "capacity": "plan",
    "compare": "plan",
    "Result": "run",
    "simulate": "run",
    "Lengths": "workload",
    "Trace": "workload",
    "Workload": "workload",
}
__all__ = [
    "Capacity",
    "EngineConfig",
    "Lengths",
    "Result",
    "Trace",
    "Workload",
    "capacity",
    "compare",
    "simulate",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'ridgeline.simulate' has no attribute '{name}'")
    return getattr(importlib.import_module(f"ridgeline.simulate.{_WHERE[name]}"), name)
