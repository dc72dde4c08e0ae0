"""`ridgeline simulate` and `ridgeline plan`: options parsed here, work done in ridgeline.simulate.

Only the standard library loads at start-up (the options are data: `options.parse` reads a
plain line without typer); numpy, Rich and the simulator load inside the commands.
"""

from __future__ import annotations

import sys
from typing import Any

from ridgeline.interrupts import SigtermInterrupts
from ridgeline.options import OUTPUT_HELP, deployment, option, typed
from ridgeline.options import Shared as o  # the vocabulary every command shares

ARRIVAL = option("poisson", "--arrival", help="poisson, gamma (see --burstiness) or constant.")
BURSTINESS = option(1.0, "--burstiness", help="Gamma shape k, 0.01 to 100: 1 is Poisson, below 1 burstier.")
PROMPT = option(2000, "--prompt-tokens", "-p", help="Prompt tokens (the mean when a --prompt-dist is set).")
OUTPUT = option(500, "--output-tokens", "-o", help=OUTPUT_HELP + " The mean with --output-dist.")
PROMPT_DIST = option(
    "fixed", "--prompt-dist", help="fixed, uniform[:W], lognormal[:SIGMA <= 3] or file:PATH."
)
OUTPUT_DIST = option(
    "fixed", "--output-dist", help="fixed, uniform[:W], lognormal[:SIGMA <= 3] or file:PATH."
)
MAX_SEQS = option(
    None, "--max-num-seqs", help="Sequences running at once, per replica (default 256, or the --engine's)."
)
MAX_TOKENS = option(
    None,
    "--max-num-batched-tokens",
    help="Token budget of one step, chunked prefill (default 8192, or the --engine's).",
)
CHUNKED = option(
    None,
    "--chunked-prefill",
    help="on, or off: a prefill runs whole in one step (default: the --engine's, else on).",
)
SCHEDULER_STEPS = option(
    None,
    "--num-scheduler-steps",
    help="Decode steps a scheduling runs, 1 to 1024 (vLLM 0.6's multi-step; needs --chunked-prefill off).",
)
BLOCK = option(16, "--block-tokens", help="Tokens per KV-cache block (1 to 1024).")
UTILIZATION = option(0.9, "--gpu-memory-utilization", help="Fraction of memory for weights and KV.")
HIT_RATE = option(0.0, "--prefix-hit-rate", help="Fraction of each prompt found in the prefix cache.")
SHARED = option(0, "--shared-prefix", help="Tokens of a prefix every prompt shares (kept cached).")
SEED = option(0, "--seed", help="Seed for arrivals and lengths: the same seed, the same run.")
TRACE = option(
    None, "--trace", help="Replay a CSV/JSONL trace (arrival_s or timestamp, prompt/output_tokens)."
)


def simulate(
    model: str = o.MODEL,
    gpu: str = o.GPU,
    weights: str | None = o.WEIGHTS,
    maths: str | None = o.MATHS,
    kv_dtype: str = o.KV_DTYPE,
    tp: int = o.TP,
    pp: int = o.PP,
    ep: int = o.EP,
    dp_attention: bool = o.DP_ATTENTION,
    preset: str = o.PRESET,
    compute_eff: float | None = o.COMPUTE_EFF,
    bandwidth_eff: float | None = o.BANDWIDTH_EFF,
    gpu_file: str | None = o.GPU_FILE,
    calibration: str | None = o.CALIBRATION,
    method: str = o.METHOD,
    engine: str | None = o.ENGINE,
    in_process: bool = o.IN_PROCESS,
    replicas: int = option(1, "--replicas", help="Identical replicas behind the router (at most 1000)."),
    router: str = option("round-robin", "--router", help="round-robin or least-outstanding."),
    rate: float | None = option(None, "--rate", help="Requests per second, fleet-wide (default 2)."),
    arrival: str = ARRIVAL,
    burstiness: float = BURSTINESS,
    concurrency: int | None = option(None, "--concurrency", help="Closed loop: clients, one request each."),
    think_time: float = option(
        0.0, "--think-time", help="Closed loop: seconds between a reply and the next."
    ),
    trace: str | None = TRACE,
    requests: int | None = option(None, "--requests", "-n", help="Requests to send (at most 10,000,000)."),
    duration: float | None = option(None, "--duration", help="Seconds of arrivals (default 60)."),
    prompt: int = PROMPT,
    output: int = OUTPUT,
    prompt_dist: str = PROMPT_DIST,
    output_dist: str = OUTPUT_DIST,
    max_num_seqs: int | None = MAX_SEQS,
    max_num_batched_tokens: int | None = MAX_TOKENS,
    chunked_prefill: str | None = CHUNKED,
    num_scheduler_steps: int | None = SCHEDULER_STEPS,
    block_tokens: int = BLOCK,
    gpu_memory_utilization: float = UTILIZATION,
    prefix_hit_rate: float = HIT_RATE,
    shared_prefix: int = SHARED,
    seed: int = SEED,
    slo_ttft_p99: float | None = o.SLO_TTFT,
    slo_tpot_p99: float | None = o.SLO_TPOT,
    slo_e2e_p99: float | None = o.SLO_E2E,
    out: str | None = option(None, "--out", help="Per-request records: JSONL, or CSV if FILE ends in .csv."),
    no_jump: bool = option(False, "--no-jump", help="Step every decode step (a check of the closed form)."),
    no_band: bool = option(
        False, "--no-band", help="Skip running again at the ends of the --engine's band (two more runs)."
    ),
    as_json: bool = o.JSON,
) -> None:
    """Serve a workload on a fleet: continuous batching, paged KV cache, p50/p90/p99."""
    from ridgeline.simulate import output as out_files
    from ridgeline.simulate.run import band_runs, engine_config
    from ridgeline.simulate.run import simulate as run

    if out:
        out_files.check_out_path(out)
    d = deployment(
        model, gpu, weights=weights, maths=maths, kv_dtype=kv_dtype, tp=tp, pp=pp, ep=ep,
        dp_attention=dp_attention, preset=preset,
        compute_eff=compute_eff, bandwidth_eff=bandwidth_eff, gpu_file=gpu_file, calibration=calibration,
        method=method, engine=engine, in_process=in_process,
    )  # fmt: skip
    w = build_workload(
        rate,
        arrival,
        burstiness,
        concurrency,
        think_time,
        trace,
        requests,
        duration,
        prompt,
        output,
        prompt_dist,
        output_dist,
        seed,
        prefix_hit_rate,
        shared_prefix,
    )
    cfg = engine_config(
        d, max_num_seqs, max_num_batched_tokens, block_tokens, gpu_memory_utilization, not no_jump,
        chunked_prefill=_chunked(chunked_prefill), num_scheduler_steps=num_scheduler_steps,
    )  # fmt: skip
    slo = _slo_or_none(slo_ttft_p99, slo_tpot_p99, slo_e2e_p99)
    total = len(w.trace.arrival_s) if w.trace else (w.requests or None)
    if total is None and not w.closed and w.rate_per_s and w.duration_s:
        total = int(w.rate_per_s * w.duration_s)
    showing = not as_json and (total or 0) >= 5000
    if total is not None and not no_band:  # an open-loop run is made again at each end of the band
        total *= band_runs(d, w)
    with SigtermInterrupts(say=True), _progress(showing, total, "simulating") as progress:
        result = run(
            d, w, engine=cfg, replicas=replicas, router=router, slo=slo, progress=progress, band=not no_band
        )
    if out:
        out_files.write_records(out, result.records)
    assert result.summary is not None  # run() summarizes unless told not to
    if as_json:
        _emit(result.summary.to_dict())
        return
    from ridgeline.simulate import render

    render.simulation(result.summary, out)


def plan(
    model: str = o.MODEL,
    gpu: str = o.GPU,
    weights: str | None = o.WEIGHTS,
    maths: str | None = o.MATHS,
    kv_dtype: str = o.KV_DTYPE,
    tp: int = o.TP,
    pp: int = o.PP,
    ep: int = o.EP,
    dp_attention: bool = o.DP_ATTENTION,
    preset: str = o.PRESET,
    compute_eff: float | None = o.COMPUTE_EFF,
    bandwidth_eff: float | None = o.BANDWIDTH_EFF,
    gpu_file: str | None = o.GPU_FILE,
    calibration: str | None = o.CALIBRATION,
    method: str = o.METHOD,
    engine: str | None = o.ENGINE,
    in_process: bool = o.IN_PROCESS,
    compare: str | None = option(
        None, "--compare", help="Rank deployments GPU[:TP[:WEIGHTS]],...: e.g. h100-sxm:1:bf16,h200:1:fp8."
    ),
    rate: float | None = option(None, "--rate", help="Target requests per second for the whole fleet."),
    arrival: str = ARRIVAL,
    burstiness: float = BURSTINESS,
    trace: str | None = option(
        None, "--trace", help="Take prompt/output lengths from a trace or records file."
    ),
    prompt: int = PROMPT,
    output: int = OUTPUT,
    prompt_dist: str = PROMPT_DIST,
    output_dist: str = OUTPUT_DIST,
    max_num_seqs: int | None = MAX_SEQS,
    max_num_batched_tokens: int | None = MAX_TOKENS,
    chunked_prefill: str | None = CHUNKED,
    num_scheduler_steps: int | None = SCHEDULER_STEPS,
    block_tokens: int = BLOCK,
    gpu_memory_utilization: float = UTILIZATION,
    prefix_hit_rate: float = HIT_RATE,
    shared_prefix: int = SHARED,
    seed: int = SEED,
    slo_ttft_p99: float | None = o.SLO_TTFT,
    slo_tpot_p99: float | None = o.SLO_TPOT,
    slo_e2e_p99: float | None = o.SLO_E2E,
    requests: int | None = option(
        None,
        "--requests",
        "-n",
        help="Requests per simulated run, 100 to 1,000,000 (default: 150 system turnovers).",
    ),
    seeds: int = option(
        5, "--seeds", help="Runs (seeds) per deployment, 2 to 100; the plan takes mean - 2 sd."
    ),
    price: float | None = option(None, "--price", help="$ per GPU-hour (default: the catalogue's)."),
    exhaustive: bool = option(
        False, "--exhaustive", help="Every trial at full length (slower; default: short screens, confirmed)."
    ),
    no_band: bool = option(
        False, "--no-band", help="Skip planning again at the ends of the --engine's band (two more plans)."
    ),
    as_json: bool = o.JSON,
) -> None:
    """The highest rate per replica inside a p99 SLO; replicas, GPUs and $ per million tokens."""
    from ridgeline.simulate import plan as planner
    from ridgeline.simulate.run import engine_config

    planner.check_plan(rate, requests, seeds)
    w = build_workload(
        1.0,
        arrival,
        burstiness,
        None,
        0.0,
        None,
        requests,
        None,
        prompt,
        output,
        prompt_dist,
        output_dist,
        seed,
        prefix_hit_rate,
        shared_prefix,
    )
    if trace:
        from dataclasses import replace

        from ridgeline.simulate.workload import lengths_from_trace, read_trace

        prompt_lengths, output_lengths = lengths_from_trace(read_trace(trace))
        w = replace(w, prompt=prompt_lengths, output=output_lengths)
    slo = _slo(slo_ttft_p99, slo_tpot_p99, slo_e2e_p99)
    specs = planner.parse_deployments(compare, weights) if compare else [(gpu, tp, weights)]
    planner.check_plan(rate, requests, seeds, len(specs))
    if slo_ttft_p99 is None and slo_tpot_p99 is None and slo_e2e_p99 is None:
        from ridgeline.errors import RidgelineError

        raise RidgelineError(
            "plan finds the highest rate inside an SLO: give --slo-ttft-p99, --slo-tpot-p99 or --slo-e2e-p99"
        )
    shared: dict[str, Any] = dict(
        maths=maths, kv_dtype=kv_dtype, pp=pp, ep=ep, dp_attention=dp_attention,
        preset=preset, compute_eff=compute_eff,
        bandwidth_eff=bandwidth_eff, gpu_file=gpu_file, calibration=calibration, method=method, engine=engine,
        in_process=in_process,
    )  # fmt: skip
    deployments = [  # bad names fail here, before any simulation
        deployment(model, g, weights=wt, tp=t, **shared) for g, t, wt in specs
    ]
    # every deployment shares the engine profile, so its scheduler's defaults hold for all
    cfg = engine_config(
        deployments[0], max_num_seqs, max_num_batched_tokens, block_tokens, gpu_memory_utilization,
        chunked_prefill=_chunked(chunked_prefill), num_scheduler_steps=num_scheduler_steps,
    )  # fmt: skip
    from ridgeline.engines import LOAD

    band = not no_band and any(d.band(LOAD) for d in deployments)
    estimate = len(deployments) * (seeds * 8 + 1 + planner.CONFIRM_SEEDS) * (3 if band else 1)
    with SigtermInterrupts(say=True), _progress(not as_json, estimate, "planning") as progress:
        ticks = [0]

        def tick() -> None:
            ticks[0] += 1
            if progress:
                progress(min(ticks[0], estimate - 1))

        plans = planner.compare(
            deployments, w, slo, rate, cfg, requests, seeds, price, tick, exhaustive, band
        )
    data = {
        "target_rate_per_s": rate,
        "slo": {"ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s, "e2e_s": slo.e2e_s},
        "plans": [_plan_dict(p) for p in plans],
    }
    if as_json:
        _emit(data)
        return
    from ridgeline.simulate import render

    render.plans(data, w)


def build_workload(
    rate: float | None,
    arrival: str,
    burstiness: float,
    concurrency: int | None,
    think_time: float,
    trace: str | None,
    requests: int | None,
    duration: float | None,
    prompt: int,
    output: int,
    prompt_dist: str,
    output_dist: str,
    seed: int,
    prefix_hit_rate: float,
    shared_prefix: int,
) -> Any:
    """The Workload the options describe (`simulate`, `plan` and `search` share them)."""
    from ridgeline.errors import RidgelineError
    from ridgeline.simulate.workload import Workload, parse_lengths, read_trace

    if concurrency is not None and rate is not None:
        raise RidgelineError("give --rate (open loop) or --concurrency (closed loop), not both")
    if trace and (rate is not None or concurrency is not None):
        raise RidgelineError("--trace carries its own arrival times; drop --rate and --concurrency")
    if requests is None and duration is None and not trace:
        duration = 60.0
    return Workload(
        prompt=parse_lengths(prompt_dist, prompt, "--prompt-dist"),
        output=parse_lengths(output_dist, output, "--output-dist"),
        arrival=arrival,
        rate_per_s=2.0 if rate is None else rate,
        burstiness=burstiness,
        concurrency=concurrency,
        think_s=think_time,
        requests=requests,
        duration_s=duration,
        trace=read_trace(trace) if trace else None,
        seed=seed,
        prefix_hit_rate=prefix_hit_rate,
        shared_prefix_tokens=shared_prefix,
    )


def _slo(ttft: float | None, tpot: float | None, e2e: float | None) -> Any:
    from ridgeline.metrics import Slo
    from ridgeline.simulate.run import check_slo

    slo = Slo(ttft, tpot, e2e)
    check_slo(slo)
    return slo


def _slo_or_none(ttft: float | None, tpot: float | None, e2e: float | None) -> Any:
    return None if ttft is None and tpot is None and e2e is None else _slo(ttft, tpot, e2e)


def _plan_dict(p: Any) -> dict[str, Any]:
    d = p.to_dict()
    d["trials"] = len(d["trials"])
    return d


def _emit(data: Any) -> None:
    """Strict JSON on stdout: a NaN or an infinity is a bug, and fails here."""
    from ridgeline._files import dumps

    sys.stdout.write(dumps(data) + "\n")


class _progress:
    """A Rich progress bar on stderr while `enabled` and stderr is a terminal; yields a
    callback taking the number done (or None when disabled)."""

    def __init__(self, enabled: bool, total: int | None, label: str) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.total = total
        self.label = label
        self.bar: Any = None

    def __enter__(self) -> Any:
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import Progress

        self.bar = Progress(console=Console(stderr=True), transient=True)
        self.bar.start()
        task = self.bar.add_task(self.label, total=self.total)

        def update(done: int) -> None:
            self.bar.update(task, completed=done)

        return update

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def register(app: Any) -> None:
    app.command(name="simulate")(typed(simulate))
    app.command(name="plan")(typed(plan))


def _chunked(value: str | None) -> bool | None:
    """--chunked-prefill: on, off, or None (the --engine's, else on)."""
    from ridgeline.checks import check_switch

    return None if value is None else check_switch("--chunked-prefill", value)
