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

Limits. Everything here is checked where it is built (a Workload, Lengths or Trace refuses a
bad value in one line), so the library, the web and the command line share one set of rules:
at most MAX_REQUESTS requests a run, arrivals within MAX_SPAN_S, rates up to MAX_RATE_PER_S,
a gamma shape within BURSTINESS_RANGE, a lognormal sigma up to MAX_SIGMA, and lengths that fit
the model's context (check_context). Files are read line by line, each line at most
MAX_LINE_BYTES and the file at most MAX_FILE_BYTES, so a device or a binary file is refused at
its first long line instead of read until memory runs out.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import random
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from operator import add
from typing import Any

from ridgeline._files import loads_json
from ridgeline.checks import MAX_TOKENS, check_number, check_positive, check_size
from ridgeline.errors import RidgelineError
from ridgeline.simulate.requests import Requests

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

ARRIVALS = ("poisson", "gamma", "constant")
LENGTHS = ("fixed", "uniform", "lognormal", "file")
DEFAULT_SPREAD = {"uniform": 0.5, "lognormal": 0.5}

MAX_REQUESTS = 10_000_000  # requests one run simulates (and rows a trace or lengths file holds)
MAX_RATE_PER_S = 1e6  # requests per second
MAX_SPAN_S = 1e10  # seconds of arrivals (about 317 years): times stay exact to a few us
BURSTINESS_RANGE = (0.01, 100.0)  # gamma shape k: squared coefficient of variation 100 .. 0.01
MAX_SIGMA = 3.0  # lognormal sigma: the median already 1/90 of the mean
MAX_SEED = 2**63 - 1
MAX_LINE_BYTES = 1 << 20  # one line of a trace or lengths file
MAX_FILE_BYTES = 4 << 30  # a whole trace or lengths file


def _show(value: Any, limit: int = 60) -> str:
    """A user's value, quoted, and cut short when it is long."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_lengths(kind: Any, mean: Any, spread: Any, values: Any, flag: str) -> None:
    """A length distribution's parameters, in one line each when wrong."""
    if not isinstance(kind, str) or kind not in LENGTHS:
        raise RidgelineError(
            f"{flag} {_show(kind)} is unknown: use fixed, uniform[:W], lognormal[:SIGMA] or file:PATH"
        )
    check_size(flag.replace("-dist", "-tokens") if flag.startswith("--") else f"{flag} mean", mean, 1)
    if kind == "uniform":
        check_number(f"{flag} uniform width", spread, lo=0.0, hi=1.0, hint="; it is a fraction of the mean")
    elif kind == "lognormal":
        check_number(f"{flag} lognormal sigma", spread, lo=0.0, lo_open=True, hi=MAX_SIGMA)
    else:
        check_number(f"{flag} spread", spread)
    if kind == "file":
        if not isinstance(values, tuple) or not 1 <= len(values) <= MAX_REQUESTS:
            raise RidgelineError(f"{flag} file needs 1 to {MAX_REQUESTS:,} lengths")
        if not all(type(v) is int for v in values) or not 1 <= min(values) <= max(values) <= MAX_TOKENS:
            raise RidgelineError(f"{flag} file lengths must be whole numbers from 1 to {MAX_TOKENS:,}")
    elif not (isinstance(values, tuple) and len(values) == 0):
        raise RidgelineError(f"{flag} {kind} takes no list of values; that is for kind 'file'")


@dataclass(frozen=True)
class Lengths:
    """A length distribution around `mean` tokens."""

    kind: str = "fixed"
    mean: int = 1
    spread: float = 0.0  # uniform: half-width as a fraction of the mean; lognormal: sigma
    values: tuple[int, ...] = ()  # kind "file"

    def __post_init__(self) -> None:
        check_lengths(self.kind, self.mean, self.spread, self.values, "lengths")

    def upper(self) -> int | None:
        """The longest length it draws (None for lognormal, which has no longest)."""
        if self.kind == "fixed":
            return self.mean
        if self.kind == "uniform":
            return round(self.mean * (1 + self.spread))
        if self.kind == "file":
            return max(self.values)
        return None

    def sample(self, n: int, rng: random.Random) -> list[int]:
        """n integer lengths, at least 1 (and at most MAX_TOKENS, so that a far lognormal
        tail stays a sane integer; the context clips it later), rounded half to even."""
        if self.kind == "fixed":
            return [self.mean] * n
        if self.kind == "file":
            return rng.choices(self.values, k=n)
        if self.kind == "uniform":  # a value of 0 (round of under 0.5) becomes 1
            lo, width, draw = self.mean * (1 - self.spread), 2 * self.mean * self.spread, rng.random
            x = [round(lo + width * draw()) or 1 for _ in range(n)]
        else:
            mu, gauss, exp = math.log(self.mean) - self.spread**2 / 2, rng.gauss, math.exp
            x = [round(exp(gauss(mu, self.spread))) or 1 for _ in range(n)]
        return x if max(x, default=0) <= MAX_TOKENS else [min(v, MAX_TOKENS) for v in x]


def stream(seed: int, name: str) -> random.Random:
    """One seeded stream per kind of draw (arrivals, prompt lengths, output lengths), so each
    is the same whatever the others draw: the same seed gives the same lengths at any rate
    and the same arrivals for any lengths. Python's Mersenne Twister, as `measure` draws with:
    a short run loads no numpy."""
    return random.Random(f"{seed}/{name}")


def parse_lengths(spec: str, mean: int, flag: str) -> Lengths:
    """`fixed`, `uniform[:W]`, `lognormal[:SIGMA]` or `file:PATH`, around `mean` tokens (a
    file's lengths have their own mean)."""
    if not isinstance(spec, str):
        raise RidgelineError(f"{flag} must be text such as lognormal:0.5, got {_show(spec)}")
    kind, _, arg = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in LENGTHS:
        raise RidgelineError(
            f"{flag} {_show(spec)} is unknown: use fixed, uniform[:W], lognormal[:SIGMA] or file:PATH"
        )
    check_size(flag.replace("-dist", "-tokens"), mean, 1)
    if kind == "fixed":
        if arg.strip():
            raise RidgelineError(f"{flag} {_show(spec)}: fixed takes no argument; for a spread use uniform:W")
        return Lengths("fixed", mean)
    if kind == "file":
        if not arg:
            raise RidgelineError(f"{flag} file needs a path: file:lengths.txt (one length a line)")
        values = read_lengths(arg, flag)
        return Lengths("file", max(1, round(sum(values) / len(values))), 0.0, values)
    spread = DEFAULT_SPREAD[kind]
    if arg.strip():
        try:
            spread = float(arg)
        except ValueError:
            raise RidgelineError(
                f"{flag} {_show(spec)}: {_show(arg)} is not a number; e.g. {kind}:0.5"
            ) from None
    check_lengths(kind, mean, spread, (), flag)
    return Lengths(kind, mean, spread)


def text_lines(path: str | Path, flag: str) -> Iterator[tuple[int, str]]:
    """A user's text file, one (line number, line) at a time: UTF-8, each line at most
    MAX_LINE_BYTES and the whole at most MAX_FILE_BYTES, or one line saying which is wrong."""
    from pathlib import Path

    p = Path(path).expanduser()
    try:
        if p.is_dir():
            raise RidgelineError(f"{flag}: {str(p)!r} is a folder; give a file")
        handle = p.open("rb")
    except RidgelineError:  # a ValueError too: said once, as it is
        raise
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the name
        reason = getattr(exc, "strerror", None) or exc
        raise RidgelineError(f"{flag}: cannot read {str(p)!r}: {reason}") from None
    with handle:
        number = total = 0
        while True:
            try:
                raw = handle.readline(MAX_LINE_BYTES + 1)
            except OSError as exc:
                raise RidgelineError(f"{flag}: cannot read {str(p)!r}: {exc.strerror or exc}") from None
            if not raw:
                return
            number += 1
            total += len(raw)
            if len(raw) > MAX_LINE_BYTES:
                raise RidgelineError(
                    f"{p}:{number} is longer than {MAX_LINE_BYTES >> 20} MiB; is {flag} the right file?"
                )
            if total > MAX_FILE_BYTES:
                raise RidgelineError(f"{p} is larger than {MAX_FILE_BYTES >> 30} GiB; replay part of it")
            try:
                text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError:
                raise RidgelineError(f"{p}:{number} is not UTF-8 text; is {flag} the right file?") from None
            yield number, text


def whole_number(value: Any, text: bool) -> int | None:
    """A whole number as a JSON number (500 or 500.0) or, when `text`, as written in a CSV
    cell or a line; None when it is not one (or not finite)."""
    if isinstance(value, str) and text:
        value = value.strip()
        try:
            return int(value)
        except ValueError:
            try:
                value = float(value)
            except ValueError:
                return None
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def read_lengths(path: str, flag: str) -> tuple[int, ...]:
    """One whole number a line (`#` starts a comment), from 1 to MAX_TOKENS."""
    from pathlib import Path

    values: list[int] = []
    p = Path(path).expanduser()
    for number, line in text_lines(p, flag):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        value = whole_number(text, text=True)
        if value is None or not 1 <= value <= MAX_TOKENS:
            raise RidgelineError(
                f"{p}:{number}: {_show(text)} is not a length; write one whole number from 1 to "
                f"{MAX_TOKENS:,} a line"
            )
        if len(values) >= MAX_REQUESTS:
            raise RidgelineError(f"{flag}: {p} holds more than {MAX_REQUESTS:,} lengths; sample it down")
        values.append(value)
    if not values:
        raise RidgelineError(f"{flag}: {p} holds no lengths; write one whole number a line")
    return tuple(values)


def _column(values: Any, kinds: str) -> Any:
    """values as a 1-D numpy array whose dtype kind is one of `kinds`, or None."""
    import numpy as np

    try:
        a = np.asarray(values)
    except (TypeError, ValueError, OverflowError):
        return None
    return a if a.ndim == 1 and a.dtype.kind in kinds else None


@dataclass(frozen=True)
class Trace:
    """Arrivals and lengths replayed from a file: arrival seconds (in order, from 0 to
    MAX_SPAN_S), prompt tokens, decode steps."""

    arrival_s: tuple[float, ...]
    prompt: tuple[int, ...]
    output: tuple[int, ...]  # M = output_tokens - 1
    source: str = ""

    def __post_init__(self) -> None:
        import numpy as np

        columns = (self.arrival_s, self.prompt, self.output)
        if not all(isinstance(c, (tuple, list)) for c in columns):
            raise RidgelineError("a trace's arrival_s, prompt and output must be tuples")
        n = len(self.arrival_s)
        if not (len(self.prompt) == len(self.output) == n) or not 1 <= n <= MAX_REQUESTS:
            raise RidgelineError(
                f"a trace needs 1 to {MAX_REQUESTS:,} requests, each with an arrival, a prompt and an output"
            )
        t = _column(self.arrival_s, "iuf")
        if t is None or not bool(np.all(np.isfinite(t))) or t.min() < 0 or t.max() > MAX_SPAN_S:
            raise RidgelineError(f"a trace's arrival times must be finite seconds from 0 to {MAX_SPAN_S:g}")
        if bool(np.any(np.diff(t) < 0)):
            raise RidgelineError("a trace's arrival times must be in order (read_trace sorts a file's rows)")
        for name, values, lo in (("prompt", self.prompt, 1), ("output", self.output, 0)):
            a = _column(values, "iu")
            if a is None or a.min() < lo or a.max() > MAX_TOKENS:
                raise RidgelineError(
                    f"a trace's {name} lengths must be whole numbers from {lo} to {MAX_TOKENS:,}"
                )


TIME_KEYS = ("arrival_s", "timestamp", "time_s")


def read_trace(path: str, flag: str = "--trace") -> Trace:
    """A CSV (with a header) or JSONL file with a time column (`arrival_s` from the start, or
    `timestamp` in seconds, rebased to the first) and `prompt_tokens`, `output_tokens`.
    Every row has the time column of the first; rows may come in any order (a records file
    is written as requests finish) and are replayed in arrival order. Rows that carry an
    `error` (failed requests in a records file) are skipped."""
    from pathlib import Path

    import numpy as np

    p = Path(path).expanduser()
    is_csv = p.suffix.lower() == ".csv"
    rows = _csv_rows(p, flag) if is_csv else _jsonl_rows(p, flag)
    key: str | None = None
    times, prompts, outputs, lines = array("d"), array("q"), array("q"), array("q")
    for number, row in rows:
        if row.get("error"):
            continue
        if key is None:
            key = next((k for k in TIME_KEYS if row.get(k) not in (None, "")), None)
            if key is None:
                raise RidgelineError(
                    f"{p}:{number} has no arrival_s or timestamp column; add the arrival time"
                )
        where = f"{p}:{number}"
        t = _time(row.get(key), where, key, is_csv)
        prompt = _tokens(row.get("prompt_tokens"), where, "prompt_tokens", is_csv)
        tokens = _tokens(row.get("output_tokens"), where, "output_tokens", is_csv)
        if len(times) >= MAX_REQUESTS:
            raise RidgelineError(
                f"{p} holds more than {MAX_REQUESTS:,} requests, the most one run simulates; "
                "replay part of it"
            )
        times.append(t)
        prompts.append(prompt)
        outputs.append(tokens - 1)
        lines.append(number)
    if not times:
        raise RidgelineError(
            f"trace {p} holds no requests; give rows with arrival_s, prompt_tokens, output_tokens"
        )
    at = np.frombuffer(times, dtype=float)
    rebased = key != "arrival_s"
    if rebased:
        at = at - at.min()
    last = int(np.argmax(at))
    if at[last] > MAX_SPAN_S:
        since = "the first request" if rebased else "the start"
        raise RidgelineError(
            f"{p}:{lines[last]}: {key} is {at[last]:.3g} s after {since}; a trace spans at most "
            f"{MAX_SPAN_S:g} s: are the times in seconds?"
        )
    order = np.argsort(at, kind="stable")
    return Trace(
        tuple(at[order].tolist()),
        tuple(np.frombuffer(prompts, dtype=np.int64)[order].tolist()),
        tuple(np.frombuffer(outputs, dtype=np.int64)[order].tolist()),
        str(p),
    )


def _csv_rows(p: Path, flag: str) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(line for _, line in text_lines(p, flag))
    try:
        for row in reader:
            yield reader.line_num, row
    except csv.Error as exc:
        raise RidgelineError(f"{p}:{reader.line_num}: {exc}; is it a CSV file?") from None


def _jsonl_rows(p: Path, flag: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in text_lines(p, flag):
        if not line.strip():
            continue
        try:
            row = loads_json(line)
        except ValueError as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
            if "nested" in reason:  # said in words of its own: the CLI's last resort uses those
                reason = "its brackets nest deeper than a row of data does"
            raise RidgelineError(
                f"{p}:{number} is not JSON ({reason}); a trace is JSONL (one object a line) or CSV"
            ) from None
        if not isinstance(row, dict):
            raise RidgelineError(f"{p}:{number} is not a JSON object; a trace is one object a line")
        yield number, row


def _missing(value: Any, where: str, key: str) -> None:
    if value is None or value == "":
        raise RidgelineError(f"{where} has no {key}; every row needs one")
    if isinstance(value, str):
        raise RidgelineError(f"{where}: {key} {_show(value)} is a string; write the number without quotes")


def _time(value: Any, where: str, key: str, text: bool) -> float:
    if value is None or value == "":
        raise RidgelineError(f"{where} has no {key}, the time column of the first row; every row needs one")
    x = math.nan
    if isinstance(value, str) and text:
        with contextlib.suppress(ValueError):
            x = float(value.strip())
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        with contextlib.suppress(OverflowError):
            x = float(value)  # a JSON integer beyond any float
    else:
        _missing(value, where, key)
    if not (math.isfinite(x) and x >= 0):
        raise RidgelineError(f"{where}: {key} {_show(value)} must be a finite time >= 0, in seconds")
    return x


def _tokens(value: Any, where: str, key: str, text: bool) -> int:
    if not text or value is None or value == "":
        _missing(value, where, key)
    n = whole_number(value, text)
    if n is None or not 1 <= n <= MAX_TOKENS:
        raise RidgelineError(f"{where}: {key} {_show(value)} must be a whole number from 1 to {MAX_TOKENS:,}")
    return n


def lengths_from_trace(t: Trace) -> tuple[Lengths, Lengths]:
    """A trace's length mix, for drawing requests at other rates (`plan --trace`)."""
    outputs = tuple(max(o, 1) for o in t.output)
    return (
        Lengths("file", max(1, round(sum(t.prompt) / len(t.prompt))), 0.0, t.prompt),
        Lengths("file", max(1, round(sum(outputs) / len(outputs))), 0.0, outputs),
    )


@dataclass(frozen=True)
class Workload:
    """Everything about the traffic; `seed` makes a run reproducible. Checked when built."""

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

    def __post_init__(self) -> None:
        self.check()

    @property
    def closed(self) -> bool:
        return self.concurrency is not None

    def check(self) -> None:
        if not isinstance(self.arrival, str) or self.arrival not in ARRIVALS:
            raise RidgelineError(f"--arrival {_show(self.arrival)} is unknown: use {', '.join(ARRIVALS)}")
        for name, lengths in (("prompt", self.prompt), ("output", self.output)):
            if not isinstance(lengths, Lengths):
                raise RidgelineError(f"a workload's {name} must be Lengths, got {type(lengths).__name__}")
        if self.trace is not None and not isinstance(self.trace, Trace):
            raise RidgelineError(f"a workload's trace must be a Trace, got {type(self.trace).__name__}")
        if self.rate_per_s is not None:
            check_positive("--rate", self.rate_per_s, hi=MAX_RATE_PER_S, hint=" (requests per second)")
        elif self.trace is None and not self.closed:
            raise RidgelineError("give --rate (requests per second) for an open-loop run")
        lo, hi = BURSTINESS_RANGE
        check_number(
            "--burstiness", self.burstiness, lo=lo, hi=hi, hint="; it is the gamma shape, 1 is Poisson"
        )
        if self.concurrency is not None:
            check_size("--concurrency", self.concurrency, 1, MAX_REQUESTS)
        check_number("--think-time", self.think_s, lo=0.0, hi=MAX_SPAN_S, hint=" (seconds)")
        if self.requests is not None:
            check_size("--requests", self.requests, 1, MAX_REQUESTS)
        if self.duration_s is not None:
            check_positive("--duration", self.duration_s, hi=MAX_SPAN_S, hint=" (seconds)")
        if self.requests is None and self.duration_s is None and self.trace is None:
            raise RidgelineError("give --requests N or --duration S to bound the run")
        if self.trace is not None and self.closed:
            raise RidgelineError("a trace carries its own arrival times; drop --concurrency")
        check_size("--seed", self.seed, 0, MAX_SEED)
        check_number("--prefix-hit-rate", self.prefix_hit_rate, lo=0.0, hi=1.0, hi_open=True)
        check_size("--shared-prefix", self.shared_prefix_tokens, 0)
        if self.trace is None and not self.closed:
            rate = float(self.rate_per_s or 0.0)
            if self.requests is not None and self.requests / rate > MAX_SPAN_S:
                raise RidgelineError(
                    f"--requests {self.requests:,} at --rate {rate:g}/s arrive over about "
                    f"{self.requests / rate:.3g} s, more than a run spans ({MAX_SPAN_S:g} s): raise --rate"
                )
            if (
                self.requests is None
                and self.duration_s is not None
                and rate * self.duration_s > MAX_REQUESTS
            ):
                raise RidgelineError(
                    f"--rate {rate:g}/s for --duration {self.duration_s:g} s sends about "
                    f"{rate * self.duration_s:.3g} requests; one run simulates at most {MAX_REQUESTS:,}: "
                    "lower --rate or --duration"
                )


def check_context(w: Workload, max_context: int, model: str) -> None:
    """Lengths the model's context would cut are refused, not silently clamped: a fixed,
    uniform or file length beyond it, means that together overrun it, a shared prefix no
    prompt can hold. (A lognormal's far tail, or a long prompt drawn with a long output,
    is cut to the context, as a server stops at its context length.) A trace's requests
    are checked one by one in make_requests."""
    last = max_context - 1
    if w.shared_prefix_tokens > last:
        raise RidgelineError(
            f"--shared-prefix {w.shared_prefix_tokens:,} is beyond {model}'s context of "
            f"{max_context:,} tokens"
        )
    if w.trace is not None:
        return
    for lengths, name in ((w.prompt, "prompt"), (w.output, "output")):
        top = lengths.upper()
        if top is not None and top > last:
            if lengths.kind == "fixed":
                raise RidgelineError(
                    f"--{name}-tokens {top:,} is beyond {model}'s context of {max_context:,} tokens; "
                    f"give at most {last:,}"
                )
            raise RidgelineError(
                f"--{name}-dist {lengths.kind} draws {name}s of up to {top:,} tokens, beyond {model}'s "
                f"context of {max_context:,}; shorten them"
            )
    need = w.prompt.mean + w.output.mean
    if need > max_context:
        raise RidgelineError(
            f"--prompt-tokens {w.prompt.mean:,} + --output-tokens {w.output.mean:,} need a context of "
            f"{need:,} tokens, beyond {model}'s {max_context:,}; shorten them"
        )
    if w.shared_prefix_tokens and w.shared_prefix_tokens >= w.prompt.mean:
        raise RidgelineError(
            f"--shared-prefix {w.shared_prefix_tokens:,} is not shorter than the prompts "
            f"({w.prompt.mean:,} tokens): the shared prefix is the start of every prompt"
        )


def _check_trace_context(
    trace: Trace, prompt: list[int], output: list[int], max_context: int, model: str
) -> None:
    for i, (p, m) in enumerate(zip(prompt, output, strict=True)):
        if p > max_context - 1 or p + m > max_context:
            raise RidgelineError(
                f"{trace.source or 'the trace'}: the request arriving at {trace.arrival_s[i]:g} s has "
                f"{p:,} prompt and {m + 1:,} output tokens, a context of {p + m:,}, beyond {model}'s "
                f"{max_context:,}: replay it on a model with a longer context"
            )


def gaps(w: Workload, n: int, rng: random.Random) -> list[float]:
    """n gaps between arrivals, mean 1/rate: exponential (Poisson arrivals), gamma with shape
    k and scale 1 / (k x rate), or constant."""
    rate = float(w.rate_per_s or 1.0)
    if w.arrival == "constant":
        return [1.0 / rate] * n
    if w.arrival == "gamma":
        gamma, k = rng.gammavariate, w.burstiness
        return [gamma(k, 1.0 / (rate * k)) for _ in range(n)]
    log, draw = math.log, rng.random  # rng.expovariate(rate), written out: the same numbers, sooner
    return [-log(1.0 - draw()) / rate for _ in range(n)]


def open_arrivals(w: Workload, rng: random.Random) -> list[float]:
    """Arrival times of an open-loop run: `requests` of them, or all before `duration_s`."""
    if w.requests is not None:
        t = list(accumulate(gaps(w, w.requests, rng)))
        return [x - t[0] for x in t] if w.arrival == "constant" else t
    assert w.duration_s is not None
    rate = float(w.rate_per_s or 1.0)
    t, last = [], 0.0
    while last < w.duration_s:
        n = int(rate * (w.duration_s - last) * 1.1) + 64
        if len(t) + n > 2 * MAX_REQUESTS + 64_000:  # a bound on the loop; the check below says why
            break
        t += list(accumulate(gaps(w, n, rng), initial=last))[1:]
        last = t[-1]
    if w.arrival == "constant":
        t = [x - t[0] for x in t]
    t = t[: bisect_left(t, w.duration_s)]
    if len(t) > MAX_REQUESTS or last < w.duration_s:
        raise RidgelineError(
            f"more than {MAX_REQUESTS:,} requests arrive within --duration {w.duration_s:g} s at --rate "
            f"{rate:g}/s, the most one run simulates: lower --rate or --duration"
        )
    return t


def cached_prefix(w: Workload, prompt: list[int], block_tokens: int) -> tuple[list[int], list[int]]:
    """Per request, prompt tokens found in the prefix cache (whole blocks, and never the last
    token, which is always computed), and how many of them sit in shared blocks."""
    b = block_tokens
    if w.shared_prefix_tokens:
        most = w.shared_prefix_tokens // b * b
        shared = [min(most, (p - 1) // b * b) for p in prompt]
        return shared, shared
    rate = w.prefix_hit_rate
    if not rate:
        return [0] * len(prompt), [0] * len(prompt)
    return [min(int(rate * p) // b * b, (p - 1) // b * b) for p in prompt], [0] * len(prompt)


def clip_lengths(
    prompt: list[int], output: list[int], max_context: int, min_output: int = 1
) -> tuple[list[int], list[int]]:
    """Prompt in [1, max_context - 1]; prompt + output within the model's context."""
    if not prompt or (
        min(prompt) >= 1
        and max(prompt) <= max_context - 1
        and min(output) >= min_output
        and max(map(add, prompt, output)) <= max_context
    ):
        return prompt, output  # the usual case, checked at C speed
    prompt = [min(max(p, 1), max_context - 1) for p in prompt]
    output = [min(max(m, min_output), max_context - p) for p, m in zip(prompt, output, strict=True)]
    return prompt, output


def make_requests(w: Workload, max_context: int, block_tokens: int, model: str = "the model") -> Requests:
    """The open-loop requests (a trace, or arrivals drawn at the rate), or the first request
    of each closed-loop client, all at time 0."""
    arrival, prompt, output, hit, shared = request_columns(w, max_context, block_tokens, model)
    reqs = Requests()
    reqs.extend(arrival, prompt, output, hit, shared)
    if w.closed:
        reqs.client = list(range(len(arrival)))
    return reqs


def request_columns(
    w: Workload, max_context: int, block_tokens: int, model: str = "the model"
) -> tuple[list[float], list[int], list[int], list[int], list[int]]:
    """make_requests' arrivals, prompt and output lengths, prefix hits and shared tokens, as
    lists (a caller that only reads them skips the per-request state)."""
    w.check()
    check_context(w, max_context, model)
    if w.trace is not None:
        n = len(w.trace.arrival_s) if w.requests is None else min(w.requests, len(w.trace.arrival_s))
        if w.duration_s is not None:
            n = min(n, sum(1 for t in w.trace.arrival_s if t < w.duration_s))
            if n == 0:
                raise RidgelineError(f"no request of the trace arrives within --duration {w.duration_s:g} s")
        arrival = list(w.trace.arrival_s[:n])
        prompt, output = list(w.trace.prompt[:n]), list(w.trace.output[:n])
        _check_trace_context(w.trace, prompt, output, max_context, model)
    else:
        if w.closed:
            assert w.concurrency is not None
            n = w.concurrency if w.requests is None else min(w.concurrency, w.requests)
            arrival = [0.0] * n
        else:
            arrival = open_arrivals(w, stream(w.seed, "arrivals"))
            n = len(arrival)
            if n == 0:
                raise RidgelineError(
                    f"no request arrives within --duration {w.duration_s:g} s at --rate {w.rate_per_s:g}/s; "
                    "lengthen the run"
                )
        prompt = w.prompt.sample(n, stream(w.seed, "prompt"))
        prompt, output = clip_lengths(prompt, w.output.sample(n, stream(w.seed, "output")), max_context)
    hit, shared = cached_prefix(w, prompt, block_tokens)
    return arrival, prompt, output, hit, shared


class ClosedLoop:
    """Closed-loop clients: when a client's request finishes, its next one arrives after the
    think time, until `requests` have been sent or the next would arrive after `duration_s`
    (and never more than MAX_REQUESTS, nor after MAX_SPAN_S)."""

    def __init__(self, w: Workload, reqs: Requests, max_context: int, block_tokens: int) -> None:
        self.w = w
        self.reqs = reqs
        self.max_context = max_context
        self.block_tokens = block_tokens
        self.prompts, self.outputs = stream(w.seed, "follow-up prompt"), stream(w.seed, "follow-up output")
        self.pool: list[tuple[int, int, int, int]] = []

    def _refill(self) -> None:
        n = 4096
        prompt, output = clip_lengths(
            self.w.prompt.sample(n, self.prompts), self.w.output.sample(n, self.outputs), self.max_context
        )
        hit, shared = cached_prefix(self.w, prompt, self.block_tokens)
        self.pool = list(zip(prompt, output, hit, shared, strict=True))
        self.pool.reverse()

    def follow_up(self, done: int, finish_s: float) -> int | None:
        """The next request of the client whose request `done` finished, or None."""
        w, reqs = self.w, self.reqs
        t = finish_s + w.think_s
        if w.requests is not None and len(reqs) >= w.requests:
            return None
        if w.duration_s is not None and t >= w.duration_s:
            return None
        if len(reqs) >= MAX_REQUESTS:
            raise RidgelineError(
                f"the closed loop has sent {MAX_REQUESTS:,} requests {t:.3g} s into the run, the most "
                "one run simulates; shorten --duration or give --requests"
            )
        if t > MAX_SPAN_S:
            raise RidgelineError(
                f"the closed loop is still sending after {MAX_SPAN_S:g} s of simulated time; "
                "give fewer --requests, a shorter --think-time or a --duration"
            )
        if not self.pool:
            self._refill()
        prompt, output, hit, shared = self.pool.pop()
        return reqs.add(t, prompt, output, hit, shared, reqs.client[done])
