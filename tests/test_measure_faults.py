"""`ridgeline measure` against a server that fails on cue: every failure is recorded and
counted, the run goes on, nothing is lost, and the exit status says errors happened.
Killed midway, the records keep every finished request and `--resume` completes the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ctrl_c_delivered, run_cli
from conftest import run_measure as measure
from fault_server import KINDS, FaultServer

FAULTS = list(KINDS)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_every_failure_is_recorded_counted_and_exits_1(tmp_path: Path) -> None:
    """HTTP 4xx/5xx and 429, a timeout, a disconnect mid-stream, malformed SSE, an empty
    stream, a non-streaming reply, an error inside the stream: all recorded, run goes on."""
    script = ["ok", *FAULTS, "ok_no_usage"]
    out = tmp_path / "faults.jsonl"
    with FaultServer(script) as server:
        proc = measure(server.url, out, "--requests", str(len(script)), "--timeout", "1", "--json")
    assert proc.returncode == 1, proc.stderr
    recs = lines(out)
    assert len(recs) == len(script)
    assert sorted(r["request_id"] for r in recs) == list(range(len(script)))
    kinds = sorted(r["error_kind"] for r in recs if r["error"])
    assert kinds == sorted(KINDS.values())
    summary = json.loads(proc.stdout)
    assert summary["exit_code"] == 1
    assert summary["overall"]["errors"] == len(FAULTS)
    assert summary["overall"]["completed"] == 2
    assert sum(summary["overall"]["error_kinds"].values()) == len(FAULTS)
    good = [r for r in recs if not r["error"]]
    assert {r["tokens_source"] for r in good} == {"usage", "estimate"}  # no tokenizer endpoint here
    assert all(r["output_tokens"] == 5 and r["ttft_s"] > 0 and r["e2e_s"] >= r["ttft_s"] for r in good)
    assert "warning: the server has no tokenize endpoint" in proc.stderr


def test_role_prelude_and_keepalive_do_not_count_as_the_first_token(tmp_path: Path) -> None:
    """TTFT is the first event that carries a generated token: the server sends a keep-alive,
    a role-only delta and an empty text at once, and its first token 0.3 s later."""
    out = tmp_path / "ttft.jsonl"
    with FaultServer(["ok"], prelude_delay_s=0.3) as server:
        proc = measure(server.url, out, "--requests", "2", "--api", "chat")
    assert proc.returncode == 0, proc.stderr
    for r in lines(out):
        assert r["first_event_s"] < 0.3 <= r["ttft_s"]
        assert r["tpot_s"] == (r["e2e_s"] - r["ttft_s"]) / (r["output_tokens"] - 1)
        assert len(r["chunk_gaps_s"]) == 4 and r["chunk_tokens"] == [1, 1, 1, 1]


def test_request_body_and_api_key_stay_out_of_the_records(tmp_path: Path) -> None:
    out = tmp_path / "key.jsonl"
    secret = "sk-test-do-not-write-0123456789"
    env = os.environ | {"RIDGELINE_TEST_KEY": secret}
    with FaultServer(["ok"]) as server:
        proc = measure(
            server.url,
            out,
            "--requests",
            "1",
            "--api-key-env",
            "RIDGELINE_TEST_KEY",
            "-H",
            "X-Team: bench",
            env=env,
        )
        sent = server.received[0]
    assert proc.returncode == 0, proc.stderr
    assert sent["headers"]["authorization"] == f"Bearer {secret}"
    assert sent["headers"]["x-team"] == "bench"
    body = sent["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    # --output-tokens 5 is five decode steps after the prefill's first token: six tokens in all
    assert body["max_tokens"] == 6 and body["ignore_eos"] is True and body["min_tokens"] == 6
    for text in (out.read_text(), proc.stdout, proc.stderr):
        assert secret not in text


def test_usage_mistakes_exit_2_with_one_line(tmp_path: Path) -> None:
    out = tmp_path / "x.jsonl"
    for args in (
        ("--prompt-tokens", "abc"),
        ("--concurrency", "0"),
        ("--api", "grpc"),
        ("--extra-body", "[1]"),
    ):
        proc = measure("http://127.0.0.1:9/v1", out, *args)
        assert proc.returncode == 2, args
        assert proc.stderr.startswith("ridgeline: error:") and proc.stderr.count("\n") == 1
    assert run_cli("measure", "ftp://x", "--model", "m").returncode == 2
    out.write_text('{"request_id": 0}\n')
    proc = measure("http://127.0.0.1:9/v1", out)
    assert proc.returncode == 2 and "--resume" in proc.stderr


def _start(url: str, out: Path, *extra: str, requests: int = 8) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "ridgeline", "measure", url, "--model", "m", "--prompt-tokens", "16"]
    cmd += ["--output-tokens", "10", "--requests", str(requests), "--warmup", "0", "--quiet"]
    cmd += ["--out", str(out), *extra]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_delivered
    )


def _wait_for_records(out: Path, n: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"no {n} records appeared in {out}")


def _resume_completes(url: str, out: Path, before: list[dict]) -> None:
    proc = measure(url, out, "--output-tokens", "10", "--requests", "8", "--resume", "--quiet")
    assert proc.returncode == 0, proc.stderr
    after = lines(out)
    assert after[: len(before)] == before  # nothing rewritten
    assert sorted(r["request_id"] for r in after) == list(range(8))  # nothing repeated, nothing missing


def test_ctrl_c_flushes_exits_130_and_resume_completes(tmp_path: Path) -> None:
    out = tmp_path / "int.jsonl"
    with FaultServer(["ok"], tokens=10, interval_s=0.03) as server:
        proc = _start(server.url, out)
        _wait_for_records(out, 2, proc)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 130, stderr
        assert "--resume" in stderr
        before = lines(out)
        assert 2 <= len(before) < 8 and all(r["error"] is None for r in before)
        _resume_completes(server.url, out, before)


def test_a_killed_run_loses_no_finished_request_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "kill.jsonl"
    with FaultServer(["ok"], tokens=10, interval_s=0.03) as server:
        proc = _start(server.url, out)
        _wait_for_records(out, 3, proc)
        proc.kill()
        proc.communicate(timeout=30)
        before = lines(out)
        assert 3 <= len(before) < 8
        _resume_completes(server.url, out, before)


def test_open_loop_keeps_the_schedule_and_counts_the_wait(tmp_path: Path) -> None:
    """At a rate, each request keeps its scheduled arrival; a request that waits for a free
    slot (here at most one in flight) shows the wait as queue_s."""
    out = tmp_path / "rate" / "open.jsonl"
    with FaultServer(["ok"], tokens=5, interval_s=0.02) as server:
        proc = measure(server.url, out, "--rate", "50", "--concurrency", "1", "--requests", "6")
    assert proc.returncode == 0, proc.stderr
    recs = sorted(lines(out), key=lambda r: r["arrival_s"])
    assert len(recs) == 6 and all(r["rate_per_s"] == 50 and r["concurrency"] == 1 for r in recs)
    for r in recs:
        assert r["send_s"] >= r["arrival_s"] and r["queue_s"] == pytest.approx(r["send_s"] - r["arrival_s"])
    # each request streams for >= 4 x 20 ms, longer than the 20 ms mean gap: later ones wait
    assert recs[-1]["queue_s"] > recs[0]["queue_s"]


def test_workers_write_every_record_once_into_the_one_file(tmp_path: Path) -> None:
    """--workers 3 spreads each point's streams over three processes: the one JSONL holds
    every request of both points exactly once, whole lines, and the summary counts them."""
    out = tmp_path / "workers.jsonl"
    with FaultServer(["ok", "ok_no_usage", "http_503"], tokens=4, interval_s=0.01) as server:
        proc = measure(server.url, out, "--requests", "9", "--concurrency", "4,2", "--workers", "3", "--json")
    assert proc.returncode == 1, proc.stderr  # the 503s
    recs = lines(out)  # every line parses: none torn, none interleaved
    keys = sorted((r["concurrency"], r["request_id"]) for r in recs)
    assert keys == [(c, i) for c in (2, 4) for i in range(9)]
    summary = json.loads(proc.stdout)
    assert summary["written"] == 18 and summary["overall"]["requests"] == 18
    assert summary["overall"]["error_kinds"] == {"http 503": 6}


def test_workers_stop_on_ctrl_c_and_a_kill_of_the_parent_loses_nothing_finished(tmp_path: Path) -> None:
    """40 requests of 0.3 s each, two at a time: 6 s of streams, so a worker that finishes
    its request in flight after the signal (on a loaded machine, a late one) still leaves
    most of the run undone, for --resume to finish."""
    n = 40
    for how in ("interrupt", "kill"):
        out = tmp_path / f"{how}.jsonl"
        with FaultServer(["ok"], tokens=10, interval_s=0.03) as server:
            proc = _start(server.url, out, "--concurrency", "2", "--workers", "2", requests=n)
            _wait_for_records(out, 2, proc)
            proc.send_signal(signal.SIGINT) if how == "interrupt" else proc.kill()
            _, stderr = proc.communicate(timeout=30)
            assert proc.returncode == (130 if how == "interrupt" else -signal.SIGKILL), stderr
            time.sleep(1.0)  # workers of a killed parent see their stdin close, and stop
            before = lines(out)
            assert 2 <= len(before) < n and all(r["error"] is None for r in before)
            resumed = measure(
                server.url, out, "--output-tokens", "10", "--requests", str(n), "--concurrency", "2",
                "--workers", "2", "--resume", "--quiet",
            )  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr
        after = lines(out)
        assert after[: len(before)] == before
        assert sorted(r["request_id"] for r in after) == list(range(n))
