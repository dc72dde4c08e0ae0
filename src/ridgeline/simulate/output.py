"""Per-request records to a file: JSONL (the shared records format), or CSV by the name."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from ridgeline import metrics
from ridgeline.errors import RidgelineError


def write_records(path: str, records: list[dict[str, Any]]) -> None:
    p = Path(path).expanduser()
    try:
        with p.open("w", encoding="utf-8", newline="") as handle:
            if p.suffix.lower() == ".csv":
                writer = csv.DictWriter(
                    handle, fieldnames=list(records[0]) if records else list(metrics.RECORD_KEYS)
                )
                writer.writeheader()
                writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in records)
            else:
                for r in records:
                    metrics.append_record(handle, r)
    except OSError as exc:
        raise RidgelineError(f"--out: cannot write {p}: {exc.strerror or exc}") from None
