"""The catalogue's wider parts, each checked against the data sheet's own arithmetic and,
where a published run exists, against what it measured: parts sold by sparse figures, parts
without bf16, a two-die package that software sees as two GPUs, a Grace host, and Apple's
unified memory, which llama.cpp alone of the profiles runs on."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import run_cli
from ridgeline import estimate
from ridgeline.accuracy import corpus
from ridgeline.deployment import Deployment
from ridgeline.engines import builtin_engines
from ridgeline.hardware import builtin_catalogue, get_accelerator, gpu_key
from ridgeline.step import decode_step

GIB = 2**30


def test_sparse_data_sheets_are_halved_and_hbm_is_binary() -> None:
    """H100 NVL's sheet states 1,671 bf16 and 3,341 fp8 TFLOP/s with sparsity and 94GB of
    HBM3; the RTX 6000 Ada's 1,457 fp8 with sparsity; the RTX A6000's 309.7 tensor TFLOP/s
    with sparsity. The catalogue holds the dense halves, and 94 GiB."""
    cat = builtin_catalogue()
    nvl = cat["h100-nvl"]
    assert nvl.peak_flops["bf16"] == pytest.approx(1671e12 / 2, rel=1e-3)
    assert nvl.peak_flops["fp8"] == pytest.approx(3341e12 / 2, rel=1e-3)
    assert nvl.memory_bytes == 94 * GIB
    assert cat["rtx-6000-ada"].peak_flops["fp8"] == pytest.approx(1457e12 / 2, rel=1e-3)
    assert cat["rtx-a6000"].peak_flops["bf16"] == pytest.approx(309.7e12 / 2, rel=1e-3)


def test_mi250x_is_one_of_its_two_gcds() -> None:
    """ROCm shows an MI250X as two devices: each is half of the package's 383 TFLOP/s,
    3.2 TB/s and 128 GiB, and a matmul's measured 147.0 TFLOP/s is one GCD's."""
    gcd = builtin_catalogue()["mi250x"]
    assert gcd.peak_flops["bf16"] == pytest.approx(383e12 / 2)
    assert gcd.bandwidth_bytes_per_s == pytest.approx(3.2e12 / 2)
    assert gcd.memory_bytes == 128 * GIB / 2
    assert gcd.sustained("bf16") == pytest.approx(147.0e12, rel=1e-3)
    assert gcd.vendor_name == "amd" and gcd.link_kind == "xgmi"


def test_mi355x_dense_peaks_follow_its_compute_units() -> None:
    """256 compute units at 2.4 GHz, 4,096 fp16 FLOPs a clock each; fp8 twice and fp4 four
    times that."""
    mi355x = builtin_catalogue()["mi355x"]
    fp16 = 256 * 2.4e9 * 4096
    assert mi355x.peak_flops["bf16"] == pytest.approx(fp16, rel=1e-4)
    assert mi355x.peak_flops["fp8"] == pytest.approx(2 * fp16, rel=1e-4)
    assert mi355x.peak_flops["fp4"] == pytest.approx(4 * fp16, rel=1e-4)
    assert mi355x.memory_bytes == 288 * GIB


MIB = 2**20


def test_blackwell_ultra_holds_its_data_sheets_dense_rates_and_nvidia_smis_memory() -> None:
    """The HGX B300 sheet: 144 PFLOPS of FP4 with sparsity over 8 GPUs, 108 without (14 a GPU
    rounded down by NVIDIA's per-GPU table), FP8 72 and BF16 36 with sparsity (4.5 and 2.25
    dense a GPU). GB300 NVL72: 1,080 PFLOPS of dense FP4, 360 of FP8 and 180 of BF16 over 72
    GPUs, 576 TB/s. nvidia-smi reports 275,040 MiB on a B300 and 284,208 on a GB300."""
    cat = builtin_catalogue()
    b300, gb300 = cat["b300"], cat["gb300"]
    assert b300.peak_flops["fp8"] == pytest.approx(72e15 / 2 / 8)
    assert b300.peak_flops["bf16"] == pytest.approx(36e15 / 2 / 8)
    assert b300.peak_flops["fp4"] == pytest.approx(14e15)
    assert gb300.peak_flops["fp4"] == pytest.approx(1080e15 / 72)
    assert gb300.peak_flops["fp8"] == pytest.approx(360e15 / 72)
    assert gb300.peak_flops["bf16"] == pytest.approx(180e15 / 72)
    assert gb300.bandwidth_bytes_per_s == pytest.approx(576e12 / 72)
    assert (b300.memory_bytes, gb300.memory_bytes) == (275_040 * MIB, 284_208 * MIB)
    # a tenth or less of the B200's INT8: Blackwell Ultra gave that silicon to FP4
    assert b300.peak_flops["int8"] < cat["b200"].peak_flops["int8"] / 10
    assert b300.async_mma and b300.mma_rows == 128 and gb300.host_overhead == cat["gb200"].host_overhead


def test_llama_405b_in_fp8_fits_two_b300s_but_not_two_b200s() -> None:
    """405e9 fp8 weights are 405 GB: two B200s hold 2 x 180 GiB = 386.5 GB, two B300s
    2 x 275,040 MiB = 576.8 GB. On four of each, where both fit, decode reads the same bytes a
    GPU, so TPOT goes as the parts' bandwidths (8.0 and 7.7 TB/s)."""
    fits = {gpu: estimate(model="llama-3.1-405b", gpu=gpu, tp=2, weights="fp8", maths="fp8").memory.fits
            for gpu in ("b200", "b300")}  # fmt: skip
    assert fits == {"b200": False, "b300": True}
    b300, b200 = (estimate(model="llama-3.1-405b", gpu=gpu, tp=4, weights="fp8", maths="fp8")
                  for gpu in ("b300", "b200"))  # fmt: skip
    assert b300.tpot_s / b200.tpot_s == pytest.approx(8.0e12 / 7.7e12, rel=0.02)


@pytest.mark.parametrize("gpu, fp16", [("v100", 125e12), ("t4", 65e12)])
def test_a_part_without_bf16_runs_bf16_maths_at_its_fp16_rate(gpu: str, fp16: float) -> None:
    """Volta and Turing have no bf16: a bf16 model's prefill is priced at the fp16 tensor
    rate (the lesson's 60% of it), and fp8 maths, which they lack, is one clear line."""
    e = estimate(model="llama-3.2-1b", gpu=gpu, prompt=4096, output=1, preset="lesson")
    assert e.prefill.bound == "compute"
    assert float(e.prefill.compute_s) == pytest.approx(float(e.prefill.flops) / (0.6 * fp16), rel=1e-9)
    proc = run_cli("estimate", "--gpu", gpu, "--maths", "fp8")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "no fp8 peak" in proc.stderr


def test_the_catalogue_table_marks_an_fp16_rate_in_the_bf16_column() -> None:
    proc = run_cli("gpus")
    assert proc.returncode == 0, proc.stderr
    v100 = next(line for line in proc.stdout.splitlines() if line.strip().startswith("v100"))
    assert "125 TFLOP/s*" in v100
    assert "* no bf16: its fp16 rate" in proc.stdout


def test_gh200s_grace_runs_the_host_work_slower_by_its_measured_ratio() -> None:
    """A Linear forward's CPU time: 33.17 us on a GH200's Grace against 13.48 us on a DGX
    H100's Xeon (TransformerEngine issue 2053): TensorRT-LLM's host work a step is that much
    longer on a GH200 than on an H100 SXM, the same Hopper GPU behind an x86 host."""
    ratio = 33.17 / 13.48
    for name in ("gh200", "gh200-144gb"):
        assert builtin_catalogue()[name].host_overhead == pytest.approx(ratio, abs=0.005)
    gh200, h100 = (Deployment.build("llama-3.1-8b", gpu, engine="trtllm") for gpu in ("gh200", "h100-sxm"))
    ratio_here = float(decode_step(gh200, 1000, 512).host_s) / float(decode_step(h100, 1000, 512).host_s)
    assert ratio_here == pytest.approx(builtin_catalogue()["gh200"].host_overhead, rel=1e-12)


APPLE = ("m1-max", "m2-ultra", "m3-max", "m4-max", "m3-ultra")


@pytest.mark.parametrize("gpu", APPLE)
def test_apple_gpus_hold_three_quarters_of_unified_memory(gpu: str) -> None:
    """macOS lets the GPU hold 3/4 of the unified memory by default (llama.cpp's Metal log:
    73,728 MB recommended on a 96 GB M2 Max, llama.cpp issue 3213): a 192 GB machine plans
    144 GiB."""
    unified = {"m1-max": 64, "m2-ultra": 192, "m3-max": 128, "m4-max": 128, "m3-ultra": 512}[gpu]
    part = builtin_catalogue()[gpu]
    assert part.memory_bytes == unified * GIB * 3 // 4
    assert part.vendor_name == "apple" and part.mma_rows == 8 and part.link_kind == "none"


def test_only_llamacpp_runs_on_apple() -> None:
    """vLLM, SGLang and TensorRT-LLM run on CUDA, ROCm or x86 CPUs, not Metal: each says so
    in one line; llama.cpp's profile runs."""
    for engine in ("vllm", "sglang", "trtllm"):
        assert "apple" not in builtin_engines()[engine].runs_on
        proc = run_cli("estimate", "--gpu", "m2-ultra", "--engine", engine)
        assert proc.returncode == 2
        assert proc.stderr.count("\n") == 1 and "does not run on apple accelerators" in proc.stderr
    assert run_cli("estimate", "--gpu", "m2-ultra", "--engine", "llamacpp").returncode == 0


# llama.cpp discussion 4167 (Apple Silicon, llama-bench, Metal, -ngl 99): LLaMA 2 7B in Q4_0,
# tg128 and pp512 tokens a second. The corpus's Apple rows (X51-X70) are other chips' and
# other models': these are held out.
TG128_Q4_0 = {"m2-ultra": 94.27, "m4-max": 83.06, "m3-ultra": 92.14}
PP512_Q4_0 = {"m2-ultra": 1238, "m4-max": 886, "m3-ultra": 1471}


@pytest.mark.parametrize("gpu", sorted(TG128_Q4_0))
def test_llamacpp_on_apple_reads_the_held_out_table(gpu: str) -> None:
    """Batch-1 decode of a 3.56 GiB Q4_0 model reads its weights at every token, within what
    Metal's cores keep in flight, and each kernel of a two-die Ultra ends only when both dies
    have: within 15% (the profile fitted on NVIDIA cards alone read +18%, -7% and +23%). Its
    prompts multiply at Metal's own share of the FP16 rate: within 20% (26-35% slow before)."""
    shape = {"model": "llama-2-7b", "gpu": gpu, "engine": "llamacpp", "weights": "int4-g32"}
    e = estimate(**shape, maths="fp16", prompt=1, output=128)
    assert e.decode.bound == "memory"
    assert 1.0 / e.tpot_s == pytest.approx(TG128_Q4_0[gpu], rel=0.15)
    prompt = estimate(**shape, prompt=512, output=1)
    assert 512 / prompt.prefill.time_s == pytest.approx(PP512_Q4_0[gpu], rel=0.2)


# The MAMF table (stas00/ml-engineering @744d01e1): the H100 SXM's and the H200's bf16 and fp8
# matmuls at their 700 W board power ("H200 is the same" in bf16).
H100_MAMF = {"bf16": 794.5e12, "fp8": 1402.6e12}
H200_MAMF = {"bf16": 794.5e12, "fp8": 1453.4e12}
# GH100 on a 350 W PCIe board, bf16: an H100 PCIe and an H800 PCIe in zzc0721/torch-performance-
# test-data's table, and chsasank/device-benchmarks' H100 PCIe
PCIE_350W = statistics.median([495.93e12, 503.83e12, 449e12])
# the die's rate against its board's power, rate ~ watts ^ a, from the 350 W and 700 W boards
GH100_POWER_EXPONENT = math.log(H100_MAMF["bf16"] / PCIE_350W) / math.log(700 / 350)


def test_the_h100_pcie_sustains_its_boards_measured_rate() -> None:
    """The median of three 350 W boards, of the 756 TFLOP/s the data sheet states."""
    assert get_accelerator("h100-pcie").matmul_share["bf16"] == pytest.approx(PCIE_350W / 756e12, rel=1e-3)


@pytest.mark.parametrize(
    ("gpu", "watts", "at_700w"),
    [("h100-pcie", 350, H100_MAMF), ("h100-nvl", 400, H100_MAMF), ("h200-nvl", 600, H200_MAMF)],
)
def test_a_gh100_board_on_less_power_follows_the_measured_boards_power_law(
    gpu: str, watts: int, at_700w: dict[str, float]
) -> None:
    """The die's rate on a 350 W board (the PCIe boards) and on a 700 W one (MAMF's SXM) fix
    an exponent, rate ~ watts ^ a; each dtype of a board no table measures sits on it, from
    its rate at 700 W."""
    hw = get_accelerator(gpu)
    for dtype, rate in at_700w.items():
        assert hw.matmul_share[dtype] == pytest.approx(
            rate * (watts / 700) ** GH100_POWER_EXPONENT / hw.peak_flops[dtype], rel=2e-3
        )


# zzc0721/torch-performance-test-data database.md @9d82827d: torch matmul TFLOP/s of bf16
# (of fp16 on a T4), the best of five square sizes, each board listed
TORCH_MATMUL = {
    "l40s": [269.15],
    "l4": [70.89],
    "rtx-a6000": [123.34],
    "rtx-pro-6000": [417.98, 409.42],  # Workstation, Server Edition
    "rtx-3090": [76.34, 76.68, 76.58],
    "rtx-4090": [170.06, 173.31, 162.39, 163.09, 165.71, 164.81],  # the 24 GB boards
    "rtx-5090": [236.03, 242.18, 221.65, 240.05],  # not the 5090 D
    "t4": [41.91, 42.71, 41.93],
}


@pytest.mark.parametrize("gpu", sorted(TORCH_MATMUL))
def test_a_part_the_mamf_table_lacks_sustains_its_measured_torch_matmul(gpu: str) -> None:
    """The median board's rate, of the data sheet's peak: above 1 on a GeForce part, whose
    half-rate fp32-accumulate matmuls its board holds past the sheet's boost clock."""
    hw = get_accelerator(gpu)
    dtype = "fp16" if gpu == "t4" else "bf16"
    measured = statistics.median(TORCH_MATMUL[gpu]) * 1e12
    assert hw.matmul_share[dtype] == pytest.approx(measured / hw.peak_flops[dtype], rel=1e-3)


def test_a_geforce_parts_full_rate_dtypes_do_not_take_its_half_rate_share() -> None:
    """A GeForce part's bf16 (fp32 accumulate) runs at half its tensor cores' rate; fp16
    accumulate, fp8 and int8 run at the full rate and draw its power: unmeasured, they keep
    the median's 0.80."""
    for gpu, full_rate in (("rtx-3090", ("fp16acc16", "int8")), ("rtx-4090", ("fp16acc16", "fp8", "int8"))):
        hw = get_accelerator(gpu)
        assert hw.achievable("bf16") > 0.99
        assert all(hw.achievable(d) == 0.80 for d in full_rate)
    assert get_accelerator("rtx-5090").achievable("fp4") == 0.80


def test_the_rtx_6000_ada_sustains_the_l40s_rate_at_its_own_power() -> None:
    """The L40S's AD102 (142 SMs, 350 W) on a 300 W board: its measured 269.15 TFLOP/s scaled
    by the power law of the GH100 boards (the same TSMC 4N process). The L40, the same die at
    300 W, multiplies at half the L40S's rate with fp32 accumulate: unmeasured, the median."""
    ada = get_accelerator("rtx-6000-ada")
    assert ada.sustained("bf16") == pytest.approx(269.15e12 * (300 / 350) ** GH100_POWER_EXPONENT, rel=1e-3)
    half = get_accelerator("l40s").peak_flops["bf16"] / 2
    assert get_accelerator("l40").peak_flops["bf16"] == pytest.approx(half, rel=1e-3)
    assert get_accelerator("l40").matmul_share == {"bf16": 0.80}


def test_the_rtx_pro_6000s_peaks_follow_its_sms_and_clock() -> None:
    """188 SMs of GB202 at the clock its 125 TFLOPS of FP32 imply (128 lanes, an FMA each):
    1,024 dense FP16 FLOPs an SM a clock, as Ada's and the RTX 5090's, FP32 accumulate at
    full rate on a professional part; its 4,000 AI TOPS are FP4 with sparsity."""
    pro = get_accelerator("NVIDIA RTX PRO 6000 Blackwell Server Edition")
    assert pro.name == "rtx-pro-6000" and not pro.async_mma
    assert pro.units * 128 * 2 * pro.clock_hz == pytest.approx(125e12, rel=0.01)
    assert pro.peak_flops["bf16"] == pytest.approx(pro.units * 1024 * pro.clock_hz, rel=0.01)
    assert pro.peak_flops["fp4"] == pytest.approx(4000e12 / 2, rel=1e-9)
    assert pro.bandwidth_bytes_per_s == pytest.approx(512 / 8 * 28e9, rel=1e-9)  # 512-bit GDDR7, 28 Gbps
    assert pro.memory_bytes == 96 * 2**30  # GDDR7 sized in binary units, as a GeForce card's


def test_tensorrt_llm_on_an_h100_pcie_reads_nvidias_stated_throughput() -> None:
    """NVIDIA stated 17,500 output tokens/s for TensorRT-LLM 0.20 serving Llama 3.1 8B in FP8,
    128 tokens in and 128 out, on one H100 PCIe (TensorRT-LLM issue 6294); no corpus row is on
    that part. The corpus's run of the same on an H100 SXM (D23), moved to the PCIe part, reads
    it within 10% (+2% at its boards' measured matmul rate; 31% fast while the part took the
    unmeasured parts' 0.80, 16% slow at the SXM's FLOP per joule)."""
    sxm = next(r for r in corpus.rows() if r.id == "D23")
    assert (sxm.model, sxm.weights, sxm.input, sxm.output) == ("llama-3.1-8b", "fp8", 128, 128)
    pcie = replace(sxm, gpu="h100-pcie", measured=17_500.0)
    assert corpus.predict(pcie, builtin_engines()["trtllm"]) == pytest.approx(17_500, rel=0.1)


def test_search_takes_apple_parts_only_when_named() -> None:
    """`search`'s default space is every accelerator rented by the hour: the new data-centre
    parts are in it, the Macs, whose price is a purchase spread over three years, are not;
    named, they are."""
    from ridgeline.models import get_model
    from ridgeline.search.space import make_space

    arch = get_model("llama-3.2-1b")
    everything = make_space({}, None, arch)
    assert {"h100-nvl", "gh200", "l40", "t4", "mi355x"} <= set(everything.gpu)
    assert not set(everything.gpu) & set(APPLE)
    named = make_space({"gpu": "m4-max,h100-sxm"}, None, arch)
    assert named.gpu == ("m4-max", "h100-sxm")
    assert all(not builtin_catalogue()[name].rented for name in APPLE)


def test_a_users_rented_mac_joins_the_default_space(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """What leaves a part out of `all` is its price's kind, not its vendor: a Mac rented by
    the hour, in the user's own file, is in; `rented` must be true or false."""
    from ridgeline.models import get_model
    from ridgeline.search.space import make_space

    mac = tmp_path / "macs.toml"
    mac.write_text(
        "[rented-mac]\npeak_flops = { fp16 = 18.4e12 }\nbandwidth_bytes_per_s = 546e9\n"
        'memory_bytes = 96e9\nvendor = "apple"\nprice_per_hour_usd = 1.2\n'
    )
    space = make_space({}, None, get_model("llama-3.2-1b"), str(mac))
    assert "rented-mac" in space.gpu and "m4-max" not in space.gpu
    mac.write_text(mac.read_text() + 'rented = "no"\n')
    proc = run_cli("gpus", "--gpu-file", str(mac))
    assert proc.returncode == 2
    assert "rented-mac rented" in proc.stderr and "must be true or false" in proc.stderr


@pytest.mark.parametrize(
    "spelled, part",
    [
        ("H100", "h100-sxm"),  # what a benchmark means by an H100: the SXM part
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),  # nvidia-smi's name for it
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm"),
        ("NVIDIA A100 80GB PCIe", "a100-80gb-pcie"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("4090", "rtx-4090"),
        ("NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada"),
        ("Tesla T4", "t4"),
        ("AMD Instinct MI300X", "mi300x"),
        ("NVIDIA B300 SXM6 AC", "b300"),
        ("NVIDIA GB300", "gb300"),
        ("Apple M2 Ultra", "m2-ultra"),
        ("h100_sxm", "h100-sxm"),
    ],
)
def test_a_gpu_answers_to_the_names_people_and_drivers_give_it(spelled: str, part: str) -> None:
    """--gpu takes the catalogue's name, an alias it lists, or the name the driver prints:
    case, spaces and underscores aside, and the vendor's words left out."""
    assert get_accelerator(spelled) is builtin_catalogue()[part]
    assert estimate(gpu=spelled).inputs["gpu"] == part


def test_no_two_parts_share_a_name_and_an_unknown_one_is_one_line() -> None:
    """Every name and alias in the catalogue reads as one part only; a name none has is the
    catalogue's one line, with close names."""
    owner: dict[str, str] = {}
    for name, acc in builtin_catalogue().items():
        for spelled in (name, *acc.aliases):
            key = gpu_key(spelled)
            assert owner.setdefault(key, name) == name, f"{spelled!r} names {owner[key]} and {name}"
    proc = run_cli("estimate", "--gpu", "NVIDIA H100 SXM6")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "unknown GPU 'NVIDIA H100 SXM6': did you mean h100-sxm," in proc.stderr


def test_a_users_part_takes_aliases_and_wins_a_shared_one(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A user's file lists aliases as the catalogue does, and where one is also a built-in
    part's, the user's part is the one named, as a user's entry wins over the catalogue's;
    the search resolves the same names, once each."""
    from ridgeline.models import get_model
    from ridgeline.search.space import make_space

    mine = tmp_path / "gpus.toml"
    mine.write_text(
        '[lab-h100]\naliases = ["h100", "Lab Box"]\npeak_flops = { bf16 = 700e12 }\n'
        "bandwidth_bytes_per_s = 3e12\nmemory_bytes = 80e9\nprice_per_hour_usd = 2.0\n"
    )
    assert get_accelerator("h100", str(mine)).name == "lab-h100"
    assert get_accelerator("LAB_BOX", str(mine)).name == "lab-h100"
    assert get_accelerator("H100 SXM", str(mine)).name == "h100-sxm"  # its own name beats an alias
    names = "Lab Box,lab-h100,NVIDIA H100 80GB HBM3"
    space = make_space({"gpu": names}, None, get_model("llama-3.2-1b"), str(mine))
    assert space.gpu == ("lab-h100", "h100-sxm")
    mine.write_text(mine.read_text().replace('aliases = ["h100", "Lab Box"]', 'aliases = "h100"'))
    proc = run_cli("gpus", "--gpu-file", str(mine))
    assert proc.returncode == 2 and "aliases must be a list" in proc.stderr


@pytest.mark.parametrize(
    "gpu, units, clock_hz",
    [
        ("h100-sxm", 132, 1.98e9),  # the Hopper whitepaper's SXM5: 132 SMs, 1,980 MHz boost
        ("a100-80gb-sxm", 108, 1.41e9),  # the A100 whitepaper: 108 SMs, 1,410 MHz
        ("rtx-4090", 128, 2.52e9),  # the Ada whitepaper: 128 SMs, 2,520 MHz
        ("mi300x", 304, 2.1e9),  # the CDNA 3 whitepaper: 304 compute units, 2,100 MHz
    ],
)
def test_the_catalogue_states_each_parts_cores_and_clock(gpu: str, units: int, clock_hz: float) -> None:
    part = builtin_catalogue()[gpu]
    assert (part.units, part.clock_hz) == (units, clock_hz)
    assert part.unit_cycles_per_s == pytest.approx(units * clock_hz)
    assert part.dies == 1


@pytest.mark.parametrize("gpu", APPLE)
def test_an_apple_gpus_clock_is_the_one_its_fp32_peak_implies(gpu: str) -> None:
    """Apple states TFLOPS, not clocks: 128 FP32 lanes a GPU core, two FLOPs a lane a clock,
    so the clock is the peak over 256 a core, to the MHz; the two Ultras span two dies."""
    part = builtin_catalogue()[gpu]
    assert part.clock_hz == pytest.approx(part.peak_flops["fp32"] / (256 * part.units), rel=2e-3)
    assert part.dies == (2 if gpu.endswith("ultra") else 1)


def test_a_parts_cores_and_dies_are_whole_numbers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    mine = tmp_path / "gpus.toml"
    base = "[lab]\npeak_flops = { bf16 = 312e12 }\nbandwidth_bytes_per_s = 2e12\nmemory_bytes = 80e9\n"
    wrong = (("units = 1.5", "lab units"), ("dies = 0", "lab dies"), ("clock_hz = -1", "lab clock_hz"))
    for bad, says in wrong:
        mine.write_text(base + bad + "\n")
        proc = run_cli("gpus", "--gpu-file", str(mine))
        assert proc.returncode == 2 and says in proc.stderr and proc.stderr.count("\n") == 1


def test_a_file_given_as_gpu_points_to_gpu_file(tmp_path: Path) -> None:
    """--gpu takes a name; a TOML file in its place is told to go through --gpu-file, which
    then makes its table's name a --gpu value."""
    part = tmp_path / "mine.toml"
    part.write_text(
        "[mine]\npeak_flops = { bf16 = 100e12 }\nbandwidth_bytes_per_s = 1e12\nmemory_bytes = 24e9\n"
        'interconnect = "pcie"\ninterconnect_bytes_per_s = 32e9\n'
        'price_per_hour_usd = 1.0\nsource = "a test"\n'
    )
    proc = run_cli("estimate", "--gpu", str(part))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "--gpu-file" in proc.stderr and "unknown GPU" not in proc.stderr
    proc = run_cli("estimate", "--gpu-file", str(part), "--gpu", "mine", "--json")
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("estimate", "--gpu", str(tmp_path / "mine.json"))  # the other format --gpu-file reads
    assert proc.returncode == 2 and "--gpu-file" in proc.stderr and "unknown GPU" not in proc.stderr
