"""Engine profiles: each term does what engines.py says, by independent arithmetic on the
model's published shapes and the accelerator's data sheet."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from ridgeline import Deployment, memory
from ridgeline.cli import main
from ridgeline.engines import engines
from ridgeline.errors import RidgelineError
from ridgeline.memory import stored_weight_bytes_per_gpu
from ridgeline.simulate.kvcache import kv_cache

# Llama 3.1 8B (its config.json): 8,030,261,248 parameters, 32 layers, 8 KV heads of 128, an
# untied embedding table of 128,256 x 4,096 that an engine only looks up.
PARAMS_8B, LAYERS_8B, KV_BYTES_PER_TOKEN_8B = 8_030_261_248, 32, 2 * 32 * 8 * 128 * 2
EMBEDDING_8B = 128_256 * 4_096
H100_SXM_BANDWIDTH = 3.35e12  # bytes/s, NVIDIA's data sheet
H100_SXM_BF16_FLOPS = 989e12  # dense, the same data sheet
# An engine's matmuls run against what a large matmul sustains: 794.5 TFLOP/s measured (the
# MAMF table of stas00/ml-engineering), 0.8033 of the peak as the catalogue states it
H100_SXM_BF16_MATMUL = H100_SXM_BF16_FLOPS * 0.8033

PERFECT = """
[perfect]
label = "a perfect engine"
compute = { gemm = { bf16 = 1.0 }, half_m_tokens = 0.0, attention = 1.0, experts = 1.0 }
memory = { weights = { w16 = 1.0, w8 = 1.0, w4 = 1.0 }, kv = 1.0 }
"""


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_built_in_engines_and_their_schedulers(capsys: pytest.CaptureFixture[str]) -> None:
    listed = run_json(capsys, "engines")
    assert {"vllm", "sglang", "trtllm", "llamacpp"} <= set(listed)
    assert listed["trtllm"]["scheduler"]["policy"] == "no-evict"  # GUARANTEED_NO_EVICT by default
    assert listed["vllm"]["scheduler"]["policy"] == "vllm"
    # vLLM's V1 caches prefixes by default, SGLang's radix cache too; TensorRT-LLM's
    # no-evict never preempts, and llama.cpp's server serves a slot to its end
    caching = {
        name: listed[name]["scheduler"]["prefix_caching"] for name in ("vllm", "sglang", "trtllm", "llamacpp")
    }
    assert caching == {"vllm": True, "sglang": True, "trtllm": False, "llamacpp": False}
    # SGLang (0.4 on), TensorRT-LLM's PyTorch runtime and vLLM's V1 (async scheduling, its
    # default since late 2025) plan the next step while this one runs; llama.cpp's server does not
    names = ("vllm", "sglang", "trtllm", "llamacpp")
    overlap = {name: listed[name]["scheduler"]["overlap"] for name in names}
    assert overlap == {"vllm": True, "sglang": True, "trtllm": True, "llamacpp": False}


# vLLM's own defaults (vllm/engine/arg_utils.py, EngineArgs.get_batch_defaults, 0.9 on, for
# `vllm serve`): a GPU of at least 70 GiB that is not an A100 starts with 1,024 sequences and
# an 8,192-token budget; any other, 256 and 2,048. Catalogue memory: what the card holds.
VLLM_SERVE_DEFAULTS = {
    "h100-sxm": (1024, 8192),  # 80 GiB
    "h200": (1024, 8192),  # 141 GiB
    "mi300x": (1024, 8192),  # 192 GiB
    "a100-80gb-sxm": (256, 2048),  # 80 GiB, but an A100 (vLLM PR #17885: larger budgets slowed it)
    "l40s": (256, 2048),  # 48 GB (ECC on) = 44.7 GiB
}


@pytest.mark.parametrize(("gpu", "defaults"), VLLM_SERVE_DEFAULTS.items())
def test_vllms_scheduler_defaults_follow_the_accelerator(gpu: str, defaults: tuple[int, int]) -> None:
    from ridgeline.deployment import Deployment
    from ridgeline.simulate.run import engine_config

    d = Deployment.build("llama-3.1-8b", gpu, engine="vllm")
    cfg = engine_config(d)
    assert (cfg.max_num_seqs, cfg.max_num_batched_tokens) == defaults
    assert engine_config(d, max_num_seqs=64).max_num_seqs == 64  # a given knob still wins


# SGLang's ServerArgs (python/sglang/srt/server_args.py, 0.4 and 0.5): --chunked-prefill-size
# is 2,048 under 35 GiB ("A10, L40, 4090"), 8,192 under 160 GiB ("H100, H200, A100, H20") and
# 16,384 from there ("B200, MI300"); --max-running-requests comes from the KV pool,
# min(max(tokens / context * 512, 2048), 4096): never below 2,048.
SGLANG_SERVE_DEFAULTS = {
    "rtx-4090": (2048, 2048),  # 24 GiB
    "a100-40gb": (2048, 8192),  # 40 GiB
    "h100-sxm": (2048, 8192),  # 80 GiB
    "h200": (2048, 8192),  # 141 GiB
    "b200": (2048, 16384),  # 180 GiB
    "mi300x": (2048, 16384),  # 192 GiB
}


@pytest.mark.parametrize(("gpu", "defaults"), SGLANG_SERVE_DEFAULTS.items())
def test_sglangs_scheduler_defaults_follow_the_accelerators_memory(
    gpu: str, defaults: tuple[int, int]
) -> None:
    from ridgeline.deployment import Deployment
    from ridgeline.simulate.run import engine_config

    cfg = engine_config(Deployment.build("llama-3.1-8b", gpu, engine="sglang"))
    assert (cfg.max_num_seqs, cfg.max_num_batched_tokens) == defaults
    assert cfg.policy == "sglang"


def test_a_profiles_accelerator_dependent_defaults_round_trip_through_its_toml(tmp_path: Path) -> None:
    from ridgeline.engines import get_engine, profile_to_toml
    from ridgeline.hardware import get_accelerator

    text = PERFECT + (
        "scheduler = { max_num_seqs = 512, small_max_num_seqs = 16, small_below_memory_gib = 100.0, "
        'small_gpus = ["H100"] }\n'
    )
    path = tmp_path / "perfect.toml"
    path.write_text(text, encoding="utf-8")
    p = get_engine(str(path))
    assert p.scheduler.on(get_accelerator("b200")).max_num_seqs == 512  # 180 GB: above 100 GiB
    assert p.scheduler.on(get_accelerator("h200")).max_num_seqs == 512  # 141 GB = 131 GiB
    assert p.scheduler.on(get_accelerator("h100-sxm")).max_num_seqs == 16  # named (case aside)
    assert p.scheduler.on(get_accelerator("l40s")).max_num_seqs == 16  # 44.7 GiB
    assert p.scheduler.on(get_accelerator("l40s")).max_num_batched_tokens == 8192  # not given: as large
    tiered = tmp_path / "tiered.toml"
    tiered.write_text(
        PERFECT + "scheduler = { max_num_batched_tokens = 8192, small_max_num_batched_tokens = 2048, "
        "small_below_memory_gib = 35.0, large_max_num_batched_tokens = 16384, "
        "large_from_memory_gib = 160.0 }\n",
        encoding="utf-8",
    )
    q = get_engine(str(tiered))
    budgets = {g: q.scheduler.on(get_accelerator(g)).max_num_batched_tokens for g in ("l4", "h200", "b200")}
    assert budgets == {"l4": 2048, "h200": 8192, "b200": 16384}  # 22.4, 131 and 168 GiB
    (tmp_path / "again_tiered.toml").write_text(profile_to_toml(q), encoding="utf-8")
    assert get_engine(str(tmp_path / "again_tiered.toml")).scheduler == q.scheduler
    again = tmp_path / "again.toml"
    again.write_text(profile_to_toml(p), encoding="utf-8")
    assert get_engine(str(again)).scheduler == p.scheduler


def test_a_decode_step_is_its_bytes_at_the_profiles_bandwidth_plus_its_overhead(
    capsys: pytest.CaptureFixture[str],
) -> None:
    p = engines()["vllm"]
    out = run_json(capsys, "estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                   "--prompt-tokens", "2000", "--output-tokens", "8", "--engine", "vllm")  # fmt: skip
    step = out["decode"]  # the first decode step: 2,001 tokens of context
    weights_s = (PARAMS_8B - EMBEDDING_8B) * 2 / (H100_SXM_BANDWIDTH * p.weights["w16"])
    kv_s = 2001 * KV_BYTES_PER_TOKEN_8B / (H100_SXM_BANDWIDTH * p.kv)
    assert p.graph_max_seqs >= 1  # one sequence's decode step is replayed as a CUDA graph
    overhead_s = p.fixed_s + p.per_layer_s * LAYERS_8B * p.graph + p.per_sequence_s
    assert step["bound"] == "memory"
    assert step["time_s"] == pytest.approx(weights_s + kv_s + overhead_s, rel=2e-3)


def test_a_large_batchs_step_takes_the_matmuls_roofline_then_attentions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """At batch 512 and 400 tokens of context the matmuls wait on arithmetic (512 tokens of
    2 FLOPs a weight against one read of the weights) while attention waits on the KV cache:
    an engine runs them one after the other, so the step is the sum of the two rooflines, not
    one roofline over the whole pass (which would hide the KV reads under the matmuls)."""
    path = tmp_path / "perfect.toml"
    path.write_text(PERFECT, encoding="utf-8")
    batch, context = 512, 400
    shape = ("--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--batch", str(batch))
    out = run_json(capsys, "estimate", *shape, "--prompt-tokens", str(context), "--engine", str(path))
    served = PARAMS_8B - EMBEDDING_8B  # every weight but the looked-up table
    matmuls_s = max(2 * served * batch / H100_SXM_BF16_MATMUL, served * 2 / H100_SXM_BANDWIDTH)
    pairs = batch * LAYERS_8B * (context + 0.5)  # each new token against the cache and itself
    attention_flops = pairs * 2 * 2 * 4096  # scores and values, 32 heads of 128
    kv_bytes = batch * (context + 1) * KV_BYTES_PER_TOKEN_8B  # read the cache, write the token
    attention_s = max(attention_flops / H100_SXM_BF16_MATMUL, kv_bytes / H100_SXM_BANDWIDTH)
    assert 2 * served * batch / H100_SXM_BF16_MATMUL > served * 2 / H100_SXM_BANDWIDTH  # compute-bound
    assert kv_bytes / H100_SXM_BANDWIDTH > attention_flops / H100_SXM_BF16_MATMUL  # memory-bound
    assert out["decode"]["time_s"] == pytest.approx(matmuls_s + attention_s, rel=1e-9)
    flops, bytes_ = 2 * served * batch + attention_flops, served * 2 + kv_bytes
    whole_pass_s = max(flops / H100_SXM_BF16_MATMUL, bytes_ / H100_SXM_BANDWIDTH)
    assert out["decode"]["time_s"] > 1.2 * whole_pass_s


def test_tensor_parallelism_scales_the_step_overhead_by_its_log(capsys: pytest.CaptureFixture[str]) -> None:
    p = engines()["vllm"]
    base = p.fixed_s + p.per_layer_s * LAYERS_8B * p.graph  # a decode step of one: a CUDA graph
    for tp in (1, 2, 4):
        out = run_json(capsys, "estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm",
                       "--tp", str(tp), "--engine", "vllm")  # fmt: skip
        expected = base * (1 + p.tp_scale * math.log2(tp)) + p.per_sequence_s
        assert out["decode"]["overhead_s"] == pytest.approx(expected, rel=1e-9)


GRAPHED = PERFECT + (
    "overhead = { fixed_s = 0.001, per_layer_s = 1e-04, per_sequence_s = 1e-05, graph = 0.25, "
    "graph_max_seqs = 64 }\n"
)


@pytest.mark.parametrize(
    ("tokens", "batch", "overhead_s"),
    [  # 8B's 32 layers at 100 us each: 3.2 ms launched kernel by kernel, 0.8 ms as a graph
        (1, 1, 0.001 + 0.0008 + 1e-05),  # a decode step of one sequence: captured
        (1, 64, 0.001 + 0.0008 + 64e-05),  # the largest captured batch
        (1, 65, 0.001 + 0.0032 + 65e-05),  # one more: launched kernel by kernel
        (100, 1, 0.001 + 0.0032 + 1e-05),  # a prefill is never captured
        (100, 4, 0.001 + 0.0032 + 4e-05),
    ],
)
def test_a_decode_step_replayed_as_a_cuda_graph_pays_a_share_of_the_per_layer_cost(
    tmp_path: Path, tokens: int, batch: int, overhead_s: float
) -> None:
    from ridgeline.deployment import Deployment
    from ridgeline.step import pass_step

    d = Deployment.build("llama-3.1-8b", "h100-sxm", engine=write_profile(tmp_path, GRAPHED))
    assert float(pass_step(d, tokens, 500, batch).overhead_s) == pytest.approx(overhead_s, rel=1e-12)


def test_a_sweep_prices_captured_and_launched_steps_as_one_step_at_a_time(tmp_path: Path) -> None:
    import numpy as np

    from ridgeline.deployment import Deployment
    from ridgeline.step import decode_step

    d = Deployment.build("llama-3.1-8b", "h100-sxm", engine=write_profile(tmp_path, GRAPHED))
    batches = np.array([1, 8, 64, 65, 512])
    swept = decode_step(d, 1000, batches)
    for i, b in enumerate(batches):
        one = decode_step(d, 1000, int(b))
        assert float(swept.overhead_s[i]) == pytest.approx(float(one.overhead_s), rel=1e-12)
        assert float(swept.time_s[i]) == pytest.approx(float(one.time_s), rel=1e-12)


def test_the_simulators_step_prices_captured_and_launched_steps_as_the_core(tmp_path: Path) -> None:
    """The simulator reads a step's price off a few core calls per token count (steptime.py):
    a decode-only step is captured, a step that carries a prefill chunk is not, whatever its
    token count, and the affine reading must say so exactly."""
    from ridgeline.deployment import Deployment
    from ridgeline.simulate.steptime import StepModel

    d = Deployment.build("llama-3.1-8b", "h100-sxm", engine=write_profile(tmp_path, GRAPHED))
    model = StepModel(d)
    assert model.exact
    for tokens, sampled in ((3, 3), (64, 64), (65, 65), (67, 3), (64, 2), (2048, 1), (1, 1)):
        pairs, cached = [1234.5 * tokens], [987.0 * tokens]
        want = float(model.core(tokens, pairs, cached, sampled).time_s)
        assert model.time_s(tokens, pairs, cached, sampled) == pytest.approx(want, rel=1e-12, abs=0.0)


def test_a_profiles_cuda_graphs_round_trip_through_its_toml(tmp_path: Path) -> None:
    from ridgeline.engines import get_engine, profile_to_toml

    p = get_engine(write_profile(tmp_path, GRAPHED))
    assert (p.graph, p.graph_max_seqs) == (0.25, 64)
    again = get_engine(write_profile(tmp_path, profile_to_toml(p), "again.toml"))
    assert (again.graph, again.graph_max_seqs) == (0.25, 64)
    plain = get_engine(write_profile(tmp_path, PERFECT, "plain.toml"))
    assert (plain.graph, plain.graph_max_seqs) == (1.0, 0)  # no graphs unless a profile says


MOE_LAYERED = PERFECT + "overhead = { fixed_s = 0.001, per_layer_s = 1e-04, moe_layer = 2.0 }\n"


@pytest.mark.parametrize(
    ("model", "overhead_s"),
    [  # a prefill step, launched kernel by kernel: 100 us a dense layer, 200 us a MoE layer
        ("llama-3.1-8b", 0.001 + 32 * 1e-04),  # 32 dense layers
        ("mixtral-8x7b", 0.001 + 32 * 2e-04),  # 32 MoE layers (its config.json)
        ("deepseek-v3", 0.001 + 3 * 1e-04 + 58 * 2e-04),  # 61 layers, the first 3 dense
    ],
)
def test_a_moe_layer_pays_its_own_share_of_the_per_layer_cost(
    tmp_path: Path, model: str, overhead_s: float
) -> None:
    from ridgeline.deployment import Deployment
    from ridgeline.engines import get_engine, profile_to_toml
    from ridgeline.step import pass_step

    path = write_profile(tmp_path, MOE_LAYERED)
    tp = 8 if model == "deepseek-v3" else 1  # DeepSeek-V3's weights fit no fewer H200s in fp8
    d = Deployment.build(model, "h200", engine=path, weights="fp8", maths="fp8", tp=tp)
    p = get_engine(path)
    expected = overhead_s * (1 + p.tp_scale * math.log2(tp))  # tp_scale 0 here: no growth
    assert float(pass_step(d, 100, 500, 1).overhead_s) == pytest.approx(expected, rel=1e-12)
    again = get_engine(write_profile(tmp_path, profile_to_toml(p), "again.toml"))
    assert again.moe_layer == 2.0
    plain = get_engine(write_profile(tmp_path, PERFECT, "plain.toml"))
    assert plain.moe_layer == 1.0  # a MoE layer costs a dense one's unless a profile says


FRONTED = PERFECT + "overhead = { first_token_s = 0.03, front_end_s = { nim = 0.004 } }\n"


def test_a_front_end_that_wraps_the_engine_has_its_own_first_token_cost(tmp_path: Path) -> None:
    """first_token_s is the engine's own server's; behind NIM's front end a row pays
    front_end_s.nim instead, and behind a front end the profile does not know, its own."""
    from dataclasses import replace

    from ridgeline.accuracy import corpus
    from ridgeline.engines import get_engine, profile_to_toml

    p = get_engine(write_profile(tmp_path, FRONTED))
    assert (p.first_token_behind(""), p.first_token_behind("nim"), p.first_token_behind("other")) == (
        0.03,
        0.004,
        0.03,
    )
    again = get_engine(write_profile(tmp_path, profile_to_toml(p), "again.toml"))
    assert again.front_end_s == {"nim": 0.004}
    assert "front_end_s" not in profile_to_toml(get_engine(write_profile(tmp_path, PERFECT, "plain.toml")))

    nim = next(r for r in corpus.rows() if r.front_end == "nim" and r.kind == "ttft_load")
    own = replace(nim, front_end="")
    assert nim.http and nim.unit == "ms"
    gap_ms = corpus.predict(own, p) - corpus.predict(nim, p)
    assert gap_ms == pytest.approx((0.03 - 0.004) * 1e3, rel=1e-9)


def test_every_built_in_engine_is_slower_than_the_roofline(capsys: pytest.CaptureFixture[str]) -> None:
    ideal = run_json(capsys, "estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--preset", "ideal")
    for name in ("vllm", "sglang", "trtllm", "llamacpp"):
        real = run_json(capsys, "estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", name)
        assert real["tpot_s"] > ideal["tpot_s"] and real["ttft_s"] > ideal["ttft_s"]


def test_a_perfect_engine_from_a_file_is_the_ideal_roofline_of_what_an_engine_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The lesson's ledger streams and multiplies every parameter for every token; an engine
    looks the input embedding up (neither read whole nor multiplied) and runs the lm_head on
    the one token a prefill samples."""
    path = tmp_path / "perfect.toml"
    path.write_text(PERFECT, encoding="utf-8")
    shape = ("--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prompt-tokens", "2000")
    ideal = run_json(capsys, "estimate", *shape, "--preset", "ideal")
    mine = run_json(capsys, "estimate", *shape, "--engine", str(path))
    assert ideal["decode"]["bound"] == mine["decode"]["bound"] == "memory"
    embedding_s = EMBEDDING_8B * 2 / H100_SXM_BANDWIDTH  # bf16, read by every decode step
    assert mine["tpot_s"] == pytest.approx(ideal["tpot_s"] - embedding_s, rel=1e-9)
    assert ideal["prefill"]["bound"] == mine["prefill"]["bound"] == "compute"
    unrun = 2 * EMBEDDING_8B * 2000 + 2 * EMBEDDING_8B * 1999  # the lookup, and 1,999 lm_head rows
    # the preset's FLOPs less those, at the achievable matmul rate rather than the data sheet's
    run = ideal["prefill"]["time_s"] * H100_SXM_BF16_FLOPS - unrun
    assert mine["prefill"]["time_s"] == pytest.approx(run / H100_SXM_BF16_MATMUL, rel=1e-9)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (PERFECT.replace("bf16 = 1.0", "bf16 = 2.0"), "compute.gemm.bf16"),
        (PERFECT.replace("kv = 1.0", "kv = nan"), "memory.kv"),
        (PERFECT.replace(", w4 = 1.0", ""), "memory.weights lacks w4"),
        (PERFECT + PERFECT.replace("[perfect]", "[twin]"), "exactly one engine profile"),
        ("[x\n", "toml"),
        (PERFECT + 'scheduler = { small_gpus = "a100" }\n', "scheduler.small_gpus"),
        (PERFECT + "scheduler = { small_max_num_seqs = 0 }\n", "scheduler.small_max_num_seqs"),
        (PERFECT + "scheduler = { large_from_memory_gib = -1.0 }\n", "scheduler.large_from_memory_gib"),
        (PERFECT + "scheduler = { large_max_num_seqs = 0 }\n", "scheduler.large_max_num_seqs"),
        (PERFECT + "overhead = { graph = 0.0 }\n", "overhead.graph"),
        (PERFECT + "overhead = { graph_max_seqs = -1 }\n", "overhead.graph_max_seqs"),
        (PERFECT + "overhead = { moe_layer = 0.5 }\n", "overhead.moe_layer"),  # never below a dense layer
        (PERFECT + 'scheduler = { chunked_prefill = "off" }\n', "chunked_prefill must be true or false"),
        (PERFECT + "scheduler = { prefix_caching = 1 }\n", "prefix_caching must be true or false"),
        (PERFECT + 'scheduler = { overlap = "yes" }\n', "overlap must be true or false"),
        (PERFECT.replace("kv = 1.0 }", "kv = 1.0, sampler_bytes = -1.0 }"), "memory.sampler_bytes"),
        (PERFECT.replace("kv = 1.0 }", "kv = 1.0, repacked_experts = 0.5 }"), "memory.repacked_experts"),
    ],
)
def test_a_bad_profile_is_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, says: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    assert main(["estimate", "--engine", str(path)]) == 2
    err = capsys.readouterr().err
    assert says.lower() in err.lower() and err.count("\n") == 1 and "Traceback" not in err


def test_an_unknown_engine_names_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["estimate", "--engine", "vllmm"]) == 2
    err = capsys.readouterr().err
    assert "vllm" in err and "ridgeline engines" in err


def test_an_engine_runs_only_on_its_vendors_accelerators(capsys: pytest.CaptureFixture[str]) -> None:
    assert engines()["trtllm"].runs_on == ("nvidia",)  # TensorRT-LLM is NVIDIA's alone
    assert main(["estimate", "--engine", "trtllm", "--gpu", "mi300x"]) == 2
    err = capsys.readouterr().err
    assert "TensorRT-LLM does not run on amd accelerators (mi300x)" in err and err.count("\n") == 1
    assert main(["estimate", "--engine", "sglang", "--gpu", "mi300x", "--json"]) == 0  # ROCm builds exist
    capsys.readouterr()


def test_a_profile_says_where_it_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "amd-only.toml"
    path.write_text(PERFECT + 'runs_on = ["amd"]\n', encoding="utf-8")
    assert main(["estimate", "--engine", str(path), "--gpu", "h100-sxm"]) == 2
    assert "does not run on nvidia accelerators" in capsys.readouterr().err
    path.write_text(PERFECT + "runs_on = [1]\n", encoding="utf-8")
    assert main(["estimate", "--engine", str(path), "--gpu", "mi300x"]) == 2
    assert "runs_on must be a list of vendor names" in capsys.readouterr().err


def write_profile(tmp_path: Path, text: str, name: str = "mine.toml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_weight_only_formats_unpack_inside_the_matmul(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """int4 weights under bf16 maths: a compute-bound prefill at dequant.w4 of the rate. fp8
    weights under fp8 maths unpack nothing, so the factor leaves them alone."""
    plain = write_profile(tmp_path, PERFECT, "plain.toml")
    unpacking = write_profile(
        tmp_path, PERFECT.replace("experts = 1.0 }", "experts = 1.0, dequant = { w4 = 0.5 } }")
    )
    shape = ("estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--prompt-tokens", "4000")

    def prefill(engine: str, *dtypes: str) -> Any:
        return run_json(capsys, *shape, *dtypes, "--engine", engine)["prefill"]

    int4 = ("--weights", "int4")
    before, after = prefill(plain, *int4), prefill(unpacking, *int4)
    assert before["bound"] == "compute"
    matmul_s = (
        before["compute_s"] - before["attention_flops"] / H100_SXM_BF16_MATMUL
    )  # attention unpacks nothing
    assert after["compute_s"] == pytest.approx(before["compute_s"] + matmul_s, rel=1e-9)
    fp8 = ("--weights", "fp8", "--maths", "fp8")
    assert prefill(unpacking, *fp8)["compute_s"] == pytest.approx(
        prefill(plain, *fp8)["compute_s"], rel=1e-12
    )


def test_a_vendor_reaches_its_own_shares_of_flops_and_of_bandwidth(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On an MI300X (AMD's data sheet: 1,307 TFLOP/s dense bf16, 5.3 TB/s; a large matmul
    sustains 668.4 of those, the catalogue's 0.5114), a profile with vendor amd = 0.5 and
    vendor_memory amd = 0.8: a prefill's arithmetic at half that, a decode step's weights at
    0.8 of the bandwidth."""
    path = write_profile(tmp_path, PERFECT + "vendor = { amd = 0.5 }\nvendor_memory = { amd = 0.8 }\n")
    shape = ("--model", "llama-3.1-8b", "--gpu", "mi300x", "--prompt-tokens", "4000")
    out = run_json(capsys, "estimate", *shape, "--engine", path)
    assert out["decode"]["weight_s"] == pytest.approx(
        (PARAMS_8B - EMBEDDING_8B) * 2 / (5.3e12 * 0.8), rel=1e-9
    )
    linear = 2 * (PARAMS_8B - 2 * EMBEDDING_8B) * 4000 + 2 * EMBEDDING_8B  # no lookup, one lm_head row
    attention = out["prefill"]["attention_flops"]
    assert out["prefill"]["compute_s"] == pytest.approx(
        (linear + attention) / (1307e12 * 0.5114 * 0.5), rel=1e-9
    )


def test_a_prediction_names_the_terms_no_published_run_moved(tmp_path: Path) -> None:
    """The corpus holds vLLM on MI300Xs but no SGLang run on an AMD part, and llama.cpp only in
    fp16 and quantised formats: an estimate says which of its profile's terms stand at their
    priors, as the keys of engines.toml, and its explanation names them."""
    from ridgeline import estimate
    from ridgeline.accuracy import corpus

    rows = corpus.rows()
    assert any(r.engine == "vllm" and r.gpu == "mi300x" for r in rows)
    assert not any(r.engine == "sglang" and r.gpu in ("mi300x", "mi325x") for r in rows)
    assert not any(r.engine == "llamacpp" and r.maths == "fp8" for r in rows)
    shape = {"model": "llama-3.1-70b", "gpu": "mi300x", "tp": 4}
    sglang = estimate(**shape, engine="sglang")
    assert sglang.unmeasured is not None and {"vendor.amd", "vendor_memory.amd"} <= set(sglang.unmeasured)
    assert "vendor.amd" in sglang.explain[-1] and "priors" in sglang.explain[-1]
    vllm = estimate(**shape, engine="vllm")
    assert vllm.unmeasured is not None and "vendor.amd" not in vllm.unmeasured
    on_4090 = {"model": "llama-2-7b", "gpu": "rtx-4090", "engine": "llamacpp", "in_process": True}
    assert "gemm.fp8" in (estimate(**on_4090, weights="fp8", maths="fp8").unmeasured or [])
    assert estimate(**on_4090, weights="fp16", maths="fp16acc16").unmeasured == []
    # every llama.cpp row ran in process (llama-bench): its server's first token is a prior
    assert not any(r.http for r in rows if r.engine == "llamacpp")
    served = estimate(**{**on_4090, "in_process": False}, weights="fp16", maths="fp16acc16")
    assert served.unmeasured == ["first_token_s"]
    assert estimate(**shape).unmeasured is None  # no engine: nothing claimed
    mine = write_profile(tmp_path, PERFECT)  # a user's profile says nothing of where it came from
    assert estimate(**shape, engine=mine).unmeasured == []


def test_every_term_a_corpus_deployment_rests_on_was_fitted() -> None:
    """The fit moves a term when a row's prediction rests on it, and an estimate calls a term
    unmeasured when the fit left it at its prior: both ask the profile (`terms`). So every
    term a corpus row's deployment rests on names the rows the fit gave it, that row among
    them where the list is whole: the rows that moved it, or, where none did (a bound that
    binds on none of them, as llama.cpp's cores' streaming of 8-bit weights on an RTX 4090's
    GDDR6X), the rows that do not move it, and then the estimate calls it unmeasured."""
    from ridgeline.accuracy import corpus

    builtin = engines()
    unmoved = set()
    for r in corpus.rows():
        profile = builtin[r.engine]
        d = corpus.deployment(r, profile)
        for key in profile.terms(d):
            said = profile.provenance[key]
            assert r.id in said or "…" in said, (r.id, key)
            if said.startswith("fitted to "):
                assert key not in profile.unmeasured(d)
            else:
                assert said.endswith("do not move it") and key in profile.unmeasured(d), (r.id, key)
                unmoved.add((r.engine, key))
    assert unmoved == {("llamacpp", "stream.w8"), ("vllm", "dequant.w8")}


def test_a_prediction_names_the_terms_one_source_alone_moved() -> None:
    """A term that only one source's runs rest on stands at its prior in the fold that
    leaves that source out: an estimate names it, worked out here from the corpus's rows and
    sources, not from the provenance the fit wrote."""
    from ridgeline import estimate
    from ridgeline.accuracy import corpus, fit

    builtin = engines()
    params = {p.key: p for p in fit.PARAMS}
    sources: dict[tuple[str, str], set[str]] = {}
    deployed = []
    for r in corpus.rows():
        profile = builtin[r.engine]
        d = replace(corpus.deployment(r, profile), in_process=not r.http)  # a run over HTTP, served
        deployed.append((profile, d))
        terms = profile.terms(d)
        for key in profile.rests_on(d):  # the rows the fit gives a term: those that rest on it
            uses = params[key].uses
            if uses(r, d) if uses else key in terms:
                sources.setdefault((r.engine, key), set()).add(r.group)
    for profile, d in deployed:
        fitted = [k for k in profile.rests_on(d) if profile.provenance[k].startswith("fitted to ")]
        alone = [k for k in fitted if len(sources[profile.name, k]) == 1]
        assert profile.one_source(d) == alone
    assert sources["trtllm", "first_token_s"] == {"GPUStack performance lab"}  # F16's page
    # llama.cpp's quantised prompts multiply on int8 tensor cores, and one pull request's
    # runs alone measured that
    int8 = {r.group for r in corpus.rows() if r.engine == "llamacpp" and r.maths == "int8"}
    assert len(int8) == 1
    q4 = estimate(model="llama-2-7b", gpu="rtx-4090", engine="llamacpp", weights="int4")
    assert q4.one_source is not None and "gemm.int8" in q4.one_source
    assert "gemm.int8" in q4.explain[-1] and "one source" in q4.explain[-1]
    f16 = estimate(model="llama-2-7b", gpu="rtx-4090", engine="llamacpp", weights="fp16", maths="fp16acc16")
    assert f16.one_source == []  # its rate, bandwidth and overheads come from four sources
    assert estimate(model="llama-2-7b", gpu="rtx-4090").one_source is None  # no engine: nothing claimed


def test_a_servers_own_process_costs_per_request_and_per_streamed_token(tmp_path: Path) -> None:
    from ridgeline.engines import get_engine

    costs = "request_s = 0.004, prompt_token_s = 3e-05, stream_token_s = 5e-05"
    p = get_engine(write_profile(tmp_path, PERFECT + f"overhead = {{ {costs} }}\n"))
    assert p.server_s(1000, 128_000, 4000) == pytest.approx(1000 * 0.004 + 128_000 * 3e-05 + 4000 * 5e-05)
    assert get_engine(write_profile(tmp_path, PERFECT, "plain.toml")).server_s(1000, 128_000, 4000) == 0.0


def test_the_simulator_charges_a_prefill_one_sequences_cost_not_one_per_token(tmp_path: Path) -> None:
    """A per-sequence cost of 10 ms and a 2,000-token prompt: its prefill step samples one
    token, so it costs 10 ms more than the roofline, not 20 s (the estimate agrees)."""
    from ridgeline.deployment import Deployment
    from ridgeline.simulate import Workload, simulate
    from ridgeline.simulate.workload import Lengths
    from ridgeline.step import prefill_step

    d = Deployment.build(
        "llama-3.1-8b",
        "h100-sxm",
        engine=write_profile(tmp_path, PERFECT + "overhead = { per_sequence_s = 0.01 }\n"),
    )
    plain = Deployment.build(
        "llama-3.1-8b", "h100-sxm", engine=write_profile(tmp_path, PERFECT, "plain.toml")
    )
    roofline_s = float(prefill_step(plain, 2000).time_s)
    one = {"arrival": "constant", "rate_per_s": 1.0, "requests": 1, "duration_s": None}
    w = Workload(prompt=Lengths("fixed", 2000), output=Lengths("fixed", 1), **one)
    record = simulate(d, w).records[0]
    assert record["ttft_s"] == pytest.approx(roofline_s + 0.01, rel=1e-6)
    assert float(prefill_step(d, 2000).time_s) == pytest.approx(roofline_s + 0.01, rel=1e-9)


def test_a_run_offered_more_than_its_api_server_passes_on_says_so() -> None:
    """An engine's OpenAI server is one process per replica: it parses, tokenises and streams
    every request (the profile's request_s, prompt_token_s and stream_token_s), so it passes
    at most 1 / (its work on a request) requests a second to the engine, whatever the GPU."""
    from ridgeline.deployment import Deployment
    from ridgeline.simulate.run import simulate
    from ridgeline.simulate.workload import Lengths, Workload

    p = engines()["vllm"]
    each_s = p.request_s + 100 * p.prompt_token_s + 101 * p.stream_token_s  # 100 in, 101 streamed
    capacity = 1 / each_s
    d = Deployment.build("llama-3.1-8b", "h100-sxm", engine="vllm")

    def warnings(rate: float, replicas: int = 1, engine: bool = True) -> tuple[str, ...]:
        w = Workload(
            Lengths("fixed", 100), Lengths("fixed", 100), rate_per_s=rate, requests=600, duration_s=None
        )
        m = d if engine else Deployment.build("llama-3.1-8b", "h100-sxm")
        summary = simulate(m, w, replicas=replicas).summary
        assert summary is not None
        return tuple(x for x in summary.warnings if x.startswith("server-bound"))

    (over,) = warnings(1.25 * capacity)
    assert over.startswith("server-bound: vLLM's API server")
    assert f"works {each_s * 1e3:.3g} ms" in over and f"at most {capacity:.3g} requests/s" in over
    assert f"below the {1.25 * capacity:.3g}/s each replica" in over
    assert warnings(0.5 * capacity) == ()
    assert warnings(1.25 * capacity, replicas=2) == ()  # each server has half the rate
    assert warnings(1.25 * capacity, engine=False) == ()  # no profile, no server costs


A100_SXM_BF16_MATMUL = 312e12 * 0.8692  # data sheet, dense bf16, x the MAMF share (271.2 TFLOP/s)


def test_attention_with_sinks_runs_at_its_own_share_before_hopper(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gpt-oss has attention sinks, which an engine may run through other kernels than its
    usual ones on a part before Hopper: a profile's sinks = 0.5 halves that model's attention
    FLOP/s on an A100, so a prefill's attention takes twice as long and its matmuls the same;
    a model without sinks is left alone, and so is an H100, whose flash kernels carry the
    sinks (its catalogue entry says async_mma)."""
    plain = write_profile(tmp_path, PERFECT, "plain.toml")
    sinks = write_profile(tmp_path, PERFECT.replace("experts = 1.0 }", "experts = 1.0, sinks = 0.5 }"))

    def prefill(engine: str, model: str, gpu: str = "a100-80gb-sxm") -> Any:
        shape = ("--model", model, "--gpu", gpu, "--prompt-tokens", "4000")
        return run_json(capsys, "estimate", *shape, "--engine", engine)["prefill"]

    before, after = prefill(plain, "gpt-oss-20b"), prefill(sinks, "gpt-oss-20b")
    attention_s = (
        before["attention_flops"] / A100_SXM_BF16_MATMUL
    )  # a perfect profile: the whole achievable rate
    assert attention_s > 0.01 * before["compute_s"]
    assert after["compute_s"] == pytest.approx(before["compute_s"] + attention_s, rel=1e-9)
    assert prefill(sinks, "llama-3.1-8b")["compute_s"] == pytest.approx(
        prefill(plain, "llama-3.1-8b")["compute_s"], rel=1e-12
    )
    assert prefill(sinks, "gpt-oss-20b", "h100-sxm")["compute_s"] == pytest.approx(
        prefill(plain, "gpt-oss-20b", "h100-sxm")["compute_s"], rel=1e-12
    )


def test_a_routed_expert_sees_the_tokens_of_the_experts_a_step_touches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A decode step of one sequence on gpt-oss-120b (4 of 128 experts a token): it runs
    only the 4 experts its token picks, each a matmul of one row, as every dense matmul of
    the step is. With half_m_tokens = 63 against a 64-row tile every matmul reaches
    1 / (1 + 63) of its rate, experts too, so the step's matmuls take 64 times as long as a
    profile without the falloff says; attention, at its own rate, is left alone. (Spread
    over all 128 experts, an expert's M would be 4/128 and its matmuls 2,000 times slower.)
    Both profiles set the vector units aside (gemm.fp32 at its least), so that no dense
    matmul of the one token runs as a matrix-vector kernel instead."""
    no_vector = PERFECT.replace("gemm = { bf16 = 1.0 }", "gemm = { bf16 = 1.0, fp32 = 0.0001 }")
    flat = write_profile(tmp_path, no_vector, "flat.toml")
    skinny = write_profile(tmp_path, no_vector.replace("half_m_tokens = 0.0", "half_m_tokens = 63.0"))

    def matmul_s(engine: str) -> float:
        shape = ("--model", "gpt-oss-120b", "--gpu", "h100-sxm", "--prompt-tokens", "100")
        step = run_json(capsys, "estimate", *shape, "--output-tokens", "2", "--engine", engine)["decode"]
        return float(step["compute_s"] - step["attention_flops"] / H100_SXM_BF16_MATMUL)

    assert matmul_s(skinny) == pytest.approx(64 * matmul_s(flat), rel=1e-9)


def assert_matmuls_halved_on_an_h100(
    capsys: pytest.CaptureFixture[str],
    plain: str,
    halved: str,
    weights: str,
    untouched: tuple[tuple[str, str], ...],
) -> None:
    """A compute-bound 4,000-token prefill of Llama 3.1 8B in `weights` on an H100 takes its
    matmul time (its compute time but attention's, at the bf16 matmul rate) longer under the
    profile `halved` than under `plain`; each (gpu, weights) of `untouched` takes as long."""

    def prefill(engine: str, gpu: str, weights: str) -> Any:
        shape = ("--model", "llama-3.1-8b", "--gpu", gpu, "--prompt-tokens", "4000", "--weights", weights)
        return run_json(capsys, "estimate", *shape, "--engine", engine)["prefill"]

    before, after = prefill(plain, "h100-sxm", weights), prefill(halved, "h100-sxm", weights)
    assert before["bound"] == "compute"
    matmul_s = before["compute_s"] - before["attention_flops"] / H100_SXM_BF16_MATMUL
    assert after["compute_s"] == pytest.approx(before["compute_s"] + matmul_s, rel=1e-9)
    for gpu, kind in untouched:
        assert prefill(halved, gpu, kind)["compute_s"] == pytest.approx(
            prefill(plain, gpu, kind)["compute_s"], rel=1e-12
        )


def test_weight_only_matmuls_lose_more_on_a_part_that_needs_asynchronous_mma(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """dequant_async = 0.5: int4 weights under bf16 maths on an H100 (Hopper's full rate needs
    wgmma) run their matmuls at half the rate again, attention untouched; on an A100 (no
    asynchronous MMA) and for bf16 weights nothing changes."""
    plain = write_profile(tmp_path, PERFECT, "plain.toml")
    hopper = write_profile(
        tmp_path, PERFECT.replace("experts = 1.0 }", "experts = 1.0, dequant_async = 0.5 }")
    )
    untouched = (("a100-80gb-sxm", "int4"), ("h100-sxm", "bf16"))
    assert_matmuls_halved_on_an_h100(capsys, plain, hopper, "int4", untouched)


def test_a_warp_mma_only_profile_loses_it_on_every_matmul(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """warp_mma_only = true with dequant_async = 0.5 (llama.cpp's kernels): bf16 weights on an
    H100 run their matmuls at half the rate too, so a 4,000-token prefill takes its matmul
    time again; attention and an A100 are untouched; int4 weights lose it once, not twice;
    the flag round-trips through a profile's TOML, llama.cpp's with it; "yes" is refused in
    one line that names the field."""
    halved = "experts = 1.0, dequant_async = 0.5"
    plain = write_profile(tmp_path, PERFECT.replace("experts = 1.0 }", halved + " }"), "plain.toml")
    warp = write_profile(tmp_path, PERFECT.replace("experts = 1.0 }", halved + ", warp_mma_only = true }"))
    untouched = (("a100-80gb-sxm", "bf16"), ("h100-sxm", "int4"))
    assert_matmuls_halved_on_an_h100(capsys, plain, warp, "bf16", untouched)
    from ridgeline.engines import builtin_engines, get_engine, profile_to_toml

    for profile in (get_engine(warp), get_engine(plain), *builtin_engines().values()):
        again = get_engine(write_profile(tmp_path, profile_to_toml(profile), "again.toml"))
        assert again == profile and again.warp_mma_only == profile.warp_mma_only
    assert builtin_engines()["llamacpp"].warp_mma_only
    bad = write_profile(
        tmp_path, PERFECT.replace("experts = 1.0 }", 'experts = 1.0, warp_mma_only = "yes" }'), "bad.toml"
    )
    assert main(["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", bad]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "warp_mma_only" in err


def test_an_unpack_async_profile_keeps_the_asynchronous_rate_for_weight_only_matmuls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """unpack_async = true with dequant_async = 0.5 (TensorRT-LLM's kernels unpack into
    Hopper's wgmma operands): int4 weights under bf16 maths on an H100 run their matmuls at
    the rate of a profile without dequant_async, so its prefill takes the matmul time it
    would have taken at a dequant_async of 1; the flag round-trips through TOML,
    TensorRT-LLM's with it, and "yes" is refused in one line that names the field."""
    halved = "experts = 1.0, dequant_async = 0.5"
    slow = write_profile(tmp_path, PERFECT.replace("experts = 1.0 }", halved + " }"), "slow.toml")
    fast = write_profile(tmp_path, PERFECT.replace("experts = 1.0 }", halved + ", unpack_async = true }"))
    untouched = (("a100-80gb-sxm", "int4"), ("h100-sxm", "bf16"))
    assert_matmuls_halved_on_an_h100(capsys, fast, slow, "int4", untouched)
    from ridgeline.engines import builtin_engines, get_engine, profile_to_toml

    again = get_engine(write_profile(tmp_path, profile_to_toml(get_engine(fast)), "again.toml"))
    assert again == get_engine(fast) and again.unpack_async
    assert builtin_engines()["trtllm"].unpack_async and not builtin_engines()["vllm"].unpack_async
    bad = write_profile(
        tmp_path, PERFECT.replace("experts = 1.0 }", 'experts = 1.0, unpack_async = "yes" }'), "bad.toml"
    )
    assert main(["estimate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--engine", bad]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "unpack_async" in err


def test_grouped_expert_matmuls_lose_more_on_a_part_that_needs_asynchronous_mma(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """experts_async = 0.5: Mixtral's routed experts on an H100 run their grouped matmuls at
    half the rate again, so a 4,000-token prefill takes exactly their FLOPs at the matmul rate
    longer: 4,000 tokens x 32 layers x 2 experts x 3 matrices of 4,096 x 14,336 x 2 FLOPs
    (by hand); the dense matmuls and attention are untouched. On an A100 (no asynchronous
    MMA) and for a dense model nothing changes; a share of 2 is refused in one line."""
    plain = write_profile(tmp_path, PERFECT, "plain.toml")
    hopper = write_profile(
        tmp_path, PERFECT.replace("experts = 1.0 }", "experts = 1.0, experts_async = 0.5 }")
    )

    def compute_s(engine: str, model: str, gpu: str) -> float:
        shape = ("--model", model, "--gpu", gpu, "--prompt-tokens", "4000")
        return float(run_json(capsys, "estimate", *shape, "--engine", engine)["prefill"]["compute_s"])

    expert_flops = 4000 * 32 * 2 * 3 * 4096 * 14336 * 2
    assert compute_s(hopper, "mixtral-8x7b", "h100-sxm") == pytest.approx(
        compute_s(plain, "mixtral-8x7b", "h100-sxm") + expert_flops / H100_SXM_BF16_MATMUL, rel=1e-9
    )
    for model, gpu in (("mixtral-8x7b", "a100-80gb-sxm"), ("llama-3.1-8b", "h100-sxm")):
        assert compute_s(hopper, model, gpu) == pytest.approx(compute_s(plain, model, gpu), rel=1e-12)
    bad = write_profile(
        tmp_path, PERFECT.replace("experts = 1.0 }", "experts = 1.0, experts_async = 2.0 }"), "bad.toml"
    )
    assert main(["estimate", "--model", "mixtral-8x7b", "--gpu", "h100-sxm", "--engine", bad]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "experts_async" in err


def test_the_catalogue_says_which_parts_need_asynchronous_mma(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Hopper (wgmma) and datacentre Blackwell (tcgen05) do; Ampere, Ada and GeForce
    Blackwell (warp-level mma) and AMD's parts do not. A user's part says so with true or
    false, nothing else."""
    from ridgeline.hardware import get_accelerator

    for name in ("h100-sxm", "h100-pcie", "h200", "b200", "gb200"):
        assert get_accelerator(name).async_mma, name
    for name in ("a100-80gb-sxm", "l40s", "rtx-4090", "rtx-5090", "rtx-3090", "mi300x"):
        assert not get_accelerator(name).async_mma, name
    path = tmp_path / "gpus.toml"
    path.write_text(
        "[mine]\npeak_flops = { bf16 = 100e12 }\nbandwidth_bytes_per_s = 1e12\n"
        'memory_bytes = 1e10\nasync_mma = "yes"\n',
        encoding="utf-8",
    )
    assert main(["estimate", "--model", "llama-3.2-1b", "--gpu", "mine", "--gpu-file", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "async_mma" in err and "true or false" in err


# NVIDIA's B200 data sheet: dense FLOP/s by dtype, times the share a large matmul sustains
# (MAMF: 1,745 and 3,432.5 TFLOP/s in bf16 and fp8; fp4, not measured, takes fp8's share)
B200_FLOPS = {"bf16": 2.25e15 * 0.7756, "fp8": 4.5e15 * 0.7628, "fp4": 9.0e15 * 0.7628}


@pytest.mark.parametrize(
    ("maths", "kv", "attention_in"),
    [("fp4", "fp8", "fp8"), ("fp4", "bf16", "bf16"), ("fp8", "fp8", "fp8"), ("fp8", "bf16", "bf16"),
     ("bf16", "fp8", "bf16"), ("bf16", "bf16", "bf16")],
)  # fmt: skip
def test_attention_multiplies_in_the_caches_dtype_not_the_weights(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], maths: str, kv: str, attention_in: str
) -> None:
    """Scores and values multiply activations with the KV cache, never the weights: with NVFP4
    matmuls an engine's attention still runs in fp8 over an fp8 cache (at half the fp4 peak),
    and in 16 bits over a 16-bit one; the matmuls run at their own dtype's achievable rate."""
    perfect = PERFECT.replace("gemm = { bf16 = 1.0 }", "gemm = { bf16 = 1.0, fp8 = 1.0, fp4 = 1.0 }")
    shape = ("--model", "llama-3.1-70b", "--gpu", "b200", "--weights", maths, "--maths", maths)
    p = run_json(capsys, "estimate", *shape, "--kv-dtype", kv, "--prompt-tokens", "4000",
                 "--engine", write_profile(tmp_path, perfect))["prefill"]  # fmt: skip
    linear = p["flops"] - p["attention_flops"]
    expected = linear / B200_FLOPS[maths] + p["attention_flops"] / B200_FLOPS[attention_in]
    assert p["attention_flops"] > 0.03 * p["flops"]
    assert p["compute_s"] == pytest.approx(expected, rel=1e-9)


def test_narrow_experts_reach_a_share_of_a_wide_experts_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Qwen3-30B-A3B (its config.json): 48 MoE layers, 8 of 128 experts a token, each expert
    a gate, an up and a down projection between a hidden size of 2,048 and a width of 768. A
    profile's expert_half_width = 768 halves those matmuls' rate, so a prefill's expert
    matmuls take twice as long and the rest the same; a dense model is left alone."""
    plain = write_profile(tmp_path, PERFECT, "plain.toml")
    narrow = write_profile(
        tmp_path, PERFECT.replace("experts = 1.0 }", "experts = 1.0, expert_half_width = 768 }")
    )
    tokens = 4000
    expert_flops = 2 * 48 * 8 * (3 * 2048 * 768) * tokens

    def prefill(engine: str, model: str) -> Any:
        shape = ("--model", model, "--gpu", "h100-sxm", "--prompt-tokens", str(tokens))
        return run_json(capsys, "estimate", *shape, "--engine", engine)["prefill"]

    before, after = prefill(plain, "qwen3-30b-a3b"), prefill(narrow, "qwen3-30b-a3b")
    expert_s = expert_flops / H100_SXM_BF16_MATMUL  # a perfect profile: the whole achievable rate
    assert after["compute_s"] == pytest.approx(before["compute_s"] + expert_s, rel=1e-9)
    assert prefill(narrow, "llama-3.1-8b")["compute_s"] == pytest.approx(
        prefill(plain, "llama-3.1-8b")["compute_s"], rel=1e-12
    )
    from ridgeline.engines import get_engine, profile_to_toml

    again = get_engine(write_profile(tmp_path, profile_to_toml(get_engine(narrow)), "again.toml"))
    assert again.expert_half_width == 768


TILED_GPUS = """
[tile64]
peak_flops = { bf16 = 989e12 }
bandwidth_bytes_per_s = 3.35e12
memory_bytes = 85_899_345_920

[tile128]
peak_flops = { bf16 = 989e12 }
bandwidth_bytes_per_s = 3.35e12
memory_bytes = 85_899_345_920
mma_rows = 128
"""


def test_a_taller_tensor_core_tile_pads_a_short_matmul_further(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A matmul of M tokens reaches M / (M + half_m x mma_rows / 64) of its rate: with a
    half_m of 100, two accelerators alike but for a tile of 64 or 128 rows run a prefill's
    matmuls in (M + 100) / M and (M + 200) / M times their FLOPs over the peak, and its
    attention (a perfect profile's, at the full peak) the same on both."""
    gpus = write_profile(tmp_path, TILED_GPUS, "gpus.toml")
    engine = write_profile(tmp_path, PERFECT.replace("half_m_tokens = 0.0", "half_m_tokens = 100.0"))
    tokens = 300

    def prefill(gpu: str) -> Any:
        shape = ("--gpu", gpu, "--gpu-file", gpus, "--prompt-tokens", str(tokens), "--engine", engine)
        return run_json(capsys, "estimate", *shape)["prefill"]

    short, tall = prefill("tile64"), prefill("tile128")
    attention_s = short["attention_flops"] / H100_SXM_BF16_FLOPS
    assert tall["attention_flops"] == short["attention_flops"]
    matmul_short, matmul_tall = short["compute_s"] - attention_s, tall["compute_s"] - attention_s
    assert matmul_tall / matmul_short == pytest.approx((tokens + 200) / (tokens + 100), rel=1e-12)
    listed = run_json(capsys, "gpus", "--gpu-file", gpus)
    assert (listed["tile64"]["mma_rows"], listed["tile128"]["mma_rows"]) == (64, 128)
    assert (listed["b200"]["mma_rows"], listed["h200"]["mma_rows"]) == (128, 64)


@pytest.mark.parametrize("rows", ["0", "2000", "96.5", "true", '"tall"'])
def test_a_tile_that_no_tensor_core_has_is_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: str
) -> None:
    gpus = write_profile(tmp_path, TILED_GPUS.replace("mma_rows = 128", f"mma_rows = {rows}"), "gpus.toml")
    assert main(["estimate", "--gpu", "tile128", "--gpu-file", gpus]) == 2
    err = capsys.readouterr().err
    assert "mma_rows" in err and err.count("\n") == 1 and "Traceback" not in err


SHARED_GPUS = """
[stated]
peak_flops = { bf16 = 400e12, fp8 = 800e12 }
bandwidth_bytes_per_s = 2.0e12
memory_bytes = 85_899_345_920

[measured]
peak_flops = { bf16 = 400e12, fp8 = 800e12 }
bandwidth_bytes_per_s = 2.0e12
memory_bytes = 85_899_345_920
matmul_share = { bf16 = 0.5 }
"""


def test_an_engines_matmuls_run_at_the_measured_share_of_the_peak_and_a_presets_do_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two accelerators alike but for a measured matmul_share of 0.5: a perfect profile's
    prefill, matmuls and attention alike, takes twice as long on the measured one, in bf16
    and in fp8 (which, not measured itself, takes bf16's share); the ideal preset, which
    reads the data sheet, takes the same on both."""
    gpus = write_profile(tmp_path, SHARED_GPUS, "gpus.toml")
    perfect = write_profile(
        tmp_path, PERFECT.replace("gemm = { bf16 = 1.0 }", "gemm = { bf16 = 1.0, fp8 = 1.0 }")
    )

    def prefill(gpu: str, *how: str) -> Any:
        shape = ("--gpu", gpu, "--gpu-file", gpus, "--prompt-tokens", "4000", "--kv-dtype", "bf16")
        return run_json(capsys, "estimate", *shape, *how)["prefill"]

    for maths in ("bf16", "fp8"):
        engine = ("--engine", perfect, "--weights", maths, "--maths", maths)
        stated, measured = prefill("stated", *engine), prefill("measured", *engine)
        assert stated["bound"] == "compute"
        assert measured["compute_s"] == pytest.approx(2 * stated["compute_s"], rel=1e-12)
    ideal = ("--preset", "ideal")
    assert prefill("measured", *ideal)["time_s"] == pytest.approx(
        prefill("stated", *ideal)["time_s"], rel=1e-12
    )
    listed = run_json(capsys, "gpus", "--gpu-file", gpus)
    assert listed["measured"]["matmul_share"] == {"bf16": 0.5} and listed["stated"]["matmul_share"] == {}
    # the catalogue's, from the MAMF table: 794.5 / 989 and 1,402.6 / 1,979 TFLOP/s on an H100 SXM
    assert listed["h100-sxm"]["matmul_share"] == {"bf16": 0.8033, "fp8": 0.7087}


@pytest.mark.parametrize("share", ["0", "1.5", "-0.2", "nan", '"most"', "0.8", "{ bf16 = true }"])
def test_a_matmul_share_outside_zero_to_one_is_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], share: str
) -> None:
    """A share is of the peak, in (0, 1], given per dtype in a table."""
    table = share if share.startswith("{") or share == "0.8" else f"{{ bf16 = {share} }}"
    text = SHARED_GPUS.replace("matmul_share = { bf16 = 0.5 }", f"matmul_share = {table}")
    gpus = write_profile(tmp_path, text, "gpus.toml")
    assert main(["estimate", "--gpu", "measured", "--gpu-file", gpus]) == 2
    err = capsys.readouterr().err
    assert "matmul_share" in err and err.count("\n") == 1 and "Traceback" not in err


GIB = 2**30


@pytest.mark.parametrize("tp", [1, 2])
def test_vllm_sets_its_samplers_sort_aside_on_every_gpu(tp: int) -> None:
    """vLLM's memory profiling samples max_num_seqs sequences with top-k and top-p: about 26
    bytes a logit on every GPU, where the plan otherwise keeps one fp32 copy split over TP.
    gpt-oss-120b (201,088 logits a sequence), 1,024 sequences."""
    vllm = engines()["vllm"]
    plain = replace(vllm, sampler_bytes=0.0)

    def room(p: Any) -> float:
        d = Deployment.build("gpt-oss-120b", "h200", tp=tp, engine=p)
        return kv_cache(d, max_num_seqs=1024, max_num_batched_tokens=8192).room_bytes_per_gpu

    assert room(plain) - room(vllm) == pytest.approx(1024 * 201_088 * (26 - 4 / tp), rel=1e-9)


def test_vllm_holds_mxfp4_experts_repacked_before_hopper_and_as_stored_on_it() -> None:
    """vLLM issue 23278's load log: gpt-oss-120b resident in 65.9651 GiB through Marlin,
    against OpenAI's 60.8 GiB checkpoint. An A100 holds that; an H100 the checkpoint; a
    dense model or 16-bit weights hold what they store."""

    def held(model: str, gpu: str, **kw: Any) -> tuple[float, float]:
        with_engine = stored_weight_bytes_per_gpu(Deployment.build(model, gpu, engine="vllm", **kw))
        return with_engine, stored_weight_bytes_per_gpu(Deployment.build(model, gpu, **kw))

    repacked, stored = held("gpt-oss-120b", "a100-80gb-sxm")
    assert repacked / GIB == pytest.approx(65.9651, rel=1e-3)
    whole = memory.plan(Deployment.build("gpt-oss-120b", "a100-80gb-sxm", engine="vllm"), 1000)
    assert whole.weight_bytes == whole.per_gpu.weight_bytes == repacked  # one GPU holds it all
    assert stored / GIB == pytest.approx(60.8, rel=5e-3)
    hopper, stored = held("gpt-oss-120b", "h100-sxm")
    assert hopper == stored
    for model, kw in (("gpt-oss-120b", {"weights": "bf16"}), ("llama-3.1-8b", {"weights": "int4-g128"})):
        with_engine, alone = held(model, "a100-80gb-sxm", **kw)
        assert with_engine == alone


def test_whose_limits_under_data_parallel_attention_round_trips_and_is_checked(tmp_path: Path) -> None:
    from ridgeline.engines import get_engine, profile_to_toml

    p = get_engine(write_profile(tmp_path, PERFECT + 'scheduler = { dp_limits = "rank" }\n'))
    assert p.scheduler.dp_limits == "rank"
    assert get_engine(write_profile(tmp_path, profile_to_toml(p), "again.toml")).scheduler == p.scheduler
    assert get_engine(write_profile(tmp_path, PERFECT, "plain.toml")).scheduler.dp_limits == "replica"
    with pytest.raises(RidgelineError, match=r"scheduler\.dp_limits must be one of replica, rank"):
        get_engine(write_profile(tmp_path, PERFECT + 'scheduler = { dp_limits = "gpu" }\n', "bad.toml"))


def test_without_maths_an_engine_runs_its_own_kernels_dtype(capsys: pytest.CaptureFixture[str]) -> None:
    """Asked for no --maths, the matmuls run in the dtype the engine's kernels use for the
    weights, where the part states that peak: llama.cpp's quantised GGUF types on int8 tensor
    cores (MMQ) and F16 in fp16 with fp16 accumulate; vLLM's fp8 weights in fp8 (W8A8) on a
    Hopper but unpacked into bf16 on an A100 (no fp8 peak); and without an engine, bf16."""

    def maths(*argv: str) -> str:
        return str(run_json(capsys, "estimate", *argv)["inputs"]["maths"])

    llama = ("--engine", "llamacpp", "--model", "llama-2-7b", "--gpu", "rtx-4090")
    assert maths(*llama, "--weights", "int4-g32") == "int8"
    assert maths(*llama, "--weights", "int8") == "int8"
    assert maths(*llama, "--weights", "fp16") == "fp16acc16"
    assert maths(*llama, "--weights", "bf16") == "bf16"
    assert maths(*llama, "--weights", "int4-g32", "--maths", "fp16acc16") == "fp16acc16"  # asked: as asked
    assert maths(*llama, "--weights", "int4-g32", "--maths", "auto") == "int8"  # auto: as unasked
    # Metal states no int8 peak: the M2 Ultra runs the quantised weights at fp16's (= bf16's) rate
    assert (
        maths("--engine", "llamacpp", "--model", "llama-2-7b", "--gpu", "m2-ultra", "--weights", "int4")
        == "bf16"
    )
    assert maths("--engine", "vllm", "--gpu", "h100-sxm", "--weights", "fp8") == "fp8"
    assert maths("--engine", "vllm", "--gpu", "a100-80gb-sxm", "--weights", "fp8") == "bf16"
    assert maths("--engine", "trtllm", "--gpu", "b200", "--weights", "fp4") == "fp4"
    assert maths("--engine", "trtllm", "--gpu", "h100-sxm", "--weights", "fp4") == "bf16"
    assert maths("--gpu", "h100-sxm", "--weights", "fp8") == "bf16"  # no engine: the lesson's bf16


def test_llama_cpps_default_maths_reads_its_published_int8_prefill() -> None:
    """llama.cpp pull request 7676 (int8 tensor-core MMQ): Llama 3 8B in Q4_0 on an RTX 4090
    prefills 512 tokens at 10,358.75 tokens a second (corpus row G09). Built without a maths
    dtype, the llama.cpp deployment runs that int8 path and reads it within 10%; bf16 maths,
    the default before, reads it at under half."""
    from ridgeline.accuracy import corpus

    row = next(r for r in corpus.rows() if r.id == "G09")
    assert row.maths == "int8" and row.measured == pytest.approx(10_358.75)
    profile = engines()["llamacpp"]
    arch = corpus.deployment(row, profile).arch
    built = Deployment.build(arch, row.gpu, weights=row.weights, engine=profile)
    assert built.prec.maths == "int8"
    assert corpus.predict(row, profile, built) == pytest.approx(row.measured, rel=0.10)
    bf16 = Deployment.build(arch, row.gpu, weights=row.weights, maths="bf16", engine=profile)
    assert corpus.predict(row, profile, bf16) < 0.5 * row.measured


def test_a_profiles_maths_is_checked_and_round_trips(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ridgeline.engines import get_engine, profile_to_toml

    good = write_profile(
        tmp_path, PERFECT.replace("experts = 1.0 }", 'experts = 1.0, maths = { int4 = "int8" } }')
    )
    p = get_engine(good)
    assert p.maths == {"int4": "int8"}
    again = write_profile(tmp_path, profile_to_toml(p), "again.toml")
    assert get_engine(again).maths == {"int4": "int8"}
    for bad in ('maths = { int4 = "int3" }', 'maths = { int5 = "int8" }', "maths = { int4 = 8 }"):
        path = write_profile(
            tmp_path, PERFECT.replace("experts = 1.0 }", f"experts = 1.0, {bad} }}"), "bad.toml"
        )
        assert main(["estimate", "--engine", path]) == 2
        err = capsys.readouterr().err
        assert "compute.maths maps a weight dtype" in err and err.count("\n") == 1


def test_a_checkpoints_stored_fp8_runs_in_fp8_where_the_engine_would() -> None:
    """DeepSeek-V3's checkpoint stores its linear weights in block-scaled FP8 (its
    quantization_config): vLLM and SGLang run it W8A8 on an H200, and unpack it into bf16 on
    an A100, which has no fp8 peak. gpt-oss's MXFP4 experts are no fp8: weight-only, bf16."""
    from ridgeline.models import get_model

    deepseek = get_model("deepseek-v3")
    assert deepseek.file_dtype == "fp8"
    for engine in ("vllm", "sglang"):
        assert Deployment.build(deepseek, "h200", tp=8, engine=engine).prec.maths == "fp8"
    assert Deployment.build(deepseek, "a100-80gb-sxm", tp=8, engine="vllm").prec.maths == "bf16"
    assert Deployment.build(deepseek, "h200", tp=8).prec.maths == "bf16"  # no engine: the lesson's
    assert Deployment.build("gpt-oss-120b", "h200", engine="vllm").prec.maths == "bf16"


def test_a_matrix_vector_kernel_streams_no_more_than_its_cores_keep_in_flight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A profile with stream w16 = 5 bytes a GPU core a clock: on an A100 SXM (108 SMs at
    1,410 MHz, 2.04 TB/s: the whitepaper and data sheet) a decode step reads its bf16
    weights at 108 x 1.41e9 x 5 = 761 GB/s, the cores' bound, not the bandwidth; on an RTX
    4090 (128 SMs at 2,520 MHz: 1,613 GB/s, above its 1,008 GB/s) at the bandwidth."""
    path = write_profile(tmp_path, PERFECT.replace("kv = 1.0 }", "kv = 1.0, stream = { w16 = 5.0 } }"))
    weights = (PARAMS_8B - EMBEDDING_8B) * 2
    shape = ("--model", "llama-3.1-8b", "--engine", path)
    a100 = run_json(capsys, "estimate", *shape, "--gpu", "a100-80gb-sxm")
    assert a100["decode"]["weight_s"] == pytest.approx(weights / (108 * 1.41e9 * 5.0), rel=1e-9)
    rtx = run_json(capsys, "estimate", *shape, "--gpu", "rtx-4090")
    assert rtx["decode"]["weight_s"] == pytest.approx(weights / 1008e9, rel=1e-9)
    # a user's part that states neither its cores nor its clock has no such bound
    mine = tmp_path / "gpus.toml"
    mine.write_text(
        "[lab]\npeak_flops = { bf16 = 312e12 }\nbandwidth_bytes_per_s = 2.04e12\nmemory_bytes = 80e9\n"
    )
    lab = run_json(capsys, "estimate", *shape, "--gpu", "lab", "--gpu-file", str(mine))
    assert lab["decode"]["weight_s"] == pytest.approx(weights / 2.04e12, rel=1e-9)
    mine.write_text(mine.read_text() + "units = -4\n")
    assert main(["estimate", *shape, "--gpu", "lab", "--gpu-file", str(mine)]) == 2
    assert "lab units" in capsys.readouterr().err


@pytest.mark.parametrize(
    "gpu, measured",
    [
        ("a100-80gb-sxm", 53.49),  # X41: 'A100 SXM 80GB', 8B F16, tg 512
        ("h100-pcie", 68.03),  # X47: 'H100 PCIe 80GB'
    ],
)
def test_llama_cpps_f16_decode_on_hbm_reads_the_published_rate_through_its_cores(
    gpu: str, measured: float
) -> None:
    """XiongjieDai/GPU-Benchmarks-on-LLM-Inference (llama-bench, May 2024): Llama 3 8B in F16
    generated 53.49 tokens/s on an A100 SXM and 68.03 on an H100 PCIe, about 0.86 and 1.09
    TB/s of weights: 42% and 55% of their HBM, where an RTX 4090 reached 87% of its GDDR6X.
    The llama.cpp profile reads them within 15%; without its cores' bound it reads them a
    third and more too fast."""
    from ridgeline.accuracy.corpus import check_rows, deployment, predict, rows

    row = next(r for r in (*rows(), *check_rows()) if r.gpu == gpu and r.kind == "tg" and r.weights == "fp16")
    assert row.measured == measured
    profile = engines()["llamacpp"]
    assert profile.stream, "the llama.cpp profile states its kernels' streaming"
    assert predict(row, profile) == pytest.approx(measured, rel=0.15)
    unbounded = replace(profile, stream={})
    assert predict(row, unbounded, deployment(row, unbounded)) > 1.33 * measured


def test_a_few_tokens_multiply_on_the_vector_units_not_a_padded_tensor_tile() -> None:
    """At one token a pass, vLLM's int4 matmuls on an RTX 3090 run as a matrix-vector kernel
    on its CUDA cores: 35.6 TFLOP/s of fp32 (the data sheet) x gemm.fp32 x dequant.w4. A
    tensor tile padded to 64 rows would reach 71 TFLOP/s (bf16, fp32 accumulate) x its
    measured matmul_share x gemm.bf16 x dequant.w4 / (1 + half_m): less, and batch-1 decode
    would turn compute-bound, which no GEMV is. At 512 tokens the tensor cores win; an M2
    Ultra, whose only units are its vector ones, keeps the falloff."""
    from ridgeline.deployment import Deployment
    from ridgeline.step import decode_step

    p = engines()["vllm"]
    d = Deployment.build("llama-3.1-8b", "rtx-3090", engine="vllm", weights="int4")
    vector = 35.6e12 * p.gemm["fp32"] * p.dequant["w4"]
    tile = 71e12 * d.hw.matmul_share["bf16"] * p.gemm["bf16"] * p.dequant["w4"]
    padded = tile / (1 + p.half_m_tokens)
    assert padded < vector
    assert p.rates(d, 1).linear_flops_per_s == pytest.approx(vector, rel=1e-9)
    assert decode_step(d, 128).bound == "memory"
    large = tile * 512 / (512 + p.half_m_tokens)
    assert p.rates(d, 512).linear_flops_per_s == pytest.approx(large, rel=1e-9)
    mac = Deployment.build("llama-3.1-8b", "m2-ultra", engine="llamacpp", weights="int4")
    llama = engines()["llamacpp"]
    tile = (
        mac.hw.sustained(mac.prec.maths)
        * llama.gemm_efficiency(mac.prec.maths)
        * llama.vendor_factor("apple")
    )
    unpack = llama.dequant_factor("w4", mac.prec.maths)
    falloff = tile * unpack / (1 + llama.half_m_tokens * mac.hw.mma_rows / 64)
    assert llama.rates(mac, 1).linear_flops_per_s == pytest.approx(falloff, rel=1e-9)


def test_every_matmul_share_a_profile_states_says_where_it_came_from() -> None:
    """Each of a built-in profile's gemm shares is fitted or says why not: fp32's, which also
    sets the vector units' floor under a few tokens' matmuls, is a prior no row moves."""
    for name, p in engines().items():
        if name not in ("vllm", "sglang", "trtllm", "llamacpp"):
            continue
        for dtype in p.gemm:
            assert f"gemm.{dtype}" in p.provenance, (name, dtype)
        assert p.provenance["gemm.fp32"].startswith(f"prior {p.gemm['fp32']:.4g}: the share of the vector")


# --- a run inside the engine's process: no server before the first token ---------------------


@pytest.mark.parametrize("name", ["vllm", "sglang", "trtllm", "llamacpp"])
def test_in_process_ttft_is_the_prefill_and_over_http_adds_the_servers_cost(name: str) -> None:
    """Over HTTP a first token waits the prefill and the server's first-token cost, the
    profile's own `first_token_s`; inside the engine's process (--in-process) the prefill alone."""
    from ridgeline import estimate

    served = estimate(engine=name, prompt=512, output=64)
    local = estimate(engine=name, prompt=512, output=64, in_process=True)
    first_token_s = engines()[name].first_token_s
    assert first_token_s > 0
    assert served.ttft_s == pytest.approx(served.prefill.time_s + first_token_s, rel=1e-12)
    assert local.ttft_s == local.prefill.time_s == served.prefill.time_s
    assert local.tpot_s == served.tpot_s  # the steps are the same steps
    assert (served.inputs["in_process"], local.inputs["in_process"]) == (False, True)
    assert (served.inputs["ttft_offset_s"], local.inputs["ttft_offset_s"]) == (first_token_s, 0.0)
    assert not any("server spends" in line for line in local.explain)  # nothing to split


def test_in_process_drops_a_calibrations_offset_too(tmp_path: Path) -> None:
    from ridgeline import estimate

    cal = tmp_path / "cal.json"
    cal.write_text(
        '{"effective_flops_per_s": 5e14, "effective_bandwidth_bytes_per_s": 2.6e12, "ttft_offset_s": 0.04}'
    )
    served = estimate(calibration=str(cal))
    local = estimate(calibration=str(cal), in_process=True)
    assert served.ttft_s - local.ttft_s == pytest.approx(0.04, rel=1e-12)
    assert local.ttft_s == local.prefill.time_s


def test_the_cli_prices_an_in_process_corpus_row_as_the_accuracy_report_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """B07 (llama.cpp PR 4766: llama-bench pp512 of Llama 2 7B F16 on an RTX 3090, in process)
    is priced without a server by the accuracy report; `estimate --in-process` gives the same
    number, and without the flag a slower one by the profile's first-token cost."""
    from ridgeline.accuracy import corpus

    row = next(r for r in corpus.rows() if r.id == "B07")
    assert not row.http and row.kind == "pp" and row.input == 512
    report = corpus.predict(row, engines()["llamacpp"])  # tokens/s
    argv = ["estimate", "--model", "llama-2-7b", "--gpu", "rtx-3090", "--weights", "fp16", "--maths",
            "fp16acc16", "--kv-dtype", "fp16", "--engine", "llamacpp", "-p", "512", "-o", "1"]  # fmt: skip
    local = run_json(capsys, *argv, "--in-process")
    served = run_json(capsys, *argv)
    assert 512 / local["ttft_s"] == pytest.approx(report, rel=1e-9)
    assert served["ttft_s"] - local["ttft_s"] == pytest.approx(engines()["llamacpp"].first_token_s, rel=1e-9)


def test_in_process_has_no_server_to_outrun() -> None:
    """The simulator warns when a replica is offered more requests than its API server passes
    on; a run inside the engine's process has no API server, so no warning, and its requests'
    TTFTs are the served run's less the first-token cost, request by request."""
    from ridgeline.simulate import Lengths, Workload, simulate
    from ridgeline.simulate.report import server_warning

    served = Deployment.build("llama-3.1-8b", "h100-sxm", engine="vllm")
    local = Deployment.build("llama-3.1-8b", "h100-sxm", engine="vllm", in_process=True)
    each_s = served.engine.server_s(1, 100, 10)  # its server's work on one request
    rate = 2 / each_s  # twice what one server process passes on
    assert server_warning(served, 100, 10, rate, 1) is not None
    assert server_warning(local, 100, 10, rate, 1) is None
    w = Workload(prompt=Lengths("fixed", 300), output=Lengths("fixed", 40), rate_per_s=4.0, requests=60,
                 duration_s=None)  # fmt: skip
    ttfts = [[r["ttft_s"] for r in simulate(d, w).records] for d in (served, local)]
    offset = served.engine.first_token_s
    assert all(a - b == pytest.approx(offset, rel=1e-9) for a, b in zip(*ttfts, strict=True))
