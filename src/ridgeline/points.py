"""Where passes sit on the roofline: attainable FLOP/s = min(peak, intensity x bandwidth)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ridgeline.checks import check_size
from ridgeline.deployment import Deployment
from ridgeline.request import compute_bound_tokens
from ridgeline.roofline import StepTime
from ridgeline.step import decode_step, prefill_step


def attainable_flops(m: Deployment, intensity: float) -> float:
    """The roof at an intensity, with the machine's efficiencies applied."""
    roof = m.eff.compute * m.peak_flops
    slope = m.eff.bandwidth * m.hw.bandwidth_bytes_per_s * intensity
    return min(roof, slope)


def _point(m: Deployment, step: StepTime) -> dict[str, Any]:
    i = float(step.intensity)
    return {
        "flops": float(step.flops),
        "bytes": float(step.bytes),
        "intensity": i,
        "attainable_flops": attainable_flops(m, i),
        "bound": str(step.bound),
        "time_s": float(step.time_s),
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
) -> dict[str, Any]:
    check_size("--prompt", prompt)
    check_size("--batch", batch)
    check_size("--context", context, minimum=0)
    m = Deployment.build(model, gpu, maths=maths, preset=preset, gpu_file=gpu_file)
    return {
        "gpu": m.hw.name,
        "model": m.arch.name,
        "maths": maths,
        "preset": preset,
        "peak_flops": m.peak_flops,
        "bandwidth_bytes_per_s": m.hw.bandwidth_bytes_per_s,
        "ridge": m.ridge,
        "effective_ridge": m.effective_ridge,
        "compute_bound_tokens": compute_bound_tokens(m),
        "prefill": {"tokens": prompt, **_point(m, prefill_step(m, prompt))},
        "decode": {"batch": batch, "context": context, **_point(m, decode_step(m, context, batch))},
    }
