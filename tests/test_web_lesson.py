"""The lesson's data files and the `ridgeline web` command."""

from __future__ import annotations

import re
import socket

import pytest

from conftest import run_cli
from ridgeline.errors import RidgelineError
from ridgeline.web import lesson
from ridgeline.web.view import State


def test_placeholders_are_filled_from_the_core() -> None:
    """The film's ridge: 989 TFLOP/s over 3.35 TB/s is about 295 FLOPs per byte."""
    step = lesson.parse_step(
        '+++\ntitle = "t"\n[compare.a100]\ngpu = "a100-80gb-sxm"\n+++\n'
        "{{ ridge | int }} vs {{ a100.ridge | int }}; {{ ridge / a100.ridge | x }}; "
        "{{ memory.weight_bytes | GB }}; {{ 2 * memory.weight_bytes | GB }}",
        "01-t.md",
        1,
    )
    assert lesson.fill(step, step.body) == "295 vs 153; 1.9×; 16.1 GB; 32.1 GB"


@pytest.mark.parametrize(
    "value, fmt, text",
    [
        (0.0559, "ms", "55.9 ms"),
        (1.79, "ms", "1.79 s"),
        (0.982, "pct", "98%"),
        (1.6061e10, "GB", "16.1 GB"),
        (131072, "KiB", "128 KiB"),
        (2032.1, "int", "2,032"),
        (989e12, "TFLOPs", "989 TFLOP/s"),
        (3.35e12, "TB/s", "3.35 TB/s"),
        (5.07, "usd", "$5.07"),
        ("compute", None, "compute"),
    ],
)
def test_formats(value: object, fmt: str | None, text: str) -> None:
    assert lesson.format_value(value, fmt) == text


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("no front matter", "front matter"),
        ('+++\ntitle = "t"\n[state]\ngpus = 2\n+++\nbody', "unknown state keys"),
        ('+++\ntitle = "t"\n[compare.ttft_s]\nbatch = 2\n+++\nbody', "hide estimate keys"),
        ('+++\ntitle = "t"\n[drill]\nquestion="q"\nanswer="ttft_s"\nunit="hours"\n+++\n', "drill unit"),
    ],
)
def test_a_broken_step_file_says_what_is_wrong(text: str, fragment: str) -> None:
    with pytest.raises(RidgelineError, match=fragment):
        lesson.parse_step(text, "01-broken.md", 1)


def test_an_unknown_placeholder_names_itself() -> None:
    step = lesson.parse_step('+++\ntitle = "t"\n+++\n{{ nothing.here }}', "01-t.md", 1)
    with pytest.raises(RidgelineError, match=re.escape("'nothing.here'")):
        lesson.fill(step, step.body)


def test_steps_set_the_states_the_lesson_describes() -> None:
    steps = lesson.load_steps()
    assert steps[0].state == State()  # the stage: 8B on one H100, 2,000 in, 500 out
    assert steps[3].state.prompt == 20
    assert steps[4].state.batch == 8 and steps[5].state.batch == 64
    assert steps[7].state.weights == "fp8" and steps[8].state.weights == "int4"
    assert [s.state.tp for s in steps[9:12]] == [1, 2, 4]
    assert {s.state.model for s in steps[9:13]} == {"llama-3.1-70b"}
    assert steps[13].state.prompt == 16000


def test_fp8_and_int4_leave_prefill_alone() -> None:
    """int4 weights, bf16 maths: decode speeds up, compute-bound prefill does not."""
    for n in (8, 9):
        html = lesson.rendered(n)["html"]
        assert "TTFT stays at <strong>55.9 ms</strong>" in html or "TTFT <strong>55.9 ms</strong>" in html


def test_web_help_and_bad_port() -> None:
    assert run_cli("web", "--help").returncode == 0
    proc = run_cli("web", "--port", "70000")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "ridgeline: error: --port must lie in 1..65535, got 70000"


def test_web_port_in_use_is_one_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run_cli("web", "--port", str(port))
    assert proc.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in proc.stderr and "Traceback" not in proc.stderr
