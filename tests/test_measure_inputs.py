"""`measure`, `compare` and `fit` on inputs that used to slip through: a tokenize endpoint
that trickles forever, a URL that cannot be split, a records file measure did not write,
list flags with an empty item, a negative seed, records with nothing to compare or with
times no token could take, and fits whose files `estimate` would refuse. Each is one line
on stderr and exit 2, before anything is sent or written."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import run_cli
from conftest import run_measure as measure
from fault_server import FaultServer
from test_measure import _synthetic_sweep
from test_measure_hardening import usage_error

TRICKLE_S = 0.1  # between the lines of a tokenize reply that never ends


def write_records(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


class TokenizeServer(FaultServer):
    """A FaultServer whose tokenize endpoints answer too: the first `honest` tokenize
    requests get a count (a token a word, and a BOS), every later one a 200 event-stream
    that sends a line every TRICKLE_S until the client goes away."""

    def __init__(self, script: list[str], honest: int = 0) -> None:
        super().__init__(script)
        self.honest = honest
        self.tokenize_requests = 0

    async def _other(self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter) -> None:
        self.tokenize_requests += 1
        if self.tokenize_requests <= self.honest:
            text = next(str(v) for k, v in json.loads(body or b"{}").items() if k != "model")
            await self._reply(writer, 200, {"count": len(text.split()) + 1})
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        for _ in range(10_000):  # some seventeen minutes: far past any --timeout here
            writer.write(b": still counting\n")
            await writer.drain()
            await asyncio.sleep(TRICKLE_S)


# --- 1. a tokenize endpoint that never finishes its reply -------------------------------------


def test_a_tokenize_reply_that_trickles_forever_ends_discovery_at_the_timeout(tmp_path: Path) -> None:
    """Discovery obeys --timeout as a whole: an endpoint that trickles is one that does not
    answer, so prompt lengths fall back to the estimate (one warning) and the run goes on."""
    out = tmp_path / "o.jsonl"
    with TokenizeServer(["ok"]) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "ridgeline", "measure", server.url, "-m", "x", "--warmup", "0",
             "-n", "1", "-p", "16", "-o", "4", "--timeout", "0.5", "--connect-timeout", "0.5",
             "--read-timeout", "0.5", "--out", str(out)],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "no tokenize endpoint that answers within --timeout (0.5 s)" in proc.stderr
    assert len(out.read_text().splitlines()) == 1


def test_a_tokenize_endpoint_that_stops_answering_stops_the_run_before_anything_is_sent(
    tmp_path: Path,
) -> None:
    """It answers discovery (two counts), then trickles: one line naming the endpoint, exit
    2, no completion request sent and no record written."""
    out = tmp_path / "o.jsonl"
    with TokenizeServer(["ok"], honest=2) as server:
        proc = measure(server.url, out, "--requests", "1", "--timeout", "1", "--quiet")
        sent = list(server.received)
    usage_error(proc, "tokenize", "nothing was sent", "--tokenizer")
    assert sent == []
    assert out.read_text() == ""


# --- 2. a URL too broken to split ---------------------------------------------------------------


def test_an_unclosed_ipv6_host_is_the_usual_url_error() -> None:
    usage_error(run_cli("measure", "-m", "x", "http://[::1"), "http://[::1", "http:// or https://")


# --- 3. resuming a records file measure did not write ---------------------------------------------


def test_resume_refuses_a_record_without_its_times_before_sending_anything(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    line = '{"request_id":5,"prompt_tokens":16,"target_prompt_tokens":16,"concurrency":1}\n'
    out.write_text(line)
    with FaultServer(["ok"]) as server:
        proc = measure(server.url, out, "--requests", "8", "--resume")
        sent = list(server.received)
    usage_error(proc, "--resume", "record 1", "'ttft_s'")
    assert sent == []
    assert out.read_text() == line  # untouched


def test_resume_refuses_a_record_with_a_time_no_token_can_take(tmp_path: Path) -> None:
    out = tmp_path / "o.jsonl"
    line = (
        '{"request_id":0,"prompt_tokens":16,"target_prompt_tokens":16,"concurrency":1,'
        '"output_tokens":21,"ttft_s":5e-324,"e2e_s":1e-323}\n'
    )
    out.write_text(line)
    with FaultServer(["ok"]) as server:
        proc = measure(server.url, out, "--requests", "2", "--resume")
        sent = list(server.received)
    usage_error(proc, "record 1", "ttft_s", "5e-324")
    assert sent == []
    assert out.read_text() == line


# --- 4. measure's flags as the other commands take them --------------------------------------------


def test_an_empty_item_in_a_list_flag_is_refused_as_search_refuses_it(tmp_path: Path) -> None:
    for flag, value in (("--prompt-tokens", "1,,2"), ("--concurrency", "1,"), ("--rate", ",2")):
        proc = run_cli(
            "measure", "http://127.0.0.1:9/v1", "-m", "x", flag, value, "--out", str(tmp_path / "o")
        )
        usage_error(proc, flag, "empty value")
    assert not (tmp_path / "o").exists()


def test_a_negative_seed_is_refused_as_simulate_refuses_it(tmp_path: Path) -> None:
    proc = run_cli(
        "measure", "http://127.0.0.1:9/v1", "-m", "x", "--seed", "-1", "--out", str(tmp_path / "o")
    )
    usage_error(proc, "--seed", "-1")
    assert not (tmp_path / "o").exists()


# --- 5. nothing to compare ----------------------------------------------------------------------------


def test_compare_with_no_successful_request_is_an_error_as_fit_is(tmp_path: Path) -> None:
    failed = write_records(tmp_path / "failed.jsonl", [{"prompt_tokens": 200, "error": "http 503"}])
    empty = write_records(tmp_path / "empty.jsonl", [])
    for path in (failed, empty):
        usage_error(run_cli("compare", str(path), "-m", "llama-3.1-8b"), "no successful requests", "compare")
        usage_error(run_cli("fit", str(path), "-m", "llama-3.1-8b"), "no successful requests", "fit")


def test_records_that_name_no_model_ask_for_one(tmp_path: Path) -> None:
    """Without --model, the model comes from the records: an empty file, or records that name
    none, ask for --model rather than trying to resolve a model called None."""
    empty = write_records(tmp_path / "empty.jsonl", [])
    unnamed = write_records(tmp_path / "unnamed.jsonl", [{"prompt_tokens": 200, "error": "http 503"}])
    for command in ("compare", "fit"):
        err = usage_error(run_cli(command, str(empty)), "names its model", "holds no records", "--model")
        assert "None" not in err
        err = usage_error(run_cli(command, str(unnamed)), "names its model", "--model")
        assert "holds no records" not in err


def test_a_records_path_that_is_no_regular_file_says_so(tmp_path: Path) -> None:
    """A device or a folder given as the records is named for what it is, not as missing."""
    for path, said in (("/dev/null", "not a regular file"), (str(tmp_path), "is a folder")):
        err = usage_error(run_cli("compare", path, "-m", "llama-3.1-8b"), said)
        assert "not found" not in err


# --- 6. times no token can take ------------------------------------------------------------------------


def test_compare_refuses_a_record_whose_times_are_subnormal(tmp_path: Path) -> None:
    """5e-324 s would divide into infinity: refused at read time, the record named."""
    rec = {"prompt_tokens": 200, "output_tokens": 21, "ttft_s": 5e-324, "tpot_s": 5e-324, "e2e_s": 1e-323}
    path = write_records(tmp_path / "r.jsonl", [rec])
    usage_error(run_cli("compare", "--json", "-m", "llama-3.1-8b", str(path)), "record 1", "ttft_s", "1e-06")
    usage_error(run_cli("compare", "-m", "llama-3.1-8b", str(path)), "record 1")
    usage_error(run_cli("fit", "-m", "llama-3.1-8b", str(path)), "record 1")


# --- 7. a fit that estimate would refuse ----------------------------------------------------------------


def fit_refused(
    tmp_path: Path, recs: list[dict[str, Any]], out: str, flags: tuple[str, ...], *words: str
) -> None:
    """`fit` of these records for llama-3.1-8b, with these flags: one line naming `words`,
    status 2, and nothing written at `--out`."""
    path = write_records(tmp_path / "r.jsonl", recs)
    target = tmp_path / out
    proc = run_cli("fit", str(path), "-m", "llama-3.1-8b", *flags, "--out", str(target))
    usage_error(proc, *words)
    assert not target.exists()


def test_fit_refuses_rates_a_calibration_cannot_hold_and_writes_nothing(tmp_path: Path) -> None:
    """A prompt of ten million tokens in a sweep of short ones fits a FLOP/s 450,000 times
    the H100's peak: not this machine, and `estimate --calibration` would refuse it."""
    recs = _synthetic_sweep()
    recs[0].update(prompt_tokens=10_000_000, target_prompt_tokens=10_000_000)
    fit_refused(
        tmp_path, recs, "cal.json", ("--gpu", "h100-sxm"), "effective FLOP/s", "[0.0001, 10]", "not one sweep"
    )


def test_fit_engine_refuses_a_profile_that_would_not_load_and_writes_nothing(tmp_path: Path) -> None:
    """First tokens 100 s late fit a TTFT offset over the 10 s a profile may hold."""
    recs = []
    for prompt in (128, 1024, 4096):
        for conc in (1, 8):
            ttft, tpot = 100 + prompt * 0.1, 20.0 + conc
            recs.append(
                {"prompt_tokens": prompt, "target_prompt_tokens": prompt, "output_tokens": 65,
                 "concurrency": conc, "ttft_s": ttft, "tpot_s": tpot, "e2e_s": ttft + 64 * tpot}
            )  # fmt: skip
    fit_refused(tmp_path, recs, "p.toml", ("--engine", "vllm"), "TTFT offset", "10 s", "engine profile")


def test_fit_engine_writes_a_profile_that_estimate_loads(tmp_path: Path) -> None:
    path = write_records(tmp_path / "r.jsonl", _synthetic_sweep())
    profile = tmp_path / "p.toml"
    proc = run_cli("fit", str(path), "-m", "llama-3.1-8b", "--engine", "vllm", "--out", str(profile))
    assert proc.returncode == 0, proc.stderr
    est = run_cli("estimate", "-m", "llama-3.1-8b", "--engine", str(profile), "--json")
    assert est.returncode == 0, est.stderr
