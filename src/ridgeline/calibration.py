"""Calibration files: what `ridgeline fit` learned from measurements, for `estimate`
and `simulate --calibration FILE`.

A calibration is JSON:
    {"effective_flops_per_s": 5.1e14, "effective_bandwidth_bytes_per_s": 2.6e12,
     "step_overhead_s": 0.0004, "ttft_offset_s": 0.05,
     "model": "...", "gpu": "...", "source": "ridgeline fit results.jsonl"}
Effective rates replace eta x peak; the step overhead is added to every forward pass
(kernel launches, sampling, scheduling); the TTFT offset to every first token (network,
HTTP and queueing outside the model).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ridgeline import _files
from ridgeline.errors import RidgelineError
from ridgeline.roofline import Efficiency


@dataclass(frozen=True)
class Calibration:
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


def save_calibration(cal: Calibration, path: str | Path) -> None:
    Path(path).write_text(json.dumps(cal.to_dict(), indent=2) + "\n", encoding="utf-8")


def load_calibration(path: str | Path) -> Calibration:
    data = _files.read_user_file(str(path) if str(path).endswith(".json") else Path(path))
    try:
        cal = Calibration(
            effective_flops_per_s=float(data["effective_flops_per_s"]),
            effective_bandwidth_bytes_per_s=float(data["effective_bandwidth_bytes_per_s"]),
            step_overhead_s=float(data.get("step_overhead_s", 0.0)),
            ttft_offset_s=float(data.get("ttft_offset_s", 0.0)),
            model=str(data.get("model", "")),
            gpu=str(data.get("gpu", "")),
            source=str(data.get("source", path)),
        )
    except KeyError as exc:
        raise RidgelineError(
            f"calibration {path} lacks '{exc.args[0]}': write it with `ridgeline fit ... --out FILE`"
        ) from None
    except (TypeError, ValueError):
        raise RidgelineError(
            f"calibration {path} has a non-numeric value; rewrite it with `ridgeline fit`"
        ) from None
    if cal.effective_flops_per_s <= 0 or cal.effective_bandwidth_bytes_per_s <= 0:
        raise RidgelineError(f"calibration {path}: effective rates must be positive")
    if cal.step_overhead_s < 0 or cal.ttft_offset_s < 0:
        raise RidgelineError(f"calibration {path}: overheads must not be negative")
    return cal
