"""How long an estimate takes: in-process, and the CLI's cold start as a whole process.

Run: python benchmarks/bench_estimate.py   (figures go into the README by hand)
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time


def in_process(repeats: int = 200) -> float:
    from ridgeline import estimate

    estimate()  # warm the catalogues
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        estimate()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def cold_start(repeats: int = 15) -> float:
    exe = shutil.which("ridgeline")
    cmd = [exe] if exe else [sys.executable, "-m", "ridgeline"]
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([*cmd, "estimate", "--json"], check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def python_start(repeats: int = 15) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


if __name__ == "__main__":
    est, cold, bare = in_process(), cold_start(), python_start()
    print(
        json.dumps(
            {
                "estimate_in_process_s": est,
                "cli_cold_start_s": cold,
                "bare_python_start_s": bare,
                "cold_start_over_bare_python": cold / bare,
            },
            indent=2,
        )
    )
