"""Human units for tables and prose: decimal SI, as the lesson writes them."""

from __future__ import annotations


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """1.606e10 -> '16.1 G'; keeps `digits` significant figures."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.{digits}g} {prefix}{unit}"
    return f"{value:.{digits}g} {unit}".rstrip()


def rate(value: float) -> str:
    """A count a second: whole above 100 (12,345), else 3 significant figures (0.485), so
    a slow deployment's rate never reads 0."""
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.3g} s"
    if value >= 1e-3:
        return f"{value * 1e3:.3g} ms"
    return f"{value * 1e6:.3g} µs"


def server_busy(share: float) -> str:
    """How busy a band's API server is, after "under load" (nothing where it is idle)."""
    return f" with its API server {share:.0%} busy" if share >= 0.005 else ""
