"""The command that launches a point on its engine: `vllm serve`, `python -m
sglang.launch_server`, `trtllm-serve` or `llama-server`, one replica of it.

Every flag carries a number the simulation used (TP, PP, EP, the sequence limit, the token
budget, the KV dtype, the memory share, the largest decode batch replayed as a CUDA graph
where the engine's default differs by version or GPU); what the engine reads another way (a checkpoint's
own quantization, a KV dtype it lacks, memory counted differently) is said in
`assumptions`, never guessed silently. Replicas are separate servers behind a round-robin
load balancer, as the simulation routed them.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ridgeline.deployment import Deployment
from ridgeline.memory import stored_weight_bytes_per_gpu
from ridgeline.simulate.kvcache import kv_cache

ENGINES = ("vllm", "sglang", "trtllm", "llamacpp")


@dataclass(frozen=True)
class Launch:
    engine: str
    argv: tuple[str, ...]
    replicas: int
    gpus_per_replica: int
    assumptions: tuple[str, ...]
    files: dict[str, str] = field(default_factory=dict)  # name -> text the command reads

    @property
    def command(self) -> str:
        return shlex.join(self.argv)

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "command": self.command,
            "argv": list(self.argv),
            "replicas": self.replicas,
            "gpus_per_replica": self.gpus_per_replica,
            "assumptions": list(self.assumptions),
            "files": dict(self.files),
        }


def model_argument(model: str, notes: list[str], gguf: bool = False) -> str:
    """What to hand the engine as the model: a Hugging Face id or a path as given; a
    catalogue name is ridgeline's, not the hub's."""
    p = Path(model).expanduser()
    if p.suffix == ".json":  # a config.json: the checkpoint is its folder
        notes.append(f"the model is the checkpoint folder holding {p.name}")
        return str(p.parent)
    if "/" in model or p.suffix == ".gguf":
        return model
    kind = "GGUF file" if gguf else "Hugging Face id or local path"
    notes.append(f"{model!r} is ridgeline's catalogue name: give the {kind} of your checkpoint")
    return model


def launch(
    row: dict[str, Any], model: str, d: Deployment, block_tokens: int, utilization: float
) -> Launch | None:
    """The launch command for a row of the search, or None for an engine ridgeline does not
    know how to launch (a user's own profile)."""
    engine = str(row["engine"])
    if engine not in ENGINES:
        return None
    notes: list[str] = []
    files: dict[str, str] = {}
    tp, pp, ep = int(row["tp"]), int(row["pp"]), int(row["ep"])
    dp = bool(row.get("dp_attention"))  # attention data-parallel over the TP GPUs
    seqs, budget = int(row["max_num_seqs"]), int(row["max_num_batched_tokens"])
    chunked = row.get("chunked_prefill") is not False
    weights, maths, kv = str(row["weights"]), str(row["maths"]), str(row["kv_dtype"])
    graphs = min(seqs, d.engine.graph_max_seqs) if d.engine is not None else 0  # decode batches captured
    overlap = d.engine is not None and d.engine.scheduler.overlap  # plans a step while one runs
    if engine == "vllm":
        argv = ["vllm", "serve", model_argument(model, notes)]
        if dp:  # each data-parallel rank a whole engine at TP 1, the experts spread over all of them
            argv += ["--tensor-parallel-size", "1", "--data-parallel-size", str(tp)]
            notes.append(
                "under --data-parallel-size each rank takes --max-num-seqs and --max-num-batched-tokens "
                "of its own, as the simulation did"
            )
        else:
            argv += ["--tensor-parallel-size", str(tp)]
        if pp > 1:
            argv += ["--pipeline-parallel-size", str(pp)]
        if ep > 1 or (dp and d.arch.is_moe):
            argv += ["--enable-expert-parallel"]
            if ep == 1:  # data-parallel ranks at TP 1 would each hold every expert without it
                notes.append(
                    f"the simulation split the experts by TP; vLLM's data-parallel ranks need "
                    f"--enable-expert-parallel, which places them whole on the GPUs: search --ep {tp * pp} "
                    "prices that"
                )
            elif ep != tp * pp:
                notes.append(f"vLLM spreads experts over all {tp * pp} GPUs of a replica, not {ep}")
        argv += ["--max-num-seqs", str(seqs), "--max-num-batched-tokens", str(budget)]
        if chunked:
            argv += ["--enable-chunked-prefill"]
        else:
            argv += ["--no-enable-chunked-prefill"]
            if budget < d.arch.max_context:  # vLLM asks the budget to cover the context
                argv += ["--max-model-len", str(budget)]
                notes.append(
                    "vLLM without chunked prefill needs --max-num-batched-tokens >= --max-model-len: "
                    "the context is capped at the budget, which holds every request of this workload"
                )
        if not overlap:  # vLLM schedules asynchronously by default (late 2025 on)
            argv += ["--no-async-scheduling"]
        argv += ["--block-size", str(block_tokens)]
        argv += ["--gpu-memory-utilization", f"{utilization:g}"]
        argv += vllm_dtypes(weights, maths, kv, notes)
    elif engine == "sglang":
        argv = ["python", "-m", "sglang.launch_server", "--model-path", model_argument(model, notes)]
        argv += ["--tp-size", str(tp)]
        if dp:
            argv += ["--dp-size", str(tp), "--enable-dp-attention"]
        if pp > 1:
            argv += ["--pp-size", str(pp)]
        if ep > 1:
            argv += ["--ep-size", str(ep)]
        argv += ["--max-running-requests", str(seqs)]
        if chunked:
            argv += ["--chunked-prefill-size", str(budget)]
        else:  # -1 turns chunking off; a prefill batch is then bounded by --max-prefill-tokens
            argv += ["--chunked-prefill-size", "-1", "--max-prefill-tokens", str(budget)]
        argv += ["--mem-fraction-static", f"{sglang_static_fraction(d, row, block_tokens, utilization):.2f}"]
        notes.append(
            "--mem-fraction-static is the share of memory for the weights and the KV pool: this value "
            "gives the KV cache the simulation had"
        )
        if graphs:
            argv += ["--cuda-graph-max-bs", str(graphs)]
        if not overlap:
            argv += ["--disable-overlap-schedule"]
        if str(row["policy"]) != "sglang":  # the sglang policy's prefill steps run no decodes, as SGLang's
            notes.append(
                "SGLang's --chunked-prefill-size bounds a step's prefill tokens; ridgeline's budget "
                "counted decodes too"
            )
        argv += sglang_dtypes(weights, kv, notes)
    elif engine == "trtllm":
        argv = ["trtllm-serve", model_argument(model, notes), "--backend", "pytorch"]
        argv += ["--tp_size", str(tp), "--pp_size", str(pp)]
        if ep > 1:
            argv += ["--ep_size", str(ep)]
        argv += ["--max_batch_size", str(seqs), "--max_num_tokens", str(budget)]
        argv += [
            "--kv_cache_free_gpu_memory_fraction",
            f"{trtllm_kv_fraction(d, row, block_tokens, utilization):.2f}",
        ]
        options = ["scheduler_config:", f"  capacity_scheduler_policy: {trtllm_policy(str(row['policy']))}"]
        options += [f"enable_chunked_prefill: {'true' if chunked else 'false'}"]
        if dp:
            options += ["enable_attention_dp: true"]
            notes.append(
                "with enable_attention_dp each rank takes --max_batch_size and --max_num_tokens of its "
                "own, as the simulation did"
            )
        if not overlap:
            options += ["disable_overlap_scheduler: true"]
        if graphs:
            options += ["cuda_graph_config:", "  enable_padding: true", f"  max_batch_size: {graphs}"]
        if kv in ("fp8", "int8"):
            options += ["kv_cache_config:", "  dtype: fp8"]
            if kv == "int8":
                notes.append("TensorRT-LLM's PyTorch backend keeps an fp8 KV cache, not int8")
        files["extra-llm-api-options.yaml"] = "\n".join(options) + "\n"
        argv += ["--extra_llm_api_options", "extra-llm-api-options.yaml"]
        notes.append(
            "--kv_cache_free_gpu_memory_fraction is of the memory left after the weights: this value "
            "gives the KV cache the simulation had"
        )
        if weights not in ("bf16", "fp16"):
            notes.append(
                f"{weights} weights: TensorRT-LLM reads the quantization from a ModelOpt checkpoint "
                f"({weights}) of the model"
            )
    else:  # llama.cpp
        argv = ["llama-server", "-m", model_argument(model, notes, gguf=True), "--n-gpu-layers", "999"]
        context = int(row["kv_tokens"] or 0) or seqs * 4096
        argv += ["--parallel", str(seqs), "--ctx-size", str(context)]
        argv += ["--batch-size", str(budget), "--ubatch-size", str(min(budget, 512))]
        if not chunked:
            notes.append(
                "llama-server carries a prompt longer than --batch-size over several batches: it has "
                "no switch for chunked prefill, so this --batch-size, which holds every prompt whole, "
                "stands in for it"
            )
        if tp > 1 or pp > 1:
            split = "row" if tp > 1 else "layer"
            argv += ["--split-mode", split, "--tensor-split", ",".join(["1"] * (tp * pp))]
            notes.append(
                f"llama.cpp splits a model over GPUs by rows (--split-mode row), not as TP {tp} "
                "with all-reduces: expect a slower step than the simulation's"
            )
        if kv in ("fp8", "int8"):
            argv += ["--cache-type-k", "q8_0", "--cache-type-v", "q8_0", "--flash-attn", "on"]
            notes.append(f"{kv} KV cache as llama.cpp's q8_0 (8.5 bits a value), which needs flash attention")
        notes.append(
            f"--ctx-size is the KV cells all {seqs} slots share: each slot holds at most "
            f"{context // max(seqs, 1):,} tokens"
        )
        notes.append(f"{weights} weights: {gguf_type(weights)} GGUF")
    notes.append(
        f"run {int(row['replicas'])} of these, {int(row['gpus_per_replica'])} GPU(s) each, behind a "
        "round-robin load balancer"
    )
    return Launch(
        engine, tuple(argv), int(row["replicas"]), int(row["gpus_per_replica"]), tuple(notes), files
    )


def vllm_dtypes(weights: str, maths: str, kv: str, notes: list[str]) -> list[str]:
    argv: list[str] = []
    if weights in ("bf16", "fp16"):
        argv += ["--dtype", "bfloat16" if weights == "bf16" else "float16"]
    elif weights == "fp8":
        argv += ["--quantization", "fp8"]
        notes.append(
            "--quantization fp8 quantizes a bf16 checkpoint as it loads; an FP8 checkpoint needs no flag"
            + ("" if maths == "fp8" else "; without fp8 maths vLLM runs it weight-only (Marlin)")
        )
    elif weights.startswith("int4"):
        argv += ["--quantization", "awq_marlin"]
        notes.append(f"{weights} weights: an AWQ checkpoint (GPTQ: --quantization gptq_marlin)")
    elif weights == "int8":
        notes.append("int8 weights: an INT8 (W8A8 or W8A16) checkpoint; vLLM reads its scheme from it")
    elif weights == "fp4":
        argv += ["--quantization", "modelopt_fp4"]
        notes.append("fp4 weights: an NVFP4 checkpoint from ModelOpt")
    else:
        notes.append(f"{weights} weights: a checkpoint stored so; vLLM reads its scheme from it")
    if kv == "fp8":
        argv += ["--kv-cache-dtype", "fp8"]
    elif kv == "int8":
        argv += ["--kv-cache-dtype", "fp8"]
        notes.append("vLLM has no int8 KV cache: fp8 holds the same bytes")
    return argv


def sglang_dtypes(weights: str, kv: str, notes: list[str]) -> list[str]:
    argv: list[str] = []
    if weights == "fp8":
        argv += ["--quantization", "fp8"]
        notes.append(
            "--quantization fp8 quantizes a bf16 checkpoint as it loads; an FP8 checkpoint needs no flag"
        )
    elif weights.startswith("int4"):
        argv += ["--quantization", "awq_marlin"]
        notes.append(f"{weights} weights: an AWQ checkpoint")
    elif weights == "int8":
        argv += ["--quantization", "w8a8_int8"]
        notes.append("int8 weights: a W8A8 INT8 checkpoint")
    elif weights not in ("bf16", "fp16"):
        notes.append(f"{weights} weights: a checkpoint stored so")
    if kv in ("fp8", "int8"):
        argv += ["--kv-cache-dtype", "fp8_e4m3"]
        if kv == "int8":
            notes.append("SGLang has no int8 KV cache: fp8 holds the same bytes")
    return argv


def trtllm_policy(policy: str) -> str:
    return "GUARANTEED_NO_EVICT" if policy == "no-evict" else "MAX_UTILIZATION"


def sglang_static_fraction(
    d: Deployment, row: dict[str, Any], block_tokens: int, utilization: float
) -> float:
    """The share of memory that holds the weights and the simulation's KV room per GPU: what
    SGLang's --mem-fraction-static asks for (its pool is that share of memory less the
    weights; activations and CUDA graphs live in the rest)."""
    weights = stored_weight_bytes_per_gpu(d)
    return _share(_kv_room(d, row, block_tokens, utilization) + weights, d.hw.memory_bytes)


def trtllm_kv_fraction(d: Deployment, row: dict[str, Any], block_tokens: int, utilization: float) -> float:
    """The simulation's KV room per GPU over the memory left after the weights: the share
    TensorRT-LLM's --kv_cache_free_gpu_memory_fraction asks for."""
    free = d.hw.memory_bytes - stored_weight_bytes_per_gpu(d)
    return _share(_kv_room(d, row, block_tokens, utilization), free)


def _kv_room(d: Deployment, row: dict[str, Any], block_tokens: int, utilization: float) -> float:
    """The KV room per GPU the simulation of this row had."""
    seqs, budget = int(row["max_num_seqs"]), int(row["max_num_batched_tokens"])
    return kv_cache(d, block_tokens, utilization, seqs, budget).room_bytes_per_gpu


def _share(part: float, whole: float) -> float:
    """part / whole as an engine flag takes it: two decimals, rounded down (never more cache
    than the simulation had), within 0.01 and 0.99."""
    return max(0.01, min(0.99, math.floor(100 * part / whole) / 100))


def gguf_type(weights: str) -> str:
    if weights in ("bf16", "fp16", "fp32"):
        return weights.upper()
    if weights in ("fp8", "int8"):
        return "Q8_0"
    if weights.startswith("int4") or weights == "fp4":
        return "Q4_K_M (about 4.8 bits a weight)"
    return "the file's own"
