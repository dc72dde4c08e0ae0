"""`.gguf` files: the architecture from the metadata, the real bytes per weight from the
tensor types (a Q4_K_M file mixes them), and `ridgeline models file.gguf`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import cli_json, run_cli
from llama_server import gguf_path
from ridgeline.errors import RidgelineError
from ridgeline.gguf_file import architecture_from_gguf

# A tiny Llama: 2 layers, hidden 64, 4 heads of 16, 2 KV heads, MLP 128, vocab 100, tied.
L, D, H, KV, HD, F, V = 2, 64, 4, 2, 16, 128, 100


def _tiny_llama(path: Path, untied: bool = False) -> Path:
    """Written with the gguf package: norms in F32, attention in F16, the MLP in Q8_0
    (34 bytes per block of 32 weights), the embedding in F16."""
    import gguf

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(L)
    w.add_context_length(4096)
    w.add_embedding_length(D)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_key_length(HD)
    w.add_value_length(HD)
    w.add_token_list([f"t{i}" for i in range(V)])

    def q8(name: str, rows: int, cols: int) -> None:
        raw = np.zeros((rows, cols // 32 * 34), dtype=np.uint8)
        w.add_tensor(name, raw, raw_shape=(rows, cols // 32 * 34), raw_dtype=gguf.GGMLQuantizationType.Q8_0)

    w.add_tensor("token_embd.weight", np.zeros((V, D), dtype=np.float16))
    if untied:
        w.add_tensor("output.weight", np.zeros((V, D), dtype=np.float16))
    w.add_tensor("output_norm.weight", np.zeros(D, dtype=np.float32))
    for i in range(L):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.zeros(D, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.zeros(D, dtype=np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", np.zeros((H * HD, D), dtype=np.float16))
        w.add_tensor(f"blk.{i}.attn_k.weight", np.zeros((KV * HD, D), dtype=np.float16))
        w.add_tensor(f"blk.{i}.attn_v.weight", np.zeros((KV * HD, D), dtype=np.float16))
        w.add_tensor(f"blk.{i}.attn_output.weight", np.zeros((D, H * HD), dtype=np.float16))
        q8(f"blk.{i}.ffn_gate.weight", F, D)
        q8(f"blk.{i}.ffn_up.weight", F, D)
        q8(f"blk.{i}.ffn_down.weight", D, F)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_mixed_gguf_gives_its_architecture_and_real_bytes_per_weight(tmp_path: Path) -> None:
    arch = architecture_from_gguf(_tiny_llama(tmp_path / "tiny.gguf"))
    attention = D * H * HD + 2 * D * KV * HD + H * HD * D
    mlp = 3 * D * F
    norms = 2 * D
    params = L * (attention + mlp + norms) + D + V * D  # final norm, tied embedding
    assert (arch.layers, arch.hidden, arch.heads, arch.kv_heads, arch.head_dim) == (L, D, H, KV, HD)
    assert arch.tied_embeddings and arch.max_context == 4096 and arch.vocab == V
    assert arch.parameters == params
    stored = L * (attention * 2 + mlp * 34 / 32 + norms * 4) + D * 4 + V * D * 2
    assert arch.file_bytes_per_param == pytest.approx(stored / params)


def test_an_output_tensor_means_untied_embeddings(tmp_path: Path) -> None:
    arch = architecture_from_gguf(_tiny_llama(tmp_path / "untied.gguf", untied=True))
    assert not arch.tied_embeddings
    assert arch.lm_head_params == V * D


def test_gemma_3_270m_q4_k_m_described_from_its_file() -> None:
    """Gemma 3 270M: 18 layers of hidden 640, 4 query heads and 1 KV head of 256, MLP 2048,
    a tied 262,144 x 640 embedding; every sixth layer global, the rest a 512-token window."""
    path = gguf_path()
    data = cli_json("models", str(path))
    per_layer = (640 * 1024 + 2 * 640 * 256 + 1024 * 640) + 2 * 256 + 4 * 640 + 3 * 640 * 2048
    assert data["parameters"] == 18 * per_layer + 640 + 262_144 * 640 == 268_098_176
    assert data["kv_bytes_per_token"] == 18 * 2 * 1 * 256 * 2
    assert data["sliding_window_layers"] == 15 and data["sliding_window"] == 512
    assert data["weights"] == "file"
    size = path.stat().st_size
    assert 0.95 * size < data["weight_bytes"] < size  # the file is its weights, and a header
    # Q4_K_M mixes types between Q4_K (4.5 bits) and Q8_0 (8.5 bits): no single dtype fits
    assert 4.5 / 8 < data["weight_bytes"] / data["parameters"] < 8.5 / 8
    table = run_cli("models", str(path))
    assert table.returncode == 0 and "268 M" in table.stdout


def test_estimate_reads_the_files_own_bytes() -> None:
    path = str(gguf_path())
    described = cli_json("models", path)
    est = cli_json("estimate", "--model", path, "--weights", "file", "--prompt", "128", "--output", "8")
    assert est["memory"]["weight_bytes"] == described["weight_bytes"]


def test_a_broken_gguf_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf at all")
    proc = run_cli("models", str(bad))
    assert proc.returncode == 2
    assert proc.stderr.startswith("ridgeline: error:") and "GGUF" in proc.stderr
    with pytest.raises(RidgelineError, match="not supported"):
        import gguf

        w = gguf.GGUFWriter(str(tmp_path / "odd.gguf"), "rwkv6")
        w.add_tensor("x", np.zeros(4, dtype=np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        architecture_from_gguf(tmp_path / "odd.gguf")


def test_models_json_of_a_gguf_is_valid_json() -> None:
    proc = run_cli("models", str(gguf_path()), "--json")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["family"] == "gemma3_text"


def test_a_quantised_gguf_runs_llama_cpps_int8_maths(tmp_path: Path) -> None:
    """The tiny file's MLP is Q8_0 and its attention F16: 8.5 to 16 bits a weight, an 8-bit
    stored mix on the whole. llama.cpp multiplies its quantised types on int8 tensor cores,
    so without --maths the file runs int8 maths on an RTX 4090; vLLM, which names no maths
    for integer weights, unpacks them into bf16."""
    from ridgeline.deployment import Deployment

    arch = architecture_from_gguf(_tiny_llama(tmp_path / "tiny.gguf"))
    assert 6.0 <= 8 * arch.file_bytes_per_param < 12.0 and arch.file_dtype == ""  # the w8 class
    assert Deployment.build(arch, "rtx-4090", engine="llamacpp").prec.maths == "int8"
    assert Deployment.build(arch, "rtx-4090", engine="vllm").prec.maths == "bf16"
