"""Unit tests for each formula, against independent arithmetic."""

from __future__ import annotations

from pathlib import Path

import pytest

from ridgeline import RidgelineError, estimate
from ridgeline.deployment import Deployment
from ridgeline.hardware import get_accelerator
from ridgeline.ledger import attended_pairs, cached_tokens, kv_bytes_per_token, pass_work
from ridgeline.models import get_model
from ridgeline.precision import make_precision, weight_bits
from ridgeline.request import decode_time_s
from ridgeline.step import decode_step

L, D, P8 = 32, 4096, 8_030_261_248  # Llama 3.1 8B: layers, hidden, parameters by hand


def test_llama_8b_parameters_by_hand() -> None:
    """q, k, v, o + gated MLP + two norms per layer, final norm, embedding, untied lm_head."""
    per_layer = 4096 * 4096 * 2 + 4096 * 1024 * 2 + 3 * 4096 * 14336 + 2 * 4096
    expected = 32 * per_layer + 4096 + 2 * 128256 * 4096
    assert expected == P8
    assert get_model("llama-3.1-8b").parameters == P8


def test_llama_70b_parameters() -> None:
    assert get_model("llama-3.1-70b").parameters == pytest.approx(70.55e9, rel=1e-3)


def test_prefill_flops_are_2PN_plus_2LdN2() -> None:
    m = Deployment.build()
    n = 2000
    work = pass_work(m.arch, m.prec, n)
    assert work.linear_flops == 2 * P8 * n
    assert work.attention_flops == pytest.approx(2 * L * D * n * n)


def test_decode_flops_are_2P_plus_4LdC() -> None:
    m = Deployment.build()
    c = 1000
    work = pass_work(m.arch, m.prec, 1, c)
    assert work.flops == pytest.approx(2 * P8 + 4 * L * D * c, rel=1e-4)


def test_decode_bytes_are_weights_plus_batch_context_k() -> None:
    """Bytes per step = weight bytes + B * C * k, plus the B new tokens' KV written."""
    m = Deployment.build()
    k = 131072
    work = pass_work(m.arch, m.prec, 1, 300, batch=8)
    assert work.bytes == 2 * P8 + 8 * 300 * k + 8 * k


def test_time_is_max_of_compute_and_memory() -> None:
    e = estimate(preset="ideal")
    flops_s = e.prefill.flops / 989e12
    bytes_s = e.prefill.bytes / 3.35e12
    assert e.prefill.time_s == pytest.approx(max(flops_s, bytes_s))
    assert e.decode.time_s == pytest.approx(max(e.decode.flops / 989e12, e.decode.bytes / 3.35e12))


def test_lesson_preset_divides_by_efficiencies() -> None:
    ideal, lesson = estimate(preset="ideal"), estimate()
    assert lesson.ttft_s == pytest.approx(ideal.ttft_s / 0.6)
    assert lesson.decode.time_s == pytest.approx(ideal.decode.time_s / 0.8)


def test_ideal_json_numbers_of_the_issue() -> None:
    """Prefill 33.5 +- 0.5 ms; the first decode step reads weights + 2,000 tokens of KV: 4.87 ms."""
    e = estimate(preset="ideal")
    assert e.prefill.time_s == pytest.approx(0.0335, abs=0.0005)
    assert e.decode.time_s == pytest.approx((2 * P8 + 2001 * 131072) / 3.35e12)
    assert e.decode.time_s == pytest.approx(0.00487, abs=0.00002)


def test_request_timeline_sums_each_step() -> None:
    """TPOT is the mean of 500 steps whose contexts run from 2,000 to 2,499."""
    e = estimate(output=500)
    k = 131072
    steps = [(2 * P8 + (2000 + i) * k + k) / (0.8 * 3.35e12) for i in range(500)]
    assert e.tpot_s == pytest.approx(sum(steps) / 500)
    assert e.total_s == pytest.approx(e.ttft_s + sum(steps))
    assert e.tokens_per_s == pytest.approx(1 / e.tpot_s)


def test_batch_prefill_is_one_pass_of_B_N_tokens() -> None:
    one, four = estimate(batch=1, preset="ideal"), estimate(batch=4, preset="ideal")
    assert four.prefill.flops == pytest.approx(4 * one.prefill.flops)
    assert four.batch_tokens_per_s == pytest.approx(4 / four.tpot_s)


def test_one_more_output_token_adds_exactly_its_decode_step() -> None:
    a = estimate(prompt=100, output=4096)
    b = estimate(prompt=100, output=4097)
    last = decode_step(Deployment.build(), 100 + 4096).time_s  # the one extra step, by the loop's formula
    assert b.total_s - a.total_s == pytest.approx(last, rel=1e-9)


def test_kv_bytes_per_token_is_2_kvheads_headdim_bytes_layers() -> None:
    m = Deployment.build()
    assert kv_bytes_per_token(m.arch, m.prec) == 2 * 8 * 128 * 2 * 32
    fp8 = Deployment.build(kv_dtype="fp8")
    assert kv_bytes_per_token(fp8.arch, fp8.prec) == 2 * 8 * 128 * 32


def test_weight_bits_with_group_scales() -> None:
    assert weight_bits("int4") == 4
    assert weight_bits("int4-g128") == pytest.approx(4.125)
    assert make_precision("fp8").weight_bytes_per_param == 1


def test_sliding_window_pairs_and_reads() -> None:
    assert attended_pairs(10, 0, 0) == 50
    assert attended_pairs(10, 100, 4) == 40  # every query sees only the window
    assert attended_pairs(4, 0, 100) == 8  # inside the window: causal half
    assert cached_tokens(5000, 4096) == 4096


def test_ridge_values() -> None:
    assert get_accelerator("h100-sxm").ridge() == pytest.approx(295.2, abs=0.1)
    assert get_accelerator("a100-80gb-sxm").ridge() == pytest.approx(153.0, abs=0.1)


# An "80GB" H100's HBM: 80 GiB (nvidia-smi reports 81,559 MiB of it to a process).
H100_MEMORY_BYTES = 80 * 2**30


def test_memory_fits_and_shortfall() -> None:
    e = estimate("llama-3.1-70b")
    assert not e.memory.fits
    assert e.memory.shortfall_bytes == pytest.approx(e.memory.per_gpu.total_bytes - 0.9 * H100_MEMORY_BYTES)
    ok = estimate()
    assert ok.memory.fits and ok.memory.shortfall_bytes == 0


def test_tp_splits_weights_and_memory_is_per_gpu() -> None:
    e = estimate("llama-3.1-70b", tp=4)
    assert e.memory.per_gpu.weight_bytes == pytest.approx(e.memory.weight_bytes / 4)
    assert e.memory.per_gpu.capacity_bytes == H100_MEMORY_BYTES
    assert e.memory.fits


def test_training_contrast() -> None:
    e = estimate()
    assert e.training.flops_per_token == 6 * P8
    assert e.training.bytes_per_parameter == 16


def test_cost_per_million_tokens() -> None:
    e = estimate(price_per_gpu_hour=3.6)  # $0.001 per GPU-second
    assert e.cost.usd_per_million_output_tokens == pytest.approx(0.001 * e.tpot_s * 1e6)
    assert e.cost.usd_per_million_input_tokens == pytest.approx(0.001 * e.ttft_s / 2000 * 1e6)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        ({"prompt": 0}, "--prompt"),
        ({"batch": -3}, "--batch"),
        ({"output": 2.5}, "--output"),
        ({"gpu": "h1OO"}, "unknown GPU"),
        ({"model": "lama-3.1-8b"}, "did you mean llama-3.1-8b"),
        ({"compute_eff": 0.0}, "[0.0001, 1]"),
        ({"bandwidth_eff": 1.2}, "[0.0001, 1]"),
        ({"prompt": 131000, "output": 500}, "exceeds"),
        ({"gpu": "a100-80gb-sxm", "maths": "fp8"}, "no fp8 peak"),
        ({"weights": "int3"}, "unknown weight dtype"),
        ({"tp": 3}, "does not divide"),
    ],
)
def test_bad_input_is_one_clear_error(kwargs: dict, fragment: str) -> None:
    with pytest.raises(RidgelineError, match=None) as info:
        estimate(**kwargs)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gemma-2-9b", "gemma-3-270m", "mixtral-8x7b"])
@pytest.mark.parametrize("method", ["lesson", "per-op"])
def test_the_decode_timeline_is_the_sum_of_its_steps(model: str, method: str) -> None:
    """The closed form sums each step's own price, across the sliding windows' edges (Gemma
    2's 4,096 and Gemma 3's 512) and where a step turns compute-bound (large batches)."""
    d = Deployment.build(model, method=method)
    for prompt, output, batch in ((2000, 500, 1), (100, 5000, 64), (500, 30, 256), (3, 1, 1)):
        if prompt + output > d.arch.max_context:
            continue
        steps = sum(float(decode_step(d, prompt + i, batch).time_s) for i in range(output))
        assert decode_time_s(d, prompt, output, batch) == pytest.approx(steps, rel=1e-10)


def test_a_model_path_that_is_no_config_says_what_it_is(tmp_path: Path) -> None:
    """A folder without config.json, or a device, given as --model is named for what it is,
    not taken for a misspelt catalogue name."""
    with pytest.raises(RidgelineError, match=r"is a folder with no config\.json"):
        get_model(str(tmp_path))
    with pytest.raises(RidgelineError, match="is not a regular file"):
        get_model("/dev/null")
    (tmp_path / "config.json").write_text(llama_8b_config_text())
    assert get_model(str(tmp_path)).parameters == P8  # the folder's config.json, once it has one


def llama_8b_config_text() -> str:
    """Llama 3.1 8B's config.json: the dims Meta publishes."""
    import json

    return json.dumps(
        {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 4096,
            "intermediate_size": 14336,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "vocab_size": 128256,
            "max_position_embeddings": 131072,
            "tie_word_embeddings": False,
            "torch_dtype": "bfloat16",
        }
    )
