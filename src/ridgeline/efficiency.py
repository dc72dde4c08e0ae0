"""How close to its peaks a deployment runs: fractions of peak FLOP/s and bandwidth, and
fixed costs.

Preset `ideal` is the film's arithmetic (eta = 1); preset `lesson` is the lesson's stage,
where real kernels reach 60% of peak FLOP/s and 80% of bandwidth. A calibration (from
`ridgeline fit`) replaces a preset with measured rates and adds a per-step overhead and a
per-first-token offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from ridgeline.checks import check_efficiency
from ridgeline.errors import unknown_name


@dataclass(frozen=True)
class Efficiency:
    """Fractions of peak FLOP/s and bandwidth reached, plus fixed costs a calibration
    can add: per forward pass (launches, sampling) and per first token (network)."""

    compute: float = 0.6
    bandwidth: float = 0.8
    step_overhead_s: float = 0.0
    ttft_offset_s: float = 0.0


PRESETS = {"ideal": Efficiency(1.0, 1.0), "lesson": Efficiency(0.6, 0.8)}
METHODS = ("lesson", "per-op")


def make_efficiency(
    preset: str = "lesson", compute_eff: float | None = None, bandwidth_eff: float | None = None
) -> Efficiency:
    if preset not in PRESETS:
        raise unknown_name("preset", preset, PRESETS, "ridgeline estimate --help")
    base = PRESETS[preset]
    eff = Efficiency(
        base.compute if compute_eff is None else compute_eff,
        base.bandwidth if bandwidth_eff is None else bandwidth_eff,
    )
    check_efficiency("--compute-eff", eff.compute)
    check_efficiency("--bandwidth-eff", eff.bandwidth)
    return eff
