"""`ridgeline measure`, `compare`, `fit` and `probe`. This module imports only typer and
the standard library; each command imports what it needs when it runs."""

from __future__ import annotations

import os
import sys
from typing import Any, Optional

import typer

from ridgeline.options import (
    BANDWIDTH_EFF,
    CALIBRATION,
    COMPUTE_EFF,
    DP_ATTENTION,
    ENGINE,
    EP,
    GPU,
    GPU_FILE,
    JSON,
    KV_DTYPE,
    MATHS,
    METHOD,
    OUTPUT_HELP,
    PP,
    PRESET,
    SLO_TPOT,
    SLO_TTFT,
    TP,
    WEIGHTS,
    deployment,
)

RECORDS_MODEL = typer.Option(
    None,
    "--model",
    "-m",
    help="Model to predict with: catalogue name, config.json or .gguf (default: the records').",
)


MAX_GPUS = 65_536  # tensor-parallel GPUs: more is a typo
MAX_THREADS = 4096  # probe threads; each streams its own arrays


def _plot_folder(text: str) -> Any:
    """Where plots go: a folder, made if missing; a file of that name is refused now,
    before the comparison runs."""
    from pathlib import Path

    from ridgeline.errors import RidgelineError

    folder = Path(text).expanduser()
    if folder.exists() and not folder.is_dir():
        raise RidgelineError(f"--plot {text!r} is a file: give a folder for the PNG plots")
    return folder


def _emit(data: Any) -> None:
    """Strict JSON on stdout: a NaN or an infinity is a bug, and fails here."""
    from ridgeline._files import dumps

    sys.stdout.write(dumps(data) + "\n")


def _ints(flag: str, text: str) -> list[int]:
    from ridgeline.checks import split_list
    from ridgeline.errors import RidgelineError

    items = split_list(flag, text, "1,2")  # outside the try: its RidgelineError is a ValueError too
    try:
        values = [int(v) for v in items]
    except ValueError:
        raise RidgelineError(
            f"{flag} {text!r}: give whole numbers separated by commas, e.g. 128,512"
        ) from None
    if not values or min(values) < 1:
        raise RidgelineError(f"{flag} {text!r}: every value must be a whole number >= 1")
    return values


def _floats(flag: str, text: str) -> list[float]:
    from ridgeline.checks import split_list
    from ridgeline.errors import RidgelineError

    items = split_list(flag, text, "1,2")
    try:
        values = [float(v) for v in items]
    except ValueError:
        raise RidgelineError(f"{flag} {text!r}: give numbers separated by commas, e.g. 0.5,2") from None
    if not values or min(values) <= 0:
        raise RidgelineError(f"{flag} {text!r}: every value must be positive")
    return values


def _headers(lines: list[str], api_key: str | None, key_from: str) -> dict[str, str]:
    """-H lines as headers, and the key as a bearer token. A line or a value that cannot
    be sent is refused without being echoed: it may hold a secret."""
    from ridgeline.errors import RidgelineError
    from ridgeline.measure.client import check_header

    headers = {}
    for number, line in enumerate(lines, 1):
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise RidgelineError(
                f"--header number {number} has no 'Name:' before its value: write it as 'Name: value' "
                "(the text is not shown, in case it holds a secret)"
            )
        check_header(name.strip(), value.strip())
        headers[name.strip()] = value.strip()
    if api_key:
        if not _sendable_key(api_key):
            raise RidgelineError(
                f"the API key (from {key_from}) holds a space, a control character or non-ASCII text, "
                "which an Authorization header cannot carry (the key is not shown)"
            )
        headers.setdefault("Authorization", f"Bearer {api_key}")
    return headers


def _sendable_key(key: str) -> bool:
    return all(0x21 <= ord(c) <= 0x7E for c in key)


def _machine(records_path: str, model: str | None, gpu: str, **kw: Any) -> Any:
    """The deployment to predict with, and the records; the model defaults to the one the
    records name (a .gguf's weights default to its stored mix, as everywhere)."""
    from ridgeline.errors import RidgelineError
    from ridgeline.measure.records import check_times
    from ridgeline.metrics import read_records
    from ridgeline.models import get_model

    recs = read_records(records_path)
    check_times(recs, records_path)
    if model is None:
        named = next((r.get("model") for r in recs if r.get("model")), None)
        if named is None:
            raise RidgelineError(
                f"no record in {records_path!r} names its model"
                + ("" if recs else " (the file holds no records)")
                + ": pass --model (a catalogue name, config.json or .gguf)"
            )
        try:
            arch = get_model(str(named))
        except RidgelineError:
            raise RidgelineError(
                f"the records name model {named!r}, which ridgeline cannot resolve: pass --model "
                "(a catalogue name, config.json or .gguf)"
            ) from None
    else:
        arch = get_model(model)
    return deployment(arch, gpu, **kw), recs


def measure(
    url: str = typer.Argument(..., help="The server's base URL, such as http://127.0.0.1:8080/v1."),
    model: str = typer.Option(..., "--model", "-m", help="Model name to send (as the server knows it)."),
    prompt_tokens: str = typer.Option("512", "--prompt-tokens", "-p", help="Prompt length(s), N[,N...]."),
    output_tokens: int = typer.Option(
        128, "--output-tokens", "-o", help=OUTPUT_HELP + " The server is asked for max_tokens = M + 1."
    ),
    concurrency: Optional[str] = typer.Option(
        None, "--concurrency", "-c", help="Requests in flight, C[,C...] (default 1; with --rate, no cap)."
    ),
    rate: Optional[str] = typer.Option(
        None,
        "--rate",
        help="Open loop: arrivals per second, R[,R...]; --concurrency caps the requests in flight.",
    ),
    burstiness: float = typer.Option(
        1.0, "--burstiness", help="Gamma shape of arrival gaps, 0.001 to 1000: 1 is Poisson."
    ),
    requests: int = typer.Option(10, "--requests", "-n", help="Requests per grid point."),
    duration: Optional[float] = typer.Option(None, "--duration", help="Seconds per grid point, at most."),
    warmup: int = typer.Option(1, "--warmup", help="Unrecorded warm-up requests."),
    sweep: bool = typer.Option(False, "--sweep", help="Warm up at every grid point, not only the first."),
    out: str = typer.Option(
        "results.jsonl", "--out", help="Records file (JSONL), appended as requests finish."
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Continue the run in --out: send only what is missing."
    ),
    api: str = typer.Option("completions", "--api", help="completions or chat."),
    api_key_env: str = typer.Option(
        "OPENAI_API_KEY", "--api-key-env", help="Environment variable with the key."
    ),
    api_key: Optional[str] = typer.Option(None, "--api-key", help="API key (prefer --api-key-env)."),
    header: list[str] = typer.Option([], "--header", "-H", help="Extra header 'Name: value' (repeatable)."),
    insecure: bool = typer.Option(False, "--insecure", help="Do not verify TLS certificates."),
    ca_bundle: Optional[str] = typer.Option(None, "--ca-bundle", help="CA bundle to verify TLS with."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds a request may take in all."),
    connect_timeout: float = typer.Option(10.0, "--connect-timeout", help="Seconds to connect."),
    read_timeout: Optional[float] = typer.Option(
        None, "--read-timeout", help="Seconds of silence between reads (default: --timeout)."
    ),
    ignore_eos: bool = typer.Option(
        True, "--ignore-eos/--no-ignore-eos", help="Ask for exactly M + 1 tokens (ignore_eos, min_tokens)."
    ),
    extra_body: Optional[str] = typer.Option(
        None, "--extra-body", help="JSON object merged into each request."
    ),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="Local .gguf or tokenizer.json."),
    seed: int = typer.Option(0, "--seed", help="Seed for prompts and arrivals."),
    slo_ttft: Optional[float] = SLO_TTFT,
    slo_tpot: Optional[float] = SLO_TPOT,
    workers: int = typer.Option(
        1, "--workers", help="Processes to spread the streams over (one event loop each)."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress on stderr."),
    as_json: bool = JSON,
) -> None:
    """Benchmark a live OpenAI-compatible endpoint; one JSONL record per request.

    Exit status: 0 all requests succeeded, 1 some failed (or the server was unreachable),
    2 a usage error, 130 Ctrl-C, 143 SIGTERM; the last two flush the records first."""
    import asyncio
    import signal
    from pathlib import Path

    from ridgeline._files import loads_json
    from ridgeline.checks import check_positive, check_size, one_line
    from ridgeline.errors import RidgelineError
    from ridgeline.measure import records, render
    from ridgeline.measure.client import MAX_TIMEOUT_S, Endpoint, tls_verify
    from ridgeline.measure.run import MAX_WORKERS, Hooks, Plan, Stop, Unreachable, run
    from ridgeline.measure.workload import grid
    from ridgeline.metrics import Slo, read_records

    body: dict[str, Any] = {}
    if extra_body:
        try:
            body = loads_json(extra_body)
        except ValueError:
            body = None  # type: ignore[assignment]
        if not isinstance(body, dict):
            raise RidgelineError("--extra-body must be a JSON object, e.g. '{\"top_k\": 1}'")
    key_from = "--api-key" if api_key else f"${api_key_env}"
    key = (api_key or os.environ.get(api_key_env) or "").strip() or None
    secrets = (key,) if key else ()
    ep = Endpoint(
        base_url=url,
        model=model,
        api=api,
        headers=_headers(header, key, key_from),
        verify=tls_verify(insecure, ca_bundle),
        timeout_s=timeout,
        connect_timeout_s=connect_timeout,
        read_timeout_s=read_timeout,
        ignore_eos=ignore_eos,
        extra_body=body,
        secrets=secrets,
    )
    points = grid(
        _ints("--prompt-tokens", prompt_tokens),
        _ints("--concurrency", concurrency) if concurrency else ([] if rate else [1]),
        _floats("--rate", rate) if rate else None,
    )
    plan = Plan(points, requests, output_tokens, duration, warmup, sweep, burstiness, seed, tokenizer)
    check_size("--workers", workers, maximum=MAX_WORKERS)
    for flag, objective in (("--slo-ttft-p99", slo_ttft), ("--slo-tpot-p99", slo_tpot)):
        if objective is not None:
            check_positive(flag, objective, hi=MAX_TIMEOUT_S)
    slo = Slo(slo_ttft, slo_tpot)
    path = Path(out).expanduser()
    progress = render.Progress(quiet or as_json)
    hooks = Hooks(progress.note, progress.on_point, progress.on_record)
    stop = Stop()  # SIGTERM stops the run as Ctrl-C does: records flushed, summary printed
    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (called as a function): no handler to install
        previous = None
    interrupted = False
    dead: Unreachable | None = None
    try:
        asyncio.run(stop.guard(run(plan, ep, path, resume, hooks, workers)))
    except KeyboardInterrupt:
        interrupted = True
    except Unreachable as exc:
        dead = exc
    except RidgelineError:
        raise
    except OSError as exc:  # a file the user named: unwritable, too long a name, ...
        where = f": {exc.filename!r}" if exc.filename else ""
        raise RidgelineError(ep.redactor.clip(f"{exc.strerror or exc}{where}", 500)) from None
    except Exception as exc:  # a bug: the command line reports it in one line, with no secret in it
        raise RuntimeError(ep.redactor.clip(f"{type(exc).__name__}: {exc}", 500)) from None
    finally:
        progress.stop()
    try:
        recs = [r for r in read_records(path) if any(p.matches(r) for p in points)] if path.exists() else []
        overall = records.summary(recs, slo)
        signame = "SIGTERM" if stop.signum is not None else "SIGINT" if interrupted else None
        code = (
            143 if stop.signum is not None else 130 if interrupted else 1 if overall["errors"] or dead else 0
        )
        data: dict[str, Any] = {
            "out": str(path),
            "written": progress.written,
            "interrupted": signame is not None,
            "signal": signame,
            "unreachable": dead.message if dead else None,
            "points": [
                {
                    "prompt_tokens": p.prompt_tokens,
                    "concurrency": p.concurrency,
                    "rate_per_s": p.rate_per_s,
                    "label": p.label,
                    "summary": records.summary([r for r in recs if p.matches(r)], slo),
                }
                for p in points
            ],
            "overall": overall,
            "exit_code": code,
        }
        if as_json:
            _emit(data)
        else:
            render.measure(data)
        if dead:
            hint = f"; {len(recs)} record(s) are in {path}: --resume continues" if recs else ""
            sys.stderr.write(f"ridgeline: error: {one_line(dead.message + hint)}\n")
        elif signame:
            why = "terminated (SIGTERM)" if signame == "SIGTERM" else "interrupted"
            sys.stderr.write(f"ridgeline: {why}; {len(recs)} record(s) are in {path}: --resume continues\n")
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    raise typer.Exit(143 if stop.signum is not None else code)


def compare(
    results: str = typer.Argument(..., help="Records (JSONL) from `measure` or `simulate`."),
    model: Optional[str] = RECORDS_MODEL,
    gpu: str = GPU,
    weights: Optional[str] = WEIGHTS,
    maths: str | None = MATHS,
    kv_dtype: str = KV_DTYPE,
    tp: int = TP,
    pp: int = PP,
    ep: int = EP,
    dp_attention: bool = DP_ATTENTION,
    preset: str = PRESET,
    compute_eff: Optional[float] = COMPUTE_EFF,
    bandwidth_eff: Optional[float] = BANDWIDTH_EFF,
    gpu_file: Optional[str] = GPU_FILE,
    calibration: Optional[str] = CALIBRATION,
    method: str = METHOD,
    engine: Optional[str] = ENGINE,
    plot: Optional[str] = typer.Option(None, "--plot", help="Folder for PNG plots (needs matplotlib)."),
    as_json: bool = JSON,
) -> None:
    """Measured against predicted: TTFT, TPOT, ceiling, KV slowdown, fixed offset."""

    from ridgeline.checks import check_size
    from ridgeline.measure import render
    from ridgeline.measure.compare import compare as run

    check_size("--tp", tp, maximum=MAX_GPUS)
    folder = _plot_folder(plot) if plot else None
    m, recs = _machine(
        results, model, gpu, weights=weights, maths=maths, kv_dtype=kv_dtype, tp=tp, pp=pp, ep=ep,
        dp_attention=dp_attention,
        preset=preset, compute_eff=compute_eff, bandwidth_eff=bandwidth_eff, gpu_file=gpu_file,
        calibration=calibration, method=method, engine=engine,
    )  # fmt: skip
    result = run(m, recs)
    paths = []
    if folder:
        from ridgeline.measure.plots import plot as draw

        paths = [str(p) for p in draw(m, result, folder)]
    if as_json:
        _emit(result.to_dict() | {"plots": paths})
        return
    render.compare(result)
    for p in paths:
        render.console.print(f"plot: {p}")


def fit(
    results: str = typer.Argument(..., help="Records (JSONL) of a sweep."),
    model: Optional[str] = RECORDS_MODEL,
    gpu: str = GPU,
    weights: Optional[str] = WEIGHTS,
    maths: str | None = MATHS,
    kv_dtype: str = KV_DTYPE,
    tp: int = TP,
    pp: int = PP,
    ep: int = EP,
    dp_attention: bool = DP_ATTENTION,
    preset: str = PRESET,
    gpu_file: Optional[str] = GPU_FILE,
    method: str = METHOD,
    engine: Optional[str] = typer.Option(
        None,
        "--engine",
        "-e",
        help="Write an engine profile (TOML) instead of a calibration: this engine's, refitted here.",
    ),
    out: Optional[str] = typer.Option(
        None,
        "--out",
        help="Calibration to write, .json or .toml (default: beside the records, .calibration.json); "
        "with --engine, the profile's .toml.",
    ),
    as_json: bool = JSON,
) -> None:
    """Fit effective FLOP/s, bandwidth, per-step overhead and TTFT offset; write a calibration."""
    from pathlib import Path

    from ridgeline._files import loads_toml
    from ridgeline.calibration import check_calibration_path, save_calibration
    from ridgeline.checks import check_size
    from ridgeline.engines import get_engine, profile_from_entry, profile_to_toml
    from ridgeline.errors import RidgelineError
    from ridgeline.measure import render
    from ridgeline.measure.fit import as_engine, engine_name
    from ridgeline.measure.fit import fit as run

    check_size("--tp", tp, maximum=MAX_GPUS)
    src = Path(results).expanduser()
    base = get_engine(engine) if engine else None  # an unknown engine fails before the fit
    default = src.name.removesuffix(".jsonl") + (
        f".{engine_name(engine)}.toml" if engine else ".calibration.json"
    )
    path = check_calibration_path(out or src.with_name(default))  # refused before the fit, not after it
    if base is not None and path.suffix.lower() != ".toml":
        raise RidgelineError(f"--out {str(path)!r}: an engine profile is TOML; name it .toml")
    m, recs = _machine(
        results, model, gpu, weights=weights, maths=maths, kv_dtype=kv_dtype, tp=tp, pp=pp, ep=ep,
        dp_attention=dp_attention,
        preset=preset, gpu_file=gpu_file, method=method,
    )  # fmt: skip
    result = run(m, recs, served=base is not None)
    source = f"ridgeline fit {src.name}"
    if base is not None:
        profile = as_engine(result, m, base, f"{base.name}-{m.hw.name}", source)
        text = profile_to_toml(profile)
        # read back as `estimate --engine FILE.toml` reads it: what cannot load is not written
        profile_from_entry(profile.name, loads_toml(text)[profile.name], str(path))
        path.write_text(text, encoding="utf-8")
    else:
        save_calibration(result.calibration(source), path)
    if as_json:
        written = (
            {"calibration": None, "profile": str(path)}
            if base
            else {"calibration": str(path), "profile": None}
        )
        _emit(result.to_dict() | written)  # its warnings are in the JSON
        return
    render.fit(result, str(path), profile=base is not None)


def probe(
    name: str = typer.Option("host", "--name", help="Accelerator name to save it as."),
    quick: bool = typer.Option(False, "--quick", help="Small sizes: under a second, rougher figures."),
    threads: Optional[int] = typer.Option(None, "--threads", help="Threads for the bandwidth kernel."),
    save: bool = typer.Option(True, "--save/--no-save", help="Save into the config folder's gpus.json."),
    as_json: bool = JSON,
) -> None:
    """Measure this host's roofline (fp32 matmul FLOP/s, streaming bandwidth); save it as `host`."""
    from ridgeline.checks import check_size
    from ridgeline.errors import RidgelineError
    from ridgeline.measure import probe as probing
    from ridgeline.measure import render

    if not name or len(name) > 64 or not name.replace("-", "").replace("_", "").isalnum():
        raise RidgelineError(f"--name {name[:80]!r}: use up to 64 letters, digits, - and _")
    if threads is not None:
        check_size("--threads", threads, maximum=MAX_THREADS)
    from ridgeline.interrupts import SigtermInterrupts

    with SigtermInterrupts(say=True):
        result = probing.probe(name.lower(), "quick" if quick else "full", threads)
    path = str(probing.save(result)) if save else None
    if as_json:
        _emit(result.to_dict() | {"entry": result.entry(), "saved_to": path})
        return
    render.probe(result, path)


def register(app: typer.Typer) -> None:
    app.command()(measure)
    app.command()(compare)
    app.command()(fit)
    app.command()(probe)
