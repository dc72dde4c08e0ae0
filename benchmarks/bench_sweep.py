"""Vectorised evaluation: decode step times over a million (batch, context) points.

Run: python benchmarks/bench_sweep.py   (target: at least 1e6 points per second)
"""

from __future__ import annotations

import json
import time

import numpy as np

from ridgeline.deployment import Deployment
from ridgeline.sweep import decode_grid


def points_per_s(points: int = 1_000_000, repeats: int = 5) -> float:
    m = Deployment.build()
    rng = np.random.default_rng(0)
    batches = rng.integers(1, 512, size=points)
    contexts = rng.integers(0, 32_000, size=points)
    decode_grid(m, batches[:10], contexts[:10])  # warm
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        decode_grid(m, batches, contexts)
        best = min(best, time.perf_counter() - t0)
    return points / best


def scalar_points_per_s(points: int = 2_000) -> float:
    from ridgeline.step import decode_step

    m = Deployment.build()
    t0 = time.perf_counter()
    for i in range(points):
        decode_step(m, i * 7 % 32_000, 1 + i % 511)
    return points / (time.perf_counter() - t0)


if __name__ == "__main__":
    vec, scalar = points_per_s(), scalar_points_per_s()
    print(
        json.dumps(
            {"vectorised_points_per_s": vec, "scalar_points_per_s": scalar, "ratio": vec / scalar}, indent=2
        )
    )
