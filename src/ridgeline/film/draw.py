"""The film's frames, drawn with matplotlib: one scene per beat, built once and moved frame by
frame. Every label and every moving quantity is a field of the film's figures, formatted.

The frame is a 16 × 9 canvas (letterboxed in any other shape). Content stays above y = 1.9,
where players draw the soft subtitles. The geometry below is shared with the tests, which
look for the sluice and the tap where these boxes put them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ridgeline.film.figures import BATCH_CONTEXT_TOKENS, PROMPT_TOKENS, Figures
from ridgeline.film.measured import Measured
from ridgeline.film.page import deployment
from ridgeline.film.script import Beat
from ridgeline.film.spoken import plain, si, written_count, written_time

WIDTH, HEIGHT = 16.0, 9.0
INK, MUTED, LINE, PAPER, GROUND = "#1f2328", "#57606a", "#d0d7de", "#ffffff", "#f4f3ef"
PREFILL, PREFILL_SOFT = "#b45309", "#fde7c8"
DECODE, DECODE_SOFT = "#1d4ed8", "#dbe5fd"
WEIGHTS, WEIGHTS_SOFT = "#6d28d9", "#ece3fb"
KV, KV_SOFT = "#0f766e", "#cdeee8"
CHIP_FACE, CORE_IDLE = "#2d333b", "#444c56"

# Boxes (x0, y0, x1, y1) in canvas units.
CHIP = (6.6, 3.7, 9.4, 6.4)
WALL = (11.0, 2.6, 15.0, 7.3)
SLUICE = (0.6, 3.95, 6.6, 6.15)  # beat 2's channel: the whole prompt at once
TAP = (7.8, 7.0, 8.2, 7.9)  # beat 3's pipe: one drop per token
SAFE_BOTTOM = 1.9  # below this, the subtitles (three lines of them at 720p)
TOKEN_PERIOD_S = 1.6  # film seconds per decode step, slowed down
BATCH_PERIOD_S = 2.0

Update = Callable[[float, float], None]


@dataclass(frozen=True)
class Film:
    figures: Figures
    beats: Sequence[Beat]
    spans: Sequence[tuple[float, float]]  # each beat's stretch of film, seconds
    measured: Measured | None = None
    endpoint: str | None = None


def fraction_box(box: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    """A canvas box as fractions of a 16:9 frame (left, bottom, right, top), for the tests."""
    x0, y0, x1, y1 = box
    return x0 / WIDTH, y0 / HEIGHT, x1 / WIDTH, y1 / HEIGHT


def _ease(u: float) -> float:
    u = min(max(u, 0.0), 1.0)
    return u * u * (3 - 2 * u)


def _ramp(u: float, start: float, end: float) -> float:
    return _ease((u - start) / (end - start))


class Canvas:
    """One figure, one full-frame axes in canvas units, and the helpers the scenes share."""

    def __init__(self, width_px: int, height_px: int) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        dpi = height_px / 7.2  # a 7.2-inch-high figure: text in points scales with the frame
        self.fig = Figure(figsize=(width_px / dpi, height_px / dpi), dpi=dpi, facecolor=GROUND)
        self.agg = FigureCanvasAgg(self.fig)
        self.width_px, self.height_px = width_px, height_px
        aspect = (width_px / height_px) / (WIDTH / HEIGHT)
        w, h = (1 / aspect, 1.0) if aspect > 1 else (1.0, aspect)
        self.box = ((1 - w) / 2, (1 - h) / 2, w, h)  # the 16:9 canvas inside the figure
        self.points_per_unit = 72 * (self.fig.get_figwidth() * w) / WIDTH
        self.ax: Any = None
        self.extra: list[Any] = []

    def reset(self) -> Any:
        for ax in self.extra:
            ax.remove()
        self.extra = []
        if self.ax is not None:
            self.ax.remove()
        ax = self.fig.add_axes(self.box)
        ax.set_xlim(0, WIDTH)
        ax.set_ylim(0, HEIGHT)
        ax.axis("off")
        ax.set_facecolor(GROUND)
        self.ax = ax
        return ax

    def inset(self, box: tuple[float, float, float, float]) -> Any:
        """Data axes over a canvas box."""
        left, bottom, w, h = self.box
        x0, y0, x1, y1 = box
        ax = self.fig.add_axes(
            (left + w * x0 / WIDTH, bottom + h * y0 / HEIGHT, w * (x1 - x0) / WIDTH, h * (y1 - y0) / HEIGHT)
        )
        ax.set_facecolor(PAPER)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        ax.tick_params(labelsize=11, colors=MUTED)
        self.extra.append(ax)
        return ax

    def marker_size(self, side_units: float) -> float:
        """A scatter marker's size (points squared) for a side in canvas units."""
        return (side_units * self.points_per_unit) ** 2

    def text(self, x: float, y: float, s: str, size: float = 14, color: str = INK, **kw: Any) -> Any:
        kw.setdefault("va", "center")
        return self.ax.text(x, y, s, fontsize=size, color=color, **kw)

    def rect(self, box: tuple[float, float, float, float], **kw: Any) -> Any:
        from matplotlib.patches import Rectangle

        x0, y0, x1, y1 = box
        patch = Rectangle((x0, y0), x1 - x0, y1 - y0, **kw)
        self.ax.add_patch(patch)
        return patch

    def rgba(self) -> memoryview:
        self.agg.draw()
        return memoryview(self.agg.buffer_rgba())


# ---- pieces shared by the scenes ----------------------------------------------------------


def chrome(cv: Canvas, film: Film, index: int) -> Update:
    """The title, the deployment and the progress strip along the bottom."""
    f = film.figures
    beat = film.beats[index]
    cv.text(0.5, 8.45, f"{beat.number} · {beat.title}", size=24, weight="bold")
    cv.text(15.5, 8.45, f"{deployment(f)} · ideal roofline", size=13, color=MUTED, ha="right")
    total = film.spans[-1][1]
    x0, x1, y0, y1 = 0.5, 15.5, 0.1, 0.2
    for i, (start, end) in enumerate(film.spans):
        left = x0 + (x1 - x0) * start / total
        right = x0 + (x1 - x0) * end / total
        colour = INK if i < index else LINE
        cv.rect((left + 0.02, y0, right - 0.02, y1), facecolor=colour, edgecolor="none")
    start, end = film.spans[index]
    left = x0 + (x1 - x0) * start / total
    width = (x1 - x0) * (end - start) / total
    bar = cv.rect((left + 0.02, y0, left + 0.03, y1), facecolor=INK, edgecolor="none")

    def update(u: float, t: float) -> None:
        bar.set_width(max(width * u - 0.04, 0.01))

    return update


class Wall:
    """The wall of weights: bricks, a label, and a sweep that shows how much has been read."""

    def __init__(self, cv: Canvas, box: tuple[float, float, float, float], label: str) -> None:
        from matplotlib.collections import PatchCollection
        from matplotlib.patches import Rectangle

        x0, y0, x1, y1 = box
        rows, cols = 12, 6
        bw, bh = (x1 - x0) / cols, (y1 - y0) / rows
        bricks = []
        for r in range(rows):
            shift = bw / 2 if r % 2 else 0.0
            for c in range(-1, cols):
                left = max(x0, x0 + c * bw + shift)
                right = min(x1, x0 + (c + 1) * bw + shift)
                if right - left > 0.05:
                    bricks.append(Rectangle((left, y0 + r * bh), right - left, bh))
        cv.ax.add_collection(PatchCollection(bricks, facecolor=WEIGHTS_SOFT, edgecolor=PAPER, linewidth=1.2))
        cv.rect(box, facecolor="none", edgecolor=WEIGHTS, linewidth=2)
        cv.text((x0 + x1) / 2, y1 + 0.32, label, size=15, color=WEIGHTS, ha="center", weight="bold")
        self.box = box
        self.sweep = cv.rect((x0, y0, x0, y1), facecolor=WEIGHTS, edgecolor="none", alpha=0.55)

    def read(self, p: float) -> None:
        """Show a fraction p of the wall read (0 hides the sweep)."""
        x0, _, x1, _ = self.box
        self.sweep.set_width((x1 - x0) * min(max(p, 0.0), 1.0))


class Chip:
    """The accelerator: a die with a grid of cores, lit when busy."""

    def __init__(self, cv: Canvas, box: tuple[float, float, float, float], name: str) -> None:
        x0, y0, x1, y1 = box
        cv.rect(box, facecolor=CHIP_FACE, edgecolor=INK, linewidth=2)
        cv.text((x0 + x1) / 2, y1 - 0.3, name, size=16, color=PAPER, ha="center", weight="bold")
        cols, rows = 12, 7
        xs, ys = [], []
        for r in range(rows):
            for c in range(cols):
                xs.append(x0 + 0.25 + (c + 0.5) * (x1 - x0 - 0.5) / cols)
                ys.append(y0 + 0.2 + (r + 0.5) * (y1 - y0 - 0.8) / rows)
        self.n = len(xs)
        side = 0.6 * (x1 - x0 - 0.5) / cols
        self.cores = cv.ax.scatter(xs, ys, s=cv.marker_size(side), marker="s", c=[CORE_IDLE] * self.n)

    def light(self, lit: Sequence[bool], colour: str) -> None:
        self.cores.set_facecolor([colour if on else CORE_IDLE for on in lit])


def _lit(n: int, share: float, frame: int) -> list[bool]:
    """Which of n cores are lit, `share` of them, shuffled a little each frame."""
    import random

    rng = random.Random(frame)
    k = round(n * share)
    on = set(rng.sample(range(n), k)) if k < n else set(range(n))
    return [i in on for i in range(n)]


def _bus(cv: Canvas, label: str, wall: tuple[float, float, float, float] = WALL) -> None:
    """The memory bus between the chip and the wall, with the bandwidth on it."""
    y = (CHIP[1] + CHIP[3]) / 2
    cv.ax.annotate(
        "",
        xy=(CHIP[2] + 0.05, y),
        xytext=(wall[0] - 0.05, y),
        arrowprops={"arrowstyle": "-|>", "color": WEIGHTS, "lw": 3, "mutation_scale": 22},
    )
    cv.text((CHIP[2] + wall[0]) / 2, y + 0.4, label, size=12, color=WEIGHTS, ha="center")


def _wall_label(f: Figures) -> str:
    d = f.decode.decode
    per = "" if f.gpus == 1 else " per GPU"
    return f"{si(d.weight_bytes_per_gpu, 'B')} of weights{per}"


# ---- the nine scenes ------------------------------------------------------------------------

REPLY = [
    "Prefill",
    "read",
    "your",
    "whole",
    "document",
    "in",
    "one",
    "pass;",
    "now",
    "decode",
    "writes",
    "the",
    "answer",
    "one",
    "token",
    "at",
    "a",
    "time,",
    "each",
    "one",
    "a",
    "full",
    "read",
    "of",
    "the",
    "model's",
    "weights,",
    "at",
    "a",
    "steady",
    "pace.",
]


def scene_two_waits(cv: Canvas, film: Film) -> Update:
    f = film.figures
    e = f.prefill
    ttft_ms, tpot_ms = e.ttft_s * 1e3, e.tpot_s * 1e3
    ticks = len(REPLY)
    end_ms = ttft_ms + (ticks + 1) * tpot_ms
    cv.rect((0.6, 5.2, 4.2, 7.6), facecolor=PAPER, edgecolor=LINE, linewidth=1.5)
    for i in range(8):
        cv.rect(
            (0.9, 7.15 - i * 0.24, 3.9 - (i % 3) * 0.5, 7.25 - i * 0.24), facecolor=LINE, edgecolor="none"
        )
    cv.text(2.4, 4.9, f"your prompt: {plain(PROMPT_TOKENS)} tokens", size=13, color=MUTED, ha="center")
    cv.rect((5.0, 5.9, 15.4, 7.6), facecolor=DECODE_SOFT, edgecolor=DECODE, linewidth=1.5)
    reply = cv.text(5.25, 7.35, "", size=15, va="top", wrap=False)
    waiting = cv.text(10.2, 6.75, "waiting for the first word …", size=16, color=PREFILL, ha="center")
    ax = cv.inset((1.0, 2.7, 15.0, 4.1))
    ax.set_xlim(0, end_ms)
    ax.set_ylim(0, 1)
    ax.set_yticks([])
    ax.spines["left"].set_visible(False)
    ax.set_xlabel("time, milliseconds (slowed down)", fontsize=12, color=MUTED)
    ax.barh(0.5, ttft_ms, height=0.6, left=0, color=PREFILL_SOFT, edgecolor=PREFILL)
    ax.text(
        ttft_ms / 2,
        0.5,
        f"prefill: TTFT {written_time(e.ttft_s)}",
        ha="center",
        va="center",
        fontsize=12,
        color=PREFILL,
    )
    xs = [ttft_ms + (k + 1) * tpot_ms for k in range(ticks)]
    drops = ax.scatter(xs, [0.5] * ticks, s=cv.marker_size(0.14), marker="s", c=DECODE, alpha=0.0)
    ax.text(
        end_ms,
        1.15,
        f"then one token every {written_time(e.tpot_s)}: decode",
        ha="right",
        va="bottom",
        fontsize=12,
        color=DECODE,
        transform=ax.transData,
        clip_on=False,
    )
    cursor = ax.axvline(0, color=INK, linewidth=1.5)
    lines = _wrap_words(REPLY, 72)

    def update(u: float, t: float) -> None:
        now = end_ms * _ramp(u, 0.05, 0.92)
        cursor.set_xdata([now, now])
        shown = sum(1 for x in xs if x <= now)
        drops.set_alpha(None)
        drops.set_facecolor([DECODE if x <= now else (0, 0, 0, 0) for x in xs])
        reply.set_text(_first_words(lines, shown))
        waiting.set_visible(now < ttft_ms)

    return update


def _wrap_words(words: Sequence[str], width: int) -> list[list[str]]:
    lines: list[list[str]] = [[]]
    for w in words:
        if sum(len(x) + 1 for x in lines[-1]) + len(w) > width:
            lines.append([])
        lines[-1].append(w)
    return lines


def _first_words(lines: list[list[str]], n: int) -> str:
    out, left = [], n
    for line in lines:
        if left <= 0:
            break
        out.append(" ".join(line[:left]))
        left -= len(line)
    return "\n".join(out)


def _stage(cv: Canvas, f: Figures, bandwidth_bytes_per_s: float) -> tuple[Wall, Chip]:
    """What every phase's scene stands on: the wall of numbers, the chip and its memory bus."""
    wall = Wall(cv, WALL, _wall_label(f))
    chip = Chip(cv, CHIP, f.gpu if f.gpus == 1 else f"{f.gpus} × {f.gpu}")
    _bus(cv, si(bandwidth_bytes_per_s, "B/s"))
    return wall, chip


def scene_prefill(cv: Canvas, film: Film) -> Update:
    f = film.figures
    e = f.prefill
    p = e.prefill
    wall, chip = _stage(cv, f, e.gpu.bandwidth_bytes_per_s)
    x0, y0, x1, y1 = SLUICE
    cv.ax.plot([x0, x1], [y1 + 0.06, y1 + 0.06], color=INK, linewidth=3)
    cv.ax.plot([x0, x1], [y0 - 0.06, y0 - 0.06], color=INK, linewidth=3)
    cv.text(
        (x0 + x1) / 2,
        y1 + 0.45,
        f"the sluice: all {plain(PROMPT_TOKENS)} prompt tokens at once",
        size=15,
        color=PREFILL,
        ha="center",
        weight="bold",
    )
    water = cv.rect((x0, y0, x0, y1), facecolor=PREFILL_SOFT, edgecolor="none")
    rows, cols = 8, 30
    gap_x, gap_y = (x1 - x0) / cols, (y1 - y0) / rows
    tokens = cv.ax.scatter([], [], s=cv.marker_size(0.8 * min(gap_x, gap_y)), marker="s", c=PREFILL)
    cv.text(
        (x0 + x1) / 2,
        y0 - 0.45,
        "every weight is read once for all of them",
        size=13,
        color=MUTED,
        ha="center",
    )
    cx = (CHIP[0] + CHIP[2]) / 2
    cv.text(cx, CHIP[1] - 0.35, f"{si(p.flops, 'FLOP')} in one pass", size=14, ha="center")
    cv.text(cx, CHIP[1] - 0.75, f"at {si(e.gpu.peak_flops, 'FLOP/s')}", size=14, ha="center")
    clock = cv.text(cx, CHIP[1] - 1.2, "", size=16, ha="center", weight="bold", color=PREFILL)
    bound = "compute-bound: every core busy" if p.bound == "compute" else "memory-bound, even so"
    cv.text(cx, CHIP[1] - 1.65, bound, size=13, ha="center", color=PREFILL)

    def update(u: float, t: float) -> None:
        front = x0 + (x1 - x0) * _ramp(u, 0.0, 0.18)
        back = x0 + (x1 - x0) * _ramp(u, 0.82, 0.98)
        water.set_x(back)
        water.set_width(max(front - back, 0.0))
        shift = (t * 1.5) % gap_x
        xs, ys = [], []
        for c in range(cols + 1):
            x = x0 + c * gap_x + shift
            if back <= x <= front - 0.05:
                for r in range(rows):
                    xs.append(x)
                    ys.append(y0 + (r + 0.5) * gap_y)
        tokens.set_offsets(list(zip(xs, ys, strict=True)) or [(0.0, -1.0)])
        work = _ramp(u, 0.12, 0.85)
        wall.read(work)
        chip.light(_lit(chip.n, 0.92 if 0.12 < u < 0.88 else 0.0, int(t * 8)), PREFILL)
        done = written_time(e.ttft_s * work) if work > 0.01 else "0 ms"
        clock.set_text(f"{done} of {written_time(e.ttft_s)}")

    return update


def scene_decode(cv: Canvas, film: Film) -> Update:
    f = film.figures
    e = f.decode
    d = e.decode
    wall, chip = _stage(cv, f, e.gpu.bandwidth_bytes_per_s)
    tx0, ty0, tx1, ty1 = TAP
    cv.rect((tx0, ty0, tx1, ty1), facecolor=DECODE, edgecolor="none")
    cv.rect((tx0 - 0.9, ty1 - 0.02, tx1, ty1 + 0.22), facecolor=DECODE, edgecolor="none")
    cv.text(tx0 - 1.1, ty1 + 0.1, "the tap", size=15, color=DECODE, ha="right", weight="bold")
    drop = cv.ax.scatter([(tx0 + tx1) / 2], [ty0], s=cv.marker_size(0.32), c=DECODE, marker="o")
    cv.text(
        3.3, 5.05, "no sluice now:\none drop per token", size=14, color=MUTED, ha="center", linespacing=1.5
    )
    counter = cv.text(0.6, 7.3, "", size=16, color=DECODE, weight="bold", ha="left")
    reread = cv.text(0.6, 6.75, "", size=13, color=WEIGHTS, ha="left")
    cx = (CHIP[0] + CHIP[2]) / 2
    cv.text(cx, CHIP[1] - 0.35, f"{si(d.flops, 'FLOP')} per token", size=14, ha="center")
    cv.text(cx, CHIP[1] - 0.75, f"{written_time(d.time_s)} a token", size=14, ha="center")
    cv.text(
        cx,
        CHIP[1] - 1.2,
        f"{written_count(e.tokens_per_s)} tokens/s at best",
        size=16,
        ha="center",
        weight="bold",
        color=DECODE,
    )
    idle = "memory-bound: the arithmetic idles" if d.bound == "memory" else "compute-bound"
    cv.text(
        (WALL[0] + WALL[2]) / 2,
        WALL[1] - 0.35,
        "each drop rereads the whole wall",
        size=13,
        color=WEIGHTS,
        ha="center",
    )
    cv.text(3.3, 2.55, idle, size=13, color=DECODE, ha="center")
    out = cv.ax.scatter([], [], s=cv.marker_size(0.16), marker="s", c=DECODE)
    share = d.compute_s / d.time_s  # the step's arithmetic, as a share of its time

    def update(u: float, t: float) -> None:
        k, phase = divmod(t, TOKEN_PERIOD_S)
        phase /= TOKEN_PERIOD_S
        fall = min(phase / 0.25, 1.0)
        drop.set_offsets([((tx0 + tx1) / 2, ty0 - (ty0 - CHIP[3]) * fall)])
        drop.set_alpha(1.0 if phase < 0.25 else 0.0)
        wall.read((phase - 0.25) / 0.7 if phase >= 0.25 else 0.0)
        lit = _lit(chip.n, max(share, 1 / chip.n) if phase >= 0.25 else 0.0, int(t * 8))
        chip.light(lit, DECODE)
        n = int(k)
        counter.set_text(f"token {n + 1}")
        reading = (phase - 0.25) / 0.7
        reread.set_text(
            f"weights read so far: {si(d.weight_bytes_per_gpu * (n + min(max(reading, 0), 1)), 'B')}"
        )
        xs = [0.8 + 0.22 * i for i in range(min(n, 20))]
        out.set_offsets(list(zip(xs, [3.1] * len(xs), strict=True)) or [(0.0, -1.0)])

    cv.text(0.6, 3.45, "tokens out:", size=12, color=MUTED, ha="left")
    return update


def scene_roofline(cv: Canvas, film: Film) -> Update:
    f = film.figures
    e, p, d = f.prefill, f.prefill.prefill, f.decode.decode
    peak, bw, ridge = e.gpu.peak_flops, e.gpu.bandwidth_bytes_per_s, e.ridge
    ax = cv.inset((1.9, 2.8, 10.6, 7.7))
    lo = min(0.1, d.intensity / 10, ridge / 10)
    hi = max(1e5, p.intensity * 20)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(bw * lo, peak * 4)
    ax.set_xlabel("operations per byte moved (arithmetic intensity)", fontsize=12, color=MUTED)
    ax.set_ylabel("FLOP/s attained", fontsize=12, color=MUTED)
    ax.yaxis.set_major_formatter(_si_formatter("FLOP/s"))
    ax.yaxis.set_minor_formatter(_blank_formatter())
    ax.xaxis.set_minor_formatter(_blank_formatter())
    ax.xaxis.set_major_formatter(_plain_formatter())
    roof_x = [lo, ridge, hi]
    roof_y = [peak * lo / ridge, peak, peak]  # the slope is bandwidth × intensity, up to the peak
    ax.fill_between(roof_x[:2], [bw * lo / 100] * 2, roof_y[:2], color=DECODE_SOFT, alpha=0.8, linewidth=0)
    ax.fill_between(roof_x[1:], [bw * lo / 100] * 2, roof_y[1:], color=PREFILL_SOFT, alpha=0.8, linewidth=0)
    (roof,) = ax.plot([], [], color=INK, linewidth=3)
    ridge_line = ax.axvline(ridge, color=INK, linestyle="--", linewidth=1.2, alpha=0.0)
    ridge_text = ax.text(
        ridge * 1.25, bw * lo * 3, f"ridge {written_count(ridge)}", fontsize=13, color=INK, alpha=0.0
    )
    if ridge / 30 > lo * 3:
        ax.text(ridge / 30, peak / 30 * 3, "memory slope", fontsize=12, color=DECODE, ha="right")
    ax.text(hi / 1.5, peak * 1.35, "compute roof", fontsize=12, color=PREFILL, ha="right")
    decode_y = d.flops / d.time_s
    prefill_y = p.flops / p.time_s
    dot_d = ax.scatter([d.intensity], [decode_y], s=cv.marker_size(0.3), c=DECODE, zorder=5, alpha=0.0)
    dot_p = ax.scatter([p.intensity], [prefill_y], s=cv.marker_size(0.3), c=PREFILL, zorder=5, alpha=0.0)
    label_d = ax.annotate(
        f"decode, batch 1\n{d.intensity:.2g} op/byte",
        (d.intensity, decode_y),
        xytext=(16, -34),
        textcoords="offset points",
        fontsize=12,
        color=DECODE,
        alpha=0.0,
    )
    label_p = ax.annotate(
        f"prefill, {plain(PROMPT_TOKENS)} tokens\n{p.intensity:,.0f} op/byte",
        (p.intensity, prefill_y),
        xytext=(0, -40),
        textcoords="offset points",
        fontsize=12,
        color=PREFILL,
        alpha=0.0,
        ha="center",
    )
    x = 11.2
    cv.text(x, 7.2, f"{f.gpu}", size=18, weight="bold", ha="left")
    cv.text(x, 6.6, f"peak  {si(peak, 'FLOP/s')}", size=14, ha="left")
    cv.text(x, 6.1, f"bandwidth  {si(bw, 'B/s')}", size=14, ha="left")
    cv.text(
        x,
        5.4,
        f"ridge = peak ÷ bandwidth\n= {written_count(ridge)} operations per byte",
        size=14,
        ha="left",
        linespacing=1.5,
    )
    cv.text(x, 4.2, f"decode: {d.bound}-bound", size=14, color=DECODE, ha="left")
    cv.text(x, 3.7, f"prefill: {p.bound}-bound", size=14, color=PREFILL, ha="left")

    def update(u: float, t: float) -> None:
        k = _ramp(u, 0.0, 0.25)
        if k > 0:
            xs = [lo, min(ridge, lo * (hi / lo) ** k)]
            if xs[1] >= ridge:
                xs.append(lo * (hi / lo) ** k)
            ys = [min(peak, peak * x / ridge) for x in xs]
            roof.set_data(xs, ys)
        a_d = _ramp(u, 0.3, 0.4)
        a_p = _ramp(u, 0.55, 0.65)
        a_r = _ramp(u, 0.75, 0.85)
        dot_d.set_alpha(a_d)
        label_d.set_alpha(a_d)
        dot_p.set_alpha(a_p)
        label_p.set_alpha(a_p)
        ridge_line.set_alpha(a_r)
        ridge_text.set_alpha(a_r)

    return update


def scene_batching(cv: Canvas, film: Film) -> Update:
    f = film.figures
    b = f.batched
    users = int(b.inputs["batch"])
    wall_box = (11.0, 4.4, 15.0, 7.3)
    wall = Wall(cv, wall_box, _wall_label(f))
    chip = Chip(cv, CHIP, f.gpu if f.gpus == 1 else f"{f.gpus} × {f.gpu}")
    _bus(cv, si(b.gpu.bandwidth_bytes_per_s, "B/s"), wall_box)
    side = math.ceil(math.sqrt(users))
    pitch_x, pitch_y = min(0.62, 4.4 / side), min(0.58, 4.1 / side)
    xs, ys = [], []
    for i in range(users):
        r, c = divmod(i, side)
        xs.append(0.9 + c * pitch_x)
        ys.append(7.0 - r * pitch_y)
    people = cv.ax.scatter(
        xs, ys, s=cv.marker_size(0.55 * pitch_x), c=DECODE_SOFT, edgecolors=DECODE, linewidths=1
    )
    cv.ax.scatter([x + 0.4 * pitch_x for x in xs], ys, s=cv.marker_size(0.2 * pitch_x), marker="s", c=KV)
    cv.text(
        0.6, 7.65, f"{users} users, one read of the weights", size=15, color=DECODE, weight="bold", ha="left"
    )
    cv.text(
        0.6,
        2.35,
        f"each also rereads its own cache\n({BATCH_CONTEXT_TOKENS} tokens: the small squares)",
        size=12,
        color=KV,
        ha="left",
        linespacing=1.4,
    )
    cx = (CHIP[0] + CHIP[2]) / 2
    step1, step64 = f.decode.decode.time_s, b.decode.time_s
    cv.text(cx, CHIP[1] - 0.4, f"step {written_time(step1)} → {written_time(step64)}", size=14, ha="center")
    made = cv.text(cx, CHIP[1] - 0.85, "", size=14, ha="center", color=DECODE)
    one, many = f.decode.tokens_per_s, b.batch_tokens_per_s
    ax = cv.inset((12.0, 2.6, 15.0, 3.5))
    ax.set_xlim(0, many * 1.05)
    ax.set_ylim(-0.5, 1.5)
    ax.set_yticks([0, 1], [f"{users} users", "1 user"], fontsize=11)
    ax.set_xticks([])
    bars = ax.barh([0, 1], [0, 0], color=[DECODE, DECODE_SOFT], edgecolor=DECODE, height=0.7)
    cv.text(15.0, 3.85, "tokens a second", size=12, color=MUTED, ha="right")
    rate_one = ax.text(0, 1, "", fontsize=11, color=DECODE, va="center", weight="bold")
    rate_many = ax.text(0, 0, "", fontsize=11, color=PAPER, va="center", ha="right", weight="bold")

    def update(u: float, t: float) -> None:
        k, phase = divmod(t, BATCH_PERIOD_S)
        phase /= BATCH_PERIOD_S
        wall.read(phase / 0.8)
        on = phase >= 0.8
        people.set_facecolor(DECODE if on else DECODE_SOFT)
        chip.light(_lit(chip.n, 0.2 if phase < 0.8 else 0.0, int(t * 8)), DECODE)
        made.set_text(f"{plain(users * (int(k) + int(on)))} tokens so far")
        g = _ramp(u, 0.2, 0.6)
        bars[0].set_width(many * g)
        bars[1].set_width(one * g)
        rate_one.set_position((one * g + many * 0.02, 1))
        rate_one.set_text(written_count(one) if g > 0.5 else "")
        rate_many.set_position((many * g - many * 0.02, 0))
        rate_many.set_text(written_count(many) if g > 0.5 else "")

    return update


def _metric_rows(
    cv: Canvas,
    box: tuple[float, float, float, float],
    name: str,
    values: Sequence[tuple[str, float, float, str]],
    colour: str,
) -> list[tuple[Any, float, float]]:
    """A panel: the accelerator's name and bars for (label, value, scale, text)."""
    x0, _, x1, y1 = box
    cv.rect(box, facecolor=PAPER, edgecolor=LINE, linewidth=1.5)
    cv.text((x0 + x1) / 2, y1 - 0.4, name, size=20, weight="bold", ha="center")
    bars = []
    for i, (label, value, scale, text) in enumerate(values):
        y = y1 - 1.2 - i * 1.15
        cv.text(x0 + 0.3, y + 0.32, label, size=12, color=MUTED, ha="left")
        cv.rect((x0 + 0.3, y - 0.2, x1 - 0.3, y + 0.12), facecolor=GROUND, edgecolor="none")
        bar = cv.rect((x0 + 0.3, y - 0.2, x0 + 0.31, y + 0.12), facecolor=colour, edgecolor="none")
        cv.text(x1 - 0.3, y + 0.32, text, size=13, ha="right", weight="bold")
        bars.append((bar, (x1 - x0 - 0.6) * value / scale, value))
    return bars


def scene_two_gpus(cv: Canvas, film: Film) -> Update:
    f = film.figures
    e, v, lg = f.prefill, f.versus, f.long
    rate = f.decode.tokens_per_s
    bars: list[tuple[Any, float, float]] = []
    ratios = []
    if v is not None and f.versus_name is not None:
        peak = max(e.gpu.peak_flops, v.gpu.peak_flops)
        bw = max(e.gpu.bandwidth_bytes_per_s, v.gpu.bandwidth_bytes_per_s)
        top = max(rate, v.tokens_per_s)
        for box, name, acc, r, colour in (
            ((0.6, 3.4, 7.6, 7.7), f.versus_name, v.gpu, v.tokens_per_s, MUTED),
            ((8.4, 3.4, 15.4, 7.7), f.gpu, e.gpu, rate, INK),
        ):
            bars += _metric_rows(
                cv,
                box,
                name,
                [
                    ("peak arithmetic", acc.peak_flops, peak, si(acc.peak_flops, "FLOP/s")),
                    ("memory bandwidth", acc.bandwidth_bytes_per_s, bw, si(acc.bandwidth_bytes_per_s, "B/s")),
                    ("one user's decode", r, top, f"{written_count(r)} tokens/s"),
                ],
                colour,
            )
        pairs = (
            (e.gpu.peak_flops / v.gpu.peak_flops, PREFILL),
            (e.gpu.bandwidth_bytes_per_s / v.gpu.bandwidth_bytes_per_s, WEIGHTS),
            (rate / v.tokens_per_s, DECODE),
        )
        for i, (ratio, colour) in enumerate(pairs):
            y = 7.7 - 1.2 - i * 1.15
            ratios.append(cv.text(8.0, y, f"{ratio:.2g}×", size=15, color=colour, ha="center", weight="bold"))
    else:
        bars += _metric_rows(
            cv,
            (4.5, 3.4, 11.5, 7.7),
            f.gpu,
            [
                ("peak arithmetic", e.gpu.peak_flops, e.gpu.peak_flops, si(e.gpu.peak_flops, "FLOP/s")),
                (
                    "memory bandwidth",
                    e.gpu.bandwidth_bytes_per_s,
                    e.gpu.bandwidth_bytes_per_s,
                    si(e.gpu.bandwidth_bytes_per_s, "B/s"),
                ),
                ("one user's decode", rate, rate, f"{written_count(rate)} tokens/s"),
            ],
            INK,
        )
        if f.no_predecessor:
            note = "no predecessor known: --versus GPU sets one beside it"
            cv.text(8.0, 3.15, note, size=12, color=MUTED, ha="center")
    share = lg.prefill.attention_share
    prompt = int(lg.inputs["prompt"])
    y0, y1 = 2.4, 2.9
    x0, x1 = 6.2, 15.4
    cv.text(
        0.6, (y0 + y1) / 2, f"a {prompt:,}-token prompt: TTFT {written_time(lg.ttft_s)}", size=13, ha="left"
    )
    cv.rect((x0, y0, x1, y1), facecolor=PREFILL_SOFT, edgecolor=PREFILL)
    attention = cv.rect((x0, y0, x0, y1), facecolor=PREFILL, edgecolor="none")
    cv.text(x1 - 0.1, (y0 + y1) / 2, "matmuls", size=11, color=PREFILL, ha="right")
    att_text = cv.text(x0 + 0.1, (y0 + y1) / 2, "", size=11, color=PAPER, ha="left", weight="bold")

    def update(u: float, t: float) -> None:
        g = _ramp(u, 0.05, 0.4)
        for bar, width, _ in bars:
            bar.set_width(max(width * g, 0.01))
        for text in ratios:
            text.set_alpha(_ramp(u, 0.4, 0.5))
        a = _ramp(u, 0.55, 0.75)
        attention.set_width((x1 - x0) * share * a)
        att_text.set_text(f"attention {share:.0%}" if a > 0.9 else "")

    return update


def scene_measured(cv: Canvas, film: Film) -> Update:
    f, m = film.figures, film.measured
    ax = cv.inset((1.4, 2.7, 10.2, 7.6))
    ax.set_ylabel("time to first token, seconds", fontsize=12, color=MUTED)
    if m is not None:
        groups = m.groups
        labels = [f"{g.prompt_tokens:,} tokens" for g in groups]
        measured = [g.ttft_s for g in groups]
        predicted = [f.measured_prompts[g.prompt_tokens].ttft_s for g in groups]
    else:
        prompts = [f.prefill, f.cache]
        labels = [f"{int(e.inputs['prompt']):,} tokens" for e in prompts]
        measured = []
        predicted = [e.ttft_s for e in prompts]
    n = len(labels)
    top = max([*measured, *predicted]) * 1.3
    ax.set_ylim(0, top)
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_xticks(range(n), labels, fontsize=12)
    width = 0.36 if measured else 0.5
    bars_m = []
    if measured:
        bars_m = list(
            ax.bar([i - width / 2 for i in range(n)], [0] * n, width, color=PREFILL, label="measured")
        )
    offset = width / 2 if measured else 0.0
    bars_p = list(
        ax.bar(
            [i + offset for i in range(n)],
            [0] * n,
            width,
            color=PAPER,
            edgecolor=PREFILL,
            hatch="//",
            label="predicted, ideal",
        ),
    )
    ax.legend(fontsize=12, loc="upper left", frameon=False)
    texts = []
    for i in range(n):
        if measured:
            texts.append(
                ax.text(
                    i - width / 2,
                    measured[i] + top * 0.02,
                    written_time(measured[i]),
                    ha="center",
                    fontsize=12,
                    alpha=0,
                )
            )
        texts.append(
            ax.text(
                i + offset,
                predicted[i] + top * 0.02,
                written_time(predicted[i]),
                ha="center",
                fontsize=12,
                alpha=0,
                color=PREFILL,
            )
        )
    x = 10.9
    if m is not None:
        where = f"on {film.endpoint}" if film.endpoint else "on a live endpoint"
        cv.text(x, 7.1, "Measured", size=20, weight="bold", ha="left")
        cv.text(x, 6.5, where, size=14, ha="left", color=MUTED)
        cv.text(x, 5.9, f"{sum(g.requests for g in m.groups)} requests, one at a time", size=13, ha="left")
        if all(a > b for a, b in zip(measured, predicted, strict=True)):
            gap = "the gap over the bars:\nnetwork, queueing and\nkernels below peak"
            cv.text(x, 4.9, gap, size=13, ha="left", color=PREFILL, linespacing=1.4)
    else:
        cv.text(x, 7.1, "Predicted", size=20, weight="bold", ha="left", color=PREFILL)
        cv.text(
            x,
            6.4,
            "not measured: no\n--measured file given",
            size=13,
            ha="left",
            color=MUTED,
            linespacing=1.4,
        )
        cv.text(x, 5.3, f"{f.gpu} at full speed,\nbefore any network", size=13, ha="left", linespacing=1.4)

    def update(u: float, t: float) -> None:
        g = _ramp(u, 0.05, 0.45)
        for bar, h in zip(bars_m, measured, strict=True):
            bar.set_height(h * g)
        for bar, h in zip(bars_p, predicted, strict=True):
            bar.set_height(h * g)
        for text in texts:
            text.set_alpha(1.0 if g > 0.95 else 0.0)

    return update


def scene_cache(cv: Canvas, film: Film) -> Update:
    f, m = film.figures, film.measured
    c, d = f.cache.decode, f.decode.decode
    long_tokens = int(f.cache.inputs["prompt"])
    ax = cv.inset((1.4, 2.9, 7.2, 7.5))
    ax.set_title("bytes read per decode step", fontsize=13, color=INK)
    ax.set_xticks([0, 1], ["short prompt", f"{long_tokens:,}-token\nprompt"], fontsize=11)
    ax.set_xlim(-0.6, 2.1)
    top = (c.weight_bytes_per_gpu + c.kv_bytes_per_gpu) * 1.25
    ax.set_ylim(0, top)
    ax.yaxis.set_major_formatter(_si_formatter("B"))
    ax.bar(
        [0, 1], [d.weight_bytes_per_gpu, c.weight_bytes_per_gpu], 0.6, color=WEIGHTS_SOFT, edgecolor=WEIGHTS
    )
    kv = ax.bar([1], [c.kv_bytes_per_gpu], 0.6, bottom=[top], color=KV, edgecolor=KV)[0]
    ax.text(0, d.weight_bytes_per_gpu / 2, "weights", ha="center", fontsize=12, color=WEIGHTS)
    kv_text = ax.text(
        1.35,
        c.weight_bytes_per_gpu + c.kv_bytes_per_gpu / 2,
        f"KV cache\n{si(c.kv_bytes_per_gpu, 'B')}\n+{c.kv_bytes_per_gpu / c.weight_bytes_per_gpu:.0%}",
        fontsize=12,
        color=KV,
        va="center",
        ha="left",
        alpha=0.0,
    )
    ax2 = cv.inset((9.2, 2.9, 15.0, 7.5))
    ax2.set_title("decode, tokens a second", fontsize=13, color=INK)
    rates_p = [f.decode.tokens_per_s, f.cache.tokens_per_s]
    names = ["short", f"{long_tokens:,}"]
    has_m = (
        m is not None
        and m.short.decode_tokens_per_s is not None
        and m.long is not None
        and m.long.decode_tokens_per_s is not None
    )
    rates_m: list[float] = []
    if has_m and m is not None and m.long is not None:
        rates_m = [m.short.decode_tokens_per_s or 0.0, m.long.decode_tokens_per_s or 0.0]
    ax2.set_ylim(0, max(rates_p + rates_m) * 1.3)
    ax2.set_xlim(-0.6, 1.6)
    ax2.set_xticks([0, 1], names, fontsize=11)
    w = 0.36 if rates_m else 0.5
    off = w / 2 if rates_m else 0.0
    bars = list(
        ax2.bar(
            [i + off for i in range(2)],
            [0, 0],
            w,
            color=PAPER,
            edgecolor=DECODE,
            hatch="//",
            label="predicted, ideal",
        )
    )
    targets = list(rates_p)
    labels = [(i + off, r, DECODE) for i, r in enumerate(rates_p)]
    if rates_m:
        bars += list(ax2.bar([i - w / 2 for i in range(2)], [0, 0], w, color=DECODE, label="measured"))
        targets += rates_m
        labels += [(i - w / 2, r, INK) for i, r in enumerate(rates_m)]
    ax2.legend(fontsize=11, loc="upper right", frameon=False)
    slower = f"{long_tokens:,}-token prompt: {1 - rates_p[1] / rates_p[0]:.0%} slower predicted"
    if rates_m:
        slower += f", {1 - rates_m[1] / rates_m[0]:.0%} measured"
    cv.text(12.1, 2.2, slower, size=12, color=DECODE, ha="center")
    top2 = max(targets) * 1.3
    values = [
        ax2.text(x, r + top2 * 0.02, written_count(r), ha="center", fontsize=12, color=col, alpha=0)
        for x, r, col in labels
    ]

    def update(u: float, t: float) -> None:
        ride = _ramp(u, 0.1, 0.4)
        kv.set_y(top + (c.weight_bytes_per_gpu - top) * ride)
        kv.set_visible(ride > 0)
        kv_text.set_alpha(_ramp(u, 0.4, 0.45))
        g = _ramp(u, 0.45, 0.75)
        for bar, h in zip(bars, targets, strict=True):
            bar.set_height(h * g)
        for text in values:
            text.set_alpha(1.0 if g > 0.95 else 0.0)

    return update


def _blank_formatter() -> Any:
    from matplotlib.ticker import NullFormatter

    return NullFormatter()


def _plain_formatter() -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda x, _: f"{x:,.0f}" if x >= 1 else f"{x:g}")


def _si_formatter(unit: str) -> Any:
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda x, _: si(x, unit, 2) if x > 0 else "0")


def scene_two_budgets(cv: Canvas, film: Film) -> Update:
    f = film.figures
    left = (0.6, 2.4, 7.7, 7.6)
    right = (8.3, 2.4, 15.4, 7.6)
    items = []
    for box, colour, soft, title, bound, lines in (
        (
            left,
            PREFILL,
            PREFILL_SOFT,
            "Time to first token",
            f"answers to {_answers(f.prefill.prefill.bound)}",
            [
                f"{written_time(f.prefill.ttft_s)} for {plain(PROMPT_TOKENS)} tokens",
                f"{written_time(f.long.ttft_s)} for {int(f.long.inputs['prompt']):,}",
                "→ trim the prompt",
                "→ cache it (prefix caching)",
            ],
        ),
        (
            right,
            DECODE,
            DECODE_SOFT,
            "Tokens per second",
            f"answers to {_answers(f.decode.decode.bound)}",
            [
                f"{written_count(f.decode.tokens_per_s)} a second for one user",
                f"{written_count(f.batched.batch_tokens_per_s)} for {int(f.batched.inputs['batch'])} users",
                "→ more bandwidth, quantised weights",
                "→ batch the users",
            ],
        ),
    ):
        x0, _, _, y1 = box
        card = cv.rect(box, facecolor=soft, edgecolor=colour, linewidth=2, alpha=0.0)
        group = [card]
        group.append(cv.text(x0 + 0.4, y1 - 0.6, title, size=22, weight="bold", color=colour, ha="left"))
        group.append(cv.text(x0 + 0.4, y1 - 1.3, bound, size=15, ha="left"))
        for i, line in enumerate(lines):
            group.append(cv.text(x0 + 0.4, y1 - 2.2 - i * 0.7, line, size=15, ha="left"))
        items.append(group)

    def update(u: float, t: float) -> None:
        for i, group in enumerate(items):
            a = _ramp(u, 0.05 + 0.25 * i, 0.2 + 0.25 * i)
            for artist in group:
                artist.set_alpha(a)

    return update


def _answers(bound: str) -> str:
    return "arithmetic" if bound == "compute" else "memory bandwidth"


SCENES = (
    scene_two_waits,
    scene_prefill,
    scene_decode,
    scene_roofline,
    scene_batching,
    scene_two_gpus,
    scene_measured,
    scene_cache,
    scene_two_budgets,
)


class Frames:
    """The film's frames in order: `frame(t)` draws the moment t seconds in."""

    def __init__(self, film: Film, width_px: int, height_px: int) -> None:
        self.film = film
        self.cv = Canvas(width_px, height_px)
        self.index = -1
        self.updates: list[Update] = []

    def beat_at(self, t: float) -> int:
        for i, (_, end) in enumerate(self.film.spans):
            if t < end:
                return i
        return len(self.film.spans) - 1

    def frame(self, t: float) -> memoryview:
        i = self.beat_at(t)
        if i != self.index:
            self.cv.reset()
            self.updates = [chrome(self.cv, self.film, i), SCENES[i](self.cv, self.film)]
            self.index = i
        start, end = self.film.spans[i]
        u = (t - start) / (end - start)
        for update in self.updates:
            update(u, t - start)
        return self.cv.rgba()
