"""Rich tables for `simulate` and `plan`. Rendering only: every number comes in computed."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from ridgeline._format import rate, seconds, server_busy
from ridgeline.simulate.workload import Workload

if TYPE_CHECKING:
    from ridgeline.simulate.run import Summary

console = Console(highlight=False)
ROWS = (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("ITL", "itl_s"), ("E2E", "e2e_s"), ("queue", "queue_s"))


def _s(value: float | None) -> str:
    return "–" if value is None else seconds(value)


def _interval(ci: tuple[float, float | None] | None) -> str:
    """A p99's interval; too few requests to bound it above leave it open."""
    if ci is None:
        return "–"
    return f"≥ {_s(ci[0])}" if ci[1] is None else f"{_s(ci[0])} – {_s(ci[1])}"


def _lengths(d: dict[str, Any]) -> str:
    if d["kind"] == "fixed":
        return f"{d['mean']:,}"
    if d["kind"] == "trace":
        return f"{d['mean']:,} on average"
    return f"{d['kind']} around {d['mean']:,}"


def simulation(s: Summary, out: str | None = None) -> None:
    d, w, u = s.deployment, s.workload, s.utilisation
    load = (
        f"closed loop, {w['concurrency']} clients"
        if w["arrival"] == "closed"
        else "trace"
        if w["arrival"] == "trace"
        else f"{w['arrival']} at {w['rate_per_s']:g}/s"
    )
    console.print(
        f"[bold]{d['model']}[/] on {d['replicas']} replica{'s' if d['replicas'] > 1 else ''} of "
        f"{d['gpus_per_replica']}x [bold]{d['gpu']}[/] "
        f"({d['weights']}{', attention data-parallel' if d.get('dp_attention') else ''}) · {load} · "
        f"{s.requests:,} requests · prompt {_lengths(w['prompt'])}, "
        f"output {_lengths(w['output'])} · seed {w['seed']}"
    )
    t = Table(show_edge=False)
    for col in ("", "p50", "p90", "p99", "p99 95% CI", "mean", "n"):
        t.add_column(col, justify="left" if not col else "right")
    for label, key in ROWS:
        p = s.latency(key)
        ci = p.p99_ci95
        t.add_row(
            label,
            _s(p.p50),
            _s(p.p90),
            f"[bold]{_s(p.p99)}[/]",
            _interval(ci),
            _s(p.mean),
            f"{p.n:,}",
        )
    console.print(t)
    console.print(
        f"{rate(s.throughput_tokens_per_s)} output tokens/s ({rate(s.input_tokens_per_s)} input) · "
        f"{s.requests_per_s:.3g} requests/s over {s.duration_s:.4g} s · "
        f"preemptions {s.preemptions:,}"
    )
    console.print(
        f"batch mean {u.mean_batch:.1f} (max {u.max_batch}) · KV cache {u.kv_utilisation_mean:.0%} "
        f"mean, {u.kv_utilisation_peak:.0%} peak of {d['kv_tokens']:,} tokens · MFU {u.mfu:.0%} · "
        f"MBU {u.mbu:.0%} · {u.steps:,} steps"
    )
    band(s.uncertainty)
    over_time(u.timeseries)
    slo = s.slo
    if slo:
        parts = ", ".join(
            f"{k.replace('_s', '').upper()} < {seconds(getattr(slo, k))}: {'met' if ok else '[red]missed[/]'}"
            for k, ok in slo.p99_met.items()
        )
        console.print(
            f"SLO (p99) {parts} · goodput {s.goodput_requests_per_s:.3g} requests/s · "
            f"attainment {s.slo_attainment:.1%}"
        )
    for note in s.warnings:
        style = "red" if note.startswith("overloaded") else "yellow"
        console.print(f"[{style}]warning:[/] {note}")
    if out:
        console.print(f"records: {out}")


def _between(pair: list[float] | None) -> str:
    return "–" if pair is None else f"{_s(pair[0])}–{_s(pair[1])}"


def band(u: dict[str, Any] | None) -> None:
    """The engine profile's band under load: the run's medians and throughput at each end."""
    if u is None:
        return
    lo, hi = u["time_ratio"]
    served = u["throughput_tokens_per_s"]
    console.print(
        f"80% band ({u['profile']} under load{server_busy(u['server_share'])}: published runs took "
        f"{lo:.2f}–{hi:.2f}x the predicted "
        f"time; the run at each end): TTFT p50 {_between(u['ttft_p50_s'])} · "
        f"TPOT p50 {_between(u['tpot_p50_s'])} · "
        f"E2E p50 {_between(u['e2e_p50_s'])}"
        + ("" if served is None else f" · {rate(served[0])}–{rate(served[1])} output tokens/s")
    )
    _unmeasured(u)


def _unmeasured(u: dict[str, Any]) -> None:
    """The terms a band's prediction rests on that no published run moved, or one source's
    runs alone, as `estimate` says."""
    from ridgeline.explain import evidence

    for line in evidence(u["profile"], u["unmeasured"], u["one_source"]):
        console.print(f"[yellow]note:[/] {line}")


def _gpus(counts: list[int]) -> str:
    lo, hi = min(counts), max(counts)
    return f"{lo:,} GPU{'' if hi == 1 else 's'}" if lo == hi else f"{lo:,}–{hi:,} GPUs"


def plan_band(p: dict[str, Any]) -> None:
    """A plan at its engine's band's ends: rate, GPUs and cost from the fast end to the slow."""
    u = p["uncertainty"]
    if u is None:
        return
    lo, hi = u["time_ratio"]
    rates, gpus, cost = u["max_rate_per_replica"], u["gpus"], u["usd_per_million_tokens"]
    head = (
        f"{p['deployment']['gpu']}: 80% band ({u['profile']} under load{server_busy(u['server_share'])}, "
        f"{lo:.2f}–{hi:.2f}x the "
        "predicted time): "
    )
    if u["fast_end"] is not None:  # no plan at the fast end: why, at each end that has none
        body = "[yellow]" + "; ".join(w for w in (u["fast_end"], u["slow_end"]) if w) + "[/]"
    elif u["slow_end"] is not None:
        body = (
            f"{rates[1]:.3g}/s per replica, {_gpus(gpus[:1])}, ${cost[0]:.3f} per million tokens "
            f"at the fast end; [yellow]{u['slow_end']}[/]"
        )
    else:
        body = (
            f"{rates[0]:.3g}–{rates[1]:.3g}/s per replica, {_gpus(gpus)}, "
            f"${cost[0]:.3f}–{cost[1]:.3f} per million tokens"
        )
    console.print(head + body)
    _unmeasured(u)


def over_time(ts: dict[str, list[float]], rows: int = 6) -> None:
    """The run in `rows` equal spans: batch while busy, queue, KV cache, MFU, MBU."""
    bins = len(ts["t_s"])
    if bins < rows:
        return
    t = Table(show_edge=False, title="over time", title_justify="left")
    for col in ("from", "busy", "batch", "queue", "KV cache", "MFU", "MBU"):
        t.add_column(col, justify="right")
    size = bins // rows
    for r in range(rows):
        span = range(r * size, bins if r == rows - 1 else (r + 1) * size)
        busy = [ts["busy"][i] for i in span]
        weight = sum(busy)

        def mean(key: str, span: range = span) -> float:
            return sum(ts[key][i] for i in span) / len(span)

        batch = sum(ts["batch"][i] * b for i, b in zip(span, busy, strict=True)) / weight if weight else 0.0
        t.add_row(
            seconds(ts["t_s"][span[0]]) if span[0] else "0 s",
            f"{mean('busy'):.0%}",
            f"{batch:.1f}",
            f"{mean('waiting'):.1f}",
            f"{mean('kv_utilisation'):.0%}",
            f"{mean('mfu'):.0%}",
            f"{mean('mbu'):.0%}",
        )
    console.print(t)


def _span(sizes: Iterable[int]) -> str:
    lo, hi = min(sizes := list(sizes)), max(sizes)
    return f"{lo:,}" if lo == hi else f"{lo:,}-{hi:,}"


def plans(data: dict[str, Any], w: Workload) -> None:
    slo = data["slo"]
    limits = ", ".join(
        f"{k.replace('_s', '').upper()} < {seconds(v)}" for k, v in slo.items() if v is not None
    )
    first = data["plans"][0]
    screens = _span(p["confidence"]["screen_requests"] for p in data["plans"])
    runs = _span(p["requests_per_run"] for p in data["plans"])
    console.print(
        f"[bold]{first['deployment']['model']}[/] · prompt {w.prompt.mean:,}, output {w.output.mean:,} "
        f"({w.prompt.kind}/{w.output.kind}) · {w.arrival} arrivals · SLO p99 {limits or 'none (capacity)'} · "
        f"{first['seeds']} seeds x {screens} requests, confirmed in runs of {runs}"
    )
    t = Table(show_edge=False)
    for col in ("deployment", "rate/replica", "p99 TTFT", "p99 TPOT", "GPUs", "$/M tokens"):
        t.add_column(col, justify="left" if col == "deployment" else "right")
    for p in data["plans"]:
        d, a = p["deployment"], p["at_max"]
        t.add_row(
            f"{d['gpu']}:{d['tp']}:{d['weights']}" + (":dp" if d.get("dp_attention") else ""),
            f"{p['max_rate_per_replica']:.3g}/s",
            _s(a["ttft_p99_s"]),
            _s(a["tpot_p99_s"]),
            f"{p['gpus']:,}",
            f"${p['usd_per_million_tokens']:.3f}",
        )
    console.print(t)
    rate = data["target_rate_per_s"]
    d = first["deployment"]
    need = f"{rate:g} requests/s needs" if rate is not None else "one replica at its maximum rate uses"
    console.print(
        f"{need} [bold]{first['replicas']} x {d['gpus_per_replica']} = {first['gpus']} {d['gpu']}[/] "
        f"(${first['usd_per_hour']:.2f}/hour): [bold]${first['usd_per_million_tokens']:.3f}[/] "
        f"per million tokens (input + output), ${first['usd_per_million_output_tokens']:.3f} "
        "per million output tokens"
    )
    for p in data["plans"]:
        c, runs = p["confidence"], p["confidence"]["confirm_runs"]
        console.print(
            f"{p['deployment']['gpu']}: {p['max_rate_per_replica']:.3g}/s met the SLO in "
            f"{c['confirm_met']} of {runs} run{'s' if runs > 1 else ''} of {c['confirm_requests']:,} "
            f"requests on fresh seeds; the seeds' screened rates vary by {c['seed_rate_sd']:.1%} (sd)"
        )
    for p in data["plans"]:
        plan_band(p)
    for p in data["plans"]:
        for note in p["warnings"]:
            console.print(
                f"[yellow]warning:[/] {p['deployment']['gpu']}: at {p['max_rate_per_replica']:.3g}/s, {note}"
            )
    for p in data["plans"]:
        if not p["at_max"]["met"]:
            console.print(
                f"[yellow]warning:[/] {p['deployment']['gpu']}: the check run at "
                f"{p['max_rate_per_replica']:.3g}/s missed the SLO; raise --requests or --seeds "
                "for a steadier estimate"
            )
