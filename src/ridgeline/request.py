"""One request's timeline: TTFT from the prefill, then one decode step per output token.

A request with `output` M emits M + 1 token events: the prefill emits the first token,
then decode step i (i = 0 .. M-1) reads a cached context of prompt + i tokens and
writes one more. So TPOT = (E2E - TTFT) / (tokens - 1) = the mean decode step, the
definition the simulator and the measurement client share.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from functools import cached_property

from ridgeline._num import sum_of_max_lines
from ridgeline.deployment import Deployment
from ridgeline.ledger import uniform
from ridgeline.roofline import StepTime
from ridgeline.step import decode_step, prefill_step, rooflines, step_rooflines


@dataclass(frozen=True)
class Timeline:
    """One request: its prefill, all its decode steps together, and its first decode step
    (priced when first asked for: the sum does not need it)."""

    prefill: StepTime
    decode_s: float  # all decode steps together
    steps: int
    deployment: Deployment = field(repr=False)
    prompt: int
    batch: int

    offset_s: float = 0.0  # fixed time before the first token (network, queueing)

    @cached_property
    def first_decode(self) -> StepTime:
        return decode_step(self.deployment, self.prompt, self.batch)

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
    cross (`DecodeLines` holds the lines). Where the engine's host work outlasts the first
    steps (EngineProfile.host_sequence_s), those take the host's time, up to the first step
    whose lines climb past it."""
    return sum(_segment_s(m, c0, n, batch) for c0, n in decode_segments(m, prompt, output))


def _segment_s(m: Deployment, c0: int, n: int, batch: int) -> float:
    """n decode steps from context c0, whose terms are affine in the context."""
    if n == 1:  # one step: its own price
        return float(decode_step(m, c0, batch).time_s)
    run = decode_lines(m, c0, batch)
    shift = c0 - run.start

    def lines_s(k: int) -> float:  # the first k steps on the lines
        total = k * run.fixed_s
        for c, dc, b, db in run.lines:
            total += sum_of_max_lines(c + dc * shift, dc, b + db * shift, db, k)
        return total

    host = run.host_s
    if host <= 0.0 or run.step_s(shift) >= host:  # the steps only climb: never on the floor
        return lines_s(n)
    if run.step_s(shift + n - 1) < host:  # every step waits on the host
        return host * n
    lo, hi = 0, n - 1  # step lo is on the floor, step hi above it: the first above, by halves
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if run.step_s(shift + mid) >= host else (mid, hi)
    return host * hi + lines_s(n) - lines_s(hi)


@dataclass(frozen=True)
class DecodeLines:
    """The decode steps of one batch over a run of contexts between two window edges: each
    roofline's compute and memory seconds at the run's start and per token of context
    beyond it, (compute, d compute, memory, d memory), and the seconds that do not climb
    (communication and fixed overhead)."""

    start: int
    lines: tuple[tuple[float, float, float, float], ...]
    fixed_s: float
    host_s: float = 0.0  # the host's work a step for the batch, a floor under the step (0: none)

    def step_s(self, beyond: int) -> float:
        """The step `beyond` contexts past the run's start, on its lines alone."""
        return self.fixed_s + sum(max(c + dc * beyond, b + db * beyond) for c, dc, b, db in self.lines)


RUN_SPAN = 4096  # contexts between the two steps an unbounded run's lines are read from


def decode_lines(m: Deployment, context: int, batch: int = 1) -> DecodeLines:
    """The run of contexts that holds `context`, read once per deployment and batch (kept
    on the deployment) from two steps far apart in it: the climb of each line is then
    exact to a rounding of the farther step's time over the span, where two neighbouring
    steps would leave it a rounding of a whole step."""
    edges = m.arch.window_edges
    i = bisect_right(edges, context)
    lo = edges[i - 1] if i else 0
    hi = edges[i] - 1 if i < len(edges) else lo + RUN_SPAN  # the run's last context
    key = ("decode run", batch, lo)
    kept = m.kept
    run = kept.get(key)
    if run is None:
        first = decode_step(m, lo, batch)
        there = _lines(m, hi, batch)
        span = max(hi - lo, 1)  # a run of one context (between w - 1 and w) never climbs
        lines = tuple(
            (c1, (c2 - c1) / span, b1, (b2 - b1) / span)
            for (c1, b1), (c2, b2) in zip(_lines(m, lo, batch, first), there, strict=True)
        )
        run = DecodeLines(lo, lines, float(first.comm_s) + first.overhead_s, float(first.host_s))
        if len(kept) >= KEPT_RUNS:
            kept.clear()
        kept[key] = run
    return run


KEPT_RUNS = 256  # per deployment: a sweep over more batches starts again


def _lines(
    m: Deployment, context: int, batch: int, step: StepTime | None = None
) -> list[tuple[float, float]]:
    """Each roofline's (compute, memory) seconds of the decode step at this context."""
    if m.method == "lesson":  # the step price's own rooflines are all it takes
        lines = step_rooflines(step or decode_step(m, context, batch))
    else:
        lines = rooflines(m, uniform(m.arch, 1, context, batch))
    return [(float(c), float(b)) for c, b in lines]


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
    return Timeline(
        prefill=prefill_step(m, prompt, batch),
        decode_s=decode_time_s(m, prompt, output, batch),
        steps=output,
        deployment=m,
        prompt=prompt,
        batch=batch,
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
