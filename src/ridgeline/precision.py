"""Weight, maths and KV-cache dtypes, set separately, and their bytes.

Bytes per weight: bf16 2, fp8 1, int8 1, int4 0.5. A weight-only scheme may carry a
bf16 scale per group: `int4-g128` stores 4 bits per weight plus 16 bits per 128
weights, 4.125 bits in all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache

from ridgeline.errors import RidgelineError

BITS = {
    "fp32": 32.0, "bf16": 16.0, "fp16": 16.0, "fp16acc16": 16.0,
    "fp8": 8.0, "int8": 8.0, "int4": 4.0, "fp4": 4.0,
}  # fmt: skip
# fp16acc16: fp16 maths accumulating in fp16 (llama.cpp's cuBLAS GEMMs), twice the fp16 rate
# on GeForce parts; elsewhere the same as fp16.
MATHS_DTYPES = ("bf16", "fp16", "fp16acc16", "fp8", "int8", "fp4", "fp32")
KV_DTYPES = ("bf16", "fp16", "fp8", "int8")
SCALE_BITS = 16.0  # one bf16 scale per group
_WEIGHTS = r"^(?P<dtype>[a-z0-9]+?)(?:-g(?P<group>\d+))?$"  # compiled on first use, not at import


@dataclass(frozen=True)
class Precision:
    """Three dtypes: the stored weights, the arithmetic, the KV cache."""

    weights: str = "bf16"
    maths: str = "bf16"
    kv: str = "bf16"

    @cached_property
    def weight_bytes_per_param(self) -> float:
        return weight_bits(self.weights) / 8.0

    @cached_property
    def kv_bytes_per_element(self) -> float:
        return BITS[self.kv] / 8.0

    @cached_property
    def activation_bytes(self) -> float:
        """Activations travel in 16 bits unless the maths itself is wider."""
        return max(BITS[self.maths], 16.0) / 8.0


WEIGHT_DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")  # what weights are stored in
AUTO_MATHS = "auto"  # maths asked as none: the engine's for the weights, else bf16 (Deployment.build)


@lru_cache(maxsize=64)
def _weights_spec(weights: str) -> tuple[str, int | None]:
    """A weights spec's dtype and group size (None: no group scales), or one clear line."""
    match = re.match(_WEIGHTS, weights.lower())
    if not match or match["dtype"] not in BITS:
        raise RidgelineError(
            f"unknown weight dtype '{weights}': use one of {', '.join(BITS)}, "
            "optionally with a group size such as int4-g128, or file (the model's own stored mix)"
        )
    group = None if match["group"] is None else int(match["group"])
    if group is not None and group <= 0:
        raise RidgelineError(f"group size in '{weights}' must be positive, e.g. int4-g128")
    return match["dtype"], group


@lru_cache(maxsize=64)
def weight_bits(weights: str) -> float:
    """Bits per stored weight, group scales included. `file` means the model file's own
    mix (a GGUF file knows it); it has no fixed width here."""
    if weights == "file":
        return float("nan")
    dtype, group = _weights_spec(weights)
    return BITS[dtype] + (SCALE_BITS / group if group else 0.0)


def weight_dtype(weights: str) -> str:
    """The dtype a weights spec stores in, its group size dropped (`int4-g128`: int4);
    `file` stays `file`."""
    return weights if weights == "file" else _weights_spec(weights)[0]


def attention_maths(maths: str, kv: str) -> str:
    """The dtype an engine's attention kernels multiply in. Scores and values are products of
    activations with the KV cache, never with the weights, so an 8- or 4-bit matmul dtype
    does not carry over: over an fp8 cache they run in fp8 (FP8 FlashAttention, TensorRT-LLM's
    FP8 context FMHA), else in 16 bits; 16-bit and wider maths run attention as they are."""
    if BITS[maths] > 8.0:
        return maths
    return "fp8" if kv == "fp8" else "bf16"


@lru_cache(maxsize=64)
def make_precision(weights: str = "bf16", maths: str = "bf16", kv: str = "bf16") -> Precision:
    weight_bits(weights)
    if maths not in MATHS_DTYPES:
        raise RidgelineError(f"unknown maths dtype '{maths}': use one of {', '.join(MATHS_DTYPES)}")
    if kv not in KV_DTYPES:
        raise RidgelineError(f"unknown KV-cache dtype '{kv}': use one of {', '.join(KV_DTYPES)}")
    return Precision(weights.lower(), maths, kv)
