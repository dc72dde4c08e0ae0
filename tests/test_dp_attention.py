"""Data-parallel attention (`--dp-attention`): every weight but the routed experts whole on
each GPU, each sequence's cache whole on one GPU, a gather and a scatter around each MoE
layer, and the step waiting for the GPU with the most sequences.

The expected figures are worked by hand from DeepSeek-V3's published config (61 layers, the
first 3 dense; hidden 7,168; 256 routed experts of 2,048, 8 a token; an MLA latent of 512
plus a 64-wide rope key a token a layer) in fp8 weights (1 byte a weight) and a bf16 cache,
and from TensorRT-LLM's description of attention data parallelism ("all GEMM weights are
replicated on every GPU; the KV-cache is partitioned, because different user requests are
routed to different DP ranks")."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from conftest import run_cli
from ridgeline import Deployment, estimate
from ridgeline.cli import app
from ridgeline.errors import RidgelineError
from ridgeline.memory import plan
from ridgeline.parallel import Parallel, attention_load, comm_bytes_per_gpu, kv_share_per_gpu
from ridgeline.step import decode_step

LAYERS, MOE_LAYERS, HIDDEN = 61, 58, 7168
ROUTED = MOE_LAYERS * 256 * 3 * HIDDEN * 2048  # every routed expert's gate, up and down
KV_TOKEN = LAYERS * (512 + 64) * 2  # bytes of bf16 latent a token holds, every layer


def deepseek(dp: bool, **kw: object) -> Deployment:
    return Deployment.build("deepseek-v3", "h200", weights="fp8", tp=8, dp_attention=dp, **kw)  # type: ignore[arg-type]


def test_every_weight_but_the_routed_experts_sits_whole_on_each_gpu() -> None:
    total = Deployment.build("deepseek-v3").arch.parameters  # 671.0e9 (DeepSeek: 671B)
    assert pytest.approx(653.9e9, rel=1e-3) == ROUTED
    tp = plan(deepseek(False), 2000).per_gpu.weight_bytes
    dp = plan(deepseek(True), 2000).per_gpu.weight_bytes
    assert tp == pytest.approx(total / 8, rel=1e-9)
    assert dp == pytest.approx(total - ROUTED + ROUTED / 8, rel=1e-9)  # 17.1 GB whole + 81.7 GB
    assert dp - tp == pytest.approx((total - ROUTED) * 7 / 8, rel=1e-9)


def test_the_cache_is_split_where_tensor_parallelism_replicates_the_latent() -> None:
    d_tp, d_dp = deepseek(False), deepseek(True)
    assert kv_share_per_gpu(d_tp.arch, d_tp.par) == 1.0  # MLA: the latent on every TP rank
    assert kv_share_per_gpu(d_dp.arch, d_dp.par) == 1 / 8
    context, batch = 3000, 64
    assert plan(d_tp, context, batch).per_gpu.kv_bytes == pytest.approx(batch * context * KV_TOKEN, rel=1e-9)
    assert plan(d_dp, context, batch).per_gpu.kv_bytes == pytest.approx(
        batch * context * KV_TOKEN / 8, rel=1e-9
    )
    # room: what 90% of 141 GB leaves beside the weights holds 8x the tokens a GPU under DP
    tp, dp = plan(d_tp, context), plan(d_dp, context)
    room_tp = tp.per_gpu.usable_bytes - tp.per_gpu.weight_bytes
    room_dp = dp.per_gpu.usable_bytes - dp.per_gpu.weight_bytes
    assert dp.max_batch / tp.max_batch == pytest.approx(8 * room_dp / room_tp, rel=0.02)


@pytest.mark.parametrize(("sequences", "load"), [(1, 8.0), (8, 1.0), (9, 16 / 9), (64, 1.0), (65, 72 / 65)])
def test_the_busiest_gpu_holds_the_ceiling_of_the_sequences_over_tp(sequences: int, load: float) -> None:
    assert attention_load(Parallel(8, dp_attention=True), sequences) == pytest.approx(load)
    assert attention_load(Parallel(8), sequences) == 1.0


def test_batch_one_decode_runs_all_but_the_experts_on_one_gpu() -> None:
    """At batch 1 one GPU reads every non-expert weight and does every non-expert FLOP,
    with the lesson's one roofline: so the step is slower than under TP, whose GPUs share
    them, and its per-GPU bytes are the whole model's but the experts' 7/8."""
    tp, dp = decode_step(deepseek(False), 1000), decode_step(deepseek(True), 1000)
    routed_read = float(tp.weight_bytes_per_gpu) * 8 - (
        Deployment.build("deepseek-v3").arch.parameters - ROUTED
    )
    assert float(dp.weight_bytes_per_gpu) == pytest.approx(
        Deployment.build("deepseek-v3").arch.parameters - ROUTED + routed_read / 8, rel=1e-9
    )
    assert float(dp.kv_bytes_per_gpu) == pytest.approx(1001 * KV_TOKEN, rel=1e-9)  # its own cache, whole
    assert float(dp.time_s) > float(tp.time_s)


def test_only_the_moe_layers_talk_a_gather_and_a_scatter_each() -> None:
    d_tp, d_dp = deepseek(False), deepseek(True)
    tokens = 4096
    act = tokens * HIDDEN * 2  # bf16 activations
    assert comm_bytes_per_gpu(d_tp.arch, d_tp.prec, tokens, d_tp.par) == pytest.approx(
        4 * LAYERS * act * 7 / 8
    )
    assert comm_bytes_per_gpu(d_dp.arch, d_dp.prec, tokens, d_dp.par) == pytest.approx(
        2 * MOE_LAYERS * act * 7 / 8
    )


def test_a_large_batch_gains_and_a_small_one_loses() -> None:
    """The trade the explanation names: at batch 1 the step waits on one GPU's whole
    attention; at a batch of 256 a GPU reads 1/8 of the latents TP would have it read."""
    small_tp = estimate("deepseek-v3", "h200", weights="fp8", tp=8, batch=1, prompt=1000, output=100)
    small_dp = estimate(
        "deepseek-v3", "h200", weights="fp8", tp=8, batch=1, prompt=1000, output=100, dp_attention=True
    )
    big_tp = estimate("deepseek-v3", "h200", weights="fp8", tp=8, batch=256, prompt=1000, output=100)
    big_dp = estimate(
        "deepseek-v3", "h200", weights="fp8", tp=8, batch=256, prompt=1000, output=100, dp_attention=True
    )
    assert small_dp.tpot_s > small_tp.tpot_s
    assert big_dp.tpot_s < big_tp.tpot_s
    assert big_dp.parallel.dp_attention and big_dp.parallel.busiest_attention == 1.0
    assert small_dp.parallel.busiest_attention == 8.0
    line = next(x for x in small_dp.explain if x.startswith("Attention runs data-parallel"))
    assert f"room for {small_dp.memory.max_batch:,} sequences" in line
    assert "the busiest GPU holds 1 of them" in line and "8.0x the mean GPU's" in line


def test_the_simulator_holds_eight_times_the_tokens_and_serves_more() -> None:
    """With the cache partitioned, a replica's pool holds 8x the tokens that fit beside the
    weights on a GPU (the weights being 17.1 GB x 7/8 larger): a closed loop of 400 clients
    with 4,000-token prompts, which TP's pool cannot hold at once, runs faster."""
    runs = {}
    for dp in (False, True):
        argv = ["simulate", "--model", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--weights", "fp8"]
        argv += ["--engine", "sglang", "--concurrency", "400", "--requests", "800", "-p", "4000", "-o", "200"]
        result = CliRunner().invoke(app, [*argv, "--json"] + (["--dp-attention"] if dp else []))
        assert result.exit_code == 0, result.output
        runs[dp] = json.loads(result.output)
    tp_room = plan(deepseek(False), 4200).per_gpu
    dp_room = plan(deepseek(True), 4200).per_gpu
    assert runs[True]["deployment"]["dp_attention"] is True
    ratio = runs[True]["deployment"]["kv_tokens"] / runs[False]["deployment"]["kv_tokens"]
    room = (dp_room.usable_bytes - dp_room.weight_bytes) / (tp_room.usable_bytes - tp_room.weight_bytes)
    assert ratio == pytest.approx(8 * room, rel=0.05)
    assert runs[True]["throughput_tokens_per_s"] > runs[False]["throughput_tokens_per_s"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--model", "llama-3.1-8b", "--tp", "2"], "plain data parallelism"),
        (["--model", "deepseek-v3", "--tp", "1"], "give --tp 2 or more"),
    ],
)
def test_a_dense_model_or_one_gpu_is_one_line(args: list[str], says: str) -> None:
    proc = run_cli("estimate", "--dp-attention", *args)
    assert proc.returncode == 2
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1 and not proc.stdout
    with pytest.raises(RidgelineError):
        Deployment.build(args[1], tp=int(args[3]), dp_attention=True)


def test_the_json_says_so() -> None:
    argv = [
        "estimate",
        "--model",
        "deepseek-v3",
        "--gpu",
        "h200",
        "--tp",
        "8",
        "--weights",
        "fp8",
        "--dp-attention",
    ]
    data = json.loads(CliRunner().invoke(app, [*argv, "--json"]).output)
    assert data["inputs"]["dp_attention"] is True
    assert data["parallel"]["dp_attention"] is True
    assert data["parallel"]["busiest_attention"] == 8.0  # batch 1
    assert math.isfinite(data["tpot_s"])
