"""benchmarks/gpu_validate.py, dry run: the script that times a random-weight Llama on a
GPU runs end to end on the CPU with tiny shapes, and writes its data and report."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

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
        assert p["measured_s"] > 0 and 0 < p["ideal_s"] <= p["lesson_s"]
    # tiny Llama: 2 layers, hidden 64, 4 heads / 2 KV heads of 16, MLP 128, vocab 256, untied
    params = 2 * (64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64 + 2 * 256 * 64
    assert points[0]["flops"] == 2 * params * 16 + 2 * 2 * 64 * 16**2  # 2PN + 2LdN^2
    rows = list(csv.DictReader((tmp_path / "gpu_validate.csv").open()))
    assert len(rows) == 4 and float(rows[0]["flops"]) == points[0]["flops"]
    report = (tmp_path / "gpu_validate.md").read_text()
    assert "| phase | batch | tokens | measured |" in report and "dry run" in report


def test_without_a_gpu_the_real_run_says_how_to_dry_run(tmp_path: Path) -> None:
    import torch

    if torch.cuda.is_available():  # a GPU machine runs the real thing instead
        return
    script = ROOT / "benchmarks" / "gpu_validate.py"
    proc = subprocess.run(
        [sys.executable, str(script), "--out", str(tmp_path)], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "--dry-run" in proc.stderr
