"""FLOPs and bytes of one forward pass: the lesson's equations, symbol for symbol.

A pass carries T new tokens spread over sequences that each already hold a context of
c cached tokens. For the whole model (before any parallel split):

    FLOPs  = 2 * P_active * T                       every parameter, 2 FLOPs per token
           + sum_layers a * pairs                   causal attention, a = 4 * heads * head_dim
    pairs  = n*c + n^2/2  per sequence               (prefill c=0: 2*L*d*N^2 in all)
    bytes  = weight bytes read once for the batch    (MoE: only the experts the step touches)
           + sum_seq c * k                          each sequence's KV cache, k bytes a token
           + T * k                                  the new keys and values written

Sliding-window layers attend to, and read, at most `window` cached tokens. Every size may
be a float or a numpy array, so a sweep is one call.
"""

from __future__ import annotations

from dataclasses import dataclass

from ridgeline._num import Num, clip, maximum, minimum
from ridgeline.architecture import Architecture
from ridgeline.precision import Precision

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable


@dataclass  # made per pass, may hold arrays: plain (see _num.Num)
class Work:
    """What one forward pass costs the whole model."""

    tokens: Num
    linear_flops: Num
    attention_flops: Num
    weight_bytes: Num
    kv_read_bytes: Num
    kv_write_bytes: Num
    expert_weight_bytes: Num = 0.0  # the routed experts' part of weight_bytes (MoE)
    expert_flops: Num = 0.0  # the routed experts' part of linear_flops (MoE)
    attention_weight_bytes: Num = 0.0  # the attention projections' part of weight_bytes
    attention_linear_flops: Num = 0.0  # and their part of linear_flops
    sequences: Num = 1  # the sequences the pass's tokens belong to (those it samples)

    @property
    def flops(self) -> Num:
        return self.linear_flops + self.attention_flops

    @property
    def bytes(self) -> Num:
        return self.weight_bytes + self.kv_read_bytes + self.kv_write_bytes

    @property
    def intensity(self) -> Num:
        """Arithmetic intensity: FLOPs per byte moved."""
        return self.flops / self.bytes


def attended_pairs(new_tokens: Num, context: Num, window: int = 0) -> Num:
    """(query, key) pairs when n new tokens follow c cached ones, causally.

    Global attention: n*c + n^2/2. A window w caps each query's keys at w: the first
    k = clip(w - c, 0, n) queries still see all before them, the rest see w each.
    """
    n, c = new_tokens, context
    if not window:
        return n * c + n * n / 2
    k = clip(window - c, 0, n)
    return k * c + k * k / 2 + (n - k) * window


def cached_tokens(context: Num, window: int = 0) -> Num:
    """Cached tokens a layer reads: all of them, or the last `window`."""
    return minimum(context, window) if window else context


def weight_bytes_per_param(arch: Architecture, prec: Precision) -> float:
    """Bytes per stored weight: the GGUF file's own mix when known, else --weights."""
    if arch.file_bytes_per_param is not None and prec.weights == "file":
        return arch.file_bytes_per_param
    return prec.weight_bytes_per_param


def model_weight_bytes(arch: Architecture, prec: Precision) -> float:
    return arch.parameters * weight_bytes_per_param(arch, prec)


def distinct_experts(arch: Architecture, tokens: Num) -> Num:
    """Expected distinct experts a step of T tokens touches per MoE layer:
    E * (1 - (1 - k/E)^T), with routing taken as uniform and independent."""
    e, k = arch.experts, arch.experts_per_token
    return e * (1.0 - (1.0 - k / e) ** tokens)


def tokens_per_expert(arch: Architecture, tokens: Num) -> Num:
    """The rows of a routed expert's matmul in a step of T tokens: T x k routed over the
    distinct experts the step touches (none for no tokens)."""
    return tokens * arch.experts_per_token / distinct_experts(arch, maximum(tokens, 1))


def fixed_weight_bytes(arch: Architecture, prec: Precision) -> float:
    """The weights every pass reads, whatever its tokens: all of a dense model's, all but
    the routed experts of a MoE (a pass reads these plus `expert_bytes_read`)."""
    return (arch.parameters - arch.routed_expert_params) * weight_bytes_per_param(arch, prec)


def expert_bytes_read(arch: Architecture, prec: Precision, tokens: Num) -> Num:
    """The routed experts' part of a pass's weight reads: the experts its tokens touch
    (none for a dense model, whatever its tokens: a plain 0, never an array of them)."""
    if not arch.is_moe:
        return 0.0
    per_param = weight_bytes_per_param(arch, prec)
    return arch.moe_layers * distinct_experts(arch, tokens) * arch.expert_params * per_param


def kv_bytes_per_token(arch: Architecture, prec: Precision) -> float:
    """k: bytes of keys and values one token adds across all layers (within any window)."""
    return arch.layers * arch.kv_elements_per_token_per_layer * prec.kv_bytes_per_element


def kv_bytes(arch: Architecture, prec: Precision, context: Num) -> Num:
    """Bytes of KV cache one sequence holds at a context, sliding layers capped."""
    per_layer = arch.kv_elements_per_token_per_layer * prec.kv_bytes_per_element
    return sum(n * per_layer * cached_tokens(context, w) for n, w in arch.window_groups())


def pass_work(arch: Architecture, prec: Precision, new_tokens: Num, context: Num = 0, batch: Num = 1) -> Work:
    """A pass of `batch` identical sequences, each adding `new_tokens` after `context`.

    A prefill of N tokens is (N, 0); a decode step at context C is (1, C).
    """
    return work_of(arch, prec, uniform(arch, new_tokens, context, batch))


def work_of(arch: Architecture, prec: Precision, p: Pass) -> Work:
    """The work of a pass described by its totals (a mixed step of the simulator too)."""
    layers = arch.group_layers
    if len(layers) == 1:  # one window group: each sum over the groups is its one product
        return _work(arch, prec, p.tokens, layers[0] * p.pairs[0], layers[0] * p.cached[0], p.carried)
    pairs, cached = zip(layers, p.pairs, strict=True), zip(layers, p.cached, strict=True)
    return _work(arch, prec, p.tokens, _over_layers(pairs), _over_layers(cached), p.carried)


def work_from_totals(
    arch: Architecture,
    prec: Precision,
    tokens: Num,
    pairs: Iterable[tuple[int, Num]],
    cached: Iterable[tuple[int, Num]],
) -> Work:
    """The general form, for mixed batches: per window group (layers, total over the
    sequences), the attended pairs and the cached tokens read."""
    return _work(arch, prec, tokens, _over_layers(pairs), _over_layers(cached))


def _over_layers(groups: Iterable[tuple[int, Num]]) -> Num:
    """Sum over the window groups of (layers x the group's total per layer). The sum starts
    from the first group's term rather than from 0: the same number, and an array is not
    copied once more to add nothing."""
    terms = (n * x for n, x in groups)
    return sum(terms, next(terms))


def attention_weight_bytes(arch: Architecture, prec: Precision) -> float:
    """The attention projections' weights, every layer's (what data-parallel attention holds
    whole on each GPU)."""
    return arch.layers * arch.attention_params * weight_bytes_per_param(arch, prec)


def _work(
    arch: Architecture, prec: Precision, tokens: Num, layer_pairs: Num, layer_cached: Num, sequences: Num = 1
) -> Work:
    """A pass of T tokens over `sequences` sequences that attends `layer_pairs` (query, key)
    pairs and reads `layer_cached` cached tokens, each summed over the layers."""
    kv_per_layer = arch.kv_elements_per_token_per_layer * prec.kv_bytes_per_element
    expert_weight_bytes = expert_bytes_read(arch, prec, tokens)
    expert_flops = 0.0  # a dense model's, whatever its tokens: a plain 0, never an array of them
    if arch.is_moe:
        expert_flops = 2.0 * arch.moe_layers * arch.experts_per_token * arch.expert_params * tokens
    return Work(
        tokens=tokens,
        linear_flops=2.0 * arch.active_parameters * tokens,
        attention_flops=arch.attention_flops_per_pair * layer_pairs,
        weight_bytes=fixed_weight_bytes(arch, prec) + expert_weight_bytes,
        kv_read_bytes=kv_per_layer * layer_cached,
        kv_write_bytes=kv_bytes_per_token(arch, prec) * tokens,
        expert_weight_bytes=expert_weight_bytes,
        expert_flops=expert_flops,
        attention_weight_bytes=attention_weight_bytes(arch, prec),
        attention_linear_flops=2.0 * arch.layers * arch.attention_params * tokens,
        sequences=sequences,
    )


def training_flops_per_token(arch: Architecture) -> float:
    """Training: forward 2P plus backward 4P, 6 x params FLOPs per token."""
    return 6.0 * arch.active_parameters


TRAINING_BYTES_PER_PARAM = 16  # bf16 weights + grads, fp32 master weights + two Adam moments


@dataclass  # made per pass, may hold arrays: plain (see _num.Num)
class Pass:
    """What one forward pass carries, summed over its sequences: new tokens, and per window
    group of layers (Architecture.window_groups) the attended pairs and the cached tokens
    read per layer; `sampled` tokens go through the lm_head (one per sequence that emits)."""

    tokens: Num
    pairs: tuple[Num, ...]
    cached: tuple[Num, ...]
    sampled: Num
    sequences: Num | None = None  # the sequences its tokens belong to, when more than it samples

    @property
    def carried(self) -> Num:
        """The sequences the pass carries: those it samples, unless said otherwise (a prefill
        chunk that does not finish its prompt samples nothing)."""
        return self.sampled if self.sequences is None else self.sequences


def uniform(arch: Architecture, new_tokens: Num, context: Num = 0, batch: Num = 1) -> Pass:
    """`batch` identical sequences, each adding `new_tokens` after `context` cached ones.
    A prefill of N tokens is (N, 0); a decode step at context C is (1, C)."""
    groups = arch.window_groups()
    return Pass(
        tokens=batch * new_tokens,
        pairs=tuple([batch * attended_pairs(new_tokens, context, w) for _, w in groups]),
        cached=tuple([batch * cached_tokens(context, w) for _, w in groups]),
        sampled=batch,
    )
