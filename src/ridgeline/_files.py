"""Reading the data files: TOML or JSON, shipped in the package or the user's own."""

from __future__ import annotations

import json
import os
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from ridgeline.errors import RidgelineError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def package_text(*parts: str) -> str:
    path = resources.files("ridgeline").joinpath("data")
    for part in parts:
        path = path.joinpath(part)
    return path.read_text(encoding="utf-8")


def package_names(folder: str, suffix: str) -> list[str]:
    root = resources.files("ridgeline").joinpath("data").joinpath(folder)
    return sorted(p.name[: -len(suffix)] for p in root.iterdir() if p.name.endswith(suffix))


def parse(text: str, where: str) -> dict[str, Any]:
    """Parse TOML or JSON (by the name's suffix), with one clear line on failure."""
    try:
        data = json.loads(text) if where.endswith(".json") else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise RidgelineError(f"cannot parse {where}: {exc}; fix the file's syntax") from None
    if not isinstance(data, dict):
        raise RidgelineError(f"{where} must hold a table/object at the top level")
    return data


def read_user_file(path: str | Path) -> dict[str, Any]:
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RidgelineError(f"file not found: {p}; check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RidgelineError(f"cannot read {p}: {exc}") from None
    return parse(text, str(p))


def config_dir() -> Path:
    """Where ridgeline keeps the user's own entries (`ridgeline probe` writes here)."""
    if env := os.environ.get("RIDGELINE_CONFIG_DIR"):
        return Path(env).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "ridgeline"
