"""The per-operator ledger: one row per operator of a forward pass, each with its FLOPs,
bytes, intensity, bound and time under its own roofline.

Rows, summed over the layers: the embedding gather; the QKV projection; attention
(scores, softmax and values with FlashAttention-style I/O: Q, K and V in, O out, the
cache read once, scores never leaving the chip); the output projection; the MLP's
gate/up and down projections (for MoE: router, routed experts, shared experts); norms
and residual adds; the lm_head (on the last token of each sequence in a prefill); and
the tensor-parallel all-reduce.

The per-op timing method sums the rows' own times plus a launch overhead per step,
where the lesson method takes one max(FLOPs/peak, bytes/bandwidth) over the whole
pass. They differ where a row sits on the other side of the ridge from the whole pass,
and in accounting: the lesson counts 2 FLOPs and a full read for every parameter, the
embedding table and the lm_head on every prompt token included; the ledger gathers
only the embedding rows it needs and runs the lm_head only where a token is sampled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ridgeline._num import Num, maximum, where
from ridgeline.efficiency import Rates
from ridgeline.ledger import Pass, distinct_experts, weight_bytes_per_param
from ridgeline.parallel import comm_bytes_per_gpu, gpu_share
from ridgeline.roofline import StepTime, comm_s, pass_rates

if TYPE_CHECKING:
    from ridgeline.deployment import Deployment

LAUNCH_OVERHEAD_S = 30e-6  # per step: kernel launches with CUDA graphs, sampling, scheduling
NORM_FLOPS_PER_ELEMENT = 4  # RMSNorm: square, sum, scale, weight
ATTENTION = "attention (FlashAttention)"


@dataclass  # made per operator of every pass, may hold arrays: plain (see _num.Num)
class OpRow:
    """One operator of a pass. Every figure may be a float or a numpy array (a sweep)."""

    name: str
    flops: Num
    bytes: Num
    weight_bytes: Num  # the part of `bytes` that is weights (split by TP/EP)
    kv_bytes: Num  # the part that is KV cache (split by KV heads)
    intensity: Num
    bound: Num  # "compute" or "memory" (or an array of them)
    time_s: Num
    # one GPU's share of the time, by what it waits on, and its bytes
    compute_s: Num = 0.0
    weight_s: Num = 0.0
    kv_s: Num = 0.0
    other_s: Num = 0.0
    weight_bytes_per_gpu: Num = 0.0
    kv_bytes_per_gpu: Num = 0.0


@dataclass(frozen=True)
class _At:
    """A deployment and the rates one pass reaches on it (roofline.pass_rates)."""

    m: Deployment
    rates: Rates
    sequences: Num = 1  # the pass's sequences (data-parallel attention's balance)


def _row(
    at: _At,
    name: str,
    flops: Num,
    act_bytes: Num,
    weight_bytes: Num,
    kv_bytes: Num = 0.0,
    experts: Num | None = None,
    attention: bool = False,
) -> OpRow:
    """One operator under its own roofline, on one GPU's share (parallel.gpu_share);
    `experts`, a pass's tokens, marks the routed experts, which split over the EP GPUs
    (the busiest one's share of that pass); `attention` marks attention and its projections
    (what data-parallel attention holds whole on each GPU)."""
    m, r = at.m, at.rates
    routed = experts is not None
    share = gpu_share(
        m.arch,
        m.par,
        flops=flops,
        weight_bytes=weight_bytes,
        expert_weight_bytes=weight_bytes if routed else 0.0,
        expert_flops=flops if routed else 0.0,
        attention_flops=flops if name == ATTENTION else 0.0,
        attention_linear_flops=flops if attention and name != ATTENTION else 0.0,
        attention_weight_bytes=weight_bytes if attention else 0.0,
        kv_bytes=kv_bytes,
        other_bytes=act_bytes,
        tokens=experts,
        sequences=at.sequences,
    )
    pp = m.par.pp
    flops_per_s = r.attention_flops_per_s if name == ATTENTION else r.linear_flops_per_s
    compute_s = pp * share.flops / flops_per_s
    weight_s = pp * share.weight_bytes / r.weight_bytes_per_s
    kv_s = pp * share.kv_bytes / r.kv_bytes_per_s
    other_s = pp * share.other_bytes / r.weight_bytes_per_s  # activations stream like weights
    memory_s = weight_s + kv_s + other_s
    total = weight_bytes + act_bytes + kv_bytes
    return OpRow(
        name=name,
        flops=flops,
        bytes=total,
        weight_bytes=weight_bytes,
        kv_bytes=kv_bytes,
        intensity=flops / total,  # every operator moves bytes: activations at least
        bound=where(compute_s >= memory_s, "compute", "memory"),
        time_s=maximum(compute_s, memory_s),
        compute_s=compute_s,
        weight_s=weight_s,
        kv_s=kv_s,
        other_s=other_s,
        weight_bytes_per_gpu=share.weight_bytes,
        kv_bytes_per_gpu=share.kv_bytes,
    )


def operator_rows(m: Deployment, p: Pass) -> list[OpRow]:
    """The ledger of one pass (step.Pass: its tokens, pairs and cached tokens by window
    group, and the tokens it samples)."""
    a, prec = m.arch, m.prec
    at = _At(m, pass_rates(m, p.tokens, p.sampled), p.carried)
    t = p.tokens * 1.0
    h, layers = a.hidden, a.layers
    act, wb = prec.activation_bytes, weight_bytes_per_param(a, prec)
    kv_layer = a.kv_elements_per_token_per_layer * prec.kv_bytes_per_element
    qkv_params = a.attention_params - a.o_params
    qkv_out = a.q_dim + a.kv_elements_per_token_per_layer
    rows = [
        _row(at, "embedding gather", 0.0, t * h * act, t * h * wb),
        _row(
            at,
            "qkv projection",
            2 * t * qkv_params * layers,
            layers * t * (h + qkv_out) * act,
            layers * qkv_params * wb,
            attention=True,
        ),
    ]
    pairs = sum(n * g for (n, _), g in zip(a.window_groups(), p.pairs, strict=True))
    cached = sum(n * g for (n, _), g in zip(a.window_groups(), p.cached, strict=True))
    rows.append(
        _row(
            at,
            ATTENTION,
            a.attention_flops_per_pair * pairs,
            layers * t * (a.q_dim + a.v_dim) * act,
            0.0,
            kv_layer * (cached + layers * t),
            attention=True,
        )
    )
    rows.append(
        _row(
            at,
            "output projection",
            2 * t * a.o_params * layers,
            layers * t * (a.v_dim + h) * act,
            layers * a.o_params * wb,
            attention=True,
        )
    )
    dense = layers - a.moe_layers
    if dense:
        gate_up, down = 2 * h * a.mlp, a.mlp * h
        rows.append(
            _row(
                at,
                "mlp gate/up",
                2 * t * gate_up * dense,
                dense * t * (h + 2 * a.mlp) * act,
                dense * gate_up * wb,
            )
        )
        rows.append(
            _row(at, "mlp down", 2 * t * down * dense, dense * t * (a.mlp + h) * act, dense * down * wb)
        )
    if a.moe_layers:
        rows.extend(_moe_rows(at, t))
    norms = layers * a.norms_per_layer + 1
    norm_flops = t * h * (NORM_FLOPS_PER_ELEMENT * norms + 2 * layers)
    norm_act = t * h * act * (2 * norms + 3 * 2 * layers)  # norms read+write; residual adds read 2, write 1
    rows.append(_row(at, "norms and residuals", norm_flops, norm_act, norms * h * wb))
    sampled = p.sampled * 1.0  # a prefill samples only its last token
    lm = a.vocab * h
    rows.append(_row(at, "lm_head", 2 * sampled * lm, sampled * (h * act + a.vocab * 4), lm * wb))
    return rows


def _moe_rows(at: _At, t: Num) -> list[OpRow]:
    m = at.m
    a = m.arch
    act, wb = m.prec.activation_bytes, weight_bytes_per_param(a, m.prec)
    layers, h, k = a.moe_layers, a.hidden, a.experts_per_token
    router = h * a.experts
    touched = distinct_experts(a, t)  # experts whose weights this step reads, per layer
    rows = [
        _row(
            at,
            "moe router",
            2 * t * router * layers,
            layers * t * (h + a.experts) * act,
            layers * router * wb,
        ),
        _row(
            at,
            "routed experts",
            2 * t * k * a.expert_params * layers,
            layers * t * k * (2 * h + 2 * a.expert_mlp) * act,
            layers * touched * a.expert_params * wb,
            experts=t,
        ),
    ]
    if a.shared_expert_mlp:
        shared = 3 * h * a.shared_expert_mlp
        rows.append(
            _row(
                at,
                "shared experts",
                2 * t * shared * layers,
                layers * t * (2 * h + 2 * a.shared_expert_mlp) * act,
                layers * shared * wb,
            )
        )
    return rows


def comm_row(m: Deployment, tokens: int, sequences: int = 1) -> OpRow | None:
    """The all-reduces (and pipeline hand-offs) of one pass."""
    comm = float(comm_s(m, tokens, pass_rates(m, tokens, sequences)))
    if comm == 0:
        return None
    sent = float(comm_bytes_per_gpu(m.arch, m.prec, tokens, m.par)) * m.par.gpus
    return OpRow("all-reduce / communication", 0.0, sent, 0.0, 0.0, 0.0, "communication", comm)


def per_op_step(m: Deployment, p: Pass) -> StepTime:
    """Time a pass by the per-op method: the rows' own times summed, plus launches. The
    split by what each row waits on: a compute-bound row's time is compute, a memory-bound
    row's is its weight, KV and activation reads in proportion. An engine's host work, where
    it overlaps the GPU's, is the pass's floor here as in the lesson method."""
    rows = operator_rows(m, p)
    r = pass_rates(m, p.tokens, p.sampled)
    compute = [r.compute_s >= r.weight_s + r.kv_s + r.other_s for r in rows]
    compute_s = sum(where(c, r.time_s, 0.0) for c, r in zip(compute, rows, strict=True))
    memory_s = sum(where(c, 0.0, r.time_s) for c, r in zip(compute, rows, strict=True))
    return StepTime(
        flops=sum(r.flops for r in rows),
        bytes=sum(r.bytes for r in rows),
        compute_s=compute_s,
        weight_s=sum(where(c, 0.0, r.weight_s) for c, r in zip(compute, rows, strict=True)),
        kv_s=sum(where(c, 0.0, r.kv_s) for c, r in zip(compute, rows, strict=True)),
        other_s=sum(where(c, 0.0, r.other_s) for c, r in zip(compute, rows, strict=True)),
        comm_s=comm_s(m, p.tokens, r),
        overhead_s=r.overhead_s + LAUNCH_OVERHEAD_S,
        weight_bytes_per_gpu=sum(r.weight_bytes_per_gpu for r in rows),
        kv_bytes_per_gpu=sum(r.kv_bytes_per_gpu for r in rows),
        ops_s=compute_s + memory_s,
        attention_flops=sum(r.flops for r in rows if r.name == ATTENTION),
        host_s=r.host_s,  # the engine's host work, as the lesson method's pass carries it
    )
