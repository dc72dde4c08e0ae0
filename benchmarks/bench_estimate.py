"""How long an estimate takes: in-process, and the CLI's cold start as a whole process.

The cold start is broken down into what the process imports (bare Python, typer, the core),
each timed as its own whole process in the same interleaved runs, so the ratios hold on a
busy machine. A plain `estimate --json` is read without typer; `estimate --help` times the
Typer path that help and every mistake take. Byte-code caches are written first
(PYTHONDONTWRITEBYTECODE is dropped for the timed processes): a user's installed package
has them, and a process that compiles every module it imports measures the compiler. A
peer's CLI is timed in the same runs when it is installed (`pip install ridgepoint`, or
RIDGEPOINT=/path/to/ridgepoint).

Run: python benchmarks/bench_estimate.py   (figures go into the README by hand)
     python -X importtime -m ridgeline estimate --json 2>&1 >/dev/null | sort -t'|' -k2 -n | tail
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def in_process(repeats: int = 200) -> float:
    from ridgeline import estimate

    estimate()  # warm the catalogues
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        estimate()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _ridgeline() -> list[str]:
    """The console script beside this Python (a virtualenv's bin/), else `-m ridgeline`."""
    exe = Path(sys.executable).with_name("ridgeline")
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "ridgeline"]


def processes() -> dict[str, list[str]]:
    py = sys.executable
    found = {
        "bare_python": [py, "-c", "pass"],
        "import_typer": [py, "-c", "import typer"],
        "import_core": [py, "-c", "import ridgeline.predict"],
        "cli_estimate_json": [*_ridgeline(), "estimate", "--json"],
        "cli_estimate_help": [*_ridgeline(), "estimate", "--help"],
    }
    peer = os.environ.get("RIDGEPOINT") or shutil.which("ridgepoint")
    if peer:
        found["ridgepoint_fit_json"] = [peer, "fit", "llama-3-8b", "--gpu", "h100-80gb", "--json"]
    return found


def cold_starts(repeats: int = 21) -> dict[str, float]:
    """Median wall seconds of each process, run interleaved."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cmds = processes()
    for cmd in cmds.values():  # write byte-code caches, warm the page cache
        subprocess.run(cmd, check=True, capture_output=True, env=env)
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(repeats):
        for name, cmd in cmds.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True, env=env)
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) for name, t in times.items()}


if __name__ == "__main__":
    est, cold = in_process(), cold_starts()
    bare = cold["bare_python"]
    report: dict[str, float] = {"estimate_in_process_s": est}
    report.update({f"{name}_s": t for name, t in cold.items()})
    report["typer_import_above_bare_s"] = cold["import_typer"] - bare
    report["core_import_above_bare_s"] = cold["import_core"] - bare
    report["cli_above_core_import_s"] = cold["cli_estimate_json"] - cold["import_core"]
    report["cli_over_bare_python"] = cold["cli_estimate_json"] / bare
    if "ridgepoint_fit_json" in cold:
        report["cli_over_ridgepoint"] = cold["cli_estimate_json"] / cold["ridgepoint_fit_json"]
    print(json.dumps(report, indent=2))
