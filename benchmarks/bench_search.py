"""How fast `ridgeline search` runs: each stage per core, the pool's speed-up from 1 to 2
workers, Ray's overhead against the local pool on the same machine, and the README's
example space timed as a user runs it (the whole process, every core), beside the same
search run exhaustively (every survivor run whole).

The yardstick (ridgeline issue #14): aiconfigurator searches 233 configurations in 8.8 s
with closed forms alone (26.5 a second); twenty times that is 530 configurations a second,
here with a simulated p99 for every point that the answer needs.

Every wall time comes with the CPU seconds it took (this process and its children), which
other jobs on a shared machine disturb less.

Run: python benchmarks/bench_search.py [--quick]   (figures go into the README by hand)
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

MODEL = "llama-3.1-70b"
RATE = 10.0
SLO = {"ttft_s": 1.0, "tpot_s": 0.05}
AICONFIGURATOR_PER_S = 233 / 8.8
# The README's example: llama-3.1-70b at 10 requests/s on six accelerators, TP 1-8, three
# engines, every dtype, replicas auto.
EXAMPLE_AXES = {"gpu": "h100-sxm,h200,b200,a100-80gb-sxm,l40s,mi300x", "tp": "1,2,4,8",
                "engine": "vllm,sglang,trtllm"}  # fmt: skip
EXAMPLE = ["--model", "llama-3.1-70b", "--rate", "10", "--prompt-tokens", "2000", "--output-tokens", "500",
           "--slo-ttft-p99", "1", "--slo-tpot-p99", "0.05",
           *(x for name in ("gpu", "tp", "engine") for x in (f"--{name}", EXAMPLE_AXES[name]))]  # fmt: skip
# A fixed sub-space for the executor comparisons: 96 points (32 deployments x 3 replica counts).
SUB = {"gpu": "h100-sxm,h200", "tp": "2,4", "weights": "fp8", "maths": "bf16,fp8", "kv_dtype": "bf16,fp8",
       "engine": "vllm,trtllm", "replicas": "2,3,4"}  # fmt: skip


def cpu_s() -> float:
    """CPU seconds of this process and of its finished children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def one_core() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def settings(requests: int, auto: bool = False) -> Any:
    from ridgeline.metrics import Slo
    from ridgeline.models import get_model
    from ridgeline.search.run import Settings
    from ridgeline.simulate.workload import Lengths, Workload

    w = Workload(
        Lengths("fixed", 2000), Lengths("fixed", 500), rate_per_s=RATE, requests=requests, duration_s=None
    )
    return Settings(MODEL, get_model(MODEL), w, Slo(**SLO), auto_requests=auto)


def prune_stage(repeats: int) -> dict[str, Any]:
    """The default space (every priced accelerator, TP 1-8, every dtype and engine), one core:
    the whole prune, and its two parts. The configurations' part asks the core once per
    deployment and knob pair; the broadcast part spreads the replica counts and prices over
    every point as arrays, timed again on the same space with 64 replica counts given."""
    from ridgeline.search.prune import broadcast, configurations, demand, prune
    from ridgeline.search.space import make_space

    s = settings(1000)
    dem = demand(s.workload, s.arch.max_context, 16)
    out: dict[str, Any] = {}
    for name, axes in (
        ("default", {}),
        ("64_replica_counts", {"replicas": ",".join(map(str, range(1, 65)))}),
    ):
        space = make_space(axes, None, s.arch)
        whole, parts, spread = [], [], []
        pruned = None
        for _ in range(repeats):
            t0 = time.perf_counter()
            pruned = prune(space, s.arch, dem, s.slo, None, RATE)
            whole.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            configs = configurations(space, s.arch, dem, s.slo, None)
            parts.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            broadcast(configs, space.replicas, RATE)
            spread.append(time.perf_counter() - t0)
        assert pruned is not None
        wall, part, bc = (statistics.median(x) for x in (whole, parts, spread))
        out[name] = {
            "points": pruned.points,
            "removed": pruned.invalid + pruned.memory + pruned.latency,
            "survivors": len(pruned.config),
            "configurations": len(pruned.configs),
            "wall_s": wall,
            "points_per_s": pruned.points / wall,
            "configurations_s": part,
            "broadcast_s": bc,
            "broadcast_points_per_s": len(pruned.config) / bc,
        }
    return out


def simulate_stage(points: int, requests: int) -> dict[str, Any]:
    """About `points` survivors of the example space (every point of a few of its deployments),
    run whole one after another on one core, then screened (the first replica's first 1/24,
    and its first 1/6, of the run's requests)."""
    from ridgeline.search.fidelity import screen_requests
    from ridgeline.search.prune import demand, prune
    from ridgeline.search.space import make_space, point_seed
    from ridgeline.search.stage import Context, Task, simulate_task

    s = settings(requests)
    space = make_space(EXAMPLE_AXES, None, s.arch)
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
    tasks = [Task(p.key, shapes.index(p.shape), p.max_num_seqs, p.max_num_batched_tokens, p.replicas,
                  point_seed(0, p.key)) for p in chosen]  # fmt: skip
    out: dict[str, Any] = {"points": len(tasks), "requests_per_point": requests}
    runs = {"whole": (requests, tasks)}
    for n in screen_requests(requests):
        runs[f"screen_{n}"] = (n, [replace(t, screen=n) for t in tasks])
    for name, (n, run) in runs.items():
        t0 = time.perf_counter()
        for task in run:
            simulate_task(ctx, task)
        wall = time.perf_counter() - t0
        out[name] = {"requests_each": n, "wall_s": wall, "points_per_s": len(tasks) / wall}
    return out


def example_stage() -> dict[str, Any]:
    """The example's simulate stage on one core, as the search decides it and exhaustively."""
    from ridgeline.search.executors import Executor
    from ridgeline.search.run import search
    from ridgeline.search.space import make_space
    from ridgeline.search.stage import COLUMNS, HOW

    s = settings(1000, auto=True)
    space = make_space(EXAMPLE_AXES, None, s.arch)
    out: dict[str, Any] = {}
    answers = []
    judged = [c for c in COLUMNS if c not in HOW]  # what a point's run gave, not how it was decided
    with tempfile.TemporaryDirectory() as tmp:
        for name, exhaustive in (("decided", False), ("exhaustive", True)):
            t0, c0 = time.perf_counter(), cpu_s()
            r = search(space, replace(s, exhaustive=exhaustive), Executor("local", 1), str(Path(tmp) / name))
            out[name] = {"wall_s": time.perf_counter() - t0, "cpu_s": cpu_s() - c0, **vars(r.stages)}
            answers.append([[row[c] for c in judged] for row in [r.cheapest or {}, *r.front] if row])
    out["exhaustive_over_decided_cpu"] = out["exhaustive"]["cpu_s"] / out["decided"]["cpu_s"]
    out["same_answer"] = answers[0] == answers[1]  # the cheapest point and the front, every column
    return out


def pool_of_one() -> Any:
    """A pool of one worker process: the pool's own overhead beside the in-process run."""
    from ridgeline.search.executors import Executor, PoolSession

    class One(Executor):
        def session(self, ctx: Any, most: int, started: Any = None) -> Any:
            return PoolSession(ctx, 1)

    return One("local", 1)


def executors(requests: int) -> dict[str, Any]:
    """The same 96-point search, run exhaustively (every point whole: the scaling of the
    simulator itself): in this process, on pools of 1 and 2, and on a local Ray."""
    from ridgeline.search.executors import Executor, connect
    from ridgeline.search.run import search
    from ridgeline.search.space import make_space

    s = replace(settings(requests), exhaustive=True)
    space = make_space(SUB, None, s.arch)
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:

        def timed(name: str, executor: Executor) -> float:
            t0, c0 = time.perf_counter(), cpu_s()
            r = search(space, s, executor, str(Path(tmp) / name))
            wall = time.perf_counter() - t0
            out.setdefault("points", r.stages.survivors)
            out[f"{name}_s"] = wall
            out[f"{name}_cpu_s"] = cpu_s() - c0
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
        t0 = time.perf_counter()
        connect(ray, "local", 2)  # search's own start of a local Ray: loopback only
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
        t0, c0 = time.perf_counter(), cpu_s()
        args = [*EXAMPLE, *extra, "--out", str(Path(tmp) / "r"), "--json"]
        proc = subprocess.run(
            [sys.executable, "-m", "ridgeline", "search", *args], check=True, capture_output=True, text=True
        )
        wall = time.perf_counter() - t0
        cpu = cpu_s() - c0
    data = json.loads(proc.stdout)
    st = data["stages"]
    best = data["cheapest"]
    return {
        "args": extra,
        "points": st["points"],
        "pruned": st["invalid"] + st["memory"] + st["latency"],
        "survivors": st["survivors"],
        "screened": st["screened"],
        "run_whole": st["full"],
        "met": st["met"],
        "missed": st["missed"],
        "dominated": st["dominated"],
        "requests_per_point": data["workload"]["requests_per_point"],
        "wall_s": wall,
        "cpu_s": cpu,
        "prune_s": st["prune_s"],
        "simulate_s": st["simulate_s"],
        "configs_per_s": st["points"] / wall,
        "x_aiconfigurator": st["points"] / wall / AICONFIGURATOR_PER_S,
        "cheapest": best and best["key"],
        "usd_per_million_tokens": best and best["usd_per_million_tokens"],
        "front": len(data["front"]),
    }


def main() -> None:
    quick = "--quick" in sys.argv
    if "--per-core" in sys.argv:  # the per-core figures, in a process pinned to one core
        figures = {
            "prune": prune_stage(1 if quick else 3),
            "simulate": simulate_stage(8 if quick else 24, 2400),
        }
        if not quick:
            figures["example_one_core"] = example_stage()
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
    report["example_default"] = example([])
    report["load_average_1_5_15"] = os.getloadavg()  # other work on the machine while it ran
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
