"""Every number an explanation states is a number of the result it explains.

The explanation is read back, number by number, and each is matched to the field of the
estimate that owns it (the step's own per-GPU bytes, the memory plan's room, the ridge),
across dense and MoE models, tensor, pipeline and expert parallelism, and batches."""

from __future__ import annotations

import re

import pytest

from ridgeline import estimate
from ridgeline.ledger import attention_weight_bytes
from ridgeline.memory import resident_weight_bytes

DEEPSEEK_DP = {"model": "deepseek-v3", "tp": 8, "weights": "fp8", "dp_attention": True}
CASES = [
    {},
    {"batch": 64, "prompt": 242, "output": 16},
    {"model": "mixtral-8x7b", "tp": 2},
    {"model": "mixtral-8x7b", "tp": 4, "ep": 2},
    {"model": "llama-3.1-8b", "tp": 16},
    {"model": "llama-3.1-70b", "tp": 4, "pp": 2},
    {"model": "deepseek-v3", "tp": 8, "weights": "fp8"},
    {"model": "deepseek-v3", "tp": 8, "ep": 8, "weights": "fp8"},
    DEEPSEEK_DP,
    DEEPSEEK_DP | {"batch": 64, "engine": "sglang"},
    DEEPSEEK_DP | {"batch": 64, "engine": "trtllm", "maths": "fp8"},
    # just below its ridge: 0.73x of it, not "1/1 of"
    DEEPSEEK_DP
    | {"gpu": "h200", "maths": "fp8", "engine": "sglang", "batch": 256, "prompt": 1000, "output": 1000},
    {"model": "gemma-2-9b", "prompt": 8000, "output": 100},
    {"model": "gemma-3-270m", "prompt": 16000, "output": 100},
    {"model": "llama-3.1-70b"},  # does not fit on one GPU
    {"gpu": "a100-80gb-sxm", "batch": 256, "prompt": 4000, "output": 64},
    {"engine": "vllm"},
    {"model": "gpt-oss-120b", "engine": "vllm", "batch": 128, "prompt": 200, "output": 200},
    {"model": "qwen3-30b-a3b", "engine": "sglang", "batch": 2048, "prompt": 200, "output": 200},
    # a 0.5B model's steps are shorter than vLLM's host work a step: both wait on the host
    {"model": "qwen2.5-0.5b", "gpu": "a100-80gb-sxm", "engine": "vllm", "prompt": 1, "output": 2048},
]

SIDE = r"does (?P<intensity>[\d,.]+) FLOPs per byte, (?P<ratio>[\d/,.x]+)(?: of)? "
SIDE += r"the (?:effective )?ridge of (?P<ridge>[\d,]+)"
SIDE += r"(?: that (?P<engine>.+?)'s kernels reach on this step)? \((?P<side>above|below) it\): "
SIDE += r"(?P<bound>\w+)-bound"
DECODE = re.compile(
    r"Decode at batch (?P<batch>[\d,]+) "
    + SIDE
    + r"(?P<waits>, but the step waits on the engine's host \(below\))?"
    r"; each step reads (?P<weights>[\d,.]+) GB of weights and "
    r"(?P<kv>[\d,.]+) GB of KV cache per GPU, so TPOT is (?P<tpot>[\d,.]+) ms and decode is (?P<share>\d+)% "
    r"of the request\."
)
PREFILL = re.compile(
    r"Prefill of (?P<tokens>[\d,]+) tokens? "
    + SIDE
    + r" on (?P<gpu>\S+)(?:, but the engine's host work \((?P<host>[\d,.]+) ms\) outlasts the GPU's)?"
    r", so TTFT (?P<ttft>[\d,.]+) ms answers to (?P<answers>[^;.]+?)(?: in its|\.)"
)


def ratio_text(intensity: float, ridge: float) -> str:
    r = intensity / ridge
    if 0.5 <= r < 1:
        return f"{int(r * 100) / 100:.2f}x"
    return f"{r:.1f}x" if r >= 1 else f"1/{1 / r:.0f}"


def ridge_of(e, step) -> float:  # type: ignore[no-untyped-def]
    """The ridge a step is judged against: the preset's effective ridge, or under an engine
    profile where the step's own compute and memory times meet (its kernels' rates)."""
    if e.deployment.engine is None:
        return float(e.effective_ridge)
    flops_per_s = step.flops / step.compute_s
    bytes_per_s = step.bytes / step.memory_s
    return float(flops_per_s / bytes_per_s)


def check_side(found: re.Match, e, step) -> None:  # type: ignore[no-untyped-def]
    ridge = ridge_of(e, step)
    assert found["intensity"] == f"{step.intensity:,.1f}"
    assert found["ratio"] == ratio_text(step.intensity, ridge)
    assert found["ridge"] == f"{ridge:,.0f}"
    assert found["bound"] == step.bound
    # the side named is the bound's: a step above its ridge is compute-bound
    assert (found["side"] == "above") == (step.bound == "compute") == (step.intensity >= ridge * (1 - 1e-9))
    engine = e.deployment.engine
    assert found["engine"] == (engine.label if engine is not None else None)


REST_OF_TTFT = re.compile(
    r"in its prefill's (?P<prefill>[\d,.]+) ms; the other (?P<offset>[\d,.]+) ms are what "
    r"(?P<who>.+?) (?:spends|adds) before the first token"
)


def check_rest_of_ttft(text: str, e) -> None:  # type: ignore[no-untyped-def]
    """Where TTFT is more than the prefill, the line splits it into the prefill's time and the
    fixed time before the first token (an engine's server, or a calibration's offset), each the
    result's own, and says whose that time is; where it is not, it says nothing of the kind."""
    offset = e.inputs["ttft_offset_s"]
    found = REST_OF_TTFT.search(text)
    if offset == 0:
        assert found is None
        return
    assert found, e.explain[0]
    assert found["prefill"] == f"{e.prefill.time_s * 1e3:,.1f}"
    assert found["offset"] == f"{offset * 1e3:,.1f}"
    assert abs(e.prefill.time_s + offset - e.ttft_s) < 1e-12
    engine = e.deployment.engine
    assert found["who"].startswith(f"{engine.label}'s server" if engine else "the calibration's fixed offset")


def test_a_calibrations_offset_is_named_in_the_ttft_it_adds_to(tmp_path) -> None:  # type: ignore[no-untyped-def]
    cal = tmp_path / "cal.json"
    cal.write_text(
        '{"effective_flops_per_s": 5e14, "effective_bandwidth_bytes_per_s": 2.6e12, "ttft_offset_s": 0.04}'
    )
    e = estimate(calibration=str(cal))
    assert e.inputs["ttft_offset_s"] == 0.04  # the file's own, as given
    check_rest_of_ttft(" ".join(e.explain), e)


@pytest.mark.parametrize("kwargs", CASES, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()) or "stage")
def test_each_number_in_the_explanation_is_the_results_own(kwargs: dict) -> None:
    e = estimate(**kwargs)
    text = " ".join(e.explain)
    p = PREFILL.search(text)
    assert p, e.explain[0]
    assert p["tokens"] == f"{e.inputs['batch'] * e.inputs['prompt']:,}"
    check_side(p, e, e.prefill)
    assert p["gpu"] == e.gpu.name
    assert p["ttft"] == f"{e.ttft_s * 1e3:,.1f}"
    # a step that waits on the engine's host says so, with the host's time, and TTFT answers
    # to that work; else to the roofline's bound
    if e.prefill.host_bound:
        assert e.prefill.waits_on == "host" and p["host"] == f"{e.prefill.host_s * 1e3:,.2f}"
        assert p["answers"] == "the host's work"
    else:
        assert p["host"] is None
        assert p["answers"] == ("arithmetic" if e.prefill.bound == "compute" else "memory bandwidth")
    check_rest_of_ttft(text, e)
    d = DECODE.search(text)
    assert d, e.explain[1]
    assert d["batch"] == f"{e.inputs['batch']}"
    assert bool(d["waits"]) == e.decode.host_bound
    check_side(d, e, e.decode)
    assert d["weights"] == f"{e.decode.weight_bytes_per_gpu / 1e9:,.2f}"
    assert d["kv"] == f"{e.decode.kv_bytes_per_gpu / 1e9:,.2f}"
    assert d["tpot"] == f"{e.tpot_s * 1e3:,.2f}"
    assert d["share"] == f"{e.decode_share * 100:.0f}"
    if m := re.search(r"memory holds ([\d,]+)", text):
        assert m[1] == f"{e.memory.max_batch:,}"
    if m := re.search(r"each GPU needs ([\d,.]+) GB of ([\d,.]+) GB usable", text):
        assert m[1] == f"{e.memory.per_gpu.total_bytes / 1e9:,.1f}"
        assert m[2] == f"{e.memory.per_gpu.usable_bytes / 1e9:,.1f}"
    busiest = re.search(r"at batch ([\d,]+) the busiest reads ([\d.]+)x the mean GPU's routed experts", text)
    assert bool(busiest) == (e.parallel.ep > 1 and e.parallel.busiest_expert_reads >= 1.1)
    if busiest:
        assert busiest[1] == f"{e.inputs['batch']}"
        assert busiest[2] == f"{e.parallel.busiest_expert_reads:.1f}"
    dp = re.search(
        r"each holds (every weight but the routed experts|all the attention weights) \(([\d,.]+) GB\) and "
        r"the whole cache of 1/(\d+) of the sequences, none of it replicated \(room for ([\d,]+) sequences\)"
        r"(; at batch (\d+) the busiest GPU holds (\d+) of them and each step waits for it, "
        r"([\d.]+)x the mean GPU's)?",
        text,
    )
    assert bool(dp) == e.parallel.dp_attention
    if dp:
        weights, experts = resident_weight_bytes(e.deployment)
        held = (
            weights - experts
            if e.parallel.dp_dense
            else attention_weight_bytes(e.deployment.arch, e.deployment.prec)
        )
        assert (dp[1] == "every weight but the routed experts") == e.parallel.dp_dense
        assert dp[2] == f"{held / 1e9:,.2f}"
        assert dp[3] == f"{e.parallel.tp}"
        assert dp[4] == f"{e.memory.max_batch:,}"
        assert bool(dp[5]) == (e.parallel.busiest_attention >= 1.1)
        if dp[5]:
            assert dp[6] == f"{e.inputs['batch']}"
            assert int(dp[7]) == -(-e.inputs["batch"] // e.parallel.tp)
            assert dp[8] == f"{e.parallel.busiest_attention:.1f}"
    if m := re.search(r"int4-g128 weights would make each step ([\d.]+)x faster", text):
        int4 = estimate(**(kwargs | {"weights": "int4-g128"}))
        assert m[1] == f"{e.decode.time_s / int4.decode.time_s:.1f}"


def test_mixtral_on_two_gpus_reads_about_13_gb_per_gpu_per_step() -> None:
    """Mixtral 8x7B routes each token to 2 of its 8 experts: a batch-1 step reads its
    12.9 B active parameters (Mistral's figure), 25.8 GB in bf16, 12.9 GB on each of two
    GPUs; not the 46.7 B parameters' 93 GB halved."""
    e = estimate("mixtral-8x7b", tp=2)
    assert e.decode.weight_bytes_per_gpu == pytest.approx(12.9e9 * 2 / 2, rel=0.02)
    assert "12.88 GB of weights" in e.explain[1] or "12.9" in e.explain[1]


def test_kv_per_gpu_at_tp16_is_what_the_plan_holds() -> None:
    """Llama 3.1 8B has 8 KV heads: at TP 16 each head sits on two GPUs, so each GPU holds
    1/8 of a sequence's cache (128 KiB a token), not 1/16 of it."""
    e = estimate("llama-3.1-8b", tp=16, prompt=2000, output=500)
    per_token = 32 * 2 * 8 * 128 * 2  # layers x (K, V) x KV heads x head dim x bf16 bytes
    assert e.decode.kv_bytes_per_gpu == pytest.approx((2000 + 1) * per_token / 8)
    # the plan holds the whole context (prompt + output) at the same split
    assert e.memory.per_gpu.kv_bytes == pytest.approx(2500 * per_token / 8)


def test_no_suggestion_of_int4_where_it_would_not_be_faster() -> None:
    """NVFP4 weights (4.5 bits with their scales) are a little wider than int4-g128 (4.125):
    a step would be about 4.5 / 4.125 = 1.09x faster at most, so the advice names no int4;
    from bf16 (16 bits) it does, and the figure is the two steps' ratio."""
    shape = {"model": "llama-3.1-70b", "gpu": "b200", "kv_dtype": "fp8", "batch": 64, "prompt": 200}
    fp4 = estimate(**shape, weights="fp4-g32", maths="fp4")
    assert "Weight reads dominate decode" in fp4.explain[-1]
    assert "int4-g128" not in fp4.explain[-1]
    wide = estimate(**shape, weights="bf16")
    assert "int4-g128 weights would make each step" in wide.explain[-1]


def test_an_engines_narrow_maths_is_said_and_how() -> None:
    """Under an engine whose matmuls run in fewer than 16 bits, the explanation says so and
    how: llama.cpp's 4-bit weights unpacked into int8 (its MMQ kernels), vLLM's fp8 W8A8.
    bf16 maths, or no engine, say nothing of it."""
    llama = estimate("llama-2-7b", "rtx-4090", weights="int4", engine="llamacpp")
    said = [line for line in llama.explain if "multiplies in" in line]
    assert said == [
        "llama.cpp multiplies in int8 (its 4-bit weights unpacked into int8 on the tensor cores), at "
        "rtx-4090's int8 peak: it speeds the compute-bound prefill, not the bytes decode reads; "
        "--maths bf16 prices the matmuls in bf16."
    ]
    vllm = estimate("llama-3.1-8b", "h100-sxm", weights="fp8", engine="vllm")
    assert any(
        "vLLM multiplies in fp8 (weights and activations both in fp8)" in line for line in vllm.explain
    )
    for quiet in (
        estimate("llama-3.1-8b", "h100-sxm", weights="fp8", maths="bf16", engine="vllm"),
        estimate("llama-3.1-8b", "h100-sxm", weights="fp8", maths="fp8"),
    ):
        assert not any("multiplies in" in line for line in quiet.explain)


def test_where_an_engines_cores_not_the_memory_bound_decode_it_is_said() -> None:
    """llama.cpp's matrix-vector kernels stream stream[w16] bytes a GPU core a clock: on an
    A100 SXM (108 SMs at 1.41 GHz) that is below its 2.04 TB/s, and the explanation gives the
    rate and its share of the bandwidth from the catalogue's and the profile's own figures;
    on an RTX 4090 (GDDR6X, 128 SMs at 2.52 GHz) and under vLLM it says nothing of it."""
    from ridgeline.engines import engines

    stream = engines()["llamacpp"].stream["w16"]
    rate = 108 * 1.41e9 * stream
    a100 = estimate("llama-3.1-8b", "a100-80gb-sxm", weights="fp16", engine="llamacpp")
    said = [line for line in a100.explain if "matrix-vector kernels" in line]
    assert said == [
        f"llama.cpp's matrix-vector kernels stream {rate / 1e12:.2f} TB/s of weights on a100-80gb-sxm "
        f"(108 GPU cores at 1.41 GHz, {stream:.1f} bytes a core a clock): {rate / 2.039e12:.0%} of its "
        "2.04 TB/s, so decode waits on the loads its cores keep in flight, not on the memory."
    ]
    for quiet in (
        estimate("llama-3.1-8b", "rtx-4090", weights="fp16", engine="llamacpp"),
        estimate("llama-3.1-8b", "a100-80gb-sxm", engine="vllm"),
        estimate("llama-3.1-8b", "a100-80gb-sxm", weights="fp16"),
    ):
        assert not any("matrix-vector kernels" in line for line in quiet.explain)


def test_a_two_die_gpu_says_it_pays_each_steps_launches_twice() -> None:
    """The M2 Ultra is two M2 Max dies: under an engine, each decode step's launch costs are
    the profile's times two, and the explanation gives that share of the step; a one-die M2
    Max-class part (M3 Max) and an estimate without an engine say nothing of it."""
    from ridgeline.engines import engines

    profile = engines()["llamacpp"]
    ultra = estimate("llama-3.1-8b", "m2-ultra", weights="int4", engine="llamacpp")
    launches = 2 * (profile.fixed_s + profile.per_layer_s * 32)
    assert ultra.decode.overhead_s == pytest.approx(launches + profile.per_sequence_s, rel=1e-9)
    said = [line for line in ultra.explain if "dies" in line]
    assert said == [
        f"m2-ultra is one GPU of 2 dies: each kernel ends only when every die's cores have, so a step "
        f"pays its launches 2 times ({ultra.decode.overhead_s * 1e3:,.2f} ms of this decode step's "
        f"{ultra.decode.time_s * 1e3:,.2f} ms): small models and short steps feel it most."
    ]
    for quiet in (
        estimate("llama-3.1-8b", "m3-max", weights="int4", engine="llamacpp"),
        estimate("llama-3.1-8b", "m2-ultra", weights="int4"),
    ):
        assert not any("dies" in line for line in quiet.explain)


def test_a_part_whose_matmuls_sustain_well_under_its_peak_says_so() -> None:
    """An H100 PCIe's board, at 350 W, sustains 495.9 bf16 TFLOP/s in a torch matmul (the
    median of three boards): 66% of its 756. Under an engine, a compute-bound prefill there
    says so, with the catalogue's figures; an H100 SXM (80%), a decode-only estimate's
    memory-bound prefill and an estimate without an engine say nothing of it."""
    pcie = estimate("llama-3.1-8b", "h100-pcie", engine="vllm", prompt=2048)
    assert pcie.prefill.bound == "compute"
    said = [line for line in pcie.explain if "sustains" in line]
    assert said == [
        f"A large bf16 matmul on h100-pcie sustains {495.93:,.0f} TFLOP/s, "
        f"{495.93 / 756:.0%} of the data sheet's 756 (the catalogue's matmul_share: under "
        "that load its board power, heat and kernels hold it below the boost clock the peak assumes), "
        "and vLLM's kernels reach their shares of that: prefill answers to it."
    ]
    for quiet in (
        estimate("llama-3.1-8b", "h100-sxm", engine="vllm", prompt=2048),
        estimate("llama-3.1-8b", "h100-pcie", engine="vllm", prompt=1),
        estimate("llama-3.1-8b", "h100-pcie", prompt=2048),
    ):
        assert not any("sustains" in line for line in quiet.explain)


def test_an_engine_at_the_warp_level_rate_on_hopper_says_so() -> None:
    """llama.cpp's profile says warp_mma_only: on an H100 (wgmma) its 16-bit matmuls keep its
    dequant_async too, and a compute-bound prefill says so with the profile's figure, which is
    the prefill's own: its matmuls run at that share of what the same profile without the flag
    reaches, its attention as fast. An A100 (warp-level MMA is its full rate), vLLM on the
    H100 and weights llama.cpp unpacks (Q4) say nothing of it."""
    from dataclasses import replace

    from ridgeline.engines import builtin_engines

    profile = builtin_engines()["llamacpp"]
    assert profile.warp_mma_only and profile.dequant_async < 1.0
    h100 = estimate("llama-3.1-8b", "h100-sxm", engine="llamacpp", prompt=4096, output=1)
    assert h100.prefill.bound == "compute"
    said = [line for line in h100.explain if "asynchronous MMA" in line]
    assert said == [
        "h100-sxm's tensor cores reach their full rate only through asynchronous MMA, and "
        "llama.cpp's matmuls reach what the warp-level MMA does there: "
        f"{profile.dequant_async:.0%} of their share (its profile's dequant_async), its 16-bit ones too."
    ]
    flat = estimate(
        "llama-3.1-8b", "h100-sxm", engine=replace(profile, warp_mma_only=False), prompt=4096, output=1
    )
    # the matmuls take 1/dequant_async as long, attention as long as without the flag
    assert flat.prefill.compute_s < h100.prefill.compute_s < flat.prefill.compute_s / profile.dequant_async
    for quiet in (
        estimate("llama-3.1-8b", "a100-80gb-sxm", engine="llamacpp", prompt=4096, output=1),
        estimate("llama-3.1-8b", "h100-sxm", engine="vllm", prompt=4096, output=1),
        estimate("llama-3.1-8b", "h100-sxm", engine="llamacpp", weights="int4", prompt=4096, output=1),
    ):
        assert not any("asynchronous MMA" in line for line in quiet.explain)


@pytest.mark.parametrize(
    "gpu, maths, says",
    [("h100-sxm", "bf16", "faster maths (fp8) helps"), ("a100-80gb-sxm", "bf16", "faster maths (int8) helps"),
     ("b200", "fp8", "faster maths (fp4) helps"), ("h100-sxm", "fp8", "a part with more FLOP/s helps")],
)  # fmt: skip
def test_a_compute_bound_decode_is_told_of_a_narrower_maths_only_where_the_part_has_one(
    gpu: str, maths: str, says: str
) -> None:
    """Batch 2,048 of 100-token requests is compute-bound on each: the advice names the next
    narrower dtype the part has a peak for, and none past the narrowest."""
    e = estimate(gpu=gpu, weights=maths, maths=maths, batch=2048, prompt=100, output=100)
    assert e.timeline.first_decode.bound == "compute"
    assert says in e.explain[-1]


def test_unpacked_weights_say_what_the_unpacking_keeps_and_which_mma_they_feed() -> None:
    """gpt-oss-120b's MXFP4 experts under bf16 maths on an H200 (no fp4 MMA there), a
    compute-bound 8,192-token prefill: TensorRT-LLM's line names its dequant.w4 and the
    asynchronous MMA its kernels unpack into (unpack_async); vLLM's names its dequant.w4 and
    dequant_async and the warp-level MMA; on an A100, whose full rate is the warp-level MMA's,
    only dequant.w4; on a B200 TensorRT-LLM runs them in fp8 beside MXFP4 as the tensor cores
    take them, and bf16 weights unpack nothing: no line."""
    from ridgeline.engines import builtin_engines

    engines = builtin_engines()
    trt, vllm = engines["trtllm"], engines["vllm"]

    def said(engine: str, gpu: str, model: str = "gpt-oss-120b", weights: str = "file") -> list[str]:
        e = estimate(model, gpu, weights=weights, engine=engine, prompt=8192, output=2)
        assert e.prefill.bound == "compute"
        return [line for line in e.explain if " unpacks its " in line]

    (line,) = said("trtllm", "h200")
    assert line.startswith("TensorRT-LLM unpacks its 4-bit weights (mxfp4) into bf16 inside each matmul")
    assert f"keeping {trt.dequant['w4']:.0%} of the matmul rate" in line
    assert "h200's asynchronous MMA" in line and "warp-level" not in line
    (line,) = said("vllm", "h200")
    assert f"keeping {vllm.dequant['w4']:.0%}" in line and f"{vllm.dequant_async:.0%} of that again" in line
    assert "feed the warp-level MMA, not h200's asynchronous one" in line
    (line,) = said("vllm", "a100-80gb-sxm")
    assert "asynchronous" not in line and "warp-level" not in line
    assert said("trtllm", "b200") == [] and said("vllm", "h100-sxm", "llama-3.1-8b", "bf16") == []
