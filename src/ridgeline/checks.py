"""Checks on what a user gives: sizes, numbers and text, each refused in one line.

Every float a user gives, in a flag or a file, must be finite and inside its range: a
NaN or an infinity that slips through becomes a NaN in the output or a loop that never
ends. Every message quotes the user's value with repr(), so a newline inside it cannot
split the line.
"""

from __future__ import annotations

import math

from ridgeline.errors import RidgelineError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Sizes beyond these are nonsense for any model or machine of this century, and would turn
# exact integer sums into floats that silently lose their last digits.
MAX_TOKENS = 1 << 40
MAX_COUNT = 1 << 40
# The slowest kernels still reach a ten-thousandth of peak; below that a time is not a
# prediction but an overflow waiting to happen.
MIN_EFFICIENCY = 1e-4
MAX_PRICE_PER_HOUR_USD = 1e6
# An accelerator's figures, from a phone to beyond any machine built: FLOP/s, bytes/s, bytes.
PEAK_FLOPS_RANGE = (1e6, 1e21)
BANDWIDTH_RANGE = (1e3, 1e18)
MEMORY_RANGE = (1e6, 1e18)


def check_size(name: str, value: Any, minimum: int = 1, maximum: int = MAX_TOKENS) -> int:
    """Sizes are whole numbers of tokens, sequences or GPUs in [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise RidgelineError(f"{name} must be a whole number from {minimum} to {maximum:,}, got {value!r}")
    return value


def check_number(
    name: str,
    value: Any,
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    hint: str = "",
) -> float:
    """A finite real number inside [lo, hi] (or open at either end), as a float."""
    try:
        x = float(value) if not isinstance(value, (bool, str, bytes)) else math.nan
    except (TypeError, ValueError, OverflowError):
        x = math.nan
    ok = math.isfinite(x)
    if ok and lo is not None:
        ok = x > lo if lo_open else x >= lo
    if ok and hi is not None:
        ok = x < hi if hi_open else x <= hi
    if not ok:
        wanted = describe_range(lo, hi, lo_open, hi_open)
        raise RidgelineError(f"{name} must be {wanted}, got {value!r}{hint}")
    return x


def describe_range(lo: float | None, hi: float | None, lo_open: bool = False, hi_open: bool = False) -> str:
    if lo is None and hi is None:
        return "a finite number"
    if hi is None:
        return f"a finite number {'>' if lo_open else '>='} {lo:g}"
    if lo is None:
        return f"a finite number {'<' if hi_open else '<='} {hi:g}"
    return f"a number in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"


def check_positive(name: str, value: Any, hi: float | None = None, hint: str = "") -> float:
    """A finite number above zero (and at most `hi`)."""
    return check_number(name, value, lo=0.0, lo_open=True, hi=hi, hint=hint)


def check_fraction(name: str, value: Any, *, zero_ok: bool = False) -> float:
    """A share: (0, 1], or [0, 1] when zero is allowed."""
    return check_number(name, value, lo=0.0, hi=1.0, lo_open=not zero_ok)


def check_efficiency(name: str, value: Any, hi: float = 1.0) -> float:
    """A fraction of peak that a kernel reaches: [MIN_EFFICIENCY, 1]."""
    return check_number(name, value, lo=MIN_EFFICIENCY, hi=hi, hint=": it is a fraction of peak")


def check_price(name: str, value: Any) -> float:
    return check_number(name, value, lo=0.0, hi=MAX_PRICE_PER_HOUR_USD, hint=" $ per GPU-hour")


def one_line(text: str, limit: int = 2000) -> str:
    """A message as one printable line: control characters escaped, length capped."""
    out = "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))
    return out if len(out) <= limit else out[: limit - 1] + "…"


def split_list(flag: str, text: str, example: str) -> list[str]:
    """`a,b,c` into its values, each stripped; none empty: `1,,2` is a typo, not a value to
    skip. `example` is a good value of the flag, for the message."""
    if not isinstance(text, str):
        raise RidgelineError(f"{flag} must be text such as {example}, got {text!r:.60}")
    items = [part.strip() for part in text.split(",")]
    if not any(items):
        raise RidgelineError(f"{flag} lists no values; give at least one, e.g. {flag} {example}")
    if not all(items):
        raise RidgelineError(f"{flag} {text!r:.80} has an empty value between its commas")
    return items


def check_text(name: str, value: Any, what: str) -> str:
    """A name or a path given as text (a path object read as its text): a number or a list in
    its place is one line naming it, not an AttributeError or a TypeError from inside."""
    import os

    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise RidgelineError(f"{name} is {what}, got {type(value).__name__}")
    return value


def check_path(name: str, value: Any) -> str:
    """A file's path, as text or a path object."""
    return check_text(name, value, "a file's path")


def check_flag(name: str, value: Any) -> bool:
    """A file's true or false, and nothing else: "off" or 0 would read as something else."""
    if not isinstance(value, bool):
        raise RidgelineError(f"{name} must be true or false, got {value!r:.60}")
    return value


def check_switch(name: str, value: Any) -> bool | None:
    """on or off (a file's true or false), or engine: None, the engine profile's own."""
    if isinstance(value, bool):
        return value
    text = value.strip().lower() if isinstance(value, str) else ""
    if text == "engine":
        return None
    if text not in ("on", "off"):
        raise RidgelineError(f"{name}: {value!r:.60} is not on, off or engine (the profile's own)")
    return text == "on"
