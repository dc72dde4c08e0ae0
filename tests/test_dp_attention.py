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
from ridgeline.memory import MAX_BATCHED_TOKENS, PerGpu, activation_bytes_per_gpu, plan
from ridgeline.parallel import (
    Parallel,
    attention_load,
    collectives_per_pass,
    comm_bytes_per_gpu,
    kv_share_per_gpu,
)
from ridgeline.step import decode_step

LAYERS, MOE_LAYERS, HIDDEN = 61, 58, 7168
ROUTED = MOE_LAYERS * 256 * 3 * HIDDEN * 2048  # every routed expert's gate, up and down
ATTENTION = LAYERS * (
    HIDDEN * 1536 + 1536  # queries down to their rank, and its norm
    + 1536 * 128 * (128 + 64)  # and up to 128 heads of 128 + 64
    + HIDDEN * (512 + 64) + 512  # keys and values down to the latent and the rope key, its norm
    + 512 * 128 * (128 + 128)  # the latent up to 128 heads' keys and values
    + 128 * 128 * HIDDEN  # the output projection
)  # fmt: skip
KV_TOKEN = LAYERS * (512 + 64) * 2  # bytes of bf16 latent a token holds, every layer


def room(per_gpu: PerGpu, d: Deployment) -> float:
    """What a GPU has for the cache beside its weights and a full step's activations."""
    return per_gpu.usable_bytes - per_gpu.weight_bytes - activation_bytes_per_gpu(d, MAX_BATCHED_TOKENS)


def deepseek(dp: bool, engine: str | None = None) -> Deployment:
    return Deployment.build("deepseek-v3", "h200", weights="fp8", tp=8, dp_attention=dp, engine=engine)


def test_attention_sits_whole_on_each_gpu_and_with_the_dense_parts_under_tensorrt_llm() -> None:
    total = Deployment.build("deepseek-v3").arch.parameters  # 671.0e9 (DeepSeek: 671B)
    assert pytest.approx(653.9e9, rel=1e-3) == ROUTED
    assert pytest.approx(11.41e9, rel=1e-3) == ATTENTION
    assert plan(deepseek(False), 2000).per_gpu.weight_bytes == pytest.approx(total / 8, rel=1e-9)
    # the presets and SGLang: attention's weights whole, the rest sliced
    for engine in (None, "sglang"):
        dp = plan(deepseek(True, engine), 2000).per_gpu.weight_bytes
        assert dp == pytest.approx(ATTENTION + (total - ATTENTION) / 8, rel=1e-9)
        assert not deepseek(True, engine).par.dp_dense
    # TensorRT-LLM and vLLM: every weight but the routed experts whole (17.1 GB + 81.7 GB)
    for engine in ("trtllm", "vllm"):
        dp = plan(deepseek(True, engine), 2000).per_gpu.weight_bytes
        assert dp == pytest.approx(total - ROUTED + ROUTED / 8, rel=1e-9)
        assert deepseek(True, engine).par.dp_dense


def test_a_moe_layer_holds_every_ranks_routed_tokens() -> None:
    """A MoE layer under data-parallel attention gathers every rank's tokens and routes each
    to 8 experts: each GPU holds the gathered tokens at the model's width, the routed copies
    in and out (all 8 a token with the experts split by TP, one with EP 8), and its eighth
    of the routed copies' expert intermediates (gate and up, then their product: 3 x 2,048).
    With TensorRT-LLM's budget each rank's, 2,048 tokens a rank gather 8 chunks: in bf16,
    0.23 + 3.76 + 0.20 GB by hand beside TP's 0.08 GB. With SGLang's the replica's, the 2,048
    are all there is to gather. A dense model gathers nothing more."""
    tokens = 2048

    def extra(gathered: int, ep: int) -> float:
        routed = gathered * 8
        return (gathered * HIDDEN + routed / ep * 2 * HIDDEN + routed * 3 * 2048 / 8) * 2

    assert extra(8 * tokens, 1) == pytest.approx(0.2349e9 + 3.758e9 + 0.2013e9, rel=1e-3)
    for engine, gathered in (("trtllm", 8 * tokens), ("sglang", tokens)):
        base = activation_bytes_per_gpu(deepseek(False, engine), tokens)
        got = activation_bytes_per_gpu(deepseek(True, engine), tokens)
        assert got == pytest.approx(base + extra(gathered, 1), rel=1e-12)
        whole = Deployment.build(
            "deepseek-v3", "h200", weights="fp8", tp=8, ep=8, dp_attention=True, engine=engine
        )
        assert activation_bytes_per_gpu(whole, tokens) == pytest.approx(base + extra(gathered, 8), rel=1e-12)
    dense = [Deployment.build("llama-3.1-70b", "h200", tp=8, dp_attention=dp) for dp in (False, True)]
    assert activation_bytes_per_gpu(dense[1], tokens) == activation_bytes_per_gpu(dense[0], tokens)


def test_the_cache_is_split_where_tensor_parallelism_replicates_the_latent() -> None:
    d_tp, d_dp = deepseek(False), deepseek(True)
    assert kv_share_per_gpu(d_tp.arch, d_tp.par) == 1.0  # MLA: the latent on every TP rank
    assert kv_share_per_gpu(d_dp.arch, d_dp.par) == 1 / 8
    context, batch = 3000, 64
    assert plan(d_tp, context, batch).per_gpu.kv_bytes == pytest.approx(batch * context * KV_TOKEN, rel=1e-9)
    assert plan(d_dp, context, batch).per_gpu.kv_bytes == pytest.approx(
        batch * context * KV_TOKEN / 8, rel=1e-9
    )
    # room: what is usable beside the weights and a full step's activations (a MoE layer's
    # gathered, routed tokens under DP) holds 8x the tokens a GPU under DP
    tp, dp = plan(d_tp, context), plan(d_dp, context)
    room_tp, room_dp = (room(p.per_gpu, d) for p, d in ((tp, d_tp), (dp, d_dp)))
    assert dp.max_batch / tp.max_batch == pytest.approx(8 * room_dp / room_tp, rel=0.02)


@pytest.mark.parametrize(("sequences", "load"), [(1, 8.0), (8, 1.0), (9, 16 / 9), (64, 1.0), (65, 72 / 65)])
def test_the_busiest_gpu_holds_the_ceiling_of_the_sequences_over_tp(sequences: int, load: float) -> None:
    assert attention_load(Parallel(8, dp_attention=True), sequences) == pytest.approx(load)
    assert attention_load(Parallel(8), sequences) == 1.0


def test_batch_one_decode_runs_attention_on_one_gpu() -> None:
    """At batch 1 one GPU reads all the attention weights and its sequence's whole cache
    (the lesson's one roofline): the step is slower than under TP, whose GPUs share them;
    its attention, projections and scores, is 8x a TP GPU's share, the rest as TP's."""
    tp, dp = decode_step(deepseek(False), 1000), decode_step(deepseek(True), 1000)
    assert float(dp.weight_bytes_per_gpu) == pytest.approx(
        float(tp.weight_bytes_per_gpu) + ATTENTION * 7 / 8, rel=1e-9
    )
    assert float(dp.kv_bytes_per_gpu) == pytest.approx(1001 * KV_TOKEN, rel=1e-9)  # its own cache, whole
    assert float(tp.kv_bytes_per_gpu) == pytest.approx(1001 * KV_TOKEN, rel=1e-9)  # TP: the latent on each
    attention = 2 * ATTENTION + float(tp.attention_flops)  # one token through every projection, and scores
    rate = deepseek(True).flat_rates.linear_flops_per_s
    assert float(dp.compute_s) - float(tp.compute_s) == pytest.approx(attention * 7 / 8 / rate, rel=1e-6)
    assert float(dp.time_s) > float(tp.time_s)


def test_a_gather_and_a_scatter_around_each_sliced_mlp() -> None:
    """TP: two all-reduces a layer, 2(tp-1)/tp of the activations each. Data-parallel
    attention: a gather and a scatter, (tp-1)/tp each, around every layer's MLP where the
    dense parts stay sliced (SGLang), around the MoE layers' alone where they do not."""
    tokens = 4096
    act = tokens * HIDDEN * 2  # bf16 activations
    for d, layers, per_layer in (
        (deepseek(False), LAYERS, 4),
        (deepseek(True), LAYERS, 2),
        (deepseek(True, "sglang"), LAYERS, 2),
        (deepseek(True, "trtllm"), MOE_LAYERS, 2),
    ):
        assert comm_bytes_per_gpu(d.arch, d.prec, tokens, d.par) == pytest.approx(
            per_layer * layers * act * 7 / 8
        )


def test_a_large_batch_gains_and_a_small_one_loses() -> None:
    """The trade the explanation names: at batch 1 the step waits on one GPU's whole
    attention; at a batch of 256 a GPU reads 1/8 of the latents TP would have it read."""
    shape = {"model": "deepseek-v3", "gpu": "h200", "weights": "fp8", "tp": 8, "prompt": 1000, "output": 100}
    small_tp, small_dp = estimate(**shape, batch=1), estimate(**shape, batch=1, dp_attention=True)
    big_tp, big_dp = estimate(**shape, batch=256), estimate(**shape, batch=256, dp_attention=True)
    assert small_dp.tpot_s > small_tp.tpot_s
    assert big_dp.tpot_s < big_tp.tpot_s
    assert big_dp.parallel.dp_attention and big_dp.parallel.busiest_attention == 1.0
    assert small_dp.parallel.busiest_attention == 8.0
    line = next(x for x in small_dp.explain if x.startswith("Attention runs data-parallel"))
    assert f"all the attention weights ({ATTENTION / 1e9:,.2f} GB)" in line
    assert f"room for {small_dp.memory.max_batch:,} sequences" in line
    assert "the busiest GPU holds 1 of them" in line and "8.0x the mean GPU's" in line


def test_the_simulator_holds_eight_times_the_tokens_and_serves_more() -> None:
    """With the cache partitioned, a replica's pool holds 8x the tokens that fit beside the
    weights on a GPU: a closed loop of 400 clients with 4,000-token prompts, which TP's pool
    cannot hold at once, runs faster."""
    runs = {}
    for dp in (False, True):
        argv = ["simulate", "--model", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--weights", "fp8"]
        argv += ["--engine", "sglang", "--concurrency", "400", "--requests", "800", "-p", "4000", "-o", "200"]
        result = CliRunner().invoke(app, [*argv, "--json"] + (["--dp-attention"] if dp else []))
        assert result.exit_code == 0, result.output
        runs[dp] = json.loads(result.output)
    d_tp, d_dp = deepseek(False, "sglang"), deepseek(True, "sglang")
    tp_room, dp_room = (room(plan(d, 4200).per_gpu, d) for d in (d_tp, d_dp))
    assert runs[True]["deployment"]["dp_attention"] is True
    ratio = runs[True]["deployment"]["kv_tokens"] / runs[False]["deployment"]["kv_tokens"]
    assert ratio == pytest.approx(8 * dp_room / tp_room, rel=0.05)
    assert runs[True]["throughput_tokens_per_s"] > runs[False]["throughput_tokens_per_s"]


def test_one_gpu_is_one_line() -> None:
    proc = run_cli("estimate", "--dp-attention", "--model", "deepseek-v3")
    assert proc.returncode == 2
    assert "give --tp 2 or more" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not proc.stdout
    with pytest.raises(RidgelineError):
        Deployment.build("deepseek-v3", tp=1, dp_attention=True)


def test_a_dense_model_under_tensorrt_llm_is_plain_data_parallelism() -> None:
    """A dense model's attention data-parallel: SGLang's way slices its MLPs with a gather
    and a scatter a layer; TensorRT-LLM's holds the whole model on each GPU and talks not
    at all, as tp replicas would, but for the busiest GPU's share of one batch."""
    kw = {"tp": 4, "dp_attention": True}
    sliced = Deployment.build("llama-3.1-8b", engine="sglang", **kw)
    whole = Deployment.build("llama-3.1-8b", engine="trtllm", **kw)
    assert collectives_per_pass(sliced.arch, sliced.par) == 2 * 32
    assert collectives_per_pass(whole.arch, whole.par) == 0
    assert plan(whole, 2000).per_gpu.weight_bytes == pytest.approx(whole.arch.parameters * 2, rel=1e-9)


def test_the_json_says_so() -> None:
    argv = ["estimate", "--model", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--weights", "fp8"]
    data = json.loads(
        CliRunner().invoke(app, [*argv, "--dp-attention", "--engine", "trtllm", "--json"]).output
    )
    assert data["inputs"]["dp_attention"] is True
    assert data["parallel"]["dp_attention"] is True and data["parallel"]["dp_dense"] is True
    assert data["parallel"]["busiest_attention"] == 8.0  # batch 1
    assert math.isfinite(data["tpot_s"])


def lone_prompts(d: Deployment, prompts: int, prompt: int, **knobs: int) -> list[int]:
    """The tokens of each step a replica runs for `prompts` prompts arriving at once, each
    then writing one token more."""
    from ridgeline.simulate import Lengths, Workload, simulate
    from ridgeline.simulate.run import engine_config

    w = Workload(prompt=Lengths("fixed", prompt), output=Lengths("fixed", 1), rate_per_s=None,
                 concurrency=prompts, requests=prompts, duration_s=None)  # fmt: skip
    result = simulate(d, w, engine=engine_config(d, **knobs))  # type: ignore[arg-type]
    return list(result.engines[0].trace.tokens)


def test_sglang_chunks_a_prompt_by_its_ranks_share_of_the_budget() -> None:
    """SGLang divides --chunked-prefill-size by the DP size (ServerArgs): on an H200 (141 GB,
    under its 160 GiB tier) the size is 8,192 tokens, so a rank's chunk is 1,024 and a lone
    4,000-token prompt prefills in 3 x 1,024 + 928 (then decodes one token). At TP alone the
    whole prompt is one step."""
    assert lone_prompts(deepseek(True, "sglang"), 1, 4000) == [1024, 1024, 1024, 928, 1]
    assert lone_prompts(deepseek(False, "sglang"), 1, 4000) == [4000, 1]


def test_each_rank_chunks_its_own_prompt_at_once() -> None:
    """Eight 4,000-token prompts at once: under SGLang each of the eight ranks takes a
    1,024-token chunk of its own each step (8,192 in all, the replica's budget), so four
    steps of 8,192, 8,192, 8,192 and 8 x 928, then one of their 8 decodes; TensorRT-LLM's
    max_num_tokens (8,192) is each rank's, so every prompt runs whole in the first step,
    32,000 tokens."""
    assert lone_prompts(deepseek(True, "sglang"), 8, 4000) == [8192, 8192, 8192, 8 * 928, 8]
    assert lone_prompts(deepseek(True, "trtllm"), 8, 4000)[0] == 32_000
    assert lone_prompts(deepseek(False, "trtllm"), 8, 4000)[0] == 8192


def test_the_limits_are_the_replicas_or_each_ranks_as_the_engine_sets_them() -> None:
    from ridgeline.simulate.engine import EngineConfig, Limits, replica_limits

    sglang = EngineConfig(max_num_seqs=2048, max_num_batched_tokens=8192, dp_limits="replica")
    trtllm = EngineConfig(max_num_seqs=384, max_num_batched_tokens=1536, dp_limits="rank")
    assert replica_limits(sglang, 8) == Limits(2048, 8192, 1024, 8)
    # TensorRT-LLM's DeepSeek-R1 recipe: max_batch_size 384 at TP 8 for 3,072 concurrent
    assert replica_limits(trtllm, 8) == Limits(3072, 12_288, 1536, 8)
    assert replica_limits(trtllm, 1) == Limits(384, 1536, 1536, 1)
    assert [deepseek(True, e).scheduler.dp_limits for e in ("sglang", "trtllm", "vllm")] == [  # type: ignore[union-attr]
        "replica", "rank", "rank",
    ]  # fmt: skip


def test_a_request_must_fit_the_one_gpu_its_cache_sits_on() -> None:
    """Under data-parallel attention a sequence's cache is whole on one GPU: a request the
    replica's pool could hold but no GPU's eighth of it is one line, not a run."""
    from ridgeline.simulate import Lengths, Workload, simulate
    from ridgeline.simulate.kvcache import kv_cache
    from ridgeline.simulate.run import engine_config

    d = deepseek(True, "sglang")
    cfg = engine_config(d, gpu_memory_utilization=0.68)  # of the H200's 141 GiB
    kv = kv_cache(d, cfg.block_tokens, 0.68, cfg.max_num_seqs, cfg.max_num_batched_tokens)
    prompt = kv.tokens // 8 + 64  # more than a GPU holds, an eighth of the pool
    assert prompt + 1 < d.arch.max_context
    w = Workload(prompt=Lengths("fixed", prompt), output=Lengths("fixed", 1), requests=1, duration_s=None)
    with pytest.raises(RidgelineError, match="a GPU holds under --dp-attention"):
        simulate(d, w, engine=cfg)
    assert simulate(deepseek(False, "sglang"), w, engine=cfg).summary is not None  # TP's pool is whole


def test_a_prompts_chunk_runs_on_one_gpu_and_the_step_waits_for_it() -> None:
    """A step's data-parallel work waits for its busiest GPU. With 64 decoders at context
    1,000 beside one 8,192-token chunk of a fresh prompt (vLLM's DP ranks: a rank's budget
    is 8,192), the chunk's GPU does 8,192 of the 8,256 tokens and, of the step's attended
    pairs (a chunk of n tokens at context c attends n c + n^2 / 2; a decoder c + 1/2), all but
    64 x 1,000.5: the step is priced as that share of the work on one GPU, 1 / share
    sequences, not as 65 sequences shared out. Short chunks among many decoders share out."""
    from ridgeline.simulate import Lengths, Workload, simulate

    w = Workload(prompt=Lengths("fixed", 100), output=Lengths("fixed", 2), requests=1, duration_s=None)
    engine = simulate(deepseek(True, "vllm"), w, summarize=False).engines[0]
    assert engine.dp_ranks == 8
    chunk = 8192 * 8192 / 2
    decoders = 64 * 1000.5
    assert engine.spread(64, [(0, 8192, 0)], 8256, chunk + decoders) == pytest.approx(
        (chunk + decoders) / chunk
    )
    # 8 decoders and a 1-token chunk: nothing dominates, ceil(9 / 8) = 2 of 9 is the busiest's
    assert engine.spread(8, [(0, 1, 0)], 9, 8 * 1000.5 + 0.5) == 9
    assert engine.spread(64, [], 64, decoders) == 64  # decodes alone share out by count


def test_an_engine_without_the_mode_is_one_line() -> None:
    """llama.cpp's server splits a model by layer or by row: its profile has no data-parallel
    attention (dp_replicates "none"), so asking for it is one line, not a price."""
    proc = run_cli(
        "estimate", "--model", "qwen3-30b-a3b", "--tp", "2", "--engine", "llamacpp", "--dp-attention"
    )
    assert proc.returncode == 2 and not proc.stdout
    assert (
        proc.stderr.strip()
        == "ridgeline: error: llama.cpp has no data-parallel attention: drop --dp-attention"
    )


def test_sglang_admits_less_conservatively_under_data_parallel_attention() -> None:
    """ServerArgs multiplies --schedule-conservativeness by 0.3 under --enable-dp-attention,
    and the scheduler starts new_token_ratio at 0.7 x it (0.21), its floor at 0.14 x that
    (0.0294), falling to it over 600 decode steps; without the mode 0.7 and 0.098."""
    from ridgeline.simulate.scheduler import SglangPolicy

    class View:
        def __init__(self, ranks: int) -> None:
            self.dp_ranks = ranks

    for ranks, start, floor in ((8, 0.21, 0.0294), (1, 0.7, 0.098)):
        policy = SglangPolicy()
        policy.conservativeness(View(ranks))  # type: ignore[arg-type]
        policy.ratio_set, policy.set_at = policy.init, 0
        assert policy.new_token_ratio(0) == pytest.approx(start)
        assert policy.new_token_ratio(300) == pytest.approx((start + floor) / 2)
        assert policy.new_token_ratio(10_000) == pytest.approx(floor)


def test_the_simulation_says_its_attention_is_data_parallel() -> None:
    argv = ["simulate", "--model", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--weights", "fp8",
            "--engine", "vllm", "--rate", "2", "--requests", "20", "-p", "200", "-o", "10"]  # fmt: skip
    for dp in (False, True):
        result = CliRunner().invoke(app, argv + (["--dp-attention"] if dp else []), env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert ("(fp8, attention data-parallel)" in result.output) is dp


def test_the_simulations_json_says_what_limits_the_replica_ran_with() -> None:
    """vLLM's data-parallel ranks each take --max-num-seqs (1,024 on an H200) and
    --max-num-batched-tokens (8,192): eight of them hold 8,192 sequences and 65,536 tokens a
    step, a request's chunk up to one rank's 8,192. Without the mode, the flags' own."""
    argv = ["simulate", "--model", "deepseek-v3", "--gpu", "h200", "--tp", "8", "--weights", "fp8",
            "--engine", "vllm", "--rate", "2", "--requests", "10", "-p", "200", "-o", "10"]  # fmt: skip
    for dp, expected in ((True, (8192, 65536, 8192, 8)), (False, (1024, 8192, 8192, 1))):
        result = CliRunner().invoke(app, [*argv, "--json"] + (["--dp-attention"] if dp else []))
        assert result.exit_code == 0, result.output
        engine = json.loads(result.output)["engine"]
        assert (engine["max_num_seqs"], engine["dp_limits"]) == (1024, "rank")
        replica = engine["replica"]
        got = (replica["max_num_seqs"], replica["max_num_batched_tokens"], replica["max_chunk_tokens"])
        assert (*got, replica["ranks"]) == expected
