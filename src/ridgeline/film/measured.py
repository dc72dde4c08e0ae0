"""Beats 7 and 8 from a records file (`ridgeline measure --out`): the medians of one user's
requests at each prompt length.

The seed's experiment is three prompt lengths at one request in flight: a short prompt, one
of about 2,000 tokens and one of about 16,000. Here the shortest length found is the short
prompt, the longest the long one, and the one nearest 2,000 between them the middle.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ridgeline.errors import RidgelineError

MIDDLE_TOKENS = 2000  # the seed's middle prompt


@dataclass(frozen=True)
class Group:
    """One prompt length: its requests' median prompt tokens, TTFT and decode rate."""

    prompt_tokens: int
    requests: int
    ttft_s: float
    decode_tokens_per_s: float | None  # 1 / median TPOT; None when no request decoded

    def to_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "requests": self.requests,
            "ttft_s": self.ttft_s,
            "decode_tokens_per_s": self.decode_tokens_per_s,
        }


@dataclass(frozen=True)
class Measured:
    path: str
    short: Group
    middle: Group | None
    long: Group | None  # None when the file has one prompt length

    @property
    def groups(self) -> list[Group]:
        return [g for g in (self.short, self.middle, self.long) if g is not None]

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "short": self.short.to_dict(),
            "middle": None if self.middle is None else self.middle.to_dict(),
            "long": None if self.long is None else self.long.to_dict(),
        }


def _group(records: list[dict[str, Any]]) -> Group:
    tpots = [r["tpot_s"] for r in records if r.get("tpot_s")]
    return Group(
        prompt_tokens=int(statistics.median(r["prompt_tokens"] for r in records)),
        requests=len(records),
        ttft_s=float(statistics.median(r["ttft_s"] for r in records)),
        decode_tokens_per_s=1.0 / statistics.median(tpots) if tpots else None,
    )


def read_measured(path: str | Path) -> Measured:
    """The file's short, middle and long prompts, from its successful requests at the lowest
    load it holds (the seed measured one user at a time)."""
    from ridgeline.metrics import read_records

    records = read_records(path)
    ok = [
        r
        for r in records
        if not r.get("error") and r.get("ttft_s") is not None and r.get("prompt_tokens") is not None
    ]
    if not ok:
        raise RidgelineError(
            f"{str(path)!r} holds no successful request with a TTFT and a prompt length: "
            "pass the JSONL that `ridgeline measure` wrote"
        )
    loads = [r.get("concurrency") or 1 for r in ok]
    lowest = min(loads)
    ok = [r for r, c in zip(ok, loads, strict=True) if c == lowest]
    by_length: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in ok:
        by_length[int(r.get("target_prompt_tokens") or r["prompt_tokens"])].append(r)
    lengths = sorted(by_length)
    short = _group(by_length[lengths[0]])
    long = _group(by_length[lengths[-1]]) if len(lengths) > 1 else None
    between = lengths[1:-1]
    middle = None
    if between:
        nearest = min(between, key=lambda n: abs(math.log(n / MIDDLE_TOKENS)))
        middle = _group(by_length[nearest])
    return Measured(str(path), short, middle, long)
