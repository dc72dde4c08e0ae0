"""How fast `ridgeline search` runs: each stage per core, the pool's speed-up from 1 to 2
workers, Ray's overhead against the local pool on the same machine, and the README's
example space timed as a user runs it (the whole process, every core).

The yardstick (ridgeline issue #14): aiconfigurator searches 233 configurations in 8.8 s
with closed forms alone (26 a second); twenty times that is 530 configurations a second,
here with a simulated p99 for every point that survives the prune.

Run: python benchmarks/bench_search.py [--quick]   (figures go into the README by hand)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MODEL = "llama-3.1-70b"
RATE = 10.0
SLO = {"ttft_s": 1.0, "tpot_s": 0.05}
# The README's example: llama-3.1-70b at 10 requests/s on six accelerators, TP 1-8, three
# engines, every dtype, replicas auto.
EXAMPLE = ["--model", "llama-3.1-70b", "--rate", "10", "--prompt-tokens", "2000", "--output-tokens", "500",
           "--slo-ttft-p99", "1", "--slo-tpot-p99", "0.05",
           "--gpu", "h100-sxm,h200,b200,a100-80gb-sxm,l40s,mi300x", "--tp", "1,2,4,8",
           "--engine", "vllm,sglang,trtllm"]  # fmt: skip
# A fixed sub-space for the executor comparisons: 96 points (32 deployments x 3 replica counts).
SUB = {"gpu": "h100-sxm,h200", "tp": "2,4", "weights": "fp8", "maths": "bf16,fp8", "kv_dtype": "bf16,fp8",
       "engine": "vllm,trtllm", "replicas": "2,3,4"}  # fmt: skip


def one_core() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def settings(requests: int) -> Any:
    from ridgeline.metrics import Slo
    from ridgeline.models import get_model
    from ridgeline.search.run import Settings
    from ridgeline.simulate.workload import Lengths, Workload

    w = Workload(
        Lengths("fixed", 2000), Lengths("fixed", 500), rate_per_s=RATE, requests=requests, duration_s=None
    )
    return Settings(MODEL, get_model(MODEL), w, Slo(**SLO))


def prune_stage(repeats: int) -> dict[str, Any]:
    """The default space (every priced accelerator, TP 1-8, every dtype and engine), one core."""
    from ridgeline.search.prune import demand, prune
    from ridgeline.search.space import make_space

    s = settings(1000)
    space = make_space({}, None, s.arch)
    times, pruned = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        dem = demand(s.workload, s.arch.max_context, 16)
        pruned = prune(space, s.arch, dem, s.slo, None, RATE)
        times.append(time.perf_counter() - t0)
    assert pruned is not None
    wall = statistics.median(times)
    return {
        "points": pruned.points,
        "removed": pruned.invalid + pruned.memory + pruned.latency,
        "survivors": len(pruned.survivors),
        "wall_s": wall,
        "points_per_s": pruned.points / wall,
    }


def simulate_stage(points: int, requests: int) -> dict[str, Any]:
    """About `points` survivors of the example space (every point of a few of its deployments),
    simulated one after another on one core."""
    from ridgeline.search.prune import demand, prune
    from ridgeline.search.space import make_space, point_seed
    from ridgeline.search.stage import Context, Task, simulate_task

    s = settings(requests)
    axes = {
        "gpu": "h100-sxm,h200,b200,a100-80gb-sxm,l40s,mi300x",
        "tp": "1,2,4,8",
        "engine": "vllm,sglang,trtllm",
    }
    space = make_space(axes, None, s.arch)
    pruned = prune(space, s.arch, demand(s.workload, s.arch.max_context, 16), s.slo, None, RATE)
    shapes = list(pruned.deployments)
    ctx = Context(MODEL, s.workload, s.slo, None, RATE, "round-robin", 16, 0.9, None,
                  tuple(pruned.deployments[x] for x in shapes))  # fmt: skip
    # whole deployments, spread over the space, as the search hands them to a worker
    by_shape: dict[Any, list[Any]] = {}
    for p in pruned.survivors:
        by_shape.setdefault(p.shape, []).append(p)
    groups = list(by_shape.values())
    chosen: list[Any] = []
    for group in groups[:: max(1, len(groups) * 3 // points)]:
        chosen += group
        if len(chosen) >= points:
            break
    t0 = time.perf_counter()
    for p in chosen:
        simulate_task(ctx, Task(p.key, shapes.index(p.shape), p.max_num_seqs, p.max_num_batched_tokens,
                                p.replicas, point_seed(0, p.key)))  # fmt: skip
    wall = time.perf_counter() - t0
    return {
        "points": len(chosen),
        "requests_per_point": requests,
        "wall_s": wall,
        "points_per_s": len(chosen) / wall,
        "requests_per_s": len(chosen) * requests / wall,
    }


def pool_of_one() -> Any:
    """A pool of one worker process: the pool's own overhead beside the in-process run."""
    from ridgeline.search.executors import Executor, run_pool

    class One(Executor):
        def run(self, ctx: Any, tasks: Any, on_row: Any) -> None:
            run_pool(ctx, tasks, on_row, 1)

    return One("local", 1)


def executors(requests: int) -> dict[str, Any]:
    """The same 96-point search: in this process, on pools of 1 and 2, and on a local Ray."""
    from ridgeline.search.executors import Executor
    from ridgeline.search.run import search
    from ridgeline.search.space import make_space

    s = settings(requests)
    space = make_space(SUB, None, s.arch)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:

        def timed(name: str, executor: Executor) -> float:
            t0 = time.perf_counter()
            r = search(space, s, executor, str(Path(tmp) / name))
            wall = time.perf_counter() - t0
            out.setdefault("points", r.stages.survivors)
            out[f"{name}_s"] = wall
            return wall

        one = timed("serial", Executor("local", 1))
        timed("pool1", pool_of_one())
        two = timed("pool2", Executor("local", 2))
        out["speedup_1_to_2"] = one / two
        try:
            import ray
        except ImportError:
            return out
        os.environ.pop("RAY_ADDRESS", None)
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        t0 = time.perf_counter()
        ray.init(
            address="local",
            num_cpus=2,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            log_to_driver=False,
        )
        out["ray_init_s"] = time.perf_counter() - t0
        try:
            ray_s = timed("ray", Executor("ray", 2, "auto"))
        finally:
            ray.shutdown()
        out["ray_over_pool2"] = ray_s / two
    return out


def example(extra: list[str]) -> dict[str, Any]:
    """The README's example as a user runs it: the whole process, every core."""
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        args = [*EXAMPLE, *extra, "--out", str(Path(tmp) / "r"), "--json"]
        proc = subprocess.run(
            [sys.executable, "-m", "ridgeline", "search", *args], check=True, capture_output=True, text=True
        )
        wall = time.perf_counter() - t0
    data = json.loads(proc.stdout)
    st = data["stages"]
    best = data["cheapest"]
    return {
        "args": extra,
        "points": st["points"],
        "pruned": st["invalid"] + st["memory"] + st["latency"],
        "simulated": st["survivors"],
        "met": st["met"],
        "requests_per_point": data["workload"]["requests_per_point"],
        "wall_s": wall,
        "prune_s": st["prune_s"],
        "simulate_s": st["simulate_s"],
        "configs_per_s": st["points"] / wall,
        "x_aiconfigurator": st["points"] / wall / (233 / 8.8),
        "cheapest": best and best["key"],
        "usd_per_million_tokens": best and best["usd_per_million_tokens"],
    }


def main() -> None:
    quick = "--quick" in sys.argv
    if "--per-core" in sys.argv:  # the per-core figures, in a process pinned to one core
        figures = {
            "prune": prune_stage(1 if quick else 3),
            "simulate": simulate_stage(8 if quick else 24, 1000),
        }
        print(json.dumps(figures))
        return
    args = [sys.executable, __file__, "--per-core", *(["--quick"] if quick else [])]
    per_core = subprocess.run(args, check=True, capture_output=True, text=True, preexec_fn=one_core)
    report: dict[str, Any] = {
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    }
    report |= json.loads(per_core.stdout)
    report["executors"] = executors(300 if quick else 2000)
    report["example_quick_screen"] = example(["--requests", "200"])
    if not quick:
        report["example_default"] = example([])
    report["load_average_1_5_15"] = os.getloadavg()  # other work on the machine while it ran
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
