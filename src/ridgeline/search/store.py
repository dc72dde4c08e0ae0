"""Where the finished points go: a folder of Parquet parts, one Parquet dataset.

    search.parquet/
      _search.json          what the points were simulated against (the fingerprint)
      part-00000.parquet    finished points, schema stage.COLUMNS
      part-00001.parquet    ...

A part is written whole under a hidden name and then renamed, so the folder only ever
holds whole parts: rows are buffered and written every FLUSH_S seconds or FLUSH_ROWS rows,
and on Ctrl-C, SIGTERM or any error before the search stops. Only a kill (SIGKILL, power)
can lose the last FLUSH_S seconds. Read it with `pyarrow.parquet.read_table(FOLDER)`,
`pandas.read_parquet(FOLDER)` or DuckDB's `read_parquet('FOLDER/*.parquet')` (names starting
with `_` or `.` are not data).

`--resume` continues a folder whose fingerprint matches this search's: its points are not
simulated again. The space may differ (a resumed search may add axes' values); the
workload, SLO, seed and ridgeline version may not.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from pathlib import Path
from typing import Any

from ridgeline._files import dumps, loads_json
from ridgeline.checks import one_line
from ridgeline.errors import RidgelineError
from ridgeline.search.stage import COLUMNS, FIDELITIES, STATUSES

META = "_search.json"
PART = re.compile(r"^part-(\d{5,})\.parquet$")
URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # s3://, http://...: the results are a local folder
FLUSH_S = 1.0
FLUSH_ROWS = 512
PYARROW_HINT = "pip install 'ridgeline[search]'"


def _arrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise RidgelineError(f"ridgeline search writes Parquet with pyarrow: {PYARROW_HINT}") from None
    return pa, pq


def schema() -> Any:
    pa, _ = _arrow()
    types = {"string": pa.string(), "int64": pa.int64(), "double": pa.float64(), "bool": pa.bool_()}
    return pa.schema([(name, types[kind]) for name, kind in COLUMNS.items()])


def first_difference(a: Any, b: Any, path: str = "") -> tuple[str, tuple[Any, Any]]:
    """The dotted path of the first field where two fingerprints differ, and its two values
    (descending into tables, so that a long one is not cut off before the field that
    differs)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                return first_difference(a.get(k), b.get(k), f"{path}.{k}" if path else str(k))
    return path, (a, b)


def _show(path: Path) -> str:
    return repr(one_line(str(path), 200))


class Store:
    """The results folder: rows already there (when resuming) and rows added as they finish."""

    def __init__(self, path: str | Path, fingerprint: dict[str, Any], resume: bool, overwrite: bool) -> None:
        if not isinstance(path, (str, Path)) or not str(path).strip():
            raise RidgelineError("--out needs a folder name, e.g. --out search.parquet")
        if URL.match(str(path)):  # not echoed: a URL may hold credentials
            raise RidgelineError("--out takes a local folder, not a URL; e.g. --out search.parquet")
        _arrow()  # pyarrow is here, or one line says how to get it
        self.path = Path(path).expanduser()
        self.fingerprint = loads_json(dumps(fingerprint))  # as it reads back from the file
        self.schema = schema()
        self.buffer: list[dict[str, Any]] = []
        self.last_flush = time.monotonic()
        self.written = 0
        self.existing: list[dict[str, Any]] = []
        try:
            self._open(resume, overwrite)
        except OSError as exc:
            raise RidgelineError(f"--out {_show(self.path)}: {exc.strerror or exc}") from None
        self.next_part = 1 + max((int(m[1]) for m in map(PART.match, self._names()) if m), default=-1)

    def _names(self) -> list[str]:
        return sorted(os.listdir(self.path))

    def _open(self, resume: bool, overwrite: bool) -> None:
        p = self.path
        if p.exists() and not p.is_dir():
            raise RidgelineError(f"--out {_show(p)} is a file; give a folder for the Parquet parts")
        if not p.exists():
            p.mkdir(parents=True)
        names = self._names()
        ours = [n for n in names if n == META or PART.match(n) or n.startswith(".part-")]
        others = [n for n in names if n not in ours]
        if others:
            raise RidgelineError(
                f"--out {_show(p)} holds files that are not a search's ({others[0]!r:.60}); give a new folder"
            )
        if META not in names:
            if ours:
                raise RidgelineError(f"--out {_show(p)} has parts but no {META}; give a new folder")
            self._write_meta()
            return
        if overwrite:
            for n in ours:
                (p / n).unlink()
            self._write_meta()
            return
        before = self._read_meta()
        done = sum(1 for n in names if PART.match(n))
        if not resume:
            raise RidgelineError(
                f"--out {_show(p)} holds an earlier search ({done} part(s)): --resume continues it, "
                "--overwrite starts afresh, or give another --out"
            )
        if before != self.fingerprint:
            differ, values = first_difference(before, self.fingerprint)
            was, now = (json.dumps(x)[:80] for x in values)
            raise RidgelineError(
                f"--resume: {_show(p)} was searched with another {differ} ({was}, now {now}); "
                "give the same options, or --overwrite"
            )
        self.existing = self._read_rows()

    def _write_meta(self) -> None:
        tmp = self.path / f".{META}.tmp"
        tmp.write_text(dumps({"ridgeline_search": 1, "fingerprint": self.fingerprint}), encoding="utf-8")
        os.replace(tmp, self.path / META)

    def _read_meta(self) -> dict[str, Any]:
        where = self.path / META
        try:
            data = loads_json(where.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise RidgelineError(f"{_show(where)} is not a search's metadata; give a new --out") from None
        if not isinstance(data, dict) or not isinstance(data.get("fingerprint"), dict):
            raise RidgelineError(f"{_show(where)} is not a search's metadata; give a new --out")
        return dict(data["fingerprint"])

    def _read_rows(self) -> list[dict[str, Any]]:
        _, pq = _arrow()
        rows: list[dict[str, Any]] = []
        for name in self._names():
            if not PART.match(name):
                continue
            try:  # a file, not a path: pyarrow reads a name such as `http:/...` as a URI
                with open(self.path / name, "rb") as part:
                    table = pq.read_table(part, schema=self.schema)
            except Exception as exc:  # pyarrow's own errors: a damaged part is one line, not a traceback
                raise RidgelineError(
                    f"cannot read {_show(self.path / name)} ({type(exc).__name__}); delete it and --resume"
                ) from None
            for row in table.to_pylist():
                bad = unwritten(row)
                if bad:
                    why = f"holds a row no search writes ({bad}); delete it and --resume"
                    raise RidgelineError(f"{_show(self.path / name)} {why}")
                rows.append(row)
        return rows

    def add(self, row: dict[str, Any]) -> None:
        self.buffer.append(row)
        if len(self.buffer) >= FLUSH_ROWS or time.monotonic() - self.last_flush >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows as one whole part."""
        self.last_flush = time.monotonic()
        if not self.buffer:
            return
        pa, pq = _arrow()
        table = pa.Table.from_pylist(self.buffer, schema=self.schema)
        name = f"part-{self.next_part:05d}.parquet"
        tmp = self.path / f".{name}.tmp"
        try:
            with open(tmp, "wb") as part:  # a file, not a path: never read as a URI
                pq.write_table(table, part)
            os.replace(tmp, self.path / name)
        except OSError as exc:
            raise RidgelineError(f"cannot write {_show(self.path / name)}: {exc.strerror or exc}") from None
        self.next_part += 1
        self.written += len(self.buffer)
        self.buffer = []


COUNTS = ("tp", "pp", "ep", "max_num_seqs", "max_num_batched_tokens", "replicas", "gpus_per_replica", "gpus")


def unwritten(row: dict[str, Any]) -> str | None:
    """What in a row read back no search writes (a part edited or damaged in a way Parquet
    still reads), or None: a number that is not finite or is negative, a count below one, an
    unknown status or fidelity, no key. A resumed search would answer from it."""
    if not row.get("key"):
        return "no key"
    if row.get("status") not in STATUSES or row.get("fidelity") not in FIDELITIES:
        return f"status {row.get('status')!r}, fidelity {row.get('fidelity')!r}"
    for column, kind in COLUMNS.items():
        value = row.get(column)
        if value is None or kind not in ("double", "int64"):
            continue
        if not math.isfinite(value) or value < (1 if column in COUNTS else 0):
            return f"{column} = {value}"
    return None


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """Every row of a results folder (for a reader of the files; the search keeps its own)."""
    _, pq = _arrow()
    from pyarrow import fs

    folder = str(Path(path).expanduser().resolve())  # absolute, on the local disk: never a URI
    return list(pq.read_table(folder, schema=schema(), filesystem=fs.LocalFileSystem()).to_pylist())
