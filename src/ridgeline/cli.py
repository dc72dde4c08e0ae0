"""The command line: parse, call the core, render. No number is computed here.

A run of one of the commands below, or of simulate, plan or search, is read by
`options.parse` and needs no typer; `--help`, any mistake, and the other faces' commands
(measure, web, film) go through the Typer app (`app`), built on demand from the same
declarations, with its messages and exit codes.
"""

from __future__ import annotations

import os
import sys
from functools import cache

from ridgeline.errors import RidgelineError, Stopped
from ridgeline.options import Shared as o  # the vocabulary every command shares
from ridgeline.options import argument, canonical, deployment, option, parse, typed

TYPE_CHECKING = False  # typing costs a CLI start ~6 ms: its names are for the type checker
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


def emit_json(data: Any) -> None:
    """Strict JSON on stdout: a NaN or an infinity is a bug, and fails here."""
    from dataclasses import asdict, is_dataclass

    from ridgeline._files import dumps

    if is_dataclass(data) and not isinstance(data, type):
        data = asdict(data)
    sys.stdout.write(dumps(data) + "\n")


def estimate(
    model: str = o.MODEL,
    gpu: str = o.GPU,
    weights: str | None = o.WEIGHTS,
    maths: str | None = o.MATHS,
    kv_dtype: str = o.KV_DTYPE,
    prompt: int = o.PROMPT_TOKENS,
    output: int = o.OUTPUT_TOKENS,
    batch: int = o.BATCH,
    tp: int = o.TP,
    pp: int = o.PP,
    ep: int = o.EP,
    dp_attention: bool = o.DP_ATTENTION,
    preset: str = o.PRESET,
    compute_eff: float | None = o.COMPUTE_EFF,
    bandwidth_eff: float | None = o.BANDWIDTH_EFF,
    price: float | None = o.PRICE,
    gpu_file: str | None = o.GPU_FILE,
    peak_tflops: float | None = option(None, "--peak-tflops", help="Override bf16 peak, TFLOP/s."),
    bandwidth_tbs: float | None = option(None, "--bandwidth-tbs", help="Override bandwidth, TB/s."),
    memory_gb: float | None = option(None, "--memory-gb", help="Override memory, GB."),
    calibration: str | None = o.CALIBRATION,
    method: str = o.METHOD,
    engine: str | None = o.ENGINE,
    in_process: bool = o.IN_PROCESS,
    ops: bool = option(False, "--ops", help="Also show the per-operator ledger."),
    batch_sweep: bool = option(False, "--batch-sweep", help="Also show latency/throughput/cost by batch."),
    as_json: bool = o.JSON,
) -> None:
    """Predict one request: FLOPs, bytes, bound, TTFT, TPOT, memory fit, cost, and why."""
    from ridgeline.predict import estimate_on

    d = deployment(
        model, gpu, weights=weights, maths=maths, kv_dtype=kv_dtype, tp=tp, pp=pp, ep=ep,
        dp_attention=dp_attention, preset=preset,
        compute_eff=compute_eff, bandwidth_eff=bandwidth_eff, gpu_file=gpu_file, calibration=calibration,
        method=method, engine=engine, peak_tflops=peak_tflops, bandwidth_tbs=bandwidth_tbs,
        memory_gb=memory_gb, in_process=in_process,
    )  # fmt: skip
    result = estimate_on(d, prompt=prompt, output=output, batch=batch, price_per_gpu_hour=price)
    data = result.to_dict()
    if ops:
        from ridgeline.ledger_view import ledger_view

        data["ops"] = ledger_view(d, prompt, batch)
    if batch_sweep:
        from dataclasses import asdict

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


def ops_command(
    model: str = o.MODEL,
    gpu: str = o.GPU,
    weights: str | None = o.WEIGHTS,
    maths: str | None = o.MATHS,
    kv_dtype: str = o.KV_DTYPE,
    prompt: int = option(2000, "--prompt-tokens", "-p", help="Prompt tokens (prefill; decode context)."),
    batch: int = o.BATCH,
    tp: int = o.TP,
    pp: int = o.PP,
    ep: int = o.EP,
    dp_attention: bool = o.DP_ATTENTION,
    preset: str = o.PRESET,
    compute_eff: float | None = o.COMPUTE_EFF,
    bandwidth_eff: float | None = o.BANDWIDTH_EFF,
    gpu_file: str | None = o.GPU_FILE,
    calibration: str | None = o.CALIBRATION,
    engine: str | None = o.ENGINE,
    as_json: bool = o.JSON,
) -> None:
    """The per-operator ledger of a prefill and of the first decode step."""
    from ridgeline.checks import check_size
    from ridgeline.ledger_view import ledger_view

    check_size("--prompt-tokens", prompt)
    check_size("--batch", batch)
    d = deployment(
        model, gpu, weights=weights, maths=maths, kv_dtype=kv_dtype, tp=tp, pp=pp, ep=ep,
        dp_attention=dp_attention, preset=preset,
        compute_eff=compute_eff, bandwidth_eff=bandwidth_eff, gpu_file=gpu_file, calibration=calibration,
        engine=engine,
    )  # fmt: skip
    data = ledger_view(d, prompt, batch)
    if as_json:
        emit_json(data)
        return
    from ridgeline import _render

    _render.ops(data)


def roofline(
    gpu: str = o.GPU,
    maths: str = option("bf16", "--maths", help="Arithmetic dtype whose peak sets the roof."),
    model: str = o.MODEL,
    prompt: int = option(2000, "--prompt-tokens", "-p", help="Prefill tokens to place on the chart."),
    batch: int = option(1, "--batch", "-b", help="Decode batch to place on the chart."),
    context: int = option(0, "--context", "-c", help="Cached tokens per decoding sequence."),
    preset: str = option("ideal", "--preset", help="ideal or lesson."),
    gpu_file: str | None = o.GPU_FILE,
    as_json: bool = o.JSON,
) -> None:
    """The accelerator's roofline and where a prefill and a decode step sit on it."""
    from ridgeline.points import roofline_points

    result = roofline_points(model, gpu, maths, prompt, batch, context, preset, gpu_file)
    if as_json:
        emit_json(result.to_dict())
        return
    from ridgeline import _render

    _render.roofline(result)


def gpus(gpu_file: str | None = o.GPU_FILE, as_json: bool = o.JSON) -> None:
    """The accelerator catalogue, with the user's own entries."""
    from ridgeline.describe import describe_gpus

    entries = describe_gpus(gpu_file)
    if as_json:
        emit_json(entries)
        return
    from ridgeline import _render

    _render.gpus(entries)


def engines(as_json: bool = o.JSON) -> None:
    """The engine profiles (with the user's own): their rates, overheads, scheduler and bands."""
    from ridgeline.describe import describe_engines

    entries = describe_engines()
    if as_json:
        emit_json(entries)
        return
    from ridgeline import _render
    from ridgeline.engines import engines as profiles

    overheads = {  # a 32-layer step's, launched and (where the engine captures any) as a graph
        name: (p.step_overhead_s(32), p.step_overhead_s(32, graphed=True) if p.graph_max_seqs else None)
        for name, p in profiles().items()
    }
    _render.engines(entries, overheads)


def models(
    spec: str | None = argument(None, help="Describe one: a name, config.json or .gguf."),
    weights: str | None = o.WEIGHTS,
    as_json: bool = o.JSON,
) -> None:
    """The model catalogue, or one model described."""
    from ridgeline.describe import describe, describe_all

    data = describe(spec, weights) if spec else describe_all(weights)
    if as_json:
        emit_json(data)
        return
    from ridgeline import _render

    _render.models(data if isinstance(data, list) else [data])


# The commands defined here, which `options.parse` reads without Typer.
COMMANDS: dict[str, Callable[..., Any]] = {
    "estimate": estimate,
    "ops": ops_command,
    "roofline": roofline,
    "gpus": gpus,
    "engines": engines,
    "models": models,
}
# The faces' commands whose options are data too, read by the same reader: each module is
# imported only when its command runs.
FACE_COMMANDS: dict[str, str] = {
    "simulate": "ridgeline.simulate.commands",
    "plan": "ridgeline.simulate.commands",
    "search": "ridgeline.search.commands",
}


def plain_command(name: str) -> Callable[..., Any] | None:
    """The command `options.parse` may read a line for, by its name, or None."""
    if name in COMMANDS:
        return COMMANDS[name]
    if name in FACE_COMMANDS:
        import importlib

        command: Callable[..., Any] = getattr(importlib.import_module(FACE_COMMANDS[name]), name)
        return command
    return None


@cache
def _app() -> Any:
    """The Typer app with every command, the faces' too: for `--help`, for a mistake, for
    the faces' commands, and for shell completion."""
    import typer

    app = typer.Typer(
        add_completion=False,
        no_args_is_help=True,
        help="ridgeline: what an LLM token costs, from the roofline up.",
        pretty_exceptions_enable=False,
    )
    for name, command in COMMANDS.items():
        app.command(name)(typed(command))
    _register_faces(app)
    return app


def __getattr__(name: str) -> Any:
    """`app`: the Typer app, built on first use."""
    if name == "app":
        return _app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _register_faces(app: Any) -> None:
    """Each face (simulator, measurement, web lesson, film) adds its own commands from its
    package's `commands` module, which imports nothing heavy at start-up."""
    from ridgeline.film import commands as film
    from ridgeline.measure import commands as measure
    from ridgeline.search import commands as search
    from ridgeline.simulate import commands as simulate
    from ridgeline.web import commands as web

    for face in (simulate, search, measure, web, film):
        face.register(app)


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

    app = _app()
    for info in app.registered_commands:
        name = info.name or (get_command_name(info.callback.__name__) if info.callback else None)
        if args and name == args[0]:
            one = copy.copy(app)
            one.registered_commands = [info]
            return _finite_floats(get_group(one))
    return _finite_floats(get_command(app))


def main(argv: list[str] | None = None) -> int:
    """Run the CLI. A user's mistake is one line on stderr and status 2; an interrupt is
    status 130 (SIGTERM: 143); anything else unforeseen is one line and status 1, never a
    traceback."""
    try:
        args = canonical(sys.argv[1:] if argv is None else list(argv))
        if any("\x00" in a for a in args):  # only a caller in-process can pass one; the OS refuses it
            raise RidgelineError("an argument holds a NUL byte, which no file name or value can")
        completing = "_RIDGELINE_COMPLETE" in os.environ  # shell completion is Typer's
        command = plain_command(args[0]) if args and not completing else None
        values = parse(command, args[1:]) if command else None
        return _run_typer(args) if values is None else _run(command, values)
    except RidgelineError as exc:
        fail(exc)
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("ridgeline: interrupted\n")
        return 130
    except Stopped as exc:  # a command stopped by a signal, having said so
        return exc.status
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


def _run(command: Any, values: dict[str, Any]) -> int:
    """Run a command the parser read, ending as Typer's runner ends one: an interrupt is
    status 130, end of input an abort, a closed pipe status 1 with nothing said."""
    try:
        result = command(**values)
    except KeyboardInterrupt:
        return 130
    except EOFError:
        sys.stderr.write("\nridgeline: interrupted\n")
        return 130
    except OSError as exc:
        import errno

        if exc.errno != errno.EPIPE:
            raise
        _quiet_stdout()
        return 1
    return result if isinstance(result, int) else 0


def _run_typer(args: list[str]) -> int:
    """Run `args` through the Typer app: help, a mistake's message, the faces' commands."""
    import typer
    from typer._click import exceptions as click  # typer carries its own click

    try:
        result = _command(args).main(args=args, standalone_mode=False, prog_name="ridgeline")
    except click.UsageError as exc:
        fail(f"{exc.format_message()} (see --help)")
        return 2
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except Stopped as exc:
        return exc.status
    except typer.Abort:
        sys.stderr.write("ridgeline: interrupted\n")
        return 130
    except click.ClickException as exc:
        fail(exc.format_message())
        return 2
    return result if isinstance(result, int) else 0


def _quiet_stdout() -> None:
    """After a closed pipe (`ridgeline ... | head`), point stdout at /dev/null so that
    Python's own flush at exit does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def entry() -> None:
    sys.exit(main())
