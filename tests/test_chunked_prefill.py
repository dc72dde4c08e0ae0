"""Chunked prefill on and off (EngineConfig.chunked_prefill): with it off, a prefill runs whole
in one step, and a request whose prefill does not fit the step's budget left waits for one
that holds all of it."""

from __future__ import annotations

import pytest

from ridgeline.deployment import Deployment
from ridgeline.errors import RidgelineError
from ridgeline.simulate.engine import EngineConfig
from ridgeline.simulate.run import engine_config, simulate
from ridgeline.simulate.workload import Lengths, Trace, Workload

BUDGET = 8192


def two_prompts(prompt: int = 6000, output: int = 3) -> Workload:
    """Two requests of `prompt` tokens arriving together: together they overflow one step."""
    return Workload(trace=Trace((0.0, 0.0), (prompt, prompt), (output, output)), duration_s=None)


def first_steps(policy: str, chunked: bool, n: int = 2) -> list[int]:
    cfg = EngineConfig(max_num_batched_tokens=BUDGET, policy=policy, chunked_prefill=chunked, jump=False)
    res = simulate(Deployment.build(), two_prompts(), engine=cfg)
    return list(res.engines[0].trace.tokens)[:n]


# Tokens of the first two steps, from the policies' rules (scheduler.py) and 6,000 + 6,000
# against a budget of 8,192. vLLM and TensorRT-LLM mix decodes and prefills in a step: chunked,
# the second request takes the 2,192 left, then its other 3,808 beside the first one's decode
# token; whole, it waits, then runs all 6,000 beside that token. SGLang's prefill batches run
# alone, so no decode token joins them.
CASES = {
    ("vllm", True): [8192, 3809],
    ("vllm", False): [6000, 6001],
    ("no-evict", True): [8192, 3809],
    ("no-evict", False): [6000, 6001],
    ("sglang", True): [8192, 3808],
    ("sglang", False): [6000, 6000],
}


@pytest.mark.parametrize(("policy", "chunked"), list(CASES))
def test_a_prefill_is_split_only_when_chunked(policy: str, chunked: bool) -> None:
    assert first_steps(policy, chunked) == CASES[policy, chunked]


@pytest.mark.parametrize("policy", ["vllm", "no-evict", "sglang"])
def test_unchunked_the_first_prompt_has_its_step_to_itself(policy: str) -> None:
    """Unchunked, the first request's step holds its 6,000 tokens alone, so its first token
    comes when a lone request's would; chunked, the second request's first 2,192 tokens
    shared that step and made it longer."""
    lone = Workload(trace=Trace((0.0,), (6000,), (3,)), duration_s=None)
    ttft = {}
    for chunked in (True, False):
        cfg = EngineConfig(max_num_batched_tokens=BUDGET, policy=policy, chunked_prefill=chunked)
        ttft[chunked] = simulate(Deployment.build(), two_prompts(), engine=cfg).records[0]["ttft_s"]
        alone = simulate(Deployment.build(), lone, engine=cfg).records[0]["ttft_s"]
    assert ttft[False] == pytest.approx(alone, rel=1e-12)
    assert ttft[True] > alone * 1.1


# Three prompts arriving together, 6,000, 6,000 and 1,000 tokens, against 8,192: unchunked,
# vLLM's V1 scheduler passes over the second (it does not fit the 2,192 left) and admits the
# third; SGLang's and TensorRT-LLM's stop at the second, so the third waits behind it.
SKIP = {"vllm": 7000, "no-evict": 6000, "sglang": 6000}


@pytest.mark.parametrize("policy", list(SKIP))
def test_unchunked_vllm_passes_over_a_prompt_that_does_not_fit_and_the_others_wait(policy: str) -> None:
    w = Workload(trace=Trace((0.0,) * 3, (6000, 6000, 1000), (3, 3, 3)), duration_s=None)
    cfg = EngineConfig(max_num_batched_tokens=BUDGET, policy=policy, chunked_prefill=False, jump=False)
    assert simulate(Deployment.build(), w, engine=cfg).engines[0].trace.tokens[0] == SKIP[policy]


@pytest.mark.parametrize("policy", ["vllm", "no-evict", "sglang"])
def test_unchunked_runs_leap_over_decode_steps_as_they_step_through_them(policy: str) -> None:
    """The engine's closed-form runs of decode steps (and SGLang's quiet steps) assume that
    a waiting queue moves only at a finish, an arrival or when the policy says: with whole
    prefills in a tight budget, jumping and stepping give the same times, request by request."""
    w = Workload(Lengths("uniform", 2900, 0.3), Lengths("uniform", 200, 0.5), rate_per_s=6.0, requests=200,
                 duration_s=None)  # fmt: skip
    runs = [
        simulate(Deployment.build(), w, engine=EngineConfig(max_num_seqs=64, max_num_batched_tokens=4096,
                                                            policy=policy, chunked_prefill=False, jump=jump))
        for jump in (True, False)
    ]  # fmt: skip
    jumped, stepped = ([t for r in run.records for t in (r["ttft_s"], r["e2e_s"])] for run in runs)
    assert jumped == pytest.approx(stepped, rel=1e-9)
    assert runs[0].engines[0].iterations < runs[1].engines[0].iterations  # it did leap


def test_a_prefill_that_can_never_fit_a_step_whole_is_refused() -> None:
    """vLLM and SGLang preempt by recompute, so a step must hold a prompt and what it wrote;
    TensorRT-LLM's no-evict never preempts, so the prompt alone."""
    w = two_prompts(prompt=8000, output=500)
    for policy in ("vllm", "sglang"):
        cfg = EngineConfig(max_num_batched_tokens=BUDGET, policy=policy, chunked_prefill=False)
        with pytest.raises(RidgelineError, match="needs --max-num-batched-tokens 8,500, not 8,192"):
            simulate(Deployment.build(), w, engine=cfg)
    cfg = EngineConfig(max_num_batched_tokens=BUDGET, policy="no-evict", chunked_prefill=False)
    assert simulate(Deployment.build(), w, engine=cfg).summary.completed == 2


def test_the_engine_profiles_scheduler_sets_it_unless_given() -> None:
    m = Deployment.build(engine="trtllm")
    assert engine_config(m).chunked_prefill is True
    assert engine_config(m, chunked_prefill=False).chunked_prefill is False
    with pytest.raises(RidgelineError, match="chunked_prefill must be True or False"):
        EngineConfig(chunked_prefill="no")  # type: ignore[arg-type]


def test_simulate_and_plan_take_it_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from ridgeline.cli import main

    assert main(["simulate", "--chunked-prefill", "off", "--requests", "50", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["engine"]["chunked_prefill"] is False
    # the default budget, 8,192, cannot hold a 9,000-token prompt whole: one line, exit 2
    code = main(["simulate", "--chunked-prefill", "off", "--prompt-tokens", "9000", "--requests", "5"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "whole prefill" in err
    code = main(["plan", "--chunked-prefill", "half", "--slo-ttft-p99", "1"])
    err = capsys.readouterr().err
    assert code == 2 and "not on, off or engine" in err
