"""The time of one engine iteration: the core's cost of a mixed batch.

A step carries T new tokens: one for each decoding sequence, at its own context, plus the
prefill chunks. The core prices it from totals over the sequences (ledger.work_from_totals):
per window group, the attended pairs and the cached tokens read; roofline.time_work turns
the work into compute_s, memory_s and comm_s, and

    step_s = max(compute_s, memory_s) + comm_s + overhead_s.

For a fixed T the core's compute_s is affine in the pairs and its memory_s affine in the
cached tokens (FLOPs = 2 P T + a * pairs; bytes = weights(T) + k * (cached + T)). So the
engine evaluates each step in a few operations: the T-only part comes from the core once per
distinct T, the slopes from the core once per model. An engine profile times the matmuls and
attention as kernels apart, each on its own roofline (roofline.time_work):

    step_s = max(matmuls_s, weights_s) + max(attention_s, kv_s) + comm_s + overhead_s

where only attention's pair is affine in the context: for a fixed T the matmuls' maximum is
one more fixed part of the step, and the same two lines remain. `StepModel` checks that
this reading reproduces a direct core call to 1e-12 at start-up and otherwise prices every
step through the core.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from ridgeline import step
from ridgeline.deployment import Deployment
from ridgeline.roofline import StepTime

PROBE = float(1 << 30)  # pairs / tokens used to read a slope off the core without rounding loss
FILL = 64  # token counts priced together, in one call of the core on an array of them
ONE_BY_ONE = 2048  # token counts priced one at a time before the fills begin (and numpy loads)


class StepModel:
    """Step times from the core, memoised by T; `groups` are the model's (layers, window)."""

    def __init__(self, m: Deployment) -> None:
        self.m = m
        self.groups = m.arch.window_groups()
        self.layers = [n for n, _ in self.groups]
        self.windows = [w for _, w in self.groups]
        self.global_only = self.windows == [0]
        self.by_tokens: dict[int, tuple[float, float, float]] = {}
        # the core's own compute_s, weight_s and overhead_s of each step in by_tokens
        self.parts_at: dict[int, tuple[float, float, float]] = {}
        # Once ONE_BY_ONE token counts are priced, or once numpy is loaded anyway, the memos
        # are filled FILL token counts at a time, by one call of the core on an array of them:
        # the lesson's method takes arrays, and its arithmetic on an array is the same IEEE
        # arithmetic as on each number alone, to the bit, so which way a count is priced
        # changes no number. A short run prices its few counts alone and never waits for
        # numpy's import. Not for a MoE: the share of experts a step touches is a power, which
        # numpy may round otherwise than Python does.
        self.fills = m.method == "lesson" and not m.arch.experts
        zeros = [0.0] * len(self.groups)
        base = self.core(1, zeros, zeros)
        self.apart = base.ops_s is not None and m.method == "lesson"  # an engine's two rooflines
        self.pair_s: list[float] = []  # compute seconds per attended pair, per group
        self.cached_s: list[float] = []  # memory seconds per cached token read, per group
        for g in range(len(self.groups)):
            unit = [PROBE if i == g else 0.0 for i in range(len(self.groups))]
            self.pair_s.append((float(self.core(1, unit, zeros).compute_s) - float(base.compute_s)) / PROBE)
            self.cached_s.append((float(self.core(1, zeros, unit).memory_s) - float(base.memory_s)) / PROBE)
        # An engine runs its lm_head, and pays its per-sequence cost, only for the tokens it
        # samples: the T-only part samples every token, a prefill chunk one at most.
        self.by_sampled: dict[int, tuple[float, float, float]] = {}
        self.per_sampled = any(self.sampled_at(1))
        # the host's work a step and a sampled sequence, which an engine overlapping it with
        # the GPU's hides until it is the longer (engines.EngineProfile.host_step_s,
        # host_sequence_s): a floor, host_step + host_per_seq x sampled
        self.host_step = float(self.core(1, zeros, zeros, 0.0).host_s)
        self.host_per_seq = (float(self.core(1, zeros, zeros, PROBE).host_s) - self.host_step) / PROBE
        # The affine reading holds for the lesson's one roofline a pass; the per-op method's
        # sum of maxima has no such form, so every step goes to the core.
        # Data-parallel attention waits for the GPU with the most sequences: a ceiling, no line.
        self.exact = m.method == "lesson" and not m.par.dp_attention and self._reproduces_core()

    def core(
        self,
        tokens: float,
        pairs: list[float],
        cached: list[float],
        sampled: float | None = None,
        sequences: float | None = None,
    ) -> StepTime:
        """The core's price of a step with these totals (step.price, by the deployment's
        method); `sampled` tokens go through the lm_head (the per-op ledger counts them), of
        `sequences` sequences in all (data-parallel attention's balance)."""
        sampled = tokens if sampled is None else sampled
        return step.price(self.m, step.Pass(tokens, tuple(pairs), tuple(cached), sampled, sequences))

    def at_tokens(self, tokens: int) -> tuple[float, float, float]:
        """(compute_s, memory_s, fixed_s) of a step of T tokens with no context: the lines'
        intercepts and what does not move with the context (comm_s + overhead_s, and the
        matmuls' roofline when they run apart from attention)."""
        found = self.by_tokens.get(tokens)
        if found is None:
            zeros = [0.0] * len(self.groups)
            counts = self.block(tokens)
            s = self.core(_tokens(counts), zeros, zeros)
            columns = _columns(len(counts), s.compute_s, s.weight_s, s.overhead_s, s.comm_s, s.memory_s)
            for t, compute_s, weight_s, overhead_s, comm_s, memory_s in zip(counts, *columns, strict=True):
                fixed_s = comm_s + overhead_s
                if self.apart:  # attention's line starts at 0 pairs; the KV writes start its memory
                    self.by_tokens[t] = (0.0, memory_s - weight_s, fixed_s + max(compute_s, weight_s))
                else:
                    self.by_tokens[t] = (compute_s, memory_s, fixed_s)
                self.parts_at[t] = (compute_s, weight_s, overhead_s)
            found = self.by_tokens[tokens]
        return found

    def block(self, tokens: int) -> list[int]:
        """The token counts to price with `tokens`: its FILL-aligned block (from 1), or itself."""
        if not self.fills or tokens < 1 or (len(self.by_tokens) < ONE_BY_ONE and not numpy_loaded()):
            return [tokens]
        first = max(1, tokens - tokens % FILL)
        return list(range(first, tokens - tokens % FILL + FILL))

    def sampled_at(self, tokens: int) -> tuple[float, float, float]:
        """(compute_s, overhead_s) per token sampled beyond a step of T tokens' own T, and what
        a step of T tokens that is not decode-only adds to the overhead (the launches a
        decode step replayed as a CUDA graph saves: engines.EngineProfile.captured). The
        slopes are read between two steps that are not decode-only, the launches from the
        first of them against at_tokens' core call (kept)."""
        found = self.by_sampled.get(tokens)
        if found is None:
            zeros = [0.0] * len(self.groups)
            self.at_tokens(tokens)  # its block too, or itself alone
            counts = [t for t in self.block(tokens) if t in self.parts_at]
            t = _tokens(counts)
            one = self.core(t, zeros, zeros, t + 1.0)
            more = self.core(t, zeros, zeros, t + 1.0 + PROBE)
            n = len(counts)
            columns = _columns(n, one.compute_s, one.overhead_s, more.compute_s, more.overhead_s)
            for t, one_c, one_f, more_c, more_f in zip(counts, *columns, strict=True):
                per_f = (more_f - one_f) / PROBE
                self.by_sampled[t] = ((more_c - one_c) / PROBE, per_f, one_f - self.parts_at[t][2] - per_f)
            found = self.by_sampled[tokens]
        return found

    def sampling(self, tokens: int, sampled: float) -> tuple[float, float]:
        """What sampling `sampled` tokens rather than all T adds to (compute_s, fixed_s): the
        lm_head's matmul to the compute line, or, apart from attention, to the matmuls'
        roofline in the fixed part; the per-sequence cost, and a step's launches when it
        is not decode-only, to the fixed part."""
        per_c, per_f, launches = self.by_sampled.get(tokens) or self.sampled_at(tokens)
        extra = sampled - tokens
        if not extra:
            return 0.0, 0.0
        if not self.apart:
            return per_c * extra, per_f * extra + launches
        compute_s, weight_s, _ = self.parts_at[tokens]
        matmuls = max(compute_s + per_c * extra, weight_s) - max(compute_s, weight_s)
        return 0.0, matmuls + per_f * extra + launches

    def terms(self, tokens: int, pairs: list[float], cached: list[float]) -> tuple[float, float, float]:
        """(compute_s, memory_s, fixed_s) of a mixed step."""
        if not self.exact:
            s = self.core(tokens, pairs, cached)
            return float(s.compute_s), float(s.memory_s), float(s.comm_s) + float(s.overhead_s)
        c0, m0, f0 = self.at_tokens(tokens)
        for a, b, p, c in zip(self.pair_s, self.cached_s, pairs, cached, strict=True):
            c0 += a * p
            m0 += b * c
        return c0, m0, f0

    def time_s(
        self,
        tokens: int,
        pairs: list[float],
        cached: list[float],
        sampled: float | None = None,
        sequences: float | None = None,
    ) -> float:
        if not self.exact:
            return float(self.core(tokens, pairs, cached, sampled, sequences).time_s)
        if self.global_only:
            c0, m0, f0 = self.by_tokens.get(tokens) or self.at_tokens(tokens)
            c = c0 + self.pair_s[0] * pairs[0]
            mem = m0 + self.cached_s[0] * cached[0]
        else:
            c, mem, f0 = self.terms(tokens, pairs, cached)
        if sampled is not None and self.per_sampled:
            more_c, more_f = self.sampling(tokens, sampled)
            c += more_c
            f0 += more_f
        gpu = (c if c > mem else mem) + f0
        if self.host_step or self.host_per_seq:  # the host's work is the floor
            host = self.host_floor(tokens if sampled is None else sampled)
            return host if host > gpu else gpu
        return gpu

    def host_floor(self, sampled: float) -> float:
        """The host's work a step that samples `sampled` sequences: the least the step takes
        where the engine overlaps it with the GPU's (the simulator's jumped runs inline it)."""
        return self.host_step + self.host_per_seq * sampled

    def _reproduces_core(self) -> bool:
        """The affine reading against a direct core call at an arbitrary mixed step: its two
        lines (the pass's compute and memory, or attention's when the matmuls run apart)
        and its time."""
        tokens = 777
        pairs = [123_456.5 * (g + 1) for g in range(len(self.groups))]
        cached = [98_765.0 * (g + 1) for g in range(len(self.groups))]
        sampled = 5.0
        direct = self.core(tokens, pairs, cached, sampled)
        c0, m0, f0 = self.at_tokens(tokens)
        more_c, more_f = self.sampling(tokens, sampled)
        c = c0 + more_c + sum(a * p for a, p in zip(self.pair_s, pairs, strict=True))
        mem = m0 + sum(b * x for b, x in zip(self.cached_s, cached, strict=True))
        if self.apart:
            lines = (float(direct.attention_s), float(direct.kv_s))
        else:
            lines = (float(direct.compute_s), float(direct.memory_s))
        got = (c, mem, max(max(c, mem) + f0 + more_f, self.host_floor(sampled)))
        want = (*lines, float(direct.time_s))
        return all(math.isclose(x, y, rel_tol=1e-12, abs_tol=0.0) for x, y in zip(got, want, strict=True))


def numpy_loaded() -> bool:
    """Whether this process has imported numpy already (then an array costs nothing more)."""
    return "numpy" in sys.modules


def _tokens(counts: list[int]) -> Any:
    """The token counts as the core takes them: one number, or an array of several."""
    if len(counts) == 1:
        return counts[0]
    import numpy as np

    return np.array(counts, dtype=float)


def _columns(n: int, *values: Any) -> list[list[float]]:
    """Each value of a pass priced at n token counts as n floats: an array's own, or a
    number that does not move with the tokens, n times."""
    return [x.tolist() if getattr(x, "ndim", 0) > 0 else [float(x)] * n for x in values]


class DecodeRun:
    """A run of identical decode-only steps j = 0, 1, ...: each roofline term grows linearly
    with the context, so step_j = max(ac + bc*j, am + bm*j) + fixed, a convex broken line
    whose sum has a closed form on each side of the crossing. The host's work a step (`host`,
    the same every step of the run: its sequences do not change) is a floor: a step takes
    max(that, host), so the run's first `floored` steps take `host` each, until the lines
    rise past it."""

    __slots__ = ("a0", "ac", "am", "b0", "bc", "bm", "crossing", "fixed", "floored", "host")

    def __init__(self, ac: float, bc: float, am: float, bm: float, fixed: float, host: float = 0.0) -> None:
        self.ac, self.bc, self.am, self.bm, self.fixed = ac, bc, am, bm, fixed
        # j where the compute and memory lines meet (inf when parallel)
        self.crossing = math.inf if bc == bm else (am - ac) / (bc - bm)
        # the larger term at step 0, which every sum starts on: line(0), written out
        self.a0, self.b0 = (ac, bc) if ac + bc * 0 >= am + bm * 0 else (am, bm)
        self.host = host
        self.floored = self._floored(host - fixed)

    def _floored(self, floor: float) -> float:
        """The steps at the floor: the least j at which the larger line reaches it."""
        if floor <= max(self.ac, self.am):
            return 0
        reach = [(floor - a) / b for a, b in ((self.ac, self.bc), (self.am, self.bm)) if b > 0]
        return math.ceil(min(reach)) if reach else math.inf

    def line(self, j: float) -> tuple[float, float]:
        """The line (intercept, slope) that is the larger term at step j."""
        if self.ac + self.bc * j >= self.am + self.bm * j:
            return self.ac, self.bc
        return self.am, self.bm

    def step_s(self, j: int) -> float:
        return max(max(self.ac + self.bc * j, self.am + self.bm * j) + self.fixed, self.host)

    def split(self, k: int) -> int:
        """Steps before the crossing, within 0 .. k."""
        x = self.crossing
        return 0 if x <= 0 else k if x >= k else math.ceil(x)

    def elapsed_s(self, k: int) -> float:
        """Sum of steps 0 .. k-1: `host` for each step at the floor, then the lines."""
        if not self.floored:
            return self._lines_s(k)
        u = k if k < self.floored else int(self.floored)
        return self.host * u + (self._lines_s(k) - self._lines_s(u) if u < k else 0.0)

    def _lines_s(self, k: int) -> float:
        """Sum of steps 0 .. k-1 on the lines alone: sum of a + b j on each side of the crossing."""
        x = self.crossing  # split(k) and line(k - 1) written out: the engine sums a run or two a step
        split = 0 if x <= 0 else k if x >= k else math.ceil(x)
        a, b = self.a0, self.b0
        total = split * a + b * split * (split - 1) / 2.0
        if split < k:
            j = k - 1
            if self.ac + self.bc * j >= self.am + self.bm * j:
                a, b = self.ac, self.bc
            else:
                a, b = self.am, self.bm
            total += (k - split) * a + b * (k * (k - 1) - split * (split - 1)) / 2.0
        return total + self.fixed * k

    def steps_before(self, delta_s: float, k_max: int) -> int:
        """The number of steps that start before delta_s: the least k >= 1 with
        elapsed_s(k) >= delta_s, or k_max if none does."""
        return self.steps_and_elapsed(delta_s, k_max)[0]

    def steps_and_elapsed(self, delta_s: float, k_max: int) -> tuple[int, float]:
        """steps_before(delta_s, k_max), and the elapsed_s of that many steps (which the
        search for it has already summed)."""
        if self.floored:
            u = k_max if k_max < self.floored else int(self.floored)
            if delta_s <= self.host * u:  # it starts while the steps are at the floor
                k = min(max(math.ceil(delta_s / self.host), 1), k_max)
                return self._settle(k, k_max, delta_s)
        j0, rest, (a, b) = 0, delta_s, (self.a0, self.b0)
        if self.floored:  # past the floor: on the lines from there
            j0 = int(min(self.floored, k_max))
            rest, (a, b) = delta_s - self.elapsed_s(j0), self.line(j0)
        split = self.split(k_max)
        if j0 < split < k_max:
            before = self.elapsed_s(split)
            if delta_s > before:
                j0, rest, (a, b) = split, delta_s - before, self.line(k_max - 1)
        # elapsed from j0 over n steps: (b/2) n^2 + q n with q = a + fixed + b j0 - b/2; stable root
        q = a + self.fixed + b * j0 - b / 2.0
        disc = q * q + 2.0 * b * rest
        n = rest / q if b == 0.0 or disc < 0 else 2.0 * rest / (q + math.sqrt(disc))
        k = min(max(j0 + math.ceil(n), 1), k_max)
        return self._settle(k, k_max, delta_s)

    def _settle(self, k: int, k_max: int, delta_s: float) -> tuple[int, float]:
        """From a first guess k, the least k >= 1 whose elapsed_s reaches delta_s (or
        k_max), and that elapsed_s."""
        elapsed = self.elapsed_s(k)
        while k < k_max and elapsed < delta_s:
            k += 1
            elapsed = self.elapsed_s(k)
        while k > 1:
            before = self.elapsed_s(k - 1)
            if before < delta_s:
                break
            k, elapsed = k - 1, before
        return k, elapsed
