"""The command line's vocabulary: one name for one thing, in every command.

Every command that takes a deployment takes it with these options and builds it with
`deployment()`, so `estimate`, `ops`, `simulate`, `plan`, `compare` and `fit` mean the same
by the same flag, with the same defaults (a .gguf model's weights are its own stored mix
everywhere). Old spellings (`--prompt`, `--output`, `--slo-ttft`, ...) still work: `main()`
rewrites them (`canonical`), and they stay out of --help.

Output length, one convention: `--output-tokens M` counts the tokens after the first, one
per decode step. The prefill emits the first token, so a request of M returns M + 1 tokens
(`measure` asks the server for max_tokens = M + 1), and TPOT = (E2E - TTFT) / M.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from ridgeline.deployment import Deployment

OUTPUT_HELP = "Output tokens after the first, one per decode step (a request returns M + 1)."

MODEL = typer.Option("llama-3.1-8b", "--model", "-m", help="Catalogue name, config.json, .gguf or org/name.")
GPU = typer.Option("h100-sxm", "--gpu", "-g", help="Accelerator name (see `ridgeline gpus`).")
WEIGHTS = typer.Option(
    None,
    "--weights",
    "-w",
    help="bf16, fp8, int8, int4, int4-g128, or file (default: a .gguf's own stored mix, else bf16).",
)
MATHS = typer.Option("bf16", "--maths", help="Arithmetic dtype: bf16 or fp8 (at the fp8 peak).")
KV_DTYPE = typer.Option("bf16", "--kv-dtype", help="KV-cache dtype: bf16, fp8 or int8.")
TP = typer.Option(1, "--tp", help="Tensor-parallel GPUs (per replica).")
PP = typer.Option(1, "--pp", help="Pipeline-parallel stages (per replica).")
EP = typer.Option(1, "--ep", help="Expert-parallel GPUs (MoE).")
PRESET = typer.Option(
    "lesson", "--preset", help="ideal (the film, 100%) or lesson (60% FLOP/s, 80% bandwidth)."
)
COMPUTE_EFF = typer.Option(None, "--compute-eff", help="Fraction of peak FLOP/s.")
BANDWIDTH_EFF = typer.Option(None, "--bandwidth-eff", help="Fraction of bandwidth.")
GPU_FILE = typer.Option(None, "--gpu-file", help="Extra accelerators, TOML or JSON.")
CALIBRATION = typer.Option(None, "--calibration", help="Calibration (.json or .toml) from `ridgeline fit`.")
ENGINE = typer.Option(
    None,
    "--engine",
    "-e",
    help="Engine profile: vllm, sglang, trtllm, llamacpp or FILE.toml (see `ridgeline engines`).",
)
METHOD = typer.Option(
    "lesson", "--method", help="lesson (one roofline a pass) or per-op (the ledger summed)."
)
PROMPT_TOKENS = typer.Option(2000, "--prompt-tokens", "-p", help="Prompt tokens.")
OUTPUT_TOKENS = typer.Option(500, "--output-tokens", "-o", help=OUTPUT_HELP)
BATCH = typer.Option(1, "--batch", "-b", help="Sequences served together.")
PRICE = typer.Option(None, "--price", help="$ per GPU-hour (default: the catalogue's).")
SLO_TTFT = typer.Option(None, "--slo-ttft-p99", help="Target p99 TTFT, seconds (and goodput's TTFT bound).")
SLO_TPOT = typer.Option(None, "--slo-tpot-p99", help="Target p99 TPOT, seconds (and goodput's TPOT bound).")
SLO_E2E = typer.Option(None, "--slo-e2e-p99", help="Target p99 end-to-end latency, seconds.")
JSON = typer.Option(False, "--json", help="Print JSON with stable keys instead of tables.")

# Old spellings, kept working and kept out of --help.
ALIASES = {
    "--prompt": "--prompt-tokens",
    "--output": "--output-tokens",
    "--slo-ttft": "--slo-ttft-p99",
    "--slo-tpot": "--slo-tpot-p99",
    "--slo-e2e": "--slo-e2e-p99",
}


def canonical(argv: list[str]) -> list[str]:
    """argv with old spellings of options replaced by today's (`--prompt=5` too); nothing
    after a bare `--` is touched."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        if arg == "--":
            return out + argv[i:]
        name, eq, value = arg.partition("=")
        out.append(ALIASES[name] + eq + value if name in ALIASES else arg)
    return out


def deployment(
    model: Any = "llama-3.1-8b",
    gpu: Any = "h100-sxm",
    *,
    weights: str | None = None,
    maths: str = "bf16",
    kv_dtype: str = "bf16",
    tp: int = 1,
    pp: int = 1,
    ep: int = 1,
    preset: str = "lesson",
    compute_eff: float | None = None,
    bandwidth_eff: float | None = None,
    gpu_file: str | Path | None = None,
    calibration: str | Path | None = None,
    method: str = "lesson",
    engine: str | None = None,
    peak_tflops: float | None = None,
    bandwidth_tbs: float | None = None,
    memory_gb: float | None = None,
) -> Deployment:
    """The deployment the options describe (imports the core only when called)."""
    from ridgeline.deployment import Deployment

    return Deployment.build(
        model, gpu, weights=weights, maths=maths, kv_dtype=kv_dtype, tp=tp, pp=pp, ep=ep, preset=preset,
        compute_eff=compute_eff, bandwidth_eff=bandwidth_eff, gpu_file=gpu_file, calibration=calibration,
        method=method, engine=engine, peak_tflops=peak_tflops, bandwidth_tbs=bandwidth_tbs,
        memory_gb=memory_gb,
    )  # fmt: skip
