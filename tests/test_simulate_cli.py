"""`ridgeline simulate` and `ridgeline plan` as a user meets them: whole processes, exit codes,
one-line errors, the shared records format."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from conftest import cli_json, run_cli
from ridgeline import metrics


def test_default_simulate_prints_the_p50_p99_table() -> None:
    """A one-minute Poisson workload at 2 requests/s on the lesson's deployment."""
    proc = run_cli("simulate")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for text in ("llama-3.1-8b", "h100-sxm", "poisson at 2/s", "p50", "p99", "TTFT", "TPOT", "E2E"):
        assert text in out
    assert "overloaded" not in out


def test_simulate_json_keys_are_stable() -> None:
    data = cli_json(
        "simulate", "--requests", "300", "--rate", "4", "--slo-ttft-p99", "0.5", "--slo-tpot-p99", "0.05"
    )
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        assert set(data[key]) >= {"p50", "p90", "p99", "n", "p99_ci95"}
        assert data[key]["p50"] <= data[key]["p90"] <= data[key]["p99"]
        # 300 requests bound a p99 from below only: 0.99^300 = 4.9% > 2.5% (368 would)
        low, high = data[key]["p99_ci95"]
        assert low <= data[key]["p99"] and high is None
    for key in ("requests", "throughput_tokens_per_s", "goodput_requests_per_s", "preemptions", "overloaded"):
        assert key in data
    assert data["requests"] == 300 and data["preemptions"] == 0 and data["overloaded"] is False
    assert data["slo"]["met"] is True
    assert data["goodput_requests_per_s"] <= data["requests_per_s"]
    assert set(data["utilisation"]) >= {"mean_batch", "kv_utilisation_mean", "mfu", "mbu", "timeseries"}
    # the TPOT of 500 decode steps is the mean step: about the lesson's 6.1 ms at batch 1, more in a batch
    assert 0.006 < data["tpot_s"]["p50"] < 0.02


# `simulate --json`'s keys as the README documents them, in order: the typed summary's
# to_dict() is the JSON, so a renamed or reordered field shows here.
DOCUMENTED_KEYS = [
    *("ttft_s", "tpot_s", "e2e_s", "queue_s", "requests", "completed", "errors", "duration_s"),
    *("throughput_tokens_per_s", "requests_per_s", "goodput_requests_per_s", "slo_attainment"),
    *("preemptions", "itl_s", "input_tokens_per_s", "offered_rate_per_s", "overloaded", "queue_growth"),
    *("slo", "uncertainty", "utilisation", "deployment", "engine", "workload", "warnings"),
]


def test_the_typed_summary_is_the_documented_json() -> None:
    from ridgeline.simulate import Lengths, Workload, simulate

    slo = metrics.Slo(ttft_s=0.5, tpot_s=0.05)
    w = Workload(prompt=Lengths("fixed", 500), output=Lengths("fixed", 50), rate_per_s=2.0, requests=40)
    s = simulate(workload=w, slo=slo).summary
    assert s is not None and s.slo is not None
    data = s.to_dict()
    assert list(data) == DOCUMENTED_KEYS
    assert list(data["ttft_s"]) == ["n", "mean", "p50", "p90", "p99", "p99_ci95", "warnings"]
    assert list(data["itl_s"]) == list(data["ttft_s"]) and data["itl_s"]["n"] == 40 * 50  # decode steps
    assert list(data["slo"]) == ["ttft_s", "tpot_s", "e2e_s", "p99_met", "met"]
    assert set(data["utilisation"]["timeseries"]) == {
        *("t_s", "busy", "batch", "waiting", "kv_utilisation", "mfu", "mbu"),
    }
    # the attributes and the JSON are one value
    assert data["ttft_s"]["p99"] == s.ttft_s.p99 and data["utilisation"]["mfu"] == s.utilisation.mfu
    assert data["slo"]["met"] == s.slo.met and s.met == (s.slo.met and not s.overloaded)
    assert data["warnings"] == list(s.warnings)


def test_records_file_replays_as_a_trace(tmp_path: Path) -> None:
    """The JSONL records a run writes are the shared schema, and replaying them (arrival_s,
    prompt_tokens, output_tokens) as a trace gives the same run."""
    records = tmp_path / "run.jsonl"
    first = cli_json(
        "simulate",
        "--requests",
        "200",
        "--rate",
        "5",
        "--prompt-dist",
        "lognormal",
        "--output-tokens",
        "200",
        "--output-dist",
        "uniform",
        "--seed",
        "3",
        "--out",
        str(records),
    )
    rows = metrics.read_records(records)
    assert len(rows) == 200
    assert all(tuple(r)[: len(metrics.RECORD_KEYS)] == metrics.RECORD_KEYS for r in rows)
    assert {r["tokens_source"] for r in rows} == {"simulated"}
    again = cli_json("simulate", "--trace", str(records))
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        assert again[key]["p99"] == pytest.approx(first[key]["p99"], rel=1e-9)
    csv_file = tmp_path / "run.csv"
    assert run_cli("simulate", "--requests", "20", "--out", str(csv_file)).returncode == 0
    assert csv_file.read_text().splitlines()[0].startswith("prompt_tokens,output_tokens,")


def test_csv_trace_with_timestamps(tmp_path: Path) -> None:
    trace = tmp_path / "trace.csv"
    trace.write_text("timestamp,prompt_tokens,output_tokens\n1000.0,500,101\n1000.5,800,51\n1003.0,200,1\n")
    data = cli_json("simulate", "--trace", str(trace))
    assert data["requests"] == 3 and data["completed"] == 3
    assert data["workload"]["arrival"] == "trace"
    # the trace's own lengths, not the flags' defaults: (500 + 800 + 200) / 3 prompt tokens,
    # and (100 + 50 + 0) / 3 decode steps after each first token
    assert data["workload"]["prompt"] == {"kind": "trace", "mean": 500, "spread": 0.0, "values": 0}
    assert data["workload"]["output"]["mean"] == 50 and data["workload"]["rate_per_s"] is None


def test_overload_is_reported() -> None:
    proc = run_cli(
        "simulate", "--rate", "60", "--requests", "1500", "--prompt-tokens", "1000", "--output-tokens", "250"
    )
    assert proc.returncode == 0, proc.stderr
    assert "overloaded" in proc.stdout


def test_closed_loop_and_replicas() -> None:
    closed = cli_json("simulate", "--concurrency", "16", "--requests", "160", "--output-tokens", "100")
    assert closed["completed"] == 160 and closed["workload"]["arrival"] == "closed"
    fleet = cli_json(
        "simulate", "--replicas", "2", "--router", "least-outstanding", "--rate", "10", "--requests", "300"
    )
    assert fleet["deployment"]["replicas"] == 2 and fleet["completed"] == 300


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("simulate", "--rate", "-1"), "--rate"),
        (("simulate", "--rate", "0"), "--rate"),
        (("simulate", "--concurrency", "2", "--rate", "1"), "not both"),
        (("simulate", "--prompt-dist", "zipf"), "--prompt-dist"),
        (("simulate", "--router", "random"), "--router"),
        (("simulate", "--max-num-batched-tokens", "10"), "--max-num-batched-tokens"),
        (("simulate", "--model", "llama-3.1-70b"), "no room for a KV cache"),
        (("simulate", "--model", "deepseek-v3", "--tp", "2"), "in its stored mix (file) leaves no room"),
        (("plan", "--rate", "-3", "--slo-ttft-p99", "1"), "--rate"),
        (("plan", "--slo-ttft-p99", "0.01", "--seeds", "2"), "no request rate meets"),
        (("plan", "--compare", "h100-sxm:two"), "--compare"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], fragment: str) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert proc.stderr.startswith("ridgeline: error:") and fragment in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_empty_trace_is_an_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    proc = run_cli("simulate", "--trace", str(empty))
    assert proc.returncode == 2 and "holds no requests" in proc.stderr


def test_plan_json_sizes_the_fleet_and_prices_a_million_tokens() -> None:
    args = (
        "plan",
        "--rate",
        "20",
        "--slo-ttft-p99",
        "1",
        "--slo-tpot-p99",
        "0.05",
        "--requests",
        "800",
        "--seeds",
        "2",
    )
    data = cli_json(*args)
    (p,) = data["plans"]
    rate = p["max_rate_per_replica"]
    assert p["replicas"] == math.ceil(20 / rate) and p["gpus"] == p["replicas"]
    assert p["price_per_gpu_hour_usd"] == 2.99
    per_hour = 20 * 3600 * (p["at_max"]["prompt_tokens_mean"] + p["at_max"]["output_tokens_mean"])
    assert p["usd_per_million_tokens"] == pytest.approx(p["gpus"] * 2.99 / per_hour * 1e6)
    cheaper = cli_json(*args, "--price", "1.495")["plans"][0]
    assert cheaper["usd_per_million_tokens"] == pytest.approx(p["usd_per_million_tokens"] / 2)


def test_plan_warns_when_a_replicas_highest_rate_is_past_its_api_servers() -> None:
    """vLLM's API server works request_s + 100 prompt_token_s + 101 stream_token_s on a request
    of 100 tokens in and 100 out: past 1 / that a second, the plan's replica rate is the
    engine's, not what its server passes on, and the plan says so (deciding nothing). A 1B
    model on an H100 takes requests faster than any Python server hands them on."""
    from ridgeline.engines import get_engine

    p = get_engine("vllm")
    capacity = 1 / (p.request_s + 100 * p.prompt_token_s + 101 * p.stream_token_s)
    args = ("plan", "--model", "llama-3.2-1b", "--prompt-tokens", "100", "--output-tokens", "100",
            "--slo-ttft-p99", "2", "--slo-tpot-p99", "0.2", "--requests", "2000", "--seeds", "2")  # fmt: skip
    (served,) = cli_json(*args, "--engine", "vllm")["plans"]
    assert served["max_rate_per_replica"] > capacity  # the engine alone takes more than its server
    (warning,) = served["warnings"]
    assert (
        warning.startswith("server-bound: vLLM's API server")
        and f"at most {capacity:.3g} requests/s" in warning
    )
    (plain,) = cli_json(*args)["plans"]
    assert plain["warnings"] == []


def test_plan_compare_ranks_deployments() -> None:
    proc = run_cli(
        "plan",
        "--rate",
        "20",
        "--slo-tpot-p99",
        "0.05",
        "--compare",
        "h100-sxm:1:bf16,a100-80gb-sxm:2:bf16",
        "--requests",
        "500",
        "--seeds",
        "2",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    plans = json.loads(proc.stdout)["plans"]
    assert [p["deployment"]["gpu"] for p in plans] == ["h100-sxm", "a100-80gb-sxm"]  # cheapest first
    costs = [p["usd_per_million_tokens"] for p in plans]
    assert costs == sorted(costs)
    assert plans[1]["deployment"]["tp"] == 2 and plans[1]["gpus"] == 2 * plans[1]["replicas"]
