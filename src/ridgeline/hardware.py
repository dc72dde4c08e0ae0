"""Accelerators: peaks per maths dtype, bandwidth, memory, interconnect, price.

The catalogue is `data/gpus.toml`. Users extend it with their own TOML or JSON file
(`--gpu-file`, the `RIDGELINE_GPUS` environment variable, or `gpus.toml`/`gpus.json`
in the config folder, where `ridgeline probe` saves `host`), or with one-off flags.
The config folder is looked in once a process (for each value of the variables that name
files and folders); a file found is parsed again whenever it changes (size or mtime).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cache, lru_cache

from ridgeline import _files
from ridgeline.checks import (
    BANDWIDTH_RANGE,
    MEMORY_RANGE,
    PEAK_FLOPS_RANGE,
    check_flag,
    check_number,
    check_positive,
    check_price,
    check_size,
)
from ridgeline.errors import RidgelineError, unknown_name

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

LINKS = ("nvlink", "pcie", "xgmi", "none")
FALLBACK = {"fp16": ("bf16",), "bf16": ("fp16",), "fp16acc16": ("fp16", "bf16")}  # same-rate dtypes
# a narrow dtype whose matmul share is not measured takes fp8's (other dtypes: FALLBACK's, bf16's)
SHARE_FALLBACK = {"fp4": ("fp8",), "int8": ("fp8",)}
# a large matmul's share of the data sheet's peak: above 1 where a board boosts past the clock
# the sheet assumes (a GeForce part's half-rate fp32-accumulate matmuls: 1.14 on an RTX 5090)
MAX_MATMUL_SHARE = 1.25
REFERENCE_MMA_ROWS = 64  # a tensor-core tile's rows where none is stated (Hopper's wgmma)
MAX_MMA_ROWS = 1024
# words of a vendor's or product line's that a GPU's name may carry and --gpu ignores
# ("NVIDIA GeForce RTX 4090", "Tesla T4", "AMD Instinct MI300X", "Apple M2 Ultra")
VENDOR_WORDS = frozenset({"nvidia", "geforce", "tesla", "amd", "instinct", "apple"})
MAX_ALIASES = 32
MAX_UNITS = 100_000  # GPU cores: an MI355X has 256, a B200 148


@dataclass(frozen=True)
class Accelerator:
    """One accelerator as the catalogue states it (data/gpus.toml)."""

    name: str
    peak_flops: dict[str, float]
    bandwidth_bytes_per_s: float
    memory_bytes: float
    interconnect_bytes_per_s: float = 0.0
    label: str = ""
    interconnect: str = ""
    price_per_hour_usd: float = 0.0
    source: str = ""
    link: str = ""  # nvlink, pcie, xgmi or none: the kind of link between the GPUs
    vendor: str = ""  # nvidia, amd, cpu, apple: whose software stack runs on it
    # The rows of its tensor cores' matrix tile, which a matmul of fewer tokens pads to:
    # 64 (Hopper's wgmma, and the reference for every older or other part) or 128
    # (datacentre Blackwell's tcgen05). An engine profile's small-M falloff scales with it.
    mma_rows: int = REFERENCE_MMA_ROWS
    # Whether its tensor cores reach their full rate only through asynchronous MMA (Hopper's
    # wgmma, datacentre Blackwell's tcgen05) rather than the warp-level mma of Ampere and Ada:
    # an engine profile's weight-only matmuls and attention-sink kernels differ there.
    async_mma: bool = False
    # The share of a dtype's dense peak that the best-shaped large matmul sustains, measured
    # (data/gpus.toml cites the measurements); an engine profile's matmul and attention
    # efficiencies are shares of that. A part that states none reaches its stated peaks.
    matmul_share: dict[str, float] = field(default_factory=dict)
    # How much longer its host CPU takes over the same serving-engine Python and launch work
    # than the x86 server the engine profiles' host costs are stated for: 1 unless stated
    # (GB200's Grace runs PyTorch's host path about 2.75 times slower). An engine profile's
    # host work a step (EngineProfile.host_sequence_s) scales with it.
    host_overhead: float = 1.0
    # Whether its price is an hourly rental (a cloud's), true unless stated; false where it is
    # a purchase spread over hours (Apple's Macs), which `search` does not set beside rentals
    # unless the part is named.
    rented: bool = True
    # Its GPU cores (NVIDIA's SMs, AMD's compute units, Apple's GPU cores) and their boost
    # clock: how many cycles a second its cores issue loads in. A kernel that keeps a few bytes
    # in flight a core (a matrix-vector product with a warp a row) streams at most units x
    # clock x its bytes a cycle, which on an HBM part can sit below the bandwidth (an engine
    # profile's memory.stream). 0: not stated, no such bound.
    units: int = 0
    clock_hz: float = 0.0
    # The dies one device spans where each kernel ends only when every die's cores have, over
    # the bridge between them (Apple's Ultras: two Max dies joined by UltraFusion): an engine's
    # per-step launch and synchronisation costs are paid that many times. 1 unless stated.
    dies: int = 1
    # Other names it answers to on --gpu: the short name people use ("h100" for the SXM part)
    # and what nvidia-smi or rocm-smi prints where that differs ("NVIDIA A100-SXM4-80GB").
    aliases: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def unit_cycles_per_s(self) -> float:
        """Its cores' cycles a second, all of them together (0 where the catalogue states neither)."""
        return self.units * self.clock_hz

    @property
    def link_kind(self) -> str:
        """The link's kind, as stated, or read off the interconnect's name."""
        if self.link:
            return self.link
        name = self.interconnect.lower()
        if name.startswith("nvlink"):
            return "nvlink"
        if name.startswith("pcie"):
            return "pcie"
        return "xgmi" if "infinity" in name or "xgmi" in name else "none"

    @property
    def vendor_name(self) -> str:
        """The vendor, as stated, or read off the label."""
        if self.vendor:
            return self.vendor
        label = self.label.lower()
        if "amd" in label or "instinct" in label:
            return "amd"
        return "cpu" if self.name == "host" else "nvidia"

    def _peak_dtype(self, maths: str) -> str | None:
        """The stated dtype whose peak this maths dtype runs at: its own, else a same-rate one."""
        return next((d for d in (maths, *FALLBACK.get(maths, ())) if d in self.peak_flops), None)

    def peak(self, maths: str) -> float:
        """Dense peak FLOP/s for a maths dtype (fp16 falls back to bf16 and back)."""
        dtype = self._peak_dtype(maths)
        if dtype is not None:
            return self.peak_flops[dtype]
        have = ", ".join(sorted(self.peak_flops))
        raise RidgelineError(f"{self.name} has no {maths} peak (it has {have}); choose --maths from those")

    def has_peak(self, maths: str) -> bool:
        """Whether it states a peak for this maths dtype (or for one that runs at its rate)."""
        return self._peak_dtype(maths) is not None

    def achievable(self, maths: str) -> float:
        """The share of `maths`'s peak a large matmul sustains: its own measurement, else the
        nearest measured dtype's (SHARE_FALLBACK or FALLBACK, then bf16), else 1 (the stated
        peak)."""
        for dtype in (maths, *SHARE_FALLBACK.get(maths, FALLBACK.get(maths, ())), "bf16"):
            if dtype in self.matmul_share:
                return self.matmul_share[dtype]
        return 1.0

    def sustained(self, maths: str) -> float:
        """The FLOP/s a large matmul in `maths` sustains: the peak times its measured share."""
        return self.peak(maths) * self.achievable(maths)

    def ridge(self, maths: str = "bf16") -> float:
        """The ridge point: peak FLOP/s over bandwidth, in FLOPs per byte."""
        return self.peak(maths) / self.bandwidth_bytes_per_s


def _from_entry(name: str, entry: dict[str, Any], where: str) -> Accelerator:
    def figure(key: str, value: Any) -> float:
        return _figure(f"{name} {key}", value, where)

    try:
        peaks = {str(k): figure(f"peak_flops.{k}", v) for k, v in dict(entry["peak_flops"]).items()}
        acc = Accelerator(
            name=name,
            peak_flops=peaks,
            bandwidth_bytes_per_s=figure("bandwidth_bytes_per_s", entry["bandwidth_bytes_per_s"]),
            memory_bytes=figure("memory_bytes", entry["memory_bytes"]),
            interconnect_bytes_per_s=figure(
                "interconnect_bytes_per_s", entry.get("interconnect_bytes_per_s", 0.0)
            ),
            label=str(entry.get("label", name)),
            interconnect=str(entry.get("interconnect", "")),
            price_per_hour_usd=figure("price_per_hour_usd", entry.get("price_per_hour_usd", 0.0)),
            source=str(entry.get("source", where)),
            link=str(entry.get("link", "")).lower(),
            vendor=str(entry.get("vendor", "")).lower(),
            mma_rows=check_size(
                f"{name} mma_rows in {where}", entry.get("mma_rows", REFERENCE_MMA_ROWS), maximum=MAX_MMA_ROWS
            ),
            matmul_share=_shares(name, entry.get("matmul_share", {}), where),
            async_mma=check_flag(f"{name} async_mma in {where}", entry.get("async_mma", False)),
            host_overhead=check_number(
                f"{name} host_overhead in {where}", entry.get("host_overhead", 1.0), lo=0.1, hi=100.0
            ),
            rented=check_flag(f"{name} rented in {where}", entry.get("rented", True)),
            aliases=_aliases(name, entry.get("aliases", []), where),
            units=check_size(f"{name} units in {where}", entry.get("units", 0), minimum=0, maximum=MAX_UNITS),
            clock_hz=check_number(f"{name} clock_hz in {where}", entry.get("clock_hz", 0.0), lo=0.0, hi=1e10),
            dies=check_size(f"{name} dies in {where}", entry.get("dies", 1), maximum=16),
        )
    except KeyError as exc:
        raise RidgelineError(
            f"accelerator {name!r} in {where} lacks {exc.args[0]}: give peak_flops, "
            "bandwidth_bytes_per_s and memory_bytes"
        ) from None
    except RidgelineError:
        raise
    except (TypeError, ValueError):  # dict() of something that is not a table
        raise RidgelineError(
            f"accelerator {name!r} in {where}: peak_flops must be a table such as {{ bf16 = 989e12 }}"
        ) from None
    check_accelerator(acc)
    return acc


def _shares(name: str, table: Any, where: str) -> dict[str, float]:
    if not isinstance(table, dict):
        raise RidgelineError(
            f"accelerator {name!r} in {where}: matmul_share must be a table such as {{ bf16 = 0.8 }}"
        )
    return {
        str(k): check_positive(f"{name} matmul_share.{k} in {where}", v, hi=MAX_MATMUL_SHARE)
        for k, v in table.items()
    }


def _aliases(name: str, value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or len(value) > MAX_ALIASES:
        raise RidgelineError(
            f"accelerator {name!r} in {where}: aliases must be a list of at most {MAX_ALIASES} names, "
            'such as ["h100"]'
        )
    out = []
    for alias in value:
        if not isinstance(alias, str) or not gpu_key(alias) or len(alias) > 100:
            raise RidgelineError(
                f"accelerator {name!r} in {where}: an alias must be a name, got {alias!r:.60}"
            )
        out.append(alias.lower())
    return tuple(out)


def gpu_key(name: str) -> str:
    """A GPU's name as --gpu compares it: lower case, its words joined by hyphens, a vendor's
    or product line's words left out, so that "NVIDIA GeForce RTX 4090" is rtx-4090 and
    "NVIDIA A100-SXM4-80GB" is a100-sxm4-80gb."""
    words = re.split(r"[^a-z0-9.+]+", str(name).lower()[:200])
    return "-".join(w for w in words if w and w not in VENDOR_WORDS)


def resolve_name(name: str, gpus: dict[str, Accelerator]) -> str | None:
    """The catalogue's name for `name`: itself (in any case), else the part whose name, then
    whose alias, reads the same under gpu_key (of two aliases, the later entry's: a user's
    file wins over the catalogue)."""
    key = str(name).lower()
    if key in gpus:
        return key
    wanted = gpu_key(key)
    named = [n for n in gpus if gpu_key(n) == wanted]
    aliased = [n for n, acc in gpus.items() if wanted in map(gpu_key, acc.aliases)]
    found = named or aliased
    return found[-1] if found else None


def catalogue_key(name: str, gpus: dict[str, Accelerator]) -> str:
    """The catalogue's name for a --gpu value (resolve_name), or one line with the closest
    names when no part answers to it."""
    key = resolve_name(name, gpus)
    if key is None:
        if str(name).lower().endswith((".toml", ".json")):  # what --gpu-file reads
            raise RidgelineError(
                f"--gpu takes a name, not a file ({name!r}): load the file with --gpu-file "
                "and pass the name of a table in it"
            )
        raise unknown_name("GPU", name, gpus, "ridgeline gpus", compared=gpu_key(name))
    return key


def _figure(field: str, value: Any, where: str) -> float:
    """One figure as a float, or one line naming its field. JSON allows integers of any
    length, and float() refuses those beyond 1.8e308 with an OverflowError."""
    try:
        return float(value)
    except OverflowError:
        got = "a number beyond 1.8e308"
    except (TypeError, ValueError):
        got = f"{value!r:.60}"
    raise RidgelineError(f"{field} in {where} must be a number such as 989e12, got {got}")


def check_accelerator(acc: Accelerator) -> None:
    """Every figure finite and inside what any accelerator could have."""
    name = acc.name
    for dtype, peak in acc.peak_flops.items():
        _within(f"{name} peak_flops.{dtype}", peak, PEAK_FLOPS_RANGE)
    _within(f"{name} bandwidth_bytes_per_s", acc.bandwidth_bytes_per_s, BANDWIDTH_RANGE)
    _within(f"{name} memory_bytes", acc.memory_bytes, MEMORY_RANGE)
    for dtype, share in acc.matmul_share.items():
        check_positive(f"{name} matmul_share.{dtype}", share, hi=MAX_MATMUL_SHARE)
    _within(f"{name} interconnect_bytes_per_s", acc.interconnect_bytes_per_s, (0.0, BANDWIDTH_RANGE[1]))
    check_price(f"{name} price_per_hour_usd", acc.price_per_hour_usd)
    if acc.link not in ("", *LINKS):
        raise RidgelineError(f"{name} link must be one of {', '.join(LINKS)}, got {acc.link!r}")


def _within(name: str, value: float, bounds: tuple[float, float], scale: float = 1.0) -> float:
    return check_number(name, value, lo=bounds[0] / scale, hi=bounds[1] / scale)


def _entries(data: dict[str, Any], where: str) -> dict[str, Accelerator]:
    """The file's accelerators under lower-case names, as --gpu looks them up: `[MyGPU]`
    is `mygpu` (its label keeps the spelling), and a second spelling of it is refused."""
    out: dict[str, Accelerator] = {}
    for spelled, entry in data.items():
        if not isinstance(entry, dict):
            raise RidgelineError(f"{where}: {spelled!r} must be a table of fields, see data/gpus.toml")
        name = spelled.lower()
        if name in out:
            raise RidgelineError(
                f"{where}: {spelled!r} repeats the accelerator {name!r} (names ignore case); keep one"
            )
        out[name] = _from_entry(name, {"label": spelled, **entry}, where)
    return out


@lru_cache(maxsize=1)
def builtin_catalogue() -> dict[str, Accelerator]:
    return _entries(_files.package_table("gpus.toml"), "gpus.toml")


def user_files(gpu_file: str | Path | None = None) -> list[str]:
    """The user's accelerator files, in the order they apply: those the environment names,
    then --gpu-file."""
    env = os.environ.get
    found = environment_files(env("RIDGELINE_GPUS"), env("RIDGELINE_CONFIG_DIR"), env("XDG_CONFIG_HOME"))
    return [*found, *_named([gpu_file] if gpu_file else [])]


@cache
def environment_files(listed: str | None, *folders: str | None) -> tuple[str, ...]:
    """gpus.toml and gpus.json in the config folder, then the RIDGELINE_GPUS list: looked for
    once a process for each value of the variables that name them (`ridgeline probe` saves
    `host` there for the next process)."""
    folder = _files.config_dir_text()
    found = [p for p in (os.path.join(folder, n) for n in ("gpus.toml", "gpus.json")) if os.path.exists(p)]
    return tuple(_named([*found, *(listed or "").split(os.pathsep)]))


def _named(paths: list[str | Path]) -> list[str]:
    """Each path as the messages and `source` name it (pathlib's spelling)."""
    if not any(paths):
        return []
    from pathlib import Path

    return [str(Path(p)) for p in paths if p]


def catalogue(gpu_file: str | Path | None = None) -> dict[str, Accelerator]:
    """Built-in accelerators, then the user's files; later entries win."""
    files = user_files(gpu_file)
    if not files:
        return builtin_catalogue()
    gpus = dict(builtin_catalogue())
    for path in files:
        gpus.update(_files.read_user_entries(path, _entries))
    return gpus


def get_accelerator(
    name: str = "h100-sxm",
    gpu_file: str | Path | None = None,
    peak_tflops: float | None = None,
    bandwidth_tbs: float | None = None,
    memory_gb: float | None = None,
) -> Accelerator:
    """One accelerator by name, with optional one-off overrides in TFLOP/s, TB/s and GB."""
    gpus = catalogue(gpu_file)
    acc = gpus[catalogue_key(name, gpus)]
    changes: dict[str, Any] = {}
    if peak_tflops is not None:
        _within("--peak-tflops", peak_tflops, PEAK_FLOPS_RANGE, 1e12)
        changes["peak_flops"] = {**acc.peak_flops, "bf16": peak_tflops * 1e12}
    if bandwidth_tbs is not None:
        _within("--bandwidth-tbs", bandwidth_tbs, BANDWIDTH_RANGE, 1e12)
        changes["bandwidth_bytes_per_s"] = bandwidth_tbs * 1e12
    if memory_gb is not None:
        _within("--memory-gb", memory_gb, MEMORY_RANGE, 1e9)
        changes["memory_bytes"] = memory_gb * 1e9
    if changes:
        from dataclasses import replace

        acc = replace(acc, **changes, source=f"{acc.source} (overridden on the command line)")
        check_accelerator(acc)
    return acc
