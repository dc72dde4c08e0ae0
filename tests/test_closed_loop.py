"""The closed loop on this machine's CPU, against a real server: probe the host, measure
llama.cpp (llama-cpp-python's server, Gemma 3 270M Q4_K_M) at four prompt lengths, fit an
engine profile to those measurements, and predict a prompt length the fit never saw. The
prediction must land within 20% of what the server then measures, for TTFT and for TPOT.

How it stays steady on two shared cores:
- the server runs one thread. Two threads meet at a barrier after every operation, so a
  core taken by anything else on the machine stalls both; one thread only slows down;
- the lengths are measured in rounds, each round every length once, the held-out one
  among them in the same sweep, so a load that comes and goes (on a shared machine it comes
  in bursts of seconds, a request's whole decode at once) falls on all of them alike; each
  figure is the median of nine rounds, after one warm-up request;
- prompts are 64 tokens or more: below that a CPU prefill is not linear in its length;
- concurrency 1 only: llama-cpp-python's server runs one request at a time, so a second
  request in flight is queueing, not the batch of two the model would price.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

import llama_server
from conftest import run_cli
from ridgeline.engines import get_engine

FIT_PROMPTS = (64, 128, 256, 384)
HELD_OUT_PROMPT = 192  # between the fitted lengths, and none of them
OUTPUT = 24  # decode steps a request
ROUNDS = 9
TOLERANCE = 0.20


@pytest.fixture(scope="module")
def server() -> Iterator[llama_server.Server]:
    with llama_server.running(threads=1) as running:
        yield running


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A config folder of its own, holding the host this test probes."""
    folder = tmp_path_factory.mktemp("config")
    return os.environ | {"RIDGELINE_CONFIG_DIR": str(folder)}


def measure(server: llama_server.Server, out: Path, env: dict[str, str], warmup: bool) -> list[dict]:
    """One round: every length once, the held-out one in its place among them."""
    prompts = sorted((*FIT_PROMPTS, HELD_OUT_PROMPT))
    proc = run_cli(
        "measure", server.url, "--model", str(llama_server.gguf_path()),
        "--prompt-tokens", ",".join(map(str, prompts)), "--concurrency", "1",
        "--output-tokens", str(OUTPUT), "--requests", "1", "--warmup", str(int(warmup)), "--out", str(out),
        env=env,
    )  # fmt: skip
    server.check()
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def jsonl(records: list[dict], out: Path) -> Path:
    """A records file (JSONL: one request a line)."""
    out.write_text("".join(json.dumps(r) + "\n" for r in records))
    return out


@pytest.fixture(scope="module")
def loop(server: llama_server.Server, env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("loop")
    assert run_cli("probe", "--quick", env=env).returncode == 0
    records = [r for k in range(ROUNDS) for r in measure(server, folder / f"round-{k}.jsonl", env, k == 0)]
    held_out = [r for r in records if r["target_prompt_tokens"] == HELD_OUT_PROMPT]
    fit_rows = [r for r in records if r["target_prompt_tokens"] != HELD_OUT_PROMPT]
    sweep = jsonl(fit_rows, folder / "sweep.jsonl")
    profile = folder / "p.toml"
    fitted = run_cli("fit", str(sweep), "--gpu", "host", "--engine", "llamacpp", "--out", str(profile),
                     "--json", env=env)  # fmt: skip
    assert fitted.returncode == 0, fitted.stderr
    est = run_cli(
        "estimate", "--engine", str(profile), "--gpu", "host", "--weights", "file",
        "--model", str(llama_server.gguf_path()), "--prompt-tokens", str(HELD_OUT_PROMPT),
        "--output-tokens", str(OUTPUT), "--json", env=env,
    )  # fmt: skip
    assert est.returncode == 0, est.stderr
    return {
        "fit": json.loads(fitted.stdout),
        "profile": get_engine(str(profile)),
        "estimate": json.loads(est.stdout),
        "measured": held_out,
    }


def test_the_fit_sees_only_the_fitted_lengths(loop: dict) -> None:
    assert loop["fit"]["points"] == len(FIT_PROMPTS)
    assert {r["prompt_tokens"] for r in loop["measured"]} == {HELD_OUT_PROMPT}
    assert all(r["error"] is None for r in loop["measured"]) and len(loop["measured"]) == ROUNDS
    assert not loop["fit"]["held"] or set(loop["fit"]["held"]) <= {
        "step_overhead_s",
        "ttft_offset_s",
        "seconds_per_kv_byte",
    }


def test_the_profile_is_llama_cpp_refitted_on_this_host(loop: dict) -> None:
    profile = loop["profile"]  # read back as any --engine FILE.toml is
    assert profile.name == "llamacpp-host" and profile.scheduler == get_engine("llamacpp").scheduler
    assert 0 < profile.gemm["bf16"] <= 1.5 and 0 < profile.kv <= 1.5 and profile.dequant == {}
    assert loop["fit"]["profile"].endswith("p.toml") and loop["fit"]["calibration"] is None


def test_a_length_it_was_not_fitted_on_is_predicted_within_20_percent(loop: dict) -> None:
    measured_ttft = statistics.median(r["ttft_s"] for r in loop["measured"])
    measured_tpot = statistics.median(r["tpot_s"] for r in loop["measured"])
    e = loop["estimate"]
    assert e["ttft_s"] == pytest.approx(measured_ttft, rel=TOLERANCE)
    assert e["tpot_s"] == pytest.approx(measured_tpot, rel=TOLERANCE)
