"""Numbers as a narrator says them, and as a frame writes them.

Spoken: "33 trillion", "about 34 milliseconds", "209 a second", "over 11,000", "three times",
"a third". Written (frame labels): "33.2 TFLOP", "4.79 ms", "16.1 GB". Every function only
rounds and words a number it is given; none computes one.
"""

from __future__ import annotations

import math

WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
SCALES = ((1e12, "trillion"), (1e9, "billion"), (1e6, "million"))
# Shares a person names as fractions, tried in this order; anything else is a percentage.
FRACTIONS = (
    (1 / 2, "half"),
    (1 / 3, "a third"),
    (2 / 3, "two thirds"),
    (1 / 4, "a quarter"),
    (3 / 4, "three quarters"),
    (1 / 5, "a fifth"),
    (1 / 10, "a tenth"),
    (1 / 20, "a twentieth"),
    (1 / 30, "a thirtieth"),
    (1 / 50, "a fiftieth"),
    (1 / 100, "a hundredth"),
)
FRACTION_TOLERANCE = 0.08  # relative: 0.343 is "a third", 0.31 is "31 percent"


def round_sig(x: float, sig: int) -> float:
    """x to `sig` significant figures."""
    if x == 0 or not math.isfinite(x):
        return x
    return float(f"{x:.{sig}g}")


def floor_sig(x: float, sig: int) -> float:
    """x rounded down to `sig` significant figures: what "over N" may claim."""
    if x <= 0 or not math.isfinite(x):
        return x
    step = 10 ** (math.floor(math.log10(x)) - sig + 1)
    return math.floor(x / step + 1e-9) * step


def plain(x: float, words: bool = False) -> str:
    """A rounded number as written in a sentence: 2000 -> "2,000", 4.80 -> "4.8", 3 ->
    "three" when `words` (whole numbers below ten)."""
    if abs(x - round(x)) < 1e-9 * max(1.0, abs(x)):
        n = round(x)
        return WORDS[n] if words and 0 <= n < 10 else f"{n:,}"
    text = f"{x:.6f}".rstrip("0").rstrip(".")
    whole, _, frac = text.partition(".")
    return f"{int(whole):,}.{frac}" if frac else f"{int(whole):,}"


def _approx(text: str, approx: str) -> str:
    return f"{approx} {text}" if approx else text


def spoken_count(x: float, sig: int = 2, approx: str = "", words: bool = False) -> str:
    """A count: 3.317e13 -> "33 trillion", 2032 -> "2,000", 208.6 (sig 3) -> "209".

    approx is a word said before it: "about", or "over" (the count is then rounded down,
    so that "over 11,000" is true of 11,846)."""
    value = floor_sig(x, sig) if approx == "over" else round_sig(x, sig)
    for factor, name in SCALES:
        if abs(value) >= factor:
            return _approx(f"{plain(round_sig(value / factor, sig))} {name}", approx)
    if abs(value) >= 10**sig:  # 11,846 to 2 figures is 12,000: whole thousands read as such
        return _approx(plain(value), approx)
    return _approx(plain(value, words), approx)


def spoken_time(seconds: float, sig: int = 2, approx: str = "", places: int | None = None) -> str:
    """A duration: 0.0335 -> "34 milliseconds", 0.0048 -> "4.8 milliseconds", 0.791
    (places 1) -> "0.8 seconds", 0.74 -> "0.74 seconds"."""
    if seconds < 0.1:
        value, unit = round_sig(seconds * 1e3, sig), "millisecond"
    elif places is not None and seconds < 10:
        value, unit = round(seconds, places), "second"
    else:
        value, unit = round_sig(seconds, sig), "second"
    text = plain(value)
    return _approx(f"{text} {unit}{'' if text == '1' else 's'}", approx)


def spoken_times(first_s: float, second_s: float, sig: int = 2) -> str:
    """Two durations in one unit, the unit said once: "4.8 to 5.4 milliseconds"."""
    both = spoken_time(second_s, sig)
    if (first_s < 0.1) == (second_s < 0.1):
        number = spoken_time(first_s, sig).rsplit(" ", 1)[0]
        return f"{number} to {both}"
    return f"{spoken_time(first_s, sig)} to {both}"


def spoken_rate(per_s: float, approx: str = "") -> str:
    """Tokens a second, the number alone: 208.6 -> "209", 84.6 -> "85", 1,994 -> "1,990",
    11,846 (over) -> "over 11,000"."""
    if approx == "over":
        return spoken_count(per_s, sig=2, approx=approx)
    if per_s >= 1000:
        return spoken_count(per_s, sig=3, approx=approx)
    if per_s >= 10:
        return _approx(plain(round(per_s)), approx)
    return spoken_count(per_s, sig=2, approx=approx)


def spoken_bytes(n_bytes: float) -> str:
    """16.06e9 -> "16 gigabytes", 2.14e9 -> "2.1 gigabytes", 536e6 -> "540 megabytes"."""
    for factor, unit in ((1e12, "terabytes"), (1e9, "gigabytes"), (1e6, "megabytes"), (1e3, "kilobytes")):
        if n_bytes >= factor * 0.9995:
            value = n_bytes / factor
            shown = round(value) if value >= 10 else round_sig(value, 2)
            return f"{plain(shown)} {unit}"
    return f"{plain(round(n_bytes))} bytes"


def spoken_flops(per_s: float) -> str:
    """A peak: 989e12 -> "989 teraflops", 2.25e15 -> "2.25 petaflops"."""
    for factor, unit in ((1e15, "petaflops"), (1e12, "teraflops"), (1e9, "gigaflops")):
        if per_s >= factor * 0.9995:
            return f"{plain(round_sig(per_s / factor, 3))} {unit}"
    return f"{plain(round_sig(per_s, 3))} flops"


def spoken_bandwidth(bytes_per_s: float) -> str:
    """3.35e12 -> "3.35 terabytes a second", 864e9 -> "864 gigabytes a second"."""
    for factor, unit in ((1e12, "terabytes"), (1e9, "gigabytes"), (1e6, "megabytes")):
        if bytes_per_s >= factor * 0.9995:
            return f"{plain(round_sig(bytes_per_s / factor, 3))} {unit} a second"
    return f"{plain(round_sig(bytes_per_s, 3))} bytes a second"


def spoken_ratio(r: float) -> str:
    """How many times: 3.17 -> "three times", 1.64 -> "1.6 times", 2.0 -> "twice", 1.0 ->
    "the same". A person rounds big ratios to a whole (or a half) and small ones to a tenth."""
    if abs(r - 1) < 0.05:
        return "the same"
    if r >= 3:
        value = round(r * 2) / 2
        return f"{plain(value, words=True)} times"
    value = round(r, 1)
    if value == 2:
        return "twice"
    return f"{plain(value)} times"


def spoken_percent(share: float) -> str:
    """0.128 -> "13 percent"; below one percent, one decimal."""
    pct = share * 100
    value = round(pct) if abs(pct) >= 1 else round_sig(pct, 1)
    return f"{plain(value)} percent"


def spoken_share(share: float) -> str:
    """A part of a whole as a fraction when one is close: 0.343 -> "a third", 0.0316 ->
    "a thirtieth"; otherwise a percentage."""
    for value, name in FRACTIONS:
        if abs(share - value) <= FRACTION_TOLERANCE * value:
            return name
    return spoken_percent(share)


def spoken_tokens(n: float) -> str:
    """A prompt's length as people speak of it: 16,361 -> "16,000", 2,081 -> "2,000"; under a
    thousand, as counted."""
    if n >= 1000:
        return plain(round(n / 1000) * 1000)
    return plain(round(n))


def spoken_gpus(n: int, short: str) -> str:
    """1, "H100" -> "one H100"; 4 -> "four H100s"."""
    return f"{plain(n, words=True)} {short}{'' if n == 1 else 's'}"


def article(word: str) -> str:
    """ "an H100", "a B200", "an MI300X", "an RTX 4090", "an 8-bit": by the first sound."""
    first = word.strip()[:1].upper()
    if first in "AEIOU" or (first in "FHLMNRSX" and (len(word) < 2 or not word[1].islower())):
        return "an"
    if word.startswith(("8", "11", "18")):
        return "an"
    return "a"


# ---- written: frame labels ---------------------------------------------------------------


def si(value: float, unit: str, digits: int = 3) -> str:
    """16.06e9, "B" -> "16.1 GB"; keeps `digits` significant figures."""
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{plain(round_sig(value / factor, digits))} {prefix}{unit}"
    return f"{plain(round_sig(value, digits))} {unit}".rstrip()


def written_time(seconds: float, digits: int = 3) -> str:
    """0.03354 -> "33.5 ms", 0.791 -> "791 ms", 2.6 -> "2.6 s"."""
    if seconds >= 1:
        return f"{seconds:.{digits}g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.{digits}g} ms"
    return f"{seconds * 1e6:.{digits}g} µs"


def written_count(x: float, digits: int = 3) -> str:
    """11,846 -> "11,800"; 208.6 -> "209"."""
    return plain(round_sig(x, digits)) if x >= 1 else f"{x:.{digits}g}"


def clock(seconds: float) -> str:
    """A section's time stamp: 74.2 -> "1:14"."""
    whole = int(seconds)
    return f"{whole // 60}:{whole % 60:02d}"


def vtt_time(seconds: float) -> str:
    """WebVTT's HH:MM:SS.mmm."""
    ms = round(seconds * 1000)
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}.{ms:03d}"
