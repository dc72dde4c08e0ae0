"""Calibration files: what `ridgeline fit` learned from measurements, for `estimate`
and `simulate --calibration FILE`.

A calibration is flat: JSON or TOML, as the file's name says.
    {"effective_flops_per_s": 5.1e14, "effective_bandwidth_bytes_per_s": 2.6e12,
     "step_overhead_s": 0.0004, "ttft_offset_s": 0.05,
     "model": "...", "gpu": "...", "source": "ridgeline fit results.jsonl"}
or the same keys as `key = value` lines of TOML. Effective rates replace eta x peak; the
step overhead is added to every forward pass (kernel launches, sampling, scheduling); the
TTFT offset to every first token (network, HTTP and queueing outside the model). Rates
must be finite and positive, overheads not negative and at most a minute: a NaN or an
infinity here would become one in every estimate made with it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ridgeline import _files
from ridgeline.checks import check_number, check_path
from ridgeline.efficiency import Efficiency
from ridgeline.errors import RidgelineError

FORMATS = (".json", ".toml")
RATES = ("effective_flops_per_s", "effective_bandwidth_bytes_per_s")
OVERHEADS = ("step_overhead_s", "ttft_offset_s")
TEXTS = ("model", "gpu", "source")
MAX_OVERHEAD_S = 60.0  # a step's or a first token's fixed cost: seconds are already a broken server
MAX_SHARE = 10.0  # of a peak: a measured rate may beat a catalogue's peak a little, not tenfold


@dataclass(frozen=True)
class Calibration:
    """Rates and fixed costs fitted to measurements (`ridgeline fit`)."""

    effective_flops_per_s: float
    effective_bandwidth_bytes_per_s: float
    step_overhead_s: float = 0.0
    ttft_offset_s: float = 0.0
    model: str = ""
    gpu: str = ""
    source: str = ""

    def efficiency(self, peak_flops: float, bandwidth_bytes_per_s: float) -> Efficiency:
        return Efficiency(
            self.effective_flops_per_s / peak_flops,
            self.effective_bandwidth_bytes_per_s / bandwidth_bytes_per_s,
            self.step_overhead_s,
            self.ttft_offset_s,
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _checked(where: str, data: dict[str, Any]) -> Calibration:
    """The calibration a table holds, every number finite and in range, or one line."""
    hint = "; rewrite it with `ridgeline fit ... --out FILE`"
    missing = [key for key in RATES if key not in data]
    if missing:
        raise RidgelineError(f"calibration {where} lacks {missing[0]!r}{hint}")

    def name(key: str) -> str:
        return f"calibration {where}: {key}"

    numbers = {key: check_number(name(key), data[key], lo=0.0, lo_open=True, hint=hint) for key in RATES}
    for key in OVERHEADS:
        numbers[key] = check_number(name(key), data.get(key, 0.0), lo=0.0, hi=MAX_OVERHEAD_S, hint=hint)
    texts = {key: data.get(key, "") for key in TEXTS}
    for key, value in texts.items():
        if not isinstance(value, str):
            raise RidgelineError(f"{name(key)} must be text, got {value!r}{hint}")
    return Calibration(
        numbers["effective_flops_per_s"],
        numbers["effective_bandwidth_bytes_per_s"],
        numbers["step_overhead_s"],
        numbers["ttft_offset_s"],
        texts["model"],
        texts["gpu"],
        texts["source"],
    )


def check_calibration_path(path: str | Path) -> Path:
    """A name `save_calibration` can write: .json or .toml, not a folder."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise RidgelineError(
            f"--out {str(p)!r} is a folder: give a file name such as {str(p / 'cal.toml')!r}"
        )
    _format(p)
    return p


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise RidgelineError(
            f"calibration file {str(path)!r}: name it .json or .toml (the extension picks the format)"
        )
    return suffix


def _toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for c in text:
        if c in '"\\':
            out.append("\\" + c)
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04X}")
        elif 0xD800 <= ord(c) <= 0xDFFF:  # a lone surrogate cannot be UTF-8
            out.append("\\uFFFD")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def to_toml(cal: Calibration) -> str:
    """Flat `key = value` TOML, numbers as Python writes floats (valid TOML, exact)."""
    lines = ["# ridgeline calibration: `ridgeline estimate --calibration FILE`"]
    for key, value in cal.to_dict().items():
        lines.append(f"{key} = {_toml_string(value) if isinstance(value, str) else repr(float(value))}")
    return "\n".join(lines) + "\n"


def save_calibration(cal: Calibration, path: str | Path) -> Path:
    """Write the calibration in the format its name says: .json or .toml."""
    p = check_calibration_path(path)
    suffix = _format(p)
    cal = _checked(str(p), cal.to_dict())  # nothing non-finite or negative is ever written
    text = _files.dumps(cal.to_dict()) + "\n" if suffix == ".json" else to_toml(cal)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise RidgelineError(f"cannot write {str(p)!r}: {exc.strerror or exc}") from None
    return p


def load_calibration(path: str | Path) -> Calibration:
    """Read a calibration: JSON when the name ends .json (or, for a name that is neither,
    when the text starts with "{"), TOML otherwise."""
    p = Path(check_path("--calibration", path)).expanduser()
    text = _files.read_user_text(p)
    suffix = p.suffix.lower()
    as_json = suffix == ".json" or (suffix != ".toml" and text.lstrip().startswith("{"))
    try:
        data = _files.loads_json(text) if as_json else _files.loads_toml(text)
    except (ValueError, RecursionError) as exc:  # TOMLDecodeError is a ValueError
        kind = "JSON" if as_json else "TOML"
        raise RidgelineError(
            f"cannot read calibration {str(p)!r} as {kind}: {str(exc) or 'nested too deeply'}; "
            "rewrite it with `ridgeline fit ... --out FILE`"
        ) from None
    if not isinstance(data, dict):
        raise RidgelineError(f"calibration {str(p)!r} must hold a table of keys at the top level")
    return _checked(str(p), data)
