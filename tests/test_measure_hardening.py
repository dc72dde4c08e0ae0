"""`measure`, `compare`, `fit` and `probe` on hostile input: every failure says what went
wrong in one line, nothing prints a traceback, JSON on stdout is strict, and no secret
(API key, credential header, URL user:pass, `?key=`) reaches a file or a terminal, even
when the server echoes it back. SIGTERM stops a run as Ctrl-C does, with status 143."""

from __future__ import annotations

import asyncio
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conftest import run_cli
from conftest import run_measure as measure
from fault_server import ECHOES, Blackhole, FaultServer, closed_port
from ridgeline import _files
from ridgeline.calibration import Calibration, load_calibration, save_calibration
from ridgeline.errors import RidgelineError
from ridgeline.measure.client import Endpoint
from ridgeline.measure.redact import Redactor
from ridgeline.measure.workload import Point, arrival_gaps_s
from ridgeline.metrics import make_record
from test_measure import _synthetic_sweep

EXIT_CODES = {0, 1, 2, 130, 143}


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} in ridgeline's JSON output")


def strict(text: str) -> Any:
    """JSON as a strict reader takes it: NaN and Infinity are not JSON."""
    return json.loads(text, parse_constant=_no_constant)


def clean(proc: subprocess.CompletedProcess[str], code: int, max_stderr_lines: int = 1) -> None:
    """The exit status asked for, no traceback anywhere, stderr of at most so many lines."""
    assert proc.returncode in EXIT_CODES
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.stderr.count("\n") <= max_stderr_lines, proc.stderr


def usage_error(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    """Exit 2 and exactly one line, `ridgeline: error: ...`, naming what was wrong."""
    clean(proc, 2)
    assert proc.stderr.startswith("ridgeline: error:") and proc.stderr.count("\n") == 1, proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)
    return proc.stderr


def records(path: Path) -> list[dict]:
    return [strict(line) for line in path.read_text().splitlines()]


# --- why requests fail ----------------------------------------------------------------------


def test_the_summary_and_the_progress_line_name_each_kind_of_failure(tmp_path: Path) -> None:
    """Two 503s and a 429 among four requests: 'errors 3 (http 503: 2, http 429: 1)'."""
    script = ["http_503", "http_429", "ok", "http_503"]
    with FaultServer(script) as server:
        as_json = measure(server.url, tmp_path / "a.jsonl", "--requests", "4", "--json")
        as_text = measure(server.url, tmp_path / "b.jsonl", "--requests", "4")
    clean(as_json, 1)  # the one line: no tokenize endpoint, prompt lengths are estimates
    summary = strict(as_json.stdout)
    assert summary["overall"]["error_kinds"] == {"http 503": 2, "http 429": 1}
    assert summary["points"][0]["summary"]["error_kinds"] == {"http 503": 2, "http 429": 1}
    assert summary["exit_code"] == 1 and summary["unreachable"] is None and summary["signal"] is None
    clean(as_text, 1, max_stderr_lines=10)
    assert "errors 3 (http 503: 2, http 429: 1)" in as_text.stderr  # the progress line
    assert "errors 3 (http 503: 2, http 429: 1)" in as_text.stdout  # the summary


def test_a_refused_connection_says_the_server_is_unreachable_without_credentials(tmp_path: Path) -> None:
    port = closed_port()
    url = f"http://alice:hunter2pass@127.0.0.1:{port}/v1?api_key=qs-secret-value&mode=x"
    out = tmp_path / "refused.jsonl"
    proc = measure(url, out, "--requests", "3", "--json")
    clean(proc, 1)
    line = proc.stderr
    assert line.startswith("ridgeline: error: server unreachable at http://") and "connect refused" in line
    assert f"127.0.0.1:{port}/v1" in line
    summary = strict(proc.stdout)
    assert summary["unreachable"] and summary["exit_code"] == 1 and summary["overall"]["requests"] == 0
    for secret in ("alice", "hunter2pass", "qs-secret-value"):
        assert secret not in proc.stdout + proc.stderr + (out.read_text() if out.exists() else "")


def test_a_connect_timeout_is_told_from_a_refusal(tmp_path: Path) -> None:
    with Blackhole() as hole:
        url = f"http://127.0.0.1:{hole.port}/v1"
        proc = measure(url, tmp_path / "t.jsonl", "--connect-timeout", "0.3", "--quiet")
    clean(proc, 1)
    assert "server unreachable" in proc.stderr and "connect timeout" in proc.stderr


def test_every_request_of_a_point_refused_stops_the_run(tmp_path: Path, monkeypatch: Any) -> None:
    """Past the tokenizer (here: none found), three refused requests at the first point end
    the run there, naming the point; the second point is never tried."""
    import ridgeline.measure.run as running

    async def no_tokenizer(*args: Any) -> None:
        return None

    monkeypatch.setattr(running, "discover", no_tokenizer)
    ep = Endpoint(f"http://127.0.0.1:{closed_port()}/v1", "m", connect_timeout_s=2.0)
    plan = running.Plan([Point(16, 1), Point(16, 2)], requests=3, output_tokens=4, warmup=0)
    out = tmp_path / "point.jsonl"
    with pytest.raises(running.Unreachable) as caught:
        asyncio.run(running.run(plan, ep, out, False, running.Hooks()))
    assert caught.value.kind == "connect refused" and caught.value.failed == 3
    assert "for all 3 requests at prompt 16 · concurrency 1" in caught.value.message
    recs = records(out)
    assert len(recs) == 3 and {r["error_kind"] for r in recs} == {"connect refused"}
    assert {r["concurrency"] for r in recs} == {1}


def test_silence_after_the_headers_is_a_read_timeout(tmp_path: Path) -> None:
    out = tmp_path / "silent.jsonl"
    with FaultServer(["timeout"]) as server:
        proc = measure(server.url, out, "--requests", "1", "--read-timeout", "0.3", "--json")
    clean(proc, 1)
    assert [r["error_kind"] for r in records(out)] == ["read timeout"]
    assert strict(proc.stdout)["overall"]["error_kinds"] == {"read timeout": 1}


def test_a_reply_cut_before_any_byte_is_a_disconnect_before_the_reply(tmp_path: Path) -> None:
    out = tmp_path / "closed.jsonl"
    with FaultServer(["close"]) as server:
        proc = measure(server.url, out, "--requests", "2", "--quiet")
    clean(proc, 1)
    assert [r["error_kind"] for r in records(out)] == ["disconnected before reply"] * 2


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1, made by the openssl command."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command to make a certificate with")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = str(folder / "cert.pem"), str(folder / "key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_an_unknown_certificate_is_a_tls_error_and_its_ca_bundle_fixes_it(
    tmp_path: Path, certificate: tuple[str, str]
) -> None:
    with FaultServer(["ok"], tls=certificate) as server:
        refused = measure(server.url, tmp_path / "tls.jsonl", "--json")
        trusted = measure(server.url, tmp_path / "ca.jsonl", "--requests", "2", "--ca-bundle", certificate[0])
        insecure = measure(server.url, tmp_path / "no.jsonl", "--requests", "2", "--insecure", "--quiet")
    clean(refused, 1)
    assert refused.stderr.startswith("ridgeline: error: TLS with https://127.0.0.1:")
    assert "--ca-bundle" in refused.stderr and "--insecure" in refused.stderr
    clean(trusted, 0, max_stderr_lines=10)
    clean(insecure, 0)


# --- usage mistakes: one line, exit 2 -------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--connect-timeout", "0"), ("--connect-timeout",)),
        (("--connect-timeout", "-1"), ("--connect-timeout",)),
        (("--connect-timeout", "nan"), ("--connect-timeout",)),
        (("--read-timeout", "0"), ("--read-timeout",)),
        (("--read-timeout", "inf"), ("--read-timeout",)),
        (("--timeout", "1e300"), ("--timeout",)),
        (("--burstiness", "nan"), ("--burstiness",)),
        (("--burstiness", "0"), ("--burstiness",)),
        (("--burstiness", "1e9"), ("--burstiness",)),
        (("--rate", "nan"), ("--rate",)),
        (("--rate", "inf"), ("--rate",)),
        (("--rate", "0"), ("--rate",)),
        (("--rate", "2,-1"), ("--rate",)),
        (("--requests", "0"), ("--requests",)),
        (("--warmup", "-1"), ("--warmup",)),
        (("--duration", "0"), ("--duration",)),
        (("--output-tokens", "0"), ("--output-tokens",)),
        (("--prompt-tokens", "99999999999"), ("--prompt-tokens",)),
        (("--concurrency", "100000000"), ("--concurrency",)),
        (("--slo-ttft", "0"), ("--slo-ttft",)),
        (("--seed", str(2**70)), ("--seed",)),
        (("--ca-bundle", "/no/such/ca.pem"), ("--ca-bundle", "not found")),
        (("--extra-body", '{"top_k": NaN}'), ("--extra-body",)),
    ],
)
def test_a_number_out_of_range_is_one_line_naming_its_flag(
    tmp_path: Path, args: tuple[str, ...], words: tuple[str, ...]
) -> None:
    out = tmp_path / "never.jsonl"
    usage_error(measure(f"http://127.0.0.1:{closed_port()}/v1", out, *args), *words)
    assert not out.exists()  # refused before anything was sent or written


def test_a_ca_bundle_that_holds_no_certificate_is_one_line(tmp_path: Path) -> None:
    bogus = tmp_path / "ca.pem"
    bogus.write_text("not a certificate\n")
    usage_error(
        measure("https://127.0.0.1:9/v1", tmp_path / "x.jsonl", "--ca-bundle", str(bogus)), "--ca-bundle"
    )


@pytest.mark.parametrize("url", ["http://", "http://:80/v1", "http://127.0.0.1:99999/v1", "ftp://host/v1"])
def test_a_url_without_a_usable_host_is_one_line(tmp_path: Path, url: str) -> None:
    usage_error(measure(url, tmp_path / "x.jsonl"), "URL")


def test_a_bad_url_is_shown_without_its_password(tmp_path: Path) -> None:
    text = usage_error(measure("ftp://bob:s3cr3t-pw@host/v1", tmp_path / "x.jsonl"), "URL")
    assert "s3cr3t-pw" not in text


# --- secrets --------------------------------------------------------------------------------

API_KEY = "sk-test-AbCdEf0123456789-never-show"
HEADER_SECRET = "hdr-secret-9f8e7d6c5b4a"
URL_PASSWORD = "url-pw-Zyxw9876"
QUERY_SECRET = "query-secret-5555aaaa"


@pytest.mark.parametrize("where", ["key and header", "url"])
def test_no_secret_is_stored_or_printed_even_when_the_server_echoes_it(tmp_path: Path, where: str) -> None:
    """The server echoes the Authorization header and the request line (with the query
    string) in a 401 body, in an in-stream error (where a cut to length would fall inside
    the secret) and in a malformed data line."""
    env = os.environ | {"RIDGELINE_TEST_KEY": API_KEY}
    script = [*ECHOES, "ok"]
    with FaultServer(script) as server:
        if where == "url":
            url = server.url.replace("http://", f"http://reader:{URL_PASSWORD}@") + f"?key={QUERY_SECRET}"
            extra: tuple[str, ...] = ()
        else:
            url = server.url
            extra = ("--api-key-env", "RIDGELINE_TEST_KEY", "-H", f"X-Api-Key: {HEADER_SECRET}")
        runs = [
            measure(url, tmp_path / f"{mode}.jsonl", "--requests", str(len(script)), *flags, *extra, env=env)
            for mode, flags in (("json", ("--json",)), ("text", ()))
        ]
        sent = server.received[0]
    secrets = (URL_PASSWORD, QUERY_SECRET) if where == "url" else (API_KEY, HEADER_SECRET)
    if where == "url":
        assert QUERY_SECRET in sent["path"] and sent["headers"]["authorization"].startswith("Basic ")
    else:
        assert sent["headers"]["authorization"] == f"Bearer {API_KEY}"
        assert sent["headers"]["x-api-key"] == HEADER_SECRET
    for proc in runs:
        clean(proc, 1, max_stderr_lines=10)
    strict(runs[0].stdout)
    recs = records(tmp_path / "json.jsonl")
    assert Counter(r["error_kind"] for r in recs if r["error"]) == Counter(ECHOES.values())
    assert all("***" in r["error"] for r in recs if r["error"])  # the echo is there, redacted
    written = "".join(p.read_text() for p in tmp_path.glob("*.jsonl"))
    for proc in runs:
        for secret in secrets:
            for text in (proc.stdout, proc.stderr, written):
                assert secret not in text
                assert secret[:12] not in text  # not even cut in half


@pytest.mark.parametrize(
    "header",
    [
        f"Authorization: Bearer {API_KEY}\x01",  # a control character
        f"Authorization: Bearer {API_KEY}é",  # not ASCII
        f"Authorization=Bearer {API_KEY}",  # no colon
        f"Bad Name: {API_KEY}",  # a space in the name
    ],
)
def test_a_header_that_cannot_be_sent_is_one_line_without_the_secret(tmp_path: Path, header: str) -> None:
    text = usage_error(measure("http://127.0.0.1:9/v1", tmp_path / "x.jsonl", "-H", header), "header")
    assert API_KEY not in text and API_KEY[:12] not in text


def test_an_api_key_that_cannot_be_sent_is_one_line_without_the_key(tmp_path: Path) -> None:
    env = os.environ | {"RIDGELINE_TEST_KEY": f"{API_KEY}\x7f"}
    proc = measure(
        "http://127.0.0.1:9/v1", tmp_path / "x.jsonl", "--api-key-env", "RIDGELINE_TEST_KEY", env=env
    )
    text = usage_error(proc, "$RIDGELINE_TEST_KEY")
    assert API_KEY[:12] not in text


def test_the_redactor_cuts_only_after_it_redacts() -> None:
    secret = "sk-ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    r = Redactor.of("http://u:p4ssw0rd@h/v1?token=t0k3n-value&x=1", {"Authorization": f"Bearer {secret}"})
    for cut in range(200, 260):
        text = "x" * (cut - 10) + " " + secret + " trailing"
        clipped = r.clip(text, 240)
        assert "sk-ABCDEF" not in clipped and len(clipped) <= 240
    assert r.redact("GET /v1?token=t0k3n-value&x=1") == "GET /v1?token=***&x=1"
    assert "p4ssw0rd" not in r.redact("http://u:p4ssw0rd@h/v1") and "u:" not in r.redact(
        "http://u:p4ssw0rd@h"
    )
    assert Redactor().redact("auth: Bearer abc.def-123") == "auth: Bearer ***"  # not told, still caught
    assert (
        Redactor().redact("see https://me:pw@example.com/x?api_key=zz")
        == "see https://***@example.com/x?api_key=***"
    )


# --- SIGTERM --------------------------------------------------------------------------------


def _start(url: str, out: Path, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "ridgeline", "measure", url, "--model", "m", "--prompt-tokens", "16"]
    cmd += ["--output-tokens", "10", "--requests", "8", "--warmup", "0", "--out", str(out), *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_records(out: Path, n: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if out.exists() and out.read_text().count("\n") >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"no {n} records appeared in {out}")


def test_sigterm_flushes_prints_the_summary_and_exits_143(tmp_path: Path) -> None:
    out = tmp_path / "term.jsonl"
    with FaultServer(["ok"], tokens=10, interval_s=0.03) as server:
        proc = _start(server.url, out, "--json")
        _wait_for_records(out, 2, proc)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 143, stderr
        assert "Traceback" not in stdout + stderr
        assert "SIGTERM" in stderr and "--resume" in stderr
        summary = strict(stdout)
        assert summary["signal"] == "SIGTERM" and summary["interrupted"] and summary["exit_code"] == 143
        before = records(out)  # every line whole and strict: nothing torn
        assert 2 <= len(before) < 8 and all(r["error"] is None for r in before)
        assert summary["overall"]["requests"] == len(before)
        resumed = measure(server.url, out, "--output-tokens", "10", "--requests", "8", "--resume", "--quiet")
    clean(resumed, 0)
    after = records(out)
    assert after[: len(before)] == before
    assert sorted(r["request_id"] for r in after) == list(range(8))


# --- records that no reader can use ---------------------------------------------------------


def _good(prompt: int = 128) -> dict:
    return make_record(prompt_tokens=prompt, output_tokens=9, concurrency=1, ttft_s=0.2, e2e_s=0.6)


BAD_LINES = {
    "binary bytes": b"\xff\xfe\x00garbage\x81\n",
    "deep nesting": b"[" * 100_000 + b"]" * 100_000 + b"\n",
    "NaN": b'{"prompt_tokens": 64, "output_tokens": 9, "ttft_s": NaN, "e2e_s": 0.5}\n',
    "Infinity": b'{"prompt_tokens": 64, "output_tokens": 9, "ttft_s": 0.1, "e2e_s": Infinity}\n',
    "a string time": b'{"prompt_tokens": 64, "output_tokens": 9, "ttft_s": "fast", "e2e_s": 0.5}\n',
    "a string count": b'{"prompt_tokens": "64", "output_tokens": 9, "ttft_s": 0.1, "e2e_s": 0.5}\n',
    "a negative time": b'{"prompt_tokens": 64, "output_tokens": 9, "ttft_s": -0.1, "e2e_s": 0.5}\n',
    "a boolean count": b'{"prompt_tokens": true, "output_tokens": 9, "ttft_s": 0.1, "e2e_s": 0.5}\n',
    "not an object": b"[1, 2, 3]\n",
}


@pytest.mark.parametrize("command", ["compare", "fit"])
@pytest.mark.parametrize("problem", list(BAD_LINES))
def test_a_record_no_reader_can_use_is_one_line_naming_its_line(
    tmp_path: Path, command: str, problem: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes((json.dumps(_good()) + "\n").encode() + BAD_LINES[problem] + b'{"a": 1}\n')
    proc = run_cli(command, str(path), "--model", "llama-3.1-8b", "--json")
    usage_error(proc, f"{path}:2")
    assert proc.stdout == ""  # nothing fitted, nothing compared, nothing written
    assert not (tmp_path / "bad.calibration.json").exists()


def test_a_torn_last_line_is_still_skipped(tmp_path: Path) -> None:
    path = tmp_path / "torn.jsonl"
    path.write_text(json.dumps(_good(128)) + "\n" + json.dumps(_good(512)) + "\n" + '{"prompt_tok')
    proc = run_cli("compare", str(path), "--model", "llama-3.1-8b", "--json")
    clean(proc, 0, max_stderr_lines=0)
    assert [r["prompt_tokens"] for r in strict(proc.stdout)["rows"]] == [128, 512]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("compare", "--tp", "0"), ("--tp",)),
        (("fit", "--tp", "-1"), ("--tp",)),
        (("fit", "--out", "{dir}"), ("folder",)),
        (("fit", "--out", "{dir}/cal.txt"), (".json or .toml",)),
        (("compare", "--plot", "{file}"), ("--plot",)),
    ],
)
def test_compare_and_fit_options_out_of_range_are_one_line(
    tmp_path: Path, args: tuple[str, ...], words: tuple[str, ...]
) -> None:
    path = tmp_path / "ok.jsonl"
    path.write_text(json.dumps(_good()) + "\n")
    command, *rest = (a.format(dir=tmp_path, file=path) for a in args)
    usage_error(run_cli(command, str(path), "--model", "llama-3.1-8b", *rest), *words)


@pytest.mark.parametrize("threads", ["0", "100000"])
def test_probe_threads_out_of_range_are_one_line(threads: str, tmp_path: Path) -> None:
    env = os.environ | {"RIDGELINE_CONFIG_DIR": str(tmp_path)}
    usage_error(run_cli("probe", "--quick", "--threads", threads, env=env), "--threads")


# --- calibration files ----------------------------------------------------------------------

CAL = Calibration(4.1e14, 2.2e12, 0.0015, 0.05, "llama-3.1-8b", 'h100 "sxm"\\', "ridgeline fit x.jsonl")


def test_fit_writes_the_format_its_extension_names(tmp_path: Path) -> None:
    """cal.toml is TOML that tomllib reads, cal.json is JSON; both load to the same values."""
    path = tmp_path / "sweep.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _synthetic_sweep()))
    loaded = []
    for name in ("cal.toml", "cal.json"):
        proc = run_cli("fit", str(path), "--model", "llama-3.1-8b", "--out", str(tmp_path / name), "--json")
        clean(proc, 0, max_stderr_lines=5)
        assert strict(proc.stdout)["calibration"] == str(tmp_path / name)
        loaded.append(load_calibration(tmp_path / name))
    text = (tmp_path / "cal.toml").read_text()
    assert (
        _files.loads_toml(text)["effective_bandwidth_bytes_per_s"]
        == loaded[0].effective_bandwidth_bytes_per_s
    )
    assert strict((tmp_path / "cal.json").read_text())["gpu"] == "h100-sxm"
    assert loaded[0] == loaded[1]
    est = run_cli("estimate", "--calibration", str(tmp_path / "cal.toml"), "--json")
    clean(est, 0, max_stderr_lines=0)


def test_a_calibration_round_trips_through_toml_with_awkward_text(tmp_path: Path) -> None:
    save_calibration(CAL, tmp_path / "c.toml")
    assert load_calibration(tmp_path / "c.toml") == CAL
    with pytest.raises(RidgelineError, match=r"\.json or \.toml"):
        save_calibration(CAL, tmp_path / "c.yaml")
    with pytest.raises(RidgelineError, match="finite"):
        save_calibration(Calibration(math.nan, 1e12), tmp_path / "nan.json")
    assert not (tmp_path / "nan.json").exists()


@pytest.mark.parametrize(
    ("name", "text", "word"),
    [
        (
            "cal.toml",
            "effective_flops_per_s = nan\neffective_bandwidth_bytes_per_s = 2e12\n",
            "effective_flops",
        ),
        ("cal.toml", "effective_flops_per_s = 4e14\neffective_bandwidth_bytes_per_s = inf\n", "bandwidth"),
        (
            "cal.toml",
            "effective_flops_per_s = 4e14\neffective_bandwidth_bytes_per_s = 2e12\n"
            "step_overhead_s = -0.001\n",
            "step_overhead_s",
        ),
        ("cal.json", '{"effective_flops_per_s": NaN, "effective_bandwidth_bytes_per_s": 2e12}', "NaN"),
        (
            "cal.json",
            '{"effective_flops_per_s": 4e14, "effective_bandwidth_bytes_per_s": -Infinity}',
            "Infinity",
        ),
        (
            "cal.json",
            '{"effective_flops_per_s": "4e14", "effective_bandwidth_bytes_per_s": 2e12}',
            "effective_flops",
        ),
        ("cal.json", '{"effective_flops_per_s": 4e14}', "effective_bandwidth_bytes_per_s"),
        ("cal.toml", '{"effective_flops_per_s": 4e14}', "TOML"),
        # finite, but an estimate made with them would not be: a step or a first token of 1e308 s
        (
            "cal.json",
            '{"effective_flops_per_s": 4e14, "effective_bandwidth_bytes_per_s": 2e12, '
            '"step_overhead_s": 1e308}',
            "step_overhead_s",
        ),
        (
            "cal.json",
            '{"effective_flops_per_s": 4e14, "effective_bandwidth_bytes_per_s": 2e12, "ttft_offset_s": 61}',
            "ttft_offset_s",
        ),
    ],
)
def test_a_calibration_holding_nan_infinity_or_a_negative_is_refused(
    tmp_path: Path, name: str, text: str, word: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(RidgelineError, match=word):
        load_calibration(path)
    usage_error(run_cli("estimate", "--calibration", str(path)), word)


# --- the library checks too -----------------------------------------------------------------


def test_a_nan_burstiness_is_refused_by_the_library_not_spun_on() -> None:
    """gammavariate with a NaN shape never returns; the sampler refuses it first."""
    for shape in (math.nan, math.inf, 0.0, -1.0):
        with pytest.raises(RidgelineError, match="--burstiness"):
            arrival_gaps_s(3, 1.0, shape, seed=0)
    with pytest.raises(RidgelineError, match="--rate"):
        arrival_gaps_s(3, math.nan, 1.0, seed=0)
    import ridgeline.measure.run as running

    with pytest.raises(RidgelineError, match="--burstiness"):
        running.Plan([Point(16, None, 2.0)], 4, 4, burstiness=math.nan)
    for field in ("timeout_s", "connect_timeout_s", "read_timeout_s"):
        with pytest.raises(RidgelineError, match="timeout"):
            Endpoint("http://127.0.0.1:9/v1", "m", **{field: math.nan})


# --- the llama.cpp harness ------------------------------------------------------------------


def test_the_llama_harness_names_the_signal_and_shows_the_end_of_the_log() -> None:
    """A server that dies of SIGILL fails the test with that name and its last 20 log lines."""
    import tempfile

    import llama_server

    script = "import os, signal\nfor i in range(30):\n    print('log line', i, flush=True)\n"
    script += "os.kill(os.getpid(), signal.SIGILL)\n"
    with tempfile.NamedTemporaryFile(suffix=".log") as log:
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=log, stderr=subprocess.STDOUT)
        proc.wait(timeout=30)
        with pytest.raises(pytest.fail.Exception) as failed:
            llama_server.Server("http://127.0.0.1:9/v1", proc, log).check()
    lines = str(failed.value).splitlines()
    assert "died of SIGILL" in lines[0]
    assert lines[1:] == [f"log line {i}" for i in range(10, 30)]
