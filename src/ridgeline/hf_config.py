"""Read a Hugging Face `config.json` into an Architecture.

Llama, Mistral, Qwen2/Qwen3 (GQA, tied embeddings); Gemma 2 and 3 (interleaved
sliding-window layers, head dim not hidden/heads); Mixtral, Qwen-MoE and gpt-oss
(mixture of experts); DeepSeek-V2/V3 (multi-head latent attention, shared experts,
the first dense layers); GLM-4.5/4.6 (glm4_moe: DeepSeek-V3's routed and shared experts and
first dense layers over grouped-query attention, head dim not hidden/heads); Llama 4 (llama4:
one routed expert a token beside a shared one, in every layer or every
interleave_moe_layer_step-th, the others dense at intermediate_size_mlp; three layers in four
attend within chunks of attention_chunk_size, priced as a sliding window of that length, which
bounds them: a chunk's queries see between one and that many keys). Fields follow
the transformers configuration classes, including their defaults when a field is omitted
(tie_word_embeddings defaults to true).

A checkpoint stored quantised says so in its `quantization_config`; its stored mix becomes
the model's own weights (`--weights file`, the default), as a GGUF's does:
    mxfp4        the routed experts in 4 bits + an 8-bit scale per 32 (4.25 bits; gpt-oss)
    fp8          every matmul weight in 8 bits + an fp32 scale per weight_block_size block
                 (DeepSeek-V3's 128 x 128), the embedding and the lm_head in bf16
    awq, gptq    every matmul weight in `bits` + an fp16 scale and a `bits` zero per group
Other methods leave the weights to --weights (bf16 unless given).
"""

from __future__ import annotations

from dataclasses import replace

from ridgeline.architecture import Architecture, check_sizes
from ridgeline.checks import check_size
from ridgeline.errors import RidgelineError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DENSE = {"llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "gemma3_text", "phi3"}
MOE = {"mixtral", "qwen2_moe", "qwen3_moe", "gpt_oss", "deepseek_v2", "deepseek_v3", "glm4_moe"}
MOE |= {"llama4", "llama4_text"}
SUPPORTED = sorted(DENSE | MOE)


MAX_FIELD = (1 << 31) - 1  # no real model has a dimension, count or context beyond this


def _need(cfg: dict[str, Any], key: str, where: str) -> int:
    if key not in cfg or cfg[key] is None:
        raise RidgelineError(f"{where} lacks {key!r}, which a {cfg.get('model_type')} config needs")
    return _int(cfg, key, where)


def _int(cfg: dict[str, Any], key: str, where: str, default: int = 0) -> int:
    """A whole-number field in [0, 2^31): JSON ints, or floats with no fraction."""
    value = cfg.get(key)
    if value is None:
        return default
    ok = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, float) and value.is_integer():
        ok, value = True, int(value)
    if not ok or not 0 <= value <= MAX_FIELD:
        raise RidgelineError(f"{where}: {key} must be a whole number from 0 to {MAX_FIELD:,}, got {value!r}")
    return int(value)


def _req(cfg: dict[str, Any], key: str, where: str) -> int:
    if cfg.get(key) is None:
        raise KeyError(key)
    return _int(cfg, key, where)


def _list(cfg: dict[str, Any], key: str, where: str) -> list[Any]:
    value = cfg.get(key) or []
    if not isinstance(value, list):
        raise RidgelineError(f"{where}: {key} must be a list, got {value!r:.80}")
    return value


def _layer_count(cfg: dict[str, Any], key: str, layers: int, where: str) -> int:
    """A number of layers (DeepSeek's first_k_dense_replace): at most the model has."""
    count = _int(cfg, key, where)
    if count > layers:
        raise RidgelineError(f"{where}: {key} is {count}, more than the {layers} layers (num_hidden_layers)")
    return count


def _layer_set(cfg: dict[str, Any], key: str, layers: int, where: str) -> set[int]:
    """Layer indices (Qwen-MoE's mlp_only_layers), each a layer the model has; the layers
    named, each once, as transformers asks `i in mlp_only_layers`."""
    listed = _list(cfg, key, where)
    for i in listed:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < layers:
            raise RidgelineError(
                f"{where}: {key} lists {i!r:.40}, not a layer from 0 to {layers - 1} (num_hidden_layers)"
            )
    return set(listed)


def _windows(cfg: dict[str, Any], family: str, layers: int, where: str) -> tuple[int, ...]:
    window = _int(cfg, "sliding_window", where)
    if not window:
        return ()
    if types := cfg.get("layer_types"):
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise RidgelineError(f"{where}: layer_types must be a list of strings, got {types!r:.80}")
        return tuple(window if t == "sliding_attention" else 0 for t in types)
    if family == "gemma2":
        return tuple(window if i % 2 == 0 else 0 for i in range(layers))
    if family in ("gemma3", "gemma3_text"):
        pattern = _int(cfg, "sliding_window_pattern", where) or 6
        return tuple(0 if (i + 1) % pattern == 0 else window for i in range(layers))
    if family in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe") and not cfg.get("use_sliding_window"):
        return ()
    return (window,) * layers


def _chunks(cfg: dict[str, Any], layers: int, where: str) -> tuple[int, ...]:
    """Llama 4's attention: a layer with RoPE (no_rope_layers[i] = 1; by default all but
    every fourth) attends within chunks of attention_chunk_size tokens, the rest globally."""
    chunk = _int(cfg, "attention_chunk_size", where)
    if not chunk:
        return ()
    ropes = _list(cfg, "no_rope_layers", where)
    if not ropes:
        interval = _int(cfg, "no_rope_layer_interval", where) or 4
        ropes = [int((i + 1) % interval != 0) for i in range(layers)]
    if len(ropes) != layers or not all(r in (0, 1) and not isinstance(r, float) for r in ropes):
        raise RidgelineError(f"{where}: no_rope_layers must list 0 or 1 for each of the {layers} layers")
    return tuple(chunk if r else 0 for r in ropes)


def _moe_layers(cfg: dict[str, Any], layers: int, where: str) -> int:
    """Llama 4's MoE layers: those moe_layers names, else every interleave_moe_layer_step-th
    (transformers' default: from step - 1)."""
    if cfg.get("moe_layers") is not None:
        return len(_layer_set(cfg, "moe_layers", layers, where))
    step = _int(cfg, "interleave_moe_layer_step", where, default=1)
    if step < 1:
        raise RidgelineError(f"{where}: interleave_moe_layer_step must be at least 1, got {step}")
    return len(range(step - 1, layers, step))


MAX_LAYERS = 10_000  # the deepest published models have about 130


def architecture_from_config(cfg: dict[str, Any], name: str, where: str = "config.json") -> Architecture:
    """Build an Architecture from a parsed config.json; one clear error on bad input."""
    if isinstance(cfg.get("text_config"), dict):  # multimodal wrappers (Gemma 3)
        cfg = {**cfg["text_config"], "model_type": cfg["text_config"].get("model_type", "gemma3")}
    if not isinstance(cfg.get("model_type", ""), str):
        raise RidgelineError(f"{where}: model_type must be a string, got {cfg.get('model_type')!r:.80}")
    family = str(cfg.get("model_type", "")).lower()
    if family not in DENSE | MOE:
        raise RidgelineError(
            f"unknown architecture {family or '(no model_type)'!r:.80} in {where}: "
            f"supported model_type values are {', '.join(SUPPORTED)}"
        )
    try:
        layers = int(_need(cfg, "num_hidden_layers", where))
        if layers > MAX_LAYERS:  # each layer gets an entry (its window): refuse before building them
            deep = f"num_hidden_layers is {layers:,}, over the {MAX_LAYERS:,} any model has"
            raise RidgelineError(f"{where}: {deep}; check the config")
        hidden = int(_need(cfg, "hidden_size", where))
        heads = int(_need(cfg, "num_attention_heads", where))
        if heads == 0:
            raise RidgelineError(f"{where}: num_attention_heads must be a positive integer, got 0")
        kv_heads = _int(cfg, "num_key_value_heads", where) or heads
        head_dim = _int(cfg, "head_dim", where) or hidden // heads
        vocab = int(_need(cfg, "vocab_size", where))
        mlp = _int(cfg, "intermediate_size", where)
        context = _int(cfg, "max_position_embeddings", where)
        fields: dict[str, Any] = {}
        if family in ("gemma2", "gemma3", "gemma3_text"):
            fields["norms_per_layer"] = 4
        llama4 = family in ("llama4", "llama4_text")  # its qk norm is an L2 norm without weights
        qk_normed = family in ("qwen3", "qwen3_moe", "gemma3", "gemma3_text")
        if qk_normed or (cfg.get("use_qk_norm") and not llama4):
            fields["qk_norm"] = True
        if family in ("qwen2", "qwen2_moe") or cfg.get("attention_bias"):
            fields["attention_bias"] = True
        if family == "mixtral":
            fields.update(experts=_req(cfg, "num_local_experts", where), expert_mlp=mlp)
        elif family in ("qwen2_moe", "qwen3_moe"):
            fields.update(
                experts=_req(cfg, "num_experts", where),
                expert_mlp=_req(cfg, "moe_intermediate_size", where),
                shared_expert_mlp=_int(cfg, "shared_expert_intermediate_size", where),
                shared_expert_gate=bool(cfg.get("shared_expert_intermediate_size")),
                dense_layers=len(_layer_set(cfg, "mlp_only_layers", layers, where)),
            )
        elif family == "gpt_oss":
            fields.update(
                experts=_req(cfg, "num_local_experts", where),
                expert_mlp=mlp,
                expert_bias=True,
                router_bias=True,
                attention_bias=True,
                output_bias=True,
                attention_sinks=True,
            )
        elif llama4:
            mlp = _int(cfg, "intermediate_size_mlp", where) or mlp  # the dense layers'
            expert = _req(cfg, "intermediate_size", where)
            fields.update(
                experts=_req(cfg, "num_local_experts", where),
                expert_mlp=expert,
                shared_expert_mlp=expert,  # one shared expert as wide as a routed one
                dense_layers=layers - _moe_layers(cfg, layers, where),
            )
        elif family in ("deepseek_v2", "deepseek_v3", "glm4_moe"):
            shared = _int(cfg, "n_shared_experts", where)
            moe_mlp = _req(cfg, "moe_intermediate_size", where)
            fields.update(
                experts=_req(cfg, "n_routed_experts", where),
                expert_mlp=moe_mlp,
                shared_expert_mlp=shared * moe_mlp,
                router_bias=family != "deepseek_v2",  # a per-expert score correction
                dense_layers=_layer_count(cfg, "first_k_dense_replace", layers, where),
            )
        if family in ("deepseek_v2", "deepseek_v3"):  # multi-head latent attention
            fields.update(
                q_lora_rank=_int(cfg, "q_lora_rank", where),
                kv_lora_rank=_req(cfg, "kv_lora_rank", where),
                qk_nope_head_dim=_req(cfg, "qk_nope_head_dim", where),
                qk_rope_head_dim=_req(cfg, "qk_rope_head_dim", where),
                v_head_dim=_req(cfg, "v_head_dim", where),
            )
            head_dim = _req(cfg, "qk_nope_head_dim", where) + _req(cfg, "qk_rope_head_dim", where)
        if family in MOE:
            fields["experts_per_token"] = _int(cfg, "num_experts_per_tok", where) or _int(
                cfg, "experts_per_token", where
            )
    except KeyError as exc:
        raise RidgelineError(f"{where} lacks {exc.args[0]!r}, which a {family} config needs") from None
    except RidgelineError:
        raise
    except (TypeError, ValueError):
        raise RidgelineError(f"{where} has a non-integer size field; fix the file") from None
    arch = Architecture(
        name=name,
        family=family,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        mlp=mlp,
        vocab=vocab,
        tied_embeddings=bool(cfg.get("tie_word_embeddings", True)),
        max_context=context,
        windows=_chunks(cfg, layers, where) if llama4 else _windows(cfg, family, layers, where),
        **fields,
    )
    validate(arch, where)
    quant = cfg.get("quantization_config")
    mix = stored_mix(quant, arch, where)
    if mix is None:
        return arch
    method = str(quant.get("quant_method", "")).lower() if isinstance(quant, dict) else ""
    return replace(arch, file_bytes_per_param=mix, file_dtype=method if method in ("fp8", "mxfp4") else "")


def stored_mix(quant: Any, arch: Architecture, where: str) -> float | None:
    """Bytes per parameter of a checkpoint its quantization_config describes, or None when
    it names no method read here."""
    if not isinstance(quant, dict):
        return None
    method = str(quant.get("quant_method", "")).lower()
    part = "linear"
    if method == "mxfp4":
        bits = 4.0 + 8.0 / 32
        part = "experts" if arch.is_moe else "linear"
    elif method == "fp8":
        block = quant.get("weight_block_size")  # none: one scale a tensor, nothing to count
        if block is not None:
            if not (isinstance(block, list) and len(block) == 2):
                raise RidgelineError(
                    f"{where}: quantization_config.weight_block_size must be two positive integers, "
                    f"got {block!r:.80}"
                )
            for b in block:
                check_size(f"{where}: quantization_config.weight_block_size", b, 1, MAX_FIELD)
        bits = 8.0 + (32.0 / (block[0] * block[1]) if block else 0.0)
    elif method in ("awq", "gptq"):
        width = check_size(f"{where}: quantization_config.bits", quant.get("bits", 4), 2, 8)
        group = quant.get("group_size", 128)
        if group != -1 or isinstance(group, bool):  # -1: one scale a row, nothing to count
            check_size(f"{where}: quantization_config.group_size (or -1)", group, 1, MAX_FIELD)
        bits = width + ((16.0 + width) / group if group > 0 else 0.0)
    else:
        return None
    return arch.mixed_bytes_per_param(bits, part)


def validate(arch: Architecture, where: str) -> None:
    """Each field in its range, then the sizes they give together (every model passes here:
    the catalogue, a config.json, a GGUF's metadata, a Hugging Face id)."""
    sizes = {
        "num_hidden_layers": arch.layers,
        "hidden_size": arch.hidden,
        "num_attention_heads": arch.heads,
        "num_key_value_heads": arch.kv_heads,
        "head_dim": arch.head_dim,
        "vocab_size": arch.vocab,
        "max_position_embeddings": arch.max_context,
    }
    for key, value in sizes.items():
        if value <= 0:
            raise RidgelineError(f"{where}: {key} must be a positive integer, got {value}")
    if not arch.is_moe and arch.mlp <= 0:
        raise RidgelineError(f"{where}: intermediate_size must be a positive integer")
    if arch.heads % arch.kv_heads:
        raise RidgelineError(
            f"{where}: num_attention_heads ({arch.heads}) is not a multiple of "
            f"num_key_value_heads ({arch.kv_heads})"
        )
    if arch.is_moe and not 0 < arch.experts_per_token <= arch.experts:
        raise RidgelineError(f"{where}: num_experts_per_tok must be between 1 and the experts")
    if arch.windows and len(arch.windows) != arch.layers:
        raise RidgelineError(f"{where}: layer_types has {len(arch.windows)} entries for {arch.layers} layers")
    if arch.is_moe and arch.expert_mlp <= 0:
        key = "intermediate_size" if arch.family in ("mixtral", "gpt_oss") else "moe_intermediate_size"
        raise RidgelineError(f"{where}: {key} (the experts' MLP) must be a positive integer")
    if arch.is_mla and arch.v_head_dim <= 0:
        raise RidgelineError(f"{where}: v_head_dim must be a positive integer")
    check_sizes(arch, where)
