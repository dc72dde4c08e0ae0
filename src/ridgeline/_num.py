"""Arithmetic that accepts floats or numpy arrays alike, so one formula serves a single
estimate and a sweep of a million points. numpy is imported only when an array arrives.

The values of one pass (ledger.Pass and Work, efficiency.Rates, parallel.GpuShare,
roofline.StepTime, operators.OpRow) hold `Num`s: plain dataclasses, not frozen ones. A
value that may hold arrays can be neither hashed nor compared whole, so freezing it buys no
hashing, and a frozen dataclass sets each field through object.__setattr__: its
construction takes four times as long, on every pass of every estimate, sweep, search and
simulation.
"""

from __future__ import annotations

import math

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Num = Any  # float, int or numpy.ndarray
else:  # annotations are never evaluated at run time (PEP 563): the name need only exist
    Num = object


_SCALARS = (float, int, bool, str)


def _is_array(*xs: Num) -> bool:
    """True when any argument is a numpy value (plain numbers are checked first: cheap)."""
    for x in xs:  # noqa: SIM110 - a loop, not any(): this runs on every step priced
        if type(x) not in _SCALARS and type(x).__module__ == "numpy":
            return True
    return False


def minimum(a: Num, b: Num) -> Num:
    if _is_array(a, b):
        import numpy as np

        return np.minimum(a, b)
    return min(a, b)


def maximum(a: Num, b: Num) -> Num:
    if _is_array(a, b):
        import numpy as np

        return np.maximum(a, b)
    return max(a, b)


def ceil(x: Num) -> Num:
    if _is_array(x):
        import numpy as np

        return np.ceil(x)
    return math.ceil(x)


def clip(x: Num, lo: Num, hi: Num) -> Num:
    return minimum(maximum(x, lo), hi)


def where(cond: Num, a: Num, b: Num) -> Num:
    if _is_array(cond, a, b):
        import numpy as np

        return np.where(cond, a, b)
    return a if cond else b


def sum_of_max_lines(a1: float, b1: float, a2: float, b2: float, n: int) -> float:
    """sum over j = 0 .. n-1 of max(a1 + b1 j, a2 + b2 j), exactly: the two lines cross at
    most once, so the sum is one arithmetic series on each side of the crossing."""
    if n <= 0:
        return 0.0
    if b1 == b2:
        return _series(max(a1, a2), b1, 0, n)
    (fa, fb), (sa, sb) = ((a2, b2), (a1, b1)) if b1 > b2 else ((a1, b1), (a2, b2))
    crossing = (fa - sa) / (sb - fb)  # the flatter line is the larger before it, the steeper after
    split = min(max(math.ceil(crossing), 0), n)
    return _series(fa, fb, 0, split) + _series(sa, sb, split, n)


def _series(a: float, b: float, lo: int, hi: int) -> float:
    """sum of a + b j over lo <= j < hi"""
    k = hi - lo
    return k * a + b * (lo + hi - 1) * k / 2.0
