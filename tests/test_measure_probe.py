"""`ridgeline probe`: this host's roofline saved as the accelerator `host`, so that
`estimate --gpu host` works; llama.cpp on a CPU computes in fp32, so bf16 = fp32."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import run_cli


@pytest.fixture
def config(tmp_path: Path) -> dict[str, str]:
    return os.environ | {"RIDGELINE_CONFIG_DIR": str(tmp_path)}


def test_probe_saves_host_and_estimate_uses_it(tmp_path: Path, config: dict[str, str]) -> None:
    mine = {"label": "mine", "peak_flops": {"bf16": 1e12}, "bandwidth_bytes_per_s": 1e11, "memory_bytes": 8e9}
    (tmp_path / "gpus.json").write_text(json.dumps({"mine": mine}))
    proc = run_cli("probe", "--quick", "--json", env=config)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    saved = json.loads((tmp_path / "gpus.json").read_text())
    assert saved["mine"] == mine  # other entries kept
    host = saved["host"]
    assert host["peak_flops"]["fp32"] == host["peak_flops"]["bf16"] == result["peak_flops_fp32"] > 0
    assert host["bandwidth_bytes_per_s"] == result["bandwidth_bytes_per_s"] > 0
    assert result["ridge"] == pytest.approx(result["peak_flops_fp32"] / result["bandwidth_bytes_per_s"])
    est = run_cli("estimate", "--gpu", "host", "--model", "llama-3.2-1b", "--json", env=config)
    assert est.returncode == 0, est.stderr
    gpu = json.loads(est.stdout)["gpu"]
    assert gpu["name"] == "host" and gpu["peak_flops"] == host["peak_flops"]["bf16"]
    listed = run_cli("gpus", "--json", env=config)
    assert {"host", "mine"} <= set(json.loads(listed.stdout))


def test_probe_without_saving_and_a_bad_name(config: dict[str, str], tmp_path: Path) -> None:
    proc = run_cli("probe", "--quick", "--no-save", "--name", "laptop", env=config)
    assert proc.returncode == 0, proc.stderr
    assert "FLOP/s" in proc.stdout and not (tmp_path / "gpus.json").exists()
    bad = run_cli("probe", "--quick", "--name", "a/b", env=config)
    assert bad.returncode == 2 and bad.stderr.startswith("ridgeline: error:")
