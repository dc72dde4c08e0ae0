"""The playground's state and what the page draws for it, every number from the core."""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

from ridgeline.deployment import Deployment
from ridgeline.errors import unknown_name
from ridgeline.models import catalogue_names
from ridgeline.points import attainable_flops
from ridgeline.predict import estimate_on
from ridgeline.request import compute_bound_tokens
from ridgeline.step import decode_step

# The chart's roofs are drawn between these intensities (FLOPs per byte); the page clips.
INTENSITY_MIN = 1e-2
INTENSITY_MAX = 1e9


@dataclass(frozen=True)
class State:
    """What the playground's controls set: the inputs of `ridgeline estimate`."""

    model: str = "llama-3.1-8b"
    gpu: str = "h100-sxm"
    weights: str = "bf16"
    prompt: int = 2000
    output: int = 500
    batch: int = 1
    tp: int = 1
    preset: str = "lesson"
    maths: str = "bf16"


STATE_KEYS = tuple(f.name for f in fields(State))


def check_model(name: str) -> str:
    """The web face serves catalogue models only: a query string never names a file
    on the server or a repository to download."""
    if name.lower() not in catalogue_names():
        raise unknown_name("model", name, catalogue_names(), "ridgeline models")
    return name.lower()


@lru_cache(maxsize=512)
def machine(s: State) -> Deployment:
    return Deployment.build(
        check_model(s.model), s.gpu, weights=s.weights, maths=s.maths, tp=s.tp, preset=s.preset
    )


@lru_cache(maxsize=512)
def estimate_dict(s: State) -> dict[str, Any]:
    """Exactly `ridgeline estimate --json` for this state."""
    return estimate_on(machine(s), prompt=s.prompt, output=s.output, batch=s.batch).to_dict()


def _point(m: Any, phase: dict[str, Any]) -> dict[str, Any]:
    i = phase["intensity"]
    return {"intensity": i, "attainable_flops": attainable_flops(m, i), "bound": phase["bound"]}


@lru_cache(maxsize=512)
def roofline_dict(s: State) -> dict[str, Any]:
    """The chart for this state: the accelerator's roof at 100% (its ridge), the roof
    the preset's efficiencies reach, and where the prefill and the first decode step sit."""
    e = estimate_dict(s)
    m = machine(s)
    ideal = m.at_peak()
    return {
        "peak_flops": m.peak_flops,
        "bandwidth_bytes_per_s": m.hw.bandwidth_bytes_per_s,
        "ridge": m.ridge,
        "effective_ridge": m.effective_ridge,
        "compute_eff": m.eff.compute,
        "bandwidth_eff": m.eff.bandwidth,
        "roof": [[i, attainable_flops(ideal, i)] for i in (INTENSITY_MIN, ideal.ridge, INTENSITY_MAX)],
        "effective_roof": [
            [i, attainable_flops(m, i)] for i in (INTENSITY_MIN, m.effective_ridge, INTENSITY_MAX)
        ],
        "prefill": {"tokens": s.batch * s.prompt, **_point(m, e["prefill"])},
        "decode": {"batch": s.batch, "context": s.prompt, **_point(m, e["decode"])},
        "compute_bound_tokens": compute_bound_tokens(m),
        "prefill_attention_share": e["prefill"]["attention_share"],
        # the decode speed limit: one step that reads the weights and no KV cache
        "decode_floor_s": float(decode_step(m, 0, s.batch).time_s),
    }


def playground(s: State) -> dict[str, Any]:
    return {"estimate": estimate_dict(s), "roofline": roofline_dict(s)}
