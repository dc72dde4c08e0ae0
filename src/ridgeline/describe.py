"""A model described: its dimensions and what the core derives from them."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from ridgeline.architecture import Architecture
from ridgeline.hardware import catalogue
from ridgeline.ledger import kv_bytes_per_token, model_weight_bytes
from ridgeline.models import catalogue_model, catalogue_names, get_model
from ridgeline.precision import make_precision


def describe_arch(arch: Architecture, weights: str | None = None) -> dict[str, Any]:
    if weights is None:
        weights = "bf16" if arch.file_bytes_per_param is None else "file"
    prec = make_precision(weights)
    return {
        "name": arch.name,
        "family": arch.family,
        "layers": arch.layers,
        "hidden": arch.hidden,
        "heads": arch.heads,
        "kv_heads": arch.kv_heads,
        "head_dim": arch.head_dim,
        "mlp": arch.mlp,
        "vocab": arch.vocab,
        "tied_embeddings": arch.tied_embeddings,
        "max_context": arch.max_context,
        "parameters": arch.parameters,
        "active_parameters": arch.active_parameters,
        "experts": arch.experts,
        "experts_per_token": arch.experts_per_token,
        "attention": "mla" if arch.is_mla else "gqa" if arch.kv_heads < arch.heads else "mha",
        "sliding_window_layers": sum(1 for w in arch.layer_windows() if w),
        "sliding_window": max(arch.layer_windows()),
        "weights": weights,
        "weight_bytes": model_weight_bytes(arch, prec),
        "kv_bytes_per_token": kv_bytes_per_token(arch, prec),
    }


def describe(spec: str, weights: str | None = None) -> dict[str, Any]:
    return describe_arch(get_model(spec), weights)


def describe_all(weights: str | None = None) -> list[dict[str, Any]]:
    return [describe_arch(catalogue_model(n), weights) for n in catalogue_names()]


def describe_gpus(gpu_file: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """The accelerator catalogue (with the user's entries), each with its bf16 ridge."""
    return {name: asdict(acc) | {"ridge": acc.ridge("bf16")} for name, acc in catalogue(gpu_file).items()}


def describe_engines() -> dict[str, dict[str, Any]]:
    """The engine profiles (with the user's), every number with its provenance."""
    from ridgeline.engines import engines

    out = {}
    for name, p in engines().items():
        d = asdict(p)
        d["uncertainty"] = {k: list(v) for k, v in p.uncertainty.items()}
        out[name] = d
    return out
