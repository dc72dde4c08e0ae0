"""The deployment space `ridgeline search` walks: one axis per choice, and their product.

    gpu        accelerators (`ridgeline gpus`); default every one with a rental price (not Apple's)
    tp         tensor-parallel GPUs; default 1, 2, 4, 8
    pp, ep     pipeline stages, expert-parallel GPUs; default 1
    dp_attention   off, on: attention data-parallel over the TP GPUs (`--dp-attention`); default
               off, and off,on for a mixture-of-experts model (TP 1 once)
    weights    default bf16, fp8, int4-g128 (a .gguf, or a checkpoint stored quantised: its own stored mix)
    maths      default bf16, fp8 (fp8 maths runs fp8 weights: W8A8; the rest compute in bf16);
               or auto alone: each engine's own for the weights on the accelerator, what
               `estimate` runs without --maths (llama.cpp's quantised weights in int8)
    kv_dtype   default bf16, fp8
    engine     engine profiles (`ridgeline engines`); default every one
    max_num_seqs, max_num_batched_tokens   default `engine`: each profile's own scheduler's
    chunked_prefill   on, off; default `engine`: each profile's own (off: a prefill runs
               whole in one step, so the budget must hold the longest)
    replicas   default auto: from the fewest whose best case can carry the rate (prune.py)

Each axis comes from its flag (a comma-separated list), else from a TOML file
(`--space FILE.toml`, the same names, each a list), else its default. A point is one value
on every axis; its key names them all, and its seed is derived from its key and the search's
seed, so a point's run is the same on whichever worker or machine runs it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ridgeline import _files, checks
from ridgeline.architecture import Architecture
from ridgeline.checks import MAX_TOKENS, check_size, one_line
from ridgeline.engines import engines, get_engine
from ridgeline.errors import RidgelineError
from ridgeline.hardware import catalogue, catalogue_key
from ridgeline.precision import AUTO_MATHS, KV_DTYPES, MATHS_DTYPES, weight_bits

MAX_VALUES = 64  # values on one axis
MAX_POINTS = 1_000_000  # points in a space (each auto replica count a point)
MAX_PARALLEL = 1024  # tp, pp, ep
MAX_REPLICAS = 1000  # simulate.run.MAX_REPLICAS
MAX_SEQS = 1_000_000
AUTO_RUNGS = (1.0, 1.25, 1.5, 2.0)  # --replicas auto: the fewest the best case allows, times these
ENGINE_OWN = "engine"  # in a knob's list: the engine profile's own value

DEFAULTS: dict[str, tuple[Any, ...]] = {
    "tp": (1, 2, 4, 8),
    "pp": (1,),
    "ep": (1,),
    "dp_attention": (False,),
    "weights": ("bf16", "fp8", "int4-g128"),
    "maths": ("bf16", "fp8"),
    "kv_dtype": ("bf16", "fp8"),
    "max_num_seqs": (None,),
    "max_num_batched_tokens": (None,),
    "chunked_prefill": (None,),
    "replicas": (),
}
FLAGS = {
    "gpu": "--gpu",
    "tp": "--tp",
    "pp": "--pp",
    "ep": "--ep",
    "dp_attention": "--dp-attention",
    "weights": "--weights",
    "maths": "--maths",
    "kv_dtype": "--kv-dtype",
    "engine": "--engine",
    "max_num_seqs": "--max-num-seqs",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "chunked_prefill": "--chunked-prefill",
    "replicas": "--replicas",
}


@dataclass(frozen=True)
class Space:
    """The values on each axis. None in a knob's list: the engine's own; no replicas: auto."""

    gpu: tuple[str, ...]
    tp: tuple[int, ...]
    pp: tuple[int, ...]
    ep: tuple[int, ...]
    dp_attention: tuple[bool, ...]
    weights: tuple[str, ...]
    maths: tuple[str, ...]
    kv_dtype: tuple[str, ...]
    engine: tuple[str, ...]
    max_num_seqs: tuple[int | None, ...]
    max_num_batched_tokens: tuple[int | None, ...]
    chunked_prefill: tuple[bool | None, ...]
    replicas: tuple[int, ...]

    @property
    def auto_replicas(self) -> bool:
        return not self.replicas

    def shapes(self) -> list[Shape]:
        """Every deployment of the space (the axes but the knobs and the replicas), in order.
        Attention data-parallel over one GPU is that GPU's plain deployment: with both ways on
        the axis, TP 1 is tried once."""
        plain = False in self.dp_attention
        return [
            Shape(g, tp, pp, ep, w, m, kv, e, dp)
            for g in self.gpu
            for e in self.engine
            for w in self.weights
            for m in self.maths
            for kv in self.kv_dtype
            for tp in self.tp
            for pp in self.pp
            for ep in self.ep
            for dp in self.dp_attention
            if not (dp and tp == 1 and plain)
        ]

    def knobs(self) -> list[tuple[int | None, int | None, bool | None]]:
        return [
            (s, t, c)
            for s in self.max_num_seqs
            for t in self.max_num_batched_tokens
            for c in self.chunked_prefill
        ]

    @property
    def replica_choices(self) -> int:
        """Replica counts per configuration: the list's, or at most the auto rungs'."""
        return len(self.replicas) or len(AUTO_RUNGS)

    @property
    def size(self) -> int:
        """Points in the space, counting each auto rung (an upper bound under auto)."""
        n = 1
        for f in fields(self):
            if f.name != "replicas":
                n *= len(getattr(self, f.name))
        return n * self.replica_choices

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            values = getattr(self, f.name)
            if f.name == "replicas":
                out[f.name] = list(values) if values else "auto"
            elif f.name in ("max_num_seqs", "max_num_batched_tokens"):
                out[f.name] = [ENGINE_OWN if v is None else v for v in values]
            elif f.name == "chunked_prefill":
                out[f.name] = [ENGINE_OWN if v is None else ("on" if v else "off") for v in values]
            elif f.name == "dp_attention":
                out[f.name] = ["on" if v else "off" for v in values]
            else:
                out[f.name] = list(values)
        return out


@dataclass(frozen=True)
class Shape:
    """One deployment of the space: every axis but the scheduler's knobs and the replicas."""

    gpu: str
    tp: int
    pp: int
    ep: int
    weights: str
    maths: str
    kv_dtype: str
    engine: str
    dp_attention: bool = False


@dataclass(frozen=True)
class Point:
    """One point of the space, its knobs resolved to the engine's values."""

    shape: Shape
    max_num_seqs: int
    max_num_batched_tokens: int
    replicas: int
    chunked_prefill: bool = True

    @property
    def key(self) -> str:
        """Its axes' values; `|dp` under data-parallel attention, `|whole` when a prefill runs
        whole (chunked prefill off)."""
        s = self.shape
        dp = "|dp" if s.dp_attention else ""
        return (
            f"{s.gpu}|tp{s.tp}|pp{s.pp}|ep{s.ep}{dp}|w-{s.weights}|m-{s.maths}|kv-{s.kv_dtype}|{s.engine}"
            f"|seqs{self.max_num_seqs}|tokens{self.max_num_batched_tokens}"
            f"{'' if self.chunked_prefill else '|whole'}|x{self.replicas}"
        )


def point_seed(base_seed: int, key: str) -> int:
    """The seed of a point's run: from its key and the search's seed, never from the worker
    that runs it (sha-256, so it is the same in every process and on every machine)."""
    digest = hashlib.sha256(f"{base_seed}/{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1  # below 2**63: workload.MAX_SEED


# --- reading the axes --------------------------------------------------------------------


def split_list(flag: str, text: str) -> list[str]:
    """`a,b,c` into its values, each stripped; none empty."""
    return checks.split_list(flag, text, example(flag))


def example(flag: str) -> str:
    return {
        "--gpu": "h100-sxm,h200",
        "--weights": "bf16,fp8",
        "--maths": "bf16",
        "--kv-dtype": "bf16,fp8",
        "--engine": "vllm,sglang",
        "--replicas": "auto",
        "--chunked-prefill": "on,off",
        "--dp-attention": "off,on",
    }.get(flag, "1,2,4")


def whole(flag: str, value: Any, lo: int, hi: int) -> int:
    """A whole number in [lo, hi], from a flag's text or a file's integer."""
    if isinstance(value, str):
        text = value.strip()
        if not (text.isascii() and text.isdigit() and len(text) <= 30):
            raise RidgelineError(f"{flag}: {value!r:.60} is not a whole number; e.g. {flag} {example(flag)}")
        value = int(text)
    return check_size(flag, value, lo, hi)


def as_list(where: str, value: Any) -> list[Any]:
    """A file's value as a list (a lone value is a list of one)."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise RidgelineError(f"{where} lists no values; give at least one")
    if len(items) > MAX_VALUES:
        raise RidgelineError(f"{where} lists {len(items):,} values; at most {MAX_VALUES} an axis")
    for item in items:
        if isinstance(item, (list, dict)) or item is None:
            raise RidgelineError(f"{where} must be a list of plain values, got {item!r:.60}")
    return items


def dedupe(values: list[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(values))


def axis(name: str, raw: list[Any], where: str, known_gpus: dict[str, Any]) -> tuple[Any, ...]:
    """One axis's values, each checked; `where` names the flag or the file's key."""
    if len(raw) > MAX_VALUES:
        raise RidgelineError(f"{where} lists {len(raw):,} values; at most {MAX_VALUES} an axis")
    if name in ("tp", "pp", "ep"):
        return dedupe([whole(where, v, 1, MAX_PARALLEL) for v in raw])
    if name == "replicas":
        if len(raw) == 1 and isinstance(raw[0], str) and raw[0].strip().lower() == "auto":
            return ()
        return dedupe([whole(where, v, 1, MAX_REPLICAS) for v in raw])
    if name in ("max_num_seqs", "max_num_batched_tokens"):
        hi = MAX_SEQS if name == "max_num_seqs" else MAX_TOKENS
        return dedupe(
            [
                None if isinstance(v, str) and v.strip().lower() == ENGINE_OWN else whole(where, v, 1, hi)
                for v in raw
            ]
        )
    if name == "chunked_prefill":
        return dedupe([checks.check_switch(where, v) for v in raw])
    if name == "dp_attention":
        switches = [checks.check_switch(where, v) for v in raw]
        if None in switches:
            raise RidgelineError(f"{where}: on or off, not engine; e.g. {where} {example('--dp-attention')}")
        return dedupe(switches)
    if not all(isinstance(v, str) for v in raw):
        raise RidgelineError(f"{where} must list names, such as {example(FLAGS[name])}")
    values = [v.strip() for v in raw]
    if name == "gpu":
        if len(values) == 1 and values[0].lower() == "all":
            # a price, and a rental's: a purchase spread over hours (a Mac's) enters when named
            return tuple(n for n, acc in known_gpus.items() if acc.price_per_hour_usd > 0 and acc.rented)
        return dedupe([catalogue_key(str(v), known_gpus) for v in values])
    if name == "engine":
        if len(values) == 1 and values[0].lower() == "all":
            return tuple(engines())
        return dedupe([get_engine(v).name for v in values])
    if name == "weights":
        for v in values:
            if v.lower() != "file":
                weight_bits(v)  # unknown dtypes fail here, in one line
        return dedupe([v.lower() for v in values])
    if name == "maths" and AUTO_MATHS in values:
        if len(values) > 1:
            raise RidgelineError(f"{where}: auto is each engine's own maths; give it alone, or dtypes")
        return (AUTO_MATHS,)
    allowed = MATHS_DTYPES if name == "maths" else KV_DTYPES
    for v in values:
        if v not in allowed:
            what = "maths" if name == "maths" else "KV-cache"
            raise RidgelineError(f"{where}: unknown {what} dtype {v!r:.60}: use one of {', '.join(allowed)}")
    return dedupe(values)


SPACE_KEYS = tuple(FLAGS)


def read_space_file(path: str) -> dict[str, list[Any]]:
    """A TOML (or JSON) file of axes: `tp = [1, 2]`, `engine = ["vllm"]`, `replicas = "auto"`."""
    if not isinstance(path, str) or not path.strip():
        raise RidgelineError("--space needs a file, e.g. --space space.toml")
    where = str(Path(path).expanduser())
    data = _files.read_user_file(path)
    unknown = [k for k in data if k not in SPACE_KEYS]
    if unknown:
        raise RidgelineError(
            f"{one_line(where, 200)}: unknown axis {unknown[0]!r:.60}; the axes are {', '.join(SPACE_KEYS)}"
        )
    return {k: as_list(f"{one_line(where, 200)}: {k}", v) for k, v in data.items()}


def make_space(
    flags: dict[str, str | None],
    space_file: str | None,
    arch: Architecture,
    gpu_file: str | None = None,
) -> Space:
    """The space from the flags, else the file, else the defaults; every name resolved and
    every number checked here, so a bad value is one line before anything runs."""
    known_gpus = catalogue(gpu_file)
    from_file = read_space_file(space_file) if space_file is not None else {}
    defaults = dict(DEFAULTS)
    defaults["gpu"] = ("all",)
    defaults["engine"] = ("all",)
    if arch.file_bytes_per_param is not None:  # a .gguf or a quantised checkpoint: its own stored mix
        defaults["weights"] = ("file",)
    if arch.is_moe:  # engines serve large MoE models with attention data-parallel: weigh both
        defaults["dp_attention"] = (False, True)
    values: dict[str, tuple[Any, ...]] = {}
    for name, flag in FLAGS.items():
        text = flags.get(name)
        if text is not None:
            values[name] = axis(name, split_list(flag, text), flag, known_gpus)
        elif name in from_file:
            where = f"{one_line(str(Path(str(space_file)).expanduser()), 200)}: {name}"
            values[name] = axis(name, from_file[name], where, known_gpus)
        elif defaults[name] == ("all",):
            values[name] = axis(name, ["all"], flag, known_gpus)
        else:
            values[name] = tuple(defaults[name])
    if not values["gpu"]:
        raise RidgelineError(
            "no accelerator in the catalogue has a price; name them with --gpu and set --price"
        )
    space = Space(**values)
    if space.size > MAX_POINTS:
        raise RidgelineError(
            f"the space holds {space.size:,} points, more than {MAX_POINTS:,}: narrow an axis "
            "(fewer --gpu, --tp, dtypes or engines)"
        )
    return space
