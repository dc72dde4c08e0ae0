"""The playground's state and what the page draws for it, every number from the core.

FastAPI-free: the server (`app.py`) and the page's Python in the browser (`browser.py`,
under Pyodide) both use it, so the limits on a state live here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any

from ridgeline.deployment import Deployment
from ridgeline.engines import Scheduler, engines
from ridgeline.errors import RidgelineError, unknown_name
from ridgeline.ledger import TRAINING_BYTES_PER_PARAM, training_flops_per_token
from ridgeline.models import catalogue_names
from ridgeline.points import attainable_flops
from ridgeline.predict import estimate_on
from ridgeline.request import compute_bound_tokens
from ridgeline.step import decode_step

# The chart's roofs are drawn between these intensities (FLOPs per byte); the page clips.
INTENSITY_MIN = 1e-2
INTENSITY_MAX = 1e9
# What one request of the web face may ask for, so that none runs away.
MAX_TOKENS = 1_000_000  # prompt or output; the model's context caps them further
MAX_BATCH = 4096
MAX_TP = 64
NAME = r"^[A-Za-z0-9][A-Za-z0-9._\-]*$"  # catalogue names: no paths, no URLs
MAX_NAME = {"model": 64, "gpu": 64, "weights": 16, "preset": 16, "maths": 16, "engine": 64}
# The engine a state names when it names none: the lesson's plain roofline, the preset's flat
# fractions of peak. Any other name is an engine profile's (`ridgeline engines`).
NO_ENGINE = "none"
# The training point on the chart: a step of this many tokens on each GPU (say 8 sequences
# of 2,048), 6·P FLOPs a token over the ~16 bytes a parameter of training state.
TRAINING_TOKENS_PER_STEP = 16_384


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
    engine: str = NO_ENGINE
    in_process: bool = False  # with an engine: no server before the first token (estimate --in-process)


STATE_KEYS = tuple(f.name for f in fields(State))
WHOLE_LIMITS = {
    "prompt": (1, MAX_TOKENS),
    "output": (1, MAX_TOKENS),
    "batch": (1, MAX_BATCH),
    "tp": (1, MAX_TP),
}


SWITCHES = ("in_process",)


def _switch(key: str, value: Any) -> bool:
    """On or off: true or false (JSON, or a query's text), 1 or 0."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise RidgelineError(f"{key}: write true or false, got {_shown(value)}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def state_from(query: Mapping[str, Any]) -> State:
    """A state from a query's values (text, or numbers from the page's JavaScript), each
    checked as the server's query checks it: names from the catalogues' alphabet, whole
    numbers within the web face's limits. A bad one is refused in one line."""
    unknown = sorted(set(query) - set(STATE_KEYS))
    if unknown:
        raise RidgelineError(f"unknown state keys {unknown}; use {', '.join(STATE_KEYS)}")
    values: dict[str, Any] = {}
    for key, value in query.items():
        if key in WHOLE_LIMITS:
            lo, hi = WHOLE_LIMITS[key]
            if isinstance(value, bool) or not (
                isinstance(value, int) or (isinstance(value, str) and re.fullmatch(r"[0-9]{1,15}", value))
            ):
                raise RidgelineError(f"{key}: write a whole number in digits, got {_shown(value)}")
            number = int(value)
            if not lo <= number <= hi:
                raise RidgelineError(f"{key} must lie in {lo}..{hi:,}, got {number:,}")
            values[key] = number
        elif key in SWITCHES:
            values[key] = _switch(key, value)
        else:
            if not isinstance(value, str) or len(value) > MAX_NAME[key] or not re.fullmatch(NAME, value):
                raise RidgelineError(f"{key}: not a catalogue name, got {_shown(value)}")
            values[key] = value
    return State(**values)


def check_model(name: str) -> str:
    """The web face serves catalogue models only: a query string never names a file
    on the server or a repository to download."""
    if name.lower() not in catalogue_names():
        raise unknown_name("model", name, catalogue_names(), "ridgeline models")
    return name.lower()


def check_engine(name: str) -> str | None:
    """An engine profile's name (the package's or the user's own files'), or None for the
    lesson's roofline. Only names: a query string never names a profile's file."""
    if name.lower() == NO_ENGINE:
        return None
    known = engines()
    if name.lower() not in known:
        raise unknown_name("engine", name, [NO_ENGINE, *known], "ridgeline engines")
    return name.lower()


@lru_cache(maxsize=512)
def machine(s: State) -> Deployment:
    return Deployment.build(
        check_model(s.model),
        s.gpu,
        weights=s.weights,
        maths=s.maths,
        tp=s.tp,
        preset=s.preset,
        engine=check_engine(s.engine),
        in_process=s.in_process,
    )


@lru_cache(maxsize=512)
def estimate_dict(s: State) -> dict[str, Any]:
    """Exactly `ridgeline estimate --json` for this state."""
    return estimate_on(machine(s), prompt=s.prompt, output=s.output, batch=s.batch).to_dict()


def _point(m: Deployment, phase: dict[str, Any]) -> dict[str, Any]:
    i = phase["intensity"]
    return {"intensity": i, "attainable_flops": attainable_flops(m, i), "bound": phase["bound"]}


def training_point(m: Deployment) -> dict[str, Any]:
    """Where a training step sits: 6·P FLOPs a token (the core's ledger) for
    TRAINING_TOKENS_PER_STEP tokens, over the core's ~16 bytes a parameter of training state
    (weights, gradients, fp32 master copy, two Adam moments), each touched once a step."""
    tokens = TRAINING_TOKENS_PER_STEP
    flops = training_flops_per_token(m.arch) * tokens
    intensity = flops / (TRAINING_BYTES_PER_PARAM * m.arch.parameters)
    bound = "compute" if intensity >= m.effective_ridge else "memory"
    return {
        "tokens": tokens,
        "intensity": intensity,
        "attainable_flops": attainable_flops(m, intensity),
        "bound": bound,
    }


@lru_cache(maxsize=512)
def roofline_dict(s: State) -> dict[str, Any]:
    """The chart for this state: the accelerator's roof at 100% (its ridge), the roof
    the preset's efficiencies reach, and where the prefill and the first decode step sit
    (and a training step, for the step that compares them)."""
    e = estimate_dict(s)
    m = machine(s)
    ideal = m.at_peak()
    prefill_tokens = s.batch * s.prompt
    flops_per_s, bytes_per_s = m.reach
    chunk = (m.scheduler or Scheduler()).max_num_batched_tokens
    engine = None
    if m.engine is not None:
        engine = {"name": m.engine.name, "label": m.engine.label, "band": bool(e["uncertainty"])}
    return {
        "peak_flops": m.peak_flops,
        "bandwidth_bytes_per_s": m.hw.bandwidth_bytes_per_s,
        "ridge": m.ridge,
        "effective_ridge": m.effective_ridge,
        "compute_eff": flops_per_s / m.peak_flops,
        "bandwidth_eff": bytes_per_s / m.hw.bandwidth_bytes_per_s,
        "engine": engine,  # the profile whose rates set the dashed roof, or None: the preset's
        "roof": [[i, attainable_flops(ideal, i)] for i in (INTENSITY_MIN, ideal.ridge, INTENSITY_MAX)],
        "effective_roof": [
            [i, attainable_flops(m, i)] for i in (INTENSITY_MIN, m.effective_ridge, INTENSITY_MAX)
        ],
        "prefill": {"tokens": prefill_tokens, **_point(m, e["prefill"])},
        # decode steps run at contexts prompt .. prompt + output - 1 for every user
        "decode": {
            "batch": s.batch,
            "context": s.prompt,
            "context_last": s.prompt + s.output - 1,
            **_point(m, e["decode"]),
        },
        "training": training_point(m),
        "compute_bound_tokens": compute_bound_tokens(m),
        "prefill_attention_share": e["prefill"]["attention_share"],
        # batched prefill: the estimate runs every prompt as one pass; a scheduler runs it in
        # chunks of its batched-token budget (the engine's, or vLLM's default)
        "prefill_chunk_tokens": chunk,
        "prefill_chunks": math.ceil(prefill_tokens / chunk),
        # the decode speed limit: one step that reads the weights and no KV cache
        "decode_floor_s": float(decode_step(m, 0, s.batch).time_s),
    }


def playground(s: State) -> dict[str, Any]:
    return {"estimate": estimate_dict(s), "roofline": roofline_dict(s)}
