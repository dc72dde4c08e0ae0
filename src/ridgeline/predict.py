"""`estimate()`: one request on one deployment, every number and the reasons why.

This module assembles the core (catalogues, ledger, roofline, timeline, memory plan,
cost, explanation) into one typed result whose `to_dict()` is `ridgeline estimate --json`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, is_dataclass
from functools import cached_property

from ridgeline.architecture import Architecture
from ridgeline.checks import check_price, check_size
from ridgeline.cost import Cost, token_cost
from ridgeline.deployment import Deployment
from ridgeline.errors import RidgelineError
from ridgeline.hardware import Accelerator
from ridgeline.ledger import TRAINING_BYTES_PER_PARAM, training_flops_per_token
from ridgeline.parallel import attention_load, expert_load
from ridgeline.request import Timeline, request_timeline
from ridgeline.roofline import StepTime

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    from ridgeline.calibration import Calibration
    from ridgeline.engines import EngineProfile
    from ridgeline.memory import MemoryPlan


@dataclass(frozen=True)
class Phase:
    """One pass as the step price gave it: the whole model's FLOPs and bytes, and one
    GPU's bytes and time by what it waits on."""

    flops: float
    bytes: float
    intensity: float
    bound: str
    time_s: float
    compute_s: float
    memory_s: float
    comm_s: float
    weight_s: float
    kv_s: float
    overhead_s: float
    host_s: float  # the host's work, hidden behind the GPU's unless it is the longer (time_s: the max)
    host_bound: bool
    waits_on: str  # "host" where host_bound, else `bound`: what a face shows as the step's limit
    weight_bytes_per_gpu: float
    kv_bytes_per_gpu: float
    attention_flops: float
    attention_share: float  # attention's part of the FLOPs: grows with the context

    @classmethod
    def of(cls, step: StepTime) -> Phase:
        flops, attention_flops = float(step.flops), float(step.attention_flops)
        return cls(
            flops=flops,
            bytes=float(step.bytes),
            intensity=float(step.intensity),
            bound=str(step.bound),
            time_s=float(step.time_s),
            compute_s=float(step.compute_s),
            memory_s=float(step.memory_s),
            comm_s=float(step.comm_s),
            weight_s=float(step.weight_s),
            kv_s=float(step.kv_s),
            overhead_s=float(step.overhead_s),
            host_s=float(step.host_s),
            host_bound=bool(step.host_bound),
            waits_on=str(step.waits_on),
            weight_bytes_per_gpu=float(step.weight_bytes_per_gpu),
            kv_bytes_per_gpu=float(step.kv_bytes_per_gpu),
            attention_flops=attention_flops,
            attention_share=attention_flops / flops,
        )


@dataclass(frozen=True)
class ModelInfo:
    """The model, as the estimate names it."""

    name: str
    family: str
    parameters: int
    active_parameters: int
    layers: int
    hidden: int
    max_context: int


@dataclass(frozen=True)
class GpuInfo:
    """The accelerator: its peak FLOP/s in the maths dtype, bandwidth, memory and link."""

    name: str
    label: str
    peak_flops: float
    bandwidth_bytes_per_s: float
    memory_bytes: float
    interconnect_bytes_per_s: float


@dataclass(frozen=True)
class ParallelInfo:
    """The parallelism, its pipeline bubble, and communication's share of a decode step."""

    tp: int
    pp: int
    ep: int
    gpus: int
    pipeline_bubble: float
    decode_comm_share: float  # communication's share of the first decode step
    # the busiest EP GPU's routed-expert reads over the mean GPU's in a decode step (1 without EP)
    busiest_expert_reads: float = 1.0
    dp_attention: bool = False  # attention data-parallel over the tp GPUs
    dp_dense: bool = False  # and the dense parts with it (the engine's way)
    # the busiest GPU's data-parallel work over the mean GPU's in a decode step (1 but under dp_attention)
    busiest_attention: float = 1.0


@dataclass(frozen=True)
class Training:
    """The training contrast: 6 x active parameters FLOPs a token, 16 bytes a parameter."""

    flops_per_token: float
    bytes_per_parameter: int


@dataclass(frozen=True)
class Estimate:
    """One request on one deployment. Its timeline is worked out when it is made; every
    other part is derived from the timeline on first use, so a sweep that reads `ttft_s`
    and `tpot_s` pays for nothing else, and `to_dict()` asks for them all."""

    deployment: Deployment
    timeline: Timeline = field(repr=False)
    prompt: int
    output: int
    batch: int
    price_per_gpu_hour_usd: float

    @property
    def ttft_s(self) -> float:
        return self.timeline.ttft_s

    @property
    def tpot_s(self) -> float:
        return self.timeline.tpot_s

    @property
    def total_s(self) -> float:
        return self.timeline.total_s

    @property
    def decode_share(self) -> float:
        return self.timeline.decode_share

    @property
    def tokens_per_s(self) -> float:
        return 1.0 / self.tpot_s

    @property
    def batch_tokens_per_s(self) -> float:
        return self.batch / self.tpot_s

    @property
    def ridge(self) -> float:
        return self.deployment.ridge

    @property
    def effective_ridge(self) -> float:
        return self.deployment.effective_ridge

    @cached_property
    def inputs(self) -> dict[str, Any]:
        m = self.deployment
        return {
            "model": m.arch.name,
            "gpu": m.hw.name,
            "weights": m.prec.weights,
            "maths": m.prec.maths,
            "kv_dtype": m.prec.kv,
            "prompt": self.prompt,
            "output": self.output,
            "batch": self.batch,
            "tp": m.par.tp,
            "pp": m.par.pp,
            "ep": m.par.ep,
            "dp_attention": m.par.dp_attention,
            "preset": m.preset,
            "calibration": m.calibration,
            "engine": m.engine.name if m.engine else None,
            "method": m.method,
            "in_process": m.in_process,
            "compute_eff": m.eff.compute,
            "bandwidth_eff": m.eff.bandwidth,
            "step_overhead_s": m.eff.step_overhead_s,
            "ttft_offset_s": m.ttft_offset_s,
            "price_per_gpu_hour_usd": self.price_per_gpu_hour_usd,
        }

    @cached_property
    def model(self) -> ModelInfo:
        a = self.deployment.arch
        return ModelInfo(
            a.name, a.family, a.parameters, a.active_parameters, a.layers, a.hidden, a.max_context
        )

    @cached_property
    def gpu(self) -> GpuInfo:
        m, hw = self.deployment, self.deployment.hw
        return GpuInfo(
            hw.name,
            hw.label,
            m.peak_flops,
            hw.bandwidth_bytes_per_s,
            hw.memory_bytes,
            hw.interconnect_bytes_per_s,
        )

    @cached_property
    def prefill(self) -> Phase:
        return Phase.of(self.timeline.prefill)

    @cached_property
    def decode(self) -> Phase:
        """The first decode step."""
        return Phase.of(self.timeline.first_decode)

    @cached_property
    def cost(self) -> Cost:
        gpus = self.deployment.par.gpus
        return token_cost(
            self.price_per_gpu_hour_usd, gpus, self.ttft_s, self.tpot_s, self.prompt, self.batch
        )

    @cached_property
    def parallel(self) -> ParallelInfo:
        par, first = self.deployment.par, self.timeline.first_decode
        share = float(first.comm_s) / float(first.time_s)
        reads = float(expert_load(self.deployment.arch, par, self.batch)[0])
        busiest = float(attention_load(par, self.batch))
        return ParallelInfo(
            par.tp, par.pp, par.ep, par.gpus, par.pipeline_bubble, share, reads,
            dp_attention=par.dp_attention, dp_dense=par.dp_dense, busiest_attention=busiest,
        )  # fmt: skip

    @cached_property
    def training(self) -> Training:
        return Training(training_flops_per_token(self.deployment.arch), TRAINING_BYTES_PER_PARAM)

    @cached_property
    def uncertainty(self) -> dict[str, list[float]] | None:
        """An engine profile's band (an 80% interval), per time."""
        return uncertainty(self.deployment, self.timeline)

    @cached_property
    def unmeasured(self) -> list[str] | None:
        """An engine profile's terms that this prediction rests on and no corpus row moved
        (their prior stands): its band, made of other rows, may understate the error."""
        m = self.deployment
        return None if m.engine is None else m.engine.unmeasured(m)

    @cached_property
    def one_source(self) -> list[str] | None:
        """An engine profile's terms that this prediction rests on and one source's runs
        alone moved: no second source confirms them (EngineProfile.one_source)."""
        m = self.deployment
        return None if m.engine is None else m.engine.one_source(m)

    @cached_property
    def memory(self) -> MemoryPlan:
        from ridgeline.memory import plan

        return plan(self.deployment, self.prompt + self.output, self.batch)

    @cached_property
    def explain(self) -> list[str]:
        from ridgeline.explain import explain

        return explain(
            self.deployment,
            self.timeline,
            self.memory,
            self.prompt,
            self.batch,
            self.parallel.busiest_expert_reads,
            self.unmeasured or [],
            self.parallel.busiest_attention,
            self.one_source or [],
        )

    def to_dict(self) -> dict[str, Any]:
        """`ridgeline estimate --json`: every key, in a stable order."""
        return {key: _plain(getattr(self, key)) for key in JSON_KEYS}


JSON_KEYS = (
    "inputs", "model", "gpu", "prefill", "decode", "ttft_s", "tpot_s", "total_s", "decode_share",
    "tokens_per_s", "batch_tokens_per_s", "ridge", "effective_ridge", "memory", "cost", "parallel",
    "training", "uncertainty", "unmeasured", "one_source", "explain",
)  # fmt: skip


def uncertainty(m: Deployment, t: Timeline) -> dict[str, list[float]] | None:
    """With an engine profile: each time's band, the 80% interval of measured / predicted
    that the profile's held-out corpus rows left (accuracy.fit.BAND_PERCENTILES): TTFT's
    from the prefill band on the prompt's pass and the first-token band on the server's
    first-token cost (Deployment.ttft_band), TPOT's from the decode band; the total takes
    each part's band. None without a profile or its bands."""
    ttft, steps = t.ttft_s, t.decode_s
    prefill, decode = m.ttft_band(ttft, t.offset_s), m.band("decode")
    if prefill is None or decode is None:
        return None
    return {
        "ttft_s": [ttft * prefill[0], ttft * prefill[1]],
        "tpot_s": [t.tpot_s * decode[0], t.tpot_s * decode[1]],
        "total_s": [ttft * prefill[0] + steps * decode[0], ttft * prefill[1] + steps * decode[1]],
    }


def _plain(value: Any) -> Any:
    return asdict(value) if is_dataclass(value) and not isinstance(value, type) else value


def estimate(
    model: str | Architecture = "llama-3.1-8b",
    gpu: str | Accelerator = "h100-sxm",
    *,
    weights: str | None = None,
    prompt: int = 2000,
    output: int = 500,
    batch: int = 1,
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    dp_attention: bool = False,
    preset: str = "lesson",
    compute_eff: float | None = None,
    bandwidth_eff: float | None = None,
    maths: str | None = None,
    kv_dtype: str = "bf16",
    price_per_gpu_hour: float | None = None,
    gpu_file: str | Path | None = None,
    calibration: str | Path | Calibration | None = None,
    method: str = "lesson",
    engine: str | EngineProfile | None = None,
    in_process: bool = False,
) -> Estimate:
    """Estimate one request (or `batch` identical ones) end to end. `output` counts decode
    steps: the prefill emits the first token, then each step one more. `in_process`: a run
    inside the engine's process, whose first token pays no server (Deployment.ttft_offset_s)."""
    d = Deployment.build(
        model, gpu, weights=weights, maths=maths, kv_dtype=kv_dtype, tp=tp, pp=pp, ep=ep,
        dp_attention=dp_attention, preset=preset,
        compute_eff=compute_eff, bandwidth_eff=bandwidth_eff, gpu_file=gpu_file, calibration=calibration,
        method=method, engine=engine, in_process=in_process,
    )  # fmt: skip
    return estimate_on(d, prompt=prompt, output=output, batch=batch, price_per_gpu_hour=price_per_gpu_hour)


def estimate_on(
    d: Deployment,
    *,
    prompt: int = 2000,
    output: int = 500,
    batch: int = 1,
    price_per_gpu_hour: float | None = None,
) -> Estimate:
    """Estimate a request on a deployment already built (Deployment.build)."""
    for name, value in (("--prompt-tokens", prompt), ("--output-tokens", output), ("--batch", batch)):
        check_size(name, value)
    if prompt + output > d.arch.max_context:
        raise RidgelineError(
            f"prompt + output = {prompt + output:,} tokens exceeds {d.arch.name}'s context of "
            f"{d.arch.max_context:,}: shorten --prompt-tokens or --output-tokens"
        )
    price = d.hw.price_per_hour_usd if price_per_gpu_hour is None else price_per_gpu_hour
    price = check_price("--price", price)
    return assemble(d, prompt, output, batch, price)


def assemble(m: Deployment, prompt: int, output: int, batch: int, price: float) -> Estimate:
    return Estimate(m, request_timeline(m, prompt, output, batch), prompt, output, batch, price)
