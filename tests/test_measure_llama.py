"""The whole loop against a real server: llama.cpp (llama-cpp-python's server) with
Gemma 3 270M Q4_K_M on this machine's CPU. Prompts stay short: on two cores a prefill
runs at roughly a hundred tokens a second."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import llama_server
from conftest import run_cli
from ridgeline.calibration import load_calibration

PROMPTS = (16, 64, 192)
CONCURRENCIES = (1, 2)
OUTPUT = 4


@pytest.fixture(scope="module")
def server() -> Iterator[llama_server.Server]:
    with llama_server.running() as running:
        yield running


@pytest.fixture(scope="module")
def sweep(server: llama_server.Server, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep") / "gemma.jsonl"
    proc = run_cli(
        "measure", server.url, "--model", str(llama_server.gguf_path()),
        "--prompt-tokens", ",".join(map(str, PROMPTS)), "--concurrency", ",".join(map(str, CONCURRENCIES)),
        "--output-tokens", str(OUTPUT), "--requests", "2", "--sweep", "--out", str(out),
    )  # fmt: skip
    server.check()  # a server that died mid-sweep is named, with its log, before the records are
    assert proc.returncode == 0, proc.stderr
    return out


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_sweep_gives_valid_records(sweep: Path) -> None:
    recs = records(sweep)
    assert len(recs) == len(PROMPTS) * len(CONCURRENCIES) * 2
    for r in recs:
        assert r["error"] is None and r["http_status"] == 200
        # the server's tokenizer makes each prompt exactly as long as asked
        assert r["prompt_tokens"] == r["target_prompt_tokens"] and r["prompt_tokens_source"] == "server"
        # the stream carries no usage, so N comes from the tokenizer; one chunk per token
        # OUTPUT decode steps after the first token: OUTPUT + 1 tokens, one chunk each
        assert r["tokens_source"] == "tokenizer" and r["chunks"] == OUTPUT + 1 == r["output_tokens"]
        assert 0 < r["ttft_s"] <= r["e2e_s"]
        assert r["tpot_s"] == pytest.approx((r["e2e_s"] - r["ttft_s"]) / (r["output_tokens"] - 1))
    assert {(r["target_prompt_tokens"], r["concurrency"]) for r in recs} == {
        (p, c) for p in PROMPTS for c in CONCURRENCIES
    }


def test_ttft_rises_with_prompt_length(sweep: Path) -> None:
    """Prefill reads the whole prompt: more tokens, later first token. The fastest of each
    length's requests is the one least disturbed (by queueing at C=2, or by other work on
    this machine): noise only ever adds time."""
    recs = records(sweep)
    fastest = [min(r["ttft_s"] for r in recs if r["prompt_tokens"] == p) for p in PROMPTS]
    assert fastest == sorted(fastest) and fastest[0] < fastest[-1]


def squared_relative_errors(c: dict) -> float:
    """`fit`'s objective over a comparison's rows: (predicted / measured - 1)^2 of the TTFT at
    the lowest concurrency and of every TPOT."""
    low = min(r["concurrency"] for r in c["rows"])
    ttft = sum((r["ttft_pred_s"] / r["ttft_s"] - 1) ** 2 for r in c["rows"] if r["concurrency"] == low)
    return ttft + sum((r["tpot_pred_s"] / r["tpot_s"] - 1) ** 2 for r in c["rows"] if r["tpot_s"])


def test_compare_and_fit_run_on_the_sweep(sweep: Path, tmp_path: Path) -> None:
    env = os.environ | {"RIDGELINE_CONFIG_DIR": str(tmp_path)}
    assert run_cli("probe", "--quick", env=env).returncode == 0
    proc = run_cli("compare", str(sweep), "--gpu", "host", "--json", "--plot", str(tmp_path), env=env)
    assert proc.returncode == 0, proc.stderr
    c = json.loads(proc.stdout)
    assert c["model"] == "gemma-3-270m-q4_k_m" and c["gpu"] == "host"
    assert [(r["prompt_tokens"], r["concurrency"]) for r in c["rows"]] == [
        (p, cc) for p in PROMPTS for cc in CONCURRENCIES
    ]
    assert all(r["ttft_pred_s"] > 0 and r["tpot_pred_s"] > 0 for r in c["rows"])
    assert len(c["plots"]) == 2
    cal_path = tmp_path / "gemma.calibration.json"
    proc = run_cli("fit", str(sweep), "--gpu", "host", "--out", str(cal_path), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    f = json.loads(proc.stdout)
    assert f["rows"] == len(PROMPTS) + len(PROMPTS) * len(CONCURRENCIES)  # TTFT at C=1, TPOT everywhere
    # The fit minimises the squared relative errors of those rows together (weighted least
    # squares), so that sum, held against the same medians by `compare`, is no larger with the
    # calibration than without; TPOT's alone may be (the fit may trade it for TTFT's).
    after = run_cli(
        "compare", str(sweep), "--gpu", "host", "--calibration", str(cal_path), "--json", env=env
    )  # fmt: skip
    assert after.returncode == 0, after.stderr
    assert squared_relative_errors(json.loads(after.stdout)) <= squared_relative_errors(c) * (1 + 1e-9)
    cal = load_calibration(cal_path)
    assert cal.gpu == "host" and cal.effective_bandwidth_bytes_per_s > 0
    est = run_cli(
        "estimate", "--model", str(llama_server.gguf_path()), "--weights", "file", "--gpu", "host",
        "--prompt", "64", "--output", "3", "--calibration", str(cal_path), "--json", env=env,
    )  # fmt: skip
    assert est.returncode == 0, est.stderr
