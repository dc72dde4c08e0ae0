"""A fleet: N replicas behind a router.

round-robin sends request i to replica i mod N. least-outstanding sends each arrival to the
replica with the fewest requests sent to it and not yet finished, so the replicas are run
up to each arrival first. Closed-loop clients are spread evenly over the replicas and stay
on theirs.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence

from ridgeline.errors import RidgelineError
from ridgeline.simulate.engine import Engine

ROUTERS = ("round-robin", "least-outstanding")
Progress = Callable[[int], None]


def check_router(router: str) -> str:
    if not isinstance(router, str) or router not in ROUTERS:
        raise RidgelineError(f"--router {router!r} is unknown: use {' or '.join(ROUTERS)}")
    return router


def run_fleet(
    engines: Sequence[Engine],
    ids: Sequence[int],
    router: str,
    progress: Progress | None = None,
    chunk_s: float = 1.0,
) -> None:
    """Route the requests `ids` (in arrival order) and run every replica to the end;
    `progress` hears the number finished every `chunk_s` of simulated time."""
    if router == "least-outstanding" and len(engines) > 1:
        _least_outstanding(engines, ids, progress)
    else:
        for i, rid in enumerate(ids):
            engines[i % len(engines)].add(rid)
    done = 0
    for e in engines:
        if progress is None:
            e.run_until()
            continue
        arrival = e.reqs.arrival_s
        while not e.idle():
            upcoming = max(e.t, arrival[e.pending[e.next]] if e.next < len(e.pending) else e.t)
            barrier = upcoming + chunk_s
            e.run_until(barrier if barrier > upcoming else math.inf)  # a chunk lost to rounding: finish
            progress(done + len(e.finished))
        done += len(e.finished)


def _least_outstanding(engines: Sequence[Engine], ids: Sequence[int], progress: Progress | None) -> None:
    arrival = engines[0].reqs.arrival_s
    sent = [0] * len(engines)
    every = max(1, len(ids) // 200)
    for i, rid in enumerate(ids):
        t = arrival[rid]
        best, best_load = 0, math.inf
        for j, e in enumerate(engines):
            e.run_until(t)
            load = sent[j] - bisect.bisect_right(e.finished, t)
            if load < best_load:
                best, best_load = j, load
        engines[best].add(rid)
        sent[best] += 1
        if progress and i % every == 0:
            progress(sum(len(e.finished) for e in engines))
