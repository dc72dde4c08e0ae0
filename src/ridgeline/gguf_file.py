"""Read a `.gguf` file (llama.cpp's format) into an Architecture.

The file's metadata gives the dimensions under `<arch>.block_count`,
`<arch>.embedding_length` and so on; they are mapped onto the Hugging Face config fields
that `hf_config.py` already understands, so the parameter count follows the same rules.
The tensors give what no config says: the real bytes per weight. A Q4_K_M file mixes
types (Q4_K, Q5_0, Q6_K, Q8_0, F32), so

    bytes per weight = sum of tensor bytes / sum of tensor elements

and `--weights file` (the default for a .gguf) reads exactly that many bytes per pass.
"""

from __future__ import annotations

import math
import mmap
import struct
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ridgeline.architecture import Architecture
from ridgeline.errors import RidgelineError
from ridgeline.hf_config import architecture_from_config

# GGUF `general.architecture` -> Hugging Face `model_type`.
FAMILIES = {
    "llama": "llama",
    "mistral": "mistral",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "gemma": "gemma",
    "gemma2": "gemma2",
    "gemma3": "gemma3_text",
    "phi3": "phi3",
    "qwen2moe": "qwen2_moe",
    "qwen3moe": "qwen3_moe",
}
GEMMA3_SLIDING_PATTERN = 6  # llama.cpp's own default: every sixth layer attends globally


@dataclass(frozen=True)
class GgufSummary:
    """What the file holds: metadata, and the tensors' elements and bytes by type."""

    metadata: dict[str, Any]
    elements_by_type: dict[str, int]
    bytes_by_type: dict[str, int]
    tensor_names: frozenset[str]

    @property
    def elements(self) -> int:
        return sum(self.elements_by_type.values())

    @property
    def bytes(self) -> int:
        return sum(self.bytes_by_type.values())

    @property
    def bytes_per_weight(self) -> float:
        return self.bytes / self.elements


# GGUF value types -> struct formats (little-endian); 8 is a string, 9 an array.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class _Cursor:
    """Walk the GGUF header in place. The gguf package's GGUFReader parses every token
    string of the vocabulary into numpy arrays (seconds for a 262k vocabulary); this walk
    only steps over them, and takes its tables of tensor types from the gguf package."""

    def __init__(self, buf: Any) -> None:
        self.buf, self.at = buf, 0

    def scalar(self, kind: int) -> Any:
        fmt = "<" + _SCALARS[kind]
        (value,) = struct.unpack_from(fmt, self.buf, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        n = self.scalar(10)
        text = bytes(self.buf[self.at : self.at + n]).decode("utf-8", "replace")
        self.at += n
        return text

    def value(self, kind: int) -> Any:
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY:
            return self.scalar(kind)
        item, count = self.scalar(4), self.scalar(10)
        if item in _SCALARS and item != 7:  # numbers: keep short lists, step over long ones
            if count > 64:
                self.at += count * struct.calcsize(_SCALARS[item])
                return count
            return [self.scalar(item) for _ in range(count)]
        items = [self.value(item) for _ in range(count)]
        return items if count <= 64 else count  # long lists (vocabularies): their length


def read_gguf(path: Path) -> GgufSummary:
    """Metadata (long lists as their lengths) and per-type tensor totals of a GGUF file."""
    from gguf import GGML_QUANT_SIZES, GGUF_MAGIC, GGMLQuantizationType

    try:
        with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            cur = _Cursor(buf)
            if cur.scalar(4) != GGUF_MAGIC:
                raise ValueError("no GGUF magic number")
            cur.scalar(4)  # version
            tensors, kvs = cur.scalar(10), cur.scalar(10)
            metadata = {}
            for _ in range(kvs):
                key = cur.string()
                metadata[key] = cur.value(cur.scalar(4))
            elements: Counter[str] = Counter()
            nbytes: Counter[str] = Counter()
            names = set()
            for _ in range(tensors):
                name = cur.string()
                dims = [cur.scalar(10) for _ in range(cur.scalar(4))]
                kind = GGMLQuantizationType(cur.scalar(4))
                cur.scalar(10)  # offset of the data
                block, block_bytes = GGML_QUANT_SIZES[kind]
                n = math.prod(dims)
                if n % block:  # ggml stores whole blocks; n // block would round a part block away
                    raise ValueError(
                        f"tensor {name!r:.80} has {n} elements, not whole {kind.name} blocks of {block}"
                    )
                elements[kind.name] += n
                nbytes[kind.name] += n // block * block_bytes
                names.add(name)
            file_bytes = len(buf)
    except (OSError, ValueError, struct.error, KeyError, OverflowError, RecursionError) as exc:
        raise RidgelineError(f"{str(path)!r} is not a readable GGUF file ({exc}); check the file") from None
    if sum(elements.values()) == 0:
        raise RidgelineError(
            f"{str(path)!r} holds no weights (no tensors, or only empty ones); check the file"
        )
    if sum(nbytes.values()) > file_bytes:  # the weights are in the file, after its header
        raise RidgelineError(
            f"{str(path)!r} declares {sum(nbytes.values()):,} bytes of weights in {file_bytes:,} bytes; "
            "is the file cut short? download it again"
        )
    return GgufSummary(metadata, dict(elements), dict(nbytes), frozenset(names))


def _length(tokens: Any) -> int | None:
    return len(tokens) if isinstance(tokens, list) else tokens


def config_from_gguf(summary: GgufSummary, where: str) -> dict[str, Any]:
    """The Hugging Face config fields that the GGUF metadata determines."""
    meta = summary.metadata
    arch = str(meta.get("general.architecture") or "")
    if arch not in FAMILIES:
        raise RidgelineError(
            f"{where}: GGUF architecture '{arch}' is not supported; supported: {', '.join(sorted(FAMILIES))}"
        )

    def key(name: str, default: Any = None) -> Any:
        value = meta.get(f"{arch}.{name}", default)
        return value[0] if isinstance(value, list) and value else value  # per-layer lists: take one

    heads = key("attention.head_count")
    hidden = key("embedding_length")
    cfg: dict[str, Any] = {
        "model_type": FAMILIES[arch],
        "num_hidden_layers": key("block_count"),
        "hidden_size": hidden,
        "intermediate_size": key("feed_forward_length"),
        "num_attention_heads": heads,
        "num_key_value_heads": key("attention.head_count_kv", heads),
        "head_dim": key("attention.key_length"),
        "vocab_size": key("vocab_size") or _length(meta.get("tokenizer.ggml.tokens")),
        "max_position_embeddings": key("context_length"),
        "tie_word_embeddings": "output.weight" not in summary.tensor_names,
        "sliding_window": key("attention.sliding_window"),
    }
    if arch == "gemma3":
        cfg["sliding_window_pattern"] = key("attention.sliding_window_pattern", GEMMA3_SLIDING_PATTERN)
    if experts := key("expert_count"):
        if arch == "llama":
            cfg["model_type"] = "mixtral"
            cfg["num_local_experts"] = experts
        else:
            cfg["num_experts"] = experts
            cfg["moe_intermediate_size"] = key("expert_feed_forward_length")
            cfg["shared_expert_intermediate_size"] = key("expert_shared_feed_forward_length")
        cfg["num_experts_per_tok"] = key("expert_used_count")
    return {k: v for k, v in cfg.items() if v is not None}


def architecture_from_gguf(path: Path) -> Architecture:
    """The file's architecture, named after the file, with its real bytes per weight."""
    path = Path(path)
    summary = read_gguf(path)
    arch = architecture_from_config(config_from_gguf(summary, str(path)), path.stem, str(path))
    return replace(arch, file_bytes_per_param=summary.bytes_per_weight)
