"""Rich tables for `search`. Rendering only: every number comes in computed."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ridgeline._format import seconds, server_busy
from ridgeline.search.run import SearchResult

console = Console(highlight=False)
FRONT_ROWS = 15  # the table's; --json and the results folder hold every one


def _s(value: float | None) -> str:
    return "–" if value is None else seconds(value)


def deployment(row: dict[str, Any]) -> str:
    par = (
        f"x{row['tp']}"
        + (f" pp{row['pp']}" if row["pp"] > 1 else "")
        + (f" ep{row['ep']}" if row["ep"] > 1 else "")
        + (" dp" if row.get("dp_attention") else "")
    )
    return f"{row['gpu']} {par} {row['weights']}/{row['maths']}/{row['kv_dtype']}"


def _end(end: dict[str, Any]) -> str:
    if end["status"] == "error":
        return f"[yellow]is refused[/] ({escape(str(end['error']))})"
    verdict = "meets the SLO" if end["status"] == "met" else "[red]misses the SLO[/]"
    return f"{verdict} (p99 TTFT {_s(end['ttft_p99_s'])}, TPOT {_s(end['tpot_p99_s'])})"


def band(b: dict[str, Any]) -> None:
    """The cheapest point again at each end of its engine's band under load."""
    lo, hi = b["time_ratio"]
    console.print(
        f"the cheapest point at the ends of {b['profile']}'s 80% band under load"
        f"{server_busy(b['server_share'])} ({lo:.2f}–{hi:.2f}x the "
        f"predicted time): fast, it {_end(b['fast'])}; slow, it {_end(b['slow'])}"
    )


def _lengths(d: dict[str, Any]) -> str:
    return f"{d['mean']:,}" if d["kind"] == "fixed" else f"{d['kind']} around {d['mean']:,}"


def search(r: SearchResult, plot: str | None = None) -> None:
    w, st = r.workload, r.stages
    load = "trace" if w["arrival"] == "trace" else f"{w['arrival']} at {w['rate_per_s']:g}/s"
    targets = ", ".join(
        f"{k.removesuffix('_s').upper()} < {seconds(v)}" for k, v in r.slo.items() if k.endswith("_s") and v
    )
    verdict = f"goodput >= {r.slo['goodput']:.0%} within {targets}" if r.slo["goodput"] else f"p99 {targets}"
    per_point = (
        f"{w['requests_per_point']:,} requests a point" if w["requests_per_point"] else "the trace a point"
    )
    console.print(
        f"[bold]{r.model}[/] · {load} (fleet) · prompt {_lengths(w['prompt'])}, output "
        f"{_lengths(w['output'])} · SLO {verdict} · {per_point}"
    )
    console.print(f"space: {escape(_space(r.space))}")
    t = Table(show_edge=False)
    for col in ("stage", "points", "removed", "why", "time"):
        t.add_column(col, justify="left" if col in ("stage", "why") else "right")
    where = f"{r.executor['workers']} worker(s)" if r.executor["kind"] == "local" else "Ray"
    t.add_row("space", f"{st.points:,}", "", "", "")
    t.add_row(
        "prune",
        f"{st.survivors:,}",
        f"{st.invalid + st.memory + st.latency:,}",
        f"{st.invalid:,} do not build · {st.memory:,} do not fit · {st.latency:,} miss a target alone",
        seconds(st.prune_s),
    )
    t.add_row(
        "simulate",
        f"{st.met:,}",
        f"{st.missed + st.dominated + st.errors:,}",
        f"{st.missed:,} missed the SLO · {st.dominated:,} beaten by a cheaper point · {st.errors:,} refused"
        + (f" · {st.resumed:,} resumed" if st.resumed else ""),
        f"{seconds(st.simulate_s)} on {where}",
    )
    if st.screened or st.full:
        t.add_row("", "", "", f"{st.full:,} run whole · {st.screened:,} screened", "")
    console.print(t)
    for kind, note in r.notes.items():
        console.print(f"[dim]e.g. {kind}: {escape(note)}[/]")
    best = r.cheapest
    if best is not None:
        console.print(
            f"cheapest inside the SLO: [bold]{best['replicas']} x {escape(deployment(best))}[/] on "
            f"[bold]{best['engine']}[/] ({best['gpus']} GPUs, ${best['usd_per_hour']:.2f}/hour): "
            f"[bold]${best['usd_per_million_tokens']:.4f}[/] per million tokens · p99 TTFT "
            f"{_s(best['ttft_p99_s'])}, TPOT {_s(best['tpot_p99_s'])}"
        )
    if r.cheapest_band is not None:
        band(r.cheapest_band)
    if r.front:
        of = "meeting the SLO" if r.front_of == "met" else "of every simulated point (none met the SLO)"
        front(r.front, f"Pareto front {of}: $ per million tokens against p99 TTFT and TPOT")
    if r.launch is not None:
        console.print(f"launch ({r.launch['engine']}, one replica):")
        console.print(f"  {escape(r.launch['command'])}", soft_wrap=True)
        for name, text in r.launch["files"].items():
            console.print(f"  {name}:")
            for line in text.splitlines():
                console.print(f"    {escape(line)}")
        for note in r.launch["assumptions"]:
            console.print(f"  [dim]assumes: {escape(note)}[/]")
    for note in r.warnings:
        console.print(f"[yellow]warning:[/] {escape(note)}")
    extra = f" · plot: {escape(plot)}" if plot else ""
    decided = st.met + st.missed + st.dominated + st.errors
    console.print(f"results: {escape(r.out)} ({decided:,} points){extra}")


def front(rows: list[dict[str, Any]], title: str) -> None:
    t = Table(show_edge=False, title=title, title_justify="left")
    whole = any(row.get("chunked_prefill") is False for row in rows[:FRONT_ROWS])  # a column only then
    for col in (
        "deployment",
        "engine",
        "seqs",
        "tokens",
        *(("chunked",) if whole else ()),
        "replicas",
        "GPUs",
        "p99 TTFT",
        "p99 TPOT",
        "$/M tokens",
    ):
        t.add_column(col, justify="left" if col in ("deployment", "engine") else "right")
    for row in rows[:FRONT_ROWS]:
        t.add_row(
            escape(deployment(row)),
            row["engine"],
            f"{row['max_num_seqs']:,}",
            f"{row['max_num_batched_tokens']:,}",
            *(("on" if row.get("chunked_prefill") is not False else "off",) if whole else ()),
            f"{row['replicas']}",
            f"{row['gpus']:,}",
            _s(row["ttft_p99_s"]),
            _s(row["tpot_p99_s"]),
            f"${row['usd_per_million_tokens']:.4f}",
        )
    console.print(t)
    if len(rows) > FRONT_ROWS:
        console.print(f"[dim]… {len(rows) - FRONT_ROWS:,} more on the front (--json lists them all)[/]")


def _space(space: dict[str, Any]) -> str:
    parts = []
    for name in ("gpu", "tp", "weights", "maths", "kv_dtype", "engine"):
        values = space[name]
        parts.append(f"{len(values)} {name}" if len(values) > 3 else f"{name} {','.join(map(str, values))}")
    for name in ("pp", "ep", "dp_attention", "max_num_seqs", "max_num_batched_tokens", "chunked_prefill"):
        if space.get(name, [1]) not in ([1], ["engine"], ["off"]):
            parts.append(f"{name} {','.join(map(str, space[name]))}")
    reps = space["replicas"]
    parts.append(f"replicas {reps if isinstance(reps, str) else ','.join(map(str, reps))}")
    return " · ".join(parts)
