"""How long `plan` takes on the README's question, and whether it sizes the same fleet as the
full search (`--exhaustive`: every trial at full length), in the same runs.

Each command runs as a whole process (start-up included), interleaved with the other, and
the medians are reported with the answers: replicas, GPUs, rate per replica, $ per million
tokens, and the simulated trials behind them.

With --band ENGINE it times the same question on that engine's profile with its 80% band
(the plan again at each end) against `--no-band`, and reports the band's figures.

Run: python benchmarks/bench_plan.py [--repeats 3] [--compare] [--band vllm]
(figures go into the README)
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

QUESTION = [
    *("--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--rate", "20"),
    *("--prompt-tokens", "2000", "--output-tokens", "500", "--slo-ttft-p99", "1", "--slo-tpot-p99", "0.05"),
]
COMPARE = ["--compare", "h100-sxm:1:bf16,h200:1:fp8,a100-80gb-sxm:2:bf16"]


def timed(args: list[str]) -> tuple[float, dict]:
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "ridgeline", "plan", *args, "--json"]
    proc = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return time.perf_counter() - t0, json.loads(proc.stdout)


def answer(data: dict) -> list[dict]:
    return [
        {
            "deployment": f"{p['deployment']['gpu']}:{p['deployment']['tp']}:{p['deployment']['weights']}",
            "replicas": p["replicas"],
            "gpus": p["gpus"],
            "rate_per_replica": round(p["max_rate_per_replica"], 3),
            "usd_per_million_tokens": round(p["usd_per_million_tokens"], 4),
            "trials": p["trials"],
            "screen_requests": p["confidence"]["screen_requests"],
            "requests_per_run": p["requests_per_run"],
        }
        for p in data["plans"]
    ]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compare", action="store_true", help="the three-deployment comparison as well")
    ap.add_argument("--band", metavar="ENGINE", help="time the band's two more plans on this engine")
    opts = ap.parse_args()
    if opts.band:
        print(json.dumps(band_cost([*QUESTION, "--engine", opts.band], opts.repeats), indent=2))
        return
    questions = {"readme": QUESTION}
    if opts.compare:
        questions["compare"] = [*QUESTION[4:], *COMPARE]
    report = {}
    for name, args in questions.items():
        wall: dict[str, list[float]] = {"plan": [], "exhaustive": []}
        answers: dict[str, list] = {}
        for _ in range(opts.repeats):
            for label, extra in (("plan", []), ("exhaustive", ["--exhaustive"])):
                t, data = timed([*args, *extra])
                wall[label].append(t)
                answers[label] = answer(data)
        same = [
            (a["deployment"], a["replicas"], a["gpus"]) == (b["deployment"], b["replicas"], b["gpus"])
            for a, b in zip(answers["plan"], answers["exhaustive"], strict=True)
        ]
        report[name] = {
            "plan_s": statistics.median(wall["plan"]),
            "exhaustive_s": statistics.median(wall["exhaustive"]),
            "speedup": statistics.median(wall["exhaustive"]) / statistics.median(wall["plan"]),
            "same_fleet": all(same),
            "answers": answers,
        }
    print(json.dumps(report, indent=2))


def band_cost(args: list[str], repeats: int) -> dict:
    """The plan with its band against `--no-band`, interleaved, and the band it reports."""
    wall: dict[str, list[float]] = {"band": [], "no_band": []}
    band = None
    for _ in range(repeats):
        for label, extra in (("band", []), ("no_band", ["--no-band"])):
            t, data = timed([*args, *extra])
            wall[label].append(t)
            if label == "band":
                u = data["plans"][0]["uncertainty"]
                band = {k: u[k] for k in ("time_ratio", "max_rate_per_replica", "gpus")}
    band_s, plain_s = statistics.median(wall["band"]), statistics.median(wall["no_band"])
    return {"band_s": band_s, "no_band_s": plain_s, "ratio": band_s / plain_s, "band": band}


if __name__ == "__main__":
    main()
