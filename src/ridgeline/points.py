"""Where passes sit on the roofline: attainable FLOP/s = min(peak, intensity x bandwidth)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ridgeline.checks import check_size
from ridgeline.deployment import Deployment
from ridgeline.request import compute_bound_tokens
from ridgeline.roofline import StepTime
from ridgeline.step import decode_step, prefill_step


def attainable_flops(m: Deployment, intensity: float) -> float:
    """The roof at an intensity, with the machine's efficiencies (or engine) applied."""
    flops_per_s, bytes_per_s = m.reach
    return min(flops_per_s, bytes_per_s * intensity)


@dataclass(frozen=True)
class Point:
    """One pass on the chart."""

    flops: float
    bytes: float
    intensity: float
    attainable_flops: float
    bound: str
    time_s: float

    @classmethod
    def of(cls, m: Deployment, step: StepTime) -> Point:
        i = float(step.intensity)
        return cls(
            flops=float(step.flops),
            bytes=float(step.bytes),
            intensity=i,
            attainable_flops=attainable_flops(m, i),
            bound=str(step.bound),
            time_s=float(step.time_s),
        )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RooflinePoints:
    """`ridgeline roofline`: the accelerator's roof, and a prefill and a decode step on it."""

    gpu: str
    model: str
    maths: str
    preset: str
    peak_flops: float
    bandwidth_bytes_per_s: float
    ridge: float
    effective_ridge: float
    compute_bound_tokens: int
    prefill_tokens: int
    prefill: Point
    decode_batch: int
    decode_context: int
    decode: Point

    def to_dict(self) -> dict[str, Any]:
        """The JSON of `ridgeline roofline --json` and `/api/roofline`."""
        return {
            "gpu": self.gpu,
            "model": self.model,
            "maths": self.maths,
            "preset": self.preset,
            "peak_flops": self.peak_flops,
            "bandwidth_bytes_per_s": self.bandwidth_bytes_per_s,
            "ridge": self.ridge,
            "effective_ridge": self.effective_ridge,
            "compute_bound_tokens": self.compute_bound_tokens,
            "prefill": {"tokens": self.prefill_tokens, **self.prefill.to_dict()},
            "decode": {"batch": self.decode_batch, "context": self.decode_context, **self.decode.to_dict()},
        }


def roofline_points(
    model: str = "llama-3.1-8b",
    gpu: str = "h100-sxm",
    maths: str = "bf16",
    prompt: int = 2000,
    batch: int = 1,
    context: int = 0,
    preset: str = "ideal",
    gpu_file: str | Path | None = None,
) -> RooflinePoints:
    check_size("--prompt", prompt)
    check_size("--batch", batch)
    check_size("--context", context, minimum=0)
    m = Deployment.build(model, gpu, maths=maths, preset=preset, gpu_file=gpu_file)
    return RooflinePoints(
        gpu=m.hw.name,
        model=m.arch.name,
        maths=maths,
        preset=preset,
        peak_flops=m.peak_flops,
        bandwidth_bytes_per_s=m.hw.bandwidth_bytes_per_s,
        ridge=m.ridge,
        effective_ridge=m.effective_ridge,
        compute_bound_tokens=compute_bound_tokens(m),
        prefill_tokens=prompt,
        prefill=Point.of(m, prefill_step(m, prompt)),
        decode_batch=batch,
        decode_context=context,
        decode=Point.of(m, decode_step(m, context, batch)),
    )
