"""The command line as a user meets it: whole processes, exit codes, one-line errors."""

from __future__ import annotations

import json

import pytest

from conftest import cli_json, run_cli


def test_default_estimate_prints_the_lesson_stage() -> None:
    """55.9 ms until the first token; 6.1 ms each; 3.11 s; 98% of it decode."""
    proc = run_cli("estimate")
    assert proc.returncode == 0, proc.stderr
    for text in ("TTFT 55.9 ms", "TPOT 6.1 ms", "total 3.11 s", "decode share 98%"):
        assert text in proc.stdout
    assert "why:" in proc.stdout


def test_estimate_json_keys_are_stable() -> None:
    data = cli_json("estimate")
    for key in ("ttft_s", "tpot_s", "total_s", "decode_share", "tokens_per_s", "batch_tokens_per_s", "ridge"):
        assert isinstance(data[key], float)
    for phase in ("prefill", "decode"):
        assert set(data[phase]) >= {"flops", "bytes", "intensity", "bound", "time_s"}
    assert set(data["memory"]) >= {"weight_bytes", "kv_bytes_per_token", "kv_bytes", "total_bytes", "fits"}
    assert set(data["memory"]["per_gpu"]) >= {"weight_bytes", "kv_bytes", "total_bytes", "capacity_bytes"}
    assert set(data["training"]) == {"flops_per_token", "bytes_per_parameter"}
    assert set(data["parallel"]) >= {"tp", "pp", "ep", "gpus", "pipeline_bubble", "decode_comm_share"}
    assert set(data["model"]) >= {"name", "parameters", "active_parameters"}
    assert set(data["gpu"]) >= {"name", "peak_flops", "bandwidth_bytes_per_s", "memory_bytes"}
    assert data["inputs"]["prompt"] == 2000 and data["inputs"]["preset"] == "lesson"
    assert data["tokens_per_s"] == pytest.approx(1 / data["tpot_s"])


def test_ideal_json_prefill_and_first_step() -> None:
    data = cli_json("estimate", "--preset", "ideal")
    assert data["prefill"]["time_s"] == pytest.approx(0.0335, abs=0.0005)
    assert data["decode"]["time_s"] == pytest.approx(0.00487, abs=0.00002)


def test_70b_on_one_gpu_does_not_fit_but_exits_zero() -> None:
    data = cli_json("estimate", "--model", "llama-3.1-70b")
    assert data["memory"]["fits"] is False
    assert data["memory"]["per_gpu"]["total_bytes"] > 0.9 * 80e9


def test_a_slow_deployment_prints_its_rate_not_zero() -> None:
    """Llama 3.1 405B on one T4 streams its 811 GB of bf16 weights over 320 GB/s at the
    lesson's 80%: at least 3.2 s a token (its KV cache adds to that), under one token a second,
    which the table must not round to 0."""
    data = cli_json("estimate", "--model", "llama-3.1-405b", "--gpu", "t4")
    ceiling = 320e9 * 0.8 / 811e9  # tokens/s were the weights all it read
    assert 0.8 * ceiling < data["tokens_per_s"] < ceiling
    proc = run_cli("estimate", "--model", "llama-3.1-405b", "--gpu", "t4")
    assert f"{data['tokens_per_s']:.3g} tokens/s per sequence" in proc.stdout
    assert " 0 tokens/s" not in proc.stdout


def test_roofline_gpus_models_json() -> None:
    r = cli_json("roofline", "--gpu", "a100-80gb-sxm")
    assert r["ridge"] == pytest.approx(153, abs=0.5)
    assert r["prefill"]["bound"] == "compute" and r["decode"]["bound"] == "memory"
    g = cli_json("gpus")
    assert g["h100-sxm"]["ridge"] == pytest.approx(295, abs=0.5)
    assert len(g) >= 8
    m = cli_json("models")
    assert {row["name"] for row in m} >= {"llama-3.1-8b", "llama-3.1-70b"}


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["estimate", "--prompt", "0"], "--prompt"),
        (["estimate", "--prompt", "-5"], "--prompt"),
        (["estimate", "--batch", "many"], "--batch"),
        (["estimate", "--gpu", "h1000"], "did you mean"),
        (["estimate", "--model", "llama-8b"], "unknown model"),
        # a checkpoint's own format is not a dtype: the line names `file`, the stored mix
        (["estimate", "--model", "gpt-oss-120b", "--weights", "mxfp4"], "or file (the model's own"),
        (["estimate", "--compute-eff", "1.5"], "[0.0001, 1]"),
        (["estimate", "--bandwidth-eff", "0"], "[0.0001, 1]"),
        (["estimate", "--prompt", "131000", "--output", "500"], "context"),
        (["estimate", "--no-such-flag"], "no-such-flag"),
    ],
)
def test_bad_input_one_line_exit_2(args: list[str], fragment: str) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0]
    assert "Traceback" not in proc.stderr


def test_json_is_parseable_for_every_numeric_command() -> None:
    for args in (["estimate"], ["roofline"], ["gpus"], ["models"]):
        json.loads(run_cli(*args, "--json").stdout)


def test_estimate_shows_attentions_share_of_prefill() -> None:
    """Seed: causal attention is "a thirtieth of the work at 2,000 tokens" and "a third
    of it at 32,768"; the table and the JSON both say so."""
    proc = run_cli("estimate")
    assert proc.returncode == 0, proc.stderr
    prefill_row = next(line for line in proc.stdout.splitlines() if line.lstrip().startswith("prefill"))
    assert " 3% " in prefill_row
    long = cli_json("estimate", "--prompt", "32768", "--output", "1", "--preset", "ideal")
    assert long["prefill"]["attention_share"] == pytest.approx(1 / 3, abs=0.035)


def test_a_command_is_built_alone_and_help_lists_every_command() -> None:
    """Only the command that runs has its options built; `--help` and a typo still see
    every command, the faces' too."""
    from ridgeline.cli import _command, app

    assert set(_command(["estimate", "--json"]).commands) == {"estimate"}
    assert set(_command(["measure"]).commands) == {"measure"}
    every = set(_command(["--help"]).commands)
    assert every == set(_command(["estimat"]).commands) == set(_command([]).commands)
    assert {"estimate", "ops", "simulate", "measure", "web", "film"} <= every
    assert len(every) == len(app.registered_commands)


def test_estimate_json_loads_no_table_library_and_no_arrays() -> None:
    """`estimate --json` prints JSON: no Rich table, no numpy, no face's engine, and no
    Typer or click either: a plain line is read without them."""
    import subprocess
    import sys

    code = (
        "import sys, io, contextlib\n"
        "from ridgeline.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    rc = main(['estimate', '--json'])\n"
        "heavy = [m for m in ('rich', 'numpy', 'httpx', 'fastapi', 'uvicorn', 'gguf', 'typer', 'click',"
        " 'ridgeline.simulate.commands', 'ridgeline.simulate.engine', 'ridgeline.measure.client',"
        " 'ridgeline.web.app')"
        " if m in sys.modules]\n"
        "print(rc, heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "0 []", out.stderr


def test_roofline_json_keeps_its_documented_keys() -> None:
    """The typed RooflinePoints writes exactly the keys the README lists."""
    r = cli_json("roofline", "--batch", "8", "--context", "100")
    point = {"flops", "bytes", "intensity", "attainable_flops", "bound", "time_s"}
    assert set(r) == {
        "gpu", "model", "maths", "preset", "peak_flops", "bandwidth_bytes_per_s", "ridge",
        "effective_ridge", "compute_bound_tokens", "prefill", "decode",
    }  # fmt: skip
    assert set(r["prefill"]) == point | {"tokens"} and r["prefill"]["tokens"] == 2000
    assert set(r["decode"]) == point | {"batch", "context"}
    assert (r["decode"]["batch"], r["decode"]["context"]) == (8, 100)
