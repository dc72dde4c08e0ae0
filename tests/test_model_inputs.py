"""A model or an accelerator from the user's own files: a file that is nonsense is refused
in one line that names the field or the file, with exit status 2; it never becomes a
traceback, nor negative sizes printed as if they were an estimate."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from conftest import run_cli
from ridgeline.architecture import Architecture, check_sizes
from ridgeline.errors import RidgelineError
from ridgeline.hardware import get_accelerator
from ridgeline.hf_config import architecture_from_config


def refused(*args: str, env: dict[str, str] | None = None) -> str:
    """The one line a refused command prints, after checking it is only that."""
    proc = run_cli(*args, env=env)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and lines[0].startswith("ridgeline: error:"), proc.stderr
    assert "internal error" not in lines[0]
    return lines[0]


def environment(**extra: str) -> dict[str, str]:
    return {**os.environ, **extra}


# --- accelerators ------------------------------------------------------------------------
BIG_GPU = (
    '{"big": {"peak_flops": {"bf16": 1' + "0" * 400 + '}, '
    '"bandwidth_bytes_per_s": 1e12, "memory_bytes": 8e10}}'
)  # fmt: skip


def test_an_integer_too_large_for_a_float_is_refused_naming_its_field(tmp_path: Path) -> None:
    """JSON allows integers of any length; float() of one past 1.8e308 overflows."""
    path = tmp_path / "g.json"
    path.write_text(BIG_GPU)
    line = refused("gpus", "--gpu-file", str(path))
    assert "peak_flops.bf16" in line and str(path) in line


def test_a_config_folder_gpus_json_too_large_is_one_line_for_every_command(tmp_path: Path) -> None:
    (tmp_path / "gpus.json").write_text(BIG_GPU)
    env = environment(RIDGELINE_CONFIG_DIR=str(tmp_path))
    line = refused("estimate", "-m", "llama-3.2-1b", "-p", "10", "-o", "5", env=env)
    assert "peak_flops.bf16" in line and "gpus.json" in line


CASED_GPU = """
[MyGPU]
peak_flops = { bf16 = 400e12 }
bandwidth_bytes_per_s = 2.0e12
memory_bytes = 64e9
"""


def test_an_accelerator_name_ignores_case_as_the_catalogue_lists_it(tmp_path: Path) -> None:
    """`[MyGPU]` is listed as `mygpu` (its label keeps the spelling) and found as either."""
    path = tmp_path / "mine.toml"
    path.write_text(CASED_GPU)
    listed = json.loads(run_cli("gpus", "--gpu-file", str(path), "--json").stdout)
    assert "mygpu" in listed and listed["mygpu"]["label"] == "MyGPU"
    for name in ("MyGPU", "mygpu", "MYGPU"):
        assert get_accelerator(name, gpu_file=path).bandwidth_bytes_per_s == 2.0e12
    est = run_cli(
        "estimate", "-m", "llama-3.2-1b", "-g", "MyGPU", "--gpu-file", str(path), "-p", "10", "-o", "5"
    )
    assert est.returncode == 0, est.stderr


def test_two_spellings_of_one_accelerator_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "twice.toml"
    path.write_text(CASED_GPU + CASED_GPU.replace("MyGPU", "mygpu"))
    line = refused("gpus", "--gpu-file", str(path))
    assert "'mygpu'" in line and str(path) in line


# --- GGUF files --------------------------------------------------------------------------
def _text(value: str) -> bytes:
    data = value.encode()
    return struct.pack("<Q", len(data)) + data


def _gguf(path: Path, tensors: list[tuple[str, list[int], int]], data: bytes = b"") -> str:
    """A GGUF of a tiny Llama's metadata (version 3) and the given tensors (name, dims, type)."""
    keys = {"block_count": 2, "embedding_length": 64, "feed_forward_length": 128,
            "attention.head_count": 2, "context_length": 1024, "vocab_size": 100}  # fmt: skip
    kvs = _text("general.architecture") + struct.pack("<I", 8) + _text("llama")
    kvs += b"".join(_text(f"llama.{k}") + struct.pack("<II", 4, v) for k, v in keys.items())
    infos = b"".join(
        _text(name)
        + struct.pack("<I", len(dims))
        + struct.pack(f"<{len(dims)}Q", *dims)
        + struct.pack("<IQ", kind, 0)
        for name, dims, kind in tensors
    )
    head = struct.pack("<IIQQ", 0x46554747, 3, len(tensors), len(keys) + 1)
    path.write_bytes(head + kvs + infos + data)
    return str(path)


F16, Q4_0 = 1, 2


def test_a_gguf_tensor_of_part_of_a_block_is_refused_when_read(tmp_path: Path) -> None:
    """One Q4_0 weight is not a whole block of 32: its bytes would round to none, and the
    estimate would divide by zero."""
    path = _gguf(tmp_path / "zero_bytes.gguf", [("token_embd.weight", [1], Q4_0)])
    for command in (["models", path], ["estimate", "-m", path, "-p", "10", "-o", "5"]):
        line = refused(*command)
        assert "zero_bytes.gguf" in line and "Q4_0" in line


def test_a_gguf_cut_short_of_its_weights_is_refused(tmp_path: Path) -> None:
    whole = _gguf(tmp_path / "whole.gguf", [("token_embd.weight", [64, 64], F16)], bytes(64 * 64 * 2))
    assert run_cli("models", whole).returncode == 0
    short = _gguf(tmp_path / "short.gguf", [("token_embd.weight", [64, 64], F16)], bytes(100))
    line = refused("models", short)
    assert "short.gguf" in line and "8,192 bytes of weights" in line


# --- config.json -------------------------------------------------------------------------
DEEPSEEK = {
    "model_type": "deepseek_v3", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
    "vocab_size": 100, "intermediate_size": 128, "max_position_embeddings": 1000,
    "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, "kv_lora_rank": 16,
    "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "first_k_dense_replace": 1000,
}  # fmt: skip
QWEN_MOE = {
    "model_type": "qwen2_moe", "num_hidden_layers": 4, "hidden_size": 64, "num_attention_heads": 4,
    "vocab_size": 100, "intermediate_size": 128, "max_position_embeddings": 1000, "num_experts": 8,
    "num_experts_per_tok": 2, "moe_intermediate_size": 32, "mlp_only_layers": [0, 1, 2, 3, 4, 5],
}  # fmt: skip


def _config(folder: Path, cfg: dict[str, object]) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder / "config.json"


def test_more_first_dense_layers_than_layers_is_refused_from_every_source(tmp_path: Path) -> None:
    """2 layers, of which the first 1000 dense, gave -188 k parameters: from a config.json,
    its folder, or a Hugging Face id in the local cache, the same one line."""
    path = _config(tmp_path / "dsfirst", DEEPSEEK)
    snapshot = tmp_path / "hub" / "models--org--dsfirst" / "snapshots" / "abc"
    _config(snapshot, DEEPSEEK)
    env = environment(HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1")
    for spec in (str(path), str(path.parent), "org/dsfirst"):
        line = refused("models", spec, env=env)
        assert "first_k_dense_replace" in line and "config.json" in line
    assert "first_k_dense_replace" in refused("estimate", "-m", str(path), "-p", "10", "-o", "5")


def test_mlp_only_layers_beyond_the_layers_are_refused(tmp_path: Path) -> None:
    """Six dense layers of four gave more active parameters than parameters."""
    line = refused("models", str(_config(tmp_path / "qmoe", QWEN_MOE)))
    assert "mlp_only_layers" in line and "config.json" in line


def test_a_hundred_million_layers_are_refused_before_a_window_is_built(tmp_path: Path) -> None:
    """Gemma 3 lists a window per layer: 1e8 layers would build a tuple of 1e8 before any check."""
    gemma = {"model_type": "gemma3_text", "num_hidden_layers": 100_000_000, "hidden_size": 64,
             "num_attention_heads": 2, "vocab_size": 100, "intermediate_size": 128,
             "max_position_embeddings": 1000, "sliding_window": 512}  # fmt: skip
    line = refused("models", str(_config(tmp_path / "deep", gemma)))
    assert "num_hidden_layers" in line and "100,000,000" in line


def test_a_layer_listed_twice_in_mlp_only_layers_is_one_dense_layer() -> None:
    once = architecture_from_config({**QWEN_MOE, "mlp_only_layers": [1]}, "q")
    twice = architecture_from_config({**QWEN_MOE, "mlp_only_layers": [1, 1]}, "q")
    assert twice.dense_layers == once.dense_layers == 1
    assert twice.parameters == once.parameters


TINY = Architecture(
    name="tiny", family="llama", layers=2, hidden=64, heads=2, kv_heads=2, head_dim=32, mlp=128,
    vocab=100, tied_embeddings=True, max_context=1000,
)  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"experts": 4, "experts_per_token": 2, "expert_mlp": 32, "dense_layers": 5}, "active parameters"),
        ({"hidden": -64}, "parameters"),
        ({"kv_heads": 0}, "KV cache"),
        # every size at the largest a config may write: 1.4e29 bytes of weights, a TTFT of aeons
        ({"hidden": 2**31 - 1, "mlp": 2**31 - 1, "vocab": 2**31 - 1}, "parameters"),
    ],
)
def test_a_built_architecture_with_impossible_sizes_is_refused(changes: dict[str, int], says: str) -> None:
    """The last check every model passes: whatever its fields, its derived sizes are sane."""
    from dataclasses import replace

    check_sizes(TINY, "tiny.json")
    with pytest.raises(RidgelineError, match=f"tiny.json: .*{says}"):
        check_sizes(replace(TINY, **changes), "tiny.json")


# --- length distributions ----------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--prompt-dist", "--output-dist"])
def test_a_folder_given_as_lengths_names_the_flag_once(tmp_path: Path, flag: str) -> None:
    line = refused("simulate", "-m", "llama-3.2-1b", "--requests", "1", flag, f"file:{tmp_path}")
    assert line.count(flag) == 1 and "is a folder" in line
