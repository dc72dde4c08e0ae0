"""The shared summary: numpy's own percentiles to the last digit, and an interval on the p99
that holds the true p99 as often as it says, whatever the distribution."""

from __future__ import annotations

from fractions import Fraction
from math import comb, sqrt

import numpy as np
import pytest

from ridgeline import metrics


def binomial_cdf(n: int) -> list[Fraction]:
    """P(B <= k) for B ~ binomial(n, 0.99) and k = 0..n, exactly: C(n, j) 99^j / 100^n summed."""
    out, total = [], 0
    for j in range(n + 1):
        total += comb(n, j) * 99**j
        out.append(Fraction(total, 100**n))
    return out


@pytest.mark.parametrize("n", [1, 2, 50, 100, 367, 368, 1000])
def test_the_p99s_ranks_are_the_binomials_tails(n: int) -> None:
    """The lower rank is the largest k with P(B <= k) <= 2.5%, the upper the smallest with
    P(B <= k) >= 97.5%, where B ~ binomial(n, 0.99) counts the values below the true p99;
    an upper rank past the values is None. Summed exactly here, in fractions."""
    lo, hi = metrics.quantile_ranks(n, 0.99, 0.95)
    tail = Fraction(1, 40)
    cdf = binomial_cdf(n)
    assert lo == max(k for k in range(n + 1) if cdf[k] <= tail)
    upper = min(k for k in range(n + 1) if cdf[k] >= 1 - tail)
    assert hi == (upper if upper < n else None)


def test_a_p99_has_an_upper_bound_from_368_values() -> None:
    """The largest of n values is above the true p99 with probability 1 - 0.99^n, which
    reaches 97.5% at n = ln 0.025 / ln 0.99 = 367.04..., so at 368 values."""
    assert metrics.quantile_ranks(367, 0.99, 0.95)[1] is None
    assert metrics.quantile_ranks(368, 0.99, 0.95)[1] == 367


@pytest.mark.parametrize("n", [100_000, 10_000_000])
def test_many_values_give_the_normal_approximations_ranks(n: int) -> None:
    """For large n the binomial is normal: n q -+ 1.96 sqrt(n q (1 - q)), within two ranks."""
    lo, hi = metrics.quantile_ranks(n, 0.99, 0.95)
    half = 1.959964 * sqrt(n * 0.99 * 0.01)
    assert hi is not None
    assert abs(lo - (n * 0.99 - half)) < 2
    assert abs(hi - (n * 0.99 + half)) < 2


@pytest.mark.parametrize("n", [400, 1000])
def test_the_interval_holds_the_true_p99_as_often_as_its_exact_coverage(n: int) -> None:
    """Exponential values (true p99 = ln 100) in 4,000 seeded runs: the share of intervals
    holding it is within four standard errors of the binomial coverage, which is >= 95%."""
    lo, hi = metrics.quantile_ranks(n, 0.99, 0.95)
    assert hi is not None
    cdf = binomial_cdf(n)
    exact = float(cdf[hi] - cdf[lo])
    assert exact >= 0.95
    runs = 4000
    x = np.random.default_rng(n).exponential(size=(runs, n))
    x.sort(axis=1)
    true_p99 = np.log(100)
    held = float(np.mean((x[:, lo] <= true_p99) & (true_p99 <= x[:, hi])))
    assert abs(held - exact) < 4 * sqrt(exact * (1 - exact) / runs)


def test_the_summary_reads_the_interval_from_the_sorted_values() -> None:
    values = np.arange(1000.0)[::-1]  # 999 .. 0: the k-th smallest is k
    p = metrics.percentiles(values)
    lo, hi = metrics.quantile_ranks(1000, 0.99, 0.95)
    assert p.p99_ci95 == (float(lo), float(hi))
    assert p.p99 == pytest.approx(0.99 * 999)
    few = metrics.percentiles([0.5, None, 0.25, float("nan"), 1.0])
    # of 3 values, P(B <= 1) = 1 - 0.99^3 - 3 x 0.99^2 x 0.01 = 0.0003 and P(B <= 2) = 0.0297:
    # the lower end is the second smallest, and there is no upper end
    assert few.n == 3 and few.p99_ci95 == (0.5, None)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 99, 100, 101, 1000, 4321])
@pytest.mark.parametrize("kind", ["lognormal", "ties", "constant"])
@pytest.mark.parametrize("partition_above", [metrics.NUMPY_VALUES, 0])
def test_the_percentiles_are_numpys_and_the_ranks_the_sorted_values(
    n: int, kind: str, partition_above: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a sort (short runs) or numpy's partition (long ones): the same order statistics."""
    monkeypatch.setattr(metrics, "NUMPY_VALUES", partition_above)
    rng = np.random.default_rng(n + 7)
    x = {
        "lognormal": rng.lognormal(size=n),
        "ties": rng.integers(0, 4, size=n).astype(float),
        "constant": np.full(n, 0.125),
    }[kind]
    qs = (2.5, 50, 90, 97.5, 99)
    ranks = (None, 0, n - 1, n // 2)
    values, ranked = metrics.percentiles_and_ranks(x, qs, ranks)
    assert values == np.percentile(x, qs).tolist()
    assert ranked == [None, *(float(np.sort(x)[r]) for r in ranks[1:])]
