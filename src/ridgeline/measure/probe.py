"""This host's own roofline: a matmul's FLOP/s and a streaming kernel's bandwidth.

    peak      = 2 n^3 / t          numpy fp32 matmul (BLAS, every core), the best of k runs
    bandwidth = 3 x array bytes / t   a[:] = b + c on arrays far larger than the caches,
                                       one thread per core (STREAM's "add": two reads, one
                                       write), the best of k runs

The result is saved as an accelerator (default name `host`) in the user's config folder,
`gpus.json`, in the catalogue's schema, so `ridgeline estimate --gpu host` works. Its
bf16 (and fp16) peak is set equal to fp32: llama.cpp on a CPU does its arithmetic in fp32
(quantised weights are expanded or dotted in integer units, not in bf16), and ridgeline's
default maths dtype is bf16.
"""

from __future__ import annotations

import os
import platform
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ridgeline import _files

SIZES = {  # matmul n, streaming array MB per thread, repeats
    "quick": (1024, 16, 3),
    "full": (2048, 64, 3),
}


@dataclass(frozen=True)
class Probe:
    name: str
    peak_flops_fp32: float
    bandwidth_bytes_per_s: float
    memory_bytes: float
    threads: int
    matmul_n: int
    stream_bytes: int
    host: str

    @property
    def ridge(self) -> float:
        return self.peak_flops_fp32 / self.bandwidth_bytes_per_s

    def entry(self) -> dict[str, Any]:
        """The accelerator as the catalogue writes one (see data/gpus.toml)."""
        peak = self.peak_flops_fp32
        return {
            "label": f"this host ({self.host}, {self.threads} threads)",
            "peak_flops": {"fp32": peak, "bf16": peak, "fp16": peak},
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "memory_bytes": self.memory_bytes,
            "interconnect_bytes_per_s": 0.0,
            "price_per_hour_usd": 0.0,
            "source": (
                f"ridgeline probe, {time.strftime('%Y-%m-%d')}: numpy fp32 matmul n={self.matmul_n}; "
                f"a = b + c over {self.stream_bytes / 1e6:.0f} MB per thread x {self.threads}; "
                "bf16/fp16 set to fp32 (CPU arithmetic)"
            ),
        }

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"ridge": self.ridge}


def matmul_flops(n: int, repeats: int) -> float:
    import numpy as np

    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    a @ b  # warm-up: BLAS threads and pages
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2.0 * n**3 / best


def stream_bandwidth(mb_per_thread: int, threads: int, repeats: int) -> float:
    """Bytes per second of a[:] = b + c on every thread at once (numpy releases the GIL)."""
    import numpy as np

    n = mb_per_thread * 1_000_000 // 4
    arrays = [
        (np.zeros(n, np.float32), np.ones(n, np.float32), np.ones(n, np.float32)) for _ in range(threads)
    ]

    def once() -> float:
        start = threading.Barrier(threads + 1)

        def work(a: Any, b: Any, c: Any) -> None:
            start.wait()
            np.add(b, c, out=a)

        # daemons: an interrupt between their start and the barrier must not keep the process alive
        pool = [threading.Thread(target=work, args=trio, daemon=True) for trio in arrays]
        for t in pool:
            t.start()
        start.wait()
        t0 = time.perf_counter()
        for t in pool:
            t.join()
        return time.perf_counter() - t0

    once()  # warm-up: touch every page
    best = min(once() for _ in range(repeats))
    return 3.0 * 4 * n * threads / best


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def memory_bytes() -> float:
    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return 16e9


def probe(name: str = "host", size: str = "full", threads: int | None = None) -> Probe:
    n, mb, repeats = SIZES[size]
    threads = threads or os.cpu_count() or 1
    return Probe(
        name=name,
        peak_flops_fp32=matmul_flops(n, repeats),
        bandwidth_bytes_per_s=stream_bandwidth(mb, threads, repeats),
        memory_bytes=memory_bytes(),
        threads=threads,
        matmul_n=n,
        stream_bytes=mb * 1_000_000,
        host=platform.node() or "localhost",
    )


def save(p: Probe) -> Path:
    """Add or replace the entry in the config folder's gpus.json, keeping the others."""
    from ridgeline.errors import RidgelineError

    folder = _files.config_dir()
    path = folder / "gpus.json"
    data = _files.read_user_file(path) if path.exists() else {}
    data[p.name] = p.entry()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(_files.dumps(data) + "\n", encoding="utf-8")
    except OSError as exc:
        raise RidgelineError(f"cannot save to {str(path)!r}: {exc.strerror or exc}; try --no-save") from None
    return path
