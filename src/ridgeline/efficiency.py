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
from ridgeline.parallel import COLLECTIVE_LATENCY_S

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


@dataclass(frozen=True)
class Efficiency:
    """Fractions of peak FLOP/s and bandwidth reached, plus fixed costs a calibration
    can add: per forward pass (launches, sampling) and per first token (network)."""

    compute: float = 0.6
    bandwidth: float = 0.8
    step_overhead_s: float = 0.0
    ttft_offset_s: float = 0.0


PRESETS = {"ideal": Efficiency(1.0, 1.0), "lesson": Efficiency(0.6, 0.8)}


@dataclass  # made per pass under an engine profile, may hold arrays: plain (see _num.Num)
class Rates:
    """What a deployment reaches on one pass: FLOP/s for the matmuls and for attention,
    bytes/s for weights and for the KV cache, a fixed overhead, and per collective a
    latency and the link's bytes/s. A preset's rates are flat fractions of the peaks; an
    engine profile's depend on the pass (its tokens, its sequences)."""

    linear_flops_per_s: Any
    attention_flops_per_s: float
    weight_bytes_per_s: float
    kv_bytes_per_s: float
    overhead_s: Any = 0.0
    collective_latency_s: float = COLLECTIVE_LATENCY_S
    link_bytes_per_s: float = 0.0
    expert_flops_per_s: Any = None  # a MoE's routed experts' matmuls; None: the linear rate
    apart: bool = False  # the matmuls and attention as kernels apart, each on its own roofline
    host_s: Any = 0.0  # the host's work for the pass, overlapped with the GPU's: the least it takes


def flat_rates(
    eff: Efficiency, peak_flops: float, bandwidth_bytes_per_s: float, link_bytes_per_s: float
) -> Rates:
    """A preset's or a calibration's rates: the same fractions of peak for every pass."""
    flops, bw = eff.compute * peak_flops, eff.bandwidth * bandwidth_bytes_per_s
    return Rates(flops, flops, bw, bw, eff.step_overhead_s, COLLECTIVE_LATENCY_S, link_bytes_per_s, flops)


METHODS = ("lesson", "per-op")


def make_efficiency(
    preset: str = "lesson", compute_eff: float | None = None, bandwidth_eff: float | None = None
) -> Efficiency:
    if preset not in PRESETS:
        raise unknown_name("preset", preset, PRESETS, "ridgeline estimate --help")
    base = PRESETS[preset]
    if compute_eff is None and bandwidth_eff is None:
        return base
    eff = Efficiency(
        base.compute if compute_eff is None else compute_eff,
        base.bandwidth if bandwidth_eff is None else bandwidth_eff,
    )
    check_efficiency("--compute-eff", eff.compute)
    check_efficiency("--bandwidth-eff", eff.bandwidth)
    return eff
