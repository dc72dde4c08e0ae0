"""Per-request records to a file: JSONL (the shared records format), or CSV by the name.

JSON is written strictly (ridgeline._files.dumps): a NaN or an infinity is a bug and fails
here rather than reaching a reader as something that is not JSON.
"""

from __future__ import annotations

import csv
from typing import Any

from ridgeline import metrics
from ridgeline._files import dumps
from ridgeline.errors import RidgelineError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


def check_out_path(path: str) -> None:
    """Before a long run: the file can be made where `--out` says (its folder exists)."""
    from pathlib import Path

    p = Path(path).expanduser()
    try:
        if p.is_dir():
            raise RidgelineError(f"--out: {str(p)!r} is a folder; give a file name")
        if not p.parent.is_dir():
            raise RidgelineError(f"--out: folder {str(p.parent)!r} does not exist; create it first")
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte
        raise _cannot_write(p, exc) from None


def write_records(path: str, records: list[dict[str, Any]]) -> None:
    from pathlib import Path

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
                    handle.write(dumps(r, indent=None) + "\n")
    except (OSError, ValueError) as exc:
        raise _cannot_write(p, exc) from None


def _cannot_write(p: Path, exc: Exception) -> RidgelineError:
    return RidgelineError(f"--out: cannot write {str(p)!r}: {getattr(exc, 'strerror', None) or exc}")
