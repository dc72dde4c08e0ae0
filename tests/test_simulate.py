"""The serving simulator against the core and against queueing theory.

"One request alone in the simulator reproduces the core's request timeline step for step";
"B identical requests arriving together decode at the core's batch-B step time"; jumping
over runs of decode steps gives the stepped timeline; Little's law; overload; preemption.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
from typing import Any

import numpy as np
import pytest

from ridgeline import ledger, metrics, request, roofline
from ridgeline.calibration import Calibration
from ridgeline.deployment import Deployment
from ridgeline.errors import RidgelineError
from ridgeline.simulate import EngineConfig, Lengths, Trace, Workload, simulate
from ridgeline.simulate.engine import Engine
from ridgeline.simulate.kvcache import kv_cache
from ridgeline.simulate.requests import DECODE
from ridgeline.simulate.run import Result, hold_apart
from ridgeline.simulate.steptime import DecodeRun, StepModel
from ridgeline.simulate.workload import make_requests

REL = 1e-9


def fixed(prompt: int, output: int, **kw: Any) -> Workload:
    return Workload(prompt=Lengths("fixed", prompt), output=Lengths("fixed", output), duration_s=None, **kw)


def together(batch: int, prompt: int, output: int) -> Workload:
    """`batch` identical requests, all arriving at time 0."""
    trace = Trace((0.0,) * batch, (prompt,) * batch, (output,) * batch)
    return Workload(trace=trace, duration_s=None)


def steps_s(res: Result) -> list[float]:
    return list(res.engines[0].trace.dt_s)


def lognormal(rate: float, requests: int, seed: int = 0) -> Workload:
    return Workload(
        prompt=Lengths("lognormal", 1000, 0.5),
        output=Lengths("lognormal", 250, 0.5),
        rate_per_s=rate,
        requests=requests,
        duration_s=None,
        seed=seed,
    )


DEPLOYMENTS = {
    "lesson": Deployment.build(),
    "calibrated": Deployment.build(
        calibration=Calibration(4.0e14, 2.5e12, step_overhead_s=4e-4, ttft_offset_s=0.03)
    ),
    "tp2": Deployment.build(model="llama-3.1-70b", tp=2, gpu="h200"),
    "moe": Deployment.build(model="qwen3-30b-a3b"),
    "sliding-window": Deployment.build(model="gemma-2-9b"),
}


@pytest.mark.parametrize("name", DEPLOYMENTS)
def test_one_request_alone_reproduces_the_core_timeline_step_for_step(name: str) -> None:
    """TTFT is the prefill pass; decode step i is a pass at context prompt + i; total is
    TTFT plus every step (the calibration's TTFT offset included)."""
    m = DEPLOYMENTS[name]
    prompt, output = 2000, 300
    res = simulate(m, workload=fixed(prompt, output, requests=1), engine=EngineConfig(jump=False))
    steps = steps_s(res)
    assert len(steps) == 1 + output
    assert steps[0] == pytest.approx(float(request.prefill_step(m, prompt).time_s), rel=REL)
    for i in range(output):
        assert steps[1 + i] == pytest.approx(float(request.decode_step(m, prompt + i).time_s), rel=REL)
    core = request.request_timeline(m, prompt, output)
    rec = res.records[0]
    assert rec["ttft_s"] == pytest.approx(core.ttft_s, rel=REL)
    assert rec["e2e_s"] == pytest.approx(core.total_s, rel=REL)
    assert rec["tpot_s"] == pytest.approx(core.tpot_s, rel=REL)
    assert rec["output_tokens"] == output + 1  # the prefill emits the first token
    jumped = simulate(m, workload=fixed(prompt, output, requests=1)).records[0]
    assert jumped["e2e_s"] == pytest.approx(core.total_s, rel=REL)


@pytest.mark.parametrize("batch", [2, 16, 64])
def test_identical_requests_together_decode_at_the_core_batch_step(batch: int) -> None:
    """With a budget of at least B x N tokens the B prefills are one pass, and then every
    decode step is the core's batch-B step at context N + i."""
    m = Deployment.build()
    prompt, output = 1000, 120
    cfg = EngineConfig(max_num_batched_tokens=batch * prompt, jump=False)
    res = simulate(m, workload=together(batch, prompt, output), engine=cfg)
    steps = steps_s(res)
    assert len(steps) == 1 + output
    assert steps[0] == pytest.approx(float(request.prefill_step(m, prompt, batch).time_s), rel=REL)
    for i in range(output):
        assert steps[1 + i] == pytest.approx(float(request.decode_step(m, prompt + i, batch).time_s), rel=REL)
    core = request.request_timeline(m, prompt, output, batch)
    for rec in res.records:
        assert rec["e2e_s"] == pytest.approx(core.total_s, rel=REL)


def test_step_model_is_the_core_on_mixed_batches() -> None:
    """Any mixture of tokens, attended pairs and cached tokens: the engine's step time is
    ledger.work_from_totals + roofline.time_work."""
    rng = random.Random(7)
    for d in DEPLOYMENTS.values():
        m = d
        model = StepModel(m)
        assert model.exact
        groups = m.arch.window_groups()
        for _ in range(50):
            tokens = rng.randint(1, 8192)
            pairs = [rng.uniform(0, 5e7) for _ in groups]
            cached = [rng.uniform(0, 5e6) for _ in groups]
            work = ledger.work_from_totals(
                m.arch,
                m.prec,
                tokens,
                [(n, p) for (n, _), p in zip(groups, pairs, strict=True)],
                [(n, c) for (n, _), c in zip(groups, cached, strict=True)],
            )
            want = float(roofline.time_work(work, m).time_s)
            assert model.time_s(tokens, pairs, cached) == pytest.approx(want, rel=1e-12)


def test_closed_form_run_sums_the_steps() -> None:
    """sum_j max(ac + bc j, am + bm j) + f, across the crossing of the two lines."""
    run = DecodeRun(0.010, 2e-5, 0.012, 1e-5, 3e-4)  # compute overtakes memory at j = 200
    steps = [max(0.010 + 2e-5 * j, 0.012 + 1e-5 * j) + 3e-4 for j in range(1000)]
    for k in (1, 2, 150, 200, 201, 999, 1000):
        assert run.elapsed_s(k) == pytest.approx(math.fsum(steps[:k]), rel=1e-12)
    cumulative = np.cumsum(steps)
    for delta in (0.001, 0.0103, 1.0, 7.5, 15.0):
        want = int(np.searchsorted(cumulative, delta)) + 1  # least k with sum of k steps >= delta
        assert run.steps_before(delta, 1000) == min(want, 1000)


@pytest.mark.parametrize(
    "workload",
    [
        lognormal(15, 2000),
        lognormal(40, 1500),  # overloaded: the queue blocks and runs end at completions
        Workload(
            prompt=Lengths("lognormal", 1000, 0.5),
            output=Lengths("uniform", 200),
            rate_per_s=10,
            requests=1000,
            duration_s=None,
            prefix_hit_rate=0.5,
        ),
        Workload(
            prompt=Lengths("fixed", 4000),
            output=Lengths("fixed", 1500),
            concurrency=48,
            requests=300,
            duration_s=None,
        ),  # preempts
    ],
    ids=["steady", "overloaded", "prefix-cache", "preempting"],
)
@pytest.mark.parametrize("engine", [None, "vllm"])  # vLLM's profile: the matmuls and attention apart
def test_jumping_gives_the_stepping_timeline(workload: Workload, engine: str | None) -> None:
    m = Deployment.build(engine=engine)
    jumped = simulate(m, workload=workload, engine=EngineConfig(gpu_memory_utilization=0.35))
    stepped = simulate(m, workload=workload, engine=EngineConfig(gpu_memory_utilization=0.35, jump=False))
    assert sum(jumped.engines[0].trace.steps) == sum(stepped.engines[0].trace.steps)
    assert len(jumped.engines[0].trace.steps) < len(stepped.engines[0].trace.steps)
    for key in ("arrival_s", "admit_s", "first_s", "finish_s"):
        a, b = np.asarray(getattr(jumped.reqs, key)), np.asarray(getattr(stepped.reqs, key))
        np.testing.assert_allclose(a, b, rtol=REL)
    assert jumped.reqs.preemptions == stepped.reqs.preemptions


SHORT_AND_LONG = Workload(  # prompts on both sides of gpt-oss's 128-token window
    prompt=Lengths("lognormal", 120, 0.8),
    output=Lengths("uniform", 300),
    rate_per_s=40,
    requests=400,
    duration_s=None,
)


@pytest.mark.parametrize(
    "workload",
    [SHORT_AND_LONG, dataclasses.replace(SHORT_AND_LONG, rate_per_s=None, concurrency=256)],
    ids=["open", "closed"],
)
@pytest.mark.parametrize("engine", [None, "vllm"])
def test_a_sliding_window_model_jumps_to_the_stepping_timeline(
    workload: Workload, engine: str | None
) -> None:
    """gpt-oss-20b's sliding layers bend each decoder's terms at context 128: a run of
    decode steps ends where a decoder comes of age, and the jumped timeline is the stepped one."""
    m = Deployment.build(model="gpt-oss-20b", gpu="h100-sxm", weights="fp4", engine=engine)
    cfg = EngineConfig(gpu_memory_utilization=0.9)
    jumped = simulate(m, workload=workload, engine=cfg)
    stepped = simulate(m, workload=workload, engine=dataclasses.replace(cfg, jump=False))
    assert sum(jumped.engines[0].trace.steps) == sum(stepped.engines[0].trace.steps)
    assert len(jumped.engines[0].trace.steps) < len(stepped.engines[0].trace.steps)
    for key in ("arrival_s", "admit_s", "first_s", "finish_s"):
        a, b = np.asarray(getattr(jumped.reqs, key)), np.asarray(getattr(stepped.reqs, key))
        np.testing.assert_allclose(a, b, rtol=REL)


def test_a_windows_totals_are_the_sum_over_its_decoders() -> None:
    """Mid-run, each window group's attended pairs and cached tokens are the ledger's
    per-decoder terms summed over the decoders' contexts (step - base)."""
    m = Deployment.build(model="gpt-oss-20b", gpu="h100-sxm", weights="fp4")
    kv = kv_cache(m)
    reqs = make_requests(SHORT_AND_LONG, m.arch.max_context, kv.block_tokens, m.arch.name)
    hold_apart(reqs, 0, kv)
    eng = Engine(reqs, StepModel(m), EngineConfig(), kv)
    for rid in range(len(reqs)):
        eng.add(rid)
    checked = 0
    for barrier in np.arange(0.5, 6.0, 0.5):
        eng.run_until(barrier)
        bases = [reqs.base[i] for i in range(len(reqs)) if reqs.state[i] == DECODE]
        assert len(bases) == eng.n_decoding
        contexts = np.array([eng.step - b for b in bases], dtype=float)
        pairs, cached, growth = eng.decode_totals()
        for g, (_, w) in enumerate(m.arch.window_groups()):
            assert pairs[g] == float(np.sum(ledger.attended_pairs(1, contexts, w)))
            assert cached[g] == float(np.sum(ledger.cached_tokens(contexts, w)))
            assert growth[g] == (int(np.sum(contexts < w)) if w else len(bases))
        checked += bool(len(bases)) and contexts.min() < 128 < contexts.max()
    assert checked >= 3  # young and old decoders together, at several moments


def test_littles_law_in_a_steady_state() -> None:
    """Mean number in the system (from the engine's own step rows) = rate x mean E2E,
    within the Poisson count's statistical error, over a window clear of warm-up and drain."""
    rate = 12.0
    res = simulate(Deployment.build(), workload=lognormal(rate, 6000, seed=3))
    assert not res.summary.overloaded
    tr = res.engines[0].trace
    t = np.frombuffer(tr.t_s)
    dt = np.frombuffer(tr.dt_s)
    in_system = np.frombuffer(tr.running, dtype=np.int64) + np.frombuffer(tr.waiting, dtype=np.int64)
    a = np.asarray(res.reqs.arrival_s)
    e2e = np.asarray(res.reqs.finish_s) - a
    t0, t1 = 0.2 * a[-1], 0.8 * a[-1]
    # time-average over [t0, t1): each step row holds its count for dt (clipped to the window)
    overlap = np.clip(np.minimum(t + dt, t1) - np.maximum(t, t0), 0, None)
    mean_in_system = float(np.sum(in_system * overlap) / (t1 - t0))
    arrived = (a >= t0) & (a < t1)
    n = int(arrived.sum())
    predicted = rate * float(e2e[arrived].mean())
    assert mean_in_system == pytest.approx(predicted, rel=4 / math.sqrt(n))


def test_overload_grows_the_queue_without_bound_and_says_so() -> None:
    """Arrivals at twice what the replica serves: the longer the run, the larger the TTFT."""
    m = Deployment.build()
    short = simulate(m, workload=lognormal(50, 600)).summary
    long_run = simulate(m, workload=lognormal(50, 1800))
    long, long_records = long_run.summary, long_run.records
    assert short.overloaded and long.overloaded
    assert long.ttft_s.p99 > 2.5 * short.ttft_s.p99
    assert long.queue_s.mean > 2.5 * short.queue_s.mean
    assert any(w.startswith("overloaded") for w in long.warnings)
    # the service rate mu: completions per second while the queue is never empty
    finish = np.sort([r["arrival_s"] + r["e2e_s"] for r in long_records])
    mu = float(np.sum((finish > 10) & (finish < 30)) / 20)
    # request i arrives at i / lambda and is admitted near i / mu: its wait grows as (lambda / mu - 1) t
    assert long.queue_growth == pytest.approx(50 / mu - 1, rel=0.1)
    calm = simulate(m, workload=lognormal(5, 600)).summary
    assert not calm.overloaded and not calm.warnings


def test_kv_shortage_preempts_and_counts_it() -> None:
    """48 clients x 5,500 tokens want 264k tokens of KV; at 35% of memory the cache holds
    about 65k, so sequences are preempted (recompute) and every one still finishes."""
    m = Deployment.build()
    workload = Workload(
        prompt=Lengths("fixed", 4000),
        output=Lengths("fixed", 1500),
        concurrency=48,
        requests=200,
        duration_s=None,
    )
    small = simulate(m, workload=workload, engine=EngineConfig(gpu_memory_utilization=0.35))
    assert small.kv.tokens < 48 * 5500
    s = small.summary
    assert s.preemptions > 0
    assert s.preemptions == sum(r["preemptions"] for r in small.records) == small.engines[0].preemptions
    assert s.completed == 200
    assert all(r["output_tokens"] == 1501 for r in small.records)
    ample = simulate(m, workload=workload)
    assert ample.kv.tokens > 48 * 5500
    assert ample.summary.preemptions == 0


def test_kv_capacity_is_the_memory_plans_room() -> None:
    """90% of an H100's 80 GiB, less 16.06 GB of weights, 1 GB overhead and the activations
    of a full step (8,192 tokens x (4d + 2 mlp + 2 q) in bf16, and fp32 logits for 256
    sequences), in blocks of 16 tokens x 128 KiB."""
    kv = kv_cache(Deployment.build())
    activations = 8192 * (4 * 4096 + 2 * 14336 + 2 * 4096) * 2 + 256 * 128256 * 4
    room = 0.9 * 80 * 2**30 - 16_060_522_496 - 1e9 - activations
    assert kv.room_bytes_per_gpu == pytest.approx(room, rel=1e-12)
    assert kv.blocks == int(room // (16 * 131072))


def test_a_hybrid_model_pages_its_global_layers_and_holds_its_window_apart() -> None:
    """gpt-oss-20b alternates 12 sliding layers (a 128-token window) with 12 global ones,
    8 KV heads of 64 in bf16. A block pages the global layers only: 16 tokens x 12 layers x
    2 x 8 x 64 x 2 bytes. One request of 960 + 5 tokens holds ceil(965 / 16) = 61 blocks of
    them, and its sliding layers the blocks of their window and the block being written:
    12/12 x ceil(min(128 + 16, 965) / 16) = 9 more, 70 at the peak."""
    m = Deployment.build(model="gpt-oss-20b", gpu="h100-sxm")
    kv = kv_cache(m)
    assert kv.bytes_per_token_per_gpu == 12 * 2 * 8 * 64 * 2
    assert kv.blocks == int(kv.room_bytes_per_gpu // (16 * 12 * 2 * 8 * 64 * 2))
    assert kv.apart_blocks(965) == 9 and kv.apart_blocks(40) == 3  # a short request: its tokens
    res = simulate(m, workload=fixed(960, 5, requests=1))
    assert res.summary is not None and res.kv == kv
    assert res.summary.utilisation.kv_utilisation_peak * kv.blocks == pytest.approx(61 + 9, rel=REL)


def test_a_model_of_global_layers_holds_nothing_apart() -> None:
    kv = kv_cache(Deployment.build())
    assert kv.windows == () and kv.apart_blocks(100_000) == 0


def test_a_deployment_keeps_its_kv_plan_for_the_same_settings() -> None:
    """A plan's trials and a search's screens ask again for the same cache: the deployment
    keeps it (`Deployment.kept`). Other settings plan their own, and a pickled copy, which
    keeps nothing, plans the same cache afresh."""
    import pickle

    m = Deployment.build(gpu="h200")
    first = kv_cache(m, 16, 0.9, 256, 8192)
    assert kv_cache(m, 16, 0.9, 256, 8192) is first
    other = kv_cache(m, 16, 0.8, 256, 8192)
    assert other.blocks < first.blocks  # less memory planned for, fewer blocks
    fresh = pickle.loads(pickle.dumps(m))
    assert "kept" not in vars(fresh) and kv_cache(fresh, 16, 0.9, 256, 8192) == first


def test_prefix_cache_hit_skips_the_cached_tokens() -> None:
    """Half the prompt cached (64 whole blocks of 16): the prefill is a pass of the other
    half after that context."""
    m = Deployment.build()
    res = simulate(m, workload=fixed(2048, 10, requests=1, prefix_hit_rate=0.5))
    want = float(roofline.time_work(ledger.pass_work(m.arch, m.prec, 1024, 1024), m).time_s)
    assert res.records[0]["ttft_s"] == pytest.approx(want, rel=REL)


def test_a_prompt_longer_than_the_budget_is_prefilled_in_chunks() -> None:
    """10,000 prompt tokens with a budget of 8,192: a chunk of 8,192 from empty, then 1,808
    after 8,192 cached; the first token comes at the end of the second."""
    m = Deployment.build()
    res = simulate(m, workload=fixed(10_000, 5, requests=1))
    first = float(roofline.time_work(ledger.pass_work(m.arch, m.prec, 8192, 0), m).time_s)
    second = float(roofline.time_work(ledger.pass_work(m.arch, m.prec, 1808, 8192), m).time_s)
    assert res.records[0]["ttft_s"] == pytest.approx(first + second, rel=REL)


def test_a_shared_prefix_is_computed_once() -> None:
    """Every prompt opens with the same 512 tokens (32 blocks), kept in the cache: each
    prefill is a pass of the rest after them, and the 32 blocks are set aside once."""
    m = Deployment.build()
    res = simulate(m, workload=fixed(2000, 5, requests=1, shared_prefix_tokens=512))
    want = float(roofline.time_work(ledger.pass_work(m.arch, m.prec, 2000 - 512, 512), m).time_s)
    assert res.records[0]["ttft_s"] == pytest.approx(want, rel=REL)
    assert res.engines[0].blocks == res.kv.blocks - 32


def test_mfu_and_mbu_are_the_ledgers_flops_and_bytes_over_time() -> None:
    """One request alone from t = 0: MFU = FLOPs / (time x peak), MBU = bytes / (time x
    bandwidth), with the prefill's and every decode step's work from the ledger."""
    m = Deployment.build()
    prompt, output = 2000, 300
    res = simulate(m, workload=together(1, prompt, output))
    passes = [ledger.pass_work(m.arch, m.prec, prompt, 0)]
    passes += [ledger.pass_work(m.arch, m.prec, 1, prompt + i) for i in range(output)]
    total_s = request.request_timeline(m, prompt, output).total_s
    u = res.summary.utilisation
    assert u.mfu == pytest.approx(sum(w.flops for w in passes) / (total_s * 989e12), rel=1e-9)
    assert u.mbu == pytest.approx(sum(w.bytes for w in passes) / (total_s * 3.35e12), rel=1e-9)
    ts = u.timeseries
    width = total_s / len(ts["t_s"])
    assert sum(ts["busy"]) * width == pytest.approx(total_s, rel=1e-9)
    assert sum(ts["mbu"]) / len(ts["mbu"]) == pytest.approx(u.mbu, rel=1e-9)
    # decode alone is memory-bound: it moves bytes at the lesson's 80% of bandwidth
    assert max(ts["mbu"]) == pytest.approx(0.8, rel=1e-6)


def test_replicas_share_the_load() -> None:
    m = Deployment.build()
    for router in ("round-robin", "least-outstanding"):
        res = simulate(m, workload=lognormal(30, 1200), replicas=2, router=router)
        counts = np.bincount([r["replica"] for r in res.records], minlength=2)
        assert abs(int(counts[0]) - int(counts[1])) <= 0.1 * 1200
        assert not res.summary.overloaded  # one replica alone would be (30/s > about 25/s)
        assert res.summary.completed == 1200


def test_arrival_processes_have_their_rates_and_burstiness() -> None:
    from ridgeline.simulate.workload import open_arrivals

    n = 20000
    rng = random.Random(1)
    poisson = np.diff(open_arrivals(Workload(rate_per_s=4.0, requests=n), rng))
    assert poisson.mean() == pytest.approx(0.25, rel=4 / math.sqrt(n))
    assert poisson.std() / poisson.mean() == pytest.approx(1.0, abs=0.05)
    bursty = np.diff(
        open_arrivals(Workload(arrival="gamma", rate_per_s=4.0, burstiness=0.25, requests=n), rng)
    )
    assert bursty.mean() == pytest.approx(0.25, rel=0.05)
    assert (bursty.std() / bursty.mean()) ** 2 == pytest.approx(4.0, rel=0.15)  # CV^2 = 1 / shape
    constant = open_arrivals(Workload(arrival="constant", rate_per_s=4.0, requests=5), rng)
    np.testing.assert_allclose(constant, [0.0, 0.25, 0.5, 0.75, 1.0])
    window = np.asarray(open_arrivals(Workload(rate_per_s=4.0, requests=None, duration_s=1000.0), rng))
    assert window.max() < 1000.0 and len(window) == pytest.approx(4000, abs=4 * math.sqrt(4000))


def test_lengths_keep_their_means_and_a_seed_repeats_a_run() -> None:
    rng = random.Random(2)
    logn = np.asarray(Lengths("lognormal", 1000, 0.5).sample(50000, rng))
    assert logn.mean() == pytest.approx(1000, rel=0.01)
    assert np.log(logn).std() == pytest.approx(0.5, rel=0.02)
    uni = np.asarray(Lengths("uniform", 200, 0.5).sample(50000, rng))
    assert uni.min() >= 100 and uni.max() <= 300 and uni.mean() == pytest.approx(200, rel=0.01)
    m = Deployment.build()
    a = simulate(m, workload=lognormal(10, 200, seed=5)).records
    b = simulate(m, workload=lognormal(10, 200, seed=5)).records
    c = simulate(m, workload=lognormal(10, 200, seed=6)).records
    assert a == b and a != c


def test_each_kind_of_draw_has_its_own_stream() -> None:
    """Arrivals, prompt lengths and output lengths come from three streams of one seed: the
    same seed gives the same lengths at any rate, the same arrivals for any lengths, and the
    first N requests of any longer run."""
    from dataclasses import replace

    from ridgeline.simulate.workload import request_columns

    w = lognormal(10, 500, seed=3)
    arrival, prompt, output, _, _ = request_columns(w, 131_072, 16)
    faster = request_columns(replace(w, rate_per_s=40.0), 131_072, 16)
    assert faster[1:3] == (prompt, output) and faster[0] != arrival
    assert [t / 4 for t in arrival] == pytest.approx(faster[0], rel=1e-12)  # the same gaps, a quarter
    other = request_columns(replace(w, output=Lengths("uniform", 100, 0.5)), 131_072, 16)
    assert other[0] == arrival and other[1] == prompt and other[2] != output
    assert request_columns(replace(w, seed=4), 131_072, 16)[0] != arrival
    shorter = request_columns(replace(w, requests=300), 131_072, 16)
    assert shorter[:3] == (arrival[:300], prompt[:300], output[:300])  # a longer run extends a shorter


def test_a_short_simulation_loads_no_numpy(tmp_path: Any) -> None:
    """numpy's import alone would be most of a short run's time: 1,000 requests of drawn
    lengths, summarised and written as JSON, never load it."""
    import subprocess
    import sys

    code = (
        "import sys; from ridgeline.cli import main; "
        "status = main(['simulate', '--requests', '1000', '--rate', '20', '--prompt-dist', 'lognormal', "
        "'--output-dist', 'uniform', '--json']); "
        "sys.exit(status if status else int('numpy' in sys.modules) * 3)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["requests"] == 1000


def test_the_over_time_sums_are_the_same_row_by_row_and_on_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    """A short run sums its step rows in plain Python, a long one on numpy's arrays: the
    same amounts, summed in another order, within rounding."""
    from ridgeline.simulate import report

    for model, engine in (("llama-3.1-8b", None), ("gemma-2-9b", "vllm"), ("mixtral-8x7b", "sglang")):
        m = Deployment.build(model, "h100-sxm", engine=engine, tp=2 if model.startswith("mixtral") else 1)
        res = simulate(m, workload=lognormal(20, 300, seed=1))
        makespan = max(res.reqs.finish_s)
        monkeypatch.setattr(report, "NUMPY_ROWS", 10**9)
        plain = dataclasses.asdict(report.utilisation(res.engines, m, makespan))
        monkeypatch.setattr(report, "NUMPY_ROWS", 0)
        arrays = dataclasses.asdict(report.utilisation(res.engines, m, makespan))
        series = plain.pop("timeseries"), arrays.pop("timeseries")
        assert plain == pytest.approx(arrays, rel=1e-12)
        for key, values in series[0].items():
            assert values == pytest.approx(series[1][key], rel=1e-9, abs=1e-12), key
        assert 0 < plain["mfu"] < 1 and 0 < plain["mbu"] < 1


def test_closed_loop_keeps_its_clients_busy() -> None:
    """C clients with no think time: C requests in the system at all times until the end."""
    res = simulate(Deployment.build(), workload=fixed(500, 100, concurrency=8, requests=80))
    assert res.summary.completed == 80
    tr = res.engines[0].trace
    running = np.frombuffer(tr.running, dtype=np.int64) + np.frombuffer(tr.waiting, dtype=np.int64)
    assert np.median(running) == 8
    assert all(r["concurrency"] == 8 for r in res.records)


def test_records_are_the_shared_schema() -> None:
    res = simulate(Deployment.build(), workload=lognormal(5, 50))
    for rec in res.records:
        assert tuple(rec)[: len(metrics.RECORD_KEYS)] == metrics.RECORD_KEYS
        assert rec["tokens_source"] == "simulated" and rec["error"] is None
        assert rec["tpot_s"] == pytest.approx((rec["e2e_s"] - rec["ttft_s"]) / (rec["output_tokens"] - 1))
        assert rec["queue_s"] >= 0 and rec["ttft_s"] > rec["queue_s"]


KV_SHORT = Workload(prompt=Lengths("fixed", 4000), output=Lengths("fixed", 300), concurrency=48, requests=100)


@pytest.mark.parametrize(
    "workload, slo, engine",
    [
        (lognormal(5, 400, seed=3), metrics.Slo(0.1, 0.008, 2.0), EngineConfig()),
        (fixed(500, 1, concurrency=4, requests=40), metrics.Slo(tpot_s=0.01), EngineConfig()),
        (KV_SHORT, None, EngineConfig(gpu_memory_utilization=0.35)),  # preemptions
    ],
)
def test_the_summary_from_the_arrays_is_the_summary_of_the_records(
    workload: Workload, slo: metrics.Slo | None, engine: EngineConfig
) -> None:
    """The records are built only when asked for; the summary, computed from the request
    arrays, is the shared summary of those records to the last digit, intervals included."""
    res = simulate(Deployment.build(), workload=workload, engine=engine, slo=slo)
    assert "records" not in vars(res)  # not built yet
    of_records = metrics.summarize(res.records, res.summary.duration_s, slo)
    shared = {f.name: getattr(res.summary, f.name) for f in dataclasses.fields(of_records)}
    assert metrics.Summary(**shared) == of_records


def test_user_mistakes_are_one_line_errors() -> None:
    m = Deployment.build()
    for fields, fragment in (
        ({"rate_per_s": -1.0}, "--rate"),
        ({"requests": 0, "duration_s": None}, "--requests"),
        ({"concurrency": 0}, "--concurrency"),
        ({"prefix_hit_rate": 1.0}, "--prefix-hit-rate"),
    ):
        with pytest.raises(RidgelineError, match=fragment):  # refused where it is built
            simulate(m, workload=Workload(**fields))
    with pytest.raises(RidgelineError, match="max-num-batched-tokens"):
        simulate(m, engine=EngineConfig(max_num_batched_tokens=64))
    with pytest.raises(RidgelineError, match="more KV cache"):
        simulate(
            m,
            workload=fixed(100_000, 20_000, requests=1),
            engine=EngineConfig(gpu_memory_utilization=0.3),
        )
