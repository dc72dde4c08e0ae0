"""benchmarks/gpu_validate.py, dry run: the script that times a random-weight Llama on a
GPU runs end to end on the CPU with tiny shapes, and writes its data and report."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT


def test_the_dry_run_writes_data_and_a_report(tmp_path: Path) -> None:
    script = ROOT / "benchmarks" / "gpu_validate.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--dry-run", "--repeats", "2", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "gpu_validate.json").read_text())
    meta, points = data["meta"], data["points"]
    assert meta["dry_run"] is True and meta["device_name"] == "CPU" and meta["torch"].startswith("2.13.0")
    # the static cache holds what a full prefill computes: one cached step gives the same logits
    assert meta["cache_gap"] < 1e-4
    assert [(p["phase"], p["batch"], p["tokens"]) for p in points] == [
        ("prefill", 1, 16),
        ("prefill", 1, 48),
        ("decode", 1, 16),
        ("decode", 2, 40),
    ]
    for p in points:
        assert p["measured_s"] > 0 and 0 < p["ideal_s"] <= p["lesson_s"] and p["per_op_s"] > 0
        # a decode step is also timed in its two big parts; a prefill is not
        assert (p["matmuls_s"] is not None and p["matmuls_s"] > 0) == (p["phase"] == "decode")
        assert (p["attention_s"] is not None and p["attention_s"] > 0) == (p["phase"] == "decode")
    assert meta["ceiling_flops_per_s"] > 0 and meta["ceiling_bytes_per_s"] > 0
    assert meta["complete"] is True and meta["gpu"] == "h100-sxm"
    # tiny Llama: 2 layers, hidden 64, 4 heads / 2 KV heads of 16, MLP 128, vocab 256, untied
    params = 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64 + 2 * 256 * 64
    assert points[0]["flops"] == 2 * params * 16 + 2 * 2 * 64 * 16**2  # 2PN + 2LdN^2
    # weights read once in bf16: every matmul's, the head's and the norms', and the embedding
    # rows of the tokens in the pass; a decode step reads the cache and writes its new token:
    # layers x (K, V) x KV heads x head dim x (context + 1) x 2 bytes
    matmuls = 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128) + 256 * 64
    norms = 2 * 2 * 64 + 64
    assert [p["weight_bytes"] for p in points] == [2 * (matmuls + norms + 64 * n) for n in (16, 48, 1, 2)]
    assert points[2]["kv_bytes"] == 2 * 2 * 2 * 16 * 17 * 2
    assert points[3]["kv_bytes"] == 2 * (2 * 2 * 2 * 16 * 41 * 2)
    rows = list(csv.DictReader((tmp_path / "gpu_validate.csv").open()))
    assert len(rows) == 4 and float(rows[0]["flops"]) == points[0]["flops"]
    report = (tmp_path / "gpu_validate.md").read_text()
    assert "| phase | batch | tokens | measured |" in report and "dry run" in report
    assert "| batch | context | step | matmuls |" in report and "| tokens | time | TFLOP/s |" in report
    assert [q["tokens"] for q in data["sweep"]] == [1, 8, 32] and all(q["time_s"] > 0 for q in data["sweep"])


def test_without_a_gpu_the_real_run_says_how_to_dry_run(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():  # a GPU machine runs the real thing instead
        return
    script = ROOT / "benchmarks" / "gpu_validate.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "--dry-run" in proc.stderr


def script() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("gpu_validate", ROOT / "benchmarks" / "gpu_validate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_the_card_names_its_catalogue_entry() -> None:
    module = script()
    # names as nvidia-smi and torch.cuda.get_device_name() print them
    assert module.catalogue_name("NVIDIA H200") == "h200"
    assert module.catalogue_name("NVIDIA H100 80GB HBM3") == "h100-sxm"
    assert module.catalogue_name("NVIDIA H100 PCIe") == "h100-pcie"
    assert module.catalogue_name("NVIDIA A100-SXM4-40GB") == "a100-40gb"
    assert module.catalogue_name("NVIDIA A100-SXM4-80GB") == "a100-80gb-sxm"
    assert module.catalogue_name("NVIDIA A100 80GB PCIe") == "a100-80gb-pcie"
    assert module.catalogue_name("NVIDIA L40S") == "l40s"
    assert module.catalogue_name("NVIDIA L4") == "l4"
    assert module.catalogue_name("NVIDIA L40") == "l40"
    assert module.catalogue_name("NVIDIA H100 NVL") == "h100-nvl"
    assert module.catalogue_name("NVIDIA GH200 480GB") == "gh200"
    assert module.catalogue_name("NVIDIA GH200 144G HBM3e") == "gh200-144gb"
    assert module.catalogue_name("NVIDIA RTX A6000") == "rtx-a6000"
    assert module.catalogue_name("NVIDIA RTX 6000 Ada Generation") == "rtx-6000-ada"
    assert module.catalogue_name("Tesla V100-SXM2-32GB") == "v100"
    assert module.catalogue_name("Tesla T4") == "t4"
    assert module.catalogue_name("NVIDIA GeForce RTX 4090") == "rtx-4090"
    assert module.catalogue_name("NVIDIA GeForce GTX 1080 Ti") is None


def test_the_matmul_form_is_recovered_from_times_it_generated() -> None:
    """Times made by the profiles' form itself (share 0.8 of an 800 TFLOP/s ceiling, half
    at 100 tokens, weights read at 3 TB/s; one token is bandwidth-bound) fit back to it."""
    module = script()
    params, ceiling, bandwidth = 218e6, 800e12, 3e12

    def law(m: int) -> float:
        return max(2 * m * params / (0.8 * ceiling * m / (m + 100)), 2 * params / bandwidth)

    points = [
        module.SweepPoint(m, law(m), 2.0 * m * params, 2 * params) for m in (1, 16, 64, 256, 1024, 8192)
    ]
    share, half_m, read = module.fit_form(points, ceiling)
    assert (share, half_m) == (0.8, 100) and read == pytest.approx(bandwidth)
    assert all(p.form_s == pytest.approx(p.time_s) for p in points)
