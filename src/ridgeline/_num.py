"""Arithmetic that accepts floats or numpy arrays alike, so one formula serves a single
estimate and a sweep of a million points. numpy is imported only when an array arrives."""

from __future__ import annotations

from typing import Any

Num = Any  # float, int or numpy.ndarray


def _is_array(*xs: Num) -> bool:
    return any(type(x).__module__ == "numpy" for x in xs)


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


def clip(x: Num, lo: Num, hi: Num) -> Num:
    return minimum(maximum(x, lo), hi)


def where(cond: Num, a: Num, b: Num) -> Num:
    if _is_array(cond, a, b):
        import numpy as np

        return np.where(cond, a, b)
    return a if cond else b
