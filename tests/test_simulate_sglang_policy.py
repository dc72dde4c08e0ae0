"""SGLang's default scheduler in the simulator (scheduler.SglangPolicy): "a step is either a
prefill batch or a decode step"; "while a prefill batch can be formed it runs first, and the
decoders wait through it, emitting nothing"; vLLM's policy on the same requests still mixes
decodes into the prefill's step. Every expected time is summed from the core's step price."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import price_s
from ridgeline.deployment import Deployment
from ridgeline.engines import get_engine
from ridgeline.simulate import EngineConfig, Lengths, Trace, Workload, simulate
from ridgeline.simulate.run import Result

REL = 1e-9


@pytest.fixture(scope="module")
def m() -> Deployment:
    """Llama 3.1 8B on an H100 under SGLang's profile: its rates and per-step costs, and a
    lm_head only for the tokens a step samples."""
    return Deployment.build("llama-3.1-8b", "h100-sxm", engine="sglang")


def decode_s(m: Deployment, *contexts: int) -> float:
    """One decode step of sequences at these contexts: one new token each, each sampled."""
    return price_s(m, [(1, c) for c in contexts], len(contexts))


def run(m: Deployment, arrivals: list[float], prompts: list[int], outputs: list[int], policy: str) -> Result:
    trace = Trace(tuple(arrivals), tuple(prompts), tuple(outputs))
    return simulate(m, Workload(trace=trace, duration_s=None), engine=EngineConfig(policy=policy))


# A decodes alone; B arrives during A's decode step 9, and A sits out B's prefill.
PA, OA, PB, OB, PAUSED_AFTER = 1000, 50, 2000, 5, 10


def arrival_during_decode(m: Deployment) -> tuple[float, float]:
    """(when A's first token comes, when B arrives: halfway through A's decode step 9)."""
    first_a = price_s(m, [(PA, 0)], 1)
    before = sum(decode_s(m, PA + j) for j in range(PAUSED_AFTER - 1))
    return first_a, first_a + before + decode_s(m, PA + PAUSED_AFTER - 1) / 2


def test_a_decoder_pauses_for_exactly_the_prefill_step(m: Deployment) -> None:
    first_a, arrival_b = arrival_during_decode(m)
    r = run(m, [0.0, arrival_b], [PA, PB], [OA, OB], "sglang")
    t9 = first_a + sum(decode_s(m, PA + j) for j in range(PAUSED_AFTER))  # A's step 9 ends
    prefill_b = price_s(m, [(PB, 0)], 1)  # B's prompt alone: A adds no token to it
    together = [decode_s(m, PA + PAUSED_AFTER + k, PB + k) for k in range(OB)]
    alone_after = [decode_s(m, PA + j) for j in range(PAUSED_AFTER + OB, OA)]
    assert r.reqs.first_s[0] == pytest.approx(first_a, rel=REL)
    assert r.reqs.first_s[1] == pytest.approx(t9 + prefill_b, rel=REL)
    assert r.reqs.finish_s[1] == pytest.approx(t9 + prefill_b + sum(together), rel=REL)
    # A still runs its OA decode steps, no fewer: the pause is the prefill step's time
    assert r.reqs.finish_s[0] == pytest.approx(t9 + prefill_b + sum(together) + sum(alone_after), rel=REL)
    tr = r.engines[0].trace
    row = list(tr.t_s).index(pytest.approx(t9, rel=REL))
    assert (tr.tokens[row], tr.steps[row]) == (PB, 1)  # the prefill-only step: B's chunk, no decode
    assert tr.dt_s[row] == pytest.approx(prefill_b, rel=REL)
    assert PB + 1 not in tr.tokens  # no step mixes A's token into B's prefill
    assert sum(n * k for n, k in zip(tr.tokens, tr.steps, strict=True)) == PA + OA + PB + OB


def test_vllms_policy_on_the_same_requests_mixes_the_decode_into_the_prefill(m: Deployment) -> None:
    first_a, arrival_b = arrival_during_decode(m)
    r = run(m, [0.0, arrival_b], [PA, PB], [OA, OB], "vllm")
    t9 = first_a + sum(decode_s(m, PA + j) for j in range(PAUSED_AFTER))
    mixed = price_s(m, [(1, PA + PAUSED_AFTER), (PB, 0)], 2)  # A's token beside B's prompt
    assert r.reqs.first_s[1] == pytest.approx(t9 + mixed, rel=REL)
    tr = r.engines[0].trace
    assert PB + 1 in tr.tokens and PB not in tr.tokens


def test_prefills_run_first_in_whole_budgets_before_any_decode(m: Deployment) -> None:
    """Four 5,000-token prompts at once in SGLang's 8,192-token chunks: three prefill-only
    steps (the chunked one carried into the next), then all four decode together; vLLM would
    have decoded the first request beside the second step's chunks."""
    prompt, output, budget = 5000, 3, get_engine("sglang").scheduler.max_num_batched_tokens
    assert budget == 8192
    r = run(m, [0.0] * 4, [prompt] * 4, [output] * 4, "sglang")
    step1 = price_s(m, [(5000, 0), (3192, 0)], 1)  # A whole, B's first chunk
    step2 = price_s(m, [(1808, 3192), (5000, 0), (1384, 0)], 2)  # B ends, C whole, D begins
    step3 = price_s(m, [(3616, 1384)], 1)  # D ends
    decodes = sum(decode_s(m, *[prompt + j] * 4) for j in range(output))
    first = step1 + step2 + step3
    assert r.reqs.first_s == pytest.approx([step1, step1 + step2, step1 + step2, first], rel=REL)
    assert r.reqs.finish_s == pytest.approx([first + decodes] * 4, rel=REL)
    tr = r.engines[0].trace
    assert list(tr.tokens[:3]) == [budget, budget, 3616]
    assert set(tr.tokens[3:]) == {4}


def test_a_full_batch_decodes_and_the_next_prefill_waits_for_a_seat(m: Deployment) -> None:
    """With room for two running requests, the third waits while the two decode; when the
    first finishes its prefill runs alone and the second decoder sits it out."""
    cfg = EngineConfig(policy="sglang", max_num_seqs=2)
    trace = Trace((0.0, 0.0, 0.0), (600, 600, 900), (2, 6, 4))
    r = simulate(m, Workload(trace=trace, duration_s=None), engine=cfg)
    prefill_ab = price_s(m, [(600, 0), (600, 0)], 2)
    both = [decode_s(m, 600 + j, 600 + j) for j in range(2)]
    prefill_c = price_s(m, [(900, 0)], 1)
    b_and_c = [decode_s(m, 602 + k, 900 + k) for k in range(4)]
    t_c = prefill_ab + sum(both)
    assert r.reqs.finish_s[0] == pytest.approx(t_c, rel=REL)
    assert r.reqs.admit_s[2] == pytest.approx(t_c, rel=REL)
    assert r.reqs.first_s[2] == pytest.approx(t_c + prefill_c, rel=REL)
    assert r.reqs.finish_s[1] == pytest.approx(t_c + prefill_c + sum(b_and_c), rel=REL)
    assert r.reqs.finish_s[2] == pytest.approx(t_c + prefill_c + sum(b_and_c), rel=REL)


@pytest.mark.parametrize(
    "workload",
    [
        Workload(
            prompt=Lengths("lognormal", 1000, 0.5),
            output=Lengths("lognormal", 250, 0.5),
            rate_per_s=20,
            requests=800,
            duration_s=None,
        ),
        Workload(
            prompt=Lengths("fixed", 4000),
            output=Lengths("fixed", 1500),
            concurrency=48,
            requests=300,
            duration_s=None,
        ),  # preempts
        Workload(
            prompt=Lengths("fixed", 500),
            output=Lengths("fixed", 5000),
            rate_per_s=5,
            requests=40,
            duration_s=None,
        ),  # reserves are clipped at 4,096 tokens, and requests wait on them
    ],
    ids=["steady", "preempting", "long"],
)
def test_jumping_never_crosses_a_prefill_step(workload: Workload) -> None:
    """Closed-form decode runs stop where a prefill batch would run: the jumped timeline is
    the stepped one."""
    d = Deployment.build()
    jumped = simulate(d, workload=workload, engine=EngineConfig(policy="sglang", gpu_memory_utilization=0.35))
    stepped = simulate(
        d, workload=workload, engine=EngineConfig(policy="sglang", gpu_memory_utilization=0.35, jump=False)
    )
    assert sum(jumped.engines[0].trace.steps) == sum(stepped.engines[0].trace.steps)
    for key in ("admit_s", "first_s", "finish_s"):
        a, b = np.asarray(getattr(jumped.reqs, key)), np.asarray(getattr(stepped.reqs, key))
        np.testing.assert_allclose(a, b, rtol=REL)
    assert jumped.reqs.preemptions == stepped.reqs.preemptions


def test_the_sglang_profile_runs_sglangs_scheduler() -> None:
    assert get_engine("sglang").scheduler.policy == "sglang"
    assert get_engine("vllm").scheduler.policy == "vllm"
