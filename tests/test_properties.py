"""Properties the roofline guarantees, checked over many inputs (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ridgeline import estimate
from ridgeline.deployment import Deployment
from ridgeline.hardware import builtin_catalogue
from ridgeline.step import decode_step

prompts = st.integers(min_value=1, max_value=60_000)
batches = st.integers(min_value=1, max_value=512)


@settings(max_examples=60, deadline=None)
@given(prompt=prompts, extra=st.integers(1, 20_000), batch=batches)
def test_time_never_falls_as_the_prompt_grows(prompt: int, extra: int, batch: int) -> None:
    a = estimate(prompt=prompt, output=4, batch=batch)
    b = estimate(prompt=min(prompt + extra, 127_000), output=4, batch=batch)
    assert b.ttft_s >= a.ttft_s and b.total_s >= a.total_s


@settings(max_examples=60, deadline=None)
@given(prompt=prompts, batch=batches, more=st.integers(1, 256))
def test_time_never_falls_as_the_batch_grows(prompt: int, batch: int, more: int) -> None:
    a = estimate(prompt=prompt, output=4, batch=batch)
    b = estimate(prompt=prompt, output=4, batch=batch + more)
    assert b.ttft_s >= a.ttft_s and b.tpot_s >= a.tpot_s
    assert b.batch_tokens_per_s >= a.batch_tokens_per_s * (1 - 1e-12) or b.decode.bound == "compute"


@settings(max_examples=30, deadline=None)
@given(context=st.integers(0, 100_000), gpu=st.sampled_from(sorted(builtin_catalogue())))
def test_batch_one_decode_is_memory_bound_on_every_accelerator(context: int, gpu: str) -> None:
    for preset in ("ideal", "lesson"):
        m = Deployment.build(gpu=gpu, preset=preset)
        assert decode_step(m, context, 1).bound == "memory"


@settings(max_examples=60, deadline=None)
@given(prompt=prompts, batch=batches, output=st.integers(1, 600))
def test_ideal_is_never_slower_than_lesson(prompt: int, batch: int, output: int) -> None:
    ideal = estimate(prompt=prompt, output=output, batch=batch, preset="ideal")
    lesson = estimate(prompt=prompt, output=output, batch=batch, preset="lesson")
    assert ideal.ttft_s <= lesson.ttft_s and ideal.tpot_s <= lesson.tpot_s
