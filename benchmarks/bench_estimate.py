"""How long an estimate takes: in-process, and the CLI's cold start as a whole process.

The cold start is broken down into what the process imports (bare Python, typer, the core),
each timed as its own whole process in the same interleaved runs, so the ratios hold on a
busy machine. A plain `estimate --json` is read without typer; `estimate --help` times the
Typer path that help and every mistake take. Byte-code caches are written first
(PYTHONDONTWRITEBYTECODE is dropped for the timed processes): a user's installed package
has them, and a process that compiles every module it imports measures the compiler. A
peer's CLI is timed in the same runs when it is installed (`pip install ridgepoint`, or
RIDGEPOINT=/path/to/ridgepoint).

In process, one request (Llama 3.1 8B on an H100 SXM, 2,000 tokens in, 500 out) is priced
in a loop by each tool in its own Python, in the same interleaved rounds: ridgeline's
`estimate()` (the timeline: TTFT, TPOT and the rest derive from it on first use) and
`estimate().to_dict()` (every part, the memory plan and the explanation too), a sweep of
estimates each of another request (the same deployment by name), ridgepoint's
`fit` (a Rust extension: RIDGEPOINT_PYTHON=/path/to/python, or installed beside ridgeline)
and llm-analysis's `LLMAnalysis(...).inference` (its catalogue has no Llama 3 and its model
config cannot hold an MLP of 3.5 x hidden, so its Llama 2 7B at the same 60% / 80%
efficiencies; LLM_ANALYSIS_PYTHON=/path/to/python).

Run: python benchmarks/bench_estimate.py   (figures go into the README by hand)
     python -X importtime -m ridgeline estimate --json 2>&1 >/dev/null | sort -t'|' -k2 -n | tail
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Each tool's call, as the loop below runs it in that tool's own Python.
CALLS = {
    "ridgeline": "from ridgeline import estimate\ncall = estimate",
    # The result's other parts are derived on first use; this asks for every one of them.
    "ridgeline_whole": "from ridgeline import estimate\ncall = lambda: estimate().to_dict()",
    # A sweep: each call another request (prompts of 100-8,099 tokens, outputs of 50-2,049).
    "ridgeline_sweep": """
from itertools import count
from ridgeline import estimate
i = count()
call = lambda: estimate(prompt=100 + next(i) * 37 % 8000, output=50 + next(i) * 13 % 2000)
""",
    "ridgepoint": "import ridgepoint\ncall = lambda: ridgepoint.fit('llama-3-8b', 'h100-80gb')",
    "llm_analysis": """
import logging
from llm_analysis.analysis import LLMAnalysis, logger
from llm_analysis.config import get_dtype_config_by_name, get_gpu_config_by_name, get_model_config_by_name
logger.setLevel(logging.ERROR)

def call():
    model = get_model_config_by_name('NousResearch_Llama-2-7b-hf')
    gpu, dtype = get_gpu_config_by_name('h100-sxm-80gb'), get_dtype_config_by_name('w16a16e16')
    a = LLMAnalysis(model, gpu, dtype, flops_efficiency=0.6, hbm_memory_efficiency=0.8)
    return a.inference(batch_size_per_gpu=1, seq_len=2000, num_tokens_to_generate=500)
""",
}
LOOP = """
import statistics, time
{call}
for _ in range(50):  # warm the catalogues and caches
    call()
times = []
for _ in range({repeats}):
    t0 = time.perf_counter()
    call()
    times.append(time.perf_counter() - t0)
print(statistics.median(times))
"""


def tool_pythons() -> dict[str, str]:
    """The Python each tool runs in: this one for ridgeline; a peer's from its variable, or
    this one when the peer is installed here; peers found nowhere are left out."""
    found = {tool: sys.executable for tool in ("ridgeline", "ridgeline_whole", "ridgeline_sweep")}
    for tool, variable in (("ridgepoint", "RIDGEPOINT_PYTHON"), ("llm_analysis", "LLM_ANALYSIS_PYTHON")):
        python = os.environ.get(variable)
        if python or importlib.util.find_spec(tool) is not None:
            found[tool] = python or sys.executable
    return found


def in_process(rounds: int = 5, repeats: int = 1000) -> dict[str, float]:
    """Median seconds per call of each tool, in process, the median over interleaved rounds."""
    pythons = tool_pythons()
    times: dict[str, list[float]] = {tool: [] for tool in pythons}
    for _ in range(rounds):
        for tool, python in pythons.items():
            code = LOOP.format(call=CALLS[tool], repeats=repeats)
            out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout
            times[tool].append(float(out.split()[-1]))
    return {tool: statistics.median(t) for tool, t in times.items()}


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
    calls, cold = in_process(), cold_starts()
    bare = cold["bare_python"]
    est = calls["ridgeline"]
    report: dict[str, float] = {"estimate_in_process_s": est, "estimate_to_dict_s": calls["ridgeline_whole"]}
    report["estimate_sweep_in_process_s"] = calls["ridgeline_sweep"]
    if "ridgepoint" in calls:
        report["ridgepoint_fit_in_process_s"] = calls["ridgepoint"]
        report["in_process_over_ridgepoint"] = est / calls["ridgepoint"]
    if "llm_analysis" in calls:
        report["llm_analysis_inference_in_process_s"] = calls["llm_analysis"]
        report["llm_analysis_over_in_process"] = calls["llm_analysis"] / est
    report.update({f"{name}_s": t for name, t in cold.items()})
    report["typer_import_above_bare_s"] = cold["import_typer"] - bare
    report["core_import_above_bare_s"] = cold["import_core"] - bare
    report["cli_above_core_import_s"] = cold["cli_estimate_json"] - cold["import_core"]
    report["cli_over_bare_python"] = cold["cli_estimate_json"] / bare
    if "ridgepoint_fit_json" in cold:
        report["cli_over_ridgepoint"] = cold["cli_estimate_json"] / cold["ridgepoint_fit_json"]
    print(json.dumps(report, indent=2))
