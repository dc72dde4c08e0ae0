"""`ridgeline search`: options parsed here, the work done in ridgeline.search.run.

Only the standard library loads at start-up (the options are data: `options.parse` reads a
plain line without typer); numpy, Rich, pyarrow and the simulator load inside the command.
"""

from __future__ import annotations

import sys
from typing import Any

from ridgeline.options import Shared as o  # the vocabulary every command shares
from ridgeline.options import option, typed
from ridgeline.simulate.commands import (
    ARRIVAL,
    BLOCK,
    BURSTINESS,
    HIT_RATE,
    OUTPUT,
    OUTPUT_DIST,
    PROMPT,
    PROMPT_DIST,
    SEED,
    SHARED,
    UTILIZATION,
)


def _axis(flag: str, short: str | None, text: str) -> Any:
    names = [flag] if short is None else [flag, short]
    return option(None, *names, help=text)


def search(
    model: str = o.MODEL,
    gpu: str | None = _axis("--gpu", "-g", "Accelerators, comma-separated, or all (each one rented hourly)."),
    tp: str | None = _axis("--tp", None, "Tensor-parallel GPUs per replica (default 1,2,4,8)."),
    pp: str | None = _axis("--pp", None, "Pipeline stages (default 1)."),
    ep: str | None = _axis("--ep", None, "Expert-parallel GPUs, MoE (default 1)."),
    dp_attention: str | None = _axis(
        "--dp-attention",
        None,
        "off, on: attention data-parallel over the TP GPUs (default off; off,on for MoE).",
    ),
    weights: str | None = _axis("--weights", "-w", "Weight dtypes (default bf16,fp8,int4-g128)."),
    maths: str | None = _axis(
        "--maths", None, "Maths dtypes (default bf16,fp8), or auto: each engine's own for the weights."
    ),
    kv_dtype: str | None = _axis("--kv-dtype", None, "KV-cache dtypes (default bf16,fp8)."),
    engine: str | None = _axis("--engine", "-e", "Engine profiles, or all (default; `ridgeline engines`)."),
    max_num_seqs: str | None = _axis(
        "--max-num-seqs", None, "Sequence limits per replica, or engine (default: each engine's own)."
    ),
    max_num_batched_tokens: str | None = _axis(
        "--max-num-batched-tokens", None, "Token budgets of a step, or engine (default: each engine's own)."
    ),
    chunked_prefill: str | None = _axis(
        "--chunked-prefill", None, "on, off (a prefill runs whole in one step), or engine (default)."
    ),
    replicas: str | None = _axis(
        "--replicas", None, "Replica counts, or auto (default: from the fewest the best case allows)."
    ),
    space: str | None = option(
        None, "--space", help="The axes from a TOML file (gpu = [...], tp = [...]; flags win)."
    ),
    gpu_file: str | None = o.GPU_FILE,
    rate: float | None = option(None, "--rate", help="The fleet's requests per second."),
    arrival: str = ARRIVAL,
    burstiness: float = BURSTINESS,
    trace: str | None = option(
        None, "--trace", help="Replay a CSV/JSONL trace on every point (its own arrivals and rate)."
    ),
    requests: int | None = option(
        None,
        "--requests",
        "-n",
        help="Requests per point (default: 10 turnovers of the fleet, 1,000 to 20,000; a trace: all).",
    ),
    prompt: int = PROMPT,
    output: int = OUTPUT,
    prompt_dist: str = PROMPT_DIST,
    output_dist: str = OUTPUT_DIST,
    prefix_hit_rate: float = HIT_RATE,
    shared_prefix: int = SHARED,
    seed: int = SEED,
    block_tokens: int = BLOCK,
    gpu_memory_utilization: float = UTILIZATION,
    router: str = option("round-robin", "--router", help="round-robin or least-outstanding."),
    slo_ttft_p99: float | None = o.SLO_TTFT,
    slo_tpot_p99: float | None = o.SLO_TPOT,
    slo_e2e_p99: float | None = o.SLO_E2E,
    goodput: float | None = option(
        None, "--goodput", help="Judge by goodput: the share of requests (0-1] that must meet every target."
    ),
    price: float | None = o.PRICE,
    workers: int | None = option(
        None, "--workers", help="Local processes for the simulate stage (default: every core)."
    ),
    ray: str | None = option(
        None, "--ray", help="Simulate on Ray: auto (a running cluster), local, or HOST:PORT."
    ),
    out: str = option(
        "search.parquet", "--out", help="Results folder of Parquet parts, written as points finish."
    ),
    resume: bool = option(False, "--resume", help="Continue the search in --out; skip its points."),
    overwrite: bool = option(False, "--overwrite", help="Start afresh, replacing the search in --out."),
    plot: str | None = option(None, "--plot", help="Draw the front: $/M tokens against p99s (PNG)."),
    exhaustive: bool = option(
        False, "--exhaustive", help="Run every survivor whole (slower; the same answer, every row's p99s)."
    ),
    as_json: bool = o.JSON,
) -> int:
    """The cheapest deployment inside an SLO: the space pruned by closed forms, simulated."""
    from ridgeline.errors import RidgelineError
    from ridgeline.metrics import Slo
    from ridgeline.models import get_model
    from ridgeline.search.executors import make_executor
    from ridgeline.search.run import Settings
    from ridgeline.search.run import search as run
    from ridgeline.search.space import make_space
    from ridgeline.simulate.commands import build_workload

    if rate is None and trace is None:
        raise RidgelineError("give the fleet's --rate (requests per second) or a --trace to replay")
    if resume and overwrite:
        raise RidgelineError("--resume continues the search in --out and --overwrite replaces it: give one")
    if plot is not None:
        from ridgeline.search.plot import check_plot_path

        check_plot_path(plot)
    executor = make_executor(workers, ray)
    auto = requests is None and trace is None
    arch = get_model(model)
    axes = {
        "gpu": gpu, "tp": tp, "pp": pp, "ep": ep, "dp_attention": dp_attention, "weights": weights,
        "maths": maths, "kv_dtype": kv_dtype,
        "engine": engine, "max_num_seqs": max_num_seqs, "max_num_batched_tokens": max_num_batched_tokens,
        "chunked_prefill": chunked_prefill, "replicas": replicas,
    }  # fmt: skip
    the_space = make_space(axes, space, arch, gpu_file)
    w = build_workload(
        rate, arrival, burstiness, None, 0.0, trace, 1000 if auto else requests, None, prompt, output,
        prompt_dist, output_dist, seed, prefix_hit_rate, shared_prefix,
    )  # fmt: skip
    slo = Slo(slo_ttft_p99, slo_tpot_p99, slo_e2e_p99)
    settings = Settings(
        model=model, arch=arch, workload=w, auto_requests=auto, slo=slo, attainment=goodput, router=router,
        block_tokens=block_tokens, gpu_memory_utilization=gpu_memory_utilization,
        price_per_gpu_hour=price, gpu_file=gpu_file, exhaustive=exhaustive,
    )  # fmt: skip
    with _Bar(not as_json) as bar:
        result = run(the_space, settings, executor, out, resume, overwrite, bar.update)
    if plot is not None:
        from ridgeline.search.plot import plot_front

        plot_front(result, plot)
    if as_json:
        from ridgeline._files import dumps

        sys.stdout.write(dumps(result.to_dict()) + "\n")
    else:
        from ridgeline.search import render

        render.search(result, plot)
    if result.interrupted:
        sys.stderr.write(
            f"ridgeline: {'terminated (SIGTERM)' if result.interrupted == 'SIGTERM' else 'interrupted'}; "
            f"{len(result.rows):,} points are in {result.out}: --resume continues\n"
        )
        return 143 if result.interrupted == "SIGTERM" else 130
    return 0


class _Bar:
    """A Rich progress bar on stderr while `enabled` and stderr is a terminal."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> _Bar:
        return self

    def update(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("simulating"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                console=Console(stderr=True), transient=True,
            )  # fmt: skip
            self.bar.start()
            self.task = self.bar.add_task("simulating", total=total)
        self.bar.update(self.task, completed=done, total=total)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def register(app: Any) -> None:
    app.command(name="search")(typed(search))
