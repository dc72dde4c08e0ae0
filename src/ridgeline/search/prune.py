"""The prune stage: what the core's closed forms rule out before anything is simulated.

A point is removed only when its simulation could not keep it, whatever the seed:

- it does not build (TP that does not divide the heads, an fp8 peak the accelerator lacks,
  8-bit maths on weights of another width (engines run W8A8, and W16A16, W8A16, W4A16 in
  bf16), a token budget below the sequence limit, an engine on another vendor's
  accelerators: TensorRT-LLM on an MI300X);
- memory: the memory plan leaves no KV cache (`kvcache.kv_cache` fails), the shared prefix
  fills it, or a request every run surely holds needs more blocks than the cache has (the
  simulation would refuse the run);
- latency: even alone on the replica a request misses a target. A request's TTFT is at least
  its prefill alone (the tokens the prefix cache does not hold, at context 0), plus the
  engine's first-token offset: chunking, other requests' tokens in the step, a longer
  context or a preemption only add to each step. Its TPOT is at least the mean of its decode
  steps alone (`request.decode_time_s`), and its E2E at least TTFT + M x TPOT. With the exact
  requests (a trace) the bound on a p99 is the p99 of the requests' bounds (each request's
  value dominates its bound, so every order statistic does); with drawn lengths it is the
  bound of the least request a draw can give. Under --goodput the bound on attainment is
  the share of requests whose bounds all meet their targets.

The replicas axis, when auto, starts at the fewest replicas whose fluid capacity carries the
rate: a step of T tokens takes at least the core's time for T tokens with no context, and a
replica holds at most min(max_num_seqs, KV tokens / (least prompt + 1)) decoders, so a replica
serves at most min(budget / t(budget) / (prompt + output), B / t_decode(B) / output) requests
a second. That sets which counts the space holds; it removes no point of an explicit list
(a run past that capacity may still meet a target before its queue grows long enough to
miss it: the simulate stage's screen says, prune cannot).

Factored, not point by point: the core is asked once per deployment (model, accelerator,
dtypes, TP/PP/EP, engine: it builds the Deployment and prices its passes, a knob axis in one
call) and its memory plan once per deployment and knob pair (`configurations`); the replica
counts and the prices, which change no step price, are then spread over every point as numpy
arrays (`broadcast`), with no core call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ridgeline import metrics
from ridgeline.architecture import Architecture
from ridgeline.deployment import Deployment
from ridgeline.engines import FORMAT_BITS, EngineProfile, get_engine, stored_format
from ridgeline.errors import RidgelineError
from ridgeline.hardware import Accelerator, get_accelerator
from ridgeline.ledger import Pass
from ridgeline.precision import AUTO_MATHS, BITS, make_precision
from ridgeline.request import decode_time_s
from ridgeline.search.space import AUTO_RUNGS, MAX_REPLICAS, Point, Shape, Space
from ridgeline.simulate.engine import EngineConfig, replica_limits
from ridgeline.simulate.kvcache import KvCache, blocks_for, kv_cache, request_blocks
from ridgeline.simulate.scheduler import whole_prefill_tokens
from ridgeline.simulate.workload import Lengths, Workload, cached_prefix, clip_lengths
from ridgeline.step import decode_step, prefill_step, price

SLACK = 1e-9  # a bound must beat its target by more than rounding before it removes a point


@dataclass(frozen=True)
class Demand:
    """What every run asks of a deployment, known before any run: the requests' lengths
    (exactly, for a trace; the least a draw can give, for drawn lengths)."""

    prompt: Any  # prompt tokens, numpy array
    output: Any  # decode steps M
    new: Any  # prompt tokens computed (the prefix cache holds the rest), at least
    exact: bool  # the arrays are the run's requests, not the least of a draw
    sure_tokens: int  # KV tokens (less the shared prefix) that one request of every run holds
    pinned_blocks: int  # the shared prefix, held once
    prompt_mean: float
    output_mean: float
    new_mean: float


def least(lengths: Lengths) -> int:
    """The least length a draw can give (Lengths.sample rounds and clips to >= 1)."""
    import numpy as np

    if lengths.kind == "fixed":
        return lengths.mean
    if lengths.kind == "uniform":
        return max(1, int(np.rint(lengths.mean * (1 - lengths.spread))))
    if lengths.kind == "file":
        return min(lengths.values)
    return 1  # lognormal


def demand(w: Workload, max_context: int, block_tokens: int) -> Demand:
    """The lengths the runs' requests have, as simulate.workload.make_requests draws them."""
    import numpy as np

    shared_most = w.shared_prefix_tokens // block_tokens * block_tokens
    pinned = w.shared_prefix_tokens // block_tokens
    if w.trace is not None:
        n = len(w.trace.arrival_s) if w.requests is None else min(w.requests, len(w.trace.arrival_s))
        prompt = np.asarray(w.trace.prompt[:n], dtype=np.int64)
        output = np.asarray(w.trace.output[:n], dtype=np.int64)
        hit, shared = (np.asarray(c, dtype=np.int64) for c in cached_prefix(w, prompt.tolist(), block_tokens))
        new = prompt - hit
        return Demand(
            prompt, output, new, True, int(np.max(prompt + output - shared)), pinned,
            float(prompt.mean()), float(output.mean()), float(new.mean()),
        )  # fmt: skip
    upper = w.prompt.upper()
    p_top = max_context - 1 if upper is None else min(upper, max_context - 1)
    p, _ = clip_lengths([least(w.prompt)], [1], max_context)
    m = max(1, min(least(w.output), max_context - p_top))
    if w.shared_prefix_tokens:
        fewest = max(1, p[0] - shared_most)
        new_mean = max(1.0, w.prompt.mean - shared_most)
    else:  # the cache holds at most a share H of each prompt
        fewest = max(1, math.floor(p[0] * (1 - w.prefix_hit_rate)))
        new_mean = max(1.0, w.prompt.mean * (1 - w.prefix_hit_rate))
    return Demand(
        np.array(p, dtype=np.int64), np.array([m], dtype=np.int64), np.array([fewest], dtype=np.int64), False,
        max(1, p[0] + m - shared_most), pinned, float(w.prompt.mean), float(w.output.mean), new_mean,
    )  # fmt: skip


@dataclass(frozen=True)
class Bounds:
    """A deployment's least p99s (or, under --goodput, the most attainment) by closed form."""

    ttft_s: float
    tpot_s: float | None
    e2e_s: float
    attainment: float  # the most share of requests that could meet every target

    def missed(self, slo: metrics.Slo, attainment: float | None) -> str | None:
        """Why no run of this deployment can meet the SLO, or None."""
        if attainment is not None:
            if self.attainment < attainment * (1 - SLACK):
                return (
                    f"at most {self.attainment:.1%} of requests could meet the targets even alone, "
                    f"below --goodput {attainment:g}"
                )
            return None
        for key, value in (("ttft_s", self.ttft_s), ("tpot_s", self.tpot_s), ("e2e_s", self.e2e_s)):
            limit = getattr(slo, key)
            if limit is not None and value is not None and value * (1 - SLACK) > limit:
                name = key.removesuffix("_s").upper()
                return f"p99 {name} alone is at least {value:.3g} s, above the target {limit:g} s"
        return None


def bounds(d: Deployment, dem: Demand, slo: metrics.Slo) -> Bounds:
    """Each request's least TTFT, TPOT and E2E on `d`, reduced to bounds on the verdict."""
    import numpy as np

    ttft = np.asarray(prefill_step(d, dem.new).time_s, dtype=float) + d.ttft_offset_s
    decoding = dem.output >= 1
    if len(dem.prompt) == 1:  # one length: the exact mean of its decode steps
        p, m = int(dem.prompt[0]), int(dem.output[0])
        tpot = np.array([decode_time_s(d, p, m) / m if m >= 1 else 0.0])
    else:  # each request's first decode step, the least of its steps
        tpot = np.asarray(decode_step(d, dem.prompt).time_s, dtype=float) * np.ones(len(dem.prompt))
    e2e = ttft + dem.output * np.where(decoding, tpot, 0.0)

    def p99(values: Any) -> float:
        return float(np.percentile(values, 99)) if dem.exact else float(np.min(values))

    ok = np.ones(len(ttft), dtype=bool)
    for key, values in (("ttft_s", ttft), ("tpot_s", tpot), ("e2e_s", e2e)):
        limit = getattr(slo, key)
        if limit is not None:
            met = values * (1 - SLACK) <= limit
            ok &= met | ~decoding if key == "tpot_s" else met
    share = float(ok.mean()) if dem.exact else float(ok.all())
    return Bounds(
        ttft_s=p99(ttft),
        tpot_s=p99(tpot[decoding]) if decoding.any() else None,
        e2e_s=p99(e2e),
        attainment=share,
    )


# --- the configurations: the core once per deployment, then once per knob pair ------------


@dataclass(frozen=True)
class Config:
    """A configuration that survives: one deployment and one pair of scheduler knobs. Its
    points are its replica counts."""

    shape: Shape
    max_num_seqs: int
    max_num_batched_tokens: int
    gpus: int  # per replica
    price_per_gpu_hour: float
    capacity_per_s: float  # requests a replica serves at most (the fluid bound); nan if unused
    chunked_prefill: bool = True

    @property
    def key(self) -> str:
        """The key of its points, less `|x<replicas>`."""
        p = Point(self.shape, self.max_num_seqs, self.max_num_batched_tokens, 0, self.chunked_prefill)
        return p.key.removesuffix("|x0")


def capacity(d: Deployment, dem: Demand, seqs: Any, budget: Any, kv_tokens: Any) -> Any:
    """Requests a second one replica serves at most, for arrays of knobs (see the module's
    note; the replica's limits: under data-parallel attention, engine.replica_limits): a step
    of T tokens takes at least the core's price of T tokens with no context (and, under
    data-parallel attention, shared evenly over the GPUs), and a replica decodes at most
    min(max_num_seqs, KV tokens / (least prompt + 1)) at once."""
    import numpy as np

    zeros = tuple(0.0 for _ in d.arch.window_groups())
    budget = np.asarray(budget, dtype=float)
    step_s = np.asarray(price(d, Pass(budget, zeros, zeros, 1, d.par.dp_ranks)).time_s, dtype=float)
    p_least = int(dem.prompt.min())
    decoders = (
        np.asarray(seqs) if dem.pinned_blocks else np.minimum(seqs, np.asarray(kv_tokens) // (p_least + 1))
    )
    decoders = np.maximum(decoders, 1)
    decode_s = np.asarray(decode_step(d, p_least, decoders.astype(float)).time_s, dtype=float)
    tokens = max(dem.new_mean + dem.output_mean, 1.0)
    return np.minimum(budget / step_s / tokens, decoders / decode_s / max(dem.output_mean, 1e-9))


@dataclass
class Pruned:
    """What the prune stage removed, and the points left to simulate, cheapest first: arrays
    over the surviving points (`config` indexes `configs`), Points made on first use."""

    points: int = 0
    invalid: int = 0
    memory: int = 0
    latency: int = 0
    configs: list[Config] = field(default_factory=list)
    config: Any = ()  # per surviving point, cheapest first: its configuration
    replicas: Any = ()
    usd_per_hour: Any = ()
    deployments: dict[Shape, Deployment] = field(default_factory=dict)  # the survivors'
    bounds: dict[Shape, Bounds] = field(default_factory=dict)  # the survivors'
    notes: dict[str, str] = field(default_factory=dict)  # the first reason of each kind
    least_ttft_s: float | None = None  # over the deployments that build
    least_tpot_s: float | None = None

    def note(self, kind: str, shape: Shape, why: str) -> None:
        if kind not in self.notes:
            self.notes[kind] = f"{label(shape)}: {why}"

    @cached_property
    def survivors(self) -> list[Point]:
        cs = self.configs
        return [
            Point(c.shape, c.max_num_seqs, c.max_num_batched_tokens, int(r), c.chunked_prefill)
            for c, r in zip((cs[i] for i in self.config.tolist()), self.replicas.tolist(), strict=True)
        ]


def label(s: Shape) -> str:
    """A shape as the report names it: `h100-sxm x2 fp8/fp8/bf16 vllm` (TP, weights/maths/KV)."""
    par = f"x{s.tp}" + (f" pp{s.pp}" if s.pp > 1 else "") + (f" ep{s.ep}" if s.ep > 1 else "")
    par += " dp" if s.dp_attention else ""
    return f"{s.gpu} {par} {s.weights}/{s.maths}/{s.kv_dtype} {s.engine}"


def stored_width(arch: Architecture, weights: str) -> float:
    """The width class of the weights a matmul streams (16, 8 or 4 bits): a dtype's own, or,
    for a model's stored mix, its average's (gpt-oss's MXFP4 experts 4, DeepSeek-V3's FP8 8)."""
    if weights == "file" and arch.file_bytes_per_param is None:
        return 16.0  # no stored mix: building the deployment says so
    return FORMAT_BITS[stored_format(arch, make_precision(weights))]


def build(
    arch: Architecture, shape: Shape, gpus: dict[str, Accelerator], profiles: dict[str, EngineProfile]
) -> Deployment:
    """The shape's deployment, or a RidgelineError saying why it is no configuration."""
    profiles[shape.engine].check_runs_on(gpus[shape.gpu])  # an engine's `runs_on` vendors
    bits = 16.0 if shape.maths == AUTO_MATHS else BITS[shape.maths]  # auto: the engine's own
    if bits < 16 and stored_width(arch, shape.weights) != bits:
        what = "the stored mix of" if shape.weights == "file" else f"{shape.weights}"
        raise RidgelineError(
            f"{shape.maths} maths on {what} weights: an engine computes in {shape.maths} on weights "
            f"of that width (W8A8); wider or narrower weights compute in bf16"
        )
    return Deployment.build(
        arch, gpus[shape.gpu], weights=shape.weights, maths=shape.maths,
        kv_dtype=shape.kv_dtype, tp=shape.tp, pp=shape.pp, ep=shape.ep, dp_attention=shape.dp_attention,
        engine=profiles[shape.engine],
    )  # fmt: skip


def configurations(
    space: Space,
    arch: Architecture,
    dem: Demand,
    slo: metrics.Slo,
    attainment: float | None,
    block_tokens: int = 16,
    gpu_memory_utilization: float = 0.9,
    price_per_gpu_hour: float | None = None,
    gpu_file: str | None = None,
) -> Pruned:
    """The first part of the prune: each deployment built and bounded by the core, once;
    each of its knob pairs checked against the memory plan (once per pair and deployment);
    the replica counts are not looked at yet (`broadcast`)."""
    gpus = {name: get_accelerator(name, gpu_file) for name in space.gpu}
    profiles = {name: get_engine(name) for name in space.engine}
    out = Pruned()
    weight = len(space.replicas) or 1  # a configuration removed under auto counts once
    rooms: dict[tuple[Any, ...], KvCache | str] = {}
    auto = space.auto_replicas
    for shape in space.shapes():
        sched = profiles[shape.engine].scheduler.on(gpus[shape.gpu])
        knobs = list(
            dict.fromkeys(
                (
                    sched.max_num_seqs if s is None else s,
                    sched.max_num_batched_tokens if t is None else t,
                    sched.chunked_prefill if c is None else c,
                )
                for s, t, c in space.knobs()
            )
        )
        try:
            d = build(arch, shape, gpus, profiles)
        except RidgelineError as exc:
            out.invalid += len(knobs) * weight
            out.note("invalid", shape, str(exc))
            continue
        b = bounds(d, dem, slo)
        out.least_ttft_s = b.ttft_s if out.least_ttft_s is None else min(out.least_ttft_s, b.ttft_s)
        if b.tpot_s is not None:
            out.least_tpot_s = b.tpot_s if out.least_tpot_s is None else min(out.least_tpot_s, b.tpot_s)
        missed = b.missed(slo, attainment)
        kept: list[tuple[int, int, int, bool, int, int]] = []  # and the replica's limits
        for seqs, budget, chunked in knobs:
            try:  # the engine's own checks (a token budget below the sequence limit)
                cfg = EngineConfig(
                    seqs, budget, block_tokens, gpu_memory_utilization, True, sched.policy, chunked,
                    dp_limits=sched.dp_limits,
                )  # fmt: skip
                limits = replica_limits(cfg, d.par.dp_ranks)
                if not chunked:
                    check_whole(dem, limits.max_chunk_tokens, sched.policy, budget)
            except RidgelineError as exc:
                out.invalid += weight
                out.note("invalid", shape, str(exc))
                continue
            room = _room(rooms, d, shape, seqs, budget, dem, block_tokens, gpu_memory_utilization)
            if isinstance(room, str):
                out.memory += weight
                out.note("memory", shape, room)
            elif missed is not None:
                out.latency += weight
                out.note("latency", shape, missed)
            else:
                kept.append(
                    (seqs, budget, room.tokens, chunked, limits.max_num_seqs, limits.max_num_batched_tokens)
                )
        if not kept:
            continue
        out.deployments[shape] = d
        out.bounds[shape] = b
        price_per_gpu = d.hw.price_per_hour_usd if price_per_gpu_hour is None else price_per_gpu_hour
        seqs_, budgets, kv_tokens, chunks, replica_seqs, replica_budgets = zip(*kept, strict=True)
        caps = (
            capacity(d, dem, replica_seqs, replica_budgets, kv_tokens).tolist()
            if auto
            else [math.nan] * len(kept)
        )
        out.configs += [
            Config(shape, s, t, d.gpus, price_per_gpu, c, chunked)
            for s, t, c, chunked in zip(seqs_, budgets, caps, chunks, strict=True)
        ]
    return out


def check_whole(dem: Demand, budget: int, policy: str, flag: int | None = None) -> None:
    """With chunked prefill off, the prefill that every run holds (the least a draw gives, or a
    trace's longest) must fit a step whole (`budget`: under data-parallel attention, its GPU's
    share of the --max-num-batched-tokens `flag`), as simulate.run.check_whole_prefills asks of
    each request: its new prompt tokens, and under a policy that recomputes, its output too."""
    import numpy as np

    flag = budget if flag is None else flag
    need = int(np.max(whole_prefill_tokens(policy, dem.new, dem.output)))
    if need > budget:
        what = "its prompt" if need <= int(np.max(dem.new)) else "its prompt and, recomputed, its output"
        share = "" if flag == budget else f" (its GPU's {budget:,} of them)"
        raise RidgelineError(
            f"with chunked prefill off a step must hold a whole prefill: a request of this workload "
            f"needs {need:,} tokens in one step ({what}), more than --max-num-batched-tokens {flag:,}{share}"
        )


def _room(
    rooms: dict[tuple[Any, ...], KvCache | str],
    d: Deployment,
    shape: Shape,
    seqs: int,
    budget: int,
    dem: Demand,
    block_tokens: int,
    gpu_memory_utilization: float,
) -> KvCache | str:
    """The replica's KV cache under these knobs, or why the runs cannot fit in it. The memory
    plan depends on the engine (vLLM's sampler reserve, weights held whole under data-parallel
    attention, experts held repacked), so each deployment has its own."""
    memo = (shape, seqs, budget)
    room = rooms.get(memo)
    if room is None:
        try:
            room = kv_cache(d, block_tokens, gpu_memory_utilization, seqs, budget)
        except RidgelineError as exc:
            room = str(exc)
        if isinstance(room, KvCache):
            ranks = d.par.dp_ranks  # under data-parallel attention a request's cache is on one GPU
            free = request_blocks(room, ranks, dem.pinned_blocks)
            where = "a GPU holds under data-parallel attention" if ranks > 1 else "a replica holds"
            if free <= 0:
                tokens = (free + dem.pinned_blocks) * block_tokens
                room = f"the shared prefix fills the KV cache ({tokens:,} tokens)"
            elif blocks_for(dem.sure_tokens, block_tokens) + room.apart_blocks(dem.sure_tokens) > free:
                room = (
                    f"a request of {dem.sure_tokens:,} tokens needs more KV cache than {where} "
                    f"({free * block_tokens:,} tokens)"
                )
        rooms[memo] = room
    return room


# --- the replica counts and the prices: arrays over every point ----------------------------


def broadcast(out: Pruned, replicas: tuple[int, ...], rate_per_s: float) -> Pruned:
    """The second part: every configuration's replica counts (the list given, or the auto
    rungs from its fewest) and each point's $ per hour, as arrays, sorted cheapest first
    (ties by key). No core call: everything here is arithmetic on the configurations' figures."""
    import numpy as np

    cs = out.configs
    gpus = np.fromiter((c.gpus for c in cs), dtype=np.int64, count=len(cs))
    price_per_gpu = np.fromiter((c.price_per_gpu_hour for c in cs), dtype=float, count=len(cs))
    if replicas:
        counts = np.broadcast_to(np.asarray(replicas, dtype=np.int64), (len(cs), len(replicas)))
        keep = np.ones(counts.shape, dtype=bool)
    else:
        cap = np.fromiter((c.capacity_per_s for c in cs), dtype=float, count=len(cs))
        fewest = np.clip(np.ceil(rate_per_s / cap - 1e-9), 1, MAX_REPLICAS)
        counts = np.minimum(np.ceil(fewest[:, None] * np.asarray(AUTO_RUNGS) - 1e-9), MAX_REPLICAS).astype(
            np.int64
        )
        keep = np.ones(counts.shape, dtype=bool)  # a rung equal to the one below is the same point
        keep[:, 1:] = counts[:, 1:] != counts[:, :-1]
    config = np.broadcast_to(np.arange(len(cs))[:, None], counts.shape)[keep]
    count = counts[keep]
    usd_per_hour = count * gpus[config] * price_per_gpu[config]
    # ties in cost go by key: the configuration's key, then `x<replicas>` as text
    by_key = np.empty(len(cs), dtype=np.int64)
    by_key[sorted(range(len(cs)), key=lambda i: cs[i].key + "|")] = np.arange(len(cs))
    values = np.unique(count)
    as_text = np.empty(len(values), dtype=np.int64)
    as_text[sorted(range(len(values)), key=lambda i: f"x{values[i]}")] = np.arange(len(values))
    order = np.lexsort((as_text[np.searchsorted(values, count)], by_key[config], usd_per_hour))
    out.config, out.replicas, out.usd_per_hour = config[order], count[order], usd_per_hour[order]
    out.points = out.invalid + out.memory + out.latency + len(order)
    out.__dict__.pop("survivors", None)  # made again from the arrays on first use
    return out


def prune(
    space: Space,
    arch: Architecture,
    dem: Demand,
    slo: metrics.Slo,
    attainment: float | None,
    rate_per_s: float,
    block_tokens: int = 16,
    gpu_memory_utilization: float = 0.9,
    price_per_gpu_hour: float | None = None,
    gpu_file: str | None = None,
) -> Pruned:
    """Every point of the space either removed (and counted, with the first reason of each
    kind) or kept for the simulate stage, cheapest first."""
    out = configurations(
        space, arch, dem, slo, attainment, block_tokens, gpu_memory_utilization, price_per_gpu_hour, gpu_file
    )
    return broadcast(out, space.replicas, rate_per_s)
