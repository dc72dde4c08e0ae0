"""One request's timeline in closed form, and what the core keeps between estimates.

The decode steps of a request are summed in closed form: between the sliding windows'
edges every roofline term is affine in the context, so the sum of max(compute, memory)
is two arithmetic series split where a step turns from memory-bound to compute-bound.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ridgeline import estimate
from ridgeline.deployment import Deployment
from ridgeline.errors import RidgelineError
from ridgeline.request import decode_segments, decode_time_s, request_timeline
from ridgeline.step import decode_step
from ridgeline.sweep import GRID_BLOCK, decode_grid

DEPLOYMENTS = [
    ("llama-3.1-8b", "h100-sxm", {}),
    ("llama-3.1-70b", "h100-sxm", {"tp": 4}),
    ("llama-3.1-70b", "a100-80gb-sxm", {"tp": 2, "pp": 2}),
    ("mixtral-8x7b", "h100-sxm", {"tp": 4, "ep": 2}),
    ("gemma-2-9b", "h100-sxm", {"tp": 2}),  # 4,096-token windows on every other layer
    ("gemma-3-270m", "rtx-4090", {}),  # 512-token windows on five layers of six
    ("deepseek-v3", "h200", {"tp": 8, "ep": 8}),  # latent attention, shared experts
    ("gpt-oss-20b", "h100-sxm", {"engine": "vllm"}),  # an engine's rates, 128-token windows
    ("llama-3.1-8b", "h100-sxm", {"engine": "sglang"}),  # matmuls and attention apart, global
    ("qwen3-30b-a3b", "h100-sxm", {"tp": 2, "method": "per-op"}),
    ("mistral-7b", "l40s", {"pp": 2, "method": "per-op"}),
]
REQUESTS = [(2000, 500, 1), (100, 5000, 64), (500, 30, 256), (4000, 300, 8), (3, 1, 1)]


@pytest.mark.parametrize(("model", "gpu", "options"), DEPLOYMENTS, ids=lambda v: str(v))
def test_the_closed_form_is_the_sum_of_each_steps_own_price(model: str, gpu: str, options: dict) -> None:
    """The sum is compared with an exactly rounded sum (math.fsum) of every step priced on
    its own. The closed form reads each line at the start of its run of contexts and 4,096
    contexts on (or at the run's last), each rounded to within an epsilon of its time: the
    climb errs by two roundings of a step over the span, the line at the prompt by a few
    roundings of a step, and over n steps that adds up to within n epsilon of the total."""
    d = Deployment.build(model, gpu, **options)
    for prompt, output, batch in REQUESTS:
        if prompt + output > d.arch.max_context:
            continue
        steps = math.fsum(float(decode_step(d, prompt + i, batch).time_s) for i in range(output))
        closed = decode_time_s(d, prompt, output, batch)
        assert closed == pytest.approx(steps, rel=output * sys.float_info.epsilon, abs=0.0)


def test_the_sum_splits_where_a_step_changes_bound() -> None:
    """At batch 512 a decode step of Llama 3.1 8B on an H100 starts compute-bound (512
    tokens of 2P FLOPs against one read of the weights) and turns memory-bound as the KV
    cache grows, near 320 tokens of context: the steps on each side are both in the sum."""
    d = Deployment.build()
    bounds = [decode_step(d, c, 512).bound for c in (100, 1099)]
    assert bounds == ["compute", "memory"]
    steps = math.fsum(float(decode_step(d, 100 + i, 512).time_s) for i in range(1000))
    assert decode_time_s(d, 100, 1000, 512) == pytest.approx(steps, rel=1000 * sys.float_info.epsilon)


def test_a_run_of_steps_breaks_at_each_window_edge() -> None:
    """A 4,096-token window bends its layers' terms at contexts 4,095 and 4,096."""
    d = Deployment.build("gemma-2-9b")
    assert decode_segments(d, 4000, 200) == [(4000, 95), (4095, 1), (4096, 104)]
    assert decode_segments(d, 100, 200) == [(100, 200)]
    assert decode_segments(Deployment.build(), 4000, 200) == [(4000, 200)]


def test_the_seed_stage_500_decode_steps_take_3_11_s() -> None:
    """The lesson's stage: Llama 3.1 8B on an H100 at 60% / 80%, 2,000 tokens in and 500
    out: 55.9 ms to the first token, then 500 steps of 6.1 ms each, 3.11 s in all. Each
    step reads the weights, the cached context and writes one token's keys and values."""
    t = request_timeline(Deployment.build(), 2000, 500)
    assert t.steps == 500
    assert t.ttft_s == pytest.approx(0.0559, abs=0.00005)
    assert t.tpot_s == pytest.approx(0.0061, abs=0.00005)
    assert t.total_s == pytest.approx(3.11, abs=0.005)
    k, p = 131072, 8_030_261_248  # KV bytes per token, parameters
    by_hand = math.fsum((2 * p + (2000 + i) * k + k) / (0.8 * 3.35e12) for i in range(500))
    assert t.decode_s == pytest.approx(by_hand, rel=500 * sys.float_info.epsilon)


def test_a_grid_larger_than_a_block_is_priced_as_one_pass() -> None:
    """decode_grid prices blocks of GRID_BLOCK points: the same numbers as one call over
    every point, in the shape the inputs broadcast to."""
    d = Deployment.build("mixtral-8x7b", tp=2)
    rng = np.random.default_rng(1)
    n = 2 * GRID_BLOCK + 123
    batches, contexts = rng.integers(1, 512, size=n), rng.integers(0, 30_000, size=n)
    grid = decode_grid(d, batches, contexts)
    whole = decode_step(d, contexts.astype(float), batches.astype(float)).time_s
    assert grid.shape == (n,) and np.array_equal(grid, whole)
    square = decode_grid(d, np.array([[1], [8], [64]]), np.array([0, 100, 2000, 16_000]))
    assert square.shape == (3, 4)
    assert square[2, 3] == decode_step(d, 16_000.0, 64.0).time_s


def test_a_deployment_built_again_from_the_same_names_is_the_one_built_before(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`Deployment.build` keeps what it built: the same names and choices give the same
    deployment, with what it has worked out; any other choice gives another one, and a
    choice it refused is refused again (True is not a TP degree, though it equals 1)."""
    monkeypatch.setenv("RIDGELINE_CONFIG_DIR", str(tmp_path))  # no user's files
    monkeypatch.delenv("RIDGELINE_GPUS", raising=False)
    monkeypatch.delenv("RIDGELINE_ENGINES", raising=False)
    d = Deployment.build("llama-3.1-70b", "h100-sxm", tp=4, weights="fp8")
    assert Deployment.build("llama-3.1-70b", "h100-sxm", tp=4, weights="fp8") is d
    for other in ({"tp": 2}, {"weights": "bf16"}, {"kv_dtype": "fp8"}, {"compute_eff": 0.5}):
        assert Deployment.build("llama-3.1-70b", "h100-sxm", **{"tp": 4, "weights": "fp8", **other}) is not d
    assert Deployment.build("llama-3.1-70b", "h200", tp=4, weights="fp8") is not d
    assert Deployment.build(engine="vllm") is Deployment.build(engine="vllm") is not Deployment.build()
    Deployment.build(tp=1)
    with pytest.raises(RidgelineError, match="--tp must be a whole number"):
        Deployment.build(tp=True)


def test_a_run_of_decode_steps_is_read_once_per_deployment_and_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first request on a deployment prices its prefill and two steps of its run of
    contexts (where its lines start and how they climb); a second request of the same batch
    prices only its prefill, and a new batch reads its own run. The first decode step is
    priced only when asked for, and is then the step's own price."""
    import ridgeline.step

    d = Deployment.build("qwen3-8b", "h200", tp=2)
    d.kept.clear()  # as if new: another test may have asked it before
    priced: list[float] = []
    real = ridgeline.step.price
    monkeypatch.setattr(ridgeline.step, "price", lambda m, p: priced.append(p.tokens) or real(m, p))
    first = request_timeline(d, 2000, 500)
    assert priced == [2000, 1, 1]
    second = request_timeline(d, 300, 40)
    assert priced[3:] == [300]
    request_timeline(d, 300, 40, 8)
    assert priced[4:] == [2400, 8, 8]
    assert second.decode_s != first.decode_s and len(priced) == 7
    assert first.first_decode.time_s == decode_step(d, 2000).time_s and len(priced) == 9


def test_what_deployments_keep_is_bounded() -> None:
    """At most BUILT_KEPT deployments are kept, and KEPT_RUNS decode runs on each: past that
    the oldest deployment is built afresh and a deployment's runs are read again, to the
    same numbers."""
    from ridgeline import deployment, request

    d = Deployment.build("mistral-7b", "l40s")
    batches = range(1, request.KEPT_RUNS + 2)
    sums = [decode_time_s(d, 100, 50, b) for b in batches]
    assert 0 < len(d.kept) <= request.KEPT_RUNS
    assert [decode_time_s(d, 100, 50, b) for b in batches] == sums
    for i in range(deployment.BUILT_KEPT):
        Deployment.build("mistral-7b", "l40s", compute_eff=0.5 + (i + 0.5) / 1e4)
    assert len(deployment._BUILT) <= deployment.BUILT_KEPT
    again = Deployment.build("mistral-7b", "l40s")
    assert again is not d and decode_time_s(again, 100, 50, 1) == sums[0]


def test_a_pickled_deployment_leaves_what_it_keeps_behind() -> None:
    """What a deployment keeps is its process's own: a pickle (a search's workers get their
    deployments so) carries the deployment, equal, with nothing kept, and works the same
    numbers out again."""
    import pickle

    from ridgeline.simulate.run import step_model

    d = Deployment.build("llama-3.1-70b", "h200", tp=4, engine="vllm")
    total = decode_time_s(d, 2000, 500)
    step_model(d)
    assert {"step model"} < set(d.kept)
    copy = pickle.loads(pickle.dumps(d))
    assert copy == d and copy is not d
    assert copy.kept == {}
    assert decode_time_s(copy, 2000, 500) == total
    assert step_model(copy) is not step_model(d) and step_model(copy) is step_model(copy)


def test_deployments_built_in_threads_at_once_are_kept_within_the_bound() -> None:
    """The web face builds deployments in threads. Many threads building past the bound at
    once, switching as often as the interpreter allows, raise nothing (two evicting the
    same oldest deployment would), keep at most BUILT_KEPT, and each gets its own."""
    from concurrent.futures import ThreadPoolExecutor

    from ridgeline import deployment

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        effs = [0.2 + (i + 0.5) / 1e6 for i in range(10 * 3000)]
        with ThreadPoolExecutor(8) as pool:
            built = list(pool.map(lambda e: Deployment.build("mistral-7b", "l40s", bandwidth_eff=e), effs))
    finally:
        sys.setswitchinterval(interval)
    assert [d.eff.bandwidth for d in built] == effs
    assert len(deployment._BUILT) <= deployment.BUILT_KEPT


def test_an_engine_file_edited_between_estimates_is_read_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A user's engine profiles are parsed once while their file stays the same size and
    age, so estimates on them share one deployment; an edit is read at the next estimate."""
    from ridgeline.engines import get_engine, profile_to_toml

    monkeypatch.setenv("RIDGELINE_CONFIG_DIR", str(tmp_path))
    path = tmp_path / "engines.toml"
    vllm = profile_to_toml(get_engine("vllm")).replace("[vllm]", "[mine]", 1)
    path.write_text(vllm, encoding="utf-8")
    first = Deployment.build(engine="mine")
    assert Deployment.build(engine="mine") is first
    slower = vllm.replace(f"fixed_s = {get_engine('vllm').fixed_s!r}", "fixed_s = 0.01", 1)
    assert slower != vllm
    path.write_text(slower, encoding="utf-8")
    os.utime(path, ns=(1, 1))
    again = Deployment.build(engine="mine")
    assert again is not first and again.engine is not None and again.engine.fixed_s == 0.01
    gap = request_timeline(again, 2000, 500).tpot_s - request_timeline(first, 2000, 500).tpot_s
    assert gap == pytest.approx(0.01 - get_engine("vllm").fixed_s, rel=1e-9)  # each step pays it once


def test_a_gpu_file_edited_between_estimates_is_read_again(tmp_path: Path) -> None:
    """User files are parsed once and kept while they stay the same size and age."""
    path = tmp_path / "gpus.toml"
    entry = "[lab]\npeak_flops = {{ bf16 = 400e12 }}\nbandwidth_bytes_per_s = {bw}\nmemory_bytes = 64e9\n"
    path.write_text(entry.format(bw="2.0e12"), encoding="utf-8")
    assert estimate(gpu="lab", gpu_file=path).gpu.bandwidth_bytes_per_s == 2.0e12
    path.write_text(entry.format(bw="1.25e12"), encoding="utf-8")
    os.utime(path, ns=(1, 1))  # a new age, even on a file system with coarse timestamps
    assert estimate(gpu="lab", gpu_file=path).gpu.bandwidth_bytes_per_s == 1.25e12


def test_a_file_named_from_home_is_read_again_when_edited(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A file named as ~/... is kept by the age and size of the file it names, as for any
    other path: an edit is read at the next estimate."""
    monkeypatch.setenv("HOME", str(tmp_path))
    path = tmp_path / "lab-gpus.toml"
    entry = "[lab2]\npeak_flops = {{ bf16 = 400e12 }}\nbandwidth_bytes_per_s = {bw}\nmemory_bytes = 64e9\n"
    path.write_text(entry.format(bw="2.0e12"), encoding="utf-8")
    assert estimate(gpu="lab2", gpu_file="~/lab-gpus.toml").gpu.bandwidth_bytes_per_s == 2.0e12
    path.write_text(entry.format(bw="1.25e12"), encoding="utf-8")
    os.utime(path, ns=(1, 1))
    assert estimate(gpu="lab2", gpu_file="~/lab-gpus.toml").gpu.bandwidth_bytes_per_s == 1.25e12


def test_the_core_imports_no_parser_path_library_or_typing() -> None:
    """`import ridgeline.predict` loads none of json, tomllib, pathlib, importlib.resources
    or typing (each is loaded by what reads a file or checks types), nor the engine
    profiles, calibrations or the memory plan until a deployment or a result asks."""
    code = (
        "import sys; before = set(sys.modules)\n"
        "import ridgeline.predict\n"
        "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    loaded = set(out.stdout.split())
    lazy = {"json", "tomllib", "pathlib", "importlib.resources", "typing"}
    lazy |= {"ridgeline.engines", "ridgeline.calibration", "ridgeline.memory", "ridgeline.explain"}
    assert not loaded & lazy
