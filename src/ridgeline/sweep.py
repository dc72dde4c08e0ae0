"""Sweeps: the latency–throughput–cost curve over batch sizes, and vectorised step
times over grids of batch and context (numpy arrays through the same ledger)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ridgeline.cost import token_cost
from ridgeline.deployment import Deployment
from ridgeline.memory import plan
from ridgeline.request import request_timeline
from ridgeline.step import decode_step


@dataclass(frozen=True)
class SweepRow:
    batch: int
    ttft_s: float
    tpot_s: float
    tokens_per_s_per_user: float
    tokens_per_s: float
    decode_bound: str
    decode_intensity: float
    usd_per_million_input_tokens: float
    usd_per_million_output_tokens: float
    fits: bool


def sweep_batches(largest: int) -> list[int]:
    """1, 2, 4, ... up to the largest batch that fits, which ends the list."""
    out, b = [], 1
    while b < largest:
        out.append(b)
        b *= 2
    return [*out, max(largest, 1)]


def batch_sweep(m: Deployment, prompt: int, output: int, price_per_gpu_hour_usd: float) -> list[SweepRow]:
    """From batch 1 to the largest batch whose KV cache fits beside the weights."""
    largest = plan(m, prompt + output, 1, suggest=False).max_batch
    rows = []
    for b in sweep_batches(largest):
        t = request_timeline(m, prompt, output, b)
        c = token_cost(price_per_gpu_hour_usd, m.par.gpus, t.ttft_s, t.tpot_s, prompt, b)
        rows.append(
            SweepRow(
                batch=b,
                ttft_s=t.ttft_s,
                tpot_s=t.tpot_s,
                tokens_per_s_per_user=1 / t.tpot_s,
                tokens_per_s=b / t.tpot_s,
                decode_bound=str(t.first_decode.bound),
                decode_intensity=float(t.first_decode.intensity),
                usd_per_million_input_tokens=c.usd_per_million_input_tokens,
                usd_per_million_output_tokens=c.usd_per_million_output_tokens,
                fits=plan(m, prompt + output, b, suggest=False).fits,
            )
        )
    return rows


def compute_bound_from(rows: list[SweepRow]) -> int | None:
    """The first batch in the sweep at which decode turns compute-bound."""
    return next((r.batch for r in rows if r.decode_bound == "compute"), None)


GRID_BLOCK = 4096  # points priced at once: a pass's temporaries (about 25 arrays of 32 KiB) fit in L2


def decode_grid(m: Deployment, batches: Any, contexts: Any) -> Any:
    """Decode step times (s) over numpy arrays of batch and context, broadcast together.

    The step price runs on blocks of GRID_BLOCK points: every term of the ledger and the
    roofline is a temporary array, and a block's temporaries stay in a core's cache where
    a hundred thousand points' would each be fresh memory (the same numbers, several times
    faster)."""
    import numpy as np

    b, c = np.broadcast_arrays(np.asarray(batches), np.asarray(contexts))
    times = np.empty(b.shape)
    flat = times.reshape(-1)  # a view: filling it fills `times`
    b, c = b.ravel(), c.ravel()  # a copy only where an input was broadcast
    for i in range(0, flat.size, GRID_BLOCK):
        block = slice(i, i + GRID_BLOCK)
        flat[block] = decode_step(m, c[block].astype(float), b[block].astype(float)).time_s
    return times
