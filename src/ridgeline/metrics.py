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

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

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
    """Append one record and flush it, so a crash loses no finished request."""
    handle.write(json.dumps(record, separators=(",", ":")) + "\n")
    handle.flush()


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Read JSONL records; a torn last line (a killed writer) is skipped, not fatal."""
    from ridgeline.errors import RidgelineError

    p = Path(path)
    if not p.is_file():
        raise RidgelineError(f"records file not found: {p}; pass the JSONL that measure or simulate wrote")
    out = []
    lines = p.read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            if number == len(lines):
                continue
            raise RidgelineError(
                f"{p}:{number} is not a JSON object; the file is not a records file"
            ) from None
        if not isinstance(rec, dict):
            raise RidgelineError(f"{p}:{number} is not a JSON object; the file is not a records file")
        out.append(rec)
    return out


@dataclass(frozen=True)
class Percentiles:
    n: int
    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    p99_ci95: tuple[float, float] | None  # bootstrap interval on p99
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def percentiles(
    values: Iterable[float | None], name: str = "value", seed: int = 0, boot: int = 1000
) -> Percentiles:
    """p50/p90/p99 (linear interpolation, as numpy and vLLM's bench compute them), with n
    and a bootstrap 95% interval on p99; warns when a percentile rests on too few samples."""
    import numpy as np

    xs = np.array([v for v in values if v is not None and not math.isnan(v)], dtype=float)
    n = int(xs.size)
    if n == 0:
        return Percentiles(0, None, None, None, None, None, (f"{name}: no samples",))
    p50, p90, p99 = (float(v) for v in np.percentile(xs, [50, 90, 99]))
    notes = tuple(f"{name} {q} rests on {n} samples (want >= {k})" for q, k in MIN_SAMPLES.items() if n < k)
    ci: tuple[float, float] | None = None
    if n >= 2:
        rng = np.random.default_rng(seed)
        chunk = max(1, min(boot, 2_000_000 // n))  # bound memory for large n
        samples = []
        for start in range(0, boot, chunk):
            k = min(chunk, boot - start)
            idx = rng.integers(0, n, size=(k, n))
            samples.append(np.percentile(xs[idx], 99, axis=1))
        lo, hi = np.percentile(np.concatenate(samples), [2.5, 97.5])
        ci = (float(lo), float(hi))
    return Percentiles(n, float(xs.mean()), p50, p90, p99, ci, notes)


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


def summarize(
    records: Sequence[dict[str, Any]], duration_s: float, slo: Slo | None = None, boot: int = 1000
) -> dict[str, Any]:
    """Aggregate records: percentiles of TTFT, TPOT, E2E and queueing; throughput; goodput."""
    ok = [r for r in records if not r.get("error")]
    out_tokens = sum(int(r.get("output_tokens") or 0) for r in ok)
    slo = slo or Slo()
    good = sum(1 for r in ok if slo.met(r))
    duration = max(duration_s, 1e-12)
    summary: dict[str, Any] = {
        key: percentiles((r.get(key) for r in ok), key, boot=boot).to_dict()
        for key in ("ttft_s", "tpot_s", "e2e_s", "queue_s")
    }
    summary.update(
        requests=len(records),
        completed=len(ok),
        errors=len(records) - len(ok),
        duration_s=duration_s,
        throughput_tokens_per_s=out_tokens / duration,
        requests_per_s=len(ok) / duration,
        goodput_requests_per_s=good / duration,
        slo_attainment=good / len(records) if records else None,
        preemptions=sum(int(r.get("preemptions") or 0) for r in records),
    )
    return summary
