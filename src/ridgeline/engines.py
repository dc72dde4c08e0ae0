"""Engine profiles: how close to the roofline a serving engine runs, and why not closer.

The presets take one flat fraction of peak FLOP/s and one of bandwidth for everything. A
real engine runs less than the lesson's ledger (served_work: the input embedding is looked
up, the lm_head runs on the sampled tokens alone), runs its matmuls and attention as
kernels apart, each on its own roofline (a step whose matmuls wait on arithmetic still
waits for attention to read the KV cache: roofline.time_work),

    step             = max(matmul FLOPs / GEMM FLOP/s, weight bytes / weight bytes/s)
                       + max(attention FLOPs / attention FLOP/s, KV bytes / KV bytes/s)
                       + collectives + step overhead

and falls short of the roofline for reasons each of which has a physical term here:

    GEMM FLOP/s      = achievable(dtype) x gemm[dtype] x vendor x M / (M + half_m x mma_rows / 64)
                       (achievable: the data sheet's dense peak x the share of it that the
                       accelerator's best-shaped large matmul sustains, measured: power and
                       clocks, not the engine: the catalogue's matmul_share, Accelerator.sustained)
                       (M: tokens in the pass; a skinny matmul cannot fill the tensor cores,
                       whose tiles are the accelerator's mma_rows tall: 64 for Hopper's wgmma
                       and older parts, 128 for datacentre Blackwell's tcgen05, which pads a
                       short matmul twice as far;
                       a MoE's routed experts: x experts x W / (W + expert_half_width), with
                       M the tokens routed to each expert the step touches and W an expert's
                       width: 768-wide experts
                       fill the tensor cores less than 14,336-wide ones; x experts_async
                       as well on a part that needs asynchronous MMA: grouped-GEMM kernels
                       reach less of Hopper's and Blackwell's peak than dense ones do)
                       x dequant[w8 | w4] when the weights are narrower than the maths
                       (weight-only formats unpack every weight inside the matmul),
                       x dequant_async as well on a part that needs asynchronous MMA
                       (the catalogue's async_mma: unpacked weights feed Ampere's warp-level
                       MMA, not Hopper's wgmma, unless the profile says unpack_async: its
                       kernels unpack into the asynchronous MMA's operands, TensorRT-LLM's;
                       every matmul does where the profile says warp_mma_only: llama.cpp's)
                       but the dense matmuls at least vector FLOP/s = fp32 peak x gemm[fp32]
                       x vendor (x dequant for narrow weights) where the part has matrix units
                       apart from its vector ones: a pass of a few tokens runs as a
                       matrix-vector kernel there (GEMV, MMVQ), not as a padded tensor tile
    attention FLOP/s = achievable(attention's dtype) x attention x vendor
                       (attention multiplies activations with the KV cache, not the weights:
                       fp8 over an fp8 cache when the matmuls are 8 bits or fewer, else 16
                       bits; precision.attention_maths)
                       x sinks for a model with attention sinks (gpt-oss) on a part before
                       Hopper, whose kernels are not the engine's usual ones (vLLM on an
                       A100: Triton's, not FlashAttention's; Hopper's carry the sinks)
    weight bytes/s   = bandwidth x weights[w16 | w8 | w4] x vendor_memory   (dequantisation costs)
                       but at most units x clock x stream[w16 | w8 | w4] x vendor_memory where
                       a profile states it (a matrix-vector kernel that keeps a few bytes in flight a GPU core
                       streams that many a core a clock whatever the memory's bandwidth: on
                       an HBM part, below it; the catalogue's units and clock_hz)
    KV bytes/s       = bandwidth x kv x vendor_memory
                       (a vendor's software stack reaches its own share of the data sheet's
                       FLOP/s, vendor, and of its bandwidth, vendor_memory: the same as vendor
                       unless a profile says otherwise)
    step overhead    = (fixed + per_layer x (layers + (moe_layer - 1) x MoE layers) x g)
                       x (1 + tp_scale x log2 tp) x dies
                       (dies: the catalogue's, 2 for a GPU of two dies whose every kernel
                       ends when both have, across their bridge: Apple's Ultras)
                       + per_sequence x sequences sampled             (launches, scheduling, sampling)
                       (a MoE layer routes, sorts and gathers its tokens and runs two grouped
                       matmuls where a dense one runs its MLP: moe_layer of the kernels' cost)
                       g = graph for a decode-only step of at most graph_max_seqs sequences
                       (the engine replays it as a captured CUDA graph: its kernels run
                       without a launch each), else 1 (a prefill or mixed step launches
                       kernel by kernel)
    host work        = (host_step_s + host_sequence_s x sequences sampled)
                       x the accelerator's host_overhead
                       (the host's own work a step: scheduling, preparing the inputs, applying
                       the outputs, sampling's bookkeeping, in the engine's Python. An engine
                       that plans the next step while this one runs, scheduler.overlap, hides
                       it behind the GPU's work until it is the longer, as on GB200's slower
                       Grace host: the step takes at least the host work. Without overlap it
                       adds to the step, so a fit that sees only runs without overlap cannot
                       tell host_step_s from fixed: runs with it can)
    a collective     = latency[link] + bytes / (link bandwidth x link_efficiency)
    first token      = + first_token_s                                (HTTP, tokenization, queueing)
                       (behind another front end than the engine's own server, NIM's:
                       front_end_s[that front end])
    the server       = requests x request_s + prompt tokens x prompt_token_s
                       + streamed tokens x stream_token_s
                       (its one process parses, templates and tokenises each request and
                       detokenises and streams each token, in turn: with every request
                       queued at once, a run over HTTP takes at least this long)

Which dtype the matmuls run in is the deployment's maths. Asked for none (no --maths), a
deployment takes the engine's (compute.maths, by the weights' dtype): llama.cpp multiplies
its quantised GGUF weights on int8 tensor cores (MMQ) and F16 through cuBLAS in fp16; vLLM,
SGLang and TensorRT-LLM run fp8 weights in fp8 (W8A8) and fp4 in fp4 where the part has
that peak, and unpack them weight-only into bf16 where it has not (an A100's fp8).

A profile also carries its scheduler's defaults (admission policy, max sequences, the
batched-token budget, whether it plans the next step while this one runs) and, for each
regime, the band (an 80% interval) of measured / predicted that its corpus residuals leave:
`data/engines.toml` says where every number came from.
Users add their own profiles in TOML, as they do accelerators (`--engine FILE.toml`,
`RIDGELINE_ENGINES`, or `engines.toml` in the config folder).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Protocol

from ridgeline import _files
from ridgeline._num import Num, maximum
from ridgeline._num import where as select
from ridgeline.architecture import Architecture
from ridgeline.checks import check_flag, check_number, check_text
from ridgeline.efficiency import Rates
from ridgeline.errors import RidgelineError, unknown_name
from ridgeline.hardware import FALLBACK, REFERENCE_MMA_ROWS, Accelerator
from ridgeline.ledger import Pass, Work, tokens_per_expert, weight_bytes_per_param
from ridgeline.parallel import Parallel, collectives_per_pass
from ridgeline.precision import BITS, MATHS_DTYPES, WEIGHT_DTYPES, Precision, attention_maths, weight_dtype


class Deployed(Protocol):
    """What a profile reads of a deployment (deployment.Deployment has it all)."""

    @property
    def arch(self) -> Architecture: ...
    @property
    def prec(self) -> Precision: ...
    @property
    def hw(self) -> Accelerator: ...
    @property
    def par(self) -> Parallel: ...
    @property
    def engine(self) -> EngineProfile | None: ...
    @property
    def engine_reach(self) -> Reach: ...  # its engine's reach, worked out once
    @property
    def in_process(self) -> bool: ...  # inside the engine's process: no server before the first token


ONE_SOURCE = re.compile(r"fitted to \d+ rows? of 1 source\b")  # a provenance (scripts/fit_engines.py)
WEIGHT_FORMATS = ("w16", "w8", "w4")
FORMAT_BITS = {"w16": 16.0, "w8": 8.0, "w4": 4.0}
LOAD = "load"  # the regime of runs under load: a simulated run's, a plan's
PREFILL = "prefill"  # a TTFT's prompt pass, and prompt processing's tokens a second
FIRST_TOKEN = "first_token"  # the rest of a TTFT: the server's first-token work, a queue's wait
SERVER = "server"  # a run under load whose API server is busy: its work on each request
REGIMES = (PREFILL, FIRST_TOKEN, "decode", LOAD, SERVER)
# The share of a predicted TTFT not its prompt's pass (the server's first-token cost) from
# which its band is the first-token band alone (ttft_band): the corpus's TTFTs over HTTP are
# from 2% to 65% the server's, and those a tenth or more its (half this) make that band.
FIRST_TOKEN_FULL_SHARE = 0.2
# The share of a run's time its API server is busy (server_share) from which its band under
# load is the server band alone (load_band): the corpus's runs over HTTP keep it from under
# 1% to all of the time, and those a tenth or more (half this) make that band.
SERVER_FULL_SHARE = 0.2
LINK_KINDS = ("nvlink", "pcie", "xgmi", "none")


def weight_format(bits_per_weight: float) -> str:
    """The class of stored weight a kernel streams: 16-bit, 8-bit, or 4-bit and below."""
    if bits_per_weight >= 12:
        return "w16"
    return "w8" if bits_per_weight >= 6 else "w4"


def stored_format(a: Architecture, prec: Precision) -> str:
    """The class of the weights a model streams in a precision (a stored mix by its average)."""
    return weight_format(8.0 * weight_bytes_per_param(a, prec))


def unpacked(fmt: str, maths: str, native: bool = False) -> bool:
    """Whether weights of this format are narrower than the maths, so that every matmul
    unpacks them (a weight-only format: int4 weights under fp16 maths), unless the tensor
    cores take them as they are (`native`: float4_native)."""
    return not native and FORMAT_BITS[fmt] < BITS[maths]


# The 4-bit float formats: e2m1 values with a scale a block (NVFP4, and OCP's MXFP4, which
# gpt-oss's checkpoints store their experts in), as against integer 4-bit (AWQ, GPTQ, GGUF).
FLOAT4 = ("fp4", "mxfp4")
# The stored dtypes a profile's compute.maths may name besides WEIGHT_DTYPES: a checkpoint's
# own (its quantization_config's quant_method).
CHECKPOINT_DTYPES = ("mxfp4",)


def stored_dtype(a: Architecture, weights: str) -> str:
    """The dtype the weights are stored in: a spec's (`int4-g128`: int4), or a stored mix's
    as its checkpoint names it (fp8, mxfp4; "" where it names none)."""
    dtype = weight_dtype(weights)
    return a.file_dtype if dtype == "file" else dtype


def float4_native(a: Architecture, prec: Precision, hw: Accelerator) -> bool:
    """Whether 4-bit float weights go into the tensor cores as they are: where the part's MMA
    runs fp4 (datacentre Blackwell's tcgen05 takes e2m1 beside e4m3 in one instruction, its
    f8f6f4 kind), under fp8 or fp4 maths, as TensorRT-LLM runs gpt-oss's MXFP4 experts with
    MXFP8 activations there. Elsewhere (Hopper, Ampere) every matmul unpacks them."""
    return stored_dtype(a, prec.weights) in FLOAT4 and hw.has_peak("fp4") and prec.maths in ("fp8", "fp4")


GIB = 2**30


@dataclass(frozen=True)
class Scheduler:
    """An engine's scheduler defaults. Some depend on the accelerator's memory, in up to three
    tiers. vLLM starts with 1,024 sequences and an 8,192-token budget on a GPU of 70 GiB or
    more, and 256 and 2,048 on a smaller one or an A100 (EngineArgs.get_batch_defaults, vLLM
    0.9 on); SGLang's --chunked-prefill-size is 2,048 tokens under 35 GiB, 8,192 up to 160 GiB
    and 16,384 from there (ServerArgs). `small_*` are those of a GPU with less memory than
    `small_below_memory_gib`, or whose catalogue name holds one of `small_gpus`; `large_*`
    those of a GPU with `large_from_memory_gib` or more; `on(accelerator)` picks."""

    policy: str = "vllm"  # the simulator's admission policy (simulate/policy.py)
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    chunked_prefill: bool = True
    prefix_caching: bool = False  # a preempted request finds its freed blocks still cached
    # the CPU plans step n + 1 while the GPU runs step n (SGLang 0.4 on, TensorRT-LLM's PyTorch
    # runtime): a request that arrives while a step runs waits for the next one to run too
    overlap: bool = False
    small_max_num_seqs: int | None = None
    small_max_num_batched_tokens: int | None = None
    small_below_memory_gib: float = 0.0
    small_gpus: tuple[str, ...] = ()
    large_max_num_seqs: int | None = None
    large_max_num_batched_tokens: int | None = None
    large_from_memory_gib: float = 0.0  # 0: no large tier
    # under data-parallel attention, whose the limits above are: the replica's, shared out over
    # its ranks (SGLang divides --chunked-prefill-size and --max-running-requests by the DP
    # size), or each rank's own (vLLM's DP ranks are whole engines; TensorRT-LLM's
    # max_batch_size and max_num_tokens are a rank's)
    dp_limits: str = "replica"
    # multi-step scheduling (vLLM 0.6's --num-scheduler-steps): decode steps a scheduling runs
    # before the queue is looked at again; 1 everywhere else
    num_scheduler_steps: int = 1

    def on(self, hw: Accelerator) -> Scheduler:
        """The defaults the engine starts with on this accelerator."""
        small = hw.memory_bytes < self.small_below_memory_gib * GIB or any(
            g in hw.name for g in self.small_gpus
        )
        large = 0 < self.large_from_memory_gib * GIB <= hw.memory_bytes
        if small:
            seqs, tokens = self.small_max_num_seqs, self.small_max_num_batched_tokens
        elif large:
            seqs, tokens = self.large_max_num_seqs, self.large_max_num_batched_tokens
        else:
            return self
        return replace(
            self,
            max_num_seqs=self.max_num_seqs if seqs is None else seqs,
            max_num_batched_tokens=self.max_num_batched_tokens if tokens is None else tokens,
        )


@dataclass(frozen=True)
class Reach:
    """A profile's rates on one deployment before a pass's size enters: a large matmul's
    FLOP/s (dense and, for a MoE, a routed expert's), attention's, the bytes/s of weight and
    KV reads, the step's overhead but for its sequences, and the collectives' latency and
    link bytes/s. A pass's rates (`EngineProfile.rates`) add the small-M falloff and the
    per-sequence cost."""

    gemm_flops_per_s: float
    expert_flops_per_s: float
    attention_flops_per_s: float
    weight_bytes_per_s: float
    kv_bytes_per_s: float
    step_overhead_s: float
    collective_latency_s: float
    link_bytes_per_s: float
    graph_overhead_s: float  # step_overhead_s of a decode step replayed as a CUDA graph
    half_m_tokens: float  # the profile's half_m_tokens scaled by the accelerator's tile
    host_sequence_s: float = 0.0  # the host's work a sequence a step, on this accelerator's host
    host_step_s: float = 0.0  # and its work a step, whatever the sequences
    vector_flops_per_s: float = 0.0  # a matmul of a few tokens run on the vector units (GEMV)


@dataclass(frozen=True)
class EngineProfile:
    """A real engine's rates, per-step costs, collectives, scheduler and bands."""

    name: str
    label: str
    gemm: dict[str, float]  # fraction of the dense peak a large matmul reaches, by maths dtype
    half_m_tokens: float  # the tokens at which a matmul reaches half of that
    attention: float
    experts: float  # a MoE's grouped expert matmuls against a dense one (routing, permutes)
    dequant: dict[str, float]  # a weight-only format's matmuls against 16-bit ones, by format
    weights: dict[str, float]  # fraction of bandwidth a decode step's weight reads reach, by format
    kv: float
    fixed_s: float
    per_layer_s: float
    per_sequence_s: float
    tp_scale: float
    first_token_s: float
    collective_latency_s: dict[str, float]  # by link kind
    link_efficiency: float
    vendor: dict[str, float]
    scheduler: Scheduler = field(default_factory=Scheduler)
    vendor_memory: dict[str, float] = field(default_factory=dict)  # bandwidth's; vendor's where absent
    request_s: float = 0.0  # the server's serial work per request (parse, route, respond)
    prompt_token_s: float = 0.0  # per prompt token (template, tokenise)
    stream_token_s: float = 0.0  # and per streamed token (detokenise, format, send)
    host_sequence_s: float = 0.0  # the host's work a step per sequence on an x86 server (0: none stated)
    host_step_s: float = 0.0  # and a step's, whatever its sequences (0: none apart from fixed_s)
    front_end_s: dict[str, float] = field(default_factory=dict)  # first_token_s behind another front end
    sinks: float = 1.0  # attention with sinks against attention without (its kernels), before Hopper
    dequant_async: float = 1.0  # and a weight-only matmul's on a part that needs asynchronous MMA
    # whether every tensor-core matmul it runs, not only a weight-only one, keeps dequant_async
    # there: kernels that reach what the warp-level MMA does on such a part (llama.cpp's)
    warp_mma_only: bool = False
    # whether its weight-only kernels unpack into the asynchronous MMA's operands on such a
    # part (Hopper's wgmma), so that they keep no dequant_async: TensorRT-LLM's
    unpack_async: bool = False
    experts_async: float = 1.0  # and the grouped expert matmuls' on a part that needs asynchronous MMA
    expert_half_width: float = 0.0  # the expert width at which its matmuls reach half their rate (0: none)
    graph: float = 1.0  # the share of the per-layer cost a decode step captured as a CUDA graph pays
    moe_layer: float = 1.0  # a MoE layer's per-layer cost against a dense layer's (its extra kernels)
    graph_max_seqs: int = 0  # the largest decode batch the engine captures (0: none)
    sampler_bytes: float = 0.0  # bytes a logit its memory profile sets aside on every GPU (0: the plan's)
    repacked_experts: float = 1.0  # 4-bit routed experts held unpacked weight-only, before async MMA
    # bytes its matrix-vector kernels stream a GPU core a clock, by weight format (empty: no
    # such bound): what they keep in flight a core over the memory's latency
    stream: dict[str, float] = field(default_factory=dict)
    runs_on: tuple[str, ...] = ()  # the accelerator vendors it supports; empty: any
    # what its data-parallel attention holds whole on each GPU: "attention" alone, or "dense",
    # every weight but the routed experts; "none": it has no such mode (llama.cpp)
    dp_replicates: str = "attention"
    uncertainty: dict[str, tuple[float, float]] = field(default_factory=dict)  # regime -> (low, high)
    source: str = ""
    # the maths dtype its matmuls run in, by the weights' dtype, when none is asked for
    maths: dict[str, str] = field(default_factory=dict)
    provenance: dict[str, str] = field(default_factory=dict, compare=False)

    def check_runs_on(self, hw: Accelerator) -> None:
        """One clear line when the engine does not run on this accelerator's vendor."""
        if self.runs_on and hw.vendor_name not in self.runs_on:
            raise RidgelineError(
                f"{self.label} does not run on {hw.vendor_name} accelerators ({hw.name}); "
                f"it runs on {', '.join(self.runs_on)}"
            )

    def default_maths(self, a: Architecture, weights: str, hw: Accelerator) -> str:
        """The maths dtype its matmuls run in for these weights on hw when none is asked for:
        compute.maths for the weights' dtype (a stored mix by the dtype its checkpoint names,
        fp8's or mxfp4's, else by its class: 16-bit as fp16, 8-bit as int8, narrower as int4,
        as GGUF's quantised types are), where hw states a peak for it; else bf16. 4-bit float
        weights run bf16 on a part without an fp4 peak, whatever the map says."""
        dtype = weight_dtype(weights)
        if dtype == "file":
            stored = {"w16": "fp16", "w8": "int8", "w4": "int4"}[stored_format(a, Precision(weights))]
            dtype = a.file_dtype or stored
        maths = self.maths.get(dtype, "bf16")
        if dtype in FLOAT4 and not hw.has_peak("fp4"):
            return "bf16"  # no MMA there takes e2m1: the weights are unpacked to 16 bits
        return maths if hw.has_peak(maths) else "bf16"

    def vendor_factor(self, vendor: str) -> float:
        return self.vendor.get(vendor, self.vendor.get("default", 1.0))

    def vendor_memory_factor(self, vendor: str) -> float:
        return self.vendor_memory.get(vendor, self.vendor_factor(vendor))

    def gemm_key(self, maths: str) -> str | None:
        """The dtype whose matmul rate this maths dtype takes: its own, else a fallback's."""
        return next((k for k in (maths, *FALLBACK.get(maths, ()), "bf16") if k in self.gemm), None)

    def gemm_efficiency(self, maths: str) -> float:
        key = self.gemm_key(maths)
        return self.gemm[key] if key else min(self.gemm.values())

    def served_work(self, d: Deployed, p: Pass, work: Work) -> Work:
        """The pass as an engine runs it. The lesson's ledger multiplies every parameter by
        every token; an engine looks the input embedding up (no FLOPs, and of an untied table
        only the tokens' rows are read) and runs the lm_head on the tokens it samples alone."""
        a = d.arch
        lookup = 0 if a.tied_embeddings else a.embedding_params  # a table only looked up
        head = a.embedding_params if a.tied_embeddings else a.lm_head_params
        flops = work.linear_flops - 2.0 * lookup * p.tokens - 2.0 * head * (p.tokens - p.sampled)
        weight_bytes = work.weight_bytes - lookup * weight_bytes_per_param(a, d.prec)
        return Work(  # written out: dataclasses.replace costs more than the pass's arithmetic
            tokens=work.tokens,
            linear_flops=flops,
            attention_flops=work.attention_flops,
            weight_bytes=weight_bytes,
            kv_read_bytes=work.kv_read_bytes,
            kv_write_bytes=work.kv_write_bytes,
            expert_weight_bytes=work.expert_weight_bytes,
            expert_flops=work.expert_flops,
            attention_weight_bytes=work.attention_weight_bytes,
            attention_linear_flops=work.attention_linear_flops,
            sequences=work.sequences,
        )

    def dequant_factor(self, fmt: str, maths: str, async_mma: bool = False, native: bool = False) -> float:
        """What a matmul keeps of its rate when it unpacks narrower weights to its maths
        dtype (int4 weights into fp16 maths); 1 when weights and maths are as wide. On a part
        whose full rate needs asynchronous MMA (Hopper, datacentre Blackwell), it keeps
        dequant_async of that again: weights unpacked in registers feed the warp-level MMA
        of the generation before, not the asynchronous one, unless the engine's kernels
        unpack them into the asynchronous MMA's operands (unpack_async). So does a matmul of
        weights as wide as the maths where the engine's kernels all reach only what the
        warp-level MMA does there (warp_mma_only). Weights the tensor cores take as they are
        (`native`) are not unpacked."""
        late = self.dequant_async if async_mma and self.warp_mma(fmt, maths, native) else 1.0
        return self.dequant.get(fmt, 1.0) * late if unpacked(fmt, maths, native) else late

    def warp_mma(self, fmt: str, maths: str, native: bool = False) -> bool:
        """Whether its matmuls of these weights under this maths run at the warp-level MMA's
        rate on a part that needs asynchronous MMA: a weight-only format's, unless the profile
        says unpack_async, or every one where it says warp_mma_only."""
        return self.warp_mma_only or (unpacked(fmt, maths, native) and not self.unpack_async)

    def resident_expert_factor(self, d: Deployed) -> float:
        """What a MoE's routed experts hold in memory against their stored bytes: more when
        they are 4-bit weights the engine unpacks weight-only on a part without asynchronous
        MMA (vLLM serves MXFP4 there through Marlin), else as stored."""
        if self.repacked_experts == 1.0 or not d.arch.is_moe or d.hw.async_mma:
            return 1.0
        fmt = stored_format(d.arch, d.prec)
        native = float4_native(d.arch, d.prec, d.hw)
        return self.repacked_experts if fmt == "w4" and unpacked(fmt, d.prec.maths, native) else 1.0

    def sinks_factor(self, a: Architecture, hw: Accelerator) -> float:
        """Attention with sinks (gpt-oss) against attention without (sinks_apart)."""
        return self.sinks if sinks_apart(a, hw) else 1.0

    def step_overhead_s(self, layers: float, tp: int = 1, graphed: bool = False) -> float:
        """A step's overhead but for its sequences, over `layers` dense layers' worth
        (`dense_layers`): launched kernel by kernel, or (`graphed`) a decode step replayed as a
        CUDA graph."""
        share = self.graph if graphed else 1.0
        return (self.fixed_s + self.per_layer_s * layers * share) * (1.0 + self.tp_scale * math.log2(tp))

    def dense_layers(self, a: Architecture) -> float:
        """A model's layers as dense layers' per-layer cost: each MoE layer counts moe_layer."""
        return a.layers + (self.moe_layer - 1.0) * a.moe_layers

    def captured(self, tokens: Num, sequences: Num) -> Num:
        """Whether the engine replays this pass as a CUDA graph: a decode-only step (one new
        token a sequence) of at most graph_max_seqs sequences."""
        return (tokens == sequences) & (sequences <= self.graph_max_seqs)

    def reach(self, d: Deployed) -> Reach:
        """This profile's rates on `d` before a pass's size enters (a deployment keeps its
        engine's as `engine_reach`, worked out once)."""
        v, vm = self.vendor_factor(d.hw.vendor_name), self.vendor_memory_factor(d.hw.vendor_name)
        maths, hw, bw = d.prec.maths, d.hw, d.hw.bandwidth_bytes_per_s
        fmt = stored_format(d.arch, d.prec)
        layers = self.dense_layers(d.arch)
        native = float4_native(d.arch, d.prec, hw)
        unpack = self.dequant_factor(fmt, maths, hw.async_mma, native)
        full = hw.sustained(maths) * self.gemm_efficiency(maths) * v * unpack
        att = attention_maths(maths, d.prec.kv)  # attention's own dtype, not the weights'
        att = att if att == maths or att in hw.peak_flops else "bf16"
        attention = hw.sustained(att) * self.attention * v * self.sinks_factor(d.arch, hw)
        return Reach(
            gemm_flops_per_s=full,
            expert_flops_per_s=full * self.expert_share(d.arch, hw),
            attention_flops_per_s=attention,
            weight_bytes_per_s=self.weight_bytes_per_s(fmt, hw, vm),
            kv_bytes_per_s=bw * self.kv * vm,
            step_overhead_s=self.step_overhead_s(layers, d.par.tp) * hw.dies,
            collective_latency_s=self.latency_s(d.hw.link_kind),
            link_bytes_per_s=d.hw.interconnect_bytes_per_s * self.link_efficiency,
            graph_overhead_s=self.step_overhead_s(layers, d.par.tp, graphed=True) * hw.dies,
            half_m_tokens=self.half_m_tokens * d.hw.mma_rows / REFERENCE_MMA_ROWS,
            host_sequence_s=self.host_sequence_s * d.hw.host_overhead,
            host_step_s=self.host_step_s * d.hw.host_overhead,
            vector_flops_per_s=self.vector_flops_per_s(
                hw, maths, v * self.dequant_factor(fmt, maths, native=native)
            ),
        )

    def vector_flops_per_s(self, hw: Accelerator, maths: str, factor: float) -> float:
        """What a matmul of a few tokens reaches on the vector units, where the part has
        matrix units apart from them: a matrix-vector kernel (cuBLAS's GEMV, llama.cpp's MMVQ)
        does its FLOPs there, at the profile's fp32 matmul share of their peak, however few
        tokens it has, where a tensor-core tile would pad them (small_m_rate). On a part whose
        only units are its vector ones (Apple's GPUs, a CPU), 0: the falloff is theirs."""
        vector = hw.peak_flops.get("fp32", 0.0)
        if not vector or vector >= hw.peak(maths):
            return 0.0
        return vector * self.gemm_efficiency("fp32") * factor

    def weight_bytes_per_s(self, fmt: str, hw: Accelerator, vendor_memory: float) -> float:
        """The bytes a second its kernels stream weights of this format at: the bandwidth's
        share `weights[fmt]`, but no more than its cores keep in flight, `stream[fmt]` bytes a
        core a clock (Little's law), where the profile and the catalogue state both; a
        vendor's stack reaches its own share of either (`vendor_memory`)."""
        if self.cores_bind(fmt, hw):
            return self.stream[fmt] * hw.unit_cycles_per_s * vendor_memory
        return hw.bandwidth_bytes_per_s * self.weights[fmt] * vendor_memory

    def streams(self, fmt: str, hw: Accelerator) -> bool:
        """Whether its cores' streaming bounds this format's weight reads on hw: the profile
        and the catalogue both state it (the term a prediction there rests on, whether or
        not it binds: `cores_bind`)."""
        return fmt in self.stream and hw.unit_cycles_per_s > 0

    def cores_bind(self, fmt: str, hw: Accelerator) -> bool:
        """Whether, on hw, its cores' streaming sits below the bandwidth's share for this
        format, so that they, not the memory, set the weight reads' rate."""
        return self.streams(fmt, hw) and (
            self.stream[fmt] * hw.unit_cycles_per_s < hw.bandwidth_bytes_per_s * self.weights[fmt]
        )

    def rates(self, d: Deployed, tokens: Num, sequences: Num = 1) -> Rates:
        """What a pass of `tokens` new tokens over `sequences` sequences reaches on `d`."""
        r = d.engine_reach if d.engine is self else self.reach(d)
        overlapped = self.scheduler.overlap
        host = r.host_step_s + r.host_sequence_s * sequences  # the host's work this step
        gemm = maximum(small_m_rate(r.gemm_flops_per_s, tokens, r.half_m_tokens), r.vector_flops_per_s)
        a = d.arch  # a routed expert's matmul sees only the tokens routed to it
        experts = (
            small_m_rate(r.expert_flops_per_s, tokens_per_expert(a, tokens), r.half_m_tokens)
            if a.is_moe
            else gemm
        )
        return Rates(
            linear_flops_per_s=gemm,
            attention_flops_per_s=r.attention_flops_per_s,
            weight_bytes_per_s=r.weight_bytes_per_s,
            kv_bytes_per_s=r.kv_bytes_per_s,
            overhead_s=self._launches_s(r, tokens, sequences)
            + self.per_sequence_s * sequences
            + (0.0 if overlapped else host),
            collective_latency_s=r.collective_latency_s,
            link_bytes_per_s=r.link_bytes_per_s,
            expert_flops_per_s=experts,
            apart=True,
            host_s=host if overlapped else 0.0,
        )

    def _launches_s(self, r: Reach, tokens: Num, sequences: Num) -> Num:
        """The step's overhead but for its sequences: smaller for a step replayed as a graph."""
        if not self.graph_max_seqs or r.graph_overhead_s == r.step_overhead_s:
            return r.step_overhead_s
        return select(self.captured(tokens, sequences), r.graph_overhead_s, r.step_overhead_s)

    def expert_share(self, a: Architecture, hw: Accelerator) -> float:
        """What a routed expert's grouped matmuls keep of a dense matmul's rate: `experts`;
        for experts W wide, W / (W + expert_half_width) of that; and on a part whose full
        rate needs asynchronous MMA (Hopper, datacentre Blackwell), `experts_async` of that
        again: the dense matmuls there are warp-specialised TMA/wgmma kernels, and grouped
        ones over many small per-expert problems reach less of that peak than of Ampere's."""
        h = self.expert_half_width
        narrow = a.expert_mlp / (a.expert_mlp + h) if h > 0 and a.is_moe else 1.0
        return self.experts * narrow * (self.experts_async if hw.async_mma else 1.0)

    def server_s(self, requests: Num, prompt_tokens: Num, streamed_tokens: Num) -> Num:
        """The time the server's one process needs for these requests, their prompts and
        the tokens it streams: the least a run over HTTP takes, however fast the engine."""
        return (
            requests * self.request_s
            + prompt_tokens * self.prompt_token_s
            + streamed_tokens * self.stream_token_s
        )

    def first_token_behind(self, front_end: str) -> float:
        """The first token's extra cost over HTTP behind a front end: the engine's own
        server's (`first_token_s`, front_end ""), or another's that wraps the engine (NIM's:
        its own HTTP, tokeniser and routing) where the profile knows it."""
        return self.front_end_s.get(front_end, self.first_token_s) if front_end else self.first_token_s

    def latency_s(self, link: str) -> float:
        """A collective's latency over this kind of link (the slowest known when unknown)."""
        return self.collective_latency_s.get(link, max(self.collective_latency_s.values()))

    def terms(self, d: Deployed) -> list[str]:
        """The terms of this profile every prediction on `d` rests on, whatever its workload:
        its matmul rate, weight format, unpacking, KV and attention, the step's fixed costs,
        the expert terms of a MoE, sinks before Hopper, the vendor's factors off NVIDIA, TP
        growth at TP > 1, and the link's latency and bandwidth wherever GPUs exchange
        activations (TP's all-reduces, PP's hand-offs). (The fit adds the workload's own: a
        batch's, a CUDA graph's, an HTTP server's.)"""
        a, hw, maths = d.arch, d.hw, d.prec.maths
        fmt = stored_format(a, d.prec)
        keys = [f"gemm.{self.gemm_key(maths)}", f"weights.{fmt}", "kv", "attention", "half_m_tokens"]
        keys += ["fixed_s", "per_layer_s"]  # the step's own costs
        if self.host_step_s:
            keys.append("host_step_s")
        if self.streams(fmt, hw):
            keys.append(f"stream.{fmt}")
        native = float4_native(a, d.prec, hw)
        if self.dequant_factor(fmt, maths, native=native) != 1.0:
            keys.append(f"dequant.{fmt}")
        if hw.async_mma and self.warp_mma(fmt, maths, native):
            keys.append("dequant_async")
        if a.is_moe:
            keys += ["experts", "expert_half_width", "moe_layer"]
            keys += ["experts_async"] if hw.async_mma else []
        if sinks_apart(a, hw):
            keys.append("sinks")
        if hw.vendor_name != "nvidia":
            keys += [f"vendor.{hw.vendor_name}", f"vendor_memory.{hw.vendor_name}"]
        if d.par.tp > 1:
            keys.append("tp_scale")
        if collectives_per_pass(a, d.par):  # what comm_time_s prices
            keys += [f"collective_latency_s.{hw.link_kind}", "link_efficiency"]
        return keys

    def rests_on(self, d: Deployed) -> list[str]:
        """What a prediction on `d` rests on: its terms and, served over HTTP, the server's
        first-token cost, which every TTFT there pays (a term of the workload, which the fit
        gives the rows over HTTP, not of the deployment)."""
        return [*self.terms(d), *([] if d.in_process else ["first_token_s"])]

    def unmeasured(self, d: Deployed) -> list[str]:
        """The terms a prediction on `d` rests on that no corpus row of this engine moved:
        those whose provenance says the fit left them at their prior (none for a profile
        without provenance, a user's own)."""
        return [k for k in self.rests_on(d) if self.provenance.get(k, "").startswith("prior")]

    def one_source(self, d: Deployed) -> list[str]:
        """The terms a prediction on `d` rests on that one source's runs alone moved (their
        provenance says "of 1 source"): in the fold that leaves that source out the prior
        stands, so no second source confirms them, and a run unlike that source's may miss
        by more than the band, made mostly of other terms' misses, says."""
        return [k for k in self.rests_on(d) if ONE_SOURCE.match(self.provenance.get(k, ""))]

    def band(self, regime: str) -> tuple[float, float] | None:
        """The band (low, high) of measured / predicted in a regime, when the corpus gave one."""
        return self.uncertainty.get(regime)

    def ttft_band(self, first_token_share: float) -> tuple[float, float] | None:
        """The band of a TTFT whose first_token_share is not its prompt's pass (ttft_band)."""
        return ttft_band(self.band(PREFILL), self.band(FIRST_TOKEN), first_token_share)

    def load_band(self, server_share: float) -> tuple[float, float] | None:
        """The band of a run under load whose API server is busy server_share of it (load_band)."""
        return load_band(self.band(LOAD), self.band(SERVER), server_share)

    def server_share(self, requests_per_s: float, prompt_tokens: float, streamed_tokens: float) -> float:
        """The share of its time the server's one process is busy (server_s) passing on this
        many requests a second, each with prompts and streamed tokens of these mean lengths;
        at most 1, where the server, not the engine, sets the rate."""
        r = requests_per_s
        return min(max(float(self.server_s(r, r * prompt_tokens, r * streamed_tokens)), 0.0), 1.0)

    def scaled(self, factor: float) -> EngineProfile:
        """This engine `factor` times as slow: every rate it reaches divided by `factor` (its
        vendors' factors, which multiply every FLOP/s and byte/s, and its links' share) and
        every cost it pays multiplied by it, so that every step, first token and server's
        work takes `factor` times as long, on any deployment. A band's ends: `plan` plans
        again with the engine as slow as the corpus says it may be."""
        check_number("the slowdown factor", factor, lo=1e-3, hi=1e3)
        vendor = {k: v / factor for k, v in self.vendor.items()}
        vendor["default"] = self.vendor.get("default", 1.0) / factor  # a vendor the profile leaves out

        def slower(costs: dict[str, float]) -> dict[str, float]:
            return {k: v * factor for k, v in costs.items()}

        return replace(
            self,
            vendor=vendor,
            vendor_memory={k: v / factor for k, v in self.vendor_memory.items()},
            link_efficiency=self.link_efficiency / factor,
            fixed_s=self.fixed_s * factor,
            per_layer_s=self.per_layer_s * factor,
            per_sequence_s=self.per_sequence_s * factor,
            first_token_s=self.first_token_s * factor,
            collective_latency_s=slower(self.collective_latency_s),
            request_s=self.request_s * factor,
            prompt_token_s=self.prompt_token_s * factor,
            stream_token_s=self.stream_token_s * factor,
            host_sequence_s=self.host_sequence_s * factor,
            host_step_s=self.host_step_s * factor,
            front_end_s=slower(self.front_end_s),
        )


def sinks_apart(a: Architecture, hw: Accelerator) -> bool:
    """Whether a model's attention sinks take kernels of their own: on a part before Hopper;
    the flash kernels of Hopper and Blackwell carry the sinks."""
    return a.attention_sinks and not hw.async_mma


def ttft_band(
    prefill: tuple[float, float] | None, first_token: tuple[float, float] | None, first_token_share: float
) -> tuple[float, float] | None:
    """A TTFT's band. Its two parts err apart: the prompt's pass as the pass does wherever it
    was measured alone (llama-bench, trtllm-bench: the prefill band, a matmul's and
    attention's misses, a share of the time), the rest, the server's first-token work and
    a wait behind running steps, as served TTFTs do (the first-token band: their misses
    are the server's, milliseconds whatever the prompt, and vary from lab to lab). So a
    long prompt's TTFT, all pass, takes the prefill band, and a TTFT the server's work is
    a fifth or more of (FIRST_TOKEN_FULL_SHARE) the first-token band, and between the two
    the band moves from one to the other with that share. Without a first-token band, the
    prefill band alone. The bands are made of the held-out rows on either side of half
    that share (accuracy.corpus.band_regime)."""
    return blended_band(prefill, first_token, first_token_share / FIRST_TOKEN_FULL_SHARE)


def load_band(
    load: tuple[float, float] | None, server: tuple[float, float] | None, server_share: float
) -> tuple[float, float] | None:
    """A band under load. A run whose API server is idle most of the time errs as the
    engine's steps do (the load band); one whose server is busy errs as well by the
    server's own work on each request, which the profile prices from a few runs and which
    varies from release to release and lab to lab (the server band: short requests at many
    a second, where vLLM 0.11's runs of 128-token prompts read up to five times as long as
    predicted). So the band moves from the load band to the server band as the server's
    share of the run (EngineProfile.server_share) goes to a fifth (SERVER_FULL_SHARE); the
    bands are made of the held-out rows on either side of half that share
    (accuracy.corpus.band_regime). Without a server band, the load band alone."""
    return blended_band(load, server, server_share / SERVER_FULL_SHARE)


def blended_band(
    base: tuple[float, float] | None, other: tuple[float, float] | None, weight: float
) -> tuple[float, float] | None:
    """`base` moved to `other` by `weight` (held to 0..1), end by end; None without `base`,
    `base` without `other`."""
    if base is None:
        return None
    far = other or base
    w = min(max(weight, 0.0), 1.0)
    return ((1 - w) * base[0] + w * far[0], (1 - w) * base[1] + w * far[1])


def small_m_rate(flops_per_s: Num, m: Num, half_m: float) -> Num:
    """A matmul of M rows reaches M / (M + half_m) of a large one's rate."""
    return flops_per_s * m / (m + half_m) if half_m > 0 else flops_per_s


# --- reading profiles -------------------------------------------------------------------

MAX_SHARE = 1.5  # the most of a peak a profile may claim: a fit may beat a data sheet a little
_FRACTION = (1e-4, MAX_SHARE)
MAX_SECONDS = 10.0  # the most any fixed cost or latency of a profile may be
_SECONDS = (0.0, MAX_SECONDS)


def _num(where: str, key: str, value: Any, bounds: tuple[float, float]) -> float:
    return check_number(f"{where}: {key}", value, lo=bounds[0], hi=bounds[1])


def _weight_format(where: str, key: str) -> bool:
    if key not in WEIGHT_FORMATS:
        raise RidgelineError(f"{where}: compute.dequant.{key}: use one of {', '.join(WEIGHT_FORMATS)}")
    return True


def _maths(where: str, weights: str, maths: Any) -> str:
    stored = (*WEIGHT_DTYPES, *CHECKPOINT_DTYPES)
    if weights not in stored or maths not in MATHS_DTYPES:
        raise RidgelineError(
            f"{where}: compute.maths maps a weight dtype ({', '.join(stored)}) to a maths dtype "
            f"({', '.join(MATHS_DTYPES)}), got {weights} = {maths!r:.40}"
        )
    return str(maths)


def _table(where: str, entry: dict[str, Any], key: str) -> dict[str, Any]:
    value = entry.get(key, {})
    if not isinstance(value, dict):
        raise RidgelineError(f"{where}: {key} must be a table, got {value!r:.60}")
    return value


_SEQS, _TOKENS, _GRAPHS = (1, 1 << 20), (1, 1 << 24), (0, 1 << 20)
MAX_SCHEDULER_STEPS = 1024  # decode steps one scheduling may run (Scheduler.num_scheduler_steps)


_COUNTS = {
    "max_num_seqs": _SEQS,
    "max_num_batched_tokens": _TOKENS,
    "small_max_num_seqs": _SEQS,
    "small_max_num_batched_tokens": _TOKENS,
    "large_max_num_seqs": _SEQS,
    "large_max_num_batched_tokens": _TOKENS,
    "num_scheduler_steps": (1, MAX_SCHEDULER_STEPS),
}


DP_LIMITS = ("replica", "rank")  # Scheduler.dp_limits


def check_dp_limits(name: str, value: Any) -> str:
    """Whose a scheduler's limits are under data-parallel attention: one of DP_LIMITS."""
    if value not in DP_LIMITS:
        raise RidgelineError(f"{name} must be one of {', '.join(DP_LIMITS)}, got {value!r:.60}")
    return str(value)


def _scheduler(w: str, sched: dict[str, Any]) -> Scheduler:
    """A profile's scheduler table; what it leaves out takes Scheduler's own defaults."""
    gpus = sched.get("small_gpus", [])
    if not isinstance(gpus, list) or not all(isinstance(g, str) and g for g in gpus):
        raise RidgelineError(f'{w}: scheduler.small_gpus must be a list of names, e.g. ["a100"]')
    given: dict[str, Any] = {
        key: int(_num(w, f"scheduler.{key}", sched[key], bounds))
        for key, bounds in _COUNTS.items()
        if key in sched
    }
    for key in ("small_below_memory_gib", "large_from_memory_gib"):
        if key in sched:
            given[key] = _num(w, f"scheduler.{key}", sched[key], (0.0, 1e6))
    chunked = check_flag(f"{w}: scheduler.chunked_prefill", sched.get("chunked_prefill", True))
    caching = check_flag(f"{w}: scheduler.prefix_caching", sched.get("prefix_caching", False))
    overlap = check_flag(f"{w}: scheduler.overlap", sched.get("overlap", False))
    dp_limits = check_dp_limits(f"{w}: scheduler.dp_limits", sched.get("dp_limits", "replica"))
    if given.get("num_scheduler_steps", 1) > 1 and chunked:
        raise RidgelineError(
            f"{w}: scheduler.num_scheduler_steps runs every prefill whole, as vLLM 0.6's multi-step "
            "scheduling does: set scheduler.chunked_prefill = false"
        )
    return Scheduler(
        policy=str(sched.get("policy", "vllm")),
        chunked_prefill=chunked,
        prefix_caching=caching,
        overlap=overlap,
        dp_limits=dp_limits,
        small_gpus=tuple(g.lower() for g in gpus),
        **given,
    )


DP_REPLICATES = ("attention", "dense", "none")  # EngineProfile.dp_replicates; none: no such mode


def profile_from_entry(name: str, entry: dict[str, Any], where: str) -> EngineProfile:
    """One profile from its TOML table; every number checked against physical bounds."""
    w = f"{where} [{name}]"
    if not isinstance(entry, dict):
        raise RidgelineError(f"{where}: {name!r} must be a table of fields, see data/engines.toml")
    compute, memory = _table(w, entry, "compute"), _table(w, entry, "memory")
    overhead, collective = _table(w, entry, "overhead"), _table(w, entry, "collective")
    sched, band = _table(w, entry, "scheduler"), _table(w, entry, "uncertainty")
    gemm = {str(k): _num(w, f"compute.gemm.{k}", v, _FRACTION) for k, v in _table(w, compute, "gemm").items()}
    if not gemm:
        raise RidgelineError(f"{w}: compute.gemm needs at least one dtype, e.g. bf16 = 0.7")
    maths = {str(k): _maths(w, str(k), v) for k, v in _table(w, compute, "maths").items()}
    weights = {
        k: _num(w, f"memory.weights.{k}", v, _FRACTION) for k, v in _table(w, memory, "weights").items()
    }
    missing = [f for f in WEIGHT_FORMATS if f not in weights]
    if missing:
        raise RidgelineError(f"{w}: memory.weights lacks {', '.join(missing)}")
    latency = {
        str(k): _num(w, f"collective.latency_s.{k}", v, _SECONDS)
        for k, v in _table(w, collective, "latency_s").items()
    }
    if not latency:
        latency = {"none": 8e-6}
    bands: dict[str, tuple[float, float]] = {}
    for regime, pair in band.items():
        if regime not in REGIMES or not isinstance(pair, list) or len(pair) != 2:
            raise RidgelineError(
                f"{w}: uncertainty.{regime} must be [low, high] for one of {', '.join(REGIMES)}"
            )
        lo, hi = (_num(w, f"uncertainty.{regime}", x, (1e-3, 1e3)) for x in pair)
        if lo > hi:
            raise RidgelineError(f"{w}: uncertainty.{regime} must be [low, high], got {pair!r}")
        bands[regime] = (lo, hi)
    try:
        scheduler = _scheduler(w, sched)
    except RidgelineError:
        raise  # names its field already
    except (TypeError, ValueError) as exc:
        raise RidgelineError(f"{w}: scheduler: {exc}") from None
    runs_on = entry.get("runs_on", [])
    if not isinstance(runs_on, list) or not all(isinstance(v, str) and v.isidentifier() for v in runs_on):
        raise RidgelineError(f'{w}: runs_on must be a list of vendor names, e.g. ["nvidia", "amd"]')
    dp_replicates = entry.get("dp_replicates", "attention")
    if dp_replicates not in DP_REPLICATES:
        raise RidgelineError(
            f"{w}: dp_replicates must be one of {', '.join(DP_REPLICATES)}, got {dp_replicates!r}"
        )
    provenance = entry.get("provenance", {})
    return EngineProfile(
        name=name,
        label=str(entry.get("label", name)),
        gemm=gemm,
        maths=maths,
        half_m_tokens=_num(w, "compute.half_m_tokens", compute.get("half_m_tokens", 0.0), (0.0, 1e5)),
        attention=_num(w, "compute.attention", compute.get("attention", min(gemm.values())), _FRACTION),
        experts=_num(w, "compute.experts", compute.get("experts", 1.0), _FRACTION),
        sinks=_num(w, "compute.sinks", compute.get("sinks", 1.0), _FRACTION),
        dequant_async=_num(w, "compute.dequant_async", compute.get("dequant_async", 1.0), _FRACTION),
        warp_mma_only=check_flag(f"{w}: compute.warp_mma_only", compute.get("warp_mma_only", False)),
        unpack_async=check_flag(f"{w}: compute.unpack_async", compute.get("unpack_async", False)),
        experts_async=_num(w, "compute.experts_async", compute.get("experts_async", 1.0), _FRACTION),
        expert_half_width=_num(
            w, "compute.expert_half_width", compute.get("expert_half_width", 0.0), (0.0, 1e5)
        ),
        dequant={
            k: _num(w, f"compute.dequant.{k}", v, _FRACTION)
            for k, v in _table(w, compute, "dequant").items()
            if _weight_format(w, k)
        },
        weights=weights,
        kv=_num(w, "memory.kv", memory.get("kv", weights["w16"]), _FRACTION),
        sampler_bytes=_num(w, "memory.sampler_bytes", memory.get("sampler_bytes", 0.0), (0.0, 1024.0)),
        repacked_experts=_num(w, "memory.repacked_experts", memory.get("repacked_experts", 1.0), (1.0, 4.0)),
        stream={
            k: _num(w, f"memory.stream.{k}", v, (0.01, 1024.0))
            for k, v in _table(w, memory, "stream").items()
            if _weight_format(w, k)
        },
        fixed_s=_num(w, "overhead.fixed_s", overhead.get("fixed_s", 0.0), _SECONDS),
        per_layer_s=_num(w, "overhead.per_layer_s", overhead.get("per_layer_s", 0.0), _SECONDS),
        per_sequence_s=_num(w, "overhead.per_sequence_s", overhead.get("per_sequence_s", 0.0), _SECONDS),
        host_sequence_s=_num(w, "overhead.host_sequence_s", overhead.get("host_sequence_s", 0.0), _SECONDS),
        host_step_s=_num(w, "overhead.host_step_s", overhead.get("host_step_s", 0.0), _SECONDS),
        tp_scale=_num(w, "overhead.tp_scale", overhead.get("tp_scale", 0.0), (0.0, 10.0)),
        first_token_s=_num(w, "overhead.first_token_s", overhead.get("first_token_s", 0.0), _SECONDS),
        request_s=_num(w, "overhead.request_s", overhead.get("request_s", 0.0), _SECONDS),
        prompt_token_s=_num(w, "overhead.prompt_token_s", overhead.get("prompt_token_s", 0.0), _SECONDS),
        stream_token_s=_num(w, "overhead.stream_token_s", overhead.get("stream_token_s", 0.0), _SECONDS),
        front_end_s={
            str(k): _num(w, f"overhead.front_end_s.{k}", v, _SECONDS)
            for k, v in _table(w, overhead, "front_end_s").items()
        },
        graph=_num(w, "overhead.graph", overhead.get("graph", 1.0), (1e-4, 1.0)),
        moe_layer=_num(w, "overhead.moe_layer", overhead.get("moe_layer", 1.0), (1.0, 10.0)),
        graph_max_seqs=int(_num(w, "overhead.graph_max_seqs", overhead.get("graph_max_seqs", 0), _GRAPHS)),
        collective_latency_s=latency,
        link_efficiency=_num(
            w, "collective.link_efficiency", collective.get("link_efficiency", 1.0), _FRACTION
        ),
        vendor={str(k): _num(w, f"vendor.{k}", v, _FRACTION) for k, v in _table(w, entry, "vendor").items()},
        vendor_memory={
            str(k): _num(w, f"vendor_memory.{k}", v, _FRACTION)
            for k, v in _table(w, entry, "vendor_memory").items()
        },
        scheduler=scheduler,
        runs_on=tuple(runs_on),
        dp_replicates=dp_replicates,
        uncertainty=bands,
        source=str(entry.get("source", where)),
        provenance={str(k): str(v) for k, v in provenance.items()} if isinstance(provenance, dict) else {},
    )


def _profiles(data: dict[str, Any], where: str) -> dict[str, EngineProfile]:
    return {name: profile_from_entry(name, entry, where) for name, entry in data.items()}


@lru_cache(maxsize=1)
def builtin_engines() -> dict[str, EngineProfile]:
    return _profiles(_files.parse(_files.package_text("engines.toml"), "engines.toml"), "engines.toml")


def user_engine_files() -> list[str]:
    folder = _files.config_dir_text()
    found = [os.path.join(folder, "engines.toml")]
    paths = [p for p in found if os.path.exists(p)]
    return paths + [p for p in os.environ.get("RIDGELINE_ENGINES", "").split(os.pathsep) if p]


def engines() -> dict[str, EngineProfile]:
    """Built-in profiles, then the user's files; later entries win."""
    out = dict(builtin_engines())
    for path in user_engine_files():
        out.update(_files.read_user_entries(path, _profiles))
    return out


def get_engine(spec: str | os.PathLike[str]) -> EngineProfile:
    """A profile by name, or the one profile in a TOML file (`--engine my-engine.toml`)."""
    from pathlib import Path

    spec = check_text("an engine", spec, "a profile's name, a .toml file or an EngineProfile")
    known = engines()
    if spec.lower() in known:
        return known[spec.lower()]
    if spec.endswith(".toml") and Path(spec).expanduser().is_file():
        found = _files.read_user_entries(spec, _profiles)
        if len(found) != 1:
            raise RidgelineError(f"{spec!r} must hold exactly one engine profile, it holds {len(found)}")
        return next(iter(found.values()))
    raise unknown_name("engine", spec, known, "ridgeline engines")


def profile_to_toml(p: EngineProfile) -> str:
    """A profile as the TOML table that reads it back (what `fit --engine` writes)."""

    def table(d: dict[str, Any]) -> str:
        return _toml_value(d)

    lines = [
        f"[{p.name}]",
        f"label = {_toml_value(p.label)}",
        f"source = {_toml_value(p.source)}",
        "compute = "
        + table(
            {
                "gemm": p.gemm,
                **({"maths": p.maths} if p.maths else {}),
                "half_m_tokens": p.half_m_tokens,
                "attention": p.attention,
                "experts": p.experts,
                "experts_async": p.experts_async,
                "sinks": p.sinks,
                "expert_half_width": p.expert_half_width,
                "dequant": p.dequant,
                "dequant_async": p.dequant_async,
                **({"warp_mma_only": True} if p.warp_mma_only else {}),
                **({"unpack_async": True} if p.unpack_async else {}),
            }
        ),
        "memory = "
        + table(
            {
                "weights": p.weights,
                "kv": p.kv,
                **({"sampler_bytes": p.sampler_bytes} if p.sampler_bytes else {}),
                **({"repacked_experts": p.repacked_experts} if p.repacked_experts != 1.0 else {}),
                **({"stream": p.stream} if p.stream else {}),
            }
        ),
        "overhead = "
        + table(
            {
                "fixed_s": p.fixed_s,
                "per_layer_s": p.per_layer_s,
                "per_sequence_s": p.per_sequence_s,
                "tp_scale": p.tp_scale,
                "first_token_s": p.first_token_s,
                "request_s": p.request_s,
                "prompt_token_s": p.prompt_token_s,
                "stream_token_s": p.stream_token_s,
                **({"front_end_s": p.front_end_s} if p.front_end_s else {}),
                **({"host_sequence_s": p.host_sequence_s} if p.host_sequence_s else {}),
                **({"host_step_s": p.host_step_s} if p.host_step_s else {}),
                **({"graph": p.graph, "graph_max_seqs": p.graph_max_seqs} if p.graph_max_seqs else {}),
                **({"moe_layer": p.moe_layer} if p.moe_layer != 1.0 else {}),
            }
        ),
        "collective = " + table({"latency_s": p.collective_latency_s, "link_efficiency": p.link_efficiency}),
        f"vendor = {table(p.vendor)}",
        *([f"vendor_memory = {table(p.vendor_memory)}"] if p.vendor_memory else []),
        "scheduler = " + table(_scheduler_fields(p.scheduler)),
    ]
    if p.runs_on:
        lines.append(f"runs_on = {_toml_value(list(p.runs_on))}")
    if p.dp_replicates != "attention":
        lines.append(f"dp_replicates = {_toml_value(p.dp_replicates)}")
    if p.uncertainty:
        lines.append("uncertainty = " + table({k: list(v) for k, v in p.uncertainty.items()}))
    if p.provenance:
        lines.append("provenance = " + table(p.provenance))
    return "\n".join(lines) + "\n"


def _toml_key(k: str) -> str:
    """A bare key when TOML allows one, else a quoted one (`"gemm.bf16"`)."""
    return k if k.replace("_", "").replace("-", "").isalnum() else _toml_value(str(k))


def _toml_value(v: Any) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):  # four significant figures: more than any fitted number knows
        return repr(float(f"{v:.4g}"))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    text = str(v).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def _scheduler_fields(sc: Scheduler) -> dict[str, Any]:
    """A scheduler as its TOML table: the accelerator-dependent defaults only when set."""
    fields: dict[str, Any] = {
        "policy": sc.policy,
        "max_num_seqs": sc.max_num_seqs,
        "max_num_batched_tokens": sc.max_num_batched_tokens,
        "chunked_prefill": sc.chunked_prefill,
        "prefix_caching": sc.prefix_caching,
        "overlap": sc.overlap,
    }
    if sc.dp_limits != "replica":
        fields["dp_limits"] = sc.dp_limits
    if sc.num_scheduler_steps != 1:
        fields["num_scheduler_steps"] = sc.num_scheduler_steps
    tiers = {
        "small_max_num_seqs": sc.small_max_num_seqs,
        "small_max_num_batched_tokens": sc.small_max_num_batched_tokens,
        "small_below_memory_gib": sc.small_below_memory_gib or None,
        "small_gpus": list(sc.small_gpus) or None,
        "large_max_num_seqs": sc.large_max_num_seqs,
        "large_max_num_batched_tokens": sc.large_max_num_batched_tokens,
        "large_from_memory_gib": sc.large_from_memory_gib or None,
    }
    return fields | {k: v for k, v in tiers.items() if v is not None}
