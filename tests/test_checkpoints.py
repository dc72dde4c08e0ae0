"""Checkpoints stored quantised: a config.json's quantization_config gives the model its
stored mix, which is its weights unless --weights says otherwise. Sizes are checked against
the published checkpoints and against the formats' own arithmetic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from ridgeline import Deployment
from ridgeline.hf_config import architecture_from_config
from ridgeline.ledger import model_weight_bytes
from ridgeline.models import get_model

GIB = 2**30
LLAMA_8B = {
    "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "tie_word_embeddings": False, "max_position_embeddings": 131072,
}  # fmt: skip


def stored_bytes(model: str, weights: str | None = None) -> float:
    d = Deployment.build(model, weights=weights)
    return float(model_weight_bytes(d.arch, d.prec))


@pytest.mark.parametrize(("model", "card_gib"), [("gpt-oss-120b", 60.8), ("gpt-oss-20b", 12.8)])
def test_gpt_oss_weighs_what_its_model_card_says(model: str, card_gib: float) -> None:
    """OpenAI's model card: checkpoints of 60.8 GiB and 12.8 GiB (MXFP4 experts, bf16 rest),
    within half a percent (the expert biases are stored in bf16, not counted apart here)."""
    assert Deployment.build(model).prec.weights == "file"
    assert stored_bytes(model) / GIB == pytest.approx(card_gib, rel=0.005)


def test_deepseek_v3_is_its_fp8_with_a_scale_per_block() -> None:
    """Every matmul weight in 8 bits plus an fp32 scale per 128 x 128 block; the embedding
    and the lm_head (129,280 x 7,168 each) in bf16."""
    arch = get_model("deepseek-v3")
    embed = 2 * 129_280 * 7_168
    want = (arch.parameters - embed) * (1.0 + 4.0 / (128 * 128)) + embed * 2.0
    assert stored_bytes("deepseek-v3") == pytest.approx(want, rel=1e-12)
    assert stored_bytes("deepseek-v3", "bf16") == pytest.approx(2.0 * arch.parameters, rel=1e-12)


@pytest.mark.parametrize(("method", "bits", "group"), [("awq", 4, 128), ("gptq", 8, 64), ("gptq", 4, -1)])
def test_an_awq_or_gptq_checkpoint_stores_a_scale_and_a_zero_per_group(
    method: str, bits: int, group: int
) -> None:
    quant = {"quant_method": method, "bits": bits, "group_size": group}
    arch = architecture_from_config({**LLAMA_8B, "quantization_config": quant}, "llama-8b-q")
    embed = 2 * 128_256 * 4_096
    per_weight = bits + ((16 + bits) / group if group > 0 else 0)
    want = (arch.parameters - embed) * per_weight / 8 + embed * 2.0
    d = Deployment.build(arch)
    assert float(model_weight_bytes(d.arch, d.prec)) == pytest.approx(want, rel=1e-12)


def test_a_method_it_does_not_read_leaves_the_weights_to_the_flag() -> None:
    arch = architecture_from_config(
        {**LLAMA_8B, "quantization_config": {"quant_method": "bitsandbytes"}}, "x"
    )
    assert arch.file_bytes_per_param is None
    assert Deployment.build(arch).prec.weights == "bf16"


def test_gpt_oss_120b_fits_one_h100_as_shipped_and_not_in_bf16() -> None:
    def fits(*extra: str) -> dict[str, Any]:
        proc = run_cli("estimate", "--model", "gpt-oss-120b", "--gpu", "h100-sxm", "--json", *extra)
        assert proc.returncode == 0, proc.stderr
        return dict(json.loads(proc.stdout)["memory"])

    shipped, wide = fits(), fits("--weights", "bf16")
    assert shipped["fits"] and not wide["fits"]
    assert shipped["weight_bytes"] == pytest.approx(stored_bytes("gpt-oss-120b"), rel=1e-12)


@pytest.mark.parametrize(
    ("quant", "says"),
    [
        ({"quant_method": "fp8", "weight_block_size": [128]}, "weight_block_size"),
        ({"quant_method": "fp8", "weight_block_size": [0, 128]}, "weight_block_size"),
        ({"quant_method": "awq", "bits": 3.5}, "bits"),
        ({"quant_method": "gptq", "bits": 4, "group_size": 0}, "group_size"),
        ({"quant_method": "awq", "bits": True}, "bits"),
    ],
)
def test_a_malformed_quantization_config_is_one_line(
    tmp_path: Path, quant: dict[str, Any], says: str
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA_8B, "quantization_config": quant}))
    proc = run_cli("estimate", "--model", str(path))
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("ridgeline: error:") and says in lines[0]
