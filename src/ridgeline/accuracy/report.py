"""How close the built-in engine profiles come to the corpus: every row predicted with the
fitted profile (in-sample) and with the profile fitted without the row's source (held out,
from `data/corpus/cv.json`), and the error summarised by engine and by regime.

The held-out error is the honest figure: it is what a user's new measurement, from a source
the fit never saw, should expect. `benchmarks/accuracy.py` prints it; the accuracy test
asserts it.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from ridgeline import _files
from ridgeline.accuracy import corpus, fit
from ridgeline.accuracy.corpus import Row
from ridgeline.engines import (
    FIRST_TOKEN,
    LOAD,
    PREFILL,
    SERVER,
    EngineProfile,
    builtin_engines,
    load_band,
    ttft_band,
)


@dataclass(frozen=True)
class Checked:
    row: Row
    predicted: float  # with the fitted profile
    held_out: float  # with the profile fitted without the row's source
    # how many times as slow that profile's engine must be to predict what the row measured
    # (corpus.slowdown), for an open-loop row, whose queue magnifies the engine's speed
    # (None for the others: their time ratio is it)
    held_slowdown: float | None = None
    # the share of the held-out TTFT predicted that is not the prompt's pass (0 for the
    # other rows): where it lies between the prefill and first-token bands
    first_token_share: float = 0.0
    # the share of the held-out run its API server is busy (0 for rows not under load):
    # where it lies between the load and server bands
    server_share: float = 0.0

    @property
    def band_regime(self) -> str:
        """The band its slowdown joins (corpus.band_regime)."""
        return corpus.band_regime(self.row, self.first_token_share, self.server_share)

    @property
    def error(self) -> float:
        return corpus.error(self.row, self.predicted)

    @property
    def held_out_error(self) -> float:
        return corpus.error(self.row, self.held_out)

    @property
    def time_ratio(self) -> float:
        """Measured time / held-out predicted time (a rate's ratio turned over)."""
        return math.exp(corpus.time_ratio(self.row, math.log(self.held_out / self.row.measured)))

    @property
    def slowdown(self) -> float:
        """How many times as slow the held-out profile's engine must be to predict what the
        row measured: the time ratio, but for an open-loop row the slowdown its queue turns
        into the measured median. What the bands, bands of the engine's speed, are made of."""
        return self.time_ratio if self.held_slowdown is None else self.held_slowdown


@lru_cache(maxsize=1)
def folds() -> dict[str, dict[str, dict[str, float]]]:
    """engine -> source left out -> the parameters fitted without it."""
    data = json.loads(_files.package_text("corpus", "cv.json"))
    return {str(e): {str(g): dict(v) for g, v in by.items()} for e, by in data.items()}


def fold_profile(profile: EngineProfile, values: dict[str, float]) -> EngineProfile:
    for key, value in values.items():
        profile = fit.put(profile, key, value)
    return profile


def check(
    rows: Iterable[Row] | None = None, profiles: dict[str, EngineProfile] | None = None
) -> list[Checked]:
    """Each row predicted in-sample and held out (and an open-loop row's held-out slowdown)."""
    profiles = profiles or builtin_engines()
    cv = folds()
    out = []
    for row in corpus.rows() if rows is None else rows:
        p = profiles[row.engine]
        held = fold_profile(p, cv.get(row.engine, {}).get(row.group, {}))
        predicted, held_out = corpus.predict(row, p), corpus.predict(row, held)
        slowdown = corpus.slowdown(row, held, held_out) if row.kind in corpus.RATE_KINDS else None
        share = corpus.first_token_share(row, held, held_out)
        busy = corpus.server_share(row, held, held_out)
        out.append(Checked(row, predicted, held_out, slowdown, share, busy))
    return out


def log_slowdowns(checked: Iterable[Checked]) -> dict[str, float]:
    """log(Checked.slowdown) by row id: what the bands are made of."""
    return {c.row.id: math.log(c.slowdown) for c in checked}


def band_regimes(checked: Iterable[Checked]) -> dict[str, str]:
    """Checked.band_regime by row id: which band each slowdown joins."""
    return {c.row.id: c.band_regime for c in checked}


def band_of(c: Checked, made: dict[str, tuple[float, float]]) -> tuple[float, float]:
    """The band a row is held to, of the bands `made` by regime: a TTFT's, the prefill and
    first-token bands weighted by its first-token share (engines.ttft_band), as an
    estimate's; a run's under load, the load and server bands weighted by its server's
    share (engines.load_band), as a simulated run's; every other row's, its regime's."""
    if c.row.regime == PREFILL:
        return ttft_band(made.get(PREFILL), made.get(FIRST_TOKEN), c.first_token_share) or (1.0, 1.0)
    if c.row.regime == LOAD:
        return load_band(made.get(LOAD), made.get(SERVER), c.server_share) or (1.0, 1.0)
    return made.get(c.row.regime, (1.0, 1.0))


def unseen_coverage(checked: Sequence[Checked], checks: Sequence[Checked]) -> dict[str, tuple[int, int]]:
    """For each source of `checks`: how many of its rows (of how many) fall inside bands
    rebuilt, as the fit builds them (fit.bands), from every held-out row but that source's.
    The shipped bands hold every source's rows; this is their coverage of a source they
    never saw (with `checked` empty and every row in `checks`: of every source in turn)."""
    rows = {c.row.id: c.row for c in (*checked, *checks)}
    ratios = log_slowdowns([*checked, *checks])
    regimes = band_regimes([*checked, *checks])
    out = {}
    for source in sorted({c.row.group for c in checks}):
        rest = {i: t for i, t in ratios.items() if rows[i].group != source}
        mine = [c for c in checks if c.row.group == source]
        inside = 0
        for c in mine:
            made = fit.bands(rest, rows, c.row.engine, regimes)
            low, high = band_of(c, {g: (b.low, b.high) for g, b in made.items()})
            inside += low <= c.slowdown <= high
        out[source] = (inside, len(mine))
    return out


def median_abs(errors: Sequence[float]) -> float:
    return statistics.median(abs(e) for e in errors)


def inside(c: Checked, profiles: dict[str, EngineProfile] | None = None) -> bool:
    """Whether the row's held-out slowdown lies inside its profile's band: whether the row's
    measurement lies between the predictions of the engine slowed to each end of the band."""
    lo, hi = band_of(c, (profiles or builtin_engines())[c.row.engine].uncertainty)
    return bool(lo <= c.slowdown <= hi)


def covered(checked: Sequence[Checked], profiles: dict[str, EngineProfile] | None = None) -> float:
    """The share of rows whose held-out slowdown lies inside their profile's band."""
    profiles = profiles or builtin_engines()
    return sum(inside(c, profiles) for c in checked) / len(checked)


def by(checked: Sequence[Checked], key: str) -> dict[str, list[Checked]]:
    groups: dict[str, list[Checked]] = {}
    for c in checked:
        groups.setdefault(getattr(c.row, key), []).append(c)
    return dict(sorted(groups.items()))
