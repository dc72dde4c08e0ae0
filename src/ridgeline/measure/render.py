"""Rich output for measure, compare, fit and probe, and the live progress line.
Rendering only: every number arrives computed."""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from ridgeline._format import seconds, si
from ridgeline.measure.compare import Comparison
from ridgeline.measure.fit import Fit
from ridgeline.measure.probe import Probe
from ridgeline.measure.records import kinds_text
from ridgeline.measure.workload import Point

console = Console(highlight=False)
if not console.is_terminal:
    console.width = 120  # files and pipes: room for every column
err = Console(stderr=True, highlight=False)
if not err.is_terminal:
    err.soft_wrap = True  # a log gets each progress line and warning whole, not wrapped at 80


def _s(value: float | None) -> str:
    return "–" if value is None else seconds(value)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:+.0%}" if abs(value) < 10 else f"{value:+.1f}x"


class Progress:
    """Done, errors, current p50 TTFT and tokens/s, live on stderr when it is a terminal;
    otherwise one line per load point."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.written = 0  # records written by this run, every point
        self.live: Live | None = None
        self.reset(Point(0), 0, 0)

    def reset(self, point: Point, index: int, todo: int) -> None:
        self.point, self.index, self.todo = point, index, todo
        self.done = self.errors = self.tokens = 0
        self.kinds: Counter[str] = Counter()
        self.ttfts: list[float] = []
        self.first_s: float | None = None
        self.last_s = 0.0

    def note(self, text: str) -> None:
        if not self.quiet or text.startswith("warning"):
            err.print(escape(text))

    def on_point(self, index: int, point: Point, todo: int) -> None:
        self.flush_line()
        self.reset(point, index, todo)
        if not self.quiet and err.is_terminal and self.live is None:
            self.live = Live(self.line(), console=err, refresh_per_second=4, transient=False)
            self.live.start()

    def on_record(self, rec: dict[str, Any]) -> None:
        self.done += 1
        self.written += 1
        if rec.get("error"):
            self.errors += 1
            self.kinds[str(rec.get("error_kind") or "error")] += 1
        else:
            self.ttfts.append(rec["ttft_s"])
            self.tokens += int(rec.get("output_tokens") or 0)
        send = rec.get("send_s") or 0.0
        self.first_s = send if self.first_s is None else min(self.first_s, send)
        self.last_s = max(self.last_s, send + (rec.get("e2e_s") or 0.0))
        if self.live:
            self.live.update(self.line())

    def line(self) -> Text:
        p50 = statistics.median(self.ttfts) if self.ttfts else None
        span = self.last_s - (self.first_s or 0.0)
        rate = self.tokens / span if span > 0 else 0.0
        kinds = f" ({kinds_text(dict(self.kinds))})" if self.kinds else ""
        return Text(
            f"[{self.index + 1}] {self.point.label}: done {self.done}/{self.todo} · "
            f"errors {self.errors}{kinds} · p50 TTFT {_s(p50)} · {rate:,.1f} tokens/s"
        )

    def flush_line(self) -> None:
        if self.todo and not self.quiet and self.live is None:
            err.print(self.line())

    def stop(self) -> None:
        if self.live:
            self.live.stop()
            self.live = None
        else:
            self.flush_line()
        self.todo = 0


def measure(data: dict[str, Any]) -> None:
    if not data["overall"]["requests"]:
        console.print(f"no requests recorded; records: {escape(data['out'])}")
        return
    t = Table(show_edge=False)
    for col in (
        "prompt",
        "load",
        "n",
        "errors",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "ITL p99",
        "tok/s",
    ):
        t.add_column(col, justify="right")
    for row in data["points"]:
        s = row["summary"]
        rate = row["rate_per_s"]
        t.add_row(
            f"{row['prompt_tokens']:,}",
            f"C={row['concurrency']}" if rate is None else f"{rate:g}/s",
            str(s["requests"]),
            str(s["errors"]),
            _s(s["ttft_s"]["p50"]),
            _s(s["ttft_s"]["p99"]),
            _s(s["tpot_s"]["p50"]),
            _s(s["tpot_s"]["p99"]),
            _s(s["itl_s"]["p99"]),
            f"{s['throughput_tokens_per_s']:,.1f}",
        )
    console.print(t)
    o = data["overall"]
    console.print(
        f"{o['completed']} of {o['requests']} requests succeeded; output tokens from "
        + ", ".join(f"{k} ({v})" for k, v in sorted(o["tokens_source"].items()))
    )
    if o["error_kinds"]:
        console.print(
            f"[red]errors {o['errors']}[/] ({escape(kinds_text(o['error_kinds']))}): "
            "see the `error` field of each record"
        )
    if o["short_of_max_tokens"]:
        console.print(f"{o['short_of_max_tokens']} requests stopped before max_tokens (EOS not ignored?)")
    console.print(f"records: {escape(data['out'])} ({data['written']} written by this run)")


def compare(c: Comparison) -> None:
    console.print(f"[bold]{escape(c.model)}[/] on [bold]{escape(c.gpu)}[/]: measured against predicted")
    t = Table(show_edge=False)
    cols = ("prompt", "C", "n", "TTFT", "pred", "gap", "TPOT", "pred", "gap", "of ceiling", "bandwidth")
    for col in cols:
        t.add_column(col, justify="right")
    for r in c.rows:
        t.add_row(
            f"{r.prompt_tokens:,}",
            str(r.concurrency),
            str(r.n),
            seconds(r.ttft_s),
            seconds(r.ttft_pred_s),
            _pct(r.ttft_s / r.ttft_pred_s - 1),
            _s(r.tpot_s),
            seconds(r.tpot_pred_s),
            _pct(r.tpot_s / r.tpot_pred_s - 1) if r.tpot_s else "–",
            "–" if r.ceiling_fraction is None else f"{r.ceiling_fraction:.0%}",
            "–"
            if r.effective_bandwidth_bytes_per_s is None
            else si(r.effective_bandwidth_bytes_per_s, "B/s"),
        )
    console.print(t)
    if c.ttft_offset_s is not None:
        console.print(
            f"fixed TTFT offset (intercept): [bold]{seconds(max(c.ttft_offset_s, 0.0))}[/]"
            + (f" (fitted {c.ttft_offset_s:+.3g} s)" if c.ttft_offset_s < 0 else "")
            + f"; prefill runs at {c.prefill_slope or 0:.2f}x the predicted time per token"
        )
    if c.ceiling_fraction is not None:
        console.print(
            f"decode reaches [bold]{c.ceiling_fraction:.0%}[/] of the roofline ceiling (shortest prompt)"
        )
    if c.kv_slowdown is not None:
        console.print(
            f"KV-cache slowdown, longest vs shortest prompt: decode [bold]{c.kv_slowdown:.0%}[/] slower "
            f"measured, {c.kv_slowdown_pred or 0:.0%} predicted, "
            f"for {_pct(c.kv_extra_bytes_fraction)} bytes per step"
        )
    if c.inside_band is not None:
        held = ", ".join(
            f"{key.removesuffix('_s').upper()} {inside} of {rows}"
            for key, (inside, rows) in c.inside_band.items()
        )
        console.print(
            f"inside the engine's 80% band (published runs it was not fitted to): {held} load points"
            + (" (TTFT at concurrency 1 only)" if any(r.concurrency > 1 for r in c.rows) else "")
        )
    for note in c.notes:
        console.print(f"[dim]note:[/] {escape(note)}")


def fit(f: Fit, path: str | None, profile: bool = False) -> None:
    u = f.uncertainty

    def pm(value: float, sd: float | None, fmt: Any) -> str:
        return f"{fmt(value)} ± {fmt(sd)}" if sd is not None else fmt(value)

    t = Table(show_edge=False)
    for col in ("parameter", "fitted", "of the accelerator", "status"):
        t.add_column(col, justify="left" if col in ("parameter", "status") else "right")

    def status(name: str) -> str:
        return "held at preset" if name in f.held else "fitted"

    t.add_row(
        "effective FLOP/s",
        pm(f.effective_flops_per_s, u["effective_flops_per_s"], lambda v: si(v, "FLOP/s")),
        f"{f.compute_eff:.0%} of peak",
        status("seconds_per_flop"),
    )
    t.add_row(
        "effective bandwidth",
        pm(f.effective_bandwidth_bytes_per_s, u["effective_bandwidth_bytes_per_s"], lambda v: si(v, "B/s")),
        f"{f.bandwidth_eff:.0%} of peak",
        status("seconds_per_byte"),
    )
    t.add_row(
        "per-step overhead",
        pm(f.step_overhead_s, u["step_overhead_s"], seconds),
        "",
        status("step_overhead_s"),
    )
    t.add_row(
        "fixed TTFT offset", pm(f.ttft_offset_s, u["ttft_offset_s"], seconds), "", status("ttft_offset_s")
    )
    console.print(
        f"[bold]{escape(f.model)}[/] on [bold]{escape(f.gpu)}[/]: "
        f"{f.rows} observations from {f.points} load points"
    )
    console.print(t)
    for label, key in (("TTFT", "ttft"), ("TPOT", "tpot")):
        b, a = f.error_before[f"{key}_mean_abs"], f.error_after[f"{key}_mean_abs"]
        if b is not None and a is not None:
            console.print(
                f"{label} error, mean |pred/meas - 1|: before [bold]{b:.1%}[/], after [bold]{a:.1%}[/]"
            )
    for w in f.warnings:  # part of the report: stderr keeps to one line, for errors
        console.print(f"[yellow]warning:[/] {escape(w)}")
    if path and profile:
        console.print(
            f"engine profile written to {escape(path)}: pass it to `estimate`, `simulate` or `plan` "
            f"with --engine {escape(path)}"
        )
    elif path:
        console.print(
            f"calibration written to {escape(path)}: pass it to `estimate` or `simulate` with --calibration"
        )


def probe(p: Probe, path: str | None) -> None:
    console.print(
        f"[bold]{escape(p.name)}[/]: fp32 matmul {si(p.peak_flops_fp32, 'FLOP/s')}, streaming bandwidth "
        f"{si(p.bandwidth_bytes_per_s, 'B/s')}, ridge {p.ridge:,.1f} FLOPs/byte, "
        f"memory {si(p.memory_bytes, 'B')}"
    )
    if path:
        console.print(f"saved to {escape(path)}: `ridgeline estimate --gpu {escape(p.name)}` now uses it")
