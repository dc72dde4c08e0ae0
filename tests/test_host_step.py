"""The host's work a step (EngineProfile.host_step_s): vLLM's engine core schedules, prepares
the inputs and applies the outputs of every step in Python. Since async scheduling (on by
default from late 2025) it does that for the next step while the GPU runs this one, so the
work hides behind the GPU's until it is the longer; a run without overlap (vLLM 0.6 to 0.11,
every vLLM run the corpus had before) waits for it in turn, where it adds to the step exactly
as the step's fixed cost does."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from ridgeline import estimate, step
from ridgeline.accuracy import corpus, fit
from ridgeline.deployment import Deployment
from ridgeline.engines import EngineProfile, builtin_engines, get_engine, profile_to_toml
from ridgeline.errors import RidgelineError
from ridgeline.request import decode_time_s
from ridgeline.simulate.engine import EngineConfig
from ridgeline.simulate.run import simulate
from ridgeline.simulate.workload import Lengths, Workload


def vllm(host_step_s: float, overlap: bool, fixed_s: float | None = None) -> EngineProfile:
    """The built-in vLLM profile with this host work a step, overlapped or not."""
    p = builtin_engines()["vllm"]
    p = replace(p, host_step_s=host_step_s, scheduler=replace(p.scheduler, overlap=overlap))
    return p if fixed_s is None else replace(p, fixed_s=fixed_s)


def llama(engine: EngineProfile) -> Deployment:
    return Deployment.build("llama-3.1-8b", "h100-sxm", engine=engine)


@pytest.mark.parametrize("batch", [1, 8, 64])
def test_overlapped_the_hosts_work_hides_until_it_is_the_longer(batch: int) -> None:
    """A decode step takes max(the GPU's time, the host's work): 2 ms of host work hides behind
    an 8B model's step on an H100 (its weights alone take over 4.8 ms to read); half a second
    of it is the step."""
    hidden, none = (
        step.decode_step(llama(vllm(0.002, True)), 1000, batch),
        step.decode_step(llama(vllm(0.0, True)), 1000, batch),
    )
    assert float(none.time_s) > 16.06e9 / 3.35e12  # the weights' bytes at the full bandwidth
    assert float(hidden.time_s) == float(none.time_s)
    assert float(hidden.host_s) == pytest.approx(0.002, rel=1e-12)
    slow = step.decode_step(llama(vllm(0.5, True)), 1000, batch)
    assert float(slow.time_s) == pytest.approx(0.5, rel=1e-12)
    assert bool(slow.host_bound) and not bool(hidden.host_bound)


@pytest.mark.parametrize("batch", [1, 8, 64])
def test_without_overlap_the_hosts_work_a_step_adds_as_the_fixed_cost_does(batch: int) -> None:
    """Without overlap, 2 ms of host work a step is 2 ms more a step, and a profile with it is
    the same engine as one whose fixed cost is 2 ms higher: runs without overlap cannot tell
    the two apart (which is why the fit needs a source that ran with it)."""
    base = builtin_engines()["vllm"].fixed_s
    serial = step.decode_step(llama(vllm(0.002, False)), 1000, batch)
    none = step.decode_step(llama(vllm(0.0, False)), 1000, batch)
    folded = step.decode_step(llama(vllm(0.0, False, fixed_s=base + 0.002)), 1000, batch)
    assert float(serial.time_s) == pytest.approx(float(none.time_s) + 0.002, rel=1e-12)
    assert float(serial.time_s) == pytest.approx(float(folded.time_s), rel=1e-12)
    assert float(serial.host_s) == 0.0


def test_a_request_and_the_simulator_step_at_the_hosts_pace_where_it_binds() -> None:
    """Half a second of host work a step, overlapped, sets every decode step of a small model:
    the request's decode time in closed form is steps x 0.5 s, and the simulator's TPOT is 0.5 s
    at each of its steps (the engine's jumped runs and its single steps alike)."""
    d = Deployment.build("llama-3.2-1b", "h100-sxm", engine=vllm(0.5, True))
    assert decode_time_s(d, 200, 50, 1) == pytest.approx(50 * 0.5, rel=1e-12)
    w = Workload(
        prompt=Lengths("fixed", 200), output=Lengths("fixed", 40), concurrency=3, requests=9, rate_per_s=None
    )
    for jump in (True, False):
        cfg = EngineConfig(max_num_seqs=8, max_num_batched_tokens=2048, overlap=True, jump=jump)
        s = simulate(d, w, engine=cfg).summary
        assert s is not None
        assert s.tpot_s.p50 == pytest.approx(0.5, rel=1e-9)
        assert s.tpot_s.mean == pytest.approx(0.5, rel=1e-9)


def test_the_slowed_engine_pays_its_hosts_work_slowed_too() -> None:
    """An engine r times as slow (a band's end) takes r times as long on the host as well."""
    p = vllm(0.5, True)
    assert p.scaled(2.0).host_step_s == pytest.approx(1.0, rel=1e-12)
    d, slowed = llama(p), llama(p.scaled(2.0))
    assert float(step.decode_step(slowed, 1000, 8).time_s) == pytest.approx(
        2 * float(step.decode_step(d, 1000, 8).time_s), rel=1e-12
    )


def test_a_profile_writes_and_reads_its_host_work_a_step_and_rejects_nonsense(tmp_path: Path) -> None:
    """host_step_s survives the profile's TOML; a negative one is one clear error."""
    p = replace(vllm(0.00125, True), name="mine")
    path = tmp_path / "mine.toml"
    path.write_text(profile_to_toml(p), encoding="utf-8")
    back = get_engine(str(path))
    assert back.host_step_s == 0.00125 and back.scheduler.overlap
    bad = profile_to_toml(replace(p, name="bad")).replace("host_step_s = 0.00125", "host_step_s = -1")
    assert "host_step_s = -1" in bad
    (tmp_path / "bad.toml").write_text(bad, encoding="utf-8")
    with pytest.raises(RidgelineError, match="host_step_s"):
        get_engine(str(tmp_path / "bad.toml"))


def test_a_corpus_row_without_overlap_pays_the_hosts_work_and_one_with_it_hides_it() -> None:
    """The corpus's vLLM runs before async scheduling (here the nightly latency test's batch of 8,
    A07, in process at TP 1) are predicted with the host's work a step in the step: as a higher
    fixed cost. The run with it (Q02: Qwen2.5-72B at TP 4, one request at a time, on vLLM 0.22)
    hides it: half the host work or twice it leaves its TPOT where it was."""
    rows = {r.id: r for r in corpus.rows()}
    a07, q02 = rows["A07"], rows["Q02"]
    assert a07.overlap is False and q02.overlap is True
    fixed = builtin_engines()["vllm"].fixed_s
    with_host = corpus.predict(a07, vllm(0.0015, True))  # the row says off: the profile's on is not its
    folded = corpus.predict(a07, vllm(0.0, True, fixed_s=fixed + 0.0015))
    assert with_host == pytest.approx(folded, rel=1e-9)
    assert corpus.predict(a07, vllm(0.0, True)) < with_host
    tpot = [corpus.predict(q02, vllm(h, True)) for h in (0.0005, 0.001, 0.002)]
    assert tpot[0] == tpot[1] == tpot[2]


def test_only_a_profile_whose_priors_state_host_work_a_step_fits_one() -> None:
    """The fit moves host_step_s for vLLM, whose priors state one, and for no other engine."""
    priors = corpus.priors()
    assert priors["vllm"].host_step_s > 0 and priors["vllm"].scheduler.overlap
    for name, prior in priors.items():
        assert fit.has(prior, "host_step_s") == (name == "vllm")


def test_current_vllm_on_a_run_the_fit_never_saw() -> None:
    """InferenceBench's recipe page (docs/recipes/concurrency-sweep.md, yobitelcomm/bench
    @eb9dc5c6) states Llama 3.1 8B Instruct on one H100 80GB HBM3 under vLLM 0.21.0 at one
    request: a median TPOT of 6.48 ms and TTFT of 13.98 ms (its five chat prompts, about 40
    tokens with Llama 3.1's template; 128 tokens out). It ships no result file, so it is in
    no fit. The profile, fitted with the same tool's vLLM 0.22 run of another model (Q01-Q06),
    reads its TPOT within 5% and its TTFT within 10% (3% slow; 22% while vLLM 0.11's stalled
    server, F15, set the first-token cost): the profile that priced every vLLM step with the
    host's work a step, as vLLM 0.6 to 0.11 ran, read them 25% and 99% slow."""
    e = estimate("llama-3.1-8b", "h100-sxm", prompt=40, output=127, engine="vllm")
    assert e.tpot_s == pytest.approx(6.48e-3, rel=0.05)
    assert e.ttft_s == pytest.approx(13.98e-3, rel=0.10)


def test_why_tells_a_steps_host_work_from_its_sequences(capsys: pytest.CaptureFixture[str]) -> None:
    """Gemma 3 270M's decode step on an H100 reads 0.54 GB of weights (0.16 ms at the full
    3.35 TB/s): vLLM's host work a step outlasts it, so the step is the host's. That work is the
    step's, not each sequence's, so the advice is a faster host and a larger batch, not fewer
    sequences (TensorRT-LLM's per-sequence host work on a GB200 gets that one)."""
    from ridgeline.cli import main

    assert main(["estimate", "--model", "gemma-3-270m", "--engine", "vllm", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["decode"]["host_bound"]
    assert out["decode"]["host_s"] == pytest.approx(builtin_engines()["vllm"].host_step_s, rel=1e-12)
    why = " ".join(out["explain"])
    assert "a larger batch costs the host no more" in why and "fewer sequences" not in why


def test_the_per_op_method_waits_on_the_host_as_the_lesson_method_does() -> None:
    """Half a second of host work a step, overlapped, outlasts a 1B model's GPU work by either
    method: the per-op method's pass (the operators' own rooflines summed, plus launches) is
    that half second too, and `ops` says whose time it is."""
    from ridgeline.ledger_view import ledger_view

    d = Deployment.build("llama-3.2-1b", "h100-sxm", engine=vllm(0.5, True))
    per_op = replace(d, method="per-op")
    assert decode_time_s(per_op, 200, 50, 1) == pytest.approx(50 * 0.5, rel=1e-12)
    view = ledger_view(d, 200)
    for phase in ("prefill", "decode"):
        assert view[phase]["host_s"] == pytest.approx(0.5, rel=1e-12)
        assert view[phase]["per_op_time_s"] == view[phase]["lesson_time_s"] == pytest.approx(0.5, rel=1e-12)
        assert view[phase]["host_bound"]
    plain = ledger_view(Deployment.build("llama-3.2-1b", "h100-sxm"), 200)
    assert plain["decode"]["host_s"] == 0.0 and plain["decode"]["per_op_time_s"] < 0.5
    assert not plain["decode"]["host_bound"]
