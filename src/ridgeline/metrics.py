"""Latency metrics shared by the simulator and the measurement client.

Definitions (one request, N = output tokens it emitted, counting the first):
    TTFT  = first token-bearing event - send time
    E2E   = last token-bearing event - send time
    TPOT  = (E2E - TTFT) / (N - 1), undefined when N <= 1
    decode tokens/s = (N - 1) / (E2E - TTFT)
A request with `output` M decode steps emits N = M + 1 tokens, so TPOT is the mean step.

Records are flat JSONL, one object per request, with the keys of RECORD_KEYS; the
simulator and `ridgeline measure` both write them, and `compare` reads either.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import cache
from itertools import accumulate
from typing import Any

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

RECORD_KEYS = (
    "prompt_tokens",  # tokens in the prompt
    "output_tokens",  # tokens emitted, N
    "concurrency",  # the load level (closed-loop concurrency, or None)
    "arrival_s",  # scheduled arrival, seconds from the run's start
    "send_s",  # actual send, seconds from the run's start (>= arrival_s)
    "ttft_s",  # from the send
    "tpot_s",
    "e2e_s",  # from the send
    "queue_s",  # send (or admission) minus arrival: coordinated omission made visible
    "preemptions",
    "tokens_source",  # usage | tokenizer | estimate | simulated
    "error",  # None, or a short description
)
MIN_SAMPLES = {"p50": 2, "p90": 10, "p99": 100}


def tpot_s(ttft_s: float, e2e_s: float, output_tokens: int) -> float | None:
    """Time per output token after the first; None when fewer than two tokens came."""
    if output_tokens <= 1:
        return None
    return (e2e_s - ttft_s) / (output_tokens - 1)


def decode_tokens_per_s(ttft_s: float, e2e_s: float, output_tokens: int) -> float | None:
    if output_tokens <= 1 or e2e_s <= ttft_s:
        return None
    return (output_tokens - 1) / (e2e_s - ttft_s)


def itl_per_token(gaps_s: Sequence[float], tokens_per_gap: Sequence[int]) -> list[float]:
    """Inter-token latency: each chunk gap divided by the tokens that chunk carried."""
    return [g / n for g, n in zip(gaps_s, tokens_per_gap, strict=False) if n > 0]


def make_record(**fields: Any) -> dict[str, Any]:
    """A flat record with every key present (missing ones None), TPOT derived if absent."""
    rec = {key: fields.pop(key, None) for key in RECORD_KEYS}
    if rec["tpot_s"] is None and None not in (rec["ttft_s"], rec["e2e_s"], rec["output_tokens"]):
        rec["tpot_s"] = tpot_s(rec["ttft_s"], rec["e2e_s"], rec["output_tokens"])
    rec.update(fields)  # face-specific extras ride along after the shared keys
    return rec


def append_record(handle: Any, record: dict[str, Any]) -> None:
    """Append one record and flush it, so a crash loses no finished request. Strict JSON:
    a NaN here is a bug, and fails loudly rather than writing a line no reader accepts."""
    from ridgeline._files import dumps

    handle.write(dumps(record, indent=None) + "\n")
    handle.flush()


# What each key of a record may hold (None is always allowed): readers do arithmetic on
# these, so a string, a NaN or a negative time is refused where the file is read, with its
# line, instead of surfacing as a traceback or a fit on garbage.
MAX_RECORD_TOKENS = 10_000_000
MAX_RECORD_S = 1e10
MAX_RECORD_BYTES = 16 * 2**20  # one line
_COUNT_KEYS = {
    "prompt_tokens": 0,
    "output_tokens": 0,
    "preemptions": 0,
    "request_id": 0,
    "concurrency": 1,
    "target_prompt_tokens": 1,
    "max_tokens": 1,
    "chunks": 0,
}
_SECONDS_KEYS = ("arrival_s", "send_s", "ttft_s", "tpot_s", "e2e_s", "queue_s", "first_event_s")
_TEXT_KEYS = ("error", "error_kind", "model", "tokens_source", "finish_reason")


def check_record(rec: dict[str, Any]) -> None:
    """Raise RidgelineError naming the first key whose value no reader can use."""
    from ridgeline.checks import check_number, check_size
    from ridgeline.errors import RidgelineError

    for key, least in _COUNT_KEYS.items():
        if rec.get(key) is not None:
            check_size(key, rec[key], minimum=least, maximum=MAX_RECORD_TOKENS)
    for key in _SECONDS_KEYS:
        if rec.get(key) is not None:
            check_number(key, rec[key], lo=0.0, hi=MAX_RECORD_S)
    if rec.get("rate_per_s") is not None:
        check_number("rate_per_s", rec["rate_per_s"], lo=0.0, lo_open=True, hi=1e9)
    for key in _TEXT_KEYS:
        if rec.get(key) is not None and not isinstance(rec[key], str):
            raise RidgelineError(f"{key} must be text or null, got {rec[key]!r}")
    for key, check in (("chunk_gaps_s", "seconds"), ("chunk_tokens", "counts")):
        values = rec.get(key)
        if values is None:
            continue
        if not isinstance(values, list):
            raise RidgelineError(f"{key} must be a list of {check} or null, got {values!r}")
        for v in values:
            if check == "seconds":
                check_number(f"each of {key}", v, lo=0.0, hi=MAX_RECORD_S)
            else:
                check_size(f"each of {key}", v, minimum=0, maximum=MAX_RECORD_TOKENS)
    if rec.get("chunk_tokens") is not None and len(rec["chunk_tokens"]) != len(rec.get("chunk_gaps_s") or []):
        raise RidgelineError("chunk_tokens must have one count per entry of chunk_gaps_s")


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Read JSONL records, strictly: every line a JSON object (no NaN, no Infinity) whose
    numbers are numbers in range. The one exception is a torn last line (a writer killed
    mid-line), which is skipped. Anything else is one line naming the file, line and key."""
    from pathlib import Path

    from ridgeline._files import loads_json
    from ridgeline.errors import RidgelineError

    p = Path(path).expanduser()
    if not p.is_file():
        what = "is a folder" if p.is_dir() else "is not a regular file" if p.exists() else None
        said = f"{str(p)!r} {what}" if what else f"records file not found: {str(p)!r}"
        raise RidgelineError(f"{said}; pass the JSONL file that measure or simulate wrote")
    out = []
    try:
        with p.open("rb") as handle:
            for number, raw in enumerate(iter(lambda: handle.readline(MAX_RECORD_BYTES + 1), b""), 1):
                where = f"{p}:{number}"
                if len(raw) > MAX_RECORD_BYTES:
                    raise RidgelineError(f"{where} is longer than 16 MiB: not a records file")
                torn = not raw.endswith(b"\n")  # only the last line can lack its newline
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError:
                    if torn:
                        continue
                    raise RidgelineError(
                        f"{where} is not UTF-8 text (binary bytes): not a records file"
                    ) from None
                if not text.strip():
                    continue
                try:
                    rec = loads_json(text)
                except ValueError as exc:
                    if torn:
                        continue
                    reason = str(exc).split(": line ")[0]
                    raise RidgelineError(
                        f"{where} is not a JSON record ({reason}); fix or delete that line"
                    ) from None
                if not isinstance(rec, dict):
                    raise RidgelineError(f"{where} is not a JSON object; the file is not a records file")
                try:
                    check_record(rec)
                except RidgelineError as exc:
                    raise RidgelineError(f"{where}: {exc}; fix or delete that line") from None
                out.append(rec)
    except OSError as exc:
        raise RidgelineError(f"cannot read {str(p)!r}: {exc.strerror or exc}") from None
    return out


@dataclass(frozen=True)
class Percentiles:
    n: int
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    # the true p99's 95% interval (`quantile_ranks`); None above when n values cannot bound it
    p99_ci95: tuple[float, float | None] | None
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


P99_CONFIDENCE = 0.95


def percentiles(values: Iterable[float | None], name: str = "value") -> Percentiles:
    """p50/p90/p99 (linear interpolation, as numpy and vLLM's bench compute them), with n
    and a 95% interval on the p99 of the distribution the values came from; warns when a
    percentile rests on too few samples. `values` may be an array, NaN for a missing value."""
    return percentiles_of({name: values})[name]


def percentiles_of(columns: dict[str, Any]) -> dict[str, Percentiles]:
    """`percentiles` of each column: one sort (or, for a long column, one partition) reads
    its percentiles and the two order statistics of its p99's interval."""
    out: dict[str, Percentiles] = {}
    for name, values in columns.items():
        x = _samples(values)
        n = len(x)
        if n == 0:
            out[name] = _no_samples(name)
            continue
        lo, hi = quantile_ranks(n, 0.99, P99_CONFIDENCE)
        (p50, p90, p99), ranked = percentiles_and_ranks(x, (50, 90, 99), (lo, hi))
        out[name] = _percentiles(name, n, float(math.fsum(x) / n), (p50, p90, p99), ranked)
    return out


def weighted_percentiles(values: Sequence[float], counts: Sequence[int], name: str = "value") -> Percentiles:
    """`percentiles` of the values, each repeated its count of times, without making the
    repeats (the simulator's inter-token latencies: a step's time once for every sequence
    that waited it for a token): the order statistics are read off the running counts."""
    if len(values) > NUMPY_VALUES:  # a long run's rows: numpy's sort, the same order statistics
        import numpy as np

        v, c = np.asarray(values, dtype=float), np.asarray(counts, dtype=np.int64)
        keep = (c > 0) & ~np.isnan(v)
        order = np.argsort(v[keep], kind="stable")
        sorted_v, sorted_c = v[keep][order].tolist(), c[keep][order].tolist()
    else:
        pairs = sorted((float(v), int(c)) for v, c in zip(values, counts, strict=True) if c > 0 and v == v)
        sorted_v, sorted_c = [v for v, _ in pairs], [c for _, c in pairs]
    ends = list(accumulate(sorted_c))  # the rank after each value's last repeat
    n = ends[-1] if ends else 0
    if n == 0:
        return _no_samples(name)

    def at(rank: int) -> float:
        return float(sorted_v[bisect_right(ends, rank)])

    lo, hi = quantile_ranks(n, 0.99, P99_CONFIDENCE)
    marks = [_virtual_index(n, q) for q in (50, 90, 99)]
    values_at = [_lerp(at(a), at(b), h - a) for h, a, b in marks]
    ranked = [None if r is None else at(r) for r in (lo, hi)]
    mean = math.fsum(v * c for v, c in zip(sorted_v, sorted_c, strict=True)) / n
    return _percentiles(name, n, mean, (values_at[0], values_at[1], values_at[2]), ranked)


def _no_samples(name: str) -> Percentiles:
    return Percentiles(0, None, None, None, None, None, (f"{name}: no samples",))


def _percentiles(
    name: str, n: int, mean: float, p: tuple[float, float, float], ranked: Sequence[float | None]
) -> Percentiles:
    """The percentiles of n samples, with the p99's interval from its two order statistics
    and a note for each percentile that rests on too few."""
    notes = tuple(f"{name} {q} rests on {n} samples (want >= {k})" for q, k in MIN_SAMPLES.items() if n < k)
    ci = None if ranked[0] is None else (ranked[0], ranked[1])
    return Percentiles(n, mean, p[0], p[1], p[2], ci, notes)


def _virtual_index(n: int, q: float) -> tuple[float, int, int]:
    """numpy's virtual index of the q-th percentile of n values, computed as numpy computes
    it, and the ranks either side."""
    h = (n - 1) * (q / 100)
    lo = math.floor(h)
    return h, lo, min(lo + 1, n - 1)


@cache
def quantile_ranks(n: int, q: float, confidence: float) -> tuple[int | None, int | None]:
    """The two order statistics (0-based ranks among n sorted values) between which the
    q-quantile of the distribution the values came from lies with at least `confidence`,
    whatever that distribution. The count B of values below the true quantile is
    binomial(n, q), and the k-th smallest value (0-based) is below it exactly when B > k:
    so the interval [x(lo), x(hi)] misses it only when B <= lo or B > hi. Each tail is given
    half of 1 - confidence: lo is the largest rank with P(B <= lo) <= that, hi the smallest
    with P(B <= hi) >= 1 - that. A rank past the values is None: an interval on a p99 at
    95% has no upper end below 368 values (0.99^n must fall to 0.025)."""
    tail = (1 - confidence) / 2
    odds = q / (1 - q)
    mode = min(n, math.floor((n + 1) * q))
    pmf = {mode: 1.0}  # P(B = k), relative to the mode's, walked out until negligible
    k, p = mode, 1.0
    while k > 0 and p > 1e-18:
        p *= k / (n - k + 1) / odds  # P(B = k - 1) / P(B = k)
        k -= 1
        pmf[k] = p
    k, p = mode, 1.0
    while k < n and p > 1e-18:
        p *= (n - k) / (k + 1) * odds  # P(B = k + 1) / P(B = k)
        k += 1
        pmf[k] = p
    total = math.fsum(pmf.values())
    lo: int | None = None
    hi: int | None = None
    below = 0.0
    for k in sorted(pmf):
        below += pmf[k] / total  # P(B <= k)
        if below <= tail:
            lo = k
        if hi is None and below >= 1 - tail:
            hi = k
    return lo, (hi if hi is not None and hi < n else None)


NUMPY_VALUES = 20_000  # values above which numpy's partition reads the order statistics


def percentiles_and_ranks(
    x: Sequence[float], qs: Iterable[float], ranks: Iterable[int | None]
) -> tuple[list[float], list[float | None]]:
    """np.percentile(x, qs) with its default `linear` method, the same to the last digit,
    and the values of the given ranks in sorted order (None for None). They are order
    statistics, the same from a sort as from a partition: a sort below NUMPY_VALUES values
    (a short run's start-up would wait longer for numpy's import than the sort takes),
    numpy's partition above."""
    n = len(x)
    marks = [_virtual_index(n, q) for q in qs]
    ranks = list(ranks)
    wanted = sorted({i for _, lo, hi in marks for i in (lo, hi)} | {r for r in ranks if r is not None})
    if n > NUMPY_VALUES:
        import numpy as np

        part = np.partition(np.asarray(x, dtype=float), wanted)
        at = {i: float(part[i]) for i in wanted}
    else:
        s = sorted(x)
        at = {i: float(s[i]) for i in wanted}
    values = [_lerp(at[lo], at[hi], h - lo) for h, lo, hi in marks]
    return values, [None if r is None else at[r] for r in ranks]


def _lerp(a: float, b: float, t: float) -> float:
    """numpy's _lerp: from the nearer end, so the same to the last digit."""
    d = b - a
    return b - d * (1 - t) if t >= 0.5 else a + d * t


def _samples(values: Iterable[Any]) -> list[float]:
    """The values without the missing ones (None, NaN), in their order."""
    return [v for v in values if v is not None and v == v]


@dataclass(frozen=True)
class Slo:
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None

    def met(self, rec: dict[str, Any]) -> bool:
        if rec.get("error"):
            return False
        for key in ("ttft_s", "tpot_s", "e2e_s"):
            limit = getattr(self, key)
            if limit is None:
                continue
            value = rec.get(key)
            if key == "tpot_s" and value is None:
                continue  # a one-token answer has no TPOT to violate
            if value is None or value > limit:
                return False
        return True

    def met_count(self, ttft_s: Iterable[Any], tpot_s: Iterable[Any], e2e_s: Iterable[Any]) -> int:
        """How many requests `met`, from columns of requests without errors (None or NaN:
        missing; a missing TPOT is a one-token answer, which has none to violate)."""
        ttft, tpot, e2e = self.ttft_s, self.tpot_s, self.e2e_s
        return sum(
            1
            for t, p, e in zip(ttft_s, tpot_s, e2e_s, strict=True)
            if (ttft is None or (t is not None and t <= ttft))
            and (e2e is None or (e is not None and e <= e2e))
            and (tpot is None or p is None or p != p or p <= tpot)
        )


@dataclass(frozen=True)
class Summary:
    """What a run of requests came to: each latency's percentiles (over the requests without
    errors), the counts, and the rates over the run's duration. `to_dict()` is the JSON."""

    ttft_s: Percentiles
    tpot_s: Percentiles
    e2e_s: Percentiles
    queue_s: Percentiles
    requests: int
    completed: int
    errors: int
    duration_s: float
    throughput_tokens_per_s: float
    requests_per_s: float
    goodput_requests_per_s: float
    slo_attainment: float | None
    preemptions: int

    def latency(self, key: str) -> Percentiles:
        """The percentiles of one of LATENCY_KEYS, by name."""
        if key not in LATENCY_KEYS:
            raise KeyError(key)
        p: Percentiles = getattr(self, key)
        return p

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(records: Sequence[dict[str, Any]], duration_s: float, slo: Slo | None = None) -> Summary:
    """Aggregate records: percentiles of TTFT, TPOT, E2E and queueing; throughput; goodput."""
    ok = [r for r in records if not r.get("error")]
    slo = slo or Slo()
    return summarize_columns(
        {key: [r.get(key) for r in ok] for key in LATENCY_KEYS},
        requests=len(records),
        output_tokens=sum(int(r.get("output_tokens") or 0) for r in ok),
        good=sum(1 for r in ok if slo.met(r)),
        preemptions=sum(int(r.get("preemptions") or 0) for r in records),
        duration_s=duration_s,
    )


LATENCY_KEYS = ("ttft_s", "tpot_s", "e2e_s", "queue_s")


def summarize_columns(
    latencies: dict[str, Any],
    *,
    requests: int,
    output_tokens: int,
    good: int,
    preemptions: int,
    duration_s: float,
) -> Summary:
    """`summarize` from columns: each of LATENCY_KEYS over the requests without errors (a
    list, or an array with NaN where a value is missing), and the counts."""
    completed = len(latencies["ttft_s"])
    duration = max(duration_s, 1e-12)
    p = percentiles_of({k: latencies[k] for k in LATENCY_KEYS})
    return Summary(
        ttft_s=p["ttft_s"],
        tpot_s=p["tpot_s"],
        e2e_s=p["e2e_s"],
        queue_s=p["queue_s"],
        requests=requests,
        completed=completed,
        errors=requests - completed,
        duration_s=duration_s,
        throughput_tokens_per_s=output_tokens / duration,
        requests_per_s=completed / duration,
        goodput_requests_per_s=good / duration,
        slo_attainment=good / requests if requests else None,
        preemptions=preemptions,
    )
