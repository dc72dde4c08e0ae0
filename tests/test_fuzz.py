"""Bad input never gets a traceback, a hang or a NaN: every command, every option.

The commands and their options are read from the CLI itself, so a new command or option
is fuzzed without a change here. Each case gives one option (sometimes two) a bad value:
NaN, infinity, a negative or enormous number, text where a number belongs, control
characters, and files that are binary, nested too deep, hold NaN, are a folder or a
device, or do not exist. Every case must:

- exit 0 (a valid answer) or 2 (a user's mistake), or 1 for an error of the system;
- never reach the catch-alls that stand behind every foreseen error ("internal error",
  and running out of memory or stack, which bad input must never cause);
- write at most one line on stderr, and no traceback anywhere;
- print strict JSON (no NaN, no Infinity) when it succeeds with --json;
- end within a bounded time.

The cases are drawn from a fixed seed, so a failure reproduces; RIDGELINE_FUZZ_SEED
draws another set."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT

SEED = int(os.environ.get("RIDGELINE_FUZZ_SEED", "20261201"))
VALUES_PER_OPTION = 3
COMBINED_CASES = 40
CASE_LIMIT_S = 30.0
BATCH_LIMIT_S = 600.0

BAD_INTS = ["-1", "0", "-9223372036854775809", "99999999999999999999999999", "1.5", "1e3", "abc", "", "nan"]
BAD_FLOATS = ["nan", "inf", "-inf", "-1", "0", "1e400", "5e-324", "1e308", "abc", "", "1,5", "-0"]
BAD_STRINGS = [
    "",
    " ",
    "x" * 5000,
    "bad\nline",
    "\x1b[31mred",
    "nonexistent-name",
    "llama-3.1-8b\x00",
    "💥",
    "-",
    "a:b:c:d",
    "file:",
    "uniform:abc",
    "lognormal:inf",
    "http://user:secret@127.0.0.1:9/v1",
]


def bad_files(root: Path) -> list[str]:
    """Files no command should choke on."""
    root.mkdir(parents=True, exist_ok=True)
    llama = '"model_type": "llama", "num_hidden_layers": 2, "vocab_size": 100, "intermediate_size": 128, '
    llama += '"max_position_embeddings": 64, '
    files = {
        "binary.json": bytes(range(256)) * 16,
        "binary.jsonl": b"\xff\xfe\x00garbage\n" * 8,
        "nested.json": b"[" * 200_000 + b"]" * 200_000,
        "nested.jsonl": b"[" * 200_000 + b"]" * 200_000 + b"\n",
        "nan.json": b'{"effective_flops_per_s": NaN, "effective_bandwidth_bytes_per_s": Infinity}',
        "negative.json": b'{"effective_flops_per_s": -1, "effective_bandwidth_bytes_per_s": 1e12, '
        b'"step_overhead_s": -1}',
        "nan-gpus.toml": b"[x]\npeak_flops = {bf16 = nan}\nbandwidth_bytes_per_s = inf\n"
        b"memory_bytes = 8e10\n",
        "negative-gpus.toml": b"[x]\npeak_flops = {bf16 = 1e15}\nbandwidth_bytes_per_s = 3e12\n"
        b"memory_bytes = 8e10\nprice_per_hour_usd = -5\n",
        "empty.json": b"",
        "records-bad.jsonl": b'{"ttft_s": "abc", "e2e_s": NaN, "prompt_tokens": "x", "output_tokens": 5}\n'
        b'{"ttft_s": Infinity, "e2e_s": 1.0, "prompt_tokens": 10, "output_tokens": 5}\nNaN\n[1,2]\n',
        "trace-bad.csv": b"arrival_s,prompt_tokens,output_tokens\ninf,nan,5\n-1,10,10\nabc,1e400,1\n",
        "config-zero-heads.json": ("{" + llama + '"hidden_size": 64, "num_attention_heads": 0}').encode(),
        "config-huge.json": ("{" + llama + '"hidden_size": 1e400, "num_attention_heads": 4}').encode(),
        "config-window.json": (
            "{" + llama.replace("llama", "mistral") + '"hidden_size": 64, '
            '"num_attention_heads": 4, "sliding_window": "abc"}'
        ).encode(),
        "config-layer-types.json": (
            "{" + llama.replace("llama", "mistral") + '"hidden_size": 64, '
            '"num_attention_heads": 4, "sliding_window": 16, "layer_types": 5}'
        ).encode(),
        "not-a-model.gguf": b"GGUF" + b"\xff" * 64,
    }
    paths = []
    for name, data in files.items():
        (root / name).write_bytes(data)
        paths.append(str(root / name))
    (root / "a-folder").mkdir(exist_ok=True)
    paths += [str(root / "a-folder"), str(root / "missing.json"), "/dev/zero", "/dev/null", "/dev/full"]
    paths.append(zero_tensor_gguf(root / "zero.gguf"))
    return paths


def zero_tensor_gguf(path: Path) -> str:
    """A well-formed GGUF whose only tensor holds no elements."""
    import gguf
    import numpy as np

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_embedding_length(64)
    w.add_feed_forward_length(128)
    w.add_head_count(4)
    w.add_context_length(64)
    w.add_vocab_size(100)
    w.add_tensor("token_embd.weight", np.zeros((0,), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def commands() -> dict[str, Any]:
    from typer.main import get_command

    from ridgeline.cli import app

    return dict(get_command(app).commands)


def base_args(name: str, tmp: Path, records: str) -> list[str]:
    """Cheap, valid arguments around the fuzzed one: a run that the bad value does not
    stop still ends quickly."""
    return {
        "simulate": ["--requests", "40"],
        "plan": ["--rate", "1", "--slo-ttft-p99", "2", "--slo-tpot-p99", "0.2",
                 "--requests", "100", "--seeds", "2"],
        "search": ["--rate", "1", "--slo-ttft-p99", "2", "--slo-tpot-p99", "0.2", "--gpu", "h100-sxm",
                   "--tp", "1", "--weights", "bf16", "--maths", "bf16", "--kv-dtype", "bf16",
                   "--engine", "vllm", "--replicas", "1", "--requests", "100", "--workers", "1",
                   "--out", str(tmp / "search.parquet"), "--overwrite"],
        "measure": ["http://127.0.0.1:9/v1", "--model", "m", "--requests", "1", "--warmup", "0", "--quiet",
                    "--connect-timeout", "1", "--timeout", "5", "--out", str(tmp / "measured.jsonl")],
        "compare": [records, "--model", "llama-3.1-8b"],
        "fit": [records, "--model", "llama-3.1-8b", "--out", str(tmp / "cal.json")],
        "probe": ["--quick", "--no-save"],
        "film": ["--no-video", "--no-voice", "--out", str(tmp / "film")],
        "web": ["--port", "-5"],  # web serves forever when it starts: keep it from starting
    }.get(name, [])  # fmt: skip


def pool(param: Any, files: list[str]) -> list[str]:
    kind = param.type.name
    if kind == "integer":
        return BAD_INTS
    if kind == "float":
        return BAD_FLOATS
    return BAD_STRINGS + files


def place(param: Any, value: str) -> list[str]:
    if param.param_type_name == "argument":
        return [value]
    return [param.opts[0], value]


def with_value(args: list[str], param: Any, value: str) -> list[str]:
    """Replace the parameter in the base arguments, or add it."""
    if param.param_type_name == "argument":
        positional = [a for a in args[:1] if not a.startswith("-")]
        return [value, *args[len(positional) :]]
    out = list(args)
    for opt in param.opts:
        if opt in out:
            i = out.index(opt)
            del out[i : i + 2]
    return out + place(param, value)


def draw_cases(tmp: Path, files: list[str], records: str) -> list[list[str]]:
    rng = random.Random(SEED)
    cases = []
    fuzzable: list[tuple[str, Any]] = []
    for name, cmd in commands().items():
        has_json = any(p.name == "as_json" for p in cmd.params)
        base = base_args(name, tmp, records)
        if all(getattr(p, "is_flag", False) for p in cmd.params):  # nothing to fuzz: run it
            cases.append([name, *(["--json"] if has_json else [])])
        for param in cmd.params:
            if getattr(param, "is_flag", False) or param.type.name == "boolean":
                continue
            fuzzable.append((name, param))
            values = pool(param, files)
            for value in rng.sample(values, min(VALUES_PER_OPTION, len(values))):
                cases.append([name, *with_value(base, param, value), *(["--json"] if has_json else [])])
    for _ in range(COMBINED_CASES):  # two bad values at once
        name, first = rng.choice(fuzzable)
        others = [p for n, p in fuzzable if n == name and p is not first]
        cmd = commands()[name]
        args = with_value(base_args(name, tmp, records), first, rng.choice(pool(first, files)))
        if others:
            second = rng.choice(others)
            args = with_value(args, second, rng.choice(pool(second, files)))
        has_json = any(p.name == "as_json" for p in cmd.params)
        cases.append([name, *args, *(["--json"] if has_json else [])])
    return cases


def shown(bad: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The first failures, with long arguments and messages cut short to be read."""
    return [tuple([a[:80] for a in item] if isinstance(item, list) else str(item)[-300:] for item in row)
            for row in bad[:5]]  # fmt: skip


def strict_json(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise ValueError(f"{name} in JSON output")

    return json.loads(text, parse_constant=refuse)


def run_batch(cases: list[list[str]], tmp: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    spec = tmp / "cases.json"
    spec.write_text(json.dumps(cases), encoding="utf-8")
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "fuzz_cli.py"), str(spec)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=BATCH_LIMIT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    started = [line["start"] for line in lines if "start" in line]
    results = [line for line in lines if "case" in line]
    if len(results) < len(cases):
        hung = cases[started[-1]] if started else None
        raise AssertionError(
            f"the batch stopped after {len(results)} of {len(cases)} cases; running: {hung!r}; {err[-2000:]}"
        )
    return results


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[list[str], dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("fuzz")
    env = os.environ | {
        "RIDGELINE_CONFIG_DIR": str(tmp / "config"),
        "COLUMNS": "100",
        "OPENAI_API_KEY": "sk-fuzz",
    }
    files = bad_files(tmp / "files")
    records = str(tmp / "records.jsonl")
    made = subprocess.run(
        [sys.executable, "-m", "ridgeline", "simulate", "--requests", "20", "--out", records, "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    cases = draw_cases(tmp, files, records)
    return list(zip(cases, run_batch(cases, tmp, env), strict=True))


def test_the_fuzz_covers_every_command(outcomes: list[tuple[list[str], dict[str, Any]]]) -> None:
    assert {argv[0] for argv, _ in outcomes} == set(commands())
    assert len(outcomes) > 300


def test_the_base_arguments_run(tmp_path: Path) -> None:
    """A bad value must be what stops a case, not its surroundings: each command's own
    arguments, with no bad value, succeed (web excepted: it would serve forever)."""
    env = os.environ | {"RIDGELINE_CONFIG_DIR": str(tmp_path / "config")}
    records = str(tmp_path / "records.jsonl")
    made = subprocess.run(
        [sys.executable, "-m", "ridgeline", "simulate", "--requests", "20", "--out", records],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    for name in commands():
        if name in ("web", "measure"):  # measure's base reaches a closed port: exit 1, one line
            continue
        proc = subprocess.run(
            [sys.executable, "-m", "ridgeline", name, *base_args(name, tmp_path, records)],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, (name, proc.stderr)


def test_every_case_exits_with_an_allowed_status(outcomes: list[tuple[list[str], dict[str, Any]]]) -> None:
    bad = [(argv, r["code"], r["stderr"][-300:]) for argv, r in outcomes if r["code"] not in (0, 1, 2)]
    assert not bad, shown(bad)


def test_no_case_reaches_a_catch_all_or_prints_a_traceback(
    outcomes: list[tuple[list[str], dict[str, Any]]],
) -> None:
    bad = [
        (argv, r["stderr"][-300:])
        for argv, r in outcomes
        if any(s in r["stderr"] for s in ("internal error", "out of memory", "input nested too deeply"))
        or "Traceback" in r["stderr"] + r["stdout"]
    ]
    assert not bad, shown(bad)


def test_every_error_is_one_line(outcomes: list[tuple[list[str], dict[str, Any]]]) -> None:
    bad = [(argv, r["stderr"]) for argv, r in outcomes if r["stderr"].rstrip("\n").count("\n") > 0]
    assert not bad, shown(bad)


def test_every_success_prints_strict_json(outcomes: list[tuple[list[str], dict[str, Any]]]) -> None:
    bad = []
    for argv, r in outcomes:
        if r["code"] == 0 and "--json" in argv:
            try:
                strict_json(r["stdout"])
            except ValueError as exc:
                bad.append((argv, str(exc)))
    assert not bad, shown(bad)


def test_every_case_ends_in_bounded_time(outcomes: list[tuple[list[str], dict[str, Any]]]) -> None:
    slow = [(argv, round(r["s"], 1)) for argv, r in outcomes if r["s"] > CASE_LIMIT_S]
    assert not slow, slow[:5]
