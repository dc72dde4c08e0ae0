"""Every figure the film states or draws, each an `ridgeline.estimate` at the `ideal` preset.

The film asks the core a handful of questions, one estimate each, and keeps the answers
whole: the captions, the transcript and the frames read the same fields of the same
results, so a label and the sentence beside it cannot disagree.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ridgeline.errors import RidgelineError

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

if TYPE_CHECKING:
    from ridgeline.film.measured import Measured
    from ridgeline.hardware import Accelerator
    from ridgeline.predict import Estimate

PRESET = "ideal"  # the film's arithmetic, as the seed's page says
PROMPT_TOKENS = 2000  # the seed's prompt (beats 2 and 4)
BATCH_USERS = 64  # beat 5
BATCH_CONTEXT_TOKENS = 242  # tokens each of the 64 users has cached: the seed's 5.4 ms holds there
LONG_PROMPT_TOKENS = 32_000  # beat 6's long prompt, cut to the model's context
CACHE_PROMPT_TOKENS = 16_000  # beats 7 and 8 without a file: the seed's long prompt
TP_CHOICES = (1, 2, 4, 8)  # tried in turn when --tp is not given and one GPU is not enough
NAMES_FILE = Path(__file__).with_name("film.toml")


@lru_cache(maxsize=1)
def names() -> dict[str, dict[str, str]]:
    with NAMES_FILE.open("rb") as handle:
        return tomllib.load(handle)


def gpu_short(name: str) -> str:
    """How the narrator names an accelerator: "h100-sxm" -> "H100"."""
    return names()["gpus"].get(name) or name.upper().replace("-", " ")


def model_label(name: str) -> str:
    """How the narrator names a model: "llama-3.1-8b" -> "Llama 3.1 8B"."""
    known = names()["models"].get(name)
    if known:
        return known
    stem = Path(name).stem if ("/" in name or name.endswith((".gguf", ".json"))) else name
    words = re.split(r"[-_ ]+", stem)
    return " ".join(
        w.upper() if re.fullmatch(r"[0-9.]+[bmk]", w, re.I) else w[:1].upper() + w[1:] for w in words
    )


def predecessor(name: str) -> str | None:
    return names()["predecessors"].get(name)


@dataclass(frozen=True)
class Figures:
    """The core's answers for one deployment. Every Estimate is `ideal`, with one output token
    so that its `decode` is the first step after a prompt of `inputs["prompt"]` tokens."""

    model: str  # how the narrator names it
    gpu: str  # "H100"
    weights: str  # the weights dtype the estimates used ("bf16", "file" for a GGUF's mix)
    tp: int
    tp_chosen: bool  # True when one GPU could not hold the model and the film chose tp
    prefill: Estimate  # PROMPT_TOKENS: beats 2 and 4
    decode: Estimate  # a one-token prompt, batch 1: beat 3's bare decode (C ≈ 0)
    batched: Estimate  # BATCH_USERS at BATCH_CONTEXT_TOKENS: beat 5
    at_ridge: Estimate  # as many users as the ridge: still memory-bound?
    long: Estimate  # the long prompt: beat 6
    cache: Estimate  # the long measured (or CACHE_PROMPT_TOKENS) prompt: beat 8
    one_gpu: Estimate | None  # tp = 1, when the film chose a larger tp: what did not fit
    versus: Estimate | None  # the predecessor's bare decode: beat 6
    versus_name: str | None  # "A100"
    no_predecessor: bool  # no --versus, and film.toml knows none: beat 6 says so
    measured_prompts: dict[int, Estimate]  # a prediction for each prompt length the file holds

    @property
    def gpus(self) -> int:
        return self.prefill.parallel.gpus

    def summary(self) -> dict[str, Any]:
        """The film's inputs as JSON."""
        return {
            "model": self.prefill.inputs["model"],
            "gpu": self.prefill.inputs["gpu"],
            "weights": self.weights,
            "tp": self.tp,
            "tp_chosen": self.tp_chosen,
            "versus": None if self.versus is None else self.versus.inputs["gpu"],
            "preset": PRESET,
        }


def _estimate(model: Any, gpu: Any, weights: str | None, tp: int, prompt: int, batch: int = 1) -> Estimate:
    import ridgeline

    return ridgeline.estimate(
        model, gpu, weights=weights, prompt=prompt, output=1, batch=batch, tp=tp, preset=PRESET
    )


def long_prompt(max_context: int, wanted: int) -> int:
    """`wanted` tokens, or the whole thousands that the model's context holds beside one
    output token."""
    if wanted + 1 <= max_context:
        return wanted
    return max(1000 * ((max_context - 1) // 1000), 1)


def choose_tp(
    model: Any, gpu: Any, weights: str | None, tp: int | None
) -> tuple[int, Estimate, Estimate | None]:
    """The tensor-parallel size: the one given, which must hold the model, or the smallest of
    TP_CHOICES that does. Returns it, the prefill estimate on it and, when more than one GPU
    was chosen, the estimate on one GPU that did not fit."""
    if tp is not None:
        e = _estimate(model, gpu, weights, tp, PROMPT_TOKENS)
        if not e.memory.fits:
            raise RidgelineError(
                f"{e.model.name} in {e.inputs['weights']} does not fit on {tp} × {e.gpu.name}: "
                "pass a larger --tp, or leave --tp out and the film chooses"
            )
        return tp, e, None
    first: Estimate | None = None
    for n in TP_CHOICES:
        try:
            e = _estimate(model, gpu, weights, n, PROMPT_TOKENS)
        except RidgelineError:
            if n == 1:
                raise
            continue  # this model's heads do not split n ways
        if first is None:
            first = e
        if e.memory.fits:
            return n, e, (first if n > 1 else None)
    assert first is not None
    raise RidgelineError(
        f"{first.model.name} in {first.inputs['weights']} does not fit on {TP_CHOICES[-1]} × "
        f"{first.gpu.name}: choose smaller --weights (fp8, int4) or a larger --gpu"
    )


def gather(
    model: str = "llama-3.1-8b",
    gpu: str | Accelerator = "h100-sxm",
    weights: str | None = None,
    tp: int | None = None,
    versus: str | None = None,
    measured: Measured | None = None,
) -> Figures:
    """Ask the core every question the film needs. `versus`: None for the predecessor in
    film.toml, "none" for no comparison, or an accelerator's name."""
    import ridgeline

    tp, prefill, one_gpu = choose_tp(model, gpu, weights, tp)
    arch = ridgeline.get_model(model)
    gpu_name = prefill.gpu.name
    weights_used = str(prefill.inputs["weights"])
    # the rest as the prefill resolved them: a GGUF's stored mix stays its mix
    model_arg: Any = arch if not isinstance(model, str) else model
    decode = _estimate(model_arg, gpu, weights_used, tp, 1)
    batched = _estimate(model_arg, gpu, weights_used, tp, BATCH_CONTEXT_TOKENS, BATCH_USERS)
    at_ridge = _estimate(model_arg, gpu, weights_used, tp, BATCH_CONTEXT_TOKENS, max(1, round(prefill.ridge)))
    long = _estimate(model_arg, gpu, weights_used, tp, long_prompt(arch.max_context, LONG_PROMPT_TOKENS))
    wanted_cache = CACHE_PROMPT_TOKENS
    if measured is not None and measured.long is not None:
        wanted_cache = measured.long.prompt_tokens
    cache = _estimate(model_arg, gpu, weights_used, tp, long_prompt(arch.max_context, wanted_cache))
    measured_prompts: dict[int, Estimate] = {}
    if measured is not None:
        for g in measured.groups:
            n = long_prompt(arch.max_context, g.prompt_tokens)
            measured_prompts[g.prompt_tokens] = _estimate(model_arg, gpu, weights_used, tp, n)
    versus_name = predecessor(gpu_name) if versus is None else versus
    versus_est = None
    if versus_name is not None and versus_name.lower() != "none":
        other = ridgeline.get_accelerator(versus_name)
        if other.name == gpu_name:
            raise RidgelineError(
                f"--versus {versus_name!r} is the film's own --gpu: name another accelerator"
            )
        versus_est = _estimate(model_arg, other, weights_used, tp, 1)
    return Figures(
        model=model_label(prefill.model.name),
        gpu=gpu_short(gpu_name),
        weights=weights_used,
        tp=tp,
        tp_chosen=one_gpu is not None,
        prefill=prefill,
        decode=decode,
        batched=batched,
        at_ridge=at_ridge,
        long=long,
        cache=cache,
        one_gpu=one_gpu,
        versus=versus_est,
        versus_name=None if versus_est is None else gpu_short(versus_est.gpu.name),
        no_predecessor=versus is None and versus_name is None,
        measured_prompts=measured_prompts,
    )
