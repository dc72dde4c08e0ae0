"""Shared test helpers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def price_s(m: Any, seqs: list[tuple[int, int]], sampled: int) -> float:
    """The core's price of one step on deployment `m` whose sequences each add `new` tokens
    after `context` (global attention: one window group)."""
    from ridgeline import step
    from ridgeline.ledger import Pass, attended_pairs

    new_tokens = sum(new for new, _ in seqs)
    pairs = sum(attended_pairs(new, c) for new, c in seqs)
    return float(step.price(m, Pass(new_tokens, (pairs,), (float(sum(c for _, c in seqs)),), sampled)).time_s)


def shipped_bands(engine: str) -> dict[str, tuple[float, float]]:
    """An engine's bands by regime, read from the shipped engines.toml itself (not through
    the profile code): measured / predicted time, [low, high]."""
    return {k: (float(lo), float(hi)) for k, (lo, hi) in shipped_engines()[engine]["uncertainty"].items()}


def shipped_engines() -> dict[str, Any]:
    """The shipped engines.toml, read as TOML (not through the profile code)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    return tomllib.loads((ROOT / "src" / "ridgeline" / "data" / "engines.toml").read_text(encoding="utf-8"))


def shipped_ttft_band(engine: str, ttft_s: float, first_token_s: float) -> tuple[float, float]:
    """The README's rule for a TTFT's band, from the shipped bands: the prefill band's and
    the first-token band's ends, weighted by the server's share of the TTFT over a fifth."""
    bands = shipped_bands(engine)
    (p_lo, p_hi), (f_lo, f_hi) = bands["prefill"], bands["first_token"]
    w = min(1.0, first_token_s / ttft_s / 0.2)
    return ((1 - w) * p_lo + w * f_lo, (1 - w) * p_hi + w * f_hi)


def shipped_load_band(engine: str, server_share: float) -> tuple[float, float]:
    """The README's rule for a band under load, from the shipped bands: the load band's and
    the server band's ends, weighted by the API server's share of the run over a fifth."""
    bands = shipped_bands(engine)
    (l_lo, l_hi), (s_lo, s_hi) = bands["load"], bands["server"]
    w = min(1.0, server_share / 0.2)
    return ((1 - w) * l_lo + w * s_lo, (1 - w) * l_hi + w * s_hi)


def shipped_server_share(engine: str, requests_per_s: float, prompt: float, streamed: float) -> float:
    """The README's rule for the share of its time an engine's API server is busy, from the
    shipped overhead terms: requests a second times the work on each (per request, prompt
    token and streamed token), at most 1."""
    o = shipped_engines()[engine]["overhead"]
    each_s = o["request_s"] + prompt * o["prompt_token_s"] + streamed * o["stream_token_s"]
    return min(1.0, requests_per_s * each_s)


def ctrl_c_delivered() -> None:
    """A child's preexec_fn: SIGINT back to its default, so that Ctrl-C reaches a command
    under test even where the suite runs with SIGINT ignored (a shell's background job
    ignores it, and Python keeps an ignored SIGINT ignored)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `ridgeline ARGS` as a whole process, the way a user does."""
    return subprocess.run(
        [sys.executable, "-m", "ridgeline", *args], capture_output=True, text=True, timeout=120, env=env
    )


def run_measure(
    url: str, out: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """A small `ridgeline measure` run against `url` (16 tokens in, 5 out, no warm-up)."""
    return run_cli(
        "measure", url, "--model", "m", "--prompt-tokens", "16", "--output-tokens", "5",
        "--warmup", "0", "--out", str(out), *extra, env=env,
    )  # fmt: skip


def cli_json(*args: str) -> dict:
    proc = run_cli(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def cli():
    return run_cli


# --- the browser and the servers it talks to ------------------------------------------------
CHROMIUM = "/usr/bin/chromium"  # Debian's
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]


def wait_for_http(url: str, what: str, timeout_s: float = 30.0) -> None:
    """Poll `url` until it answers 200; fail naming `what` after `timeout_s`."""
    import time

    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{what} did not start"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium, one per test module."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()
