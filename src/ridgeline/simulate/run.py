"""simulate(): a workload on a fleet of identical replicas, from arrivals to a summary."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from ridgeline import metrics
from ridgeline.checks import check_positive, check_size
from ridgeline.deployment import Deployment
from ridgeline.engines import LOAD
from ridgeline.errors import RidgelineError
from ridgeline.simulate import report
from ridgeline.simulate.engine import Engine, EngineConfig, replica_limits
from ridgeline.simulate.kvcache import KvCache, blocks_for, kv_cache, request_blocks
from ridgeline.simulate.requests import Requests
from ridgeline.simulate.router import check_router, run_fleet
from ridgeline.simulate.scheduler import whole_prefill_tokens
from ridgeline.simulate.steptime import StepModel
from ridgeline.simulate.workload import ClosedLoop, Lengths, Workload, make_requests

MAX_REPLICAS = 1000
# least-outstanding looks at every replica at every arrival: requests x replicas such looks
# (about 6 us each) bound its cost.
MAX_ROUTING_LOOKS = 100_000_000


@dataclass(frozen=True)
class SloVerdict:
    """Each target against its p99 (None: no target set)."""

    ttft_s: float | None
    tpot_s: float | None
    e2e_s: float | None
    p99_met: dict[str, bool]  # by target set
    met: bool


@dataclass(frozen=True)
class Summary(metrics.Summary):
    """A simulated run: the shared summary of its requests, then what the simulator adds:
    the offered load and whether the fleet kept up, the SLO's verdict, how busy the fleet
    was, and the run's inputs echoed (`deployment`, `engine`, `workload`). `to_dict()` is
    `simulate --json`, its keys in this order."""

    itl_s: metrics.Percentiles  # each decode token's wait since its sequence's last (report)
    input_tokens_per_s: float
    offered_rate_per_s: float | None
    overloaded: bool
    queue_growth: float
    slo: SloVerdict | None
    # the engine profile's band under load on the run's medians and throughput (report.load_band)
    uncertainty: dict[str, Any] | None
    utilisation: report.Utilisation
    deployment: dict[str, Any]
    engine: dict[str, Any]
    workload: dict[str, Any]
    warnings: tuple[str, ...]

    def latency(self, key: str) -> metrics.Percentiles:
        """The percentiles of one of metrics.LATENCY_KEYS, or of the ITL, by name."""
        return self.itl_s if key == "itl_s" else super().latency(key)

    @property
    def met(self) -> bool:
        """Every SLO target met at p99, and the fleet keeping up with the arrivals."""
        return self.slo is not None and self.slo.met and not self.overloaded

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"warnings": list(self.warnings)}


@dataclass
class Result:
    machine: Deployment
    kv: KvCache
    reqs: Requests
    engines: list[Engine]  # without their step rows (Engine.trace) when simulate(..., summarize=False)
    summary: Summary | None = None  # None when simulate(..., summarize=False)
    concurrency: int | None = None  # the workload's, as each record names it

    @functools.cached_property
    def records(self) -> list[dict[str, Any]]:
        """One flat record per request (metrics.RECORD_KEYS), built on first use, for --out
        and the accuracy corpus: the summary is computed from the arrays, without them."""
        return report.make_records(self.reqs, self.machine.ttft_offset_s, self.concurrency)


def step_model(m: Deployment) -> StepModel:
    """The deployment's step model, kept on it (`Deployment.kept`): its memo of step times
    by token count then serves every run on the same deployment (a plan's trials, a
    search's points) instead of being filled again by each. A step model is a pure function
    of its deployment, so a kept one prices every step as a fresh one would."""
    found = m.kept.get("step model")
    if found is None:
        found = m.kept["step model"] = StepModel(m)
    return found


def check_engine(cfg: EngineConfig, replicas: int) -> None:
    if not isinstance(cfg, EngineConfig):
        raise RidgelineError(f"engine must be an EngineConfig, got {type(cfg).__name__}")
    cfg.check()
    check_size("--replicas", replicas, 1, MAX_REPLICAS)


def engine_config(
    m: Deployment,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    block_tokens: int = 16,
    gpu_memory_utilization: float = 0.9,
    jump: bool = True,
    policy: str | None = None,
    chunked_prefill: bool | None = None,
    prefix_caching: bool | None = None,
    overlap: bool | None = None,
    num_scheduler_steps: int | None = None,
) -> EngineConfig:
    """The engine's knobs: those given, else the deployment's engine profile's scheduler
    (its policy, max sequences, batched-token budget, chunked prefill, prefix caching,
    overlapped and multi-step scheduling, and whose limits they are under data-parallel
    attention), else vLLM's defaults."""
    base = m.scheduler or EngineConfig()
    return EngineConfig(
        max_num_seqs=base.max_num_seqs if max_num_seqs is None else max_num_seqs,
        max_num_batched_tokens=(
            base.max_num_batched_tokens if max_num_batched_tokens is None else max_num_batched_tokens
        ),
        block_tokens=block_tokens,
        gpu_memory_utilization=gpu_memory_utilization,
        jump=jump,
        policy=base.policy if policy is None else policy,
        chunked_prefill=base.chunked_prefill if chunked_prefill is None else chunked_prefill,
        prefix_caching=base.prefix_caching if prefix_caching is None else prefix_caching,
        overlap=base.overlap if overlap is None else overlap,
        dp_limits=base.dp_limits,
        num_scheduler_steps=base.num_scheduler_steps if num_scheduler_steps is None else num_scheduler_steps,
    )


def check_slo(slo: metrics.Slo | None) -> None:
    """Each target, when given, a finite number of seconds above zero."""
    if slo is None:
        return
    if not isinstance(slo, metrics.Slo):
        raise RidgelineError(f"slo must be a metrics.Slo, got {type(slo).__name__}")
    for name, value in (
        ("--slo-ttft-p99", slo.ttft_s),
        ("--slo-tpot-p99", slo.tpot_s),
        ("--slo-e2e-p99", slo.e2e_s),
    ):
        if value is not None:
            check_positive(name, value, hint=" (seconds)")


def hold_apart(reqs: Requests, start: int, kv: KvCache) -> None:
    """Each request's sliding layers hold their blocks apart, out of what its own blocks spare."""
    if kv.windows:
        for i in range(start, len(reqs)):
            reqs.spared[i] -= kv.apart_blocks(reqs.prompt[i] + reqs.output[i]) * kv.block_tokens


def check_fits(reqs: Requests, start: int, blocks: int, block_tokens: int, ranks: int = 1) -> None:
    """Every request must fit the cache alone (under data-parallel attention over `ranks`
    GPUs, the one GPU's it sits on), or preemption could never let it finish."""
    for i in range(start, len(reqs)):
        tokens = reqs.prompt[i] + reqs.output[i] - reqs.spared[i]
        if blocks_for(tokens, block_tokens) > blocks:
            where, fix = (
                ("a GPU holds under --dp-attention", "drop --dp-attention")
                if ranks > 1
                else ("a replica holds", "raise --tp")
            )
            raise RidgelineError(
                f"a request of {reqs.prompt[i]:,} + {reqs.output[i]:,} tokens needs more KV cache than "
                f"{where} ({blocks * block_tokens:,} tokens): shorten it or {fix}"
            )


def check_whole_prefills(reqs: Requests, start: int, cfg: EngineConfig, ranks: int = 1) -> None:
    """With chunked prefill off, every prefill must fit one step's token budget whole (under
    data-parallel attention, its rank's): a request's prompt (less its prefix-cache hit) and,
    under a policy that preempts by recompute (vLLM's, SGLang's), its prompt and every token
    it may have written by then."""
    if cfg.chunked_prefill:
        return
    budget = replica_limits(cfg, ranks).max_chunk_tokens
    shared = cfg.max_num_batched_tokens // budget  # the flag's tokens a rank's one stands for
    for i in range(start, len(reqs)):
        tokens = whole_prefill_tokens(cfg.policy, reqs.prompt[i] - reqs.hit[i], reqs.output[i])
        if tokens > budget:
            again = tokens > reqs.prompt[i] - reqs.hit[i]
            redo = f" and a recompute of its {reqs.output[i]:,} output tokens" if again else ""
            raise RidgelineError(
                f"with chunked prefill off a step must hold a whole prefill: a prompt of "
                f"{reqs.prompt[i]:,} tokens{redo} needs --max-num-batched-tokens {tokens * shared:,}, "
                f"not {cfg.max_num_batched_tokens:,}: raise it, or turn chunked prefill on"
            )


def simulate(
    deployment: Deployment | None = None,
    workload: Workload | None = None,
    *,
    engine: EngineConfig | None = None,
    replicas: int = 1,
    router: str = "round-robin",
    slo: metrics.Slo | None = None,
    progress: Callable[[int], None] | None = None,
    summarize: bool = True,
    band: bool = True,
) -> Result:
    """Run the workload on replicas of the deployment to the end (every request finishes)
    and summarize it (unless `summarize` is False: then only the per-request arrays are
    filled, and the engines keep no step rows). The summary's `uncertainty` is the run with
    the engine as slow as each end of its profile's band under load (report.load_band): a
    closed loop's own times that many times as long (its slowed run is the same run,
    slower), an open-loop run's made again on the slowed engine with the same arrivals
    (`band_runs`: its queue magnifies a slower engine's steps). With `band` False there is
    no band, and no run but the one (`simulate --no-band`, and a caller that reads no band:
    each run of a plan's search)."""
    deployment = deployment or Deployment.build()
    workload = workload or Workload()
    cfg = engine or EngineConfig()
    if not isinstance(workload, Workload):
        raise RidgelineError(f"workload must be a Workload, got {type(workload).__name__}")
    check_engine(cfg, replicas)
    check_router(router)
    check_slo(slo)
    m = deployment
    kv = kv_cache(
        m, cfg.block_tokens, cfg.gpu_memory_utilization, cfg.max_num_seqs, cfg.max_num_batched_tokens
    )
    bs = kv.block_tokens
    # under data-parallel attention a request's cache sits on one of the ranks' GPUs, each of
    # which holds the shared prefix too
    ranks = m.par.dp_ranks
    pinned = workload.shared_prefix_tokens // bs
    room = request_blocks(kv, ranks, pinned)
    if room <= 0:
        raise RidgelineError(
            f"--shared-prefix {workload.shared_prefix_tokens:,} tokens fills the whole KV cache "
            f"({(room + pinned) * bs:,} tokens{' a GPU' if ranks > 1 else ''}); shorten it"
        )
    reqs = make_requests(workload, m.arch.max_context, bs, m.arch.name)
    if router == "least-outstanding" and not workload.closed and len(reqs) * replicas > MAX_ROUTING_LOOKS:
        raise RidgelineError(
            f"least-outstanding routing of {len(reqs):,} requests over {replicas:,} replicas looks at "
            f"every replica at every arrival, more than {MAX_ROUTING_LOOKS:,} looks: use --router "
            "round-robin, fewer replicas or fewer requests"
        )
    hold_apart(reqs, 0, kv)
    check_fits(reqs, 0, room, bs, ranks)
    check_whole_prefills(reqs, 0, cfg, ranks)
    follow_up = None
    if workload.closed:
        loop = ClosedLoop(workload, reqs, m.arch.max_context, bs)

        def follow_up(done: int, finish_s: float) -> int | None:
            rid = loop.follow_up(done, finish_s)
            if rid is not None:
                hold_apart(reqs, rid, kv)
                check_fits(reqs, rid, room, bs, ranks)
                check_whole_prefills(reqs, rid, cfg, ranks)
            return rid

    model = step_model(m)
    held = pinned * ranks  # the shared prefix's blocks, on each rank's GPU
    engines = [Engine(reqs, model, cfg, kv, held, j, follow_up, trace=summarize) for j in range(replicas)]
    ids = list(range(len(reqs)))
    span = reqs.arrival_s[-1] - reqs.arrival_s[0] if len(reqs) > 1 else 0.0
    if workload.closed:
        span = workload.duration_s or 200.0
    run_fleet(engines, ids, "round-robin" if workload.closed else router, progress, max(span / 200, 1e-3))
    if not summarize:
        return Result(m, kv, reqs, engines, concurrency=workload.concurrency)
    result = summarize_run(m, kv, reqs, engines, workload, cfg, replicas, router, slo)
    assert result.summary is not None  # summarized
    if not band:
        result.summary = replace(result.summary, uncertainty=None)
    elif band_runs(m, workload) > 1:
        result.summary = with_band_runs(result, workload, cfg, replicas, router, progress)
    return result


def band_runs(m: Deployment, workload: Workload) -> int:
    """The runs `simulate` makes: three for an open-loop workload on an engine with a band
    under load (the run, then the same arrivals with the engine as slow as each end of the
    band), else one (a closed loop's slowed run is the same run, slower)."""
    return 3 if m.band(LOAD) is not None and m.engine is not None and not workload.closed else 1


def with_band_runs(
    result: Result,
    workload: Workload,
    cfg: EngineConfig,
    replicas: int,
    router: str,
    progress: Callable[[int], None] | None,
) -> Summary:
    """The run's summary with its band from the runs at each end of the band (the same
    arrivals: the workload's seed, or its trace), each counted on after the run's requests."""
    s = result.summary
    assert s is not None and s.uncertainty is not None  # the run's own band (summarize_run)
    busy = s.uncertainty["server_share"]
    band = result.machine.load_band(busy)
    assert band is not None
    done = len(result.reqs)
    ends = []
    for k, factor in enumerate(band, start=1):
        tick = None if progress is None else functools.partial(_counted_after, progress, k * done)
        run = simulate(result.machine.slowed(factor), workload, engine=cfg, replicas=replicas, router=router,
                       progress=tick, band=False)  # fmt: skip
        assert run.summary is not None
        ends.append(run.summary)
    fast, slow = ends
    saturated = s.overloaded or slow.overloaded  # the throughput is the engine's at the slow end
    return replace(s, uncertainty=report.load_band(result.machine, s, saturated, busy, (fast, slow)))


def server_share(m: Deployment, reqs: Requests, rate_per_s: float, replicas: int) -> float:
    """The share of the run a replica's API server is busy (Deployment.server_share) at this
    rate shared over the replicas, with the requests' mean prompt and emitted tokens."""
    if not len(reqs):
        return 0.0
    return m.server_share(rate_per_s / replicas, mean_tokens(reqs.prompt), mean_tokens(reqs.output) + 1)


def _counted_after(progress: Callable[[int], None], before: int, done: int) -> None:
    progress(before + done)


def summarize_run(
    m: Deployment,
    kv: KvCache,
    reqs: Requests,
    engines: list[Engine],
    workload: Workload,
    cfg: EngineConfig,
    replicas: int,
    router: str,
    slo: metrics.Slo | None,
) -> Result:
    makespan = max(reqs.finish_s) if len(reqs) else 0.0
    shared = report.summarize_requests(reqs, m.ttft_offset_s, makespan, slo)
    offered = report.offered_rate(workload, reqs)
    growth = report.queue_growth(reqs)
    overloaded = report.overloaded(reqs, workload.closed, growth)
    notes = warnings(shared, overloaded, offered)
    rate = offered if offered is not None else shared.requests_per_s
    busy = server_share(m, reqs, rate, replicas)
    if len(reqs):
        streamed = mean_tokens(reqs.output) + 1  # tokens emitted: M + 1
        server = report.server_warning(m, mean_tokens(reqs.prompt), streamed, rate, replicas)
        notes = notes if server is None else (server, *notes)
    summary = Summary(
        **{f.name: getattr(shared, f.name) for f in fields(shared)},
        itl_s=report.inter_token_latency(engines),
        input_tokens_per_s=sum(reqs.prompt) / max(makespan, 1e-12),
        offered_rate_per_s=offered,
        overloaded=overloaded,
        queue_growth=growth,
        slo=slo_verdict(shared, slo),
        uncertainty=report.load_band(m, shared, workload.closed or overloaded, busy),
        utilisation=report.utilisation(engines, m, makespan),
        deployment={
            "model": m.arch.name,
            "gpu": m.hw.name,
            "weights": m.prec.weights,
            "maths": m.prec.maths,
            "kv_dtype": m.prec.kv,
            "tp": m.par.tp,
            "pp": m.par.pp,
            "ep": m.par.ep,
            "dp_attention": m.par.dp_attention,
            "in_process": m.in_process,
            "gpus_per_replica": m.par.gpus,
            "replicas": replicas,
            "router": router,
            "compute_eff": m.eff.compute,
            "bandwidth_eff": m.eff.bandwidth,
            "kv_blocks": kv.blocks,
            "block_tokens": kv.block_tokens,
            "kv_tokens": kv.tokens,
        },
        engine=asdict(cfg) | {"replica": asdict(replica_limits(cfg, m.par.dp_ranks))},
        workload={
            "arrival": "closed" if workload.closed else ("trace" if workload.trace else workload.arrival),
            "rate_per_s": None if workload.closed or workload.trace else workload.rate_per_s,
            "burstiness": workload.burstiness,
            "concurrency": workload.concurrency,
            "requests": len(reqs),
            "seed": workload.seed,
            "prompt": _lengths(workload.prompt, reqs.prompt, workload.trace is not None),
            "output": _lengths(workload.output, reqs.output, workload.trace is not None),
            "prefix_hit_rate": workload.prefix_hit_rate,
            "shared_prefix_tokens": workload.shared_prefix_tokens,
        },
        warnings=notes,
    )
    return Result(m, kv, reqs, engines, summary, workload.concurrency)


def mean_tokens(counts: list[int]) -> float:
    """The mean of token counts as statistics.fmean gives it: their exact sum, rounded once
    on division, without importing the statistics module."""
    return sum(counts) / len(counts)


def _lengths(drawn: Lengths, replayed: list[int], trace: bool) -> dict[str, Any]:
    """A workload's lengths as its summary reports them: the distribution drawn from, or for a
    trace its replayed requests' mean (output lengths, as everywhere, in decode steps)."""
    if trace:
        return {"kind": "trace", "mean": round(mean_tokens(replayed)), "spread": 0.0, "values": 0}
    return asdict(drawn) | {"values": len(drawn.values)}


def slo_verdict(summary: metrics.Summary, slo: metrics.Slo | None) -> SloVerdict | None:
    """Each target against its p99."""
    if slo is None:
        return None
    met = {}
    for key in ("ttft_s", "tpot_s", "e2e_s"):
        limit = getattr(slo, key)
        if limit is not None:
            p99 = summary.latency(key).p99
            met[key] = p99 is not None and p99 <= limit
    return SloVerdict(
        ttft_s=slo.ttft_s, tpot_s=slo.tpot_s, e2e_s=slo.e2e_s, p99_met=met, met=all(met.values())
    )


def warnings(summary: metrics.Summary, overloaded: bool, offered_rate_per_s: float | None) -> tuple[str, ...]:
    notes = []
    if overloaded:
        rate = offered_rate_per_s
        offered = f" ({rate:.3g}/s)" if rate is not None else ""
        notes.append(
            f"overloaded: requests arrive faster{offered} than the fleet serves them "
            f"({summary.requests_per_s:.3g}/s); the queue and TTFT grow without bound as the run lengthens"
        )
    for key in metrics.LATENCY_KEYS:
        notes += summary.latency(key).warnings
    return tuple(notes)
