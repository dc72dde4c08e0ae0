"""The host's share of a step. An engine that plans the next step while the GPU runs this one
(TensorRT-LLM's PyTorch runtime) hides its Python work behind the GPU's until that work is
the longer: a step takes max(GPU time, host work), and the host work is a sequence's cost
times the sequences, on a host as fast as the x86 server the profile states it for, or
`host_overhead` times slower (GB200's Grace)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from ridgeline import ledger, step
from ridgeline.accuracy import corpus
from ridgeline.cli import main
from ridgeline.deployment import Deployment
from ridgeline.engines import EngineProfile, builtin_engines, get_engine, profile_to_toml
from ridgeline.errors import RidgelineError
from ridgeline.hardware import get_accelerator as get_gpu
from ridgeline.request import decode_time_s
from ridgeline.simulate.engine import EngineConfig
from ridgeline.simulate.run import simulate
from ridgeline.simulate.steptime import DecodeRun, StepModel
from ridgeline.simulate.workload import Lengths, Workload

# NVIDIA/TransformerEngine issue 2053: PyTorch's CPU time for one Linear forward (bf16,
# hidden 2,048, 8,192 tokens), on a GB200's Grace and on a DGX H100's Xeon Platinum 8480C
GRACE_US, XEON_US = 37.08, 13.48
# NVIDIA/TensorRT-LLM pull request 10273: a GB200 serving gpt-oss-120b with attention DP 2
# and max_batch_size 1536, its host_step_time with the C++ scheduler
HOST_STEP_S, SEQUENCES = 45.11e-3, 1536


def qwen_fp4(gpu: str, engine: EngineProfile | str) -> Deployment:
    """Qwen3-30B-A3B in NVFP4 with an fp8 KV cache, as TensorRT-LLM 1.0's table ran it."""
    return Deployment.build("qwen3-30b-a3b", gpu, weights="fp4", maths="fp4", kv_dtype="fp8", engine=engine)


def test_the_catalogue_and_the_profile_state_their_sources_figures() -> None:
    """GB200's host_overhead is the ratio of the two CPU times, to the catalogue's two
    decimals; TensorRT-LLM's host work a sequence is the pull request's step over its 1,536
    sequences, on the x86 server that ratio converts it to; other parts and engines state none."""
    gb200 = get_gpu("gb200")
    assert gb200.host_overhead == pytest.approx(GRACE_US / XEON_US, abs=0.005)
    for name in ("b200", "h100-sxm", "h200", "mi300x"):
        assert get_gpu(name).host_overhead == 1.0
    trt = builtin_engines()["trtllm"]
    assert trt.host_sequence_s * gb200.host_overhead == pytest.approx(HOST_STEP_S / SEQUENCES, rel=1e-3)
    assert trt.scheduler.overlap
    assert "fixed" in trt.provenance["host_sequence_s"]
    assert all(builtin_engines()[e].host_sequence_s == 0.0 for e in ("vllm", "sglang", "llamacpp"))


def test_a_step_takes_the_longer_of_the_gpus_time_and_the_hosts_work() -> None:
    """A decode step of n sequences on a GB200 takes max(the GPU's time, n x 29.4 us); on a
    B200 (an x86 host) the host's 10.7 us a sequence hides behind the GPU at every n here."""
    for gpu in ("gb200", "b200"):
        d = qwen_fp4(gpu, "trtllm")
        per_seq = builtin_engines()["trtllm"].host_sequence_s * get_gpu(gpu).host_overhead
        for n in (1, 64, 512, 2048):
            s = step.decode_step(d, 1000, n)
            host = per_seq * n
            assert float(s.host_s) == pytest.approx(host, rel=1e-12)
            assert float(s.time_s) == max(float(s.gpu_s), host)
            assert bool(s.host_bound) == (host > float(s.gpu_s))
    gb200, b200 = (qwen_fp4(gpu, "trtllm") for gpu in ("gb200", "b200"))
    assert step.decode_step(gb200, 1000, 2048).host_bound  # Grace cannot keep up with 2,048 sequences
    assert not step.decode_step(b200, 1000, 2048).host_bound


def test_without_overlap_the_hosts_work_adds_to_the_step() -> None:
    """An engine that plans each step after the last one ends waits for its host in turn."""
    trt = builtin_engines()["trtllm"]
    serial = replace(trt, scheduler=replace(trt.scheduler, overlap=False))
    d, e = qwen_fp4("gb200", trt), qwen_fp4("gb200", serial)
    with_host, hidden = step.decode_step(e, 1000, 256), step.decode_step(d, 1000, 256)
    host = trt.host_sequence_s * 2.75 * 256
    assert float(with_host.host_s) == 0.0
    assert float(with_host.time_s) == pytest.approx(float(hidden.gpu_s) + host, rel=1e-12)


@pytest.mark.parametrize("host", [0.0, 0.005, 0.0125, 0.02, 0.5])
def test_a_runs_closed_form_is_the_sum_of_its_floored_steps(host: float) -> None:
    """A run of decode steps with the host's floor: the floor above every step, crossing the
    lines, or below them all. Its elapsed time is the sum of its steps one by one, and the
    search for the steps before a time finds what counting finds."""
    run = DecodeRun(0.010, 2e-5, 0.012, 1e-5, 3e-4, host)  # the lines cross at j = 200
    total = 0.0
    sums = [0.0]
    for j in range(1000):
        total += max(max(0.010 + 2e-5 * j, 0.012 + 1e-5 * j) + 3e-4, host)
        sums.append(total)
    for k in (1, 2, 7, 199, 200, 201, 480, 999, 1000):
        assert run.elapsed_s(k) == pytest.approx(sums[k], rel=1e-12)
    for delta in (0.001, 0.0103, 0.5071, 1.0037, 2.1003, 7.5123, 15.0011, 400.0):
        want = next((k for k in range(1, 1001) if sums[k] >= delta), 1000)
        k, elapsed = run.steps_and_elapsed(delta, 1000)
        assert k == want
        assert elapsed == run.elapsed_s(k)


def test_the_simulator_leaps_as_it_steps_where_the_host_bounds_the_step() -> None:
    """On a GB200 the host bounds the large batches' steps: the engine's closed-form runs give
    the times stepping one by one gives, and the step model's price is the core's."""
    d = qwen_fp4("gb200", "trtllm")
    model = StepModel(d)
    per_seq = builtin_engines()["trtllm"].host_sequence_s * 2.75
    assert model.host_per_seq == pytest.approx(per_seq, rel=1e-12)
    zeros = [0.0] * len(model.groups)
    for n in (8, 1024, 2048):
        core = step.price(d, ledger.Pass(n, tuple(zeros), tuple(zeros), n))
        assert model.time_s(n, zeros, zeros, n) == pytest.approx(float(core.time_s), rel=1e-12)
    w = Workload(
        prompt=Lengths("fixed", 128),
        output=Lengths("fixed", 300),
        arrival="constant",
        rate_per_s=1e6,
        requests=3000,
        duration_s=None,
    )
    runs = {jump: simulate(d, w, engine=EngineConfig(max_num_seqs=2048, jump=jump)) for jump in (True, False)}
    leap, one = (runs[j].records for j in (True, False))
    assert [r["e2e_s"] for r in leap] == pytest.approx([r["e2e_s"] for r in one], rel=1e-9, abs=1e-12)
    steps = runs[False].engines[0].trace
    assert max(steps.dt_s.tolist()) >= per_seq * 2000  # some step ran at the host's pace


def test_the_gb200_row_is_host_bound_and_a_b200_would_not_be() -> None:
    """TensorRT-LLM 1.0's Qwen3-30B-A3B at 128 in and 2,048 out (D30): 31,311 output tokens/s
    on a GB200 against 37,844 on a B200 (the table's same cell), where the GPUs alone would put
    the GB200 ahead. The host floor predicts the GB200 within 10% and leaves the B200 as it was."""
    trt = builtin_engines()["trtllm"]
    row = next(r for r in corpus.rows() if r.id == "D30")
    got = corpus.predict(row, trt)
    assert abs(got / 31311 - 1) < 0.10
    unhosted = replace(trt, host_sequence_s=0.0)
    assert corpus.predict(row, unhosted) > 1.2 * 31311  # the GPU alone is a fifth faster
    b200 = replace(row, gpu="b200")
    assert corpus.predict(b200, trt) == pytest.approx(corpus.predict(b200, unhosted), rel=1e-9)


def test_a_profile_writes_and_reads_its_host_work_and_rejects_nonsense(tmp_path: Path) -> None:
    """host_sequence_s survives the profile's TOML; a negative one is one clear error."""
    trt = builtin_engines()["trtllm"]
    path = tmp_path / "mine.toml"
    path.write_text(profile_to_toml(replace(trt, name="mine")), encoding="utf-8")
    assert get_engine(str(path)).host_sequence_s == trt.host_sequence_s
    written = profile_to_toml(replace(trt, name="bad"))
    bad = written.replace("host_sequence_s = 1.068e-05", "host_sequence_s = -1")
    assert bad != written
    (tmp_path / "bad.toml").write_text(bad, encoding="utf-8")
    with pytest.raises(RidgelineError, match="host_sequence_s"):
        get_engine(str(tmp_path / "bad.toml"))


GRACE_GPU = """
[slow-host]
peak_flops = { bf16 = 989e12 }
bandwidth_bytes_per_s = 3.35e12
memory_bytes = 85_899_345_920
host_overhead = 2.5
"""


@pytest.mark.parametrize("value", ["0", "-2", "1e9", "nan", "true", '"slow"'])
def test_a_host_overhead_out_of_range_is_one_line_and_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    gpus = tmp_path / "gpus.toml"
    gpus.write_text(GRACE_GPU.replace("host_overhead = 2.5", f"host_overhead = {value}"), encoding="utf-8")
    assert main(["estimate", "--gpu", "slow-host", "--gpu-file", str(gpus)]) == 2
    err = capsys.readouterr().err
    assert "host_overhead" in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_users_part_states_its_host_and_the_listing_shows_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gpus = tmp_path / "gpus.toml"
    gpus.write_text(GRACE_GPU, encoding="utf-8")
    assert main(["gpus", "--gpu-file", str(gpus), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["slow-host"]["host_overhead"] == 2.5
    assert listed["gb200"]["host_overhead"] == 2.75 and listed["b200"]["host_overhead"] == 1.0


@pytest.mark.parametrize(("batch", "output"), [(8, 300), (1000, 3000), (2048, 200)])
def test_a_requests_decode_time_sums_its_floored_steps(batch: int, output: int) -> None:
    """The estimate's closed-form decode time is the sum of its steps priced one by one: all
    above the host's floor (8 sequences), on it and then above it as the contexts grow
    (1,000), or on it throughout (2,048 over a short run)."""
    d = qwen_fp4("gb200", "trtllm")
    prompt = 128
    each = [float(step.decode_step(d, prompt + i, batch).time_s) for i in range(output)]
    assert decode_time_s(d, prompt, output, batch) == pytest.approx(math.fsum(each), rel=1e-9)
    hosted = [
        t for t in each if t == pytest.approx(builtin_engines()["trtllm"].host_sequence_s * 2.75 * batch)
    ]
    assert (len(hosted) > 0) == (batch >= 1000)


def test_why_names_the_host_where_it_bounds_decode(capsys: pytest.CaptureFixture[str]) -> None:
    """Where the host sets the step, the advice is the host's (fewer sequences a replica, a
    faster host), not the roofline's (faster maths); on a B200 the same batch reads as before."""
    shape = ["--model", "qwen3-30b-a3b", "--weights", "fp4", "--maths", "fp4", "--kv-dtype", "fp8"]
    shape += ["--engine", "trtllm", "--batch", "1024", "--prompt-tokens", "128", "--output-tokens", "1024"]
    said = {}
    for gpu in ("gb200", "b200"):
        assert main(["estimate", "--gpu", gpu, *shape, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        said[gpu] = " ".join(out["explain"])
        assert out["decode"]["host_bound"] == (gpu == "gb200")
    host_ms = 1024 * builtin_engines()["trtllm"].host_sequence_s * 2.75 * 1e3
    assert f"host work ({host_ms:,.2f} ms a step on gb200's host)" in said["gb200"]
    assert "faster host" in said["gb200"] and "faster maths (fp8) helps" not in said["gb200"]
    assert "host work" not in said["b200"]


def test_what_a_step_waits_on_is_the_host_or_its_bound() -> None:
    """The one word the table and the playground show: the roofline's bound, unless the host
    outlasts the GPU."""
    for gpu, want in (("gb200", "host"), ("b200", "compute")):
        s = step.decode_step(qwen_fp4(gpu, "trtllm"), 128, 1024)
        assert s.waits_on == want and s.bound == "compute"
    assert step.decode_step(Deployment.build(), 2000, 1).waits_on == "memory"
