"""The measurement face without a server: the SSE reading, prompts of exact length,
arrivals, records, and `compare` and `fit` held against the seed's own measurement."""

from __future__ import annotations

import asyncio
import json
import statistics
from pathlib import Path

import pytest

from conftest import run_cli, shipped_bands, shipped_engines, shipped_ttft_band
from ridgeline import metrics
from ridgeline.calibration import Calibration, load_calibration
from ridgeline.deployment import Deployment
from ridgeline.measure.client import Stream
from ridgeline.measure.compare import Group, predict
from ridgeline.measure.fit import fit
from ridgeline.measure.records import build, output_tokens_from
from ridgeline.measure.sse import MalformedStream, SseParser, interpret, usual
from ridgeline.measure.tokens import Tokenizer
from ridgeline.measure.workload import Point, arrival_gaps_s, exact_prompt, grid

# --- SSE ----------------------------------------------------------------------------------


def test_sse_events_survive_any_split_of_the_bytes() -> None:
    stream = (
        b': ping\r\n\r\ndata: {"a": 1}\r\n\r\ndata: line one\ndata: line two\n\nevent: x\ndata: [DONE]\n\n'
    )
    for cut in range(1, len(stream)):
        parser = SseParser()
        events = parser.feed(stream[:cut]) + parser.feed(stream[cut:]) + parser.close()
        assert events == ['{"a": 1}', "line one\nline two", "[DONE]"]


def test_only_generated_text_bears_a_token() -> None:
    role = interpret('{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}')[0]
    empty = interpret('{"choices": [{"index": 0, "text": "", "finish_reason": null}]}')[0]
    usage = interpret('{"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 9}}')[0]
    chat = interpret('{"choices": [{"index": 0, "delta": {"content": "Hi"}}]}')[0]
    text = interpret('{"choices": [{"index": 0, "text": " there", "finish_reason": "length"}]}')[0]
    assert not role.token_bearing and not empty.token_bearing and not usage.token_bearing
    assert (usage.completion_tokens, usage.prompt_tokens) == (9, 7)
    assert chat.token_bearing and chat.text == "Hi"
    assert text.token_bearing and text.finish_reason == "length"
    assert interpret("[DONE]")[0].done
    assert interpret('{"error": {"message": "overloaded"}}')[0].error == "overloaded"
    with pytest.raises(MalformedStream):
        interpret("{not json")


def test_the_quick_reading_of_the_usual_event_agrees_with_interpret() -> None:
    """`usual` reads the common event (one choice, no usage, no error) without building a
    chunk; for anything else it declines and `interpret` reads it."""
    events = [
        '{"choices": [{"index": 0, "text": " there", "finish_reason": null}]}',
        '{"choices": [{"index": 0, "text": "", "finish_reason": "length"}], "usage": null}',
        '{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}',
        '{"choices": [{"index": 0, "delta": {"content": "Hi", "reasoning_content": "so"}}]}',
        '{"choices": [{"index": 0, "delta": {"tool_calls": [{"id": "t"}]}}]}',
        '{"choices": [{"index": 0, "text": "\\u00e9t\\u00e9"}]}',
        '{"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": 9}}',
        '{"choices": [{"text": "a"}, {"text": "b"}]}',
        '{"error": {"message": "overloaded"}}',
        '{"choices": [{"index": 0, "text": "x"}]} trailing',
        "[DONE]",
        "[1, 2]",
    ]
    quick = 0
    for data in events:
        got = usual(data)
        if got is None:
            continue
        quick += 1
        (chunk,) = interpret(data)
        assert got == (chunk.text, chunk.token_bearing, chunk.finish_reason)
        assert chunk.completion_tokens is None and chunk.error is None and not chunk.done
    assert quick == 6  # the first six: one choice each, no usage, no error
    assert usual(events[5]) == ("été", True, None)  # JSON escapes decoded, as json.loads does


# --- records ------------------------------------------------------------------------------


def test_a_record_follows_the_shared_definitions() -> None:
    """TTFT = first token - send; E2E = last token - send; TPOT = (E2E - TTFT)/(N - 1)."""
    s = Stream(send_s=10.0, status=200, first_event_s=10.05, token_times_s=[10.2, 10.3, 10.5, 10.6])
    s.texts, s.done, s.completion_tokens = ["a", "b", "c", "d"], True, 5
    rec = build(s, Point(100, 2), 3, 100, "server", 5, run_start_s=9.0, arrival_s=0.9)
    assert set(metrics.RECORD_KEYS) <= set(rec)
    assert rec["ttft_s"] == pytest.approx(0.2) and rec["e2e_s"] == pytest.approx(0.6)
    assert rec["output_tokens"] == 5 and rec["tokens_source"] == "usage"
    assert rec["tpot_s"] == pytest.approx(0.4 / 4)
    assert rec["send_s"] == pytest.approx(1.0) and rec["queue_s"] == pytest.approx(0.1)
    assert rec["chunk_gaps_s"] == pytest.approx([0.1, 0.2, 0.1])
    assert rec["chunk_tokens"] is None  # 5 tokens in 4 chunks: per-chunk counts unknown
    assert rec["first_event_s"] == pytest.approx(0.05)


def test_output_tokens_come_from_usage_then_tokenizer_then_chunks() -> None:
    s = Stream(token_times_s=[1.0, 2.0, 3.0])
    assert output_tokens_from(s, None) == (3, "estimate")
    assert output_tokens_from(s, 4) == (4, "tokenizer")
    s.completion_tokens = 6
    assert output_tokens_from(s, 4) == (6, "usage")


# --- workload -----------------------------------------------------------------------------


def _uneven_tokenizer() -> Tokenizer:
    """A BOS, then one token per short word and two per word longer than five letters."""

    def encode(text: str) -> list[int]:
        return [0] + [1 for w in text.split() for _ in range(2 if len(w) > 5 else 1)]

    return Tokenizer("local", overhead=1, local=encode)


@pytest.mark.parametrize("target", [2, 3, 17, 128, 1000])
def test_prompts_hit_the_exact_token_count(target: int) -> None:
    tok = _uneven_tokenizer()
    texts = set()
    for seed in range(5):
        text, count = asyncio.run(exact_prompt(None, tok, target, seed))
        assert count == target == len(tok.local(text))
        texts.add(text)
    assert len(texts) == 5  # every request its own prompt: no prefix cache can answer it


def test_arrivals_have_the_rate_and_the_burstiness_asked_for() -> None:
    """Gamma gaps of shape k: mean 1/rate, squared coefficient of variation 1/k."""
    for k in (1.0, 0.25, 4.0):
        gaps = arrival_gaps_s(20_000, rate_per_s=5.0, burstiness=k, seed=1)
        mean = statistics.fmean(gaps)
        assert mean == pytest.approx(0.2, rel=0.05)
        assert statistics.pvariance(gaps) / mean**2 == pytest.approx(1 / k, rel=0.1)


def test_comma_lists_run_the_whole_grid() -> None:
    points = grid([512, 128], [4, 1], None)
    assert [(p.prompt_tokens, p.concurrency) for p in points] == [(128, 1), (128, 4), (512, 1), (512, 4)]
    assert [(p.rate_per_s, p.concurrency) for p in grid([64], [8], [2.0, 0.5])] == [(0.5, 8), (2.0, 8)]


# --- compare: the seed's measurement -------------------------------------------------------


def _record(prompt: int, output: int, ttft_s: float, tpot_s: float, concurrency: int = 1) -> dict:
    e2e = ttft_s + tpot_s * (output - 1)
    return metrics.make_record(
        prompt_tokens=prompt,
        output_tokens=output,
        concurrency=concurrency,
        ttft_s=ttft_s,
        e2e_s=e2e,
        error=None,
    )


def _write(path: Path, recs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def _seed_records() -> list[dict]:
    """The seed: ~0.3 s to the first word for 34 and 2,081 tokens, 0.74 s for 16,361;
    156 tokens/s of decode with the short prompt, 136 with the long one."""
    return [
        _record(34, 2, 0.30, 1 / 156),
        _record(2081, 2, 0.30, 1 / 156),
        _record(16361, 2, 0.74, 1 / 136),
    ]


def test_compare_reproduces_the_seed_analysis(tmp_path: Path) -> None:
    path = _write(tmp_path / "seed.jsonl", _seed_records())
    proc = run_cli("compare", str(path), "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--json")
    assert proc.returncode == 0, proc.stderr
    c = json.loads(proc.stdout)
    # "Decode ran at 156 tokens a second, about three quarters of an H100's ceiling"
    assert c["ceiling_fraction"] == pytest.approx(156 / (3.35e12 / 16.06e9), abs=0.01)
    assert c["ceiling_fraction"] == pytest.approx(0.75, abs=0.01)
    # "13 percent slower with the long prompt, ... 13 percent of extra bytes"
    assert c["kv_slowdown"] == pytest.approx(0.13, abs=0.005)
    assert c["kv_extra_bytes_fraction"] == pytest.approx(0.13, abs=0.005)
    # "about 0.3 seconds for a short or a 2,000-token prompt (mostly network)"
    assert c["ttft_offset_s"] == pytest.approx(0.3, abs=0.03)
    assert [r["prompt_tokens"] for r in c["rows"]] == [34, 2081, 16361]
    effective = c["rows"][0]["effective_bandwidth_bytes_per_s"]
    assert effective == pytest.approx(156 * (16.06e9 + 34 * 131072), rel=0.01)  # bytes per step x rate


def test_compare_table_and_plots(tmp_path: Path) -> None:
    path = _write(tmp_path / "seed.jsonl", _seed_records())
    plots = tmp_path / "plots"
    proc = run_cli("compare", str(path), "--model", "llama-3.1-8b", "--plot", str(plots))
    assert proc.returncode == 0, proc.stderr
    assert "of the roofline ceiling" in proc.stdout and "KV-cache slowdown" in proc.stdout
    for name in ("ttft_vs_prompt.png", "tpot_vs_context.png"):
        assert (plots / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_compare_says_how_many_medians_the_engines_band_holds(tmp_path: Path) -> None:
    """With --engine, each load point's prediction carries the profile's band (on TTFT at
    concurrency 1, the prefill and first-token bands weighted by the server's share of
    it; on TPOT the decode band): medians made just inside and just outside its ends, read
    from the shipped engines.toml, are counted as such."""
    (d_lo, d_hi) = shipped_bands("vllm")["decode"]
    first_token_s = shipped_engines()["vllm"]["overhead"]["first_token_s"]
    m = Deployment.build(engine="vllm")
    points = [  # (prompt, concurrency, TTFT's band end and factor, TPOT / predicted)
        (500, 1, (1, 1.02), d_lo * 1.02),  # TTFT out, TPOT in
        (1000, 1, (0, 1.02), d_hi * 1.02),  # TTFT in, TPOT out
        (1000, 4, None, d_hi * 0.98),  # TTFT queued (no band), TPOT in
    ]
    records = []
    for prompt, c, end, tpot_ratio in points:
        ttft, tpot = predict(m, Group(prompt, c, 1, 33, 0.0, 0.0, 0.0))
        ttft_ratio = 5.0 if end is None else shipped_ttft_band("vllm", ttft, first_token_s)[end[0]] * end[1]
        records += [_record(prompt, 33, ttft * ttft_ratio, tpot * tpot_ratio, c)] * 3
    path = _write(tmp_path / "bands.jsonl", records)
    proc = run_cli("compare", str(path), "--model", "llama-3.1-8b", "--engine", "vllm", "--json")
    assert proc.returncode == 0, proc.stderr
    c = json.loads(proc.stdout)
    assert c["inside_band"] == {"ttft_s": [1, 2], "tpot_s": [2, 3]}
    first = c["rows"][0]
    lo, hi = shipped_ttft_band("vllm", first["ttft_pred_s"], first_token_s)
    assert first["ttft_band_s"] == pytest.approx([first["ttft_pred_s"] * lo, first["ttft_pred_s"] * hi])
    assert first["tpot_band_s"] == pytest.approx([first["tpot_pred_s"] * d_lo, first["tpot_pred_s"] * d_hi])
    assert c["rows"][2]["ttft_band_s"] is None and c["rows"][2]["tpot_band_s"] is not None
    args = ("compare", str(path), "--model", "llama-3.1-8b")
    text = " ".join(run_cli(*args, "--engine", "vllm").stdout.split())
    assert "inside the engine's 80% band" in text and "TTFT 1 of 2, TPOT 2 of 3 load points" in text
    plain = run_cli(*args, "--json")
    assert json.loads(plain.stdout)["inside_band"] is None


def test_compare_needs_a_model_it_can_resolve(tmp_path: Path) -> None:
    path = _write(tmp_path / "r.jsonl", [_record(10, 3, 0.1, 0.01) | {"model": "served-name"}])
    proc = run_cli("compare", str(path))
    assert proc.returncode == 2 and "--model" in proc.stderr


# --- fit ------------------------------------------------------------------------------------

TRUTH = Calibration(4.1e14, 2.2e12, 0.0015, 0.05)


def _synthetic_sweep() -> list[dict]:
    """Records as a machine with known effective rates and overheads would produce them."""
    m = Deployment.build("llama-3.1-8b", "h100-sxm", calibration=TRUTH)
    recs = []
    for prompt in (128, 1024, 4096, 8192):
        for conc in (1, 8, 32):
            ttft, tpot = predict(m, Group(prompt, 1, 1, 65, 0.0, None, 0.0))[0], None
            tpot = predict(m, Group(prompt, conc, 1, 65, 0.0, None, 0.0))[1]
            recs.append(_record(prompt, 65, ttft, tpot, conc))
    return recs


def test_fit_recovers_known_rates_and_overheads() -> None:
    m = Deployment.build("llama-3.1-8b", "h100-sxm")
    f = fit(m, _synthetic_sweep())
    assert f.held == []
    assert f.effective_flops_per_s == pytest.approx(TRUTH.effective_flops_per_s, rel=1e-3)
    assert f.effective_bandwidth_bytes_per_s == pytest.approx(TRUTH.effective_bandwidth_bytes_per_s, rel=1e-3)
    assert f.step_overhead_s == pytest.approx(TRUTH.step_overhead_s, rel=1e-3)
    assert f.ttft_offset_s == pytest.approx(TRUTH.ttft_offset_s, rel=1e-3)
    assert f.error_after["tpot_max_abs"] == pytest.approx(0, abs=1e-6)
    assert f.error_before["tpot_mean_abs"] > 0.1  # the lesson preset is not this machine


def test_fit_writes_a_calibration_that_estimate_accepts(tmp_path: Path) -> None:
    path = _write(tmp_path / "sweep.jsonl", _synthetic_sweep())
    proc = run_cli("fit", str(path), "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    cal = load_calibration(data["calibration"])
    assert cal.effective_bandwidth_bytes_per_s == pytest.approx(2.2e12, rel=1e-3)
    assert data["uncertainty"]["effective_bandwidth_bytes_per_s"] < 1e-4 * 2.2e12  # noise-free data
    est = run_cli(
        "estimate", "--prompt", "1024", "--output", "64", "--calibration", data["calibration"], "--json"
    )
    assert est.returncode == 0, est.stderr
    # TPOT of the prompt-1024 point at concurrency 1, as the sweep recorded it
    measured = next(r["tpot_s"] for r in _synthetic_sweep() if r["prompt_tokens"] == 1024)
    assert json.loads(est.stdout)["tpot_s"] == pytest.approx(measured, rel=1e-6)


def test_fit_names_what_it_wrote_and_the_flag_that_reads_it(tmp_path: Path) -> None:
    """fit writes a calibration for --calibration, or with --engine a profile for --engine;
    its report says which, and the file loads where it says."""
    path = _write(tmp_path / "sweep.jsonl", _synthetic_sweep())
    plain = run_cli("fit", str(path), "--model", "llama-3.1-8b", "--gpu", "h100-sxm")
    assert plain.returncode == 0, plain.stderr
    assert "calibration written to" in plain.stdout and "--calibration" in plain.stdout
    out = tmp_path / "p.toml"
    args = ("fit", str(path), "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", "vllm")
    profiled = run_cli(*args, "--out", str(out))
    assert profiled.returncode == 0, profiled.stderr
    said = " ".join(profiled.stdout.split())  # the table wraps long lines
    assert "engine profile written to" in said and "--engine" in said and "calibration" not in said
    est = run_cli("estimate", "--gpu", "h100-sxm", "--engine", str(out), "--json")
    assert est.returncode == 0, est.stderr


def test_fit_with_one_point_holds_what_it_cannot_determine(tmp_path: Path) -> None:
    path = _write(tmp_path / "one.jsonl", [_record(2000, 101, 0.35, 0.0064)] * 3)
    out = tmp_path / "cal.json"
    proc = run_cli("fit", str(path), "--model", "llama-3.1-8b", "--out", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    assert any("held at the preset" in w for w in json.loads(proc.stdout)["warnings"])
    data = json.loads(proc.stdout)
    assert set(data["held"]) == {"step_overhead_s", "ttft_offset_s"}
    # two observations, two rates: TPOT = bytes / W exactly, TTFT = FLOPs / F exactly
    m = Deployment.build("llama-3.1-8b", "h100-sxm")
    assert data["effective_bandwidth_bytes_per_s"] == pytest.approx(
        (16.06e9 + 131072 * (2000 + 49.5)) / 0.0064, rel=0.01
    )
    assert data["error_after"]["tpot_mean_abs"] == pytest.approx(0, abs=1e-6)
    assert load_calibration(out).gpu == m.hw.name
