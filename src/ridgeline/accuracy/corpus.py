"""The corpus of published measurements, each row mapped onto the prediction it checks.

`data/corpus/measurements.csv` holds what the sources printed; `data/corpus/mapping.csv`
says, for each row, the deployment and the kind of quantity (the conventions are in
`data/corpus/README.md`). `predict(row, profile)` asks the core (and, for rows under load,
the simulator) for that quantity in the row's own unit:

    ttft          one prefill of `input` tokens at batch 1 (+ the profile's first-token offset over HTTP)
    pp            llama-bench pp: input / one prefill
    tg            llama-bench tg: output decode steps after a 1-token prompt, tokens/s
    e2e           benchmark_latency: batch prompts prefilled together, then output - 1 decode steps
    gen_speed     output tokens / (one prefill + output - 1 decode steps) at batch 1
    static_tput   batch x output / that e2e (per GPU when the source says so)
    tpot          the median decode step of requests kept `batch` at a time (closed loop)
    ttft_load     the median TTFT of requests kept `batch` at a time (closed loop)
    ttft_rate     the median TTFT of `requests` arriving at `rate` a second (Poisson, open loop)
    tpot_rate     their median TPOT
    e2e_rate      their median E2E latency
    offline_out   every request queued at t = 0: output tokens / makespan (simulated); over
                  HTTP the server's one process hands them to the engine one at a time
                  (EngineProfile.server_s: its work per request, prompt token and streamed token)
    offline_total the same, (input + output) tokens / makespan
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from ridgeline import _files
from ridgeline.deployment import Deployment
from ridgeline.engines import (
    FIRST_TOKEN,
    FIRST_TOKEN_FULL_SHARE,
    LOAD,
    PREFILL,
    SERVER,
    SERVER_FULL_SHARE,
    EngineProfile,
)
from ridgeline.errors import RidgelineError
from ridgeline.models import get_model
from ridgeline.request import decode_time_s
from ridgeline.step import prefill_step

if TYPE_CHECKING:  # the simulator is imported where a row needs it, not with the corpus
    from ridgeline.simulate.engine import EngineConfig
    from ridgeline.simulate.workload import Lengths

RATE_KINDS = ("ttft_rate", "tpot_rate", "e2e_rate")  # open-loop runs at a rate
KINDS = (
    "ttft", "pp", "tg", "e2e", "gen_speed", "static_tput", "tpot", "ttft_load", *RATE_KINDS,
    "offline_out", "offline_total",
)  # fmt: skip
# the kinds whose quantity holds the first token's arrival: over HTTP, the profile's
# first_token_s is in them (once)
FIRST_TOKEN_KINDS = ("ttft", "ttft_load", "ttft_rate", "e2e_rate")
REGIME = {  # which error band a kind's prediction belongs to
    "ttft": "prefill", "pp": "prefill", "ttft_load": "prefill",
    "tg": "decode", "e2e": "decode", "gen_speed": "decode", "tpot": "decode", "static_tput": "load",
    "offline_out": "load", "offline_total": "load",
    # an open-loop run's medians wait in its queues and batches: the simulator's regime
    **dict.fromkeys(RATE_KINDS, "load"),
}  # fmt: skip
# Rows kept in the corpus (the source printed them) but left out of fits and checks, and why.
EXCLUDED = {
    "F08": "SGLang's default flags ran gpt-oss-20b 3x slower than vLLM on the same H100, and "
    "17x on A100: a misconfigured run, not the engine",
    "N16": "SGLang's default flags ran gpt-oss-120b 3.4x slower than vLLM on the same H100: as F08",
    "N17": "and 6.9x slower on the A100: as F08",
    "N15": "TensorRT-LLM 1.0's default MoE backend on Hopper (CUTLASS), whose MXFP4 support its "
    "gpt-oss guide then called still ongoing, telling Hopper users to set TRITON (its pull request "
    "7101), ran gpt-oss-120b 2.8x slower than vLLM on the same H100: a kernel path its later "
    "releases replaced (TRITON, Hopper's default in its 1.4 guide), not the engine as it runs now",
    "F15": "vLLM 0.11's median TTFT on Qwen3-8B at concurrency 4, 60 ms, more than three times what "
    "the same releases' gpt-oss runs (N07, N14), vLLM 0.22's (Q01-Q05) and the same lab's SGLang "
    "(F14) say of a server's first token: its server's one process stalled on each new request (the "
    "run's P99 inter-token latency 41 ms against a median of 7.4), as the check pages' 128-token "
    "prompts on 0.11 show for every Hugging Face chat template (7-20 ms a request) and vLLM's tracker "
    "for those releases (Hub calls on every request, vllm-project/vllm#25846); left in, it alone set "
    "the engine's first-token cost, and every other vLLM TTFT read slow held out (Q01 +65%): a cost "
    "of a release's request path, not the engine as it runs now",
    "X26": "the A40's 70B prompts ran faster the longer they were (209 tokens/s at 512, 291 at 8,192), "
    "where every other run in the table slows: not the steady state a llama-bench row measures",
    "X25": "the same run's generation sped up with length too (11.60 tokens/s over 512, 12.08 over 1,024)",
    "X30": "the L40S's F16 prompts ran faster the longer they were (2,254 tokens/s at 512, 3,312 at 8,192) "
    "and at a third of its Q4_K_M rate: as X26",
    "X42": "the A100 SXM's F16 prompts, at a tenth of the A100 PCIe's (604 against 7,741 tokens/s) and "
    "rising with length: as X26",
}
# Sources kept as independent checks: predicted with the fitted profiles, never fitted, and why.
CHECKS = {
    "GPUStack Qwen3 dense": "fitted, it made the other sources' held-out error worse (11.5% to 12.0% "
    "over their 141 rows) and moved vLLM's bf16 matmul rate from 0.77 to 0.59: its H100 runs the "
    "compute-bound Qwen3-14B cases 1.7-1.9x as fast as its A100, whose measured matmul rates are "
    "2.9x apart",
    "GPUStack DeepSeek-R1": "fitted, it made the other sources' held-out error worse (10.2% to 11.7% "
    "over their 155 rows; vLLM's own 9.8% to 12.5%): the only rows of a model with latent "
    "attention, 256 routed experts and block-scaled fp8, whose vLLM runs read 2x slower at "
    "concurrency 4 and 1.4-1.5x slower on 2K and 4K prompts than the physics the rest agree on",
    "GPUStack Qwen3 MoE": "fitted, it made the other sources' held-out error worse (10.2% to 11.4% "
    "over their 155 rows; vLLM's own 9.8% to 11.4%, its gpt-oss rows up to 47% off held out): its A100 "
    "node runs the MoE's prefill-heavy cases at 16-17% of the dense bf16 peak, 2.6-3.4x slower "
    "than its H100 node, where the profiles, from the rest, put the two 1.5-2.3x apart",
    "GPUStack GLM MoE": "never fitted: GLM-4.5-Air and GLM-4.6, a model family no fitted source "
    "has, kept unseen to check the profiles on it",
    "vLLM 0.6.0 in SGLang's benchmark": "never fitted: vLLM 0.6.0's V0 engine under multi-step "
    "scheduling (--num-scheduler-steps 10), which no fitted source ran, kept unseen to check the "
    "simulator's multi-step runs on the vLLM profile fitted to later releases",
}
MAX_SIMULATED_REQUESTS = 4000  # an offline run's throughput settles long before 30,000 requests


@dataclass(frozen=True)
class Row:
    id: str
    group: str  # the source, for leave-one-source-out
    engine: str
    kind: str
    model: str
    gpu: str
    tp: int
    ep: int  # expert-parallel GPUs (1: the experts split by TP)
    weights: str
    maths: str
    kv: str
    input: int
    output: int
    batch: int
    rate: float | None  # requests a second of an open-loop (Poisson) run
    requests: int
    max_num_seqs: int | None
    max_num_batched_tokens: int | None
    policy: str | None
    http: bool
    front_end: str  # over HTTP behind another server than the engine's own ("nim"), else ""
    per_gpu: bool
    lengths: str  # how the requests' lengths spread around the means (fixed when empty)
    graphs: int | None  # the largest decode batch the run captured as a CUDA graph (None: the profile's)
    cache: bool | None  # the engine's prefix cache on or off (None: the profile's)
    overlap: bool | None  # the engine's overlapped scheduling on or off (None: the profile's)
    steps: int | None  # decode steps a scheduling ran (vLLM 0.6's multi-step; None: the profile's)
    measured: float
    unit: str
    dp_attention: bool = False  # attention data-parallel over the TP GPUs (no corpus row yet)

    @property
    def regime(self) -> str:
        return REGIME[self.kind]


ON_OFF = {"": None, "on": True, "off": False}  # a column that sets one of the profile's switches


def _int(text: str, default: int = 0) -> int:
    return int(text) if text else default


def rows() -> tuple[Row, ...]:
    """The rows the profiles are fitted to and checked on."""
    return tuple(r for r in _mapped() if r.group not in CHECKS and r.id not in EXCLUDED)


def check_rows() -> tuple[Row, ...]:
    """The rows of the sources kept as independent checks (CHECKS)."""
    return tuple(r for r in _mapped() if r.group in CHECKS and r.id not in EXCLUDED)


def excluded_rows() -> tuple[Row, ...]:
    """The rows left out of fits and checks (EXCLUDED), as mapped: a run's workload that a
    check of another quantity (its P99 ITL) still replays."""
    return tuple(r for r in _mapped() if r.id in EXCLUDED)


@lru_cache(maxsize=1)
def _mapped() -> tuple[Row, ...]:
    text = _files.package_text("corpus", "mapping.csv")
    out = []
    for r in csv.DictReader(text.splitlines()):
        out.append(
            Row(
                id=r["id"],
                group=r["group"],
                engine=r["engine"],
                kind=r["kind"],
                model=r["model"],
                gpu=r["gpu"],
                tp=_int(r["tp"], 1),
                ep=_int(r["ep"], 1),
                weights=r["weights"],
                maths=r["maths"],
                kv=r["kv"],
                input=_int(r["input"]),
                output=_int(r["output"]),
                batch=_int(r["batch"], 1),
                rate=float(r["rate"]) if r["rate"] else None,
                requests=_int(r["requests"]),
                max_num_seqs=_int(r["max_num_seqs"]) or None,
                max_num_batched_tokens=_int(r["max_num_batched_tokens"]) or None,
                policy=r["policy"] or None,
                http=bool(r["http"]),
                front_end="" if r["http"] in ("", "1") else r["http"],
                per_gpu=bool(r["per_gpu"]),
                lengths=r["lengths"] or "fixed",
                graphs=int(r["graphs"]) if r["graphs"] else None,
                cache=ON_OFF[r["cache"]],
                overlap=ON_OFF[r["overlap"]],
                steps=int(r["steps"]) if r["steps"] else None,
                measured=float(r["measured"]),
                unit=r["unit"],
            )
        )
    return tuple(out)


PRIORS = "data/corpus/priors.toml"  # where the priors are, as messages name it


@lru_cache(maxsize=1)
def priors() -> dict[str, EngineProfile]:
    """The engine profiles' physical priors (data/corpus/priors.toml): where a fit starts,
    and what a parameter no row moves stays at."""
    from ridgeline.engines import profile_from_entry

    return {name: profile_from_entry(name, entry, PRIORS) for name, entry in _priors_toml().items()}


@lru_cache(maxsize=1)
def _priors_toml() -> dict[str, Any]:
    return _files.parse(_files.package_text("corpus", "priors.toml"), PRIORS)


def band_pools() -> dict[str, str]:
    """Each engine's kind (priors.toml's band_pool), whose rows its band pools where it has
    too few of its own in a regime (fit.bands)."""
    return {name: str(entry.get("band_pool", name)) for name, entry in _priors_toml().items()}


# A GGUF file that mixes block types (Q4_K_M: Q4_K with Q6_K where it matters most), given
# as its bits per weight over the whole model, its stated size over its parameters: gguf-4.90
GGUF_MIX = "gguf-"
# Weight formats that quantise only part of a model: the bytes per weight of the whole.
MIXED = {
    "int4-g128-bf16-embed": (4.0 + 16.0 / 128 + 4.0 / 128, "linear"),  # AWQ/GPTQ: scale + zero per 128
    "int8-g128-bf16-embed": (8.0 + 16.0 / 128 + 8.0 / 128, "linear"),
    "mxfp4-experts": (4.25, "experts"),  # MXFP4 on the routed experts only
}


def deployment(row: Row, profile: EngineProfile | None) -> Deployment:
    """The row's deployment, in process: its TTFT is the engine's own, and `predict` adds the
    server's first-token cost (`first_token_s`) for a row that ran over HTTP."""
    if profile is not None and row.graphs is not None:  # the run captured other graphs than the profile's
        profile = replace(profile, graph_max_seqs=row.graphs)
    if profile is not None and row.overlap is not None and row.overlap != profile.scheduler.overlap:
        profile = with_overlap(profile, row.overlap)
    arch = get_model(row.model)
    weights = row.weights
    if weights in MIXED:
        arch = replace(arch, file_bytes_per_param=arch.mixed_bytes_per_param(*MIXED[weights]))
        weights = "file"
    elif weights.startswith(GGUF_MIX):  # a GGUF file's mix of types: its size over its weights
        arch = replace(arch, file_bytes_per_param=float(weights.removeprefix(GGUF_MIX)) / 8.0)
        weights = "file"
    return Deployment.build(
        arch, row.gpu, weights=weights, maths=row.maths, kv_dtype=row.kv, tp=row.tp, ep=row.ep,
        dp_attention=row.dp_attention, engine=profile, in_process=True,
    )  # fmt: skip


def with_overlap(profile: EngineProfile, overlap: bool) -> EngineProfile:
    """The profile as a run with its scheduling overlapped or not: without, the host's work a
    step (host_step_s) adds to the step. The host's work a sequence (host_sequence_s) is
    TensorRT-LLM's PyTorch runtime's, which overlaps; a run without overlap ran another
    runtime (TensorRT-LLM's C++ one, before 1.0; vLLM before 0.12), whose work a sequence
    is in per_sequence_s."""
    scheduler = replace(profile.scheduler, overlap=overlap)
    return replace(profile, scheduler=scheduler, host_sequence_s=profile.host_sequence_s if overlap else 0.0)


def predict(row: Row, profile: EngineProfile | None, d: Deployment | None = None) -> float:
    """The row's quantity, predicted, in the row's unit."""
    d = d or deployment(row, profile)
    http_s = first_token_s(row, d) if row.http and row.kind in FIRST_TOKEN_KINDS else 0.0
    k = row.kind
    if k in ("ttft", "pp"):
        prefill_s = float(prefill_step(d, row.input, 1).time_s)
        return row.input / prefill_s if k == "pp" else _unit(prefill_s + http_s, row.unit)
    if k == "tg":
        return row.output / decode_time_s(d, 1, row.output, 1)
    if k in ("e2e", "gen_speed", "static_tput"):
        b = row.batch
        e2e = float(prefill_step(d, row.input, b).time_s) + decode_time_s(d, row.input, row.output - 1, b)
        if k == "e2e":
            return _unit(e2e, row.unit)
        if k == "gen_speed":
            return row.output / e2e
        return b * row.output / e2e / (row.tp if row.per_gpu else 1)
    summary = simulated(row, d)
    if k in ("tpot", "tpot_rate"):
        return _unit(summary["tpot_p50"], row.unit)
    if k in ("ttft_load", "ttft_rate"):
        return _unit(summary["ttft_p50"] + http_s, row.unit)
    if k == "e2e_rate":
        return _unit(summary["e2e_p50"] + http_s, row.unit)
    tokens = summary["output_tokens"] + (summary["prompt_tokens"] if k == "offline_total" else 0)
    return tokens / summary["makespan_s"]


def first_token_s(row: Row, d: Deployment) -> float:
    """The first token's extra cost over HTTP behind the row's front end: the engine's, or
    without one its preset's or calibration's offset (the row's deployment, built in process,
    pays none itself)."""
    return d.engine.first_token_behind(row.front_end) if d.engine is not None else d.eff.ttft_offset_s


def _unit(seconds: float, unit: str) -> float:
    return seconds * 1e3 if unit == "ms" else seconds


def first_token_share(row: Row, profile: EngineProfile | None, predicted: float) -> float:
    """The share of a TTFT row's prediction that is not its prompt's pass alone (the prompt
    prefilled by itself, in process): the server's first-token cost, and under load the
    wait behind running steps and the steps it shares with them. 0 for every other row
    (prompt processing's tokens a second is the pass)."""
    if row.regime != PREFILL or row.kind == "pp":
        return 0.0
    pass_s = float(prefill_step(deployment(row, profile), row.input, 1).time_s)
    return min(max(1.0 - _unit(pass_s, row.unit) / predicted, 0.0), 1.0)


def server_share(row: Row, profile: EngineProfile | None, predicted: float) -> float:
    """The share of a run under load its API server is busy, as predicted
    (EngineProfile.server_share): an open-loop run's requests arrive at its rate, and every
    other run's pass at the rate its predicted throughput serves them. 0 for a run in the
    engine's own process, and for every row not under load."""
    if row.regime != LOAD or not row.http or profile is None:
        return 0.0
    if row.kind in RATE_KINDS:
        per_s = row.rate or 0.0
    else:  # tokens a second over the tokens of a request
        per_s = predicted / (row.output + (row.input if row.kind == "offline_total" else 0))
    return profile.server_share(per_s, row.input, row.output)


def band_regime(row: Row, first_token_share: float, server_share: float = 0.0) -> str:
    """Which band a held-out row's slowdown joins: a TTFT whose band leans to the server's
    (engines.ttft_band: half FIRST_TOKEN_FULL_SHARE of it or more not its prompt's pass),
    the first-token band; a run under load whose server is busy half SERVER_FULL_SHARE of
    it or more (engines.load_band), the server band; every other row its regime's."""
    if row.regime == PREFILL and first_token_share >= FIRST_TOKEN_FULL_SHARE / 2:
        return FIRST_TOKEN
    if row.regime == LOAD and server_share >= SERVER_FULL_SHARE / 2:
        return SERVER
    return row.regime


def simulated(row: Row, d: Deployment) -> dict[str, Any]:
    """The row's workload run through the simulator on `d`, summarised: TTFT's and TPOT's
    median and mean, E2E's median, ITL's mean and p99, the makespan and the tokens. TTFT and
    E2E are the engine's own, as in its process (a deployment built otherwise is taken so):
    `predict` adds the server's first-token cost for a row over HTTP."""
    from ridgeline.simulate import Workload, simulate
    from ridgeline.simulate.run import engine_config

    if not d.in_process:
        d = replace(d, in_process=True)

    cfg = engine_config(
        d,
        row.max_num_seqs,
        row.max_num_batched_tokens,
        policy=row.policy,
        prefix_caching=row.cache,
        overlap=row.overlap,
        # multi-step scheduling ran whole prefills (vLLM 0.6 refused it with chunked prefill)
        chunked_prefill=False if row.steps and row.steps > 1 else None,
        num_scheduler_steps=row.steps,
    )
    seqs = cfg.max_num_seqs
    if cfg.max_num_batched_tokens < seqs:  # vLLM requires a budget of at least one token a sequence
        cfg = replace(cfg, max_num_batched_tokens=seqs)
    prompt, output = lengths(row.lengths, row.input), lengths(row.lengths, max(row.output - 1, 1))
    cfg = replace(cfg, gpu_memory_utilization=proven_utilization(d, cfg, _upper(prompt) + _upper(output)))
    if row.kind in ("tpot", "ttft_load"):
        n = max(row.requests, 4 * row.batch)
        w = Workload(prompt=prompt, output=output, concurrency=row.batch, requests=n, rate_per_s=None)
    elif row.kind in RATE_KINDS:  # arriving as a Poisson process
        if row.rate is None or not row.rate > 0:
            raise RidgelineError(f"corpus row {row.id}: an open-loop row needs a rate above zero")
        n = row.requests
        w = Workload(prompt=prompt, output=output, rate_per_s=row.rate, requests=n, duration_s=None)
    else:  # every request queued at t = 0; over HTTP the server hands them on one at a time
        n = min(row.requests, max(MAX_SIMULATED_REQUESTS, 3 * seqs))
        each_s = d.engine.server_s(1, row.input, row.output) if row.http and d.engine is not None else 0.0
        rate = min(1.0 / each_s, 1e6) if each_s > 0 else 1e6
        w = Workload(
            prompt=prompt, output=output, arrival="constant", rate_per_s=rate, requests=n, duration_s=None
        )
    result = simulate(d, w, engine=cfg, band=False)  # the row's own prediction: no band
    s = result.summary
    assert s is not None  # simulate() summarizes unless told not to
    recs = result.records
    makespan = max(r["arrival_s"] + r["e2e_s"] for r in recs) - min(r["arrival_s"] for r in recs)
    return {
        "tpot_p50": s.tpot_s.p50,
        "tpot_mean": s.tpot_s.mean,
        "ttft_p50": s.ttft_s.p50,
        "ttft_mean": s.ttft_s.mean,
        "e2e_p50": s.e2e_s.p50,
        "itl_mean": s.itl_s.mean,
        "itl_p99": s.itl_s.p99,
        "requests": len(result.records),
        "makespan_s": makespan,
        "output_tokens": sum(r["output_tokens"] for r in recs),
        "prompt_tokens": sum(r["prompt_tokens"] for r in recs),
    }


def proven_utilization(d: Deployment, cfg: EngineConfig, longest: int) -> float:
    """The share of memory a run's KV cache had at least: a run that served a request of
    `longest` tokens proves its cache held one. Where the memory plan leaves less (vLLM 0.11
    served 32,000-token prompts of Qwen3-32B on one H100, where the plan's reserve for
    sampling 1,024 sequences leaves 20,192 tokens), the row is simulated with the share of
    memory that holds it."""
    from ridgeline.simulate.kvcache import blocks_for, kv_cache, request_blocks

    u = cfg.gpu_memory_utilization
    kv = kv_cache(d, cfg.block_tokens, u, cfg.max_num_seqs, cfg.max_num_batched_tokens)
    need = blocks_for(longest, kv.block_tokens) + kv.apart_blocks(longest)
    ranks = d.par.dp_ranks  # under data-parallel attention the request sat on one GPU's cache
    if need <= request_blocks(kv, ranks, 0):
        return float(u)
    short_bytes = need * ranks * kv.block_tokens * kv.bytes_per_token_per_gpu - kv.room_bytes_per_gpu
    return float(u + (short_bytes + 1.0) / d.hw.memory_bytes)  # a byte over, against rounding


def _upper(spread: Lengths) -> int:
    """The longest length a spread draws (its mean for one without a longest)."""
    upper = spread.upper()
    return upper if upper is not None else spread.mean


SHAREGPT_SIGMA = 1.0  # ShareGPT's prompt and reply lengths: heavy-tailed, lognormal about their means
SHAREGPT_LONGEST = 2048  # vLLM's benchmark drops conversations longer than this
QUANTILES = 1000


def lengths(spec: str, mean: int) -> Any:
    """The requests' lengths about `mean`: `fixed`, `uniform:W` (SGLang's random dataset at
    range ratio 0 draws uniformly from 1 to twice the mean), or `sharegpt`: lognormal with
    sigma SHAREGPT_SIGMA, cut at SHAREGPT_LONGEST and scaled back to the mean, as the
    quantiles of that distribution."""
    from statistics import NormalDist

    from ridgeline.simulate.workload import Lengths, parse_lengths

    if spec != "sharegpt":
        return parse_lengths(spec, mean, "lengths")
    z = [NormalDist().inv_cdf((i + 0.5) / QUANTILES) for i in range(QUANTILES)]
    mu = math.log(mean) - SHAREGPT_SIGMA**2 / 2
    raw = [min(math.exp(mu + SHAREGPT_SIGMA * x), SHAREGPT_LONGEST) for x in z]
    scale = mean / (sum(raw) / len(raw))
    values = tuple(max(1, min(round(v * scale), SHAREGPT_LONGEST)) for v in raw)
    return Lengths("file", mean, 0.0, values)


def error(row: Row, predicted: float) -> float:
    """Signed relative error, predicted / measured - 1."""
    return predicted / row.measured - 1.0


def time_ratio(row: Row, log_error: float) -> float:
    """log(measured time / predicted time) from log(predicted / measured) of the row's
    quantity: a rate's error turns over."""
    return log_error if is_rate(row) else -log_error


SLOWDOWN_RANGE = (0.1, 10.0)  # the slowdowns `slowdown` looks within: a row beyond is as far as either end
SLOWDOWN_STEP = 1.25  # how far past its time ratio it looks at first for an open-loop row
SLOWDOWN_WIDTH = 0.01  # in log units: the slowdown is found to within 1%


def slowdown(row: Row, profile: EngineProfile, predicted: float | None = None) -> float:
    """How many times as slow the profile's engine must be (Deployment.slowed: every step and
    first token that many times as long) to predict what the row measured: what a band of
    the engine's speed is made of. For a row whose every time scales with the engine's, it is
    measured / predicted time. An open-loop run's queue magnifies a slower engine's steps
    (near its capacity an engine 10% slower may double the median latency), so for one of
    those the row is predicted again on slowed engines: from 1 (`predicted`, where it is
    known) and the time ratio outwards until the measured value lies between two slowdowns,
    then halving that interval (a median jumps as requests cross step boundaries, so only a
    bracket is sure) until it is SLOWDOWN_WIDTH wide."""
    predicted = predict(row, profile) if predicted is None else predicted
    ratio = math.log(predicted / row.measured)
    guess = time_ratio(row, ratio)
    if row.kind not in RATE_KINDS:
        return math.exp(guess)
    d = deployment(row, profile)
    lo, hi = (math.log(x) for x in SLOWDOWN_RANGE)

    def slow(x: float) -> bool:  # whether the engine slowed e^x times predicts the row slower
        return predict(row, profile, d.slowed(math.exp(x))) > row.measured

    below, above = (0.0, None) if guess > 0 else (None, 0.0)  # whether 1 is known fast or slow
    x = min(max(guess, lo), hi)
    step = math.log(SLOWDOWN_STEP)
    while below is None or above is None:
        if slow(x):
            above = x
            x = max(x - step, lo) if below is None else x
        else:
            below = x
            x = min(x + step, hi) if above is None else x
        step *= 2
        if (below is None and above == lo) or (above is None and below == hi):
            return math.exp(lo if below is None else hi)
    while above - below > SLOWDOWN_WIDTH:
        mid = (above + below) / 2
        if slow(mid):
            above = mid
        else:
            below = mid
    return math.exp((above + below) / 2)


def is_rate(row: Row) -> bool:
    """Tokens a second (larger is faster), or a time (smaller is faster)."""
    return row.unit.startswith("tok/s")


def optimistic(row: Row, predicted: float) -> bool:
    """Whether the prediction is a faster system than was measured."""
    return predicted > row.measured if is_rate(row) else predicted < row.measured
