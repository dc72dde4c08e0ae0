"""The command line's vocabulary: one name for one thing, in every command.

Every command that takes a deployment takes it with these options and builds it with
`deployment()`, so `estimate`, `ops`, `simulate`, `plan`, `compare` and `fit` mean the same
by the same flag, with the same defaults (the weights of a .gguf, or of a checkpoint stored
quantised, are its own stored mix everywhere). Old spellings (`--prompt`, `--output`,
`--slo-ttft`, ...) still work: `main()` rewrites them (`canonical`), and they stay out of
--help.

Output length, one convention: `--output-tokens M` counts the tokens after the first, one
per decode step. The prefill emits the first token, so a request of M returns M + 1 tokens
(`measure` asks the server for max_tokens = M + 1), and TPOT = (E2E - TTFT) / M.

An option is data (`option()`: its default, flags and help; its type is the annotation of
the parameter it sets), read two ways. `parse` reads a command line by it without importing
typer, for a run that needs nothing more; Typer builds its own options from the same data
(`typed`) for `--help`, for every mistake (its messages, its exit codes) and for the faces'
commands, which import the shared options by name (`from ridgeline.options import MODEL`)
as Typer's.
"""

from __future__ import annotations

import math

TYPE_CHECKING = False  # typing costs a CLI start ~6 ms: its names are for the type checker
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from ridgeline.deployment import Deployment


class Opt:
    """One option of a command as data; with no flags, a positional argument."""

    __slots__ = ("default", "flags", "help")  # a plain class: a NamedTuple costs a millisecond to make

    def __init__(self, default: Any, flags: tuple[str, ...], help: str) -> None:
        self.default, self.flags, self.help = default, flags, help

    def typer(self) -> Any:
        """The same option as Typer declares it."""
        import typer

        if self.flags:
            return typer.Option(self.default, *self.flags, help=self.help)
        return typer.Argument(self.default, help=self.help)


def option(default: Any, *flags: str, help: str) -> Any:
    """An option, declared as `typer.Option` declares one: its default, flags and help."""
    return Opt(default, flags, help)


def argument(default: Any, *, help: str) -> Any:
    """A positional argument, declared as `typer.Argument` declares one."""
    return Opt(default, (), help)


OUTPUT_HELP = "Output tokens after the first, one per decode step (a request returns M + 1)."


class Shared:
    """The options every command that takes a deployment shares, as data."""

    MODEL = option("llama-3.1-8b", "--model", "-m", help="Catalogue name, config.json, .gguf or org/name.")
    GPU = option("h100-sxm", "--gpu", "-g", help="Accelerator name (see `ridgeline gpus`).")
    WEIGHTS = option(
        None,
        "--weights",
        "-w",
        help="bf16, fp8, int8, int4, int4-g128, or file (default: the model's own stored mix, else bf16).",
    )
    MATHS = option(
        None,
        "--maths",
        help="Arithmetic dtype: bf16, fp8, int8, ... or auto (default): the engine's for the weights, "
        "else bf16.",
    )
    KV_DTYPE = option("bf16", "--kv-dtype", help="KV-cache dtype: bf16, fp8 or int8.")
    TP = option(1, "--tp", help="Tensor-parallel GPUs (per replica).")
    PP = option(1, "--pp", help="Pipeline-parallel stages (per replica).")
    EP = option(1, "--ep", help="Expert-parallel GPUs (MoE).")
    DP_ATTENTION = option(
        False,
        "--dp-attention",
        help="Attention data-parallel over the --tp GPUs: each holds all its weights, 1/tp of the sequences.",
    )
    PRESET = option(
        "lesson", "--preset", help="ideal (the film, 100%) or lesson (60% FLOP/s, 80% bandwidth)."
    )
    COMPUTE_EFF = option(None, "--compute-eff", help="Fraction of peak FLOP/s.")
    BANDWIDTH_EFF = option(None, "--bandwidth-eff", help="Fraction of bandwidth.")
    GPU_FILE = option(None, "--gpu-file", help="Extra accelerators, TOML or JSON.")
    CALIBRATION = option(None, "--calibration", help="Calibration (.json or .toml) from `ridgeline fit`.")
    ENGINE = option(
        None,
        "--engine",
        "-e",
        help="Engine profile: vllm, sglang, trtllm, llamacpp or FILE.toml (see `ridgeline engines`).",
    )
    METHOD = option("lesson", "--method", help="lesson (one roofline a pass) or per-op (the ledger summed).")
    IN_PROCESS = option(
        False,
        "--in-process",
        help="Run inside the engine's process (llama-bench, trtllm-bench, vLLM's LLM class): no server, "
        "so TTFT pays no first-token cost over HTTP.",
    )
    PROMPT_TOKENS = option(2000, "--prompt-tokens", "-p", help="Prompt tokens.")
    OUTPUT_TOKENS = option(500, "--output-tokens", "-o", help=OUTPUT_HELP)
    BATCH = option(1, "--batch", "-b", help="Sequences served together.")
    PRICE = option(None, "--price", help="$ per GPU-hour (default: the catalogue's).")
    SLO_TTFT = option(None, "--slo-ttft-p99", help="Target p99 TTFT, seconds (and goodput's TTFT bound).")
    SLO_TPOT = option(None, "--slo-tpot-p99", help="Target p99 TPOT, seconds (and goodput's TPOT bound).")
    SLO_E2E = option(None, "--slo-e2e-p99", help="Target p99 end-to-end latency, seconds.")
    JSON = option(False, "--json", help="Print JSON with stable keys instead of tables.")


def __getattr__(name: str) -> Any:
    """`MODEL`, `GPU`, ...: a shared option as Typer's, made on first use (the faces'
    commands import them so; they import typer anyway)."""
    data = getattr(Shared, name, None)
    if not isinstance(data, Opt):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    made = globals()[name] = data.typer()
    return made


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


# The types an annotation may name, written as `from __future__ import annotations` keeps it.
KINDS: dict[str, type] = {"str": str, "int": int, "float": float, "bool": bool}


def parse(command: Callable[..., Any], args: list[str]) -> dict[str, Any] | None:
    """The values `args` give `command`'s parameters, read by their data and annotations as
    Typer reads them; None when the line is for Typer to read: `--help`, any mistake (an
    unknown option, a missing, empty or malformed value, a non-finite number, an extra
    argument), and what this reader leaves to it (`--`, short options run together, a
    value that starts with '-', a parameter it cannot read)."""
    code = command.__code__
    names = code.co_varnames[: code.co_argcount]
    defaults = command.__defaults__ or ()
    if len(defaults) != len(names) or code.co_kwonlyargcount:
        return None
    values: dict[str, Any] = {}
    flags: dict[str, tuple[str, type]] = {}
    positional: list[tuple[str, type]] = []
    for name, data in zip(names, defaults, strict=True):
        kind = KINDS.get(str(command.__annotations__.get(name)).removesuffix(" | None"))
        if kind is None or not isinstance(data, Opt):
            return None
        values[name] = data.default if data.default is None else kind(data.default)
        for flag in data.flags:
            flags[flag] = (name, kind)
        if not data.flags:
            positional.append((name, kind))
    words = iter(args)
    for word in words:
        flag, eq, attached = word.partition("=") if word.startswith("--") else (word, "", "")
        if flag in flags:
            name, kind = flags[flag]
            if kind is bool:
                if eq:
                    return None
                values[name] = True
                continue
            text = attached if eq else next(words, None)
        elif positional and not word.startswith("-"):
            (name, kind), text = positional.pop(0), word
        else:
            return None
        value = _value(text, kind)
        if value is None:
            return None
        values[name] = value
    return values


def _value(text: str | None, kind: type) -> Any:
    """`text` converted as click converts it (str, int(), float() and finite), or None."""
    if not text or text.startswith("-"):
        return None
    if kind is str:
        return text
    try:
        value = kind(text)
    except ValueError:
        return None
    return value if kind is int or math.isfinite(value) else None


def typed(command: Callable[..., Any]) -> Callable[..., Any]:
    """`command` as Typer reads it: the same parameters, the data made Typer's options."""
    import functools
    import inspect

    signature = inspect.signature(command)
    params = [
        p.replace(default=p.default.typer()) if isinstance(p.default, Opt) else p
        for p in signature.parameters.values()
    ]

    @functools.wraps(command)
    def run(**values: Any) -> Any:
        return command(**values)

    run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    return run


def deployment(
    model: Any = "llama-3.1-8b",
    gpu: Any = "h100-sxm",
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
    calibration: str | Path | None = None,
    method: str = "lesson",
    engine: str | None = None,
    peak_tflops: float | None = None,
    bandwidth_tbs: float | None = None,
    memory_gb: float | None = None,
    in_process: bool = False,
) -> Deployment:
    """The deployment the options describe (imports the core only when called)."""
    from ridgeline.deployment import Deployment

    return Deployment.build(
        model, gpu, weights=weights, maths=maths, kv_dtype=kv_dtype, tp=tp, pp=pp, ep=ep,
        dp_attention=dp_attention, preset=preset, compute_eff=compute_eff, bandwidth_eff=bandwidth_eff,
        gpu_file=gpu_file, calibration=calibration, method=method, engine=engine, peak_tflops=peak_tflops,
        bandwidth_tbs=bandwidth_tbs, memory_gb=memory_gb, in_process=in_process,
    )  # fmt: skip
