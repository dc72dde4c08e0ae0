"""The step price: what one forward pass costs on a deployment. Every face asks here.

A pass carries T new tokens over its sequences: a prefill chunk, a decode step, or the
simulator's mixed step of decodes and chunks. What it costs depends on, per window group
of layers, the (query, key) pairs it attends and the cached tokens it reads, and on the
tokens it samples. `price(d, p)` times it by the deployment's method:

    lesson   one roofline over the whole pass (roofline.time_work): the lesson's equations
    per-op   one roofline per operator of the ledger (operators.py), summed, plus launches

and returns a StepTime: the whole model's FLOPs and bytes, and one GPU's time split into
compute, weight reads, KV reads, other traffic, communication and fixed overhead (the
split of work over GPUs is parallel.gpu_share, in one place). Every size may be a float
or a numpy array, so a sweep is one call (the per-op method takes floats).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ridgeline._num import Num
from ridgeline.architecture import Architecture
from ridgeline.ledger import attended_pairs, cached_tokens, work_from_totals
from ridgeline.roofline import StepTime, time_work

if TYPE_CHECKING:
    from ridgeline.deployment import Deployment


@dataclass(frozen=True)
class Pass:
    """What one forward pass carries, summed over its sequences: new tokens, and per window
    group of layers (Architecture.window_groups) the attended pairs and the cached tokens
    read per layer; `sampled` tokens go through the lm_head (one per sequence that emits)."""

    tokens: Num
    pairs: tuple[Num, ...]
    cached: tuple[Num, ...]
    sampled: Num


def uniform(arch: Architecture, new_tokens: Num, context: Num = 0, batch: Num = 1) -> Pass:
    """`batch` identical sequences, each adding `new_tokens` after `context` cached ones.
    A prefill of N tokens is (N, 0); a decode step at context C is (1, C)."""
    groups = arch.window_groups()
    return Pass(
        tokens=batch * new_tokens,
        pairs=tuple(batch * attended_pairs(new_tokens, context, w) for _, w in groups),
        cached=tuple(batch * cached_tokens(context, w) for _, w in groups),
        sampled=batch,
    )


def price(d: Deployment, p: Pass) -> StepTime:
    """The one step price: the pass timed by the deployment's method."""
    if d.method == "per-op":
        from ridgeline.operators import per_op_step

        return per_op_step(d, p)
    layers = [n for n, _ in d.arch.window_groups()]
    work = work_from_totals(
        d.arch,
        d.prec,
        p.tokens,
        list(zip(layers, p.pairs, strict=True)),
        list(zip(layers, p.cached, strict=True)),
    )
    return time_work(work, d)


def pass_step(d: Deployment, new_tokens: Num, context: Num = 0, batch: Num = 1) -> StepTime:
    return price(d, uniform(d.arch, new_tokens, context, batch))


def prefill_step(d: Deployment, prompt: Num, batch: Num = 1) -> StepTime:
    """The prefill pass: `batch` prompts of `prompt` tokens in one pass."""
    return pass_step(d, prompt, 0, batch)


def decode_step(d: Deployment, context: Num, batch: Num = 1) -> StepTime:
    """One decode step: `batch` sequences each reading `context` cached tokens."""
    return pass_step(d, 1, context, batch)
