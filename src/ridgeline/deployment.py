"""One deployment: a model on an accelerator, in a precision and a parallelism, at an
efficiency, timed by a method. Every face builds one and passes it down; every number
(`step.price`, the memory plan, `estimate_on`) is asked of it.

    d = Deployment.build("llama-3.1-8b", "h100-sxm", weights="fp8", tp=2)

It knows its own defaults: a .gguf model's weights are the file's stored mix unless the
user says otherwise, and a calibration replaces its preset's efficiencies.
"""

from __future__ import annotations

from _thread import allocate_lock
from dataclasses import dataclass, field, replace
from functools import cached_property

from ridgeline.architecture import Architecture
from ridgeline.checks import check_efficiency, check_flag, check_path, check_size, check_text
from ridgeline.efficiency import METHODS, PRESETS, Efficiency, Rates, flat_rates, make_efficiency
from ridgeline.errors import RidgelineError, unknown_name
from ridgeline.hardware import Accelerator, get_accelerator
from ridgeline.models import get_model
from ridgeline.parallel import Parallel, make_parallel
from ridgeline.precision import AUTO_MATHS, Precision, make_precision

TYPE_CHECKING = False
if TYPE_CHECKING:  # engine profiles and calibrations load when a deployment names one
    from pathlib import Path
    from typing import Any

    from ridgeline.calibration import Calibration
    from ridgeline.engines import EngineProfile, Reach, Scheduler

LARGE_PASS_TOKENS = 1e9  # a pass this large fills the tensor cores: where a roof is read


@dataclass(frozen=True, kw_only=True)
class Deployment:
    """Everything a pass's time depends on besides its work."""

    arch: Architecture
    prec: Precision
    hw: Accelerator
    par: Parallel = field(default_factory=Parallel)
    eff: Efficiency = PRESETS["lesson"]
    method: str = "lesson"  # "lesson": one roofline per pass; "per-op": one per operator, summed
    preset: str = "lesson"  # the preset the efficiencies start from
    calibration: str | None = None  # where fitted efficiencies came from, when they did
    engine: EngineProfile | None = None  # an engine profile's rates replace the flat ones
    in_process: bool = False  # run inside the engine's process: no server before the first token

    @classmethod
    def build(
        cls,
        model: str | Architecture = "llama-3.1-8b",
        gpu: str | Accelerator = "h100-sxm",
        *,
        weights: str | None = None,
        maths: str | None = None,
        kv_dtype: str = "bf16",
        tp: int = 1,
        pp: int = 1,
        ep: int = 1,
        dp_attention: bool = False,
        preset: str = "lesson",
        compute_eff: float | None = None,
        bandwidth_eff: float | None = None,
        gpu_file: str | Path | None = None,
        calibration: str | Path | Calibration | None = None,
        method: str = "lesson",
        engine: str | EngineProfile | None = None,
        peak_tflops: float | None = None,
        bandwidth_tbs: float | None = None,
        memory_gb: float | None = None,
        in_process: bool = False,
    ) -> Deployment:
        """Resolve names into a deployment, with one clear error for each bad value.

        A calibration (from `ridgeline fit`) replaces the preset's efficiencies; explicit
        compute_eff / bandwidth_eff still win over both. Without maths (or with "auto"), the
        matmuls run in the engine's dtype for these weights (EngineProfile.default_maths),
        else bf16."""
        for name, text, what in (
            ("--weights", weights, "a weight format's name"),
            ("--maths", maths, "a dtype's name"),
            ("--kv-dtype", kv_dtype, "a dtype's name"),
            ("--preset", preset, "a preset's name"),
            ("--method", method, "a timing method's name"),
        ):
            if text is not None:
                check_text(name, text, what)
        check_flag("--dp-attention", dp_attention)
        check_flag("in_process", in_process)
        if gpu_file is not None:
            check_path("--gpu-file", gpu_file)
        arch = model if isinstance(model, Architecture) else get_model(model)
        hw = (
            gpu
            if isinstance(gpu, Accelerator)
            else get_accelerator(gpu, gpu_file, peak_tflops, bandwidth_tbs, memory_gb)
        )
        if engine is not None:
            from ridgeline.engines import EngineProfile, get_engine

            if not isinstance(engine, EngineProfile):
                engine = get_engine(engine)
        # The same parts and choices as a deployment built and checked before: that one.
        key: tuple[Any, ...] | None = None
        if calibration is None:
            sizes = (type(tp), tp, type(pp), pp, type(ep), ep, bool(dp_attention))
            effs = (type(compute_eff), compute_eff, type(bandwidth_eff), bandwidth_eff)
            key = (id(arch), id(hw), id(engine), weights, maths, kv_dtype, *sizes, preset, method, *effs,
                   bool(in_process))  # fmt: skip
            try:
                built = _BUILT.get(key)
            except TypeError:  # an unhashable size or share: never built; the checks below name it
                key, built = None, None
            if built is not None:
                return built
        if weights is None:  # bf16, or the stored mix of a GGUF file
            weights = "bf16" if arch.file_bytes_per_param is None else "file"
        if weights == "file" and arch.file_bytes_per_param is None:
            raise RidgelineError("--weights file needs a .gguf model; give a dtype such as bf16")
        if maths is None or maths == AUTO_MATHS:  # the engine's for these weights on this part, else bf16
            maths = "bf16" if engine is None else engine.default_maths(arch, weights, hw)
        prec = make_precision(weights, maths, kv_dtype)
        hw.peak(prec.maths)  # fail early when the accelerator lacks this maths dtype
        for name, value in (("--tp", tp), ("--pp", pp), ("--ep", ep)):
            check_size(name, value, maximum=1 << 16)
        if dp_attention and engine is not None and engine.dp_replicates == "none":
            raise RidgelineError(f"{engine.label} has no data-parallel attention: drop --dp-attention")
        dense = engine is not None and engine.dp_replicates == "dense"  # the engine's data-parallel attention
        par = make_parallel(arch, tp, pp, ep, bool(dp_attention), dense)
        eff = make_efficiency(preset, compute_eff, bandwidth_eff)
        source = None
        if calibration is not None:
            from ridgeline.calibration import MAX_SHARE, Calibration, load_calibration

            cal = calibration if isinstance(calibration, Calibration) else load_calibration(calibration)
            fitted = cal.efficiency(hw.peak(prec.maths), hw.bandwidth_bytes_per_s)
            eff = replace(
                fitted,
                compute=fitted.compute if compute_eff is None else eff.compute,
                bandwidth=fitted.bandwidth if bandwidth_eff is None else eff.bandwidth,
            )
            # A measured rate may beat a catalogue's peak a little; it cannot be nothing.
            check_efficiency("the calibration's compute efficiency", eff.compute, hi=MAX_SHARE)
            check_efficiency("the calibration's bandwidth efficiency", eff.bandwidth, hi=MAX_SHARE)
            source = cal.source or str(calibration)
        if method not in METHODS:
            raise unknown_name("timing method", method, METHODS, "ridgeline estimate --help")
        if engine is not None:
            if calibration is not None:
                raise RidgelineError("--engine and --calibration both set the rates: give one")
            engine.check_runs_on(hw)
        built = cls(
            arch=arch, prec=prec, hw=hw, par=par, eff=eff, method=method, preset=preset, calibration=source,
            engine=engine, in_process=bool(in_process),
        )  # fmt: skip
        if key is not None:
            with _KEEPING:  # the web face builds in threads: one eviction at a time
                if len(_BUILT) >= BUILT_KEPT:
                    del _BUILT[next(iter(_BUILT))]  # the oldest
                _BUILT[key] = built
        return built

    @property
    def peak_flops(self) -> float:
        return self.hw.peak(self.prec.maths)

    @cached_property
    def flat_rates(self) -> Rates:
        """The rates of its preset or calibration: the same fractions of the peaks for every
        pass (an engine profile's depend on the pass: `roofline.pass_rates`)."""
        return flat_rates(
            self.eff, self.peak_flops, self.hw.bandwidth_bytes_per_s, self.hw.interconnect_bytes_per_s
        )

    @cached_property
    def kept(self) -> dict[Any, Any]:
        """What the core and the faces work out once on this deployment and keep for the
        next ask (request.decode_lines each batch's runs of decode steps, the simulator its
        step model). A process's own: a copy or a pickle of the deployment starts without it."""
        return {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("kept", None)
        return state

    @cached_property
    def engine_reach(self) -> Reach:
        """Its engine profile's rates before a pass's size enters (engines.Reach): the
        same for every pass on it, so worked out once."""
        if self.engine is None:
            raise RidgelineError("this deployment has no engine profile (give --engine)")
        return self.engine.reach(self)

    @property
    def scheduler(self) -> Scheduler | None:
        """Its engine's scheduler defaults on its accelerator (None without an engine)."""
        return self.engine.scheduler.on(self.hw) if self.engine is not None else None

    @property
    def ridge(self) -> float:
        return self.hw.ridge(self.prec.maths)

    @property
    def reach(self) -> tuple[float, float]:
        """(FLOP/s, bytes/s) the kernels reach on a large pass: the roof the efficiencies
        draw. The preset's or calibration's flat fractions of the peaks, or, with an engine
        profile, a large matmul's FLOP/s and the weights' streaming bytes/s."""
        if self.engine is not None:
            r = self.engine.rates(self, LARGE_PASS_TOKENS)
            return float(r.linear_flops_per_s), float(r.weight_bytes_per_s)
        return self.eff.compute * self.peak_flops, self.eff.bandwidth * self.hw.bandwidth_bytes_per_s

    @property
    def effective_ridge(self) -> float:
        """Where the two sides of the reached roof meet."""
        flops_per_s, bytes_per_s = self.reach
        return flops_per_s / bytes_per_s

    @property
    def ttft_offset_s(self) -> float:
        """Fixed time before the first token beyond the prefill (network, HTTP): an engine's
        server's first-token cost, or a calibration's offset; none for a run inside the
        engine's own process (llama-bench, trtllm-bench, vLLM's LLM class), which has no server."""
        if self.in_process:
            return 0.0
        return self.engine.first_token_s if self.engine is not None else self.eff.ttft_offset_s

    @property
    def gpus(self) -> int:
        return self.par.gpus

    def at_peak(self) -> Deployment:
        """The same deployment at 100% of peak and bandwidth, with no fixed costs: the ceiling."""
        return replace(self, eff=PRESETS["ideal"], preset="ideal", calibration=None, engine=None)

    def band(self, regime: str) -> tuple[float, float] | None:
        """Its engine profile's band in a regime (measured / predicted time, the 80% interval
        of published runs no fit saw: engines.REGIMES); None without a profile or that band."""
        return None if self.engine is None else self.engine.band(regime)

    def ttft_band(self, ttft_s: float, first_token_s: float) -> tuple[float, float] | None:
        """Its engine profile's band on a TTFT of which first_token_s is not the prompt's pass
        (EngineProfile.ttft_band); None without a profile or its prefill band."""
        share = first_token_s / ttft_s if ttft_s > 0 else 0.0
        return None if self.engine is None else self.engine.ttft_band(share)

    def server_share(self, requests_per_s: float, prompt_tokens: float, streamed_tokens: float) -> float:
        """The share of its time a replica's API server is busy passing on this many requests
        a second of these mean lengths (EngineProfile.server_share); 0 without a profile or
        in the engine's own process, where no server stands in front."""
        if self.engine is None or self.in_process:
            return 0.0
        return self.engine.server_share(requests_per_s, prompt_tokens, streamed_tokens)

    def load_band(self, server_share: float) -> tuple[float, float] | None:
        """Its engine profile's band under load on a run whose API server is busy
        server_share of the time (EngineProfile.load_band); None without a profile or band."""
        return None if self.engine is None else self.engine.load_band(server_share)

    def slowed(self, factor: float) -> Deployment:
        """The same deployment with its engine `factor` times as slow (EngineProfile.scaled):
        every step and first token takes `factor` times as long. A new deployment, so that
        nothing worked out on this one (its rates, `kept`) carries over."""
        if self.engine is None:
            raise RidgelineError("this deployment has no engine profile (give --engine)")
        return replace(self, engine=self.engine.scaled(factor))

    def with_method(self, method: str) -> Deployment:
        if method not in METHODS:
            raise unknown_name("timing method", method, METHODS, "ridgeline estimate --help")
        return replace(self, method=method)


# A deployment built from the same parts (model, accelerator, engine profile) and the same
# choices is the one built before: `build` hands it back, with what it keeps (its rates,
# `kept`), so a loop of estimates by name checks and works each of those out once. Keyed by
# the parts' identities (a kept deployment holds its parts, so no other object can take
# their ids while it is here) and by the choices' values and types. A calibration is read
# from its file each time, and is not kept.
BUILT_KEPT = 256
_BUILT: dict[tuple[Any, ...], Deployment] = {}
_KEEPING = allocate_lock()
