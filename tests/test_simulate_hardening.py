"""Whatever a user types or feeds to `simulate` and `plan`, the answer is strict JSON (status
0) or one line naming the bad value (status 2): never a traceback, a NaN, or a run that does
not end. The library refuses the same values where they are built, since the web and Python
callers reach it without the command line."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ridgeline import metrics
from ridgeline.checks import MAX_TOKENS
from ridgeline.deployment import Deployment
from ridgeline.errors import RidgelineError
from ridgeline.simulate import EngineConfig, Lengths, Trace, Workload, capacity, simulate
from ridgeline.simulate import engine as engine_module
from ridgeline.simulate import workload as workload_module
from ridgeline.simulate.workload import open_arrivals, parse_lengths, read_trace

TIMEOUT_S = 60  # a run that has not ended by then counts as a hang


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ridgeline", *args], capture_output=True, text=True, timeout=TIMEOUT_S
    )


def no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def check_outcome(proc: subprocess.CompletedProcess[str]) -> None:
    """Status 0 with strict JSON, or status 2 with one line on stderr; never a traceback."""
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) <= 1, proc.stderr
    assert proc.returncode in (0, 2), proc.stderr
    if proc.returncode == 0:
        json.loads(proc.stdout, parse_constant=no_constants)
    else:
        assert proc.stderr.startswith("ridgeline: error:")


def refused(*args: str) -> str:
    proc = run(*args)
    check_outcome(proc)
    assert proc.returncode == 2, proc.stdout[:500]
    return proc.stderr


def bounded(args: tuple[str, ...]) -> tuple[str, ...]:
    """A short run unless the case bounds its own."""
    own = {"--requests", "--duration", "--trace"} & set(args)
    return args if own else (*args, "--requests", "20")


# --- simulate: every numeric option, at and beyond its range --------------------------------


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("--seed", "-1"), "--seed"),
        (("--seed", str(2**63)), "--seed"),
        (("--duration", "inf"), "--duration"),
        (("--duration", "1e11"), "--duration"),
        (("--concurrency", "2", "--think-time", "nan"), "--think-time"),
        (("--concurrency", "2", "--think-time", "-1"), "--think-time"),
        (("--arrival", "gamma", "--burstiness", "inf"), "--burstiness"),
        (("--arrival", "gamma", "--burstiness", "0"), "--burstiness"),
        (("--arrival", "gamma", "--burstiness", "1e-9"), "--burstiness"),
        (("--prompt-tokens", "9" * 26), "--prompt-tokens"),
        (("--prompt-tokens", "200000"), "context"),
        (("--output-tokens", "0"), "--output-tokens"),
        (("--prompt-tokens", "100000", "--output-tokens", "100000"), "context"),
        (("--prompt-dist", "uniform:abc"), "--prompt-dist"),
        (("--prompt-dist", "uniform:2"), "--prompt-dist"),
        (("--prompt-dist", "lognormal:inf"), "--prompt-dist"),
        (("--prompt-dist", "lognormal:nan"), "--prompt-dist"),
        (("--output-dist", "lognormal:1e300"), "--output-dist"),
        (("--output-dist", "file:/dev/zero"), "MiB"),
        (("--gpu-memory-utilization", "0"), "--gpu-memory-utilization"),
        (("--gpu-memory-utilization", "1.5"), "--gpu-memory-utilization"),
        (("--prefix-hit-rate", "1"), "--prefix-hit-rate"),
        (("--prefix-hit-rate", "-0.1"), "--prefix-hit-rate"),
        (("--shared-prefix", "-1"), "--shared-prefix"),
        (("--shared-prefix", "2000"), "--shared-prefix"),
        (("--requests", "0"), "--requests"),
        (("--requests", str(10**12)), "10,000,000"),
        (("--rate", "1e7"), "--rate"),
        (("--rate", "1000000", "--duration", "100000"), "10,000,000"),
        (("--rate", "1e-9", "--requests", "100"), "--rate"),
        (("--concurrency", "0"), "--concurrency"),
        (("--concurrency", "2", "--think-time", "1e9", "--requests", "40"), "closed loop"),  # 317 years
        (("--concurrency", str(10**12)), "--concurrency"),
        (("--replicas", "0"), "--replicas"),
        (("--replicas", "100000000"), "--replicas"),
        (
            ("--replicas", "1000", "--router", "least-outstanding", "--rate", "1e5", "--requests", "1000000"),
            "round-robin",
        ),
        (("--max-num-seqs", "0"), "--max-num-seqs"),
        (("--max-num-batched-tokens", "0"), "--max-num-batched-tokens"),
        (("--block-tokens", "0"), "--block-tokens"),
        (("--block-tokens", "100000"), "--block-tokens"),
        (("--slo-ttft-p99", "0"), "--slo-ttft-p99"),
        (("--slo-tpot-p99", "-1"), "--slo-tpot-p99"),
        (("--slo-e2e-p99", "inf"), "--slo-e2e-p99"),
        (("--out", "/no-such-folder-here/records.jsonl"), "--out"),
    ],
)
def test_simulate_refuses_values_out_of_range_in_one_line(args: tuple[str, ...], fragment: str) -> None:
    assert fragment in refused("simulate", *bounded(args), "--json")


@pytest.mark.parametrize(
    "args",
    [
        ("--rate", "1000000", "--requests", "1000"),  # the highest rate: all arrive at once
        ("--rate", "1e-5", "--requests", "3"),  # a request every day or so
        ("--arrival", "gamma", "--burstiness", "0.01", "--duration", "50"),  # the burstiest
        ("--arrival", "gamma", "--burstiness", "100", "--duration", "50"),
        ("--prompt-dist", "lognormal:3", "--output-dist", "lognormal:3", "--requests", "300"),
        ("--concurrency", "3", "--duration", "1", "--prompt-tokens", "1", "--output-tokens", "1"),
        ("--concurrency", "2", "--think-time", "1e10", "--duration", "60"),  # one request each
        ("--prefix-hit-rate", "0.99", "--shared-prefix", "0"),
        ("--shared-prefix", "1999", "--requests", "20"),
        ("--slo-ttft-p99", "1e-300", "--slo-e2e-p99", "1e300"),
    ],
)
def test_simulate_at_the_edges_of_its_ranges_answers_in_strict_json(args: tuple[str, ...]) -> None:
    proc = run("simulate", *bounded(args), "--json")
    check_outcome(proc)
    assert proc.returncode == 0, proc.stderr


def test_records_written_with_out_are_strict_jsonl(tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    proc = run("simulate", "--requests", "30", "--prompt-dist", "lognormal", "--out", str(out), "--json")
    check_outcome(proc)
    lines = out.read_text().splitlines()
    assert len(lines) == 30
    for line in lines:
        json.loads(line, parse_constant=no_constants)


# --- traces: each bad row named by file and line -------------------------------------------

ROW = '{"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 5}\n'


@pytest.mark.parametrize(
    "name, content, line, fragment",
    [
        ("inf.jsonl", ROW + '{"arrival_s": Infinity, "prompt_tokens": 10, "output_tokens": 5}\n', 2, "JSON"),
        ("big.jsonl", ROW + '{"arrival_s": 1e999, "prompt_tokens": 10, "output_tokens": 5}\n', 2, "finite"),
        ("nan.jsonl", '{"arrival_s": 0, "prompt_tokens": NaN, "output_tokens": 5}\n', 1, "JSON"),
        ("deep.jsonl", "[" * 100_000 + "]" * 100_000 + "\n", 1, "nest"),
        ("negative.jsonl", '{"arrival_s": -1, "prompt_tokens": 10, "output_tokens": 5}\n', 1, ">= 0"),
        ("string.jsonl", '{"arrival_s": 0, "prompt_tokens": "10", "output_tokens": 5}\n', 1, "string"),
        ("bool.jsonl", '{"arrival_s": 0, "prompt_tokens": 10, "output_tokens": true}\n', 1, "output_tokens"),
        ("half.jsonl", '{"arrival_s": 0, "prompt_tokens": 10.5, "output_tokens": 5}\n', 1, "whole"),
        (
            "huge.jsonl",
            '{"arrival_s": 0, "prompt_tokens": 1' + "0" * 400 + ', "output_tokens": 5}\n',
            1,
            "whole",
        ),
        ("list.jsonl", "[1, 2, 3]\n", 1, "object"),
        ("mixed.jsonl", '{"timestamp": 9, "prompt_tokens": 1, "output_tokens": 2}\n' + ROW, 2, "timestamp"),
        ("span.jsonl", ROW + '{"arrival_s": 1e300, "prompt_tokens": 10, "output_tokens": 5}\n', 2, "seconds"),
        ("inf.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,5\ninf,10,5\n", 3, "finite"),
        ("nan.csv", "arrival_s,prompt_tokens,output_tokens\n0,nan,5\n", 2, "prompt_tokens"),
        ("short.csv", "arrival_s,prompt_tokens,output_tokens\n0,10\n", 2, "output_tokens"),
        ("text.csv", "arrival_s,prompt_tokens,output_tokens\nsoon,10,5\n", 2, "arrival_s"),
    ],
)
def test_a_bad_trace_row_is_named_by_file_and_line(
    tmp_path: Path, name: str, content: str, line: int, fragment: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    message = refused("simulate", "--trace", str(path), "--json")
    assert f"{path}:{line}" in message and fragment in message


@pytest.mark.parametrize("name", ["binary.jsonl", "binary.csv"])
def test_a_binary_trace_is_refused_at_its_first_line(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b"\x00\xff\xfe\x80 not text \xc3\x28\n" * 50)
    message = refused("simulate", "--trace", str(path), "--json")
    assert f"{path}:1" in message and "UTF-8" in message


def test_a_trace_longer_than_the_context_is_refused_not_clamped(tmp_path: Path) -> None:
    """llama-3.1-8b holds 131,072 tokens: 131,000 prompt tokens and 500 more do not fit."""
    path = tmp_path / "long.jsonl"
    path.write_text('{"arrival_s": 0, "prompt_tokens": 131000, "output_tokens": 500}\n')
    assert "context" in refused("simulate", "--trace", str(path), "--json")


def test_rows_out_of_order_replay_in_arrival_order(tmp_path: Path) -> None:
    """A records file is written as requests finish, so its rows need not be in arrival order."""
    path = tmp_path / "finished.jsonl"
    path.write_text(
        '{"arrival_s": 5, "prompt_tokens": 20, "output_tokens": 3}\n'
        '{"arrival_s": 1, "prompt_tokens": 10, "output_tokens": 2}\n'
    )
    trace = read_trace(str(path))
    assert trace.arrival_s == (1.0, 5.0) and trace.prompt == (10, 20) and trace.output == (1, 2)
    proc = run("simulate", "--trace", str(path), "--json")
    check_outcome(proc)
    assert json.loads(proc.stdout)["requests"] == 2


def test_a_csv_trace_saved_with_a_byte_order_mark_reads(tmp_path: Path) -> None:
    path = tmp_path / "excel.csv"
    path.write_bytes(b"\xef\xbb\xbftimestamp,prompt_tokens,output_tokens\n1000.0,500,101\n1000.5,800,51\n")
    assert read_trace(str(path)).arrival_s == (0.0, 0.5)


def test_records_with_a_nan_do_not_replay(tmp_path: Path) -> None:
    """A records file is a trace too; a NaN anywhere in a row is not JSON."""
    row = metrics.make_record(prompt_tokens=10, output_tokens=4, arrival_s=0.0, ttft_s=0.1, e2e_s=0.3)
    line = json.dumps(row) + "\n"
    path = tmp_path / "records.jsonl"
    path.write_text(line + line.replace('"e2e_s": 0.3', '"e2e_s": NaN'))
    message = refused("simulate", "--trace", str(path), "--json")
    assert f"{path}:2" in message


# --- length files ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content, line",
    [("100\nabc\n", 2), ("100\n200\ninf\n", 3), ("nan\n", 1), ("2.5\n", 1), ("0\n", 1), ("1e30\n", 1)],
)
def test_a_bad_length_is_named_by_file_and_line(tmp_path: Path, content: str, line: int) -> None:
    path = tmp_path / "lengths.txt"
    path.write_text(content)
    assert f"{path}:{line}" in refused("simulate", "--prompt-dist", f"file:{path}", "-n", "5", "--json")


def test_a_length_file_that_is_not_text_is_refused(tmp_path: Path) -> None:
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00\x01" * 1000)
    assert "UTF-8" in refused("simulate", "--prompt-dist", f"file:{binary}", "-n", "5", "--json")
    endless = tmp_path / "endless.txt"
    endless.write_text("1" * (2 << 20))  # a 2 MiB line
    assert "MiB" in refused("simulate", "--prompt-dist", f"file:{endless}", "-n", "5", "--json")
    assert "folder" in refused("simulate", "--prompt-dist", f"file:{tmp_path}", "-n", "5", "--json")


def test_a_length_files_mean_is_its_own(tmp_path: Path) -> None:
    """`--prompt-tokens` is the mean of a drawn distribution; a file's lengths have their own."""
    path = tmp_path / "lengths.txt"
    path.write_text("10\n20  # a comment\n\n30\n")
    lengths = parse_lengths(f"file:{path}", 2000, "--prompt-dist")
    assert lengths.values == (10, 20, 30) and lengths.mean == 20 and lengths.upper() == 30


# --- plan --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("--max-num-seqs", "0"), "--max-num-seqs"),
        (("--seeds", "1"), "--seeds"),
        (("--seeds", "1000"), "--seeds"),
        (("--requests", "50"), "--requests"),
        (("--requests", str(10**7)), "--requests"),
        (("--seeds", "100", "--requests", "1000000"), "8,000,000"),
        (("--rate", "0"), "--rate"),
        (("--rate", "1e300"), "--rate"),
        (("--price", "-1"), "--price"),
        (("--price", "1e300"), "--price"),
        (("--compare", "h100-sxm:²"), "--compare"),
        (("--compare", "h100-sxm:0"), "--compare"),
        (("--compare", ",".join(["h100-sxm"] * 17)), "--compare"),
        (("--seed", "-1"), "--seed"),
        (("--seed", str(2**63 - 1)), "--seed"),
        (("--prompt-tokens", "200000"), "context"),
        (("--gpu-memory-utilization", "2"), "--gpu-memory-utilization"),
        (("--arrival", "gamma", "--burstiness", "1000"), "--burstiness"),
        (("--slo-ttft-p99", "0"), "--slo-ttft-p99"),
    ],
)
def test_plan_refuses_values_out_of_range_in_one_line(args: tuple[str, ...], fragment: str) -> None:
    slo = () if any(a.startswith("--slo") for a in args) else ("--slo-ttft-p99", "1")
    assert fragment in refused("plan", *args, *slo, "--json")


def test_plan_refuses_a_bad_trace_by_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n1,inf,5\n")
    assert f"{path}:3" in refused("plan", "--trace", str(path), "--slo-ttft-p99", "1", "--json")


# --- the library refuses what would spin, overflow or be clamped ------------------------------


@pytest.mark.parametrize(
    "fields, fragment",
    [
        ({"concurrency": 2, "think_s": math.nan}, "--think-time"),  # each follow-up at NaN: forever
        ({"arrival": "gamma", "burstiness": math.inf}, "--burstiness"),  # numpy's gamma spins
        ({"arrival": "gamma", "burstiness": 0.0}, "--burstiness"),
        ({"duration_s": math.inf}, "--duration"),
        ({"duration_s": math.nan}, "--duration"),
        ({"rate_per_s": math.nan}, "--rate"),
        ({"rate_per_s": math.inf}, "--rate"),
        ({"seed": -1}, "--seed"),
        ({"seed": 1.5}, "--seed"),
        ({"requests": 10**12, "duration_s": None}, "--requests"),
        ({"rate_per_s": 1e6, "duration_s": 1e6}, "10,000,000"),
        ({"prefix_hit_rate": math.nan}, "--prefix-hit-rate"),
        ({"shared_prefix_tokens": -5}, "--shared-prefix"),
        ({"arrival": "zipf"}, "--arrival"),
    ],
)
def test_a_workload_refuses_what_would_spin_or_overflow(fields: dict[str, Any], fragment: str) -> None:
    with pytest.raises(RidgelineError, match=fragment):
        Workload(**fields)


def test_a_trace_with_a_closed_loop_is_refused() -> None:
    """Clients that follow a trace's requests with their own, with no --requests or
    --duration to stop them, would send forever."""
    trace = Trace((0.0,), (10,), (3,))
    with pytest.raises(RidgelineError, match="concurrency"):
        Workload(trace=trace, concurrency=2, duration_s=None)


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("lognormal", 100, math.inf), "sigma"),
        (("uniform", 100, math.nan), "width"),
        (("fixed", 0), "mean"),
        (("fixed", MAX_TOKENS + 1), "mean"),
        (("file", 10, 0.0, ()), "file"),
        (("file", 10, 0.0, (5, 0)), "file"),
        (("zipf", 10), "unknown"),
    ],
)
def test_lengths_refuse_bad_parameters(args: tuple[Any, ...], fragment: str) -> None:
    with pytest.raises(RidgelineError, match=fragment):
        Lengths(*args)


@pytest.mark.parametrize(
    "arrival, prompt, output",
    [
        ((0.0, math.nan), (1, 1), (1, 1)),
        ((0.0, math.inf), (1, 1), (1, 1)),
        ((-1.0,), (1,), (1,)),
        ((5.0, 1.0), (1, 1), (1, 1)),  # out of order
        ((0.0,), (0,), (1,)),
        ((0.0,), (1.5,), (1,)),
        ((0.0,), (1,), (-1,)),
        ((), (), ()),
        ((0.0,), (1, 2), (1,)),
    ],
)
def test_a_trace_refuses_bad_columns(
    arrival: tuple[Any, ...], prompt: tuple[Any, ...], output: tuple[Any, ...]
) -> None:
    with pytest.raises(RidgelineError, match="trace"):
        Trace(arrival, prompt, output)


@pytest.mark.parametrize(
    "fields, fragment",
    [
        ({"max_num_seqs": 0}, "--max-num-seqs"),
        ({"block_tokens": 10**6}, "--block-tokens"),
        ({"gpu_memory_utilization": math.nan}, "--gpu-memory-utilization"),
        ({"max_num_batched_tokens": 64}, "--max-num-batched-tokens"),
    ],
)
def test_an_engine_config_refuses_bad_knobs(fields: dict[str, Any], fragment: str) -> None:
    with pytest.raises(RidgelineError, match=fragment):
        EngineConfig(**fields)


def test_simulate_refuses_bad_fleets_slos_and_contexts() -> None:
    m = Deployment.build()
    short = Workload(requests=2, duration_s=None)
    with pytest.raises(RidgelineError, match="--replicas"):
        simulate(m, workload=short, replicas=0)
    with pytest.raises(RidgelineError, match="--slo-ttft-p99"):
        simulate(m, workload=short, slo=metrics.Slo(ttft_s=math.nan))
    too_long = Workload(prompt=Lengths("fixed", 200_000), requests=1, duration_s=None)
    with pytest.raises(RidgelineError, match="context"):
        simulate(m, workload=too_long)


def test_capacity_refuses_what_would_never_finish() -> None:
    slo = metrics.Slo(ttft_s=1.0)
    with pytest.raises(RidgelineError, match="--seeds"):
        capacity(Deployment.build(), Workload(), slo, seeds=1)
    with pytest.raises(RidgelineError, match="--rate"):
        capacity(Deployment.build(), Workload(), slo, target_rate_per_s=math.nan)
    with pytest.raises(RidgelineError, match="8,000,000"):
        capacity(Deployment.build(), Workload(), slo, requests=1_000_000, seeds=10)
    with pytest.raises(RidgelineError, match="--price"):
        capacity(Deployment.build(), Workload(), slo, requests=200, seeds=2, price_per_gpu_hour=math.inf)


def test_far_lognormal_tails_stay_within_the_integers() -> None:
    """exp(mu + 3 sigma z) overflows int64 for the largest means; samples are capped first."""
    x = Lengths("lognormal", MAX_TOKENS, 3.0).sample(20_000, random.Random(0))
    assert min(x) >= 1 and max(x) == MAX_TOKENS  # a sigma of 3 reaches the cap


# --- loops driven by user input are bounded ---------------------------------------------------


def test_a_closed_loop_stops_at_the_request_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Short requests and no think time over a long --duration would send without end; the
    run stops at MAX_REQUESTS (here lowered to 50) with one line."""
    w = Workload(prompt=Lengths("fixed", 10), output=Lengths("fixed", 1), concurrency=2, duration_s=1e6)
    monkeypatch.setattr(workload_module, "MAX_REQUESTS", 50)
    with pytest.raises(RidgelineError, match="closed loop"):
        simulate(workload=w)


def test_open_arrivals_stop_at_the_request_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    w = Workload(rate_per_s=100.0, duration_s=10.0)  # about 1,000 requests
    monkeypatch.setattr(workload_module, "MAX_REQUESTS", 50)
    with pytest.raises(RidgelineError, match="requests arrive"):
        open_arrivals(w, random.Random(0))


def test_an_engine_stops_at_its_step_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stepping token by token (--no-jump) 20 requests of 500 tokens takes thousands of
    steps; with the cap lowered to 100 the run ends in one line."""
    monkeypatch.setattr(engine_module, "MAX_ITERATIONS", 100)
    with pytest.raises(RidgelineError, match="engine steps"):
        simulate(workload=Workload(requests=20, duration_s=None), engine=EngineConfig(jump=False))


def test_progress_chunks_lost_to_rounding_still_finish() -> None:
    """At t = 1 a chunk of 1e-30 s rounds away (1 + 1e-30 == 1); the fleet still runs to the
    end rather than asking for the same moment forever. Run apart, so a regression times out
    instead of hanging the suite."""
    code = """
from ridgeline.simulate import Trace, Workload, EngineConfig
from ridgeline.simulate.engine import Engine
from ridgeline.simulate.kvcache import kv_cache
from ridgeline.simulate.router import run_fleet
from ridgeline.deployment import Deployment
from ridgeline.simulate.steptime import StepModel
from ridgeline.simulate.workload import make_requests
m = Deployment.build()
cfg = EngineConfig()
kv = kv_cache(m, cfg.block_tokens)
w = Workload(trace=Trace((1.0, 1.0), (100, 100), (20, 20)), duration_s=None)
reqs = make_requests(w, m.arch.max_context, kv.block_tokens)
engines = [Engine(reqs, StepModel(m), cfg, kv)]
seen = []
run_fleet(engines, [0, 1], "round-robin", seen.append, 1e-30)
assert all(s == s for s in reqs.finish_s) and seen[-1] == 2, seen
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, proc.stderr
