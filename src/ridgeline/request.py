"""One request's timeline: TTFT from the prefill, then one decode step per output token.

A request with `output` M emits M + 1 token events: the prefill emits the first token,
then decode step i (i = 0 .. M-1) reads a cached context of prompt + i tokens and
writes one more. So TPOT = (E2E - TTFT) / (tokens - 1) = the mean decode step, the
definition the simulator and the measurement client share.
"""

from __future__ import annotations

from dataclasses import dataclass

from ridgeline.deployment import Deployment
from ridgeline.roofline import StepTime
from ridgeline.step import decode_step, prefill_step


@dataclass(frozen=True)
class Timeline:
    prefill: StepTime
    first_decode: StepTime
    decode_s: float  # all decode steps together
    steps: int

    offset_s: float = 0.0  # fixed time before the first token (network, queueing)

    @property
    def ttft_s(self) -> float:
        return float(self.prefill.time_s) + self.offset_s

    @property
    def tpot_s(self) -> float:
        return self.decode_s / self.steps

    @property
    def total_s(self) -> float:
        return self.ttft_s + self.decode_s

    @property
    def decode_share(self) -> float:
        return self.decode_s / self.total_s


def decode_time_s(m: Deployment, prompt: int, output: int, batch: int = 1) -> float:
    """Sum of the decode steps at contexts prompt, prompt+1, ..., prompt+output-1."""
    if output > 4096 and m.method == "lesson":  # long answers: one vectorised call instead of a Python loop
        import numpy as np

        contexts = prompt + np.arange(output, dtype=float)
        return float(np.sum(decode_step(m, contexts, batch).time_s))
    return float(sum(decode_step(m, prompt + i, batch).time_s for i in range(output)))


def request_timeline(m: Deployment, prompt: int, output: int, batch: int = 1) -> Timeline:
    return Timeline(
        prefill=prefill_step(m, prompt, batch),
        first_decode=decode_step(m, prompt, batch),
        decode_s=decode_time_s(m, prompt, output, batch),
        steps=output,
        offset_s=m.eff.ttft_offset_s,
    )


def compute_bound_tokens(m: Deployment, limit: int = 1 << 24) -> int:
    """The fewest tokens in one pass (a prefill from empty) that make it compute-bound."""

    def compute_bound(n: int) -> bool:
        step = prefill_step(m, n)
        return bool(step.compute_s >= step.memory_s)

    if not compute_bound(limit):
        return limit
    lo, hi = 1, limit
    while lo < hi:
        mid = (lo + hi) // 2
        if compute_bound(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
