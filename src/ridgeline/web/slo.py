"""Step 15's table: what users feel at p50 and p99 once traffic arrives, from the simulator.

A small chat workload (REQUESTS requests, lognormal lengths around the state's prompt and
output, Poisson arrivals) runs at each of RATES_PER_S on one replica of the state's
deployment, with continuous batching, chunked prefill and a paged KV cache. More arrivals
a second make bigger batches: more tokens a second per GPU, longer p99 TTFT and TPOT, until
the SLO breaks. That is the trade batching makes.

The simulator needs numpy, so the static site (`export.py`) runs this at export time for
step 15's state and carries the answer; the live server runs it for any state.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

from ridgeline import metrics
from ridgeline.engines import LOAD
from ridgeline.errors import RidgelineError
from ridgeline.web.view import NO_ENGINE, State, machine

RATES_PER_S = (0.5, 2.0, 5.0, 8.0, 11.0, 14.0)  # requests a second, offered to one replica
REQUESTS = 400  # per rate: enough for a p99 over 100 samples (metrics.MIN_SAMPLES)
SPREAD = 0.5  # lognormal sigma of prompt and output lengths
SEED = 0
SLO_TTFT_S = 0.5  # a chat product's p99 targets, as step 15 states them
SLO_TPOT_S = 0.05
MAX_SIMULATED_TOKENS = 32_768  # prompt + output means one run may ask for: a small workload


def key_of(s: State) -> str:
    """What the table depends on: the deployment and the lengths (not the batch: the
    simulator forms its own batches from the arrivals)."""
    deployment = f"{s.model}|{s.gpu}|{s.weights}|{s.maths}|{s.tp}|{s.preset}"
    return f"{deployment}|{s.prompt}|{s.output}" + ("" if s.engine == NO_ENGINE else f"|{s.engine}")


def slo_table(s: State) -> dict[str, Any]:
    """The table for a state: one row per arrival rate (p50 and p99 TTFT and TPOT, the mean
    batch, output tokens a second per GPU, whether the SLO is met)."""
    if s.prompt + s.output > MAX_SIMULATED_TOKENS:
        raise RidgelineError(
            f"the SLO table simulates requests of up to {MAX_SIMULATED_TOKENS:,} tokens, got "
            f"{s.prompt:,} + {s.output:,}: `ridgeline simulate` takes longer ones"
        )
    return _table(replace(s, batch=1))


@lru_cache(maxsize=64)
def _table(s: State) -> dict[str, Any]:
    from ridgeline.simulate import Lengths, Workload, simulate

    m = machine(s)
    slo = metrics.Slo(ttft_s=SLO_TTFT_S, tpot_s=SLO_TPOT_S)
    rows = []
    for rate in RATES_PER_S:
        workload = Workload(
            prompt=Lengths("lognormal", s.prompt, SPREAD),
            output=Lengths("lognormal", s.output, SPREAD),
            rate_per_s=rate,
            requests=REQUESTS,
            duration_s=None,
            seed=SEED,
        )
        summary = simulate(m, workload, slo=slo).summary
        assert summary is not None and summary.slo is not None  # summarized, with targets
        band = summary.uncertainty  # the engine's band under load on the medians (report.load_band)
        rows.append(
            {
                "rate_per_s": rate,
                "mean_batch": summary.utilisation.mean_batch,
                "ttft_p50_s": summary.ttft_s.p50,
                "ttft_p99_s": summary.ttft_s.p99,
                "tpot_p50_s": summary.tpot_s.p50,
                "tpot_p99_s": summary.tpot_s.p99,
                "ttft_p50_band_s": None if band is None else band["ttft_p50_s"],
                "tpot_p50_band_s": None if band is None else band["tpot_p50_s"],
                "tokens_per_s_per_gpu": summary.throughput_tokens_per_s / m.par.gpus,
                "ttft_met": summary.slo.p99_met["ttft_s"],
                "tpot_met": summary.slo.p99_met["tpot_s"],
                "met": summary.met,
                "overloaded": summary.overloaded,
            }
        )
    return {
        "key": key_of(s),
        "deployment": {
            "model": m.arch.name,
            "gpu": m.hw.name,
            "gpu_label": m.hw.label,
            "weights": m.prec.weights,
            "maths": m.prec.maths,
            "tp": m.par.tp,
            "preset": s.preset,
            "engine": None if m.engine is None else m.engine.label,
        },
        "workload": {
            "requests": REQUESTS,
            "prompt_mean": s.prompt,
            "output_mean": s.output,
            "lengths": f"lognormal, sigma {SPREAD}",
            "arrivals": "poisson",
            "seed": SEED,
        },
        "slo": {"ttft_p99_s": SLO_TTFT_S, "tpot_p99_s": SLO_TPOT_S},
        # measured / predicted time of the engine's published runs under load (80%), or None
        "band": m.band(LOAD),
        "rows": rows,
        "precomputed": False,
    }
