"""Model architectures: dimensions in, parameter counts and KV bytes out.

Parameters are derived, never typed in: attention (q, k, v, o, or DeepSeek's MLA
projections), the gated MLP's three matrices (or routed and shared experts), the norms,
the final norm, the embedding and, when untied, the lm_head. Readers for Hugging Face
`config.json` live in `hf_config.py`; GGUF files in `gguf_file.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ridgeline.errors import RidgelineError


@dataclass(frozen=True)
class Architecture:
    """A model's dimensions, from which its parameters and KV bytes follow."""

    name: str
    family: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    vocab: int
    tied_embeddings: bool
    max_context: int
    attention_bias: bool = False  # biases on the query, key and value projections
    output_bias: bool = False  # and on the output projection (gpt-oss)
    qk_norm: bool = False
    norms_per_layer: int = 2
    # One entry per layer: the sliding window in tokens, or 0 for global attention.
    windows: tuple[int, ...] = ()
    # Mixture of experts: routed experts, how many each token uses, their MLP size.
    experts: int = 0
    experts_per_token: int = 0
    expert_mlp: int = 0
    shared_expert_mlp: int = 0  # all shared experts of a layer together
    shared_expert_gate: bool = False
    expert_bias: bool = False
    router_bias: bool = False
    dense_layers: int = 0  # a MoE model's layers with a dense MLP (DeepSeek's first; Maverick's every other)
    # Multi-head latent attention (DeepSeek-V2/V3); 0 means ordinary attention.
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    attention_sinks: bool = False
    # Stored bytes per weight when the file says (GGUF); None means "use --weights".
    file_bytes_per_param: float | None = None
    # The float dtype a checkpoint stores its quantised weights in, where it says (its
    # quantization_config's quant_method: "fp8", "mxfp4"); "" when the stored mix is integer
    # (GGUF, AWQ, GPTQ).
    file_dtype: str = ""

    # --- attention -------------------------------------------------------------
    @cached_property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @cached_property
    def is_moe(self) -> bool:
        return self.experts > 0

    @cached_property
    def q_dim(self) -> int:
        """Width of the queries: heads x head dim (d for Llama)."""
        if self.is_mla:
            return self.heads * (self.qk_nope_head_dim + self.qk_rope_head_dim)
        return self.heads * self.head_dim

    @cached_property
    def attention_flops_per_pair(self) -> float:
        """FLOPs per layer for one (query, key) pair: scores plus the weighted values.

        4 x heads x head dim for ordinary attention (4d for Llama); for MLA, the scores
        run over nope + rope dims and the values over v_head_dim.
        """
        if self.is_mla:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            return 2.0 * self.heads * (qk + self.v_head_dim)
        return 4.0 * self.heads * self.head_dim

    @cached_property
    def kv_elements_per_token_per_layer(self) -> int:
        """K and V per token per layer; for MLA the cached latent plus the rope key."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * self.kv_heads * self.head_dim

    def layer_windows(self) -> tuple[int, ...]:
        return self.windows or (0,) * self.layers

    def window_groups(self) -> tuple[tuple[int, int], ...]:
        """(layers, window) pairs, window 0 meaning global attention."""
        return self._window_groups

    @cached_property
    def group_layers(self) -> tuple[int, ...]:
        """The layers of each window group, in window_groups' order."""
        return tuple(n for n, _ in self.window_groups())

    @cached_property
    def _window_groups(self) -> tuple[tuple[int, int], ...]:
        counts: dict[int, int] = {}
        for w in self.layer_windows():
            counts[w] = counts.get(w, 0) + 1
        return tuple(sorted(((n, w) for w, n in counts.items()), key=lambda g: g[1]))

    @cached_property
    def window_edges(self) -> tuple[int, ...]:
        """Contexts where a sliding window bends its layers' terms: at w - 1 a query still
        sees every cached token, at w it sees the last w."""
        return tuple(sorted({e for _, w in self.window_groups() if w for e in (w - 1, w)}))

    # --- parameters ------------------------------------------------------------
    @property
    def attention_params(self) -> int:
        h, d = self.hidden, self.head_dim
        if self.is_mla:
            qk = self.qk_nope_head_dim + self.qk_rope_head_dim
            if self.q_lora_rank:
                q = h * self.q_lora_rank + self.q_lora_rank + self.q_lora_rank * self.heads * qk
            else:
                q = h * self.heads * qk
            kv_a = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank
            kv_b = self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim)
            o = self.heads * self.v_head_dim * h
            return q + kv_a + kv_b + o
        q = h * self.heads * d
        kv = 2 * h * self.kv_heads * d
        o = self.heads * d * h
        params = q + kv + o
        if self.attention_bias:
            params += self.heads * d + 2 * self.kv_heads * d
        if self.output_bias:
            params += h
        if self.qk_norm:
            params += 2 * d
        if self.attention_sinks:
            params += self.heads
        return params

    @property
    def o_params(self) -> int:
        """The attention output projection."""
        v = self.v_head_dim if self.is_mla else self.head_dim
        return self.heads * v * self.hidden

    @cached_property
    def v_dim(self) -> int:
        """Width of the attention output: heads x value head dim."""
        return self.heads * (self.v_head_dim if self.is_mla else self.head_dim)

    @property
    def dense_mlp_params(self) -> int:
        return 3 * self.hidden * self.mlp

    @cached_property
    def expert_params(self) -> int:
        """One routed expert: gate, up and down (with biases where the model has them)."""
        params = 3 * self.hidden * self.expert_mlp
        if self.expert_bias:
            params += 2 * self.expert_mlp + self.hidden
        return params

    @cached_property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def moe_fixed_params(self) -> int:
        """Per MoE layer, what every token uses: the router and the shared experts."""
        router = self.hidden * self.experts + (self.experts if self.router_bias else 0)
        shared = 3 * self.hidden * self.shared_expert_mlp
        gate = self.hidden if self.shared_expert_gate else 0
        return router + shared + gate

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def lm_head_params(self) -> int:
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    def _params(self, experts_counted: int) -> int:
        per_layer = self.attention_params + self.norms_per_layer * self.hidden
        dense = self.layers - self.moe_layers
        total = self.layers * per_layer + dense * self.dense_mlp_params
        total += self.moe_layers * (self.moe_fixed_params + experts_counted * self.expert_params)
        return total + self.hidden + self.embedding_params + self.lm_head_params

    @cached_property
    def parameters(self) -> int:
        """Every parameter, the embedding and the lm_head included (the golden convention)."""
        return self._params(self.experts)

    @cached_property
    def active_parameters(self) -> int:
        """Parameters one token uses: the MoE layers count only experts_per_token experts."""
        return self._params(self.experts_per_token)

    @cached_property
    def routed_expert_params(self) -> int:
        """All routed-expert parameters, the part of a MoE model a step reads selectively."""
        return self.moe_layers * self.experts * self.expert_params

    def mixed_bytes_per_param(self, bits: float, part: str) -> float:
        """Bytes per parameter of a checkpoint that stores `part` in `bits` per weight (its
        scales included) and every other parameter in bf16: `experts` (the routed experts:
        gpt-oss's MXFP4) or `linear` (all but the embedding and the lm_head: FP8, AWQ, GPTQ)."""
        if part == "experts":
            quantised = self.routed_expert_params
        else:
            quantised = self.parameters - self.embedding_params - self.lm_head_params
        return (quantised * bits / 8.0 + (self.parameters - quantised) * 2.0) / self.parameters


MAX_PARAMETERS = 10**15  # 500 times the largest published model (about 2e12)


def check_sizes(arch: Architecture, where: str) -> None:
    """The sizes every estimate sums and divides by. Fields that each look sound can still
    give a model no parameters, more active parameters than it has, no KV cache, or a size
    no model has; those would print negative bytes, divide by zero or answer in aeons, so
    the model is refused here, once."""
    total, active = arch.parameters, arch.active_parameters
    if not 0 < total <= MAX_PARAMETERS:
        raise RidgelineError(f"{where}: its dimensions give {total:,.4g} parameters; check the config")
    if not 0 < active <= total:
        raise RidgelineError(
            f"{where}: its dimensions give {active:,} active parameters of {total:,}; check the config"
        )
    if arch.kv_elements_per_token_per_layer <= 0:  # every layer attends, so every layer caches
        raise RidgelineError(f"{where}: its dimensions give no KV cache per token; check the config")
