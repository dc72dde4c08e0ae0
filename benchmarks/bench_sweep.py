"""Vectorised evaluation: decode step times over 100,000 (batch, context) points.

ridgeline's `decode_grid` (the core's step price over numpy arrays) against a hand-written
numpy roofline of the same decode steps over the same points (the lesson's equations for a
dense model on one GPU, nothing else), written once as one pass over every point and once in
decode_grid's blocks. Each is timed in its own process, best of 50 calls, in interleaved
rounds: how fast numpy's temporaries come back depends on what the process allocated before
(a large array that the allocator maps afresh each time is several times slower than one
in cache), so a shared process would time one under the other's allocations. The scalar
path's points per second, one `decode_step` call a point (best of 5), for scale.

Run: python benchmarks/bench_sweep.py   (target: decode_grid at least half the hand-written
speed; figures go into the README by hand)
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ridgeline.deployment import Deployment
from ridgeline.ledger import kv_bytes_per_token, model_weight_bytes
from ridgeline.sweep import GRID_BLOCK, decode_grid

POINTS = 100_000
VARIANTS = ("ridgeline", "hand_one_pass", "hand_in_blocks")


def hand_written(m: Deployment) -> Callable[[Any, Any], Any]:
    """max(FLOPs / (eta_c peak), bytes / (eta_b bandwidth)) for a decode step of a dense
    model on one GPU: FLOPs = 2 P b + a L b (c + 1/2), bytes = W + b (c + 1) k."""
    a = m.arch
    p, layers, per_pair = a.active_parameters, a.layers, a.attention_flops_per_pair
    w, k = model_weight_bytes(a, m.prec), kv_bytes_per_token(a, m.prec)
    flops_per_s, bytes_per_s = m.eff.compute * m.peak_flops, m.eff.bandwidth * m.hw.bandwidth_bytes_per_s

    def times(batches: Any, contexts: Any) -> Any:
        b, c = batches.astype(float), contexts.astype(float)
        compute = (2.0 * p * b + per_pair * layers * b * (c + 0.5)) / flops_per_s
        memory = (w + b * (c + 1.0) * k) / bytes_per_s
        return np.maximum(compute, memory)

    return times


def in_blocks(f: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def times(batches: Any, contexts: Any) -> Any:
        out = np.empty(len(batches))
        for i in range(0, len(batches), GRID_BLOCK):
            out[i : i + GRID_BLOCK] = f(batches[i : i + GRID_BLOCK], contexts[i : i + GRID_BLOCK])
        return out

    return times


def points() -> tuple[Any, Any]:
    rng = np.random.default_rng(0)
    return rng.integers(1, 512, size=POINTS), rng.integers(0, 32_000, size=POINTS)


def variant(name: str) -> Callable[[Any, Any], Any]:
    m = Deployment.build()
    if name == "ridgeline":
        return lambda b, c: decode_grid(m, b, c)
    hand = hand_written(m)
    return hand if name == "hand_one_pass" else in_blocks(hand)


def best_of(name: str, calls: int = 50) -> float:
    """This process: the fastest of `calls` evaluations of the grid by one variant."""
    f, (b, c) = variant(name), points()
    best = float("inf")
    for _ in range(calls):
        t0 = time.perf_counter()
        f(b, c)
        best = min(best, time.perf_counter() - t0)
    return best


def grid(rounds: int = 5) -> dict[str, float]:
    b, c = points()
    ours, theirs = variant("ridgeline")(b, c), variant("hand_one_pass")(b, c)
    times: dict[str, list[float]] = {name: [] for name in VARIANTS}
    for _ in range(rounds):
        for name in VARIANTS:
            out = subprocess.run([sys.executable, __file__, "--one", name], check=True, capture_output=True)
            times[name].append(float(out.stdout))
    best = {name: statistics.median(t) for name, t in times.items()}
    return {
        "points": POINTS,
        "max_relative_difference": float(np.max(np.abs(ours - theirs) / theirs)),  # the same steps
        **{f"{name}_s": t for name, t in best.items()},
        "ridgeline_points_per_s": POINTS / best["ridgeline"],
        "speed_vs_hand_one_pass": best["hand_one_pass"] / best["ridgeline"],
        "speed_vs_hand_in_blocks": best["hand_in_blocks"] / best["ridgeline"],
    }


def scalar_points_per_s(count: int = 2_000, rounds: int = 5) -> float:
    """One decode_step call a point, best of `rounds`."""
    from ridgeline.step import decode_step

    m = Deployment.build()
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for i in range(count):
            decode_step(m, i * 7 % 32_000, 1 + i % 511)
        best = min(best, time.perf_counter() - t0)
    return count / best


if __name__ == "__main__":
    if "--one" in sys.argv:
        print(best_of(sys.argv[sys.argv.index("--one") + 1]))
        sys.exit()
    report: dict[str, float] = grid()
    report["scalar_points_per_s"] = scalar_points_per_s()
    report["vectorised_over_scalar"] = report["ridgeline_points_per_s"] / report["scalar_points_per_s"]
    print(json.dumps(report, indent=2))
