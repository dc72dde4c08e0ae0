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

from ridgeline._num import Num
from ridgeline.ledger import Pass, uniform, work_of
from ridgeline.roofline import StepTime, pass_rates, time_work

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ridgeline.deployment import Deployment


def price(d: Deployment, p: Pass) -> StepTime:
    """The one step price: the pass timed by the deployment's method."""
    if d.method == "per-op":
        from ridgeline.operators import per_op_step

        return per_op_step(d, p)
    work = work_of(d.arch, d.prec, p)
    if d.engine is not None:  # an engine samples (runs the lm_head on) only the tokens it emits
        work = d.engine.served_work(d, p, work)
    return time_work(work, d, pass_rates(d, p.tokens, p.sampled))


def rooflines(d: Deployment, p: Pass) -> list[tuple[Num, Num]]:
    """The (compute seconds, memory seconds) of each roofline whose maximum the method
    sums: the whole pass (lesson; the matmuls and attention under an engine), or each
    operator (per-op). A pass takes the sum of their maxima plus its communication and
    fixed overhead; `ridgeline fit` fits rates to them."""
    if d.method == "per-op":
        from ridgeline.operators import operator_rows

        return [(r.compute_s, r.weight_s + r.kv_s + r.other_s) for r in operator_rows(d, p)]
    return step_rooflines(price(d, p))


def step_rooflines(step: StepTime) -> list[tuple[Num, Num]]:
    """The rooflines of a pass priced by the lesson's method: the whole pass's, or, where an
    engine runs them as kernels apart (roofline.time_work), the matmuls' and attention's."""
    if step.ops_s is None:
        return [(step.compute_s, step.memory_s)]
    return [(step.compute_s - step.attention_s, step.weight_s), (step.attention_s, step.kv_s)]


def pass_step(d: Deployment, new_tokens: Num, context: Num = 0, batch: Num = 1) -> StepTime:
    return price(d, uniform(d.arch, new_tokens, context, batch))


def prefill_step(d: Deployment, prompt: Num, batch: Num = 1) -> StepTime:
    """The prefill pass: `batch` prompts of `prompt` tokens in one pass."""
    return pass_step(d, prompt, 0, batch)


def decode_step(d: Deployment, context: Num, batch: Num = 1) -> StepTime:
    """One decode step: `batch` sequences each reading `context` cached tokens."""
    return pass_step(d, 1, context, batch)
