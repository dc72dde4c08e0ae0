"""Rich tables for the command line. Rendering only: every number comes in computed."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from ridgeline._format import rate, seconds, si
from ridgeline.hardware import FALLBACK
from ridgeline.points import RooflinePoints
from ridgeline.predict import Estimate

console = Console(highlight=False)
if not console.is_terminal:  # pipes and files: wide enough that tables keep their names whole
    console.width = 100


def _band(e: Estimate, key: str) -> str:
    """` (42–57 ms)`: the engine profile's 80% band, in the value's own unit."""
    if not e.uncertainty:
        return ""
    lo, hi = e.uncertainty[key]
    a, b = seconds(lo).split(), seconds(hi).split()
    return f" ({a[0]}–{b[0]} {b[1]})" if a[1] == b[1] else f" ({seconds(lo)}–{seconds(hi)})"


def estimate(e: Estimate) -> None:
    i = e.inputs
    console.print(
        f"[bold]{e.model.name}[/] on {i['tp'] * i['pp']}x [bold]{e.gpu.name}[/] · "
        f"{i['weights']} weights, {i['maths']} maths, {i['kv_dtype']} KV\n"
        f"prompt {i['prompt']:,}, "
        f"output {i['output']:,}, batch {i['batch']} · "
        + (f"engine {i['engine']}" if i.get("engine") else f"preset {i['preset']}")
    )
    t = Table(title=None, show_edge=False)
    for col in ("phase", "FLOPs", "attention", "bytes", "FLOPs/byte", "bound", "time"):
        t.add_column(col, justify="left" if col in ("phase", "bound") else "right")
    for name, p in (("prefill", e.prefill), ("decode (1st step)", e.decode)):
        t.add_row(
            name,
            si(p.flops),
            f"{p.attention_share:.0%}",
            si(p.bytes, "B"),
            f"{p.intensity:,.1f}",
            p.waits_on,  # the roofline's bound, or "host" where the engine's CPU work outlasts the GPU's
            seconds(p.time_s),
        )
    console.print(t)
    console.print(
        f"TTFT [bold]{seconds(e.ttft_s)}[/]{_band(e, 'ttft_s')} · TPOT [bold]{seconds(e.tpot_s)}[/]"
        f"{_band(e, 'tpot_s')} · total [bold]{seconds(e.total_s)}[/]{_band(e, 'total_s')} · "
        f"decode share [bold]{e.decode_share:.0%}[/]"
    )
    console.print(
        f"{rate(e.tokens_per_s)} tokens/s per sequence, {rate(e.batch_tokens_per_s)} in all · "
        f"ridge {e.ridge:,.0f} FLOPs/byte"
    )
    m, g = e.memory, e.memory.per_gpu
    verdict = (
        "[green]fits[/]" if m.fits else f"[red]does not fit[/] (short {si(m.shortfall_bytes, 'B')} per GPU)"
    )
    console.print(
        f"memory per GPU: weights {si(g.weight_bytes, 'B')} + KV {si(g.kv_bytes, 'B')} + activations "
        f"{si(g.activation_bytes, 'B')} + overhead {si(g.overhead_bytes, 'B')}"
    )
    console.print(
        f"  = {si(g.total_bytes, 'B')} of {si(g.usable_bytes, 'B')} usable: {verdict}; "
        f"room for {m.max_batch:,} sequences of this length"
    )
    if m.suggestions:
        opts = "; ".join(
            f"{s.weights} on {s.gpus} GPU(s) (TP {s.tp}, room for {s.max_batch})" for s in m.suggestions
        )
        console.print(f"plans that serve: {opts}")
    c = e.cost
    console.print(
        f"cost at ${c.price_per_gpu_hour_usd:.2f}/GPU-hour: "
        f"${c.usd_per_million_input_tokens:,.3f} per M input tokens, "
        f"${c.usd_per_million_output_tokens:,.2f} per M output tokens"
    )
    for line in e.explain:
        console.print(f"[dim]why:[/] {line}")


def roofline(r: RooflinePoints) -> None:
    console.print(
        f"[bold]{r.gpu}[/] ({r.maths}): peak {si(r.peak_flops, 'FLOP/s')}, bandwidth "
        f"{si(r.bandwidth_bytes_per_s, 'B/s')}, ridge [bold]{r.ridge:,.0f}[/] FLOPs/byte; "
        f"a pass is compute-bound from {r.compute_bound_tokens:,} tokens"
    )
    t = Table(show_edge=False)
    for col in ("point", "FLOPs/byte", "attainable", "bound", "time"):
        t.add_column(col, justify="left" if col in ("point", "bound") else "right")
    rows = (
        (f"prefill {r.prefill_tokens:,} tokens", r.prefill),
        (f"decode batch {r.decode_batch}, context {r.decode_context:,}", r.decode),
    )
    for label, p in rows:
        t.add_row(label, f"{p.intensity:,.1f}", si(p.attainable_flops, "FLOP/s"), p.bound, seconds(p.time_s))
    console.print(t)


def name_column(t: Table, names: Any) -> None:
    """The column a user types back: never cut short, whatever the terminal's width;
    the other columns wrap instead."""
    t.add_column("name", no_wrap=True, min_width=max((len(n) for n in names), default=4))


def gpus(entries: dict[str, dict[str, Any]]) -> None:
    t = Table(show_edge=False)
    name_column(t, entries)
    for col in ("bf16", "fp8", "bandwidth", "memory", "interconnect", "ridge", "$/h"):
        t.add_column(col, justify="right")
    marked = False
    for name, a in entries.items():
        peaks = a["peak_flops"]
        fp8 = peaks.get("fp8")
        # the rate bf16 maths runs at (the core's fallback): a part without bf16 (V100, T4)
        # runs it at its fp16 rate, marked; a part with neither (a CPU's fp32) shows none
        dtype = next((d for d in ("bf16", *FALLBACK["bf16"]) if d in peaks), None)
        marked |= dtype not in (None, "bf16")
        half = "–" if dtype is None else si(peaks[dtype], "FLOP/s") + ("" if dtype == "bf16" else "*")
        t.add_row(
            name,
            half,
            si(fp8, "FLOP/s") if fp8 else "–",
            si(a["bandwidth_bytes_per_s"], "B/s"),
            si(a["memory_bytes"], "B"),
            si(a["interconnect_bytes_per_s"], "B/s"),
            f"{a['ridge']:,.0f}",
            f"{a['price_per_hour_usd']:.2f}",
        )
    if marked:
        t.caption = "* no bf16: its fp16 rate, which bf16 maths runs at"
    console.print(t)


def models(rows: list[dict[str, Any]]) -> None:
    t = Table(show_edge=False)
    name_column(t, [r["name"] for r in rows])
    for col in (
        "family",
        "layers",
        "hidden",
        "heads/KV",
        "params",
        "active",
        "weights",
        "KV/token",
        "context",
    ):
        t.add_column(col, justify="left" if col == "family" else "right")
    for r in rows:
        t.add_row(
            r["name"],
            r["family"],
            str(r["layers"]),
            f"{r['hidden']:,}",
            f"{r['heads']}/{r['kv_heads']}",
            si(r["parameters"]),
            si(r["active_parameters"]),
            si(r["weight_bytes"], "B"),
            f"{r['kv_bytes_per_token']:,.0f} B",
            f"{r['max_context']:,}",
        )
    console.print(t)


def ops(data: dict[str, Any]) -> None:
    for phase, view in data.items():
        t = Table(title=f"{phase}: per-operator ledger", show_edge=False, title_justify="left")
        for col in ("operator", "FLOPs", "bytes", "FLOPs/byte", "bound", "time", "share"):
            t.add_column(col, justify="left" if col in ("operator", "bound") else "right")
        total = sum(r["time_s"] for r in view["rows"]) or 1.0
        for r in view["rows"]:
            t.add_row(
                r["name"],
                si(r["flops"]),
                si(r["bytes"], "B"),
                f"{r['intensity']:,.1f}",
                r["bound"],
                seconds(r["time_s"]),
                f"{r['time_s'] / total:.0%}",
            )
        console.print(t)
        host = f", the host's {seconds(view['host_s'])} outlasting them" if view["host_bound"] else ""
        console.print(
            f"{phase}: per-op method {seconds(view['per_op_time_s'])} "
            f"(rows + {seconds(view['launch_overhead_s'])} launch{host}) · "
            f"lesson method {seconds(view['lesson_time_s'])}"
        )


def sweep(data: dict[str, Any]) -> None:
    t = Table(title="batch sweep: latency, throughput, cost", show_edge=False, title_justify="left")
    for col in ("batch", "TTFT", "TPOT", "tok/s/user", "tok/s", "decode", "$/M in", "$/M out"):
        t.add_column(col, justify="left" if col == "decode" else "right")
    turn = data["compute_bound_from"]
    for r in data["rows"]:
        mark = " ← compute-bound from here" if r["batch"] == turn else ""
        t.add_row(
            f"{r['batch']:,}",
            seconds(r["ttft_s"]),
            seconds(r["tpot_s"]),
            rate(r["tokens_per_s_per_user"]),
            rate(r["tokens_per_s"]),
            f"{r['decode_bound']}{mark}",
            f"{r['usd_per_million_input_tokens']:,.3f}",
            f"{r['usd_per_million_output_tokens']:,.3f}",
        )
    console.print(t)
    if turn is None:
        console.print("decode stays memory-bound up to the largest batch that fits")
    else:
        console.print(
            f"◀ decode turns compute-bound at batch {turn:,}: "
            "beyond it, more batch adds latency, not throughput"
        )


def engines(entries: dict[str, dict[str, Any]], overheads: dict[str, tuple[float, float | None]]) -> None:
    t = Table(show_edge=False)
    name_column(t, entries)
    overhead = "overhead, 32 layers (graph)"
    for col in ("bf16 GEMM", "fp8 GEMM", "16-bit w", "4-bit w", overhead, "policy", "TPOT band"):
        t.add_column(col, justify="right")
    for name, e in entries.items():
        band = e["uncertainty"].get("decode")
        launched_s, graphed_s = overheads[name]
        launched = f"{launched_s * 1e3:.2f} ms"
        if graphed_s is not None:
            launched += f" ({graphed_s * 1e3:.2f} ms)"
        t.add_row(
            name,
            f"{e['gemm'].get('bf16', 0):.0%}",
            f"{e['gemm'].get('fp8', 0):.0%}" if "fp8" in e["gemm"] else "–",
            f"{e['weights']['w16']:.0%}",
            f"{e['weights']['w4']:.0%}",
            launched,
            e["scheduler"]["policy"],
            f"{band[0]:.2f}–{band[1]:.2f}×" if band else "–",
        )
    console.print(t)
