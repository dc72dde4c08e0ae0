"""Multi-step scheduling (vLLM 0.6's --num-scheduler-steps): the scheduler runs once for N
decode steps, a request that arrives inside a run waits for its end, a prefill runs whole in
a step of its own, and a request that finishes inside a run is done when the run is. The
expected times are the core's own step prices (prefill_step, decode_time_s), summed by hand
in the order the engine must take them."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from ridgeline.accuracy import corpus, report
from ridgeline.deployment import Deployment
from ridgeline.engines import get_engine, profile_to_toml
from ridgeline.errors import RidgelineError
from ridgeline.request import decode_time_s, prefill_step
from ridgeline.simulate.engine import Engine, EngineConfig
from ridgeline.simulate.kvcache import kv_cache
from ridgeline.simulate.requests import Requests
from ridgeline.simulate.run import engine_config
from ridgeline.simulate.steptime import StepModel

RUN = 10


@pytest.fixture(scope="module")
def small() -> Deployment:
    return Deployment.build("llama-3.1-8b", "h100-sxm")


def served(m: Deployment, requests: list[tuple[float, int, int]], steps: int, jump: bool = True) -> Requests:
    """Each (arrival, prompt, decode steps) request served by one engine to the end."""
    reqs = Requests()
    cfg = EngineConfig(chunked_prefill=False, num_scheduler_steps=steps, jump=jump)
    e = Engine(reqs, StepModel(m), cfg, kv_cache(m))
    for arrival, prompt, output in requests:
        e.add(reqs.add(arrival, prompt, output))
    e.run_until()
    return reqs


def prefill_s(m: Deployment, prompt: int, batch: int = 1) -> float:
    return float(prefill_step(m, prompt, batch).time_s)


@pytest.mark.parametrize("jump", [True, False])
def test_a_request_arriving_inside_a_run_waits_for_its_end(small: Deployment, jump: bool) -> None:
    """A decodes alone; B arrives during A's first decode step. B's prefill starts when A's
    run of ten steps ends, and runs alone: its first token comes that prefill later."""
    a_first = prefill_s(small, 1000)
    arrival = a_first + 1e-6
    reqs = served(small, [(0.0, 1000, 40), (arrival, 500, 20)], RUN, jump)
    assert reqs.first_s[0] == pytest.approx(a_first, rel=1e-12)
    run_end = a_first + decode_time_s(small, 1000, RUN, 1)
    assert reqs.first_s[1] == pytest.approx(run_end + prefill_s(small, 500), rel=1e-9)
    # one step at a time, B would have waited for the step under way only
    single = served(small, [(0.0, 1000, 40), (arrival, 500, 20)], 1, jump)
    assert single.first_s[1] < reqs.first_s[1] - 8 * (decode_time_s(small, 1000, 1, 1))


@pytest.mark.parametrize("jump", [True, False])
def test_a_request_finishing_inside_a_run_is_done_when_the_run_is(small: Deployment, jump: bool) -> None:
    """A and B are prefilled together; A writes 15 tokens, B 25. A's last token comes in
    the middle of the second run, so A is done at its end, after B's five steps alone; B
    finishes at its own last step, ending the third run with it (it is the last decoder)."""
    both = prefill_s(small, 1000, 2) + decode_time_s(small, 1000, 15, 2)
    reqs = served(small, [(0.0, 1000, 15), (0.0, 1000, 25)], RUN, jump)
    assert reqs.finish_s[0] == pytest.approx(both + decode_time_s(small, 1015, 5, 1), rel=1e-9)
    assert reqs.finish_s[1] == pytest.approx(both + decode_time_s(small, 1015, 10, 1), rel=1e-9)
    single = served(small, [(0.0, 1000, 15), (0.0, 1000, 25)], 1, jump)
    assert single.finish_s[0] == pytest.approx(both, rel=1e-9)
    assert single.finish_s[1] == pytest.approx(reqs.finish_s[1], rel=1e-9)


def test_multi_step_runs_whole_prefills_only() -> None:
    with pytest.raises(RidgelineError, match="--chunked-prefill off"):
        EngineConfig(num_scheduler_steps=8)
    with pytest.raises(RidgelineError, match="--num-scheduler-steps"):
        EngineConfig(chunked_prefill=False, num_scheduler_steps=0)
    assert EngineConfig(chunked_prefill=False, num_scheduler_steps=8).num_scheduler_steps == 8


def test_vllm_060s_published_ttfts_need_its_multi_step_runs() -> None:
    """SGLang's benchmark ran vLLM 0.6.0 with --num-scheduler-steps 10 (Z rows, a check
    source no profile was fitted to): its median TTFT at 4 and 8 requests a second is 100 to
    207 ms, where one step at a time would put it below 60% of that. With the runs modelled,
    each TTFT comes within a third of the published one, and the source's median within 15%."""
    rows = [r for r in corpus.check_rows() if r.group == "vLLM 0.6.0 in SGLang's benchmark"]
    assert len(rows) == 10 and all(r.steps == RUN for r in rows)
    checked = report.check(rows)
    assert report.median_abs([c.error for c in checked]) <= 0.15
    vllm = get_engine("vllm")
    for c in checked:
        if c.row.kind == "ttft_rate":
            assert abs(c.error) < 0.35
            assert corpus.predict(replace(c.row, steps=None), vllm) < 0.6 * c.row.measured


def test_a_profile_states_its_multi_step_runs_in_its_scheduler_table(tmp_path: Path) -> None:
    """A user's vLLM 0.6 profile: `num_scheduler_steps` in its scheduler table is the
    simulator's default, round-trips through the TOML, and needs chunked prefill off."""
    vllm = get_engine("vllm")
    mine = replace(vllm, scheduler=replace(vllm.scheduler, chunked_prefill=False, num_scheduler_steps=RUN))
    path = tmp_path / "vllm06.toml"
    text = profile_to_toml(mine)
    path.write_text(text, encoding="utf-8")
    assert get_engine(str(path)).scheduler == mine.scheduler
    cfg = engine_config(Deployment.build("llama-3.1-8b", "a100-80gb-sxm", engine=str(path)))
    assert (cfg.num_scheduler_steps, cfg.chunked_prefill) == (RUN, False)
    built_in = engine_config(Deployment.build(engine="vllm"))
    assert built_in.num_scheduler_steps == 1  # the built-in profile plans every step
    chunked = tmp_path / "chunked.toml"
    chunked.write_text(text.replace("chunked_prefill = false", "chunked_prefill = true"), encoding="utf-8")
    with pytest.raises(RidgelineError, match=r"set scheduler\.chunked_prefill = false"):
        get_engine(str(chunked))


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--num-scheduler-steps", "10"), "add --chunked-prefill off"),
        (("--num-scheduler-steps", "0", "--chunked-prefill", "off"), "--num-scheduler-steps"),
    ],
)
def test_simulate_refuses_multi_step_runs_it_cannot_make_in_one_line(
    cli: Callable[..., subprocess.CompletedProcess[str]], args: tuple[str, ...], says: str
) -> None:
    proc = cli("simulate", "--model", "llama-3.1-8b", "--requests", "10", *args)
    assert proc.returncode == 2
    assert says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr
