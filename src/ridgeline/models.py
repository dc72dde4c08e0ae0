"""Find a model by what the user typed: a catalogue name, a config.json, a .gguf file,
or a Hugging Face repository id (from the local cache; else the catalogue entry of a
repository it lists, models/aliases.toml; else fetched when online), or a listed
repository's name without its organisation ("Llama-3.1-8B-Instruct")."""

from __future__ import annotations

import os
import re
from functools import lru_cache

from ridgeline import _files
from ridgeline.architecture import Architecture
from ridgeline.checks import check_text
from ridgeline.errors import RidgelineError, unknown_name
from ridgeline.hf_config import architecture_from_config

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path


def catalogue_names() -> tuple[str, ...]:
    return _files.package_names("models", ".json")


@lru_cache(maxsize=64)
def catalogue_model(name: str) -> Architecture:
    text = _files.package_text("models", f"{name}.json")
    return architecture_from_config(_files.parse(text, f"{name}.json"), name, f"{name}.json")


@lru_cache(maxsize=1)
def catalogue_aliases() -> dict[str, str]:
    """Hugging Face repository ids (lower case) that name a catalogue model (models/aliases.toml)."""
    table = _files.parse(_files.package_text("models", "aliases.toml"), "aliases.toml")
    return {repo.lower(): str(name) for repo, name in table.items()}


def _hf_cached_config(repo: str) -> Path | None:
    """The newest config.json for `org/name` in the local Hugging Face cache."""
    from pathlib import Path

    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    hub = Path(os.environ.get("HF_HUB_CACHE") or home / "hub")
    snapshots = hub / f"models--{repo.replace('/', '--')}" / "snapshots"
    found = sorted(snapshots.glob("*/config.json"), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def _hf_config(repo: str) -> Path:
    from pathlib import Path

    cached = _hf_cached_config(repo)
    if cached:
        return cached
    if os.environ.get("HF_HUB_OFFLINE") not in (None, "", "0"):
        raise RidgelineError(
            f"'{repo}' is not in the Hugging Face cache and HF_HUB_OFFLINE is set: "
            "download its config.json and pass --model path/to/config.json"
        )
    try:
        from huggingface_hub import hf_hub_download  # optional: pip install ridgeline[hub]
    except ImportError:
        raise RidgelineError(
            f"'{repo}' is not in the local Hugging Face cache: pass --model path/to/config.json, "
            "or pip install huggingface_hub to fetch it"
        ) from None
    try:
        return Path(hf_hub_download(repo, "config.json"))
    except Exception as exc:  # network, auth, missing repo: all one line for the user
        raise RidgelineError(
            f"could not fetch config.json for '{repo}' ({type(exc).__name__}): "
            "download it yourself and pass --model path/to/config.json"
        ) from None


def get_model(spec: str | os.PathLike[str] = "llama-3.1-8b") -> Architecture:
    """Resolve --model: catalogue name, path to config.json or .gguf, or org/name."""
    spec = check_text("a model", spec, "a catalogue name or a path")
    try:
        return _resolve(spec)
    except (OSError, ValueError) as exc:
        if isinstance(exc, RidgelineError):
            raise
        # a name no file system takes: too long, a NUL byte, ...
        raise unknown_name("model", spec, catalogue_names(), "ridgeline models") from None


def _resolve(spec: str) -> Architecture:
    if spec.lower() in catalogue_names():
        return catalogue_model(spec.lower())
    from pathlib import Path

    path = Path(spec).expanduser()
    if spec.endswith(".gguf"):
        if not path.is_file():
            raise RidgelineError(f"GGUF file not found: {path}; check the path")
        from ridgeline.gguf_file import architecture_from_gguf

        return architecture_from_gguf(path)
    if spec.endswith(".json") or path.is_file():
        return architecture_from_config(_files.read_user_file(path), path.parent.name or path.stem, str(path))
    if path.is_dir() and (path / "config.json").is_file():
        return _resolve(str(path / "config.json"))
    if path.is_dir() and "/" in spec:
        raise RidgelineError(
            f"{str(path)!r} is a folder with no config.json: pass a model's folder, "
            "its config.json or a .gguf"
        )
    if path.exists() and not path.is_dir():
        raise RidgelineError(f"{str(path)!r} is not a regular file: pass a config.json or a .gguf")
    if spec.count("/") == 1 and not path.exists():
        alias = catalogue_aliases().get(spec.lower())
        if alias is not None and _hf_cached_config(spec) is None:
            return catalogue_model(alias)  # the repository's model, without a download
        config = _hf_config(spec)
        return architecture_from_config(_files.read_user_file(config), spec.split("/")[1], str(config))
    named = _by_name().get(model_key(spec))
    if named is not None:
        return catalogue_model(named)
    raise unknown_name("model", spec, catalogue_names(), "ridgeline models", compared=model_key(spec))


def model_key(spec: str) -> str:
    """A model's name as --model compares it: lower case, spaces and underscores as hyphens
    ("Llama 3.3 70B" is llama-3.3-70b)."""
    return "-".join(re.split(r"[\s_]+", str(spec).strip().lower()[:200]))


@lru_cache(maxsize=1)
def _by_name() -> dict[str, str]:
    """Catalogue models by name, and by the name part of each Hugging Face repository that
    names one ("Llama-3.1-8B-Instruct", "gemma-3-12b-it"), where no two repositories' name
    parts name different models."""
    out: dict[str, str] = {}
    clashes = set()
    for repo, name in catalogue_aliases().items():
        part = model_key(repo.split("/", 1)[1])
        if out.setdefault(part, name) != name:
            clashes.add(part)
    for part in clashes:
        del out[part]
    return {**out, **{n: n for n in catalogue_names()}}
