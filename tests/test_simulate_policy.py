"""Scheduler policies behind the simulator's seam (simulate/policy.py): TensorRT-LLM's
guaranteed-no-evict beside vLLM's, and a policy plugged in from outside."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import pytest

from ridgeline.deployment import Deployment
from ridgeline.simulate import scheduler
from ridgeline.simulate.engine import EngineConfig
from ridgeline.simulate.policy import Chunk, SchedulerView, StepPlan
from ridgeline.simulate.run import simulate
from ridgeline.simulate.workload import Lengths, Workload

PROMPT, OUTPUT, BLOCK = 2000, 1500, 16


@pytest.fixture(scope="module")
def tight() -> Deployment:
    """70B in fp8 on two H100s: room for a few dozen 3,500-token lives at once."""
    return Deployment.build("llama-3.1-70b", "h100-sxm", weights="fp8", tp=2)


def overload(requests: int = 300) -> Workload:
    return Workload(
        prompt=Lengths("fixed", PROMPT),
        output=Lengths("fixed", OUTPUT),
        rate_per_s=50.0,  # far past what the cache holds: the queue never empties
        requests=requests,
        duration_s=None,
    )


def test_no_evict_never_preempts_and_runs_exactly_the_lives_that_fit(tight: Deployment) -> None:
    cfg = EngineConfig(policy="no-evict", max_num_seqs=1024, block_tokens=BLOCK)
    r = simulate(tight, overload(), engine=cfg)
    (engine,) = r.engines
    assert r.summary.preemptions == 0
    assert r.summary.completed == 300
    life = math.ceil((PROMPT + OUTPUT) / BLOCK)  # blocks a request holds by its last token
    assert max(engine.trace.running) == r.kv.blocks // life


def test_vllm_on_the_same_cache_admits_more_and_preempts(tight: Deployment) -> None:
    cfg = EngineConfig(policy="vllm", max_num_seqs=1024, block_tokens=BLOCK)
    r = simulate(tight, overload(), engine=cfg)
    life = math.ceil((PROMPT + OUTPUT) / BLOCK)
    assert r.summary.preemptions > 0  # it admitted on today's blocks, then ran out
    assert max(r.engines[0].trace.running) > r.kv.blocks // life


def test_with_room_for_everyone_the_two_policies_agree(tight: Deployment) -> None:
    """When every request's life fits at once, no-evict's promise never binds: the same
    admissions, so the same times, request by request."""
    light = Workload(prompt=Lengths("fixed", 500), output=Lengths("fixed", 100), rate_per_s=2.0, requests=40)
    runs = [simulate(tight, light, engine=EngineConfig(policy=p)) for p in ("vllm", "no-evict")]
    assert runs[0].reqs.first_s == runs[1].reqs.first_s
    assert runs[0].reqs.finish_s == runs[1].reqs.finish_s


class OneAtATime:
    """A policy from outside the package: admit a request only when nothing runs."""

    def schedule(self, view: SchedulerView) -> StepPlan:
        chunks: list[Chunk] = []
        r = view.reqs
        running: Iterator[int] = iter(view.prefilling)
        rid = next(running, None)
        if rid is None and not view.n_decoding and view.waiting:
            rid = view.waiting[0]
        if rid is not None:
            c = r.computed[rid]
            chunks.append((rid, min(r.target[rid] - c, view.max_num_batched_tokens), c))
        return (), chunks, True


def test_a_policy_plugs_in_by_name(tight: Deployment, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(scheduler.POLICIES, "one-at-a-time", OneAtATime)
    burst = Workload(prompt=Lengths("fixed", 300), output=Lengths("fixed", 20), rate_per_s=100.0, requests=12)
    r = simulate(tight, burst, engine=EngineConfig(policy="one-at-a-time"))
    reqs = r.reqs
    order = sorted(range(len(reqs)), key=lambda i: reqs.admit_s[i])
    assert r.summary.completed == 12
    assert max(r.engines[0].trace.running) == 1
    for before, after in itertools.pairwise(order):
        assert reqs.admit_s[after] >= reqs.finish_s[before]  # strictly one after another


def test_an_unknown_policy_is_one_clear_error() -> None:
    from ridgeline.errors import RidgelineError

    with pytest.raises(RidgelineError, match="scheduler policy 'fifo' is unknown"):
        EngineConfig(policy="fifo").check()
