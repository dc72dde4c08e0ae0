"""Fit the built-in engine profiles to the corpus and write them, with where every number
came from, into src/ridgeline/data/engines.toml; write the cross-validation folds into
src/ridgeline/data/corpus/cv.json (the accuracy test and benchmark read them).

    python scripts/fit_engines.py            # fit and report, write nothing
    python scripts/fit_engines.py --write    # fit and write both files
    python scripts/fit_engines.py --reuse --write   # write from the last fit, not refitting
    python scripts/fit_engines.py --engine trtllm --write   # refit one, the rest from the last fit
    python scripts/fit_engines.py --provenance   # the shipped numbers, their provenance worked out again

The priors are data/corpus/priors.toml: a refit starts from them, never from its own
last output. Each engine is fitted on its own rows, once on all of them and once without
each source (its folds); those fits are independent, and run two at a time (about 45 minutes
here over the 312 rows; TensorRT-LLM's 137 take most of it, llama.cpp's about a second).

Each held-out fold is fitted afresh from the priors on the kept rows, as the full fit is on
all of them. Folds that started from the full fit, which had seen the left-out source, read
it better: three Gauss-Newton steps from there 10.2% over the 155 rows against these folds'
10.5% (one step, on an earlier corpus, 9.8% against 10.4%).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from ridgeline.accuracy import corpus, fit, report  # noqa: E402
from ridgeline.engines import EngineProfile, get_engine, profile_to_toml  # noqa: E402

ENGINES_TOML = ROOT / "src" / "ridgeline" / "data" / "engines.toml"
CV_JSON = ROOT / "src" / "ridgeline" / "data" / "corpus" / "cv.json"
CACHE = ROOT / ".cache" / "fit_results.json"  # the last fit, for --reuse (git-ignored)
HEADER = """# Engine profiles: how close to the roofline each serving engine runs (see engines.py for
# the terms). Fitted by scripts/fit_engines.py to the published measurements in
# data/corpus/ (a bounded least squares on log(predicted / measured) with a prior on every
# parameter); `provenance` says, for every number, whether rows of the corpus moved it
# (which, and of how many sources) or it is the physical prior. `uncertainty` is, per
# regime (a TTFT's: `prefill`, or `first_token` where the server's share of it is a tenth
# or more; a run's under load: `load`, or `server` where its API server is busy a tenth
# of the time or more), the p5.5 and p94.5 of the held-out rows' slowdowns: how many times
# as slow the engine must be to predict each row (measured / predicted time; for an open-loop run,
# whose queue magnifies the engine's speed, the slowdown that predicts its measured
# median), over the corpus's rows, each predicted by the fit that left its source out,
# and those of the sources kept as checks, which no fit saw.
# Regenerate with: python scripts/fit_engines.py --write

"""


def _problem(name: str) -> fit.Problem:
    return fit.problem(corpus.priors()[name], [r for r in corpus.rows() if r.engine == name])


def _fold(task: tuple[str, str | None]) -> list[float]:
    name, group = task
    return fit.fold_x(_problem(name), group)


def fit_engines(names: list[str]) -> dict[str, dict[str, Any]]:
    """Each engine's fit on all its rows and its folds, one source left out of each: every
    one of them a task of its own, two at a time."""
    problems = {name: _problem(name) for name in names}
    tasks = [(name, g) for name in names for g in (None, *sorted({r.group for r in problems[name].rows}))]
    with ProcessPoolExecutor(max_workers=2) as pool:
        xs = dict(zip(tasks, pool.map(_fold, tasks), strict=True))
    out = {}
    for name, pb in problems.items():
        folds = {g: x for (n, g), x in xs.items() if n == name and g is not None}
        f = fit.assemble(pb, xs[name, None], folds)
        rows = pb.rows
        out[name] = {
            "name": name,
            "x": f.x,
            "params": [p.key for p in pb.params],
            "uses": _uses(pb),
            "residuals": dict(zip([r.id for r in rows], f.residuals, strict=True)),
            "held_out": f.held_out,
            "folds": {
                g: dict(zip([p.key for p in pb.params], [math.exp(v) for v in x], strict=True))
                for g, x in f.fold_x.items()
            },
        }
    return out


def _uses(pb: fit.Problem) -> list[list[str]]:
    """For each parameter, the ids of the rows whose predictions rest on it."""
    return [[r.id for r, u in zip(pb.rows, col, strict=True) if u] for col in zip(*pb.uses, strict=True)]


def provenance(result: dict[str, Any], prior: EngineProfile) -> dict[str, str]:
    """Where each fitted number came from: the rows that moved it, of how many sources, or
    its prior. A term that one source alone moved stands at its prior in that source's fold,
    so no second source confirms it (EngineProfile.one_source). A term that rows rest on but
    none moves (a bound that binds on none of them: llama.cpp's cores' streaming of 8-bit
    weights, whose two rows ran on an RTX 4090's GDDR6X) keeps its prior exactly, and says
    so: a prediction that rests on it is unmeasured there."""
    group = {r.id: r.group for r in corpus.rows()}
    out = {}
    for key, ids, x in zip(result["params"], result["uses"], result["x"], strict=True):
        was = fit.get(prior, key)
        if ids and not math.isclose(math.exp(x), was, rel_tol=1e-9):
            sources = len({group[i] for i in ids})
            out[key] = (
                f"fitted to {len(ids)} rows of {sources} source{'s' if sources > 1 else ''} "
                f"({_span(ids)}); prior {was:.4g}"
            )
        elif ids:
            out[key] = f"prior {was:.4g}: the rows that rest on it ({_span(ids)}) do not move it"
        else:
            out[key] = f"prior {was:.4g}: no corpus row of this engine depends on it"
    return out


def rewrite_provenance(names: list[str]) -> list[str]:
    """The shipped profiles, their numbers and bands as they are, with the provenance of
    each fitted term worked out again from the corpus (which rows rest on it, of how many
    sources): what a fit writes, without fitting again."""
    lines = [HEADER]
    for name in names:
        shipped, pb = get_engine(name), _problem(name)
        result = {
            "params": [p.key for p in pb.params],
            "uses": _uses(pb),
            "x": [math.log(fit.get(shipped, p.key)) for p in pb.params],
        }
        prov = dict(shipped.provenance) | provenance(result, corpus.priors()[name])
        lines.append(profile_to_toml(replace(shipped, provenance=prov)) + "\n")
    return lines


def unfitted_gemm(result: dict[str, Any], prior: EngineProfile) -> dict[str, str]:
    """The matmul shares the fit has no term for: fp32's, which also prices a matmul of a few
    tokens on the vector units (a GEMV's floor under the tensor tile's falloff), and any other
    dtype a profile states that no corpus row multiplies in."""
    out = {}
    for dtype, share in prior.gemm.items():
        key = f"gemm.{dtype}"
        if key in result["params"]:
            continue
        why = (
            "the share of the vector units' peak a matrix-vector kernel of a few tokens, or an fp32 "
            "matmul, reaches"
            if dtype == "fp32"
            else f"no corpus row multiplies in {dtype}"
        )
        out[key] = f"prior {share:.4g}: {why} (priors.toml); not fitted"
    return out


def fixed(prior: EngineProfile) -> dict[str, str]:
    """Where the numbers the fit leaves alone come from, when a profile sets them."""
    out = {}
    if prior.sampler_bytes:
        out["sampler_bytes"] = (
            f"fixed {prior.sampler_bytes:.4g}: the bytes a logit its memory profiling's sampler "
            "holds (priors.toml)"
        )
    if prior.repacked_experts != 1.0:
        out["repacked_experts"] = (
            f"fixed {prior.repacked_experts:.4g}: gpt-oss-120b's resident bytes in a load log against "
            "its checkpoint's (priors.toml)"
        )
    if prior.maths:
        kernels = ", ".join(f"{w} in {m}" for w, m in prior.maths.items())
        out["maths"] = (
            f"fixed: the maths its kernels run for weights of a dtype when none is asked, {kernels} "
            "(priors.toml)"
        )
    if prior.warp_mma_only:
        out["warp_mma_only"] = (
            "fixed: every matmul it runs, 16-bit ones too, keeps dequant_async on a part that needs "
            "asynchronous MMA (priors.toml)"
        )
    if prior.unpack_async:
        out["unpack_async"] = (
            "fixed: its weight-only kernels unpack into the asynchronous MMA's operands on Hopper "
            "(wgmma), so they keep no dequant_async (priors.toml)"
        )
    if prior.host_sequence_s:
        out["host_sequence_s"] = (
            f"fixed {prior.host_sequence_s:.4g}: a step's host work a sequence, TensorRT-LLM pull request "
            "10273's host_step_time on a GB200 over its host_overhead (priors.toml)"
        )
    return out


def _span(ids: list[str]) -> str:
    return ", ".join(ids) if len(ids) <= 6 else ", ".join(ids[:5]) + f", … {ids[-1]}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--reuse", action="store_true", help=f"reuse the last fit ({CACHE.name}), write from it")
    ap.add_argument("--engine", action="append", default=[], help="refit only this engine (repeatable)")
    ap.add_argument(
        "--provenance", action="store_true", help="rewrite the shipped profiles' provenance only, not fitting"
    )
    args = ap.parse_args()
    names = sorted(corpus.priors())
    if args.provenance:
        ENGINES_TOML.write_text("".join(rewrite_provenance(names)).rstrip("\n") + "\n", encoding="utf-8")
        print(f"wrote the provenance of {ENGINES_TOML.relative_to(ROOT)}")
        return
    if unknown := sorted(set(args.engine) - set(names)):
        sys.exit(f"fit_engines: no engine {', '.join(unknown)} (have {', '.join(names)})")
    refit = [] if args.reuse else args.engine or names
    results = _cached([n for n in names if n not in refit]) if len(refit) < len(names) else {}
    if refit:
        results |= fit_engines(refit)
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        CACHE.write_text(json.dumps(results), encoding="utf-8")
    rows = {r.id: r for r in (*corpus.rows(), *corpus.check_rows())}
    fitted = {name: _fitted(name, res) for name, res in results.items()}
    # every held-out row's slowdown (report.Checked.slowdown): the corpus's, predicted by the
    # fit that left its source out, and the check sources', which no fit saw; and which band
    # each joins (corpus.band_regime: a TTFT mostly not its prompt's pass, the first-token band;
    # a run whose API server is busy, the server band)
    held = {
        i: _held(rows[i], e, fitted[name], res["folds"].get(rows[i].group, {}))
        for name, res in results.items()
        for i, e in res["held_out"].items()
    }
    checks = report.check(corpus.check_rows(), fitted)
    ratios = {i: h[0] for i, h in held.items()} | report.log_slowdowns(checks)
    regimes = {i: h[1] for i, h in held.items()} | report.band_regimes(checks)
    lines = [HEADER]
    for name in names:
        prior, res = corpus.priors()[name], results[name]
        bands = fit.bands(ratios, rows, name, regimes)
        band = {g: (b.low, b.high) for g, b in bands.items()}
        prov = {**provenance(res, prior), **fixed(prior), **unfitted_gemm(res, prior)}
        for g, b in bands.items():
            lo, hi = fit.BAND_PERCENTILES
            prov[f"uncertainty.{g}"] = f"p{lo:g}, p{hi:g} of the held-out slowdowns: {b.made_of}"
        out = _with(fitted[name], band, prov)
        lines.append(profile_to_toml(out) + "\n")
        misses = [abs(math.exp(e) - 1) for e in res["held_out"].values()]
        med, worst = statistics.median(misses), max(misses)
        print(f"{name}: {len(misses)} rows, held-out median |error| {med:.1%}, worst {worst:.1%}")
    every = [abs(math.exp(e) - 1) for res in results.values() for e in res["held_out"].values()]
    med, worst = statistics.median(every), max(every)
    print(f"all: {len(every)} rows, held-out median |error| {med:.1%}, worst {worst:.1%}")
    if args.write:
        ENGINES_TOML.write_text("".join(lines).rstrip("\n") + "\n", encoding="utf-8")
        cv = {  # four significant figures, as engines.toml
            name: {g: {k: float(f"{v:.4g}") for k, v in fold.items()} for g, fold in res["folds"].items()}
            for name, res in results.items()
        }
        CV_JSON.write_text(json.dumps(cv, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {ENGINES_TOML.relative_to(ROOT)} and {CV_JSON.relative_to(ROOT)}")


def _held(
    row: corpus.Row, log_error: float, profile: EngineProfile, fold: dict[str, float]
) -> tuple[float, str]:
    """log of the slowdown of the fold's engine that predicts the row (corpus.slowdown), from
    the fold's held-out log error, and the band it joins (corpus.band_regime)."""
    held = report.fold_profile(profile, fold)
    predicted = row.measured * math.exp(log_error)
    share = corpus.first_token_share(row, held, predicted)
    busy = corpus.server_share(row, held, predicted)
    return math.log(corpus.slowdown(row, held, predicted)), corpus.band_regime(row, share, busy)


def _cached(names: list[str]) -> dict[str, Any]:
    """The last fit of these engines, where it fitted each on the rows the corpus holds now;
    else one line that says what to refit."""
    try:
        cached = json.loads(CACHE.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        sys.exit(f"fit_engines: no last fit to reuse ({CACHE.name}: {e}): fit every engine first")
    for name in names:
        now = {r.id for r in corpus.rows() if r.engine == name}
        if not isinstance(cached.get(name), dict) or set(cached[name].get("residuals", {})) != now:
            sys.exit(f"fit_engines: the last fit of {name} is not of the corpus's rows now: refit it too")
    return {name: cached[name] for name in names}


def _fitted(name: str, res: dict[str, Any]) -> EngineProfile:
    params = [p for p in fit.PARAMS if p.key in res["params"]]
    return fit.with_values(corpus.priors()[name], params, res["x"])


def _with(p: EngineProfile, band: dict[str, tuple[float, float]], prov: dict[str, str]) -> EngineProfile:
    source = "fitted by scripts/fit_engines.py to data/corpus (see provenance)"
    return replace(p, uncertainty=band, provenance=prov, source=source)


if __name__ == "__main__":
    main()
