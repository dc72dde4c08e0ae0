"""The shared summary, computed fast and the same: a bootstrap that reads each resample's
p99 from its largest values gives numpy's own p99 to the last digit."""

from __future__ import annotations

import numpy as np
import pytest

from ridgeline import metrics


@pytest.mark.parametrize("n", [2, 3, 7, 99, 100, 101, 1000, 4321])
@pytest.mark.parametrize("kind", ["lognormal", "ties", "constant"])
def test_each_resamples_p99_is_numpys_to_the_last_digit(n: int, kind: str) -> None:
    rng = np.random.default_rng(n)
    x = {
        "lognormal": rng.lognormal(size=n),
        "ties": rng.integers(0, 4, size=n).astype(float),
        "constant": np.full(n, 0.125),
    }[kind]
    idx = rng.integers(0, n, size=(40, n))
    idx[0] = np.argmin(x)  # a resample of the smallest value alone: read whole, not from its top
    assert np.array_equal(metrics.p99_of_resamples(x, idx), np.percentile(x[idx], 99, axis=1))


@pytest.mark.parametrize("n", [1, 2, 3, 7, 99, 100, 101, 1000, 4321])
@pytest.mark.parametrize("kind", ["lognormal", "ties", "constant"])
def test_the_percentiles_are_numpys_to_the_last_digit(n: int, kind: str) -> None:
    rng = np.random.default_rng(n + 7)
    x = {
        "lognormal": rng.lognormal(size=n),
        "ties": rng.integers(0, 4, size=n).astype(float),
        "constant": np.full(n, 0.125),
    }[kind]
    qs = (2.5, 50, 90, 97.5, 99)
    assert metrics.percentiles_linear(x, qs) == np.percentile(x, qs).tolist()


def test_columns_of_one_length_share_their_draws_and_keep_their_numbers() -> None:
    """Percentiles of several columns at once are each column's percentiles alone."""
    rng = np.random.default_rng(1)
    columns = {"a": rng.lognormal(size=500), "b": rng.normal(size=500), "c": [0.5, None, 0.25]}
    together = metrics.percentiles_of(columns, boot=200)
    for name, values in columns.items():
        assert together[name] == metrics.percentiles(values, name, boot=200)
