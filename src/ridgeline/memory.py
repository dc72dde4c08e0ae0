"""The memory plan: weights + KV cache + activations + runtime overhead, per GPU.

Like vLLM, only a fraction of each GPU's memory is planned for (gpu_memory_utilization,
0.9 by default); a fixed runtime overhead (CUDA context, workspaces, graphs) comes out of
that. A step's activations end in fp32 logits for each sequence, split over TP; under an
engine profile whose memory profiling samples every sequence at once, its sampler's
buffers on every GPU instead (sampler_bytes a logit: vLLM sorts them for top-k/top-p).
A plan fits when every GPU's share fits; it *serves* when the KV room left also
holds a modest continuous batch (8 sequences of the request's length by default), the
lesson's "fitting is not enough".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ridgeline.deployment import Deployment
from ridgeline.ledger import (
    attention_weight_bytes,
    kv_bytes,
    kv_bytes_per_token,
    model_weight_bytes,
    weight_bytes_per_param,
)
from ridgeline.parallel import gpu_share, held_whole, kv_share_per_gpu, make_parallel
from ridgeline.precision import Precision

GPU_MEMORY_UTILIZATION = 0.9
RUNTIME_OVERHEAD_BYTES = 1.0e9
MIN_SERVING_SEQUENCES = 8
MAX_BATCHED_TOKENS = 8192  # the prefill chunk whose activations must fit at once


@dataclass(frozen=True)
class PerGpu:
    """One GPU's memory, planned: what it holds, and what it has."""

    weight_bytes: float
    kv_bytes: float
    activation_bytes: float
    overhead_bytes: float
    total_bytes: float
    capacity_bytes: float
    usable_bytes: float


@dataclass(frozen=True)
class Suggestion:
    """A way to make it fit: narrower weights or more tensor parallelism, and the batch it then holds."""

    weights: str
    tp: int
    gpus: int
    max_batch: int


@dataclass(frozen=True)
class MemoryPlan:
    """Weights + KV cache + activations + runtime overhead, per GPU, and what fits."""

    weight_bytes: float
    kv_bytes_per_token: float
    kv_bytes: float
    activation_bytes: float
    total_bytes: float
    fits: bool
    shortfall_bytes: float  # per GPU, 0 when it fits
    max_batch: int  # sequences of this context that fit beside the weights
    max_context: int  # tokens per sequence that fit at this batch
    serves: bool
    per_gpu: PerGpu
    suggestions: list[Suggestion] = field(default_factory=list)

    @property
    def cheapest(self) -> Suggestion | None:
        return self.suggestions[0] if self.suggestions else None


def resident_weight_bytes(m: Deployment) -> tuple[float, float]:
    """Every weight the model holds, and the routed experts' part of it: what it stores,
    or more where an engine holds the experts in more bytes than they are stored in
    (EngineProfile.resident_expert_factor)."""
    a = m.arch
    stored = a.routed_expert_params * weight_bytes_per_param(a, m.prec)
    expert_bytes = stored * (m.engine.resident_expert_factor(m) if m.engine is not None else 1.0)
    return model_weight_bytes(a, m.prec) + expert_bytes - stored, expert_bytes


def held_whole_bytes(m: Deployment) -> float:
    """What data-parallel attention holds whole on each GPU of a stage (parallel.held_whole;
    0 without it)."""
    weight_bytes, expert_bytes = resident_weight_bytes(m)
    held = held_whole(m.par, weight_bytes, expert_bytes, attention_weight_bytes(m.arch, m.prec))
    return float(held) / m.par.pp


def stored_weight_bytes_per_gpu(m: Deployment) -> float:
    """Every weight the model holds (all experts, not only those a step reads), split as a
    pass splits them."""
    weight_bytes, expert_bytes = resident_weight_bytes(m)
    share = gpu_share(
        m.arch,
        m.par,
        flops=0.0,
        weight_bytes=weight_bytes,
        expert_weight_bytes=expert_bytes,
        attention_weight_bytes=attention_weight_bytes(m.arch, m.prec),
    )
    return float(share.weight_bytes)


def activation_bytes_per_gpu(m: Deployment, tokens: int) -> float:
    """Peak activations of one pass: the residual stream, attention and MLP
    intermediates of a chunk of tokens, split by TP. Under data-parallel attention a MoE
    layer first gathers every GPU's tokens (tp chunks where the engine's budget is each
    rank's, `dp_limits` "rank"; the chunk where it is the replica's), and routes each
    gathered token to experts_per_token experts: each GPU holds the gathered tokens, the
    routed copies bound for its experts in and out at the model's width (every routed copy
    with the experts split by TP, 1/ep of them with whole experts on each GPU), and its share
    of the routed copies' expert intermediates (gate and up, then their product)."""
    a = m.arch
    width = 4 * a.hidden + (2 * (a.expert_mlp if a.is_moe else a.mlp) + 2 * a.q_dim) / m.par.tp
    held = tokens * width
    if a.is_moe and m.par.dp_attention:
        per_rank = m.scheduler is not None and m.scheduler.dp_limits == "rank"
        gathered = tokens * (m.par.tp if per_rank else 1)
        routed = gathered * a.experts_per_token
        held += gathered * a.hidden + routed / m.par.ep * 2 * a.hidden + routed * 3 * a.expert_mlp / m.par.tp
    return held * m.prec.activation_bytes


def plan(
    m: Deployment,
    context: int,
    batch: int = 1,
    utilization: float = GPU_MEMORY_UTILIZATION,
    overhead_bytes: float = RUNTIME_OVERHEAD_BYTES,
    suggest: bool = True,
) -> MemoryPlan:
    """Memory for `batch` sequences of `context` tokens each (prompt + output)."""
    a, par = m.arch, m.par
    weights = resident_weight_bytes(m)[0]
    kv_seq = float(kv_bytes(a, m.prec, context))
    kv_gpu_seq = kv_seq * kv_share_per_gpu(a, par)
    w_gpu = stored_weight_bytes_per_gpu(m)
    capacity = m.hw.memory_bytes
    usable = capacity * utilization

    sampler = m.engine.sampler_bytes if m.engine is not None else 0.0

    def activations(b: int) -> float:
        chunk = min(b * context, MAX_BATCHED_TOKENS)
        logits = b * a.vocab * sampler if sampler else b * a.vocab * 4 / par.tp
        return activation_bytes_per_gpu(m, chunk) + logits

    def total(b: int) -> float:
        return w_gpu + b * kv_gpu_seq + activations(b) + overhead_bytes

    act = activations(batch)
    total_gpu = total(batch)
    room = usable - w_gpu - act - overhead_bytes
    max_batch = _largest(lambda b: total(b) <= usable, int(room // kv_gpu_seq) if kv_gpu_seq > 0 else 0)
    per_token_gpu = kv_bytes_per_token(a, m.prec) * kv_share_per_gpu(a, par)
    max_context = _max_context(m, batch, room, per_token_gpu)
    fits = total_gpu <= usable
    result = MemoryPlan(
        weight_bytes=weights,
        kv_bytes_per_token=kv_bytes_per_token(a, m.prec),
        kv_bytes=batch * kv_seq,
        activation_bytes=act * par.gpus,
        total_bytes=weights + batch * kv_seq + (act + overhead_bytes) * par.gpus,
        fits=fits,
        shortfall_bytes=max(total_gpu - usable, 0.0),
        max_batch=max_batch,
        max_context=max_context,
        serves=fits and max_batch >= max(batch, MIN_SERVING_SEQUENCES),
        per_gpu=PerGpu(w_gpu, batch * kv_gpu_seq, act, overhead_bytes, total_gpu, capacity, usable),
    )
    if suggest and not result.serves:
        result = replace(result, suggestions=suggestions(m, context, batch, utilization, overhead_bytes))
    return result


def _largest(ok: Callable[[int], bool], hi: int) -> int:
    """The largest b in [0, hi] with ok(b), for ok true up to a point and false after
    (a bigger batch needs more KV and more activations): bisection, not a countdown."""
    lo = 0
    hi = max(hi, 0)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _max_context(m: Deployment, batch: int, room: float, per_token_gpu: float) -> int:
    """Longest context per sequence at this batch; sliding windows make it piecewise."""
    if room <= 0 or per_token_gpu <= 0:
        return 0
    lo, hi = 0, max(m.arch.max_context, 1)
    share = kv_share_per_gpu(m.arch, m.par)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if batch * float(kv_bytes(m.arch, m.prec, mid)) * share <= room:
            lo = mid
        else:
            hi = mid - 1
    return lo


def suggestions(
    m: Deployment, context: int, batch: int, utilization: float, overhead_bytes: float
) -> list[Suggestion]:
    """For the current weights and each narrower one, the fewest tensor-parallel GPUs
    (1, 2, 4, 8) whose plan serves; cheapest (fewest GPUs, then widest weights) first."""
    options = [m.prec.weights] + [w for w in ("fp8", "int4-g128") if _narrower(w, m.prec)]
    found = []
    for weights in options:
        for tp in (1, 2, 4, 8):
            try:
                par = make_parallel(
                    m.arch, tp, m.par.pp, m.par.ep, m.par.dp_attention and tp > 1, m.par.dp_dense
                )
            except ValueError:
                continue
            trial = replace(m, prec=replace(m.prec, weights=weights), par=par)
            p = plan(trial, context, batch, utilization, overhead_bytes, suggest=False)
            if p.serves:
                found.append(Suggestion(weights, tp, tp * m.par.pp, p.max_batch))
                break
    bits = {w: i for i, w in enumerate(options)}
    return sorted(found, key=lambda s: (s.gpus, bits[s.weights]))


def _narrower(weights: str, prec: Precision) -> bool:
    return Precision(weights).weight_bytes_per_param < prec.weight_bytes_per_param
