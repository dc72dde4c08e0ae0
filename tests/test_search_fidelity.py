"""The simulate stage runs each point only as far as the answer needs, and the answer is the
one an exhaustive search gives: the same cheapest point and the same Pareto front, value for
value, with most points decided on a screen of their first requests or on their bounds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ridgeline import metrics
from ridgeline.models import get_model
from ridgeline.search import fidelity
from ridgeline.search.executors import Executor
from ridgeline.search.fidelity import windows
from ridgeline.search.run import SearchResult, Settings, search
from ridgeline.search.space import make_space
from ridgeline.search.stage import COLUMNS, HOW, LEAST, kth_largest, p99_rank
from ridgeline.search.store import read_rows
from ridgeline.simulate.run import mean_tokens
from ridgeline.simulate.workload import Lengths, Trace, Workload

pytest.importorskip("pyarrow")

ANSWER = [c for c in COLUMNS if c not in HOW]  # what a point's run gave, not how it was decided

# llama-3.1-8b on four accelerators, two weight and KV dtypes, two engines, auto replicas
AXES = {"gpu": "l4,a10g,h100-sxm,h200", "tp": "1,2", "weights": "bf16,fp8", "maths": "bf16",
        "kv_dtype": "bf16,fp8", "engine": "vllm,trtllm"}  # fmt: skip


def trace(n: int) -> Trace:
    """A replayed trace: arrivals 0.25 s apart with a burst every tenth, two prompt lengths."""
    arrival = tuple(0.25 * i - (0.2 if i % 10 == 9 else 0.0) for i in range(n))
    return Trace(arrival, tuple(800 if i % 3 else 2400 for i in range(n)), tuple(120 for _ in range(n)), "t")


FIXED = Workload(Lengths("fixed", 1500), Lengths("fixed", 150), rate_per_s=6.0, requests=300, duration_s=None)
CASES: dict[str, tuple[Workload, metrics.Slo, float | None, str]] = {
    "fixed lengths": (
        FIXED,
        metrics.Slo(ttft_s=0.4, tpot_s=0.03), None, "round-robin",
    ),
    "lognormal lengths, prefix hits": (
        Workload(Lengths("lognormal", 1500, 0.6), Lengths("lognormal", 150, 0.6), rate_per_s=6.0,
                 requests=300, duration_s=None, prefix_hit_rate=0.3),
        metrics.Slo(ttft_s=0.4, tpot_s=0.03), None, "round-robin",
    ),
    "goodput, a shared prefix": (
        Workload(Lengths("uniform", 2000, 0.3), Lengths("fixed", 100), rate_per_s=5.0, requests=300,
                 duration_s=None, shared_prefix_tokens=512),
        metrics.Slo(ttft_s=0.4, tpot_s=0.03), 0.9, "round-robin",
    ),
    "least-outstanding routing, an E2E target": (
        FIXED,
        metrics.Slo(ttft_s=0.5, e2e_s=4.0), None, "least-outstanding",
    ),
    "a trace": (
        Workload(trace=trace(300), rate_per_s=None, requests=None, duration_s=None),
        metrics.Slo(ttft_s=0.4, tpot_s=0.03), None, "round-robin",
    ),
}  # fmt: skip


def answer_of(r: SearchResult) -> tuple[Any, list[Any]]:
    def cols(row: dict[str, Any] | None) -> tuple[Any, ...] | None:
        return None if row is None else tuple(row[c] for c in ANSWER)

    return cols(r.cheapest), [cols(row) for row in r.front]


@pytest.mark.parametrize("name", list(CASES))
def test_the_answer_is_the_exhaustive_searchs(name: str, tmp_path: Path) -> None:
    """Run every survivor whole, then search as a user does: the same cheapest point and the
    same front, every number equal, for fewer whole runs."""
    w, slo, goodput, router = CASES[name]
    arch = get_model("llama-3.1-8b")
    space = make_space(AXES, None, arch)
    s = Settings("llama-3.1-8b", arch, w, slo, attainment=goodput, router=router)
    every = search(space, replace(s, exhaustive=True), Executor("local", 1), str(tmp_path / "every"))
    found = search(space, s, Executor("local", 1), str(tmp_path / "found"))
    assert every.stages.full == every.stages.survivors and every.cheapest is not None
    assert answer_of(found) == answer_of(every)
    st = found.stages
    assert st.full < st.survivors, st  # it did save whole runs
    assert st.met + st.missed + st.dominated + st.errors == st.survivors
    # no point decided short of its run is one that met in the exhaustive search and is on its front
    front = {row["key"] for row in every.front}
    short = {row["key"] for row in found.rows if row["fidelity"] != "full"}
    assert not front & short


def test_the_rows_say_how_far_each_point_was_run(tmp_path: Path) -> None:
    """A row run whole has p99s at least its bounds; a row decided on a screen or its bounds
    has no p99s, and a dominated row names a met point that beats it on cost and bounds."""
    arch = get_model("llama-3.1-8b")
    kinds = set()
    for name in ("fixed lengths", "lognormal lengths, prefix hits"):
        w, slo, _, _ = CASES[name]
        out = tmp_path / name.replace(" ", "-").replace(",", "")
        r = search(make_space(AXES, None, arch), Settings("llama-3.1-8b", arch, w, slo), Executor("local", 1),
                   str(out))  # fmt: skip
        rows = {row["key"]: row for row in read_rows(out)}
        assert rows == {row["key"]: row for row in r.rows}
        kinds |= {(row["fidelity"], row["status"]) for row in rows.values()}
        for row in rows.values():
            if row["fidelity"] == "full":
                for key, least in LEAST.items():
                    p99 = row[key.replace("_s", "_p99_s")]
                    assert row[least] is None or p99 >= row[least] * (1 - 1e-9)
                assert row["requests"] == 300
                continue
            assert row["ttft_p99_s"] is None and row["tpot_p99_s"] is None and row["e2e_p99_s"] is None
            if row["fidelity"] == "bound":
                assert row["requests"] == 0
            else:  # the first replica's first requests, at most 300 / 6
                assert 0 < row["requests"] <= 50
            if row["status"] == "dominated":
                q = rows[row["dominated_by"]]
                assert q["status"] == "met" and q["usd_per_million_tokens"] <= row["usd_per_million_tokens"]
                assert (
                    q["ttft_p99_s"] <= row["ttft_p99_least_s"] and q["tpot_p99_s"] <= row["tpot_p99_least_s"]
                )
            else:
                assert row["ttft_p99_least_s"] > slo.ttft_s or row["tpot_p99_least_s"] > slo.tpot_s  # type: ignore[operator]
    assert {("full", "met"), ("bound", "dominated"), ("screen", "dominated"), ("screen", "missed")} <= kinds


def test_every_executor_decides_alike(tmp_path: Path) -> None:
    """The windows' decisions read only earlier windows: one process and two give the same rows."""
    w, slo, _, _ = CASES["lognormal lengths, prefix hits"]
    arch = get_model("llama-3.1-8b")
    space = make_space(AXES, None, arch)
    s = Settings("llama-3.1-8b", arch, w, slo)
    one = search(space, s, Executor("local", 1), str(tmp_path / "one"))
    two = search(space, s, Executor("local", 2), str(tmp_path / "two"))
    assert one.stages.screened > 0
    assert {r["key"]: r for r in one.rows} == {r["key"]: r for r in read_rows(tmp_path / "two")}
    assert (one.stages.screened, one.stages.full) == (two.stages.screened, two.stages.full)


def test_a_p99_lies_between_the_kth_and_the_next_largest() -> None:
    """numpy's p99 of n values (linear interpolation at 0.99 (n - 1)) is at least the k-th
    largest, k = n - floor(0.99 (n - 1)), and at most the (k-1)-th: 2,400 values rest on the
    25th largest, 150 on the 3rd."""
    assert (p99_rank(2400), p99_rank(150), p99_rank(101)) == (25, 3, 2)
    rng = np.random.default_rng(7)
    for n in (2, 3, 50, 99, 100, 101, 150, 2400, 2401):
        x = rng.lognormal(0.0, 1.0, n)
        k = p99_rank(n)
        top = np.sort(x)[::-1]
        p99 = float(np.percentile(x, 99))
        assert kth_largest(x, k) == top[k - 1] <= p99
        assert k == 1 or p99 <= top[k - 2]
    assert kth_largest(np.array([1.0, np.nan, 3.0]), 3) is None  # too few values to say
    assert kth_largest([2.0, None, 5.0, 1.0], 2) == 2.0 and kth_largest([None, 4.0], 2) is None  # a column


def test_the_windows_grow_to_a_constant() -> None:
    assert windows(100) == [(0, 4), (4, 12), (12, 28), (28, 60), (60, 92), (92, 100)]
    assert windows(3) == [(0, 3)] and windows(0) == []


def test_a_windows_whole_runs_go_in_batches_that_beat_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A window's whole runs go WHOLE_BATCH at a time, cheapest first: a met point of one batch
    beats points of the next on their screens' bounds, which then need no run. Sending them
    all at once gives the same answer for more whole runs."""
    w, slo, _, _ = CASES["fixed lengths"]
    arch = get_model("llama-3.1-8b")
    space = make_space(AXES, None, arch)
    s = Settings("llama-3.1-8b", arch, w, slo)
    batched = search(space, s, Executor("local", 1), str(tmp_path / "batched"))
    monkeypatch.setattr(fidelity, "WHOLE_BATCH", 10**6)
    at_once = search(space, s, Executor("local", 1), str(tmp_path / "at-once"))
    assert answer_of(batched) == answer_of(at_once)
    assert batched.stages.full < at_once.stages.full, (batched.stages, at_once.stages)
    assert batched.stages.screened == at_once.stages.screened  # the screens are the same


RESUMED = {
    "fixed lengths": (CASES["fixed lengths"][0], CASES["fixed lengths"][1], AXES),
    # unchunked with a 4,096-token budget, lognormal prompts: some runs refuse a long prompt,
    # so whole-run error rows sit among the resumed ones
    "error rows": (CASES["lognormal lengths, prefix hits"][0], CASES["lognormal lengths, prefix hits"][1],
                   AXES | {"chunked_prefill": "on,off", "max_num_batched_tokens": "4096"}),
}  # fmt: skip


@pytest.mark.parametrize("stop_at", [5, 11, 17, 23, 29, 35])
@pytest.mark.parametrize("case", list(RESUMED))
def test_a_search_resumed_anywhere_gives_the_rows_of_one_never_stopped(
    case: str, stop_at: int, tmp_path: Path
) -> None:
    """Ctrl-C after any point, then --resume: the points run whole before the stop keep their
    place in their window's order, so every later decision is the one an uninterrupted search
    makes."""
    w, slo, axes = RESUMED[case]
    arch = get_model("llama-3.1-8b")
    space = make_space(axes, None, arch)
    s = Settings("llama-3.1-8b", arch, w, slo)
    whole = search(space, s, Executor("local", 1), str(tmp_path / "whole"))
    assert whole.stages.survivors > stop_at

    def ctrl_c(done: int, total: int) -> None:
        if done == stop_at:
            raise KeyboardInterrupt

    out = str(tmp_path / "stopped")
    assert search(space, s, Executor("local", 1), out, progress=ctrl_c).interrupted == "SIGINT"
    resumed = search(space, s, Executor("local", 1), out, resume=True)
    assert resumed.stages.resumed == stop_at
    assert {r["key"]: r for r in resumed.rows} == {r["key"]: r for r in whole.rows}
    if case == "error rows":
        assert whole.stages.errors > 0


def test_a_screens_token_means_are_the_whole_runs_to_the_bit() -> None:
    """A point's cost divides by its run's token means, so the one mean of token counts that
    a screen and judge_run both take (an exact integer sum, divided once) must equal
    statistics.fmean to the last bit."""
    import statistics

    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 300, 2600, 100_000):
        lengths = rng.integers(1, 131_072, n)
        assert mean_tokens(lengths.tolist()) == statistics.fmean(lengths.tolist())
