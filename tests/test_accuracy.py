"""The engine profiles against the corpus of published measurements (data/corpus/): each
row re-predicted with the profile fitted without the row's own source. A change that makes
predictions worse on sources the fit never saw fails here.

The thresholds are the figures benchmarks/accuracy.py reports (README, "Engine profiles"),
rounded up by under a point: the test guards them, it does not claim the issue's targets."""

from __future__ import annotations

import itertools
import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from conftest import shipped_bands, shipped_engines, shipped_ttft_band
from ridgeline import ledger
from ridgeline.accuracy import corpus, fit, report
from ridgeline.engines import builtin_engines

# leave-one-source-out median |error| over the corpus (measured 9.04%; 9.43% over the 306 rows
# before vLLM 0.22's run (Q01-Q06) joined and vLLM's host work a step hid behind async
# scheduling; 9.34% over the 305 rows
# before llama.cpp's run on an H100 PCIe in issue 6763, Y01, joined; 8.03% over the 239 rows
# before llama.cpp's runs on twelve accelerators, X01-X70, joined, which read 8.22% then)
HELD_OUT_MEDIAN = 0.10
IN_SAMPLE_MEDIAN = 0.08  # the fitted profiles on their own rows (measured 6.63%)
BAND_COVERAGE = (0.70, 0.90)  # the share of held-out rows inside their band (measured 87.7%)
UNSEEN_COVERAGE = (0.65, 0.90)  # of the check sources' rows, in bands rebuilt without each (measured 76.2%)
# Of every source's rows, corpus and checks, in bands rebuilt without that source: what the
# band's percentiles are calibrated to (fit.BAND_PERCENTILES; measured 75.9%; 75.1% with p6-p94
# bands before the server band split from the load band, 76.2% while open-loop runs entered the
# bands as measured / predicted latency, not as the engine's slowdown).
SOURCE_COVERAGE = (0.75, 0.85)
# The corpus's first 100 rows, before SGLang's open-loop runs (K04-K29, M01-M10), two
# NVFP4 prefill-heavy cells (D31, D32), GPUStack's gpt-oss-120b runs (N01-N15), the Qwen3-8B
# page's last two TTFTs (F16, F17), TensorRT-LLM 0.13's, 0.15's and 0.17's tables (T01-T30,
# U01-U30, V01-V24) and vLLM 0.22's run (Q01-Q06) joined it
# (10.4% then; 10.8% before the catalogue said which parts need asynchronous MMA; 9.7% after;
# 10.2% once gpt-oss's sliding layers held only their window; 10.0% now that vLLM's memory
# holds its sampler's sort and, on an A100, Marlin's MXFP4 experts; 9.6% once the fit's
# data scatter and Cauchy width were chosen again over the 143 rows; 9.9% with a MoE layer's
# own per-layer cost; 9.8% once grouped expert matmuls kept their own share of Hopper's and
# Blackwell's rate, and with SGLang's 405B runs (K18-K29); 10.0% once TensorRT-LLM's all-reduce
# bandwidth was fitted to its 0.13 table; 9.8% with 0.15's table beside it, 8.8% with 0.17's;
# 9.6% once SGLang and TensorRT-LLM overlapped their scheduling, which moved SGLang's GPUStack
# rows, F13 from -0.5% to -15% and F14 from +3% to +11%; 9.3% once a step waited on the host's
# work where that is the longer, GB200's Grace; 9.1% once llama.cpp's runs on twelve
# accelerators joined and its matrix-vector kernels streamed what their cores keep in flight;
# 9.0% once the H100 PCIe took the H100 SXM's FLOP per joule; 8.5% once the parts the MAMF
# table lacks took a measured torch matmul's rate, and the RTX 6000 Ada the L40S's at its
# power; 7.2% once vLLM's host work a step hid behind its async scheduling and its
# first-token cost was no longer F15's alone; 7.4% over the 99 of them left once F15, a
# release's stalled server, left the corpus: see the README's accuracy notes)
LATER = (
    {f"K{i:02d}" for i in range(4, 30)}
    | {f"M{i:02d}" for i in range(1, 11)}
    | {"D31", "D32"}
    | {f"N{i:02d}" for i in range(1, 16)}
    | {"F16", "F17"}
    | {f"T{i:02d}" for i in range(1, 31)}
    | {f"U{i:02d}" for i in range(1, 31)}
    | {f"V{i:02d}" for i in range(1, 25)}
    | {f"X{i:02d}" for i in range(1, 71)}
    | {f"Q{i:02d}" for i in range(1, 7)}
    | {"Y01"}
)
FIRST_100_HELD_OUT_MEDIAN = 0.10  # the target itself (measured 7.36%)
# the sources kept as checks, which no profile was fitted to (measured 22.4%; 21.2% while vLLM's
# first-token cost was 19 ms: its older servers' TTFTs there read faster at 10 ms)
CHECKS_MEDIAN = 0.23


@pytest.fixture(scope="module")
def checked() -> list[report.Checked]:
    return report.check()


def test_every_row_but_the_excluded_is_checked(checked: list[report.Checked]) -> None:
    published = corpus.rows()
    assert len(checked) == len(published) == 310
    assert not {c.row.id for c in checked} & set(corpus.EXCLUDED)
    assert all(math.isfinite(c.predicted) and c.predicted > 0 for c in checked)


def test_held_out_error_stays_where_it_was_measured(checked: list[report.Checked]) -> None:
    assert report.median_abs([c.held_out_error for c in checked]) <= HELD_OUT_MEDIAN
    assert report.median_abs([c.error for c in checked]) <= IN_SAMPLE_MEDIAN
    first = [c.held_out_error for c in checked if c.row.id not in LATER]
    assert len(first) == 99 and report.median_abs(first) <= FIRST_100_HELD_OUT_MEDIAN  # but F15


def test_few_rows_are_far_off(checked: list[report.Checked]) -> None:
    """The issue's target is none more than 40% off: held out, 4 rows still are (K11, F16;
    F09, TensorRT-LLM's server on gpt-oss-20b, whose ShareGPT run its server and its release's
    interim MoE kernels slowed: the only
    row left of the engine's unpacked 4-bit weights and of its server's throughput, so that
    left out both fall back to their priors, fast, since N15 left the fit and its kernels
    stopped losing the warp-level MMA's rate (5 before);
    and llama.cpp's
    X41, an A100 SXM's F16 decode, whose source but for Y01, a
    4-bit decode on an H100 PCIe, alone has HBM parts, so that left out its cores' bound for
    16-bit weights falls back to its prior; 8 with X35 and X45 before Y01 joined; 9 with X48
    before every llama.cpp matmul on Hopper kept the warp-level MMA's rate, 10 before the parts
    the MAMF table lacks took measured matmul rates, 6 with D30 before a step waited on GB200's
    host, 13 before SGLang's and TensorRT-LLM's overlapped scheduling; N07 and N14 too before
    vLLM's first-token cost was no longer F15's alone; 6 with F15 and Q01 before F15 left the
    corpus, vLLM 0.22's TTFT of one request at a time then reading +65% held out on the
    older servers' first-token cost), and in-sample none (F15 until it left the corpus, -68%;
    X48, llama.cpp's F16 prompt on the H100 PCIe, read +52% until then, X18's on the RTX 6000
    Ada +48% until it took the L40S's rate at its 300 W)."""
    assert sum(abs(c.held_out_error) > 0.4 for c in checked) <= 4
    assert sum(abs(c.error) > 0.4 for c in checked) == 0


def test_the_fit_beats_its_priors_on_sources_it_never_saw(checked: list[report.Checked]) -> None:
    """The priors alone (data/corpus/priors.toml) against the held-out fit, row for row."""
    priors = corpus.priors()
    prior_errors = [corpus.error(c.row, corpus.predict(c.row, priors[c.row.engine])) for c in checked]
    assert report.median_abs([c.held_out_error for c in checked]) < report.median_abs(prior_errors)


def test_a_fold_never_sees_the_source_it_leaves_out() -> None:
    """Leaving a source out must mean a fit that never saw it, not even as a starting point:
    each fold is fitted from the priors on the kept rows, so a left-out source whose every
    measurement read three times slower leaves its fold exactly as it was, while the full
    fit, which saw it, moves. llama.cpp's rows are a prefill or a decode run each, so the
    fits take a fraction of a second."""
    from dataclasses import replace

    def slowed(r: corpus.Row, by: float) -> corpus.Row:
        return replace(r, measured=r.measured / by if corpus.is_rate(r) else r.measured * by)

    prior = corpus.priors()["llamacpp"]
    rows = [r for r in corpus.rows() if r.engine == "llamacpp"]
    groups = sorted({r.group for r in rows})
    assert len(groups) == 4
    before = fit.fit(prior, rows)
    for group in groups:
        slower = [slowed(r, 3.0) if r.group == group else r for r in rows]
        after = fit.fit(prior, slower)
        assert after.fold_x[group] == before.fold_x[group]
        # the full fit moves (by 0.027 in log units for issue 6763's one row, which the
        # Cauchy weights hold back; by more for the others), where the fold stays exactly put
        assert math.dist(after.x, before.x) > 0.01
        kept = fit.problem(prior, [r for r in rows if r.group != group])
        alone = fit.descend(kept, fit.prior_x(kept), 4)[0]
        assert before.fold_x[group] == pytest.approx(alone, abs=1e-12)


def test_a_fit_step_never_climbs_its_objective() -> None:
    """Re-weighting each row by its residual moves the objective under a Gauss-Newton step, so
    a whole step can overshoot; the fit takes a step only as far as it lowers the objective
    (the rows' Cauchy losses plus the prior), and a step to the bounds' far corner is cut
    back, or refused, rather than taken."""
    from ridgeline.accuracy import fit

    rows = [r for r in corpus.rows() if r.engine == "llamacpp"]
    pb = fit.problem(corpus.priors()["llamacpp"], rows)
    every = list(range(len(rows)))
    x = fit.prior_x(pb)
    res = fit.residuals(pb, x)
    seen = [fit.objective(pb, x, res, every)]
    for _ in range(3):
        x, res = fit.descend(pb, x, 1)
        seen.append(fit.objective(pb, x, res, every))
    assert all(b <= a for a, b in itertools.pairwise(seen)) and seen[-1] < 0.5 * seen[0]
    corner = [math.log(p.hi) for p in pb.params]
    taken, after = fit.downhill(pb, x, res, corner, every)
    assert fit.objective(pb, taken, after, every) <= seen[-1]
    assert fit.objective(pb, corner, fit.residuals(pb, corner), every) > seen[-1]


def test_the_bands_hold_about_four_in_five_held_out_rows(checked: list[report.Checked]) -> None:
    lo, hi = BAND_COVERAGE
    assert lo <= report.covered(checked) <= hi


@pytest.fixture(scope="module")
def checks() -> list[report.Checked]:
    return report.check(corpus.check_rows())


def test_the_bands_are_made_of_every_held_out_row(
    checked: list[report.Checked], checks: list[report.Checked]
) -> None:
    """A profile's band in a regime is the p5.5 and p94.5 of the slowdowns of the engine's
    held-out rows there (measured / predicted time, but an open-loop run's slowdown): the
    corpus's, each predicted by the fold that left its source out, and the check sources',
    which no fit saw (its kind's, where it has fewer than six: the serving engines' apart
    from llama.cpp's)."""
    rows = {c.row.id: c.row for c in (*checked, *checks)}
    ratios = report.log_slowdowns([*checked, *checks])
    regimes = report.band_regimes([*checked, *checks])
    for name, p in builtin_engines().items():
        made = fit.bands(ratios, rows, name, regimes)
        assert set(made) == set(p.uncertainty)
        for regime, b in made.items():
            assert p.uncertainty[regime] == pytest.approx((b.low, b.high), rel=0.03)  # cv.json: 4 figures


def test_an_open_loop_rows_slowdown_is_the_engine_that_predicts_it(checked: list[report.Checked]) -> None:
    """An open-loop run's queue magnifies the engine's speed: DataCrunch's SGLang at 8
    requests a second (K11) measured 2.2 times its held-out median E2E, which an engine
    only about 1.18 times as slow predicts. Its slowdown is found by predicting the row again
    on slowed engines: one 1% slower predicts it slower than measured, one 1% faster faster.
    A row whose times all scale with the engine's (an offline run, a batch) has its time
    ratio for its slowdown, exactly."""
    by_id = {c.row.id: c for c in checked}
    k11 = by_id["K11"]
    assert k11.time_ratio > 2.0 and 1.1 < k11.slowdown < 1.3
    held = report.fold_profile(builtin_engines()["sglang"], report.folds()["sglang"][k11.row.group])
    d = corpus.deployment(k11.row, held)
    slower, faster = (corpus.predict(k11.row, held, d.slowed(k11.slowdown * f)) for f in (1.01, 1 / 1.01))
    assert faster < k11.row.measured < slower
    for c in checked:
        if c.row.kind not in corpus.RATE_KINDS:
            assert c.held_slowdown is None and c.slowdown == c.time_ratio
        else:
            assert c.held_slowdown is not None


def test_a_serving_engine_short_of_rows_pools_the_serving_engines_not_llama_cpp(
    checked: list[report.Checked], checks: list[report.Checked]
) -> None:
    """SGLang has too few decode rows of its own: its band pools vLLM's, SGLang's and
    TensorRT-LLM's, so llama.cpp's rows, however far off, leave it as it is; where the
    serving engines have too few rows too (llama.cpp's load band), every engine's count."""
    rows = {c.row.id: c.row for c in (*checked, *checks)}
    ratios = report.log_slowdowns([*checked, *checks])
    far = {i: (math.log(10.0) if rows[i].engine == "llamacpp" else t) for i, t in ratios.items()}
    mine = fit.bands(ratios, rows, "sglang")["decode"]
    assert "serving engines'" in mine.made_of
    assert fit.bands(far, rows, "sglang")["decode"] == mine
    assert fit.bands(far, rows, "llamacpp")["decode"].high > 9.0  # its own rows
    assert "every engine's" in fit.bands(ratios, rows, "llamacpp")["load"].made_of


def test_bands_rebuilt_without_a_check_source_hold_about_four_in_five_of_its_rows(
    checked: list[report.Checked], checks: list[report.Checked]
) -> None:
    """Rebuilt without one check source, the bands hold most of that source's rows, over the
    five sources: 76% (96 of 126: 29 of the Qwen3 dense pages' 38, 6 of the DeepSeek-R1
    page's 9, 29 of the Qwen3-235B pages' 29, 22 of the GLM pages' 40, 10 of vLLM 0.6.0's 10;
    72% with p6-p94 bands before the runs whose API server is busy took the server band;
    77% while open-loop runs entered the bands as measured / predicted latency, which
    DataCrunch's runs near capacity magnify, and SGLang's load band was wider for it: six
    SGLang rows of these pages, 17% fast to 38% slow, fell outside when it became a band of
    the engine's slowdown). Earlier, with the p6-p94 bands
    that llama.cpp's runs on twelve accelerators called for: 72% with p7.5-p92.5, 69% with
    p10-p90 bands; 75% before SGLang's overlapped scheduling narrowed its load band from 0.83-1.74
    to 0.85-1.36, its corpus rows held out now read within it). Bands made of the corpus's
    held-out rows alone held 43% of the check rows: a source the corpus never saw errs more
    than a source left out of a corpus whose other sources share its engine version and
    harness, so these rows are held to 65%, not the corpus's 70%."""
    seen = report.unseen_coverage(checked, checks)
    assert set(seen) == set(corpus.CHECKS)
    inside = sum(i for i, _ in seen.values())
    assert sum(n for _, n in seen.values()) == len(checks)
    assert UNSEEN_COVERAGE[0] <= inside / len(checks) <= UNSEEN_COVERAGE[1]


def test_bands_rebuilt_without_any_one_source_hold_four_in_five_of_its_rows(
    checked: list[report.Checked], checks: list[report.Checked]
) -> None:
    """The band is the 80% interval a source it was not made from meets: rebuilt without each
    source in turn, corpus and checks, the p5.5-p94.5 bands hold 75.9% of that source's rows
    (p6-p94 bands 73.9%, and 75.1% before the server band split from the load band; 76.2%
    while open-loop runs entered them as measured / predicted latency)
    (p7.5-p92.5 bands held 73.6% once llama.cpp's runs on twelve accelerators joined, 25 of
    their 66, and 79.7% before; p5-p95 bands would hold 78.4% but 90% of the corpus's own;
    p10-p90 bands held 76%: the corpus sources' 80%, the check sources' 69%)."""
    every = report.unseen_coverage([], [*checked, *checks])
    assert set(every) == {c.row.group for c in (*checked, *checks)}
    inside, n = sum(i for i, _ in every.values()), sum(n for _, n in every.values())
    assert n == len(checked) + len(checks)
    assert SOURCE_COVERAGE[0] <= inside / n <= SOURCE_COVERAGE[1]


def test_the_bands_bracket_one_and_widen_where_the_model_knows_less() -> None:
    for p in builtin_engines().values():
        assert set(p.uncertainty) == {"prefill", "first_token", "decode", "load", "server"}
        for low, high in p.uncertainty.values():
            assert low < 1.0 < high
        width = {g: math.log(h / lo) for g, (lo, h) in p.uncertainty.items()}
        assert width["first_token"] > width["prefill"]  # the server's work errs more than the pass
        assert width["server"] > width["load"]  # and more than the steps under load
    vllm = builtin_engines()["vllm"].uncertainty
    width = {g: math.log(h / lo) for g, (lo, h) in vllm.items()}
    assert width["load"] > width["decode"]  # a simulated run under load adds the scheduler's error


def test_a_ttft_row_joins_the_band_of_the_part_that_weighs_in_it(
    checked: list[report.Checked], checks: list[report.Checked]
) -> None:
    """A TTFT run in process (trtllm-bench, llama-bench's prompt processing) is the prompt's
    pass alone and joins the prefill band; a TTFT over HTTP whose server's first-token cost
    is a tenth or more of its prediction joins the first-token band: TensorRT-LLM's
    trtllm-serve at concurrency 4 on a 233-token prompt (F16), and vLLM 0.22's at one
    request on short chat prompts (Q01)."""
    by_id = {c.row.id: c for c in (*checked, *checks)}
    for c in by_id.values():
        if c.row.regime == "prefill" and not c.row.http:
            assert c.first_token_share == 0.0 and c.band_regime == "prefill"
        if c.row.regime != "prefill":
            assert c.first_token_share == 0.0 and c.band_regime in (c.row.regime, "server")
    for i in ("Q01", "F16"):
        assert by_id[i].first_token_share >= 0.1 and by_id[i].band_regime == "first_token"


def test_a_run_under_load_joins_the_server_band_when_its_server_is_busy(
    checked: list[report.Checked], checks: list[report.Checked]
) -> None:
    """A run under load in the engine's own process (trtllm-bench, vLLM's offline
    benchmark) has no API server and joins the load band; one over HTTP whose server is
    busy a tenth of the time or more, as priced, joins the server band: vLLM 0.11 passing
    on 128-token prompts for 4 tokens each, hundreds a second (P08, R07, S08, W29)."""
    by_id = {c.row.id: c for c in (*checked, *checks)}
    for c in by_id.values():
        if c.row.regime == "load" and not c.row.http:
            assert c.server_share == 0.0 and c.band_regime == "load"
        if c.row.regime != "load":
            assert c.server_share == 0.0
    for i in ("P08", "R07", "S08", "W29"):
        c = by_id[i]
        assert (c.row.engine, c.row.input, c.row.output) == ("vllm", pytest.approx(128, abs=1), 4)
        assert c.server_share >= 0.1 and c.band_regime == "server"
    joined = [c for c in by_id.values() if c.band_regime == "server"]
    assert 0 < len(joined) < len([c for c in by_id.values() if c.row.regime == "load"]) / 2


def test_a_ttft_band_moves_from_the_pass_to_the_server_with_the_servers_share(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A 100,000-token prompt's TTFT is its pass: its band is the prefill band. Run in
    process it has no server's cost and takes that band exactly; a short prompt served
    over HTTP, whose first-token cost is a fifth or more of its TTFT, the first-token band.
    Read from the shipped engines.toml, by the README's rule."""
    from ridgeline.cli import main

    first_token_s = shipped_engines()["vllm"]["overhead"]["first_token_s"]
    for prompt, how in ((100_000, ()), (100_000, ("--in-process",)), (64, ())):
        assert main(["estimate", "--engine", "vllm", "-p", str(prompt), *how, "--json"]) == 0
        e = json.loads(capsys.readouterr().out)
        server_s = 0.0 if how else first_token_s
        lo, hi = shipped_ttft_band("vllm", e["ttft_s"], server_s)
        assert e["uncertainty"]["ttft_s"] == pytest.approx([e["ttft_s"] * lo, e["ttft_s"] * hi], rel=1e-9)
        if how:
            assert (lo, hi) == shipped_bands("vllm")["prefill"]
        elif prompt < 100:
            assert (lo, hi) == pytest.approx(shipped_bands("vllm")["first_token"], rel=1e-12)
        else:
            assert (lo, hi) == pytest.approx(shipped_bands("vllm")["prefill"], rel=0.01)


def test_the_estimate_carries_its_band(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from ridgeline.cli import main

    assert main(["estimate", "--engine", "vllm", "--json"]) == 0
    e = json.loads(capsys.readouterr().out)
    lo, hi = builtin_engines()["vllm"].uncertainty["decode"]
    assert e["uncertainty"]["tpot_s"] == pytest.approx([e["tpot_s"] * lo, e["tpot_s"] * hi])
    for key in ("ttft_s", "tpot_s", "total_s"):
        low, high = e["uncertainty"][key]
        assert low < e[key] < high


def test_rates_and_times_err_in_opposite_directions() -> None:
    """A throughput measured 10% above the prediction is a time 10% below it."""
    tput = next(r for r in corpus.rows() if r.unit.startswith("tok/s"))
    assert corpus.optimistic(tput, tput.measured * 1.1)
    lat = next(r for r in corpus.rows() if r.unit in ("ms", "s"))
    assert corpus.optimistic(lat, lat.measured * 0.9)


def test_sharegpt_lengths_keep_the_sources_mean_under_vllms_cut() -> None:
    """GPUStack's ShareGPT run: 193,979 replies' tokens over 1,000 requests, a mean of 194;
    vLLM's benchmark drops conversations longer than 2,048 tokens."""
    replies = corpus.lengths("sharegpt", 194)
    assert abs(sum(replies.values) / len(replies.values) - 194) < 2
    longest, middle = max(replies.values), sorted(replies.values)[len(replies.values) // 2]
    assert 5 * 194 < longest <= 2048 and middle < 194  # heavy-tailed: the longest set the makespan
    assert corpus.lengths("uniform:1", 508).upper() == 1016  # SGLang's random: 1 to the nominal 1,024


def test_an_open_loop_row_alone_on_its_engine_is_one_prefill_then_its_decode_steps() -> None:
    """`ttft_rate`, `tpot_rate` and `e2e_rate`: requests arriving at a rate so low that each
    finds the engine idle take one prefill, then output - 1 decode steps at batch 1, and an
    HTTP row pays the profile's first-token cost once: in TTFT and E2E, never in TPOT."""
    from dataclasses import replace

    from ridgeline.errors import RidgelineError
    from ridgeline.request import decode_time_s
    from ridgeline.step import prefill_step

    base = next(r for r in corpus.rows() if r.kind == "ttft_rate")
    profile = builtin_engines()[base.engine]
    row = replace(base, rate=1e-4, requests=3, lengths="fixed", input=300, output=41)
    d = corpus.deployment(row, profile)
    prefill_s = float(prefill_step(d, 300).time_s)
    decode_s = decode_time_s(d, 300, 40)
    first_s = profile.first_token_s
    assert first_s > 0 and row.http and row.unit == "ms"
    expected = {
        "ttft_rate": prefill_s + first_s,
        "tpot_rate": decode_s / 40,
        "e2e_rate": prefill_s + decode_s + first_s,
    }
    for kind, seconds in expected.items():
        assert corpus.predict(replace(row, kind=kind), profile) == pytest.approx(seconds * 1e3, rel=1e-9)
        with pytest.raises(RidgelineError, match="needs a rate"):
            corpus.predict(replace(row, kind=kind, rate=None), profile)
        in_process = corpus.predict(replace(row, kind=kind, http=False), profile)
        assert in_process == pytest.approx((seconds - (0.0 if kind == "tpot_rate" else first_s)) * 1e3)


def test_a_run_with_its_prefix_cache_off_is_simulated_without_one() -> None:
    """A source that launched SGLang with --disable-radix-cache maps to `cache` off; every
    other row keeps its profile's prefix caching."""
    import csv

    from ridgeline import _files

    text = _files.package_text("corpus", "measurements.csv")
    disabled = {r["id"] for r in csv.DictReader(text.splitlines()) if "--disable-radix-cache" in r["source"]}
    assert len(disabled) == 39
    rows = corpus.rows()
    assert {r.id for r in rows if r.cache is False} == disabled
    assert all(r.cache is None for r in rows if r.id not in disabled)


def test_the_sources_kept_as_checks_are_predicted_and_never_fitted() -> None:
    """GPUStack's Qwen3-14B and Qwen3-32B pages, its DeepSeek-R1 page, its two Qwen3-235B-A22B
    pages, its five GLM-4.5-Air and GLM-4.6 pages and SGLang's vLLM 0.6.0 rows
    (corpus.CHECKS) are in the corpus but in no fit: no fold of cv.json leaves them out, since
    none held them, so
    the fitted profiles' predictions are their held-out ones. Their median |error| stays
    where it was measured."""
    rows = corpus.check_rows()
    assert len(rows) == 38 + 9 + 29 + 40 + 10 and {r.group for r in rows} == set(corpus.CHECKS)
    assert not {r.id for r in rows} & {r.id for r in corpus.rows()}
    assert not any(group in folds for folds in report.folds().values() for group in corpus.CHECKS)
    checked = report.check(rows)
    assert all(math.isfinite(c.predicted) and c.predicted > 0 for c in checked)
    assert all(c.held_out == c.predicted for c in checked)
    assert report.median_abs([c.error for c in checked]) <= CHECKS_MEDIAN


def test_a_run_proves_its_cache_held_its_longest_request() -> None:
    """vLLM served 32,000-token prompts of Qwen3-32B on one H100 (P26). The memory plan
    leaves it 1,262 blocks of 16 tokens: 0.9 x 80 GiB, less 65.52 GB of weights, 1 GB of
    runtime, 1.44 GB of a 8,192-token step's activations and 4.05 GB for sampling 1,024
    sequences (26 bytes each of 151,936 logits), over 262,144 bytes a token. The row is
    simulated with the share of memory whose cache holds one request of 32,000 + 76 tokens:
    ceil(32,076 / 16) = 2,005 blocks; a row whose requests fit keeps the plan's 0.9."""
    from ridgeline.simulate.kvcache import kv_cache
    from ridgeline.simulate.run import engine_config

    def cache_and_share(row_id: str, longest: int) -> tuple[int, float, int]:
        row = next(r for r in corpus.check_rows() if r.id == row_id)
        d = corpus.deployment(row, builtin_engines()[row.engine])
        cfg = engine_config(d, row.max_num_seqs, row.max_num_batched_tokens)
        u = corpus.proven_utilization(d, cfg, longest)
        blocks = kv_cache(d, 16, 0.9, cfg.max_num_seqs, cfg.max_num_batched_tokens).blocks
        return blocks, u, kv_cache(d, 16, u, cfg.max_num_seqs, cfg.max_num_batched_tokens).blocks

    weights, activations = 32_762_123_264 * 2, 8192 * (4 * 5120 + 2 * 25600 + 2 * 8192) * 2
    room = 0.9 * 80 * 2**30 - weights - 1e9 - activations - 1024 * 151_936 * 26
    before, share, after = cache_and_share("P26", 32_000 + 76)
    assert before == int(room // (16 * 262_144)) == 1262
    assert share > 0.9 and after == 2005
    assert cache_and_share("P05", 32_000 + 98)[1] == 0.9  # Qwen3-14B's 32K prompts fit the plan


def test_the_deepseek_rows_carry_the_pages_totals() -> None:
    """GPUStack's DeepSeek-R1 page (R01-R09) prints each run's token totals and duration:
    a row's lengths are the totals over its requests, its throughput (in + out) / duration,
    and its model DeepSeek-V3's shapes, whose latent cache holds 512 + 64 values a layer."""
    rows = {r.id: r for r in corpus.check_rows() if r.group == "GPUStack DeepSeek-R1"}
    assert sorted(rows) == [f"R0{i}" for i in range(1, 10)]
    totals = {  # total input, total generated, requests
        "R01": (219_171, 200_752, 1000),
        "R04": (3_199_900, 10_000, 100),
        "R05": (1_997_530, 100_000, 500),
        "R06": (998_393, 50_000, 500),
        "R07": (126_882, 4_000, 1000),
        "R08": (22_836, 21_338, 100),
    }
    for row_id, (into, out, n) in totals.items():
        row = rows[row_id]
        assert (row.input, row.output, row.requests) == (round(into / n), round(out / n), n)
    assert rows["R01"].measured == pytest.approx((219_171 + 200_752) / 76.59, rel=1e-4)
    assert rows["R07"].measured == pytest.approx((126_882 + 4_000) / 22.07, rel=1e-3)
    assert all(
        (r.model, r.gpu, r.tp, r.weights, r.maths, r.kv) == ("deepseek-v3", "h200", 8, "fp8", "fp8", "bf16")
        for r in rows.values()
    )
    d = corpus.deployment(rows["R01"], builtin_engines()["vllm"])
    assert ledger.kv_bytes_per_token(d.arch, d.prec) == 61 * (512 + 64) * 2
    # TensorRT-LLM ran with --ep_size 8: its experts spread over the eight GPUs
    assert [r.id for r in rows.values() if r.ep != 1] == ["R03"] and rows["R03"].ep == 8
    assert corpus.deployment(rows["R03"], builtin_engines()["trtllm"]).par.ep == 8


def test_the_qwen3_moe_rows_carry_the_pages_totals() -> None:
    """GPUStack's Qwen3-235B-A22B pages (S01-S25: eight H100s, then eight A100s; S26-S29 the
    expert-parallel runs) print each run's token totals and duration: a row's lengths are
    the totals over its requests, its throughput (in + out) / duration; the bf16 runs are
    TP 8, the FP8 checkpoint's TP 4 (and TP 8 with its experts spread, EP = TP), and on the
    A100, which has no fp8 maths, the FP8 weights are multiplied in bf16."""
    rows = {r.id: r for r in corpus.check_rows() if r.group == "GPUStack Qwen3 MoE"}
    assert sorted(rows) == [f"S{i:02d}" for i in range(1, 30)]
    runs = {  # total input, total generated, requests, duration (s)
        "S01": (212_894, 193_865, 984, 48.28),
        "S05": (3_200_000, 8_191, 100, 141.60),
        "S08": (125_650, 3_936, 984, 8.83),
        "S12": (125_650, 3_936, 984, 6.11),
        "S14": (217_393, 196_763, 1000, 89.35),
        "S19": (1_997_942, 91_352, 500, 255.70),
        "S23": (1_997_942, 90_389, 500, 450.71),
        "S26": (211_761, 192_350, 984, 49.88),
        "S29": (217_393, 195_590, 1000, 146.74),
    }
    for row_id, (into, out, n, seconds) in runs.items():
        row = rows[row_id]
        assert (row.input, row.output, row.requests) == (round(into / n), round(out / n), n)
        assert row.measured == pytest.approx((into + out) / seconds, rel=2e-3)
    for r in rows.values():
        assert r.model == "qwen3-235b-a22b" and r.kv == "bf16"
        assert (r.tp, r.weights) in ((8, "bf16"), (4, "fp8")) or (r.tp, r.ep, r.weights) == (8, 8, "fp8")
        assert r.ep == (r.tp if r.id >= "S26" else 1)
        assert r.maths == ("fp8" if r.weights == "fp8" and r.gpu == "h100-sxm" else "bf16")
    assert {r.gpu for r in rows.values()} == {"h100-sxm", "a100-80gb-sxm"}


def accuracy_script() -> Any:
    """benchmarks/accuracy.py, as a module."""
    import importlib.util
    import sys

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy.py"
    spec = importlib.util.spec_from_file_location("accuracy_benchmark", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ROW_KEYS = {"id", "source", "engine", "kind", "regime", "model", "gpu", "tp", "unit", "measured", "predicted",
            "held_out", "error", "held_out_error", "inside_band"}  # fmt: skip
REPORT_KEYS = {"rows", "groups", "far_bound", "far", "faster_than_measured", "signed_held_out_median"}
GROUP_KEYS = {"name", "n", "held_out_median", "held_out_worst", "in_sample_median", "band_coverage"}


def test_the_accuracy_report_as_json_says_what_its_tables_say(checked: list[report.Checked]) -> None:
    """`benchmarks/accuracy.py --json`: every row with its errors worked from its own
    predicted and measured values, and each summary what those rows make of it."""
    data = json.loads(json.dumps(accuracy_script().summary(checked, False), allow_nan=False))
    assert set(data) == REPORT_KEYS
    rows = data["rows"]
    assert [r["id"] for r in rows] == [c.row.id for c in checked] and all(set(r) == ROW_KEYS for r in rows)
    for r in rows:
        assert r["error"] == pytest.approx(r["predicted"] / r["measured"] - 1)
        assert r["held_out_error"] == pytest.approx(r["held_out"] / r["measured"] - 1)
    every = data["groups"][0]
    assert set(every) == GROUP_KEYS and (every["name"], every["n"]) == ("all", len(rows))
    assert every["held_out_median"] == statistics.median(abs(r["held_out_error"]) for r in rows)
    assert every["band_coverage"] == sum(r["inside_band"] for r in rows) / len(rows)
    decode = next(g for g in data["groups"] if g["name"] == "regime decode")
    assert decode["n"] == sum(r["regime"] == "decode" for r in rows)
    assert data["far"]["held_out"] == [r["id"] for r in rows if abs(r["held_out_error"]) > data["far_bound"]]


def test_the_newer_tables_cells_as_json() -> None:
    """`--newer --json` from the command line: strict JSON, each cell's errors from its own
    values, the summary their medians. Its RTX PRO 6000 cells (Llama 3.3 70B and Qwen3-30B-A3B
    in NVFP4 on one GPU, 1,724 to 374 tokens/s a GPU on the page) are an accelerator no corpus
    row ran on, predicted from its data sheet: each within 15% (measured: 8.8% at worst). Its
    gpt-oss cells on Blackwell run the MXFP4 experts with MXFP8 activations, which the tensor
    cores take as they are: their median within 20% (11.0%; 71% when every matmul unpacked
    them into bf16). On Hopper they are unpacked into bf16 for its asynchronous MMA
    (TensorRT-LLM's unpack_async): their median within 40% (33.6%; 50% when the unpacked
    weights fed the warp-level MMA and N15, TensorRT-LLM 1.0's interim kernels, was fitted)."""
    import subprocess
    import sys

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy.py"
    proc = subprocess.run([sys.executable, str(path), "--newer", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    cells = data["cells"]
    assert len(cells) == data["summary"]["all"]["n"] == 68
    assert all(c["error"] == pytest.approx(c["predicted"] / c["measured"] - 1) for c in cells)
    assert data["summary"]["all"]["median"] == statistics.median(abs(c["error"]) for c in cells)
    rtx = {(c["model"], c["input"], c["output"]): c for c in cells if c["gpu"] == "rtx-pro-6000"}
    assert rtx[("llama-3.1-70b", 8192, 1024)]["measured"] == 296 and len(rtx) == 8
    assert all(abs(c["error"]) <= 0.15 for c in rtx.values()), {k: c["error"] for k, c in rtx.items()}
    blackwell = [c for c in cells if c["precision"] == "mxfp4" and c["gpu"] in ("b200", "gb200")]
    assert len(blackwell) == 18 and statistics.median(abs(c["error"]) for c in blackwell) <= 0.20
    hopper = [c for c in cells if c["precision"] == "mxfp4" and c["gpu"] in ("h100-sxm", "h200")]
    assert len(hopper) == 15 and statistics.median(abs(c["error"]) for c in hopper) <= 0.40


AMD_HELD_OUT_MEDIAN = 0.18  # AMD's page over six releases and Oracle's batches (measured 14.6%)
AMD_BAND_COVERAGE = 0.5  # inside vLLM's band (measured 55%: every 70B cell and Oracle batch)


def test_the_amd_pages_releases_and_oracles_batches_as_json() -> None:
    """`--amd --json`: the AMD page's six releases hold 8 cells each, 4 of them corpus rows
    (C09, H01, H02, H03), and Oracle's table 9 batches, 2 of them corpus rows (H07, H08):
    51 points, each error from its own values, strict JSON, the held-out median and the
    band's coverage near the measured ones."""
    import subprocess
    import sys

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy.py"
    proc = subprocess.run([sys.executable, str(path), "--amd", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    points, every = data["points"], data["summary"]["all"]
    assert len(points) == every["n"] == 6 * 8 - 4 + 9 - 2
    assert len(data["summary"]["releases"]) == 6 and data["summary"]["oracle"]["n"] == 7
    held = {(r.model, r.input, r.output, r.batch, r.measured) for r in corpus.rows()}
    assert not [p for p in points if (p["model"], p["input"], p["output"], p["batch"], p["measured"]) in held]
    for p in points:
        assert p["error"] == pytest.approx(p["predicted"] / p["measured"] - 1)
        assert p["held_out_error"] == pytest.approx(p["held_out"] / p["measured"] - 1)
    assert every["held_out_median"] == statistics.median(abs(p["held_out_error"]) for p in points)
    assert every["held_out_median"] <= AMD_HELD_OUT_MEDIAN
    inside = [p["inside_band"] for p in points]
    assert data["summary"]["band_coverage"] == sum(inside) / len(points) >= AMD_BAND_COVERAGE


# Qwen2.5 0.5B to 3B on vLLM 0.6.3, never fitted (measured 30.8%; 27.1% while F15 was fitted)
SMALL_HELD_OUT_MEDIAN = 0.32


def test_the_small_qwen_models_as_json() -> None:
    """`--small --json`: the Qwen2.5 speed benchmark's vLLM cells that no corpus row holds,
    its 0.5B, 1.5B and 3B models (four input lengths in BF16, and GPTQ-Int8, GPTQ-Int4 and
    AWQ at one token in) and its 7B at the two lengths the corpus skips: 23 cells, each error
    from its own values, strict JSON. Their step is mostly fixed costs, which the profile
    prices from far larger models' rows: every cell reads faster than measured, the quantised
    ones most, and the held-out median stays where it was measured."""
    import subprocess
    import sys

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy.py"
    proc = subprocess.run([sys.executable, str(path), "--small", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    points, every = data["points"], data["summary"]["all"]
    assert len(points) == every["n"] == 3 * (4 + 3) + 2
    held = {(r.model, r.weights, r.input, r.measured) for r in corpus.rows()}
    assert not [p for p in points if (p["model"], p["weights"], p["input"], p["measured"]) in held]
    small = {(p["model"], p["quantization"], p["input"]): p for p in points}
    assert small[("qwen2.5-0.5b", "BF16", 1)]["measured"] == 311.55  # 3.2 ms a token
    for p in points:
        assert p["error"] == pytest.approx(p["predicted"] / p["measured"] - 1)
        assert p["held_out_error"] == pytest.approx(p["held_out"] / p["measured"] - 1)
    assert every["held_out_median"] == statistics.median(abs(p["held_out_error"]) for p in points)
    assert every["held_out_median"] <= SMALL_HELD_OUT_MEDIAN
    assert data["summary"]["models"]["qwen2.5-7b"]["held_out_median"] <= 0.10  # as its corpus rows


APPLE_MEDIAN = 0.10  # llama.cpp on an M2 Ultra from two llama.cpp pull requests (measured 5.7%)
APPLE_HELD_OUT_MEDIAN = 0.25  # the same without the corpus's only Apple source (measured 17.7%)


def test_llamacpp_on_apple_from_other_runs_as_json() -> None:
    """`--apple --json`: seven llama-bench cells that Georgi Gerganov's M2 Ultra printed in two
    llama.cpp pull requests, a year apart and apart from the corpus's Apple rows (another lab,
    another model, other builds). The profile prices them from the corpus's Macs, and the
    fold without those rows from NVIDIA parts and the priors alone; strict JSON, each error
    from its own values."""
    import subprocess
    import sys

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy.py"
    proc = subprocess.run([sys.executable, str(path), "--apple", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    points, every = data["points"], data["summary"]["all"]
    assert len(points) == every["n"] == 7
    cells = {(p["source"], p["model"], p["format"], p["test"]): p for p in points}
    assert cells["llama.cpp PR 10238", "llama-3.2-3b", "Q4_0", "tg128"]["measured"] == 155.86
    assert cells["llama.cpp PR 3084", "llama-2-7b", "F16", "pp512"]["measured"] == 1265.30
    assert {p["gpu"] for p in points} == {"m2-ultra"}
    held = {(r.model, r.gpu, r.measured) for r in corpus.rows()}
    assert not [p for p in points if (p["model"], p["gpu"], p["measured"]) in held]
    for p in points:
        assert p["error"] == pytest.approx(p["predicted"] / p["measured"] - 1)
        assert p["held_out_error"] == pytest.approx(p["held_out"] / p["measured"] - 1)
    assert every["median"] == statistics.median(abs(p["error"]) for p in points)
    assert every["median"] <= APPLE_MEDIAN
    assert every["held_out_median"] <= APPLE_HELD_OUT_MEDIAN


SERVING_ITL_MEDIAN = 0.12  # TensorRT-LLM 0.14's serving table: mean ITL (measured 10.1%)
SERVING_ENGINE_TTFT_MEDIAN = 0.20  # mean TTFT without a server's first-token cost (measured 14.7%)


def test_the_serving_tables_points_as_json() -> None:
    """`--serving --json`: TensorRT-LLM 0.14's 60 open-loop points (Triton, 2 to 32 queries a
    second), each error from its own values. Its mean inter-token latency stays near the
    table's; its mean TTFT is read without a server's first-token cost too, since the corpus
    holds no Triton front end (trtllm-serve's cost reads them about 48% long)."""
    import subprocess
    import sys

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy.py"
    proc = subprocess.run([sys.executable, str(path), "--serving", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    points, every = data["points"], data["summary"]["all"]
    assert len(points) == every["n"] == 60 and {p["qps"] for p in points} == {2, 4, 8, 16, 32}
    for p in points:
        assert p["itl_error"] == pytest.approx(p["predicted_itl_ms"] / p["itl_ms"] - 1)
        assert p["engine_error"] == pytest.approx(p["predicted_engine_ms"] / p["ttft_ms"] - 1)
        assert p["predicted_engine_ms"] < p["predicted_ttft_ms"]  # the server's cost is on top
    assert every["itl_median"] == statistics.median(abs(p["itl_error"]) for p in points)
    assert every["itl_median"] <= SERVING_ITL_MEDIAN
    assert every["engine_median"] <= SERVING_ENGINE_TTFT_MEDIAN


# the P99 ITL of the corpus's concurrency-4 runs, never fitted (measured 61.2%; 58.6% while F15 was fitted)
ITL_P99_MEDIAN = 0.62


def test_the_p99_itl_of_the_concurrency_4_runs_as_json() -> None:
    """`--itl --json`: the P99 ITL GPUStack's pages print for the runs of F14, F15, F16 and
    N07, each simulated as those rows' runs are (F15's too, though it left the corpus: its
    workload, accuracy.corpus.excluded_rows), its error from its own values; no profile was
    fitted to them, so the median is a check, held where it was measured."""
    import subprocess
    import sys

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy.py"
    proc = subprocess.run([sys.executable, str(path), "--itl", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    points = data["points"]
    assert [p["row"] for p in points] == ["F14", "F15", "F16", "N07"]
    assert [p["p99_itl_ms"] for p in points] == [11.48, 40.98, 24.38, 23.32]
    for p in points:
        assert p["predicted_ms"] > 0 and p["held_out_predicted_ms"] > 0
        assert p["error"] == pytest.approx(p["predicted_ms"] / p["p99_itl_ms"] - 1)
        assert p["held_out_error"] == pytest.approx(p["held_out_predicted_ms"] / p["p99_itl_ms"] - 1)
    assert data["summary"]["median"] == statistics.median(abs(p["error"]) for p in points)
    assert data["summary"]["median"] <= ITL_P99_MEDIAN


DP_TRTLLM_WORST = 0.40  # TensorRT-LLM's DeepSeek-R1 recipes under --dp-attention (measured +9% to +37%)


def test_the_data_parallel_runs_as_json_and_tensorrt_llms_recipes_need_the_layout() -> None:
    """`--dp-attention --json`: GPUStack's five SGLang runs and TensorRT-LLM's three
    DeepSeek-R1 recipes (max_batch_size "in each rank", concurrency eight times it), each
    error from its own values. TensorRT-LLM's come within 40% only as the layout and the
    per-rank limits price them: at TP alone, with the batch limit the replica's and the
    latent on every GPU, each is more than half slow."""
    import subprocess
    import sys

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy.py"
    proc = subprocess.run(
        [sys.executable, str(path), "--dp-attention", "--json"], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    points = data["points"]
    assert [p["engine"] for p in points] == ["sglang"] * 5 + ["trtllm"] * 3
    assert [p["measured"] for p in points if p["engine"] == "trtllm"] == [11489.2671, 36384.0838, 43146.2042]
    for p in points:
        assert p["error"] == pytest.approx(p["predicted"] / p["measured"] - 1)
        assert p["tp_error"] == pytest.approx(p["predicted_tp"] / p["measured"] - 1)
    trt = [p for p in points if p["engine"] == "trtllm"]
    assert all(abs(p["error"]) < DP_TRTLLM_WORST and p["tp_error"] < -0.5 for p in trt)
    assert data["summary"]["engines"]["trtllm"]["median"] == statistics.median(abs(p["error"]) for p in trt)
