"""The command line: parse, call the core, render. No number is computed here."""

from __future__ import annotations

import sys
from dataclasses import asdict, is_dataclass
from typing import Any, Optional

import typer

from ridgeline.errors import RidgelineError
from ridgeline.options import (  # the vocabulary every command shares
    BANDWIDTH_EFF,
    BATCH,
    CALIBRATION,
    COMPUTE_EFF,
    ENGINE,
    EP,
    GPU,
    GPU_FILE,
    JSON,
    KV_DTYPE,
    MATHS,
    METHOD,
    MODEL,
    OUTPUT_TOKENS,
    PP,
    PRESET,
    PRICE,
    PROMPT_TOKENS,
    TP,
    WEIGHTS,
    canonical,
    deployment,
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="ridgeline: what an LLM token costs, from the roofline up.",
    pretty_exceptions_enable=False,
)


def emit_json(data: Any) -> None:
    """Strict JSON on stdout: a NaN or an infinity is a bug, and fails here."""
    from ridgeline._files import dumps

    if is_dataclass(data) and not isinstance(data, type):
        data = asdict(data)
    sys.stdout.write(dumps(data) + "\n")


@app.command()
def estimate(
    model: str = MODEL,
    gpu: str = GPU,
    weights: Optional[str] = WEIGHTS,
    maths: str = MATHS,
    kv_dtype: str = KV_DTYPE,
    prompt: int = PROMPT_TOKENS,
    output: int = OUTPUT_TOKENS,
    batch: int = BATCH,
    tp: int = TP,
    pp: int = PP,
    ep: int = EP,
    preset: str = PRESET,
    compute_eff: Optional[float] = COMPUTE_EFF,
    bandwidth_eff: Optional[float] = BANDWIDTH_EFF,
    price: Optional[float] = PRICE,
    gpu_file: Optional[str] = GPU_FILE,
    peak_tflops: Optional[float] = typer.Option(None, "--peak-tflops", help="Override bf16 peak, TFLOP/s."),
    bandwidth_tbs: Optional[float] = typer.Option(None, "--bandwidth-tbs", help="Override bandwidth, TB/s."),
    memory_gb: Optional[float] = typer.Option(None, "--memory-gb", help="Override memory, GB."),
    calibration: Optional[str] = CALIBRATION,
    method: str = METHOD,
    engine: Optional[str] = ENGINE,
    ops: bool = typer.Option(False, "--ops", help="Also show the per-operator ledger."),
    batch_sweep: bool = typer.Option(
        False, "--batch-sweep", help="Also show latency/throughput/cost by batch."
    ),
    as_json: bool = JSON,
) -> None:
    """Predict one request: FLOPs, bytes, bound, TTFT, TPOT, memory fit, cost, and why."""
    from ridgeline.predict import estimate_on

    d = deployment(
        model, gpu, weights=weights, maths=maths, kv_dtype=kv_dtype, tp=tp, pp=pp, ep=ep, preset=preset,
        compute_eff=compute_eff, bandwidth_eff=bandwidth_eff, gpu_file=gpu_file, calibration=calibration,
        method=method, engine=engine, peak_tflops=peak_tflops, bandwidth_tbs=bandwidth_tbs,
        memory_gb=memory_gb,
    )  # fmt: skip
    result = estimate_on(d, prompt=prompt, output=output, batch=batch, price_per_gpu_hour=price)
    data = result.to_dict()
    if ops:
        from ridgeline.ledger_view import ledger_view

        data["ops"] = ledger_view(d, prompt, batch)
    if batch_sweep:
        from ridgeline.sweep import batch_sweep as sweep
        from ridgeline.sweep import compute_bound_from

        rows = sweep(d, prompt, output, result.cost.price_per_gpu_hour_usd)
        data["batch_sweep"] = {
            "rows": [asdict(r) for r in rows],
            "compute_bound_from": compute_bound_from(rows),
        }
    if as_json:
        emit_json(data)
        return
    from ridgeline import _render

    if ops:
        _render.ops(data["ops"])
    _render.estimate(result)
    if batch_sweep:
        _render.sweep(data["batch_sweep"])


@app.command("ops")
def ops_command(
    model: str = MODEL,
    gpu: str = GPU,
    weights: Optional[str] = WEIGHTS,
    maths: str = MATHS,
    kv_dtype: str = KV_DTYPE,
    prompt: int = typer.Option(
        2000, "--prompt-tokens", "-p", help="Prompt tokens (prefill; decode context)."
    ),
    batch: int = BATCH,
    tp: int = TP,
    pp: int = PP,
    ep: int = EP,
    preset: str = PRESET,
    compute_eff: Optional[float] = COMPUTE_EFF,
    bandwidth_eff: Optional[float] = BANDWIDTH_EFF,
    gpu_file: Optional[str] = GPU_FILE,
    calibration: Optional[str] = CALIBRATION,
    engine: Optional[str] = ENGINE,
    as_json: bool = JSON,
) -> None:
    """The per-operator ledger of a prefill and of the first decode step."""
    from ridgeline.checks import check_size
    from ridgeline.ledger_view import ledger_view

    check_size("--prompt-tokens", prompt)
    check_size("--batch", batch)
    d = deployment(
        model, gpu, weights=weights, maths=maths, kv_dtype=kv_dtype, tp=tp, pp=pp, ep=ep, preset=preset,
        compute_eff=compute_eff, bandwidth_eff=bandwidth_eff, gpu_file=gpu_file, calibration=calibration,
        engine=engine,
    )  # fmt: skip
    data = ledger_view(d, prompt, batch)
    if as_json:
        emit_json(data)
        return
    from ridgeline import _render

    _render.ops(data)


@app.command()
def roofline(
    gpu: str = GPU,
    maths: str = typer.Option("bf16", "--maths", help="Arithmetic dtype whose peak sets the roof."),
    model: str = MODEL,
    prompt: int = typer.Option(2000, "--prompt-tokens", "-p", help="Prefill tokens to place on the chart."),
    batch: int = typer.Option(1, "--batch", "-b", help="Decode batch to place on the chart."),
    context: int = typer.Option(0, "--context", "-c", help="Cached tokens per decoding sequence."),
    preset: str = typer.Option("ideal", "--preset", help="ideal or lesson."),
    gpu_file: Optional[str] = GPU_FILE,
    as_json: bool = JSON,
) -> None:
    """The accelerator's roofline and where a prefill and a decode step sit on it."""
    from ridgeline.points import roofline_points

    result = roofline_points(model, gpu, maths, prompt, batch, context, preset, gpu_file)
    if as_json:
        emit_json(result.to_dict())
        return
    from ridgeline import _render

    _render.roofline(result)


@app.command()
def gpus(gpu_file: Optional[str] = GPU_FILE, as_json: bool = JSON) -> None:
    """The accelerator catalogue, with the user's own entries."""
    from ridgeline.describe import describe_gpus

    entries = describe_gpus(gpu_file)
    if as_json:
        emit_json(entries)
        return
    from ridgeline import _render

    _render.gpus(entries)


@app.command()
def engines(as_json: bool = JSON) -> None:
    """The engine profiles (with the user's own): their rates, overheads, scheduler and bands."""
    from ridgeline.describe import describe_engines

    entries = describe_engines()
    if as_json:
        emit_json(entries)
        return
    from ridgeline import _render

    _render.engines(entries)


@app.command()
def models(
    spec: Optional[str] = typer.Argument(None, help="Describe one: a name, config.json or .gguf."),
    weights: Optional[str] = WEIGHTS,
    as_json: bool = JSON,
) -> None:
    """The model catalogue, or one model described."""
    from ridgeline.describe import describe, describe_all

    data = describe(spec, weights) if spec else describe_all(weights)
    if as_json:
        emit_json(data)
        return
    from ridgeline import _render

    _render.models(data if isinstance(data, list) else [data])


def _finite_floats(command: Any) -> Any:
    """Every float option of every command refuses NaN and infinity at parse time, with
    one line naming the flag: no non-finite number a user types reaches the core."""
    import math

    from typer._click import types  # typer carries its own click

    class FiniteFloat(types.ParamType):
        name = "float"

        def __init__(self, inner: types.ParamType) -> None:
            self.inner = inner

        def convert(self, value: Any, param: Any, ctx: Any) -> Any:
            x = self.inner.convert(value, param, ctx)
            if isinstance(x, float) and not math.isfinite(x):
                self.fail(f"{value!r} is not a finite number", param, ctx)
            return x

    for cmd in [command, *getattr(command, "commands", {}).values()]:
        for param in cmd.params:
            if isinstance(param.type, types.FloatParamType):
                param.type = FiniteFloat(param.type)
    return command


def fail(message: object) -> None:
    """One line on stderr, whatever the message holds."""
    from ridgeline.checks import one_line

    sys.stderr.write(f"ridgeline: error: {one_line(str(message), 600)}\n")


def _command(args: list[str]) -> Any:
    """The click group to run `args` with. Building a command's options costs about a
    millisecond each, so when the first word names a command the group holds that command
    alone; otherwise (`--help`, no command, a typo) it holds every command."""
    import copy

    from typer.main import get_command, get_command_name, get_group

    for info in app.registered_commands:
        name = info.name or (get_command_name(info.callback.__name__) if info.callback else None)
        if args and name == args[0]:
            one = copy.copy(app)
            one.registered_commands = [info]
            return get_group(one)
    return get_command(app)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI. A user's mistake is one line on stderr and status 2; an interrupt is
    status 130 (SIGTERM: 143); anything else unforeseen is one line and status 1, never a
    traceback."""
    from typer._click import exceptions as click  # typer carries its own click

    try:
        args = canonical(sys.argv[1:] if argv is None else list(argv))
        command = _finite_floats(_command(args))
        if any("\x00" in a for a in args):  # only a caller in-process can pass one; the OS refuses it
            raise RidgelineError("an argument holds a NUL byte, which no file name or value can")
        result = command.main(args=args, standalone_mode=False, prog_name="ridgeline")
    except RidgelineError as exc:
        fail(exc)
        return 2
    except click.UsageError as exc:
        fail(f"{exc.format_message()} (see --help)")
        return 2
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("ridgeline: interrupted\n")
        return 130
    except click.ClickException as exc:
        fail(exc.format_message())
        return 2
    except BrokenPipeError:
        _quiet_stdout()
        return 0
    except MemoryError:
        fail("out of memory: ask for less (fewer requests, shorter contexts, a smaller sweep)")
        return 1
    except RecursionError:
        fail("input nested too deeply to be data")
        return 1
    except OSError as exc:
        fail(f"{exc.strerror or exc}" + (f": {exc.filename!r}" if exc.filename else ""))
        return 1
    except Exception as exc:  # a bug in ridgeline: say so in one line, not a traceback
        fail(f"internal error ({type(exc).__name__}: {exc}); please report it with the command line")
        return 1
    return result if isinstance(result, int) else 0


def _quiet_stdout() -> None:
    """After a closed pipe (`ridgeline ... | head`), point stdout at /dev/null so that
    Python's own flush at exit does not complain."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def entry() -> None:
    sys.exit(main())


def _register_faces() -> None:
    """Each face (simulator, measurement, web lesson, film) adds its own commands from its
    package's `commands` module, which imports nothing heavy at start-up."""
    from ridgeline.film import commands as film
    from ridgeline.measure import commands as measure
    from ridgeline.search import commands as search
    from ridgeline.simulate import commands as simulate
    from ridgeline.web import commands as web

    for face in (simulate, search, measure, web, film):
        face.register(app)


_register_faces()
