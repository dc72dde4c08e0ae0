"""The README prints what the tool prints.

Each output block in the README that follows a marker

    <!-- output of: COLUMNS=100 ridgeline estimate --batch-sweep -->

is held to a fresh run of that command at that width: its lines, run by run (a line `...`
stands for lines left out, and a block may show a part of the output), appear in the output
in order. A `$ ridgeline ...` line at the top of a block, and its continuation lines, echo
the command and are not part of its output. A marker that ends `from "TEXT"` holds the block
from its line that starts with TEXT (the search's answer, after the stages' wall times).
Each command runs in a fresh folder that sees the checkout's `tests/` (the README's example
files), so what it writes (a search's results, its plot) lands there.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
MARKER = re.compile(r'<!-- output of: COLUMNS=(\d+) ridgeline (.+?)(?: from "(.+)")? -->')


def examples() -> list[tuple[int, int, list[str], list[str]]]:
    """(line of the marker, columns, arguments, the block's lines) for every marker."""
    lines = README.read_text(encoding="utf-8").splitlines()
    out = []
    for i, line in enumerate(lines):
        m = MARKER.fullmatch(line.strip())
        if m is None:
            continue
        assert lines[i + 1].startswith("```"), f"README line {i + 1}: a marker must precede a block"
        end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
        block = lines[i + 2 : end]
        if m.group(3):  # held from the line that starts with this text
            block = block[next(k for k, x in enumerate(block) if x.startswith(m.group(3))) :]
        out.append((i + 1, int(m.group(1)), shlex.split(m.group(2)), block))
    return out


def output_lines(block: list[str]) -> list[str]:
    """The block less the command it echoes at its top."""
    lines = list(block)
    while lines and lines[0].startswith("$ "):
        while lines and lines.pop(0).endswith("\\"):
            pass
    return [line.rstrip() for line in lines]


def runs(lines: list[str]) -> list[list[str]]:
    """The block's runs of lines between `...` lines."""
    out: list[list[str]] = [[]]
    for line in lines:
        if line == "...":
            out.append([])
        else:
            out[-1].append(line)
    return [run for run in out if run]


def shown_in(shown: list[list[str]], printed: list[str]) -> bool:
    """Every run appears in `printed`, whole and in order."""
    at = 0
    for run in shown:
        found = next(
            (i for i in range(at, len(printed) - len(run) + 1) if printed[i : i + len(run)] == run), None
        )
        if found is None:
            return False
        at = found + len(run)
    return True


EXAMPLES = examples()


def test_the_readme_marks_its_printed_examples() -> None:
    """The estimate, plan, simulate and search examples are each held to a run."""
    commands = {args[0] for _, _, args, _ in EXAMPLES}
    assert {"estimate", "plan", "simulate", "search"} <= commands and len(EXAMPLES) >= 9


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: f"line {e[0]}: {' '.join(e[2])}")
def test_a_printed_example_is_what_the_command_prints(
    example: tuple[int, int, list[str], list[str]], tmp_path: Path
) -> None:
    line, columns, args, block = example
    # the catalogue's own accelerators and engines: no user's files
    env = dict(os.environ, COLUMNS=str(columns), RIDGELINE_CONFIG_DIR=str(tmp_path / "config"))
    env.pop("RIDGELINE_GPUS", None)
    (tmp_path / "tests").symlink_to(README.parent / "tests")
    proc = subprocess.run(
        [sys.executable, "-m", "ridgeline", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    printed = [x.rstrip() for x in (proc.stdout + proc.stderr).splitlines()]
    shown = runs(output_lines(block))
    assert shown, f"README line {line}: an empty block"
    assert shown_in(shown, printed), (
        f"README line {line} no longer shows what `ridgeline {' '.join(args)}` prints at "
        f"COLUMNS={columns}:\n" + "\n".join(printed)
    )
