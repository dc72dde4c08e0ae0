"""4-bit float weights that the tensor cores take as they are. Datacentre Blackwell's MMA
(tcgen05) multiplies e2m1 weights beside e4m3 activations in one instruction, so TensorRT-LLM
runs gpt-oss's MXFP4 experts with MXFP8 activations there and unpacks nothing; a Hopper has
no fp4 MMA, and its Triton kernels run them with BF16 activations, unpacking every weight
(TensorRT-LLM's gpt-oss deployment guide, its MoE backend matrix). Integer 4-bit weights
(AWQ, GPTQ) are unpacked everywhere."""

from __future__ import annotations

import pytest

from ridgeline import estimate
from ridgeline.deployment import Deployment
from ridgeline.engines import builtin_engines, float4_native
from ridgeline.hardware import get_accelerator
from ridgeline.models import get_model
from ridgeline.precision import Precision


def test_gpt_oss_names_its_checkpoints_mxfp4() -> None:
    """Its config's quantization_config says quant_method mxfp4."""
    assert get_model("gpt-oss-20b").file_dtype == get_model("gpt-oss-120b").file_dtype == "mxfp4"
    assert get_model("llama-3.1-8b").file_dtype == ""


@pytest.mark.parametrize(
    "engine, gpu, maths",
    [("trtllm", "b200", "fp8"), ("trtllm", "gb200", "fp8"), ("trtllm", "h100-sxm", "bf16"),
     ("trtllm", "a100-80gb-sxm", "bf16"), ("vllm", "b200", "bf16"), ("sglang", "h200", "bf16")],
)  # fmt: skip
def test_each_engine_picks_the_maths_its_mxfp4_kernels_run(engine: str, gpu: str, maths: str) -> None:
    profile, hw = builtin_engines()[engine], get_accelerator(gpu)
    assert profile.default_maths(get_model("gpt-oss-20b"), "file", hw) == maths
    assert estimate(model="gpt-oss-20b", gpu=gpu, engine=engine).deployment.prec.maths == maths


def test_only_float4_weights_under_narrow_maths_on_an_fp4_part_go_in_as_they_are() -> None:
    oss, llama = get_model("gpt-oss-20b"), get_model("llama-3.1-8b")
    b200, h100 = get_accelerator("b200"), get_accelerator("h100-sxm")
    assert float4_native(oss, Precision("file", "fp8"), b200)
    assert float4_native(llama, Precision("fp4", "fp8"), b200)  # NVFP4 weights beside fp8
    assert not float4_native(oss, Precision("file", "bf16"), b200)  # bf16 activations: unpacked
    assert not float4_native(oss, Precision("file", "fp8"), h100)  # no fp4 MMA on a Hopper
    assert not float4_native(llama, Precision("int4-g128", "fp8"), b200)  # integer 4-bit


def test_native_weights_keep_the_maths_full_matmul_rate_and_unpacked_ones_lose_the_dequant() -> None:
    """The profile's matmul rate on a B200 in fp8 is the part's sustained fp8 rate times the
    profile's fp8 share; integer 4-bit weights under the same maths keep dequant.w4 of it.
    TensorRT-LLM's kernels unpack them into the asynchronous MMA's operands (unpack_async),
    so that is all; vLLM's feed the warp-level MMA, and keep its dequant_async of that again."""
    b200 = get_accelerator("b200")
    for name, late in (("trtllm", False), ("vllm", True)):
        engine = builtin_engines()[name]
        full = b200.sustained("fp8") * engine.gemm_efficiency("fp8")
        native = Deployment.build("gpt-oss-20b", "b200", weights="file", maths="fp8", engine=engine)
        awq = Deployment.build("llama-3.1-8b", "b200", weights="int4-g128", maths="fp8", engine=engine)
        assert native.engine_reach.gemm_flops_per_s == pytest.approx(full, rel=1e-12)
        kept = engine.dequant["w4"] * (engine.dequant_async if late else 1.0)
        assert engine.dequant_async < 1.0 and engine.unpack_async is not late
        assert awq.engine_reach.gemm_flops_per_s == pytest.approx(full * kept, rel=1e-12)


def test_the_why_says_the_tensor_cores_take_the_weights_as_they_are() -> None:
    said = " ".join(estimate(model="gpt-oss-20b", gpu="b200", engine="trtllm", batch=64).explain)
    assert "4-bit float weights beside fp8 activations" in said
    hopper = " ".join(estimate(model="gpt-oss-20b", gpu="h100-sxm", engine="trtllm", batch=64).explain)
    assert "beside fp8 activations" not in hopper
