"""How fast the serving simulator runs, timed as a user runs it: the whole `ridgeline simulate`
process, start-up included, pinned to one core.

The main figure: 100,000 requests (prompt lognormal around 1,000 tokens, output around 250,
Poisson at 80% of the replica's capacity) on the default deployment, in requests simulated
per wall-second. Capacity is measured first, in-process: the completion rate of a closed loop
that always has a queue. Then how the time grows with the number of requests, and with the
batch (max_num_seqs, each at 80% of its own capacity).

Run: python benchmarks/bench_simulate.py [--quick] [--requests=1000,100000]
     (figures go into the README by hand)
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time

LENGTHS = ["--prompt-tokens", "1000", "--prompt-dist", "lognormal"]
LENGTHS += ["--output-tokens", "250", "--output-dist", "lognormal"]


def capacity_per_s(max_num_seqs: int = 256) -> float:
    """Requests per second one replica completes when it is never short of work."""
    from ridgeline.simulate import EngineConfig, Lengths, Workload, simulate

    w = Workload(
        prompt=Lengths("lognormal", 1000, 0.5),
        output=Lengths("lognormal", 250, 0.5),
        concurrency=4 * max_num_seqs,
        requests=40 * max_num_seqs,
        duration_s=None,
    )
    s = simulate(workload=w, engine=EngineConfig(max_num_seqs=max_num_seqs)).summary
    assert s is not None
    return s.requests_per_s


def one_core() -> None:
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def timed_cli(args: list[str], repeats: int) -> tuple[float, dict]:
    """Median wall seconds of the whole process, and its --json summary."""
    times, data = [], {}
    for _ in range(repeats):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "ridgeline", "simulate", *args, "--json"],
            check=True,
            capture_output=True,
            text=True,
            preexec_fn=one_core,
        )
        times.append(time.perf_counter() - t0)
        data = json.loads(proc.stdout)
    return statistics.median(times), data


def run(requests: int, rate: float, repeats: int, max_num_seqs: int = 256) -> dict:
    args = [*LENGTHS, "--rate", f"{rate:.4f}", "--requests", str(requests)]
    args += ["--max-num-seqs", str(max_num_seqs)]
    wall_s, data = timed_cli(args, repeats)
    return {
        "requests": requests,
        "max_num_seqs": max_num_seqs,
        "rate_per_s": rate,
        "wall_s": wall_s,
        "requests_per_wall_s": requests / wall_s,
        "us_per_request": wall_s / requests * 1e6,
        "engine_steps": data["utilisation"]["steps"],
        "engine_iterations": data["utilisation"]["iterations"],
        "mean_batch": data["utilisation"]["mean_batch"],
        "p99_ttft_s": data["ttft_s"]["p99"],
        "overloaded": data["overloaded"],
    }


def in_process(requests: int, rate: float) -> dict[str, float]:
    """Where one run's time goes, in-process: the event loop, then the summary (percentiles
    and the p99's interval, throughput, goodput, utilisation) and, apart, the per-request
    records that only --out asks for."""
    from ridgeline.simulate import Lengths, Workload, simulate

    w = Workload(
        prompt=Lengths("lognormal", 1000, 0.5),
        output=Lengths("lognormal", 250, 0.5),
        rate_per_s=rate,
        requests=requests,
    )
    t0 = time.perf_counter()
    result = simulate(workload=w)
    t1 = time.perf_counter()
    result.records  # noqa: B018 (built on first use)
    t2 = time.perf_counter()
    return {"requests": requests, "simulate_s": t1 - t0, "records_s": t2 - t1}


def main(quick: bool = False, sizes: tuple[int, ...] = ()) -> None:
    repeats = 1 if quick else 3
    capacity = capacity_per_s()
    rate = 0.8 * capacity
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "ridgeline", "--help"]
    subprocess.run(cmd, check=True, capture_output=True, preexec_fn=one_core)
    startup_s = time.perf_counter() - t0
    if sizes:  # just these sizes: `--requests 1000,100000`
        rows = [run(n, rate, repeats) for n in sizes]
        split = [in_process(n, rate) for n in sizes]
        print(json.dumps({"capacity_per_s": capacity, "by_requests": rows, "in_process": split}, indent=2))
        return
    headline = run(100_000, rate, repeats)
    by_requests = [run(n, rate, repeats) for n in (1_000, 10_000, 30_000)] + [headline]
    by_batch = []
    for seqs in (32, 64, 128, 256):
        by_batch.append(run(30_000, 0.8 * capacity_per_s(seqs), repeats, seqs))
    print(
        json.dumps(
            {
                "capacity_per_s": capacity,
                "cli_start_s": startup_s,
                "headline": headline,
                "by_requests": by_requests,
                "by_max_num_seqs": by_batch,
                "in_process": [in_process(n, rate) for n in (1_000, 100_000)],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    chosen = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--requests=")), "")
    main(quick="--quick" in sys.argv, sizes=tuple(int(n) for n in chosen.split(",") if n))
