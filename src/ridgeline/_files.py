"""Reading the data files: TOML or JSON, shipped in the package or the user's own.

The parsers (json, tomllib) and pathlib load when a file is read, not when the core is
imported: a command that needs neither does not pay for them.
"""

from __future__ import annotations

import functools
import os
import sys

from ridgeline.errors import RidgelineError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

# The package is installed as files (a wheel, a checkout, the static site's unpacked zip),
# so its data is read beside this module rather than through importlib.resources.
DATA = os.path.join(os.path.dirname(__file__), "data")


def package_text(*parts: str) -> str:
    with open(os.path.join(DATA, *parts), encoding="utf-8") as handle:
        return handle.read()


@functools.cache
def package_names(folder: str, suffix: str) -> tuple[str, ...]:
    """The names of the package's data files in a folder (they never change in a run)."""
    return tuple(
        sorted(n[: -len(suffix)] for n in os.listdir(os.path.join(DATA, folder)) if n.endswith(suffix))
    )


# The package's TOML tables as parsed JSON (scripts/parse_data.py writes them; the data
# test holds each equal to its TOML). A process that reads the catalogue then needs json,
# which it loads anyway for its output, and not tomllib, which costs a CLI start ~5 ms.
PARSED = "parsed"


def package_table(name: str) -> dict[str, Any]:
    """A TOML table of the package (`gpus.toml`), read from its parsed twin."""
    stem = name.removesuffix(".toml")
    data = loads_json(package_text(PARSED, f"{stem}.json"))
    if not isinstance(data, dict):
        raise RidgelineError(f"data/{PARSED}/{stem}.json must hold an object; run scripts/parse_data.py")
    return data


# A user's data file (accelerators, calibration, a model's config) is a few kilobytes; a
# records file or trace can be large, and its readers stream it line by line instead.
MAX_DATA_FILE_BYTES = 16 * 1024 * 1024


def dumps(data: Any, indent: int | None = 2) -> str:
    """JSON as ridgeline writes it: strict, so a NaN or an infinity fails loudly here
    instead of reaching a reader as something that is not JSON."""
    import json

    return json.dumps(data, indent=indent, allow_nan=False, separators=None if indent else (",", ":"))


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def loads_json(text: str | bytes) -> Any:
    """Strict JSON: NaN and Infinity are refused; nesting too deep to be data is refused
    (Python's parser would otherwise die of RecursionError)."""
    import json

    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def loads_toml(text: str) -> dict[str, Any]:
    """TOML; a syntax error is a ValueError (tomllib.TOMLDecodeError)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    return tomllib.loads(text)


def parse(text: str, where: str) -> dict[str, Any]:
    """Parse TOML or JSON (by the name's suffix), with one clear line on failure."""
    try:
        data = loads_json(text) if where.endswith(".json") else loads_toml(text)
    except (ValueError, RecursionError) as exc:
        raise RidgelineError(f"cannot parse {where}: {exc}; fix the file's syntax") from None
    if not isinstance(data, dict):
        raise RidgelineError(f"{where} must hold a table/object at the top level")
    return data


def read_user_text(path: str | Path, limit_bytes: int = MAX_DATA_FILE_BYTES) -> str:
    """A user's text file, UTF-8, at most `limit_bytes` (a device such as /dev/zero or a
    huge file is refused after that many bytes, not read until memory runs out)."""
    from pathlib import Path

    p = Path(path).expanduser()
    if "\x00" in str(p):
        raise RidgelineError(f"{str(p)!r} holds a NUL byte; no file has such a name")
    try:
        if p.is_dir():
            raise RidgelineError(f"{str(p)!r} is a folder; give a file")
        with p.open("rb") as handle:
            raw = handle.read(limit_bytes + 1)
    except FileNotFoundError:
        raise RidgelineError(f"file not found: {str(p)!r}; check the path") from None
    except OSError as exc:
        raise RidgelineError(f"cannot read {str(p)!r}: {exc.strerror or exc}") from None
    if len(raw) > limit_bytes:
        raise RidgelineError(f"{str(p)!r} is larger than {limit_bytes // 2**20} MiB; is it the right file?")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RidgelineError(f"{str(p)!r} is not UTF-8 text; is it the right file?") from None


def read_user_file(path: str | Path) -> dict[str, Any]:
    from pathlib import Path

    text = read_user_text(path)
    return parse(text, str(Path(path).expanduser()))


def read_user_entries(path: str, build: Callable[[dict[str, Any], str], Any]) -> Any:
    """What `build` makes of a user's file (its table, and the path that names it in
    errors), made once and kept while the file keeps its size and age: the same entries,
    so what is built on them is kept too (Deployment.build)."""
    return _built(path, *_stamp(path), build)


@functools.lru_cache(maxsize=64)
def _built(path: str, mtime_ns: int, size: int, build: Callable[[dict[str, Any], str], Any]) -> Any:
    return build(read_user_file(path), path)


def _stamp(path: str) -> tuple[int, int]:
    """(mtime, size) of a file: one read is kept until they change."""
    try:
        st = os.stat(os.path.expanduser(path))  # as read_user_file reads it
    except (OSError, ValueError):
        return (-1, -1)  # missing or unreadable: the reader says which, in one line
    return (st.st_mtime_ns, st.st_size)


def config_dir() -> Path:
    """Where ridgeline keeps the user's own entries (`ridgeline probe` writes here)."""
    from pathlib import Path

    return Path(config_dir_text())


def config_dir_text() -> str:
    if env := os.environ.get("RIDGELINE_CONFIG_DIR"):
        return os.path.expanduser(env)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "ridgeline")
