"""One request's timeline: TTFT from the prefill, then one decode step per output token.

A request with `output` M emits M + 1 token events: the prefill emits the first token,
then decode step i (i = 0 .. M-1) reads a cached context of prompt + i tokens and
writes one more. So TPOT = (E2E - TTFT) / (tokens - 1) = the mean decode step, the
definition the simulator and the measurement client share.
"""

from __future__ import annotations

from dataclasses import dataclass

from ridgeline._num import sum_of_max_lines
from ridgeline.deployment import Deployment
from ridgeline.ledger import uniform
from ridgeline.roofline import StepTime
from ridgeline.step import decode_step, prefill_step, rooflines, step_rooflines


@dataclass(frozen=True)
class Timeline:
    """One request: its prefill, its first decode step, and all its decode steps together."""

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
    """Sum of the decode steps at contexts prompt, prompt+1, ..., prompt+output-1, exactly
    and in closed form. Between the edges of the sliding windows, every roofline a step
    takes the maximum of (the pass, or each operator) has compute and memory terms affine in
    the context, so each roofline's sum is two arithmetic series split where its two lines
    cross; the affine terms are read off the step price at two neighbouring contexts."""
    return sum(_segment_s(m, c0, n, batch) for c0, n in decode_segments(m, prompt, output))


def _segment_s(m: Deployment, c0: int, n: int, batch: int, here: StepTime | None = None) -> float:
    """n decode steps from context c0, whose terms are affine in the context."""
    here = here or decode_step(m, c0, batch)
    if m.method == "lesson":  # the step price's own rooflines are all it takes
        here_lines, there_lines = step_rooflines(here), step_rooflines(decode_step(m, c0 + 1, batch))
    else:
        here_lines = rooflines(m, uniform(m.arch, 1, c0, batch))
        there_lines = rooflines(m, uniform(m.arch, 1, c0 + 1, batch))
    lines = [(a, c, b, d) for (a, b), (c, d) in zip(here_lines, there_lines, strict=True)]
    total = n * (float(here.comm_s) + here.overhead_s)
    for c_a, c_b, m_a, m_b in lines:
        total += sum_of_max_lines(float(c_a), float(c_b - c_a), float(m_a), float(m_b - m_a), n)
    return total


def decode_segments(m: Deployment, prompt: int, output: int) -> list[tuple[int, int]]:
    """(first context, steps) of the runs of decode steps whose terms are affine in the
    context: a window w bends a layer's terms at contexts w - 1 and w."""
    if not m.arch.window_edges:  # global attention only: one run
        return [(prompt, output)]
    end = prompt + output
    edges = [e for e in m.arch.window_edges if prompt < e < end]
    starts = [prompt, *edges]
    return [(c, nxt - c) for c, nxt in zip(starts, [*edges, end], strict=True)]


def request_timeline(m: Deployment, prompt: int, output: int, batch: int = 1) -> Timeline:
    first = decode_step(m, prompt, batch)
    (c0, n), *rest = decode_segments(m, prompt, output)
    decode_s = _segment_s(m, c0, n, batch, first)
    if rest:  # runs past a sliding window's edges
        decode_s += sum(_segment_s(m, c, k, batch) for c, k in rest)
    return Timeline(
        prefill=prefill_step(m, prompt, batch),
        first_decode=first,
        decode_s=decode_s,
        steps=output,
        offset_s=m.ttft_offset_s,
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
