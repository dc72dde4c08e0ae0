"""A signal stops a long command with one line and a status that names it: 130 for Ctrl-C
(SIGINT), 143 for SIGTERM (128 + the signal's number), never a silent death."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from conftest import ctrl_c_delivered

LONG = {  # each runs for minutes unless stopped
    "simulate": ["simulate", "--requests", "2000000", "--no-jump"],
    "plan": ["plan", "--rate", "10", "--slo-ttft-p99", "1", "--requests", "80000", "--seeds", "100"],
}


def stopped(argv: list[str], signum: int) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ridgeline", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=ctrl_c_delivered,
    )
    time.sleep(3.0)  # past start-up, into the run
    assert proc.poll() is None, "the command ended before the signal"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    return proc.returncode, err


@pytest.mark.parametrize("command", sorted(LONG))
@pytest.mark.parametrize(
    ("signum", "status", "says"),
    [
        (signal.SIGINT, 130, "ridgeline: interrupted"),
        (signal.SIGTERM, 143, "ridgeline: terminated (SIGTERM)"),
    ],
)
def test_a_signal_is_one_line_and_its_status(command: str, signum: int, status: int, says: str) -> None:
    code, err = stopped(LONG[command], signum)
    assert code == status
    assert err.strip().splitlines() == [says]


def test_plan_without_a_target_says_which_to_give() -> None:
    from ridgeline.cli import main

    assert main(["plan", "--rate", "10"]) == 2
