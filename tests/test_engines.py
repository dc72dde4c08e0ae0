"""Engine profiles: each term does what engines.py says, by independent arithmetic on the
model's published shapes and the accelerator's data sheet."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from ridgeline.cli import main
from ridgeline.engines import engines

# Llama 3.1 8B (its config.json): 8,030,261,248 parameters, 32 layers, 8 KV heads of 128.
PARAMS_8B, LAYERS_8B, KV_BYTES_PER_TOKEN_8B = 8_030_261_248, 32, 2 * 32 * 8 * 128 * 2
H100_SXM_BANDWIDTH = 3.35e12  # bytes/s, NVIDIA's data sheet

PERFECT = """
[perfect]
label = "a perfect engine"
compute = { gemm = { bf16 = 1.0 }, half_m_tokens = 0.0, attention = 1.0, experts = 1.0 }
memory = { weights = { w16 = 1.0, w8 = 1.0, w4 = 1.0 }, kv = 1.0 }
"""


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_built_in_engines_and_their_schedulers(capsys: pytest.CaptureFixture[str]) -> None:
    listed = run_json(capsys, "engines")
    assert {"vllm", "sglang", "trtllm", "llamacpp"} <= set(listed)
    assert listed["trtllm"]["scheduler"]["policy"] == "no-evict"  # GUARANTEED_NO_EVICT by default
    assert listed["vllm"]["scheduler"]["policy"] == "vllm"


def test_a_decode_step_is_its_bytes_at_the_profiles_bandwidth_plus_its_overhead(
    capsys: pytest.CaptureFixture[str],
) -> None:
    p = engines()["vllm"]
    out = run_json(capsys, "estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                   "--prompt-tokens", "2000", "--output-tokens", "8", "--engine", "vllm")  # fmt: skip
    step = out["decode"]  # the first decode step: 2,001 tokens of context
    weights_s = PARAMS_8B * 2 / (H100_SXM_BANDWIDTH * p.weights["w16"])
    kv_s = 2001 * KV_BYTES_PER_TOKEN_8B / (H100_SXM_BANDWIDTH * p.kv)
    overhead_s = p.fixed_s + p.per_layer_s * LAYERS_8B + p.per_sequence_s
    assert step["bound"] == "memory"
    assert step["time_s"] == pytest.approx(weights_s + kv_s + overhead_s, rel=2e-3)


def test_tensor_parallelism_scales_the_step_overhead_by_its_log(capsys: pytest.CaptureFixture[str]) -> None:
    p = engines()["vllm"]
    base = p.fixed_s + p.per_layer_s * LAYERS_8B
    for tp in (1, 2, 4):
        out = run_json(capsys, "estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                       "--tp", str(tp), "--engine", "vllm")  # fmt: skip
        expected = base * (1 + p.tp_scale * math.log2(tp)) + p.per_sequence_s
        assert out["decode"]["overhead_s"] == pytest.approx(expected, rel=1e-9)


def test_every_built_in_engine_is_slower_than_the_roofline(capsys: pytest.CaptureFixture[str]) -> None:
    ideal = run_json(capsys, "estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--preset", "ideal")
    for name in ("vllm", "sglang", "trtllm", "llamacpp"):
        real = run_json(capsys, "estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", name)
        assert real["tpot_s"] > ideal["tpot_s"] and real["ttft_s"] > ideal["ttft_s"]


def test_a_perfect_engine_from_a_file_is_the_ideal_roofline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "perfect.toml"
    path.write_text(PERFECT, encoding="utf-8")
    ideal = run_json(capsys, "estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--preset", "ideal")
    mine = run_json(capsys, "estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", str(path))
    assert mine["tpot_s"] == pytest.approx(ideal["tpot_s"], rel=1e-9)
    assert mine["ttft_s"] == pytest.approx(ideal["ttft_s"], rel=1e-9)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (PERFECT.replace("bf16 = 1.0", "bf16 = 2.0"), "compute.gemm.bf16"),
        (PERFECT.replace("kv = 1.0", "kv = nan"), "memory.kv"),
        (PERFECT.replace(", w4 = 1.0", ""), "memory.weights lacks w4"),
        (PERFECT + PERFECT.replace("[perfect]", "[twin]"), "exactly one engine profile"),
        ("[x\n", "toml"),
    ],
)
def test_a_bad_profile_is_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    assert main(["estimate", "--engine", str(path)]) == 2
    err = capsys.readouterr().err
    assert says.lower() in err.lower() and err.count("\n") == 1 and "Traceback" not in err


def test_an_unknown_engine_names_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--engine", "vllmm"]) == 2
    err = capsys.readouterr().err
    assert "vllm" in err and "ridgeline engines" in err


def test_an_engine_runs_only_on_its_vendors_accelerators(capsys: pytest.CaptureFixture[str]) -> None:
    assert engines()["trtllm"].runs_on == ("nvidia",)  # TensorRT-LLM is NVIDIA's alone
    assert main(["estimate", "--engine", "trtllm", "--gpu", "mi300x"]) == 2
    err = capsys.readouterr().err
    assert "TensorRT-LLM does not run on amd accelerators (mi300x)" in err and err.count("\n") == 1
    assert main(["estimate", "--engine", "sglang", "--gpu", "mi300x", "--json"]) == 0  # ROCm builds exist
    capsys.readouterr()


def test_a_profile_says_where_it_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "amd-only.toml"
    path.write_text(PERFECT + 'runs_on = ["amd"]\n', encoding="utf-8")
    assert main(["estimate", "--engine", str(path), "--gpu", "h100-sxm"]) == 2
    assert "does not run on nvidia accelerators" in capsys.readouterr().err
    path.write_text(PERFECT + "runs_on = [1]\n", encoding="utf-8")
    assert main(["estimate", "--engine", str(path), "--gpu", "mi300x"]) == 2
    assert "runs_on must be a list of vendor names" in capsys.readouterr().err
