"""Records of a measured run: one flat JSONL object per finished request, appended and
flushed the moment it finishes (`metrics.append_record`), so Ctrl-C, a crash or a kill
loses none; `--resume` reads them back and runs only what is missing.
"""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

from ridgeline import metrics
from ridgeline.errors import RidgelineError
from ridgeline.measure.client import Stream
from ridgeline.measure.workload import Point

# The least a time of a record may be, above zero. No token comes back in less than a
# microsecond (a loopback round trip alone takes several), so a smaller TTFT, TPOT or E2E is
# a broken or hand-made record; and a ratio over one (bytes per step / TPOT, ideal / measured)
# can run to infinity (5e-324 s). Zero keeps its meaning: no first token, or every token in
# one network read.
MIN_TIME_S = 1e-6
TIME_KEYS = ("ttft_s", "tpot_s", "e2e_s")


def output_tokens_from(s: Stream, counted: int | None) -> tuple[int, str]:
    """N and where it came from: usage, else a tokenizer on the text, else the number of
    token-bearing chunks (most servers send one token per chunk)."""
    if s.completion_tokens is not None:
        return s.completion_tokens, "usage"
    if counted is not None:
        return counted, "tokenizer"
    return len(s.token_times_s), "estimate"


def build(
    s: Stream,
    point: Point,
    request_id: int,
    prompt_tokens: int,
    prompt_source: str,
    max_tokens: int,
    run_start_s: float,
    arrival_s: float,
    counted: int | None = None,
    model: str = "",
) -> dict[str, Any]:
    """A record from one stream, its times relative to the run's start."""
    times = s.token_times_s
    ok = s.error_kind is None
    n, source = output_tokens_from(s, counted) if times else (0, "none")
    gaps = [b - a for a, b in itertools.pairwise(times)]
    return metrics.make_record(
        prompt_tokens=s.prompt_tokens if s.prompt_tokens is not None else prompt_tokens,
        output_tokens=n,
        concurrency=point.concurrency,
        arrival_s=arrival_s,
        send_s=s.send_s - run_start_s,
        ttft_s=times[0] - s.send_s if ok else None,
        e2e_s=times[-1] - s.send_s if ok else None,
        queue_s=max(s.send_s - run_start_s - arrival_s, 0.0),
        tokens_source=source,
        error=s.error,
        request_id=request_id,
        model=model,
        target_prompt_tokens=point.prompt_tokens,
        rate_per_s=point.rate_per_s,
        max_tokens=max_tokens,
        prompt_tokens_source="usage" if s.prompt_tokens is not None else prompt_source,
        error_kind=s.error_kind,
        http_status=s.status,
        finish_reason=s.finish_reason,
        first_event_s=None if s.first_event_s is None else s.first_event_s - s.send_s,
        chunks=len(times),
        chunk_gaps_s=gaps,
        chunk_tokens=[1] * len(gaps) if n == len(times) else None,
    )


def prepare_file(path: Path, resume: bool) -> list[dict[str, Any]]:
    """Records already written (for --resume), the file trimmed of a torn last line; a
    fresh run refuses to append to someone's results."""
    if path.is_dir():
        raise RidgelineError(f"--out {path} is a folder: give a file name such as {path / 'results.jsonl'}")
    if path.exists() and not path.is_file():
        raise RidgelineError(f"--out {path} is not a regular file: records are read back, so give a file")
    try:
        if not path.exists() or path.stat().st_size == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()  # fail now, not after the prompts are built, if it cannot be written
            return []
        if not resume:
            raise RidgelineError(
                f"{path} already holds records: pass --resume to continue that run, or another --out"
            )
        earlier = metrics.read_records(path)  # checked before anything is cut or appended
        check_resumable(earlier, path)
        check_times(earlier, path)
        with path.open("rb+") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(size - 1, 0))
            if handle.read(1) != b"\n":  # a kill mid-write: drop the partial line before appending
                handle.seek(0)
                raw = handle.read()
                handle.truncate(raw.rfind(b"\n") + 1)
    except OSError as exc:
        raise RidgelineError(f"--out {str(path)!r}: {exc.strerror or exc}") from None
    return earlier


# What every record `measure` writes holds, and what resuming reads of it: which request
# of which point it was (so it is not sent again), and, unless it failed, its times and its
# count (so the summary can be made). A record without them is another tool's, or hand-made.
RESUME_KEYS = ("request_id", "target_prompt_tokens")
SUCCESS_KEYS = ("ttft_s", "e2e_s", "output_tokens")


def check_resumable(records: list[dict[str, Any]], path: Path) -> None:
    """Refuse, before anything is sent or cut, a file whose records `measure` did not write:
    resuming it would send requests and then fail to summarise them."""
    for number, rec in enumerate(records, 1):
        wanted = RESUME_KEYS if rec.get("error") else RESUME_KEYS + SUCCESS_KEYS
        missing = [key for key in wanted if rec.get(key) is None]
        if missing:
            raise RidgelineError(
                f"--resume: record {number} of {path} has no {missing[0]!r}, which every record "
                "measure writes holds: this is not a measure run to continue; give another --out"
            )


def check_times(records: list[dict[str, Any]], path: str | Path) -> None:
    """Refuse a record whose TTFT, TPOT or E2E is above zero but under MIN_TIME_S."""
    for number, rec in enumerate(records, 1):
        for key in TIME_KEYS:
            value = rec.get(key)
            if value is not None and 0 < value < MIN_TIME_S:
                raise RidgelineError(
                    f"record {number} of {path}: {key} {value!r} is under {MIN_TIME_S:g} s, faster "
                    "than any token can come back: fix or delete that record"
                )


def done_ids(records: list[dict[str, Any]], point: Point) -> set[int]:
    return {int(r["request_id"]) for r in records if point.matches(r) and r.get("request_id") is not None}


# Kinds as records written before they were spelled for people: counted under today's names.
_OLD_KINDS = {
    "http_4xx": "http 4xx",
    "http_429": "http 429",
    "http_5xx": "http 5xx",
    "timeout": "request timeout",
    "disconnect": "disconnected mid-stream",
    "malformed": "malformed SSE",
    "empty": "empty stream",
    "non_streaming": "not streaming",
    "server_error": "error event",
    "connect": "connect failed",
    "transport": "transport error",
}


def error_counts(records: list[dict[str, Any]]) -> dict[str, int]:
    """Failed requests by kind ("connect refused", "http 503", ...), the most common first."""
    kinds = Counter(str(r.get("error_kind") or "error") for r in records if r.get("error"))
    merged: Counter[str] = Counter()
    for kind, n in kinds.items():
        merged[_OLD_KINDS.get(kind, kind)] += n
    return dict(sorted(merged.items(), key=lambda kv: (-kv[1], kv[0])))


def kinds_text(counts: dict[str, int]) -> str:
    """ "connect refused: 2, http 503: 1": how a progress line and a summary name them."""
    return ", ".join(f"{kind}: {n}" for kind, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _span_s(recs: list[dict[str, Any]]) -> float:
    """From the first send to the last token (or the last send, for failures)."""
    starts = [r["send_s"] for r in recs if r.get("send_s") is not None]
    ends = [r["send_s"] + (r.get("e2e_s") or 0.0) for r in recs if r.get("send_s") is not None]
    return max(ends) - min(starts) if starts else 0.0


def summary(recs: list[dict[str, Any]], slo: metrics.Slo | None = None) -> dict[str, Any]:
    """metrics.summarize, plus ITL per token, decode tokens/s and where counts came from."""
    ok = [r for r in recs if not r.get("error")]
    itl: list[float] = []
    for r in ok:
        if r.get("chunk_tokens"):
            itl += metrics.itl_per_token(r["chunk_gaps_s"], r["chunk_tokens"])
    rates = [metrics.decode_tokens_per_s(r["ttft_s"], r["e2e_s"], r["output_tokens"]) for r in ok]
    out = metrics.summarize(recs, _span_s(recs), slo).to_dict()
    out.update(
        itl_s=metrics.percentiles(itl, "itl_s").to_dict(),
        decode_tokens_per_s=metrics.percentiles(rates, "decode_tokens_per_s").to_dict(),
        error_kinds=error_counts(recs),
        tokens_source=dict(Counter(str(r.get("tokens_source")) for r in ok)),
        short_of_max_tokens=sum(
            1 for r in ok if r.get("max_tokens") and int(r["output_tokens"]) < int(r["max_tokens"])
        ),
    )
    return out
