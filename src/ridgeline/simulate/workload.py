"""Workloads: when requests arrive and how long they are, reproducible from a seed.

Arrivals (open loop): Poisson at a rate (exponential gaps); gamma gaps with a shape k, the
burstiness (mean gap 1/rate, squared coefficient of variation 1/k: k = 1 is Poisson, k < 1
burstier); constant spacing; or a trace's own timestamps. Closed loop: C clients, each sending
its next request when its last one finishes, after a think time.

Lengths: fixed; uniform on mean x [1 - w, 1 + w]; lognormal with the mean kept
(mu = ln mean - sigma^2 / 2); or drawn from a file of lengths, one a line.

`--output-tokens` is M, the decode steps (as `ridgeline estimate --output`). A trace's
`output_tokens` column is what a records file holds, the tokens emitted, N = M + 1, so the JSONL
that `ridgeline simulate --out` or `ridgeline measure` writes replays as a trace.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ridgeline.errors import RidgelineError
from ridgeline.simulate.requests import Requests

ARRIVALS = ("poisson", "gamma", "constant")
LENGTHS = ("fixed", "uniform", "lognormal", "file")
DEFAULT_SPREAD = {"uniform": 0.5, "lognormal": 0.5}


@dataclass(frozen=True)
class Lengths:
    """A length distribution around `mean` tokens."""

    kind: str = "fixed"
    mean: int = 1
    spread: float = 0.0  # uniform: half-width as a fraction of the mean; lognormal: sigma
    values: tuple[int, ...] = ()  # kind "file"

    def sample(self, n: int, rng: Any) -> Any:
        """n integer lengths (a numpy array), at least 1."""
        import numpy as np

        if self.kind == "fixed":
            x = np.full(n, float(self.mean))
        elif self.kind == "uniform":
            x = rng.uniform(self.mean * (1 - self.spread), self.mean * (1 + self.spread), n)
        elif self.kind == "lognormal":
            mu = math.log(self.mean) - self.spread**2 / 2
            x = rng.lognormal(mu, self.spread, n)
        else:
            x = np.asarray(self.values, dtype=float)[rng.integers(0, len(self.values), n)]
        return np.maximum(np.rint(x), 1).astype(np.int64)


def parse_lengths(spec: str, mean: int, flag: str) -> Lengths:
    """`fixed`, `uniform[:W]`, `lognormal[:SIGMA]` or `file:PATH`, around `mean` tokens."""
    if isinstance(mean, bool) or not isinstance(mean, int) or mean < 1:
        raise RidgelineError(f"{flag.replace('-dist', '-tokens')} must be a whole number >= 1, got {mean!r}")
    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in LENGTHS:
        raise RidgelineError(
            f"{flag} '{spec}' is unknown: use fixed, uniform[:W], lognormal[:SIGMA] or file:PATH"
        )
    if kind == "fixed":
        return Lengths("fixed", mean)
    if kind == "file":
        if not arg:
            raise RidgelineError(f"{flag} file needs a path: file:lengths.txt (one length a line)")
        return Lengths("file", mean, 0.0, read_lengths(arg, flag))
    try:
        spread = float(arg) if arg else DEFAULT_SPREAD[kind]
    except ValueError:
        raise RidgelineError(f"{flag} '{spec}': '{arg}' is not a number; e.g. {kind}:0.5") from None
    if kind == "uniform" and not 0 <= spread <= 1:
        raise RidgelineError(
            f"{flag} uniform width must lie in [0, 1] (a fraction of the mean), got {spread:g}"
        )
    if kind == "lognormal" and not spread > 0:
        raise RidgelineError(f"{flag} lognormal sigma must be positive, got {spread:g}")
    return Lengths(kind, mean, spread)


def read_lengths(path: str, flag: str) -> tuple[int, ...]:
    p = Path(path).expanduser()
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise RidgelineError(f"{flag}: cannot read {p}: {exc.strerror or exc}") from None
    values = []
    for number, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            value = int(float(text))
        except ValueError:
            raise RidgelineError(
                f"{p}:{number}: '{text}' is not a length; write one whole number a line"
            ) from None
        if value < 1:
            raise RidgelineError(f"{p}:{number}: length {value} must be at least 1")
        values.append(value)
    if not values:
        raise RidgelineError(f"{flag}: {p} holds no lengths; write one whole number a line")
    return tuple(values)


@dataclass(frozen=True)
class Trace:
    """Arrivals and lengths replayed from a file: arrival seconds, prompt tokens, decode steps."""

    arrival_s: tuple[float, ...]
    prompt: tuple[int, ...]
    output: tuple[int, ...]  # M = output_tokens - 1
    source: str = ""


TIME_KEYS = ("arrival_s", "timestamp", "time_s")


def read_trace(path: str) -> Trace:
    """A CSV (with a header) or JSONL file with a time column (`arrival_s` from the start, or
    `timestamp` in seconds, rebased to the first) and `prompt_tokens`, `output_tokens`.
    Rows that carry an `error` (failed requests in a records file) are skipped."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise RidgelineError(f"--trace: cannot read {p}: {exc.strerror or exc}") from None
    rows = _csv_rows(text) if p.suffix.lower() == ".csv" else _jsonl_rows(text, p)
    times, prompts, outputs = [], [], []
    for number, row in rows:
        if row.get("error"):
            continue
        key = next((k for k in TIME_KEYS if row.get(k) not in (None, "")), None)
        if key is None:
            raise RidgelineError(f"{p}:{number} has no arrival_s or timestamp column; add the arrival time")
        t = _number(row[key], p, number, key)
        prompt = _number(row.get("prompt_tokens"), p, number, "prompt_tokens")
        tokens = _number(row.get("output_tokens"), p, number, "output_tokens")
        if t < 0 or not math.isfinite(t):
            raise RidgelineError(f"{p}:{number}: {key} {t:g} must be a finite time >= 0")
        if prompt < 1 or tokens < 1 or prompt != int(prompt) or tokens != int(tokens):
            raise RidgelineError(
                f"{p}:{number}: prompt_tokens and output_tokens must be whole numbers >= 1, "
                f"got {prompt:g} and {tokens:g}"
            )
        times.append(t)
        prompts.append(int(prompt))
        outputs.append(int(tokens) - 1)
    if not times:
        raise RidgelineError(
            f"trace {p} holds no requests; give rows with arrival_s, prompt_tokens, output_tokens"
        )
    order = sorted(range(len(times)), key=times.__getitem__)
    if any(k in TIME_KEYS[1:] for k in rows[0][1]) and "arrival_s" not in rows[0][1]:
        start = times[order[0]]
        times = [x - start for x in times]
    return Trace(
        tuple(times[i] for i in order),
        tuple(prompts[i] for i in order),
        tuple(outputs[i] for i in order),
        str(p),
    )


def _csv_rows(text: str) -> list[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(text.splitlines())
    return [(number, row) for number, row in enumerate(reader, 2)]


def _jsonl_rows(text: str, p: Path) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise RidgelineError(
                f"{p}:{number} is not JSON; a trace is JSONL (one object a line) or CSV"
            ) from None
        if not isinstance(row, dict):
            raise RidgelineError(f"{p}:{number} is not a JSON object; a trace is one object a line")
        rows.append((number, row))
    return rows


def _number(value: Any, p: Path, number: int, key: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise RidgelineError(f"{p}:{number}: {key} {value!r} is not a number") from None


@dataclass(frozen=True)
class Workload:
    """Everything about the traffic; `seed` makes a run reproducible."""

    prompt: Lengths = field(default_factory=lambda: Lengths("fixed", 2000))
    output: Lengths = field(default_factory=lambda: Lengths("fixed", 500))
    arrival: str = "poisson"
    rate_per_s: float | None = 2.0
    burstiness: float = 1.0  # gamma shape k
    concurrency: int | None = None
    think_s: float = 0.0
    requests: int | None = None
    duration_s: float | None = 60.0
    trace: Trace | None = None
    seed: int = 0
    prefix_hit_rate: float = 0.0  # fraction of each prompt found in the prefix cache
    shared_prefix_tokens: int = 0  # a prefix every prompt shares, kept in the cache

    @property
    def closed(self) -> bool:
        return self.concurrency is not None

    def check(self) -> None:
        if self.arrival not in ARRIVALS:
            raise RidgelineError(f"--arrival '{self.arrival}' is unknown: use {', '.join(ARRIVALS)}")
        if self.trace is None and not self.closed and (self.rate_per_s is None or not self.rate_per_s > 0):
            raise RidgelineError(f"--rate must be positive (requests per second), got {self.rate_per_s}")
        if self.closed and (self.concurrency is None or self.concurrency < 1):
            raise RidgelineError(f"--concurrency must be a whole number >= 1, got {self.concurrency}")
        if not self.burstiness > 0:
            raise RidgelineError(f"--burstiness (the gamma shape) must be positive, got {self.burstiness:g}")
        if self.think_s < 0:
            raise RidgelineError(f"--think-time must not be negative, got {self.think_s:g}")
        if self.requests is not None and self.requests < 1:
            raise RidgelineError(f"--requests must be a whole number >= 1, got {self.requests}")
        if self.duration_s is not None and not self.duration_s > 0:
            raise RidgelineError(f"--duration must be positive (seconds), got {self.duration_s:g}")
        if self.requests is None and self.duration_s is None and self.trace is None:
            raise RidgelineError("give --requests N or --duration S to bound the run")
        if not 0 <= self.prefix_hit_rate < 1:
            raise RidgelineError(f"--prefix-hit-rate must lie in [0, 1), got {self.prefix_hit_rate:g}")
        if self.shared_prefix_tokens < 0:
            raise RidgelineError(f"--shared-prefix must not be negative, got {self.shared_prefix_tokens}")


def gaps(w: Workload, n: int, rng: Any) -> Any:
    """n gaps between arrivals, mean 1/rate."""
    import numpy as np

    rate = float(w.rate_per_s or 1.0)
    if w.arrival == "constant":
        return np.full(n, 1.0 / rate)
    if w.arrival == "gamma":
        return rng.gamma(w.burstiness, 1.0 / (rate * w.burstiness), n)
    return rng.exponential(1.0 / rate, n)


def open_arrivals(w: Workload, rng: Any) -> Any:
    """Arrival times of an open-loop run: `requests` of them, or all before `duration_s`."""
    import numpy as np

    if w.requests is not None:
        t = np.cumsum(gaps(w, w.requests, rng))
        return t - t[0] if w.arrival == "constant" else t
    assert w.duration_s is not None
    rate = float(w.rate_per_s or 1.0)
    chunks, last, total = [], 0.0, 0
    while last < w.duration_s:
        n = int(rate * (w.duration_s - last) * 1.1) + 64
        t = last + np.cumsum(gaps(w, n, rng))
        chunks.append(t)
        last = float(t[-1])
        total += n
    t = np.concatenate(chunks)
    if w.arrival == "constant":
        t = t - t[0]
    return t[t < w.duration_s]


def cached_prefix(w: Workload, prompt: Any, block_tokens: int) -> tuple[Any, Any]:
    """Per request, prompt tokens found in the prefix cache (whole blocks, and never the last
    token, which is always computed), and how many of them sit in shared blocks."""
    import numpy as np

    last_block = (prompt - 1) // block_tokens * block_tokens  # whole blocks before the last token
    if w.shared_prefix_tokens:
        shared = np.minimum(w.shared_prefix_tokens // block_tokens * block_tokens, last_block)
        return shared, shared
    hit = np.minimum((w.prefix_hit_rate * prompt).astype(np.int64) // block_tokens * block_tokens, last_block)
    return hit, np.zeros_like(hit)


def clip_lengths(prompt: Any, output: Any, max_context: int, min_output: int = 1) -> tuple[Any, Any]:
    """Prompt in [1, max_context - 1]; prompt + output within the model's context."""
    import numpy as np

    prompt = np.clip(prompt, 1, max_context - 1)
    output = np.clip(output, min_output, max_context - prompt)
    return prompt, output


def make_requests(w: Workload, max_context: int, block_tokens: int) -> Requests:
    """The open-loop requests (a trace, or arrivals drawn at the rate), or the first request
    of each closed-loop client, all at time 0."""
    import numpy as np

    w.check()
    rng = np.random.default_rng(w.seed)
    reqs = Requests()
    if w.trace is not None:
        n = len(w.trace.arrival_s) if w.requests is None else min(w.requests, len(w.trace.arrival_s))
        if w.duration_s is not None:
            n = min(n, sum(1 for t in w.trace.arrival_s if t < w.duration_s))
            if n == 0:
                raise RidgelineError(f"no request of the trace arrives within --duration {w.duration_s:g} s")
        arrival = np.asarray(w.trace.arrival_s[:n], dtype=float)
        prompt, output = clip_lengths(
            np.asarray(w.trace.prompt[:n]), np.asarray(w.trace.output[:n]), max_context, min_output=0
        )
    else:
        if w.closed:
            assert w.concurrency is not None
            n = w.concurrency if w.requests is None else min(w.concurrency, w.requests)
            arrival = np.zeros(n)
        else:
            arrival = open_arrivals(w, rng)
            n = len(arrival)
            if n == 0:
                raise RidgelineError(
                    f"no request arrives within --duration {w.duration_s:g} s at --rate {w.rate_per_s:g}/s; "
                    "lengthen the run"
                )
        prompt, output = clip_lengths(w.prompt.sample(n, rng), w.output.sample(n, rng), max_context)
    hit, shared = cached_prefix(w, prompt, block_tokens)
    reqs.extend(arrival.tolist(), prompt.tolist(), output.tolist(), hit.tolist(), shared.tolist())
    if w.closed:
        reqs.client = list(range(n))
    return reqs


class ClosedLoop:
    """Closed-loop clients: when a client's request finishes, its next one arrives after the
    think time, until `requests` have been sent or the next would arrive after `duration_s`."""

    def __init__(self, w: Workload, reqs: Requests, max_context: int, block_tokens: int) -> None:
        import numpy as np

        self.w = w
        self.reqs = reqs
        self.max_context = max_context
        self.block_tokens = block_tokens
        self.rng = np.random.default_rng([w.seed, 1])
        self.pool: list[tuple[int, int, int, int]] = []

    def _refill(self) -> None:
        n = 4096
        prompt, output = clip_lengths(
            self.w.prompt.sample(n, self.rng), self.w.output.sample(n, self.rng), self.max_context
        )
        hit, shared = cached_prefix(self.w, prompt, self.block_tokens)
        self.pool = list(zip(prompt.tolist(), output.tolist(), hit.tolist(), shared.tolist(), strict=True))
        self.pool.reverse()

    def follow_up(self, done: int, finish_s: float) -> int | None:
        """The next request of the client whose request `done` finished, or None."""
        w, reqs = self.w, self.reqs
        t = finish_s + w.think_s
        if w.requests is not None and len(reqs) >= w.requests:
            return None
        if w.duration_s is not None and t >= w.duration_s:
            return None
        if not self.pool:
            self._refill()
        prompt, output, hit, shared = self.pool.pop()
        return reqs.add(t, prompt, output, hit, shared, reqs.client[done])
