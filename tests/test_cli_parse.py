"""One command line, two readings that agree.

The CLI's own commands, and simulate, plan and search, are read without typer
(`options.parse`) when the line is plain;
Typer, built from the same declarations, reads every other line (help, a mistake, anything
unusual) and says what it always said. A line the fast reader takes must give the command
the values Typer would give it, value for value and type for type, and a run must end the
same way whichever reader took it."""

from __future__ import annotations

import contextlib
import inspect
import io
from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ridgeline import cli
from ridgeline.options import canonical, parse


@cache
def typer_command(name: str) -> Any:
    return cli._command([name]).commands[name]


def typer_values(name: str, args: list[str]) -> dict[str, Any] | None:
    """The values Typer gives the command, or None where it refuses the line (or shows help)."""
    import typer
    from typer._click import exceptions as click

    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return dict(typer_command(name).make_context(name, canonical(args)).params)
    except (click.ClickException, typer.Exit):
        return None


FAST = sorted([*cli.COMMANDS, *cli.FACE_COMMANDS])


def fast_values(name: str, args: list[str]) -> dict[str, Any] | None:
    command = cli.plain_command(name)
    assert command is not None
    return parse(command, canonical(args))


def typed(values: dict[str, Any] | None) -> dict[str, tuple[type, Any]]:
    assert values is not None
    return {name: (type(value), value) for name, value in values.items()}


READ_FAST = [
    ["estimate"],
    ["estimate", "--json"],
    ["estimate", "-m", "llama-3.1-70b", "-g", "h200", "-w", "fp8", "--tp", "2", "--json"],
    ["estimate", "--prompt", "4000", "--output=100", "--batch", "8"],  # old spellings
    ["estimate", "--prompt-tokens", "100", "--prompt-tokens", "200"],  # the last one counts
    ["estimate", "--compute-eff", ".5", "--bandwidth-eff", "5e-1", "--price", "2"],  # "2" is 2.0
    ["estimate", "--peak-tflops", "1000", "--memory-gb", "96", "--ops", "--batch-sweep", "--json"],
    ["estimate", "--method", "per-op", "--engine", "vllm", "--calibration", "c.json", "--gpu-file", "g.toml"],
    ["estimate", "--prompt", " 5"],  # what int() reads, click reads
    ["estimate", "--prompt", "1_000"],
    ["estimate", "--prompt", "٣"],
    ["estimate", "--prompt", "0"],  # the core refuses it, in its own words
    ["estimate", "--model=a=b"],
    ["ops", "-p", "100", "-b", "4", "--json"],
    ["roofline", "-c", "100", "-b", "8", "-p", "5", "--maths", "fp8", "--preset", "lesson"],
    ["gpus", "--json"],
    ["engines", "--json"],
    ["models"],
    ["models", "llama-3.1-8b", "--json"],
    ["models", "--json", "llama-3.1-8b", "-w", "int4"],
    ["simulate"],
    ["simulate", "--rate", "20", "-n", "1000", "--prompt-dist", "lognormal", "--json"],
    ["simulate", "--engine", "vllm", "--replicas", "3", "--router", "least-outstanding", "--no-jump"],
    ["simulate", "--concurrency", "64", "--think-time", "0.5", "--slo-ttft", "1", "--out", "r.csv"],
    ["plan", "--slo-ttft-p99", "1", "--compare", "h100-sxm:1:bf16,h200:1:fp8", "--seeds", "3"],
    ["plan", "--slo-tpot-p99", "0.05", "--price", "2", "--exhaustive", "--json"],
    ["search", "--rate", "10", "--gpu", "h100-sxm,h200", "--tp", "1,2", "--slo-ttft-p99", "1"],
    ["search", "--trace", "t.csv", "--workers", "2", "--ray", "auto", "--resume", "--goodput", "0.9"],
]

LEFT_TO_TYPER = [
    ["estimate", "--help"],
    ["estimate", "-h"],
    ["estimate", "--jso"],
    ["estimate", "--model"],
    ["estimate", "--model", ""],
    ["estimate", "--prompt", "1.5"],
    ["estimate", "--prompt", "-5"],
    ["estimate", "--compute-eff", "nan"],
    ["estimate", "--compute-eff", "1e400"],
    ["estimate", "--json=1"],
    ["estimate", "--", "--json"],
    ["estimate", "-b8"],
    ["estimate", "extra"],
    ["estimate", "--slo-ttft", "1"],
    ["models", "a", "b"],
    ["simulate", "--help"],
    ["simulate", "--rate", "nan"],
    ["simulate", "--requests", "1e3"],
    ["plan", "--seeds"],
    ["search", "--gpu"],
    ["search", "--jsonn"],
]


@pytest.mark.parametrize("argv", READ_FAST, ids=" ".join)
def test_a_plain_line_is_read_without_typer_as_typer_reads_it(argv: list[str]) -> None:
    name, *args = argv
    assert fast_values(name, args) is not None
    assert typed(fast_values(name, args)) == typed(typer_values(name, args))


@pytest.mark.parametrize("argv", LEFT_TO_TYPER, ids=" ".join)
def test_help_a_mistake_or_an_unusual_line_is_left_to_typer(argv: list[str]) -> None:
    name, *args = argv
    assert fast_values(name, args) is None


# Values for each type of option, most of them readable, and some that no option takes.
VALUES = {
    "int": ["1", "8", "2000", "0", "+5", " 5", "1_000", "٣", "1.5", "1e3", "99999999999999999999"],
    "float": ["0.5", ".5", "5e-1", "2", "1_0", "nan", "inf", "1e400", "Infinity", "0x10"],
    "str": ["llama-3.1-8b", "h100-sxm", "a=b", "x y", "💥", ""],
}
ODD = ["abc", "", "-", "-1", "-inf", "--json", "--help"]
STRAY = ["--", "-", "--help", "-h", "--nope", "extra", "--prompt", "--output=3", "-pb", "-b8", "--json=1"]


@st.composite
def lines(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A command and a line of its own options (now and then a stray word), valid or not."""
    name = draw(st.sampled_from(FAST))
    params = list(inspect.signature(cli.plain_command(name)).parameters.values())
    args: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        form = draw(st.integers(0, 5))
        param = draw(st.sampled_from(params))
        option, kind = param.default, param.annotation.removesuffix(" | None")
        if form == 5:
            args.append(draw(st.sampled_from(STRAY)))
            continue
        if kind == "bool":
            args.append(draw(st.sampled_from(option.flags)))
            continue
        value = draw(st.sampled_from(ODD if form == 4 else VALUES[kind]))
        if not option.flags:
            args.append(value)
        elif form == 3:
            args.append(f"{option.flags[0]}={value}")
        else:
            args += [draw(st.sampled_from(option.flags)), value]
    return name, args


@settings(max_examples=400, deadline=None)
@given(line=lines())
def test_whatever_the_fast_reader_takes_typer_reads_the_same(line: tuple[str, list[str]]) -> None:
    name, args = line
    fast = fast_values(name, args)
    if fast is not None:
        assert typed(fast) == typed(typer_values(name, args))


def run_both(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    """(status, stdout, stderr) of `main(argv)`, read fast and then by Typer."""
    fast = (cli.main(argv), *capsys.readouterr())
    with monkeypatch.context() as m:
        m.setattr(cli, "parse", lambda command, args: None)
        by_typer = (cli.main(argv), *capsys.readouterr())
    return fast, by_typer


@pytest.mark.parametrize(
    "argv",
    [
        ["estimate", "--json"],
        ["estimate", "-m", "llama-3.1-70b", "--tp", "4"],
        ["estimate", "--prompt", "0"],
        ["estimate", "--gpu", "h1000"],
        ["ops", "-p", "100", "--json"],
        ["roofline", "--json"],
        ["models", "llama-3.1-8b", "--json"],
    ],
    ids=" ".join,
)
def test_a_run_prints_the_same_whichever_reader_took_it(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fast, by_typer = run_both(argv, monkeypatch, capsys)
    assert fast == by_typer


@pytest.mark.parametrize("error", [KeyboardInterrupt, EOFError])
def test_an_interrupted_run_ends_the_same_whichever_reader_took_it(
    error: type[BaseException], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted() -> None:
        raise error

    monkeypatch.setattr("ridgeline.describe.describe_engines", interrupted)
    fast, by_typer = run_both(["engines", "--json"], monkeypatch, capsys)
    assert fast == by_typer and fast[0] == 130
