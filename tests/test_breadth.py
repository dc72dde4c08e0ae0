"""Any model, any accelerator, any precision, any parallelism: published values and the
lesson's sentences about quantisation, tensor parallelism and memory fit."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import ridgeline
from conftest import DATA, cli_json, run_cli
from ridgeline import RidgelineError, estimate
from ridgeline.deployment import Deployment
from ridgeline.hf_config import architecture_from_config
from ridgeline.ledger import distinct_experts, kv_bytes, kv_bytes_per_token, pass_work
from ridgeline.memory import plan
from ridgeline.models import get_model
from ridgeline.operators import operator_rows
from ridgeline.parallel import expected_max_of_normals, expert_load, make_parallel
from ridgeline.precision import Precision
from ridgeline.step import decode_step, uniform
from ridgeline.sweep import decode_grid

PUBLISHED = {
    # name: (parameters, active parameters, KV bytes per token in bf16)
    "qwen2.5-7b": (7.62e9, 7.62e9, 57_344),
    "mixtral-8x7b": (46.7e9, 12.9e9, 131_072),
    "deepseek-v3": (671.0e9, 37.6e9, 70_272),
    "gemma-2-9b": (9.24e9, 9.24e9, 344_064),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameters_and_kv_from_config_json(name: str) -> None:
    total, active, kv = PUBLISHED[name]
    arch = get_model(str(DATA / name / "config.json"))
    assert arch.parameters == pytest.approx(total, rel=0.01)
    assert arch.active_parameters == pytest.approx(active, rel=0.01)
    assert kv_bytes_per_token(arch, Precision()) == kv


def test_json_carries_active_parameters_for_moe() -> None:
    data = cli_json("estimate", "--model", str(DATA / "mixtral-8x7b" / "config.json"), "--tp", "2")
    assert data["model"]["active_parameters"] == pytest.approx(12.9e9, rel=0.01)
    assert data["model"]["parameters"] == pytest.approx(46.7e9, rel=0.01)


def test_qwen3_235b_counted_by_hand() -> None:
    """Qwen3-235B-A22B (the catalogue entry, from its config.json): per layer, attention
    (64 query and 4 KV heads of 128, q/k norms, two RMSNorms), a 128-way router and 128
    experts of width 1,536 (8 routed a token); untied 151,936-token embeddings."""
    attention = 4096 * 64 * 128 + 2 * 4096 * 4 * 128 + 64 * 128 * 4096 + 2 * 128 + 2 * 4096
    router, expert = 4096 * 128, 3 * 4096 * 1536
    outside = 2 * 151_936 * 4096 + 4096
    arch = get_model("qwen3-235b-a22b")
    assert arch.parameters == 94 * (attention + router + 128 * expert) + outside  # 235.1 B
    assert arch.active_parameters == 94 * (attention + router + 8 * expert) + outside  # 22.2 B
    assert kv_bytes_per_token(arch, Precision()) == 94 * 2 * 4 * 128 * 2


def test_qwen25_small_counted_by_hand() -> None:
    """Qwen2.5-0.5B, 1.5B and 3B (the catalogue entries, from their config.json): per layer,
    attention with q/k/v biases (14, 12 and 16 query heads, 2 KV heads, of 896 / 14 = 64 and
    128 wide) and two RMSNorms, a SwiGLU MLP; one 151,936-token embedding, tied to the lm_head.
    Model cards: 0.49B, 1.54B and 3.09B; without the embedding 0.36B, 1.31B and 2.77B."""
    for name, h, heads, head, mlp, layers, cards in (
        ("qwen2.5-0.5b", 896, 14, 64, 4864, 24, (0.49e9, 0.36e9)),
        ("qwen2.5-1.5b", 1536, 12, 128, 8960, 28, (1.54e9, 1.31e9)),
        ("qwen2.5-3b", 2048, 16, 128, 11008, 36, (3.09e9, 2.77e9)),
    ):
        q, kv = heads * head, 2 * head
        attention = h * q + q + 2 * (h * kv + kv) + q * h
        per_layer = attention + 3 * h * mlp + 2 * h
        arch = get_model(name)
        assert arch.parameters == layers * per_layer + h + 151_936 * h
        assert arch.parameters == pytest.approx(cards[0], rel=0.01)  # the cards round to 3 figures
        assert layers * per_layer + h == pytest.approx(cards[1], rel=0.01)
        assert kv_bytes_per_token(arch, Precision()) == layers * 2 * 2 * head * 2
    assert get_model("qwen2.5-0.5b").parameters == 494_032_768  # the count its checkpoint loads with
    assert get_model("Qwen/Qwen2.5-1.5B-Instruct").name == "qwen2.5-1.5b"


def test_glm_moe_counted_by_hand() -> None:
    """GLM-4.5-Air and GLM-4.6 (glm4_moe, from their config.json): per layer, attention (96
    query and 8 KV heads of 128, with q/k/v biases; q/k norms on GLM-4.6) and two RMSNorms;
    the first 1 (Air) or 3 layers run a dense MLP, every later one a router with a score
    correction, one shared expert and 128 or 160 routed experts (8 a token); untied
    151,552-token embeddings. Model cards: 106B total, 12B active; 355B, 32B (both leave out
    the input embedding; 4.6's counts its multi-token-prediction layer, which serving without
    speculation does not load)."""
    for name, h, layers, dense, mlp, experts, width, qk_norm, cards in (
        ("glm-4.5-air", 4096, 46, 1, 10944, 128, 1408, 0, (106e9, 12e9)),
        ("glm-4.6", 5120, 92, 3, 12288, 160, 1536, 2 * 128, (355e9, 32e9)),
    ):
        attention = h * 96 * 128 + 2 * h * 8 * 128 + 96 * 128 * h + 96 * 128 + 2 * 8 * 128 + qk_norm
        moe = h * experts + experts + 3 * h * width  # router, its correction, the shared expert
        expert = 3 * h * width
        outside = 2 * 151_552 * h + h

        fixed = layers * (attention + 2 * h) + dense * 3 * h * mlp + (layers - dense) * moe + outside
        arch = get_model(name)
        assert arch.parameters == fixed + (layers - dense) * experts * expert
        assert arch.active_parameters == fixed + (layers - dense) * 8 * expert
        total, active = cards
        assert arch.parameters == pytest.approx(total, rel=0.02)
        assert arch.active_parameters - 151_552 * h == pytest.approx(active, rel=0.07)
        assert kv_bytes_per_token(arch, Precision()) == layers * 2 * 8 * 128 * 2


def test_llama4_counted_by_hand() -> None:
    """Llama 4 Scout and Maverick (llama4_text, from their config.json): per layer, attention
    (40 query and 8 KV heads of 128; its q/k L2 norm has no weights) and two RMSNorms; an MoE
    layer holds a router, one shared expert and 16 or 128 routed experts of 8,192 (one a
    token), and Maverick's every other layer a dense MLP of 16,384; untied 202,048-token
    embeddings. Model cards: 17B active each; 109B and 400B total for the whole checkpoint,
    whose vision encoder the text model leaves out."""
    h = 5120
    attention = h * 40 * 128 + 2 * h * 8 * 128 + 40 * 128 * h
    expert = 3 * h * 8192
    outside = 2 * 202_048 * h + h
    for name, experts, moe_layers in (("llama-4-scout", 16, 48), ("llama-4-maverick", 128, 24)):
        moe = h * experts + expert  # the router and the shared expert
        fixed = 48 * (attention + 2 * h) + (48 - moe_layers) * 3 * h * 16384 + moe_layers * moe + outside
        arch = get_model(name)
        assert arch.parameters == fixed + moe_layers * experts * expert
        assert arch.active_parameters == fixed + moe_layers * expert
        assert arch.active_parameters == pytest.approx(17e9, rel=0.02)
    assert get_model("llama-4-scout").parameters == pytest.approx(109e9, rel=0.02)
    assert get_model("llama-4-maverick").parameters == pytest.approx(400e9, rel=0.01)


def test_llama4_chunked_layers_cap_the_cache_at_a_chunk() -> None:
    """Three layers in four (each but the fourth, which has no RoPE) attend within 8,192-token
    chunks: at 100,000 tokens of context they hold 8,192 tokens each, the other 12 all of them.
    A multimodal config.json reads its text_config; a no_rope_layers of the wrong length is
    one clear line."""
    arch = get_model("llama-4-maverick")
    per_layer = 2 * 8 * 128 * 2
    assert kv_bytes(arch, Precision(), 100_000) == 36 * per_layer * 8192 + 12 * per_layer * 100_000
    assert arch.layer_windows()[:4] == (8192, 8192, 8192, 0)
    text = {**config_of("llama-4-scout"), "model_type": "llama4_text"}
    wrapped = {"model_type": "llama4", "text_config": text}
    assert architecture_from_config(wrapped, "scout").parameters == get_model("llama-4-scout").parameters
    bad = {**config_of("llama-4-scout"), "no_rope_layers": [1, 0]}
    with pytest.raises(RidgelineError, match="no_rope_layers must list 0 or 1 for each of the 48 layers"):
        architecture_from_config(bad, "bad")


def config_of(name: str) -> dict:
    return json.loads((Path(ridgeline.__file__).parent / "data" / "models" / f"{name}.json").read_text())


def test_gemma_sliding_layers_cap_the_cache() -> None:
    """Gemma 2 alternates 4,096-token sliding windows with global layers (21 each)."""
    arch = get_model(str(DATA / "gemma-2-9b" / "config.json"))
    per_layer = 2 * 8 * 256 * 2
    assert kv_bytes(arch, Precision(), 8000) == 21 * per_layer * 8000 + 21 * per_layer * 4096


def test_moe_experts_read_grow_with_tokens() -> None:
    """Expected distinct experts = E(1 - (1 - k/E)^T): k for one token, nearly E for many."""
    arch = get_model("mixtral-8x7b")
    assert distinct_experts(arch, 1) == pytest.approx(2)
    assert distinct_experts(arch, 3) == pytest.approx(8 * (1 - 0.75**3))
    assert distinct_experts(arch, 1000) == pytest.approx(8)
    one = pass_work(arch, Precision(), 1, 0, 1)
    assert one.weight_bytes == pytest.approx(arch.active_parameters * 2)
    many = pass_work(arch, Precision(), 1, 0, 256)
    assert many.weight_bytes == pytest.approx(arch.parameters * 2, rel=1e-6)


def test_deepseek_mla_latent_is_replicated_across_tp() -> None:
    m = Deployment.build("deepseek-v3", "h200", weights="fp8", tp=8)
    p = plan(m, 4096, 1)
    assert p.per_gpu.kv_bytes == pytest.approx(kv_bytes(m.arch, m.prec, 4096))


def test_int4_leaves_ttft_unchanged_and_fp8_maths_speeds_prefill() -> None:
    """Weight-only quantisation does nothing for compute-bound prefill; fp8 maths does."""
    bf16 = estimate()
    int4 = estimate(weights="int4-g128")
    fp8_maths = estimate(weights="fp8", maths="fp8")
    assert int4.ttft_s == pytest.approx(bf16.ttft_s, rel=1e-3)
    assert fp8_maths.ttft_s == pytest.approx(bf16.ttft_s / 2, rel=0.02)
    assert int4.tpot_s < bf16.tpot_s / 3


def test_group_scales_cost_an_eighth_of_a_bit() -> None:
    e = estimate(weights="int4-g128")
    assert e.memory.weight_bytes == pytest.approx(8_030_261_248 * 4.125 / 8)


def test_fp8_kv_cache_halves_kv_reads() -> None:
    bf16 = Deployment.build()
    fp8 = Deployment.build(kv_dtype="fp8")
    a = pass_work(bf16.arch, bf16.prec, 1, 16_000).kv_read_bytes
    b = pass_work(fp8.arch, fp8.prec, 1, 16_000).kv_read_bytes
    assert b == pytest.approx(a / 2)


def test_tp_weights_per_gpu_for_70b() -> None:
    """Weights per GPU = parameters x bytes / TP: 35.3 GB at TP 4, 17.6 GB at TP 8."""
    for tp, expected in ((4, 35.3e9), (8, 17.6e9)):
        e = estimate("llama-3.1-70b", tp=tp)
        assert e.memory.per_gpu.weight_bytes == pytest.approx(expected, rel=0.005)
        assert e.memory.weight_bytes == pytest.approx(70.55e9 * 2, rel=0.001)


def test_tp8_speedup_over_tp4_stays_below_two() -> None:
    """Communication after each layer keeps the speed-up below N."""
    tp4 = estimate("llama-3.1-70b", tp=4)
    tp8 = estimate("llama-3.1-70b", tp=8)
    speedup = tp4.tpot_s / tp8.tpot_s
    assert 1 < speedup < 2
    assert tp8.decode.comm_s > tp4.decode.comm_s > 0


def test_tp_comm_is_a_ring_all_reduce_per_layer_twice() -> None:
    m = Deployment.build("llama-3.1-70b", tp=4, preset="ideal")
    step = decode_step(m, 0, 1)
    ring = 2 * 80 * (1 * 8192 * 2) * 2 * 3 / 4 / 450e9
    assert step.comm_s == pytest.approx(ring + 2 * 80 * 8e-6)


def test_tp_beyond_kv_heads_replicates_them() -> None:
    m8 = Deployment.build(tp=8)
    m16 = replace(m8, par=make_parallel(m8.arch, 16))
    assert plan(m16, 1000).per_gpu.kv_bytes == pytest.approx(plan(m8, 1000).per_gpu.kv_bytes)


def test_pipeline_parallel_splits_memory_not_latency() -> None:
    one = estimate("llama-3.1-70b", tp=4)
    two = estimate("llama-3.1-70b", tp=4, pp=2)
    assert two.memory.per_gpu.weight_bytes == pytest.approx(one.memory.per_gpu.weight_bytes / 2)
    assert two.tpot_s >= one.tpot_s


def test_pipeline_bubble_is_reported() -> None:
    """With one micro-batch, each of P stages idles (P - 1) / P of the pass."""
    e = estimate("llama-3.1-70b", tp=2, pp=4)
    assert e.parallel.pipeline_bubble == pytest.approx(0.75)
    assert e.parallel.gpus == 8
    assert any("bubble" in line for line in e.explain)


def test_expert_parallel_spreads_experts() -> None:
    e = estimate("mixtral-8x7b", tp=4, ep=4)
    arch = get_model("mixtral-8x7b")
    experts = arch.routed_expert_params * 2
    assert e.memory.per_gpu.weight_bytes == pytest.approx((arch.parameters * 2 - experts) / 4 + experts / 4)


def test_expert_parallel_inside_tp_adds_no_collective() -> None:
    """Attention is tensor-parallel, so every GPU of the group holds every token: experts
    spread over the TP GPUs add their outputs in the all-reduce that ends the MoE layer
    under TP alone. Mixtral 8x7B (32 layers, hidden 4096) at TP 4 with EP 4 sends two ring
    all-reduces a layer, no more; what EP costs is its busiest GPU (below)."""
    tp, ep = (Deployment.build("mixtral-8x7b", tp=4, ep=e, preset="ideal") for e in (1, 4))
    ring = 2 * 32 * (8 * 4096 * 2) * 2 * 3 / 4 / tp.hw.interconnect_bytes_per_s
    for d in (tp, ep):
        assert decode_step(d, 100, 8).comm_s == pytest.approx(ring + 2 * 32 * 8e-6)
    assert decode_step(ep, 100, 8).time_s > decode_step(tp, 100, 8).time_s


def test_expected_max_of_normals_is_the_tabulated_one() -> None:
    """E[max] of two standard normals is 1/sqrt(pi); of four, 1.0294; of eight, 1.4236."""
    assert expected_max_of_normals(1) == 0.0
    assert expected_max_of_normals(2) == pytest.approx(1 / math.sqrt(math.pi), abs=1e-6)
    assert expected_max_of_normals(4) == pytest.approx(1.0294, abs=1e-4)
    assert expected_max_of_normals(8) == pytest.approx(1.4236, abs=1e-4)


def test_the_busiest_ep_gpu_by_hand_and_by_drawing_routes() -> None:
    """DeepSeek-V3 (256 experts, 8 routed a token) at EP 8, one token: each GPU holds 32
    experts, each hit with chance 8/256; the busiest GPU reads 1 + c_8 sqrt((1 - 1/32) / 1)
    of the mean's experts and multiplies 1 + c_8 sqrt(7 / 8) of its rows. Drawing the routes
    (each token 8 distinct experts, uniformly) gives the same within 10%, from one token to
    64, for DeepSeek-V3, Qwen3-235B-A22B and Mixtral; without EP the load is even."""
    a = get_model("deepseek-v3")
    c8 = expected_max_of_normals(8)
    reads, rows = expert_load(a, make_parallel(a, 8, 1, 8), 1)
    assert reads == pytest.approx(1 + c8 * math.sqrt(1 - 1 / 32))
    assert rows == pytest.approx(1 + c8 * math.sqrt(7 / 8))
    assert expert_load(a, make_parallel(a, 8), 1) == (1.0, 1.0)
    rng = np.random.default_rng(0)
    for name, ep, tokens in (("deepseek-v3", 8, 1), ("deepseek-v3", 8, 32), ("qwen3-235b-a22b", 8, 64),
                             ("mixtral-8x7b", 4, 8)):  # fmt: skip
        arch = get_model(name)
        e, k, n = arch.experts, arch.experts_per_token, arch.experts // ep
        hits, routed = [], []
        for _ in range(400):
            picks = np.argsort(rng.random((tokens, e)), axis=1)[:, :k]
            per_gpu = np.bincount((picks // n).ravel(), minlength=ep)
            hit = np.zeros(e, bool)
            hit[picks.ravel()] = True
            experts = hit.reshape(ep, n).sum(axis=1)
            hits.append(experts.max() / experts.mean())
            routed.append(per_gpu.max() / per_gpu.mean())
        reads, rows = expert_load(arch, make_parallel(arch, ep, 1, ep), tokens)
        assert reads == pytest.approx(np.mean(hits), rel=0.1)
        assert rows == pytest.approx(np.mean(routed), rel=0.1)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"tp": 3}, "does not divide"),
        ({"ep": 2}, "mixture-of-experts"),
        ({"model": str(DATA / "bad" / "missing-layers.json")}, "num_hidden_layers"),
        ({"model": str(DATA / "bad" / "unknown-arch.json")}, "unknown architecture 'mamba'"),
        ({"model": str(DATA / "bad" / "not-json.json")}, "cannot parse"),
        ({"model": "someorg/some-model-not-cached"}, "config.json"),
    ],
)
def test_bad_models_and_parallelism(
    kwargs: dict, fragment: str, monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    with pytest.raises(RidgelineError) as info:
        estimate(**kwargs)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "model, tp, fragment",
    [
        # 40 query heads and 10 KV heads: 4 GPUs split the queries but not the KV heads (2.5 each)
        ("phi-4", 4, "cannot split or replicate phi-4's 10 KV heads evenly"),
        # 14 heads and 2 KV heads over 14 GPUs, but an MLP 4,864 wide does not split 14 ways
        ("qwen2.5-0.5b", 14, "does not divide qwen2.5-0.5b's MLP width of 4,864: choose one of 1, 2"),
        ("qwen2.5-1.5b", 12, "MLP width of 8,960: choose one of 1, 2, 4"),
    ],
)
def test_tensor_parallelism_splits_every_sharded_dimension_evenly(model: str, tp: int, fragment: str) -> None:
    """A tensor-parallel GPU holds 1/tp of the query heads, of the KV heads (or a copy of one
    where tp passes them) and of the MLP's columns: a tp that leaves any of them uneven is a
    deployment no engine builds, named in one line with the sizes that work."""
    with pytest.raises(RidgelineError) as info:
        estimate(model, tp=tp)
    assert fragment in str(info.value)
    for fits in (1, 2):
        assert estimate(model, tp=fits).parallel.tp == fits


def test_bad_config_on_the_command_line_is_one_line() -> None:
    proc = run_cli("estimate", "--model", str(DATA / "bad" / "unknown-arch.json"))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


def test_user_gpu_file_flag_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = str(DATA / "my-gpus.toml")
    data = cli_json("estimate", "--gpu", "lab-gpu", "--gpu-file", gpus, "--preset", "ideal")
    assert data["ridge"] == pytest.approx(200)
    assert data["decode"]["time_s"] == pytest.approx((2 * 8_030_261_248 + 2001 * 131072) / 2.0e12)
    monkeypatch.setenv("RIDGELINE_GPUS", gpus)
    assert estimate(gpu="lab-gpu").gpu.memory_bytes == 64e9


def test_one_off_accelerator_flags() -> None:
    data = cli_json(
        "estimate", "--peak-tflops", "500", "--bandwidth-tbs", "1", "--memory-gb", "40", "--preset", "ideal"
    )
    assert data["gpu"]["peak_flops"] == 500e12
    assert data["ridge"] == pytest.approx(500)
    assert data["memory"]["per_gpu"]["capacity_bytes"] == 40e9


def test_bad_gpu_file_is_one_line() -> None:
    proc = run_cli("gpus", "--gpu-file", str(DATA / "bad" / "gpus-missing-bandwidth.toml"))
    assert proc.returncode == 2
    assert "bandwidth_bytes_per_s" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_catalogue_has_the_breadth_entries() -> None:
    names = set(cli_json("gpus"))
    assert names >= {
        "h100-sxm",
        "h100-pcie",
        "h200",
        "b200",
        "gb200",
        "a100-80gb-sxm",
        "a100-40gb",
        "l4",
        "l40s",
        "a10g",
        "rtx-4090",
        "rtx-5090",
        "mi300x",
        "mi325x",
    }


def test_70b_on_one_h100_suggests_the_cheapest_plan_that_serves() -> None:
    """Break it: 70B on one GPU. The expectation is computed from the memory plan itself:
    the fewest GPUs whose plan serves, at bf16, fp8 or int4-g128."""
    data = cli_json("estimate", "--model", "llama-3.1-70b", "--gpu", "h100-sxm")
    assert data["memory"]["fits"] is False
    m = Deployment.build("llama-3.1-70b", "h100-sxm")
    found = []
    for weights in ("bf16", "fp8", "int4-g128"):
        for tp in (1, 2, 4, 8):
            trial = replace(m, prec=Precision(weights), par=make_parallel(m.arch, tp))
            if plan(trial, 2500, 1, suggest=False).serves:
                found.append((tp, ("bf16", "fp8", "int4-g128").index(weights), weights))
                break
    tp, _, weights = min(found)
    cheapest = data["memory"]["suggestions"][0]
    assert (cheapest["gpus"], cheapest["weights"]) == (tp, weights)
    assert {(s["weights"], s["tp"]) for s in data["memory"]["suggestions"]} == {(w, t) for t, _, w in found}


def test_serving_headroom_is_more_than_fitting() -> None:
    """Fitting is not enough: a plan that loads may leave no room to serve."""
    m = Deployment.build("llama-3.1-8b", "rtx-4090")
    p = plan(m, 16_000, 1)
    assert p.fits and p.max_batch < 8 and not p.serves


def test_per_op_and_lesson_methods_agree_within_15_percent() -> None:
    lesson, per_op = estimate(), estimate(method="per-op")
    assert per_op.ttft_s == pytest.approx(lesson.ttft_s, rel=0.15)
    assert per_op.tpot_s == pytest.approx(lesson.tpot_s, rel=0.15)


def test_ledger_rows_account_for_every_weight_once_in_decode() -> None:
    """Decode reads each layer's weights and the lm_head once, and only one embedding row."""
    m = Deployment.build()
    rows = operator_rows(m, uniform(m.arch, 1, 2000))
    weights = sum(r.weight_bytes for r in rows)
    embedding = 128256 * 4096 * 2
    assert weights == pytest.approx(8_030_261_248 * 2 - embedding + 4096 * 2)
    attention = next(r for r in rows if r.name.startswith("attention"))
    assert attention.kv_bytes == pytest.approx(2001 * 131072)


def test_ops_flag_prints_the_ledger_summary_and_explanation() -> None:
    proc = run_cli(
        "estimate",
        "--model",
        str(DATA / "qwen2.5-7b" / "config.json"),
        "--gpu",
        "a100-80gb-sxm",
        "--weights",
        "int4-g128",
        "--tp",
        "1",
        "--ops",
    )
    assert proc.returncode == 0, proc.stderr
    for text in ("qkv projection", "mlp gate/up", "lm_head", "TTFT", "why:"):
        assert text in proc.stdout


def test_batch_sweep_runs_to_the_largest_batch_that_fits() -> None:
    data = cli_json("estimate", "--batch-sweep", "--prompt", "200", "--output", "100")
    rows = data["batch_sweep"]["rows"]
    assert rows[0]["batch"] == 1 and rows[-1]["batch"] == data["memory"]["max_batch"]
    assert all(r["fits"] for r in rows)
    throughput = [r["tokens_per_s"] for r in rows]
    # rises with the batch, then holds flat on the compute roof (equal to round-off there)
    assert all(b >= a * (1 - 1e-12) for a, b in itertools.pairwise(throughput))
    turn = data["batch_sweep"]["compute_bound_from"]
    assert turn == next(r["batch"] for r in rows if r["decode_bound"] == "compute")
    proc = run_cli("estimate", "--batch-sweep", "--prompt", "200", "--output", "100")
    assert "compute-bound at batch" in proc.stdout


def test_vectorised_grid_matches_single_steps() -> None:
    m = Deployment.build()
    batches, contexts = np.array([1, 8, 64, 300]), np.array([0, 2000, 242, 16_000])
    grid = decode_grid(m, batches, contexts)
    for b, c, t in zip(batches, contexts, grid, strict=True):
        assert t == pytest.approx(decode_step(m, int(c), int(b)).time_s, rel=1e-12)


def test_explain_names_communication_on_a_slow_link() -> None:
    e = estimate("llama-3.1-8b", "l40s", tp=8, batch=64)
    assert e.decode.comm_s > 0.25 * e.decode.time_s
    assert any("Communication" in line for line in e.explain)


def test_a_listed_repository_id_is_its_catalogue_model_unless_the_cache_has_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path
) -> None:
    """Offline with an empty Hugging Face cache, a repository id that models/aliases.toml
    lists (case ignored) is its catalogue model; a config.json in the cache for that id
    still wins (it may be a fine-tune with other shapes); every alias names a catalogue model."""
    from ridgeline.models import catalogue_aliases, catalogue_names

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    assert set(catalogue_aliases().values()) <= set(catalogue_names())
    assert get_model("meta-llama/Llama-3.3-70B-Instruct") == get_model("llama-3.3-70b")
    assert get_model("Qwen/Qwen3-235B-A22B-Instruct-2507").name == "qwen3-235b-a22b"
    snapshot = tmp_path / "hub" / "models--openai--gpt-oss-20b" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text((DATA / "qwen2.5-7b" / "config.json").read_text())
    assert get_model("openai/gpt-oss-20b").family == "qwen2"


@pytest.mark.parametrize(
    "typed, name",
    [
        ("Llama-3.1-8B-Instruct", "llama-3.1-8b"),  # meta-llama/Llama-3.1-8B-Instruct's name part
        ("Meta-Llama-3-8B-Instruct", "llama-3-8b"),
        ("gemma-3-12b-it", "gemma-3-12b"),
        ("Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"),
        ("Llama 3.3 70B", "llama-3.3-70b"),  # spaces and underscores as hyphens
        ("qwen3_8b", "qwen3-8b"),
    ],
)
def test_a_listed_repositorys_name_without_its_organisation_is_its_model(typed: str, name: str) -> None:
    """What people type from a model card's title resolves as its repository id does, with
    no download; a name no repository or model has is still one line."""
    assert get_model(typed) is get_model(name)
    assert estimate(typed, "h100-sxm").inputs["model"] == name


def test_no_two_listed_repositories_name_parts_mean_different_models() -> None:
    """A repository's name part resolves only where it names one model: every name part in
    models/aliases.toml that two repositories share names the same model in both."""
    from ridgeline.models import catalogue_aliases, model_key

    seen: dict[str, str] = {}
    for repo, name in catalogue_aliases().items():
        part = model_key(repo.split("/", 1)[1])
        assert seen.setdefault(part, name) == name, f"{part} names {seen[part]} and {name}"
    with pytest.raises(RidgelineError, match="unknown model 'Llama-9-8B-Instruct'"):
        get_model("Llama-9-8B-Instruct")


@pytest.mark.parametrize(
    "name, total, active",
    [
        ("llama-3-8b", 8.03e9, None),  # the model cards' counts
        ("llama-3-70b", 70.6e9, None),
        ("llama-3.3-70b", 70.6e9, None),
        ("llama-3.2-3b", 3.21e9, None),
        ("qwen2.5-14b", 14.7e9, None),
        ("qwen2.5-32b", 32.5e9, None),
        ("mixtral-8x22b", 141e9, 39e9),
        ("deepseek-r1", 671e9, 37e9),
        ("qwen2.5-0.5b", 0.49e9, None),
        ("qwen2.5-1.5b", 1.54e9, None),
        ("qwen2.5-3b", 3.09e9, None),
        ("qwen3-0.6b", 0.6e9, None),
        ("qwen3-1.7b", 1.7e9, None),
        ("qwen3-4b", 4.0e9, None),
        ("qwen3-coder-480b-a35b", 480e9, 35e9),
        ("kimi-k2", 1.04e12, 32e9),
        ("phi-4", 14.7e9, None),
        ("mistral-small-24b", 23.6e9, None),
        ("gemma-3-12b", 11.8e9, None),  # the text model: the card's 12B less the vision tower
    ],
)
def test_catalogue_models_match_their_cards(name: str, total: float, active: float | None) -> None:
    arch = get_model(name)
    assert arch.parameters == pytest.approx(total, rel=0.015)
    if active is not None:
        assert arch.active_parameters == pytest.approx(active, rel=0.03)
