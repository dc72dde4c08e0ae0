"""Tensor, pipeline and expert parallelism: how a pass splits over GPUs and what the
GPUs must say to each other.

Tensor parallel N splits every layer: weights, FLOPs and KV heads N ways (KV heads
are replicated when N exceeds them, as vLLM does; an MLA latent is replicated on every
rank). Each layer then ends in two all-reduces of tokens x hidden activations; a ring
moves 2(N-1)/N of that over each GPU's link, plus a fixed latency per collective.
Pipeline parallel P splits the layers into P stages: each GPU holds 1/P of the model but
a token still passes through every stage, so latency does not fall; P-1 hand-offs of
tokens x hidden cross the links. Expert parallel E spreads a MoE model's routed experts
over E of the TP GPUs, whole experts on each in place of a slice of every one. Attention
is tensor-parallel, so every GPU of the group already holds every token: each runs its
own experts on the tokens routed to them, and their outputs add in the all-reduce that
ends the MoE layer under TP too (vLLM's --enable-expert-parallel, SGLang's --ep-size and
TensorRT-LLM's --ep_size without attention data parallelism). EP adds no collective. What
EP does cost is the busiest GPU: each holds whole experts, so a step waits for the GPU whose
experts the step's tokens hit most (expert_load), where TP slices every expert evenly.

Data-parallel attention (SGLang's --enable-dp-attention with --dp equal to --tp,
TensorRT-LLM's enable_attention_dp, vLLM's --data-parallel-size with experts spread) keeps
the MLPs (a MoE model's routed experts above all) split over the tp GPUs and runs attention
whole on each: every GPU holds all the attention weights and the whole KV heads of its own
1/tp of the sequences. Nothing is replicated in the cache (an MLA latent or a few KV heads
no longer sit on every rank), and attention needs no all-reduce: the tokens are gathered
before each MLP and scattered after it, (tp-1)/tp of the pass's activations each way, where
TP all-reduces twice a layer. With `dp_dense` (TensorRT-LLM, vLLM) the dense MLPs, shared
experts, embedding and lm_head are data-parallel too: held whole on each GPU, and only the
MoE layers gather and scatter; SGLang keeps them sliced by TP. The price is balance: a
pass's sequences sit whole on their GPUs, so the data-parallel work waits for the GPU with
the most of them (attention_load); one sequence alone runs on one GPU while the others wait.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from ridgeline._num import Num, ceil, maximum, minimum
from ridgeline.architecture import Architecture
from ridgeline.errors import RidgelineError
from ridgeline.hardware import Accelerator
from ridgeline.ledger import distinct_experts
from ridgeline.precision import Precision

COLLECTIVE_LATENCY_S = 8e-6  # per all-reduce or hand-off: launch plus link latency


@dataclass(frozen=True)
class Parallel:
    """Tensor, pipeline and expert parallelism: tp x pp GPUs a replica; with
    `dp_attention`, attention data-parallel over the tp GPUs."""

    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp_attention: bool = False
    dp_dense: bool = False  # and the dense parts data-parallel too (with dp_attention)

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def dp_ranks(self) -> int:
        """The GPUs a stage shares its sequences out over, each running its own: tp under
        data-parallel attention, else 1 (every GPU works on every sequence)."""
        return self.tp if self.dp_attention else 1

    @property
    def pipeline_bubble(self) -> float:
        """Share of each pass a pipeline stage sits idle with one micro-batch in flight:
        (pp - 1) / pp. Serving many micro-batches at once fills it; latency never falls."""
        return (self.pp - 1) / self.pp


def make_parallel(
    arch: Architecture,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    dp_attention: bool = False,
    dp_dense: bool = False,
) -> Parallel:
    for name, value in (("--tp", tp), ("--pp", pp), ("--ep", ep)):
        if value < 1:
            raise RidgelineError(f"{name} must be a positive integer, got {value}")
    if dp_attention:  # attention runs whole on every GPU: its heads are not split
        if tp == 1:
            raise RidgelineError(
                "--dp-attention spreads the sequences over the --tp GPUs: give --tp 2 or more"
            )
    elif arch.heads % tp:
        raise RidgelineError(
            f"--tp {tp} does not divide {arch.name}'s {arch.heads} attention heads: "
            f"choose a divisor of {arch.heads}"
        )
    elif not _kv_even(arch, tp):
        raise RidgelineError(
            f"--tp {tp} cannot split or replicate {arch.name}'s {arch.kv_heads} KV heads evenly: "
            f"choose a multiple or divisor of {arch.kv_heads}"
        )
    if not dp_attention:  # each GPU holds 1/tp of every MLP's columns (of each expert's, without EP)
        for width, what in ((arch.mlp, "MLP"), (arch.expert_mlp if ep == 1 else 0, "experts' MLP")):
            if width % tp:
                fits = [
                    n
                    for n in range(1, arch.heads + 1)
                    if arch.heads % n == 0 == width % n and _kv_even(arch, n)
                ]
                raise RidgelineError(
                    f"--tp {tp} does not divide {arch.name}'s {what} width of {width:,}: "
                    f"choose one of {', '.join(map(str, fits))}"
                )
    if pp > arch.layers:
        raise RidgelineError(f"--pp {pp} exceeds {arch.name}'s {arch.layers} layers")
    if ep > 1 and not arch.is_moe:
        raise RidgelineError(f"--ep applies to mixture-of-experts models; {arch.name} is dense")
    if ep > 1 and (arch.experts % ep or ep > tp * pp):
        raise RidgelineError(
            f"--ep {ep} must divide the {arch.experts} experts and not exceed the {tp * pp} GPUs"
        )
    return Parallel(tp, pp, ep, dp_attention, dp_attention and dp_dense)


def _kv_even(arch: Architecture, tp: int) -> bool:
    """Whether tp GPUs share the KV heads evenly: each holds kv_heads / tp of them, or, past
    one a GPU, each head is copied onto tp / kv_heads GPUs (MLA's one latent goes whole to all)."""
    if arch.is_mla:
        return True
    return arch.kv_heads % tp == 0 if tp <= arch.kv_heads else tp % arch.kv_heads == 0


def kv_share_per_gpu(arch: Architecture, par: Parallel) -> float:
    """Fraction of one sequence's KV cache each GPU holds, on average over the sequences:
    under data-parallel attention a sequence sits whole on one of the tp GPUs."""
    if par.dp_attention:
        return 1.0 / par.tp / par.pp
    if arch.is_mla:
        return 1.0 / par.pp  # the latent is not split by heads: every TP rank keeps it
    return max(arch.kv_heads, par.tp) / arch.kv_heads / par.tp / par.pp


@cache
def expected_max_of_normals(n: int) -> float:
    """c_n, the expected largest of n independent standard normal draws (0 for one; 0.564
    for two, 1.029 for four, 1.424 for eight): E[max] = integral of x n phi(x) Phi(x)^(n-1)."""
    if n <= 1:
        return 0.0
    step, total = 1e-3, 0.0
    for i in range(-10_000, 10_001):
        x = i * step
        phi = math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        total += x * n * phi * (0.5 * (1 + math.erf(x / math.sqrt(2)))) ** (n - 1) * step
    return total


def expert_load(arch: Architecture, par: Parallel, tokens: Num) -> tuple[Num, Num]:
    """The busiest EP GPU's routed-expert work over the mean GPU's, as (weight reads,
    matmul rows), for a pass of T tokens under the ledger's uniform, independent routing
    (ledger.distinct_experts). Each GPU holds n = E / ep whole experts. The experts it reads
    are Binomial(n, p), p = 1 - (1 - k/E)^T; the rows it multiplies are the T k routings
    that land on it, each on a given GPU with chance 1/ep. The largest of ep such counts is
    taken as mean + c_ep sd (c_ep: expected_max_of_normals), and at most all of them: at
    batch 1, DeepSeek-V3's 8 routings over EP 8 put about 2.4 on the busiest GPU, not 1.
    (1, 1) without EP; the sliced experts of TP split evenly."""
    if par.ep <= 1 or not arch.is_moe:
        return 1.0, 1.0
    k, ep = arch.experts_per_token, par.ep
    c = expected_max_of_normals(ep)
    t = maximum(tokens, 1)
    hit = distinct_experts(arch, t) / arch.experts  # each expert's chance of a routing
    n = arch.experts / ep
    reads = minimum(1.0 + c * ((1.0 - hit) / (n * hit)) ** 0.5, 1.0 / hit)
    rows = minimum(1.0 + c * ((ep - 1) / (t * k)) ** 0.5, float(ep))
    return reads, rows


def attention_load(par: Parallel, sequences: Num) -> Num:
    """The busiest GPU's share of a pass's data-parallel work over the mean GPU's, for a
    pass over `sequences` sequences: 1 but under data-parallel attention, where each sequence
    sits whole on one of the tp GPUs and the busiest holds ceil(S / tp) of them: tp for one
    sequence alone (it runs on one GPU while the others wait), 1 when tp divides S."""
    if not par.dp_attention:
        return 1.0
    s = maximum(sequences, 1)
    return ceil(s / par.tp) * par.tp / s


def held_whole(
    par: Parallel, weight_bytes: Num, expert_weight_bytes: Num, attention_weight_bytes: Num
) -> Num:
    """The weights data-parallel attention holds whole on every GPU of a stage (0 without it):
    the attention's, or with dp_dense every weight but the routed experts'."""
    if not par.dp_attention:
        return 0.0
    return weight_bytes - expert_weight_bytes if par.dp_dense else attention_weight_bytes


@dataclass  # made per pass, may hold arrays: plain (see _num.Num)
class GpuShare:
    """One GPU's part of a pass: a GPU of one pipeline stage (the pass visits pp stages in
    turn, so its time is pp times a stage's)."""

    flops: Num
    weight_bytes: Num
    kv_bytes: Num
    other_bytes: Num = 0.0  # activations, where a ledger counts them
    expert_flops: Num = 0.0  # the routed experts' part of flops (the busiest GPU's under EP)
    attention_flops: Num = 0.0  # attention's scores and values, part of flops

    @property
    def bytes(self) -> Num:
        return self.weight_bytes + self.kv_bytes + self.other_bytes


def gpu_share(
    arch: Architecture,
    par: Parallel,
    *,
    flops: Num,
    weight_bytes: Num,
    expert_weight_bytes: Num = 0.0,
    expert_flops: Num = 0.0,
    attention_flops: Num = 0.0,
    attention_linear_flops: Num = 0.0,
    attention_weight_bytes: Num = 0.0,
    kv_bytes: Num = 0.0,
    other_bytes: Num = 0.0,
    tokens: Num | None = None,
    sequences: Num = 1,
) -> GpuShare:
    """The one place where work splits over GPUs. FLOPs, activations and the dense weights
    split tp x pp ways; a MoE model's routed experts (`expert_weight_bytes` and
    `expert_flops`, parts of `weight_bytes` and `flops`) split over ep GPUs (over tp without
    --ep), and for a pass of `tokens` the share is the busiest EP GPU's (expert_load); the
    KV cache splits by KV heads (replicated beyond them, and the MLA latent sits on every
    TP rank). Without `tokens` (what a GPU holds, not what a pass reads) the split is even.
    `attention_flops` (attention's scores and values, part of `flops`) split as the rest.
    Under data-parallel attention the attention weights (`attention_weight_bytes`, part of
    `weight_bytes`) sit whole on each GPU, and attention's work (its scores, its projections,
    `attention_linear_flops`, and the KV cache) is the busiest GPU's (attention_load) of a
    pass over `sequences` sequences; with dp_dense, every weight and all work but the routed
    experts'."""
    gpus = par.tp * par.pp
    expert_gpus = (par.ep if par.ep > 1 else par.tp) * par.pp
    reads, rows = (1.0, 1.0) if tokens is None else expert_load(arch, par, tokens)
    experts = expert_flops / gpus * rows
    share = GpuShare(
        flops=(flops - expert_flops) / gpus + experts,
        weight_bytes=(weight_bytes - expert_weight_bytes) / gpus + expert_weight_bytes / expert_gpus * reads,
        kv_bytes=kv_bytes * kv_share_per_gpu(arch, par),
        other_bytes=other_bytes / gpus,
        expert_flops=experts,
        attention_flops=attention_flops / gpus,
    )
    if par.dp_attention:  # the data-parallel part whole on each GPU, its work the busiest's
        load = attention_load(par, sequences)
        held = held_whole(par, weight_bytes, expert_weight_bytes, attention_weight_bytes)
        if par.dp_dense:
            balanced = flops - expert_flops
            share.other_bytes = share.other_bytes * load
        else:
            balanced = attention_flops + attention_linear_flops
        share.weight_bytes = share.weight_bytes + held * (1.0 / par.pp - 1.0 / gpus)
        share.flops = share.flops + balanced / gpus * (load - 1.0)
        share.kv_bytes = share.kv_bytes * load
        share.attention_flops = share.attention_flops * load
    return share


def comm_bytes_per_gpu(arch: Architecture, prec: Precision, tokens: Num, par: Parallel) -> Num:
    """Bytes each GPU sends in one pass: TP all-reduces and PP hand-offs (EP adds none).
    A layer under TP ends its attention and its MLP in an all-reduce, 2(tp-1)/tp of the
    activations each; under data-parallel attention a layer gathers the tokens before its
    MLP and scatters them after, (tp-1)/tp each, and with dp_dense only a MoE layer does."""
    act = tokens * arch.hidden * prec.activation_bytes
    total: Num = 0.0
    if par.dp_attention:
        total = 2 * _sliced_layers(arch, par) * act * (par.tp - 1) / par.tp
    elif par.tp > 1:
        total = total + 2 * arch.layers * act * 2 * (par.tp - 1) / par.tp
    if par.pp > 1:
        total = total + (par.pp - 1) * act
    return total


def collectives_per_pass(arch: Architecture, par: Parallel) -> int:
    n = 0
    if par.dp_attention:  # a gather and a scatter around each sliced MLP
        n += 2 * _sliced_layers(arch, par)
    elif par.tp > 1:
        n += 2 * arch.layers
    if par.pp > 1:
        n += par.pp - 1
    return n


def _sliced_layers(arch: Architecture, par: Parallel) -> int:
    """The layers whose MLP runs sliced over the GPUs under data-parallel attention: the MoE
    layers' experts, and with the dense parts sliced too (no dp_dense) every layer's MLP."""
    return arch.moe_layers if par.dp_dense else arch.layers


def comm_time_s(
    arch: Architecture,
    prec: Precision,
    hw: Accelerator,
    tokens: Num,
    par: Parallel,
    latency_s: float = COLLECTIVE_LATENCY_S,
    link_bytes_per_s: float | None = None,
) -> Num:
    """Time spent communicating in one pass: bytes over the link plus a latency per
    collective (an engine profile sets both by link). Counted on top of the compute and
    memory time (not overlapped)."""
    n = collectives_per_pass(arch, par)
    if n == 0:
        return 0.0  # a plain 0, never an array of them
    link = hw.interconnect_bytes_per_s if link_bytes_per_s is None else link_bytes_per_s
    if link <= 0:
        raise RidgelineError(f"{hw.name} has no interconnect bandwidth; add interconnect_bytes_per_s")
    return comm_bytes_per_gpu(arch, prec, tokens, par) / link + n * latency_s
