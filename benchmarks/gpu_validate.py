"""GPU validation: a Llama-architecture model with random weights in plain PyTorch, timed
on a real GPU and held against ridgeline's prediction.

    python benchmarks/gpu_validate.py --gpu h100-sxm        # Llama 3.1 8B shape, bf16, CUDA
    python benchmarks/gpu_validate.py --dry-run             # tiny shapes on the CPU

It times prefill at several prompt lengths (batch 1) and single decode steps at several
batches and contexts, on a static KV cache, and writes `gpu_validate.json`, `.csv` and a
short Markdown report of predicted (presets `ideal` and `lesson`) against measured to
--out. Decode steps are timed as CUDA graphs (what serving engines run) and eagerly (the
difference is launch overhead, what `ridgeline fit` calls per-step overhead). As servers
do, the prefill computes logits for the last position only; ridgeline's ledger counts
2·P FLOPs for every token, the lm_head included, so on an 8B model it overstates prefill
FLOPs by about 13%. Needs only PyTorch; finishes in well under 4 minutes on an H100/H200.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

try:
    import ridgeline  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch
import torch.nn.functional as F

from ridgeline.architecture import Architecture
from ridgeline.deployment import Deployment
from ridgeline.models import get_model
from ridgeline.step import decode_step, prefill_step


@dataclass(frozen=True)
class Shape:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    vocab: int
    rope_theta: float = 500_000.0
    eps: float = 1e-5


LLAMA_8B = Shape(32, 4096, 32, 8, 128, 14336, 128256)
TINY = Shape(2, 64, 4, 2, 16, 128, 256)
FULL_PREFILL = (512, 1024, 2048, 4096, 8192)
FULL_DECODE = ((1, 128), (1, 2048), (1, 16384), (8, 2048), (32, 2048), (64, 2048))
DRY_PREFILL = (16, 48)
DRY_DECODE = ((1, 16), (2, 40))


def tiny_architecture(s: Shape) -> Architecture:
    return Architecture(
        "tiny-llama",
        "llama",
        s.layers,
        s.hidden,
        s.heads,
        s.kv_heads,
        s.head_dim,
        s.mlp,
        s.vocab,
        False,
        4096,
    )


# --- the model ------------------------------------------------------------------------------


class Llama:
    """Llama in plain tensors: RMSNorm, GQA attention with RoPE, SwiGLU MLP, untied head."""

    def __init__(self, s: Shape, device: str, dtype: torch.dtype, max_context: int) -> None:
        self.s, self.device, self.dtype = s, device, dtype
        gen = torch.Generator(device=device).manual_seed(0)

        def w(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, device=device, dtype=dtype, generator=gen) * 0.02

        self.embed = w(s.vocab, s.hidden)
        self.layers = [
            {
                "attn_norm": torch.ones(s.hidden, device=device, dtype=dtype),
                "wq": w(s.hidden, s.heads * s.head_dim),
                "wk": w(s.hidden, s.kv_heads * s.head_dim),
                "wv": w(s.hidden, s.kv_heads * s.head_dim),
                "wo": w(s.heads * s.head_dim, s.hidden),
                "mlp_norm": torch.ones(s.hidden, device=device, dtype=dtype),
                "w_gate": w(s.hidden, s.mlp),
                "w_up": w(s.hidden, s.mlp),
                "w_down": w(s.mlp, s.hidden),
            }
            for _ in range(s.layers)
        ]
        self.norm = torch.ones(s.hidden, device=device, dtype=dtype)
        self.lm_head = w(s.hidden, s.vocab)
        inv = 1.0 / s.rope_theta ** (torch.arange(0, s.head_dim, 2, device=device).float() / s.head_dim)
        angles = torch.outer(torch.arange(max_context, device=device).float(), inv)
        self.cos, self.sin = angles.cos().to(dtype), angles.sin().to(dtype)

    def cache(self, batch: int, context: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """A static KV cache: per layer, K and V of [batch, kv_heads, context, head_dim]."""
        shape = (batch, self.s.kv_heads, context, self.s.head_dim)
        return [
            (
                torch.zeros(shape, device=self.device, dtype=self.dtype),
                torch.zeros(shape, device=self.device, dtype=self.dtype),
            )
            for _ in range(self.s.layers)
        ]

    def rms(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.s.eps)).to(x.dtype) * weight

    def rope(self, x: torch.Tensor, start: int) -> torch.Tensor:
        """Rotate pairs (first half, second half) of each head by position x angle."""
        t = x.shape[2]
        cos, sin = self.cos[start : start + t][None, None], self.sin[start : start + t][None, None]
        a, b = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)

    def attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, causal: bool) -> torch.Tensor:
        """Grouped-query attention. One new token: each KV head's group of queries in one
        matmul, so every cached key and value is read once (as the ledger counts it);
        several: the fused kernel, causal from an empty cache."""
        b, heads, t, d = q.shape
        if t > 1:
            return F.scaled_dot_product_attention(q, keys, values, is_causal=causal, enable_gqa=True)
        grouped = q.view(b, self.s.kv_heads, heads // self.s.kv_heads, d)
        scores = (grouped @ keys.transpose(-1, -2)).float() * d**-0.5
        out = torch.softmax(scores, dim=-1).to(q.dtype) @ values
        return out.view(b, heads, 1, d)

    def forward(
        self, ids: torch.Tensor, start: int, kv: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> torch.Tensor:
        """Tokens `ids` [batch, T] at positions start .. start+T-1; logits of the last one."""
        s = self.s
        b, t = ids.shape
        x = self.embed[ids]
        for layer, (k_cache, v_cache) in zip(self.layers, kv, strict=True):
            h = self.rms(x, layer["attn_norm"])
            q = (h @ layer["wq"]).view(b, t, s.heads, s.head_dim).transpose(1, 2)
            k = (h @ layer["wk"]).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
            v = (h @ layer["wv"]).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
            q, k = self.rope(q, start), self.rope(k, start)
            k_cache[:, :, start : start + t] = k
            v_cache[:, :, start : start + t] = v
            keys, values = k_cache[:, :, : start + t], v_cache[:, :, : start + t]
            att = self.attend(q, keys, values, causal=start == 0 and t > 1)
            x = x + att.transpose(1, 2).reshape(b, t, s.heads * s.head_dim) @ layer["wo"]
            h = self.rms(x, layer["mlp_norm"])
            x = x + (F.silu(h @ layer["w_gate"]) * (h @ layer["w_up"])) @ layer["w_down"]
        return self.rms(x[:, -1], self.norm) @ self.lm_head


# --- timing ---------------------------------------------------------------------------------


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def timed_s(fn: Any, device: str, repeats: int) -> list[float]:
    """Wall time of each call, the device synchronised around it (CUDA events on a GPU)."""
    out = []
    for _ in range(repeats):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) / 1e3)
        else:
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return out


def time_prefill(model: Llama, n: int, repeats: int) -> float:
    kv = model.cache(1, n)
    ids = torch.randint(0, model.s.vocab, (1, n), device=model.device)
    with torch.inference_mode():
        model.forward(ids, 0, kv)  # warm-up: kernels chosen, memory pooled
        sync(model.device)
        times = timed_s(lambda: model.forward(ids, 0, kv), model.device, repeats)
    return statistics.median(times)


def time_decode(
    model: Llama, batch: int, context: int, steps: int, graphs: bool
) -> tuple[float, float | None]:
    """One decode step at `context` cached tokens: (time as a CUDA graph or eager, eager)."""
    kv = model.cache(batch, context + 1)
    ids = torch.randint(0, model.s.vocab, (batch, 1), device=model.device)
    with torch.inference_mode():

        def step() -> torch.Tensor:
            return model.forward(ids, context, kv)

        for _ in range(3):
            step()
        sync(model.device)
        eager = statistics.median(timed_s(step, model.device, steps))
        if not graphs:
            return eager, None
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        graph.replay()
        sync(model.device)
        replayed = statistics.median(timed_s(graph.replay, model.device, steps))
    return replayed, eager


def cache_consistency(model: Llama, n: int) -> float:
    """Max |logit difference| between one prefill of n tokens and a prefill of n-1 tokens
    followed by one decode step through the cache: the cache must hold what it should."""
    ids = torch.randint(0, model.s.vocab, (1, n), device=model.device)
    with torch.inference_mode():
        whole = model.forward(ids, 0, model.cache(1, n)).float()
        kv = model.cache(1, n)
        model.forward(ids[:, :-1], 0, kv)
        stepped = model.forward(ids[:, -1:], n - 1, kv).float()
    return float((whole - stepped).abs().max() / whole.abs().max())


# --- prediction and report ----------------------------------------------------------------------


@dataclass
class Point:
    phase: str  # prefill | decode
    batch: int
    tokens: int  # prompt length, or cached context
    measured_s: float
    eager_s: float | None
    ideal_s: float
    lesson_s: float
    flops: float
    bytes: float

    @property
    def achieved_flops_per_s(self) -> float:
        return self.flops / self.measured_s

    @property
    def achieved_bytes_per_s(self) -> float:
        return self.bytes / self.measured_s


def predictions(
    arch: Architecture, gpu: str, phase: str, batch: int, tokens: int
) -> tuple[float, float, Any]:
    out = []
    for preset in ("ideal", "lesson"):
        m = Deployment.build(arch, gpu, preset=preset)
        step = prefill_step(m, tokens, batch) if phase == "prefill" else decode_step(m, tokens, batch)
        out.append(step)
    return float(out[0].time_s), float(out[1].time_s), out[0]


def ms(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} µs"


def report(points: list[Point], meta: dict[str, Any]) -> str:
    lines = [
        f"# GPU validation: {meta['model']} on {meta['device_name']}",
        "",
        f"Predicted with `--gpu {meta['gpu']}`; {meta['dtype']}, torch {meta['torch']}"
        + (" (dry run: CPU timings against GPU predictions are not comparable)" if meta["dry_run"] else "")
        + (
            ". Decode steps timed as CUDA graphs; `eager` adds the launch overhead."
            if meta["cuda_graphs"]
            else "."
        ),
        "",
        "| phase | batch | tokens | measured | eager | ideal | lesson | measured / lesson | achieved |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in points:
        achieved = (
            f"{p.achieved_flops_per_s / 1e12:.3g} TFLOP/s"
            if p.phase == "prefill"
            else f"{p.achieved_bytes_per_s / 1e12:.3g} TB/s"
        )
        lines.append(
            f"| {p.phase} | {p.batch} | {p.tokens:,} | {ms(p.measured_s)} | {ms(p.eager_s)} | "
            f"{ms(p.ideal_s)} | {ms(p.lesson_s)} | {p.measured_s / p.lesson_s:.3g} | {achieved} |"
        )
    lines += [
        "",
        f"KV cache check (prefill vs prefill + one cached step): relative logit gap {meta['cache_gap']:.1e}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", default="h100-sxm", help="accelerator to predict with (h100-sxm, h200, ...)")
    ap.add_argument("--out", default="gpu_validate_out", help="folder for the JSON, CSV and Markdown")
    ap.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU: checks the script")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per point (median reported)")
    ap.add_argument("--no-graphs", action="store_true", help="time decode eagerly only")
    args = ap.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        sys.stderr.write("gpu_validate: no CUDA device; pass --dry-run to check the script on the CPU\n")
        return 2
    device = "cpu" if args.dry_run else "cuda"
    shape, dtype = (TINY, torch.float32) if args.dry_run else (LLAMA_8B, torch.bfloat16)
    arch = tiny_architecture(shape) if args.dry_run else get_model("llama-3.1-8b")
    prefill_points, decode_points = (DRY_PREFILL, DRY_DECODE) if args.dry_run else (FULL_PREFILL, FULL_DECODE)
    max_context = max([*prefill_points, *(c + 1 for _, c in decode_points)])
    graphs = device == "cuda" and not args.no_graphs
    started = time.perf_counter()
    torch.manual_seed(0)
    model = Llama(shape, device, dtype, max_context)
    gap = cache_consistency(model, 32)
    points = []
    for n in prefill_points:
        ideal_s, lesson_s, step = predictions(arch, args.gpu, "prefill", 1, n)
        measured = time_prefill(model, n, args.repeats)
        points.append(
            Point("prefill", 1, n, measured, None, ideal_s, lesson_s, float(step.flops), float(step.bytes))
        )
        print(f"prefill {n:>6}: {ms(measured)} (lesson {ms(lesson_s)})", flush=True)
    for batch, context in decode_points:
        ideal_s, lesson_s, step = predictions(arch, args.gpu, "decode", batch, context)
        measured, eager = time_decode(model, batch, context, max(args.repeats, 20), graphs)
        points.append(
            Point(
                "decode",
                batch,
                context,
                measured,
                eager,
                ideal_s,
                lesson_s,
                float(step.flops),
                float(step.bytes),
            )
        )
        print(
            f"decode b{batch:<3} c{context:>6}: {ms(measured)} (eager {ms(eager)}, lesson {ms(lesson_s)})",
            flush=True,
        )
    meta = {
        "model": arch.name,
        "gpu": args.gpu,
        "device_name": torch.cuda.get_device_name() if device == "cuda" else "CPU",
        "dtype": str(dtype).removeprefix("torch."),
        "torch": torch.__version__,
        "dry_run": args.dry_run,
        "cuda_graphs": graphs,
        "cache_gap": gap,
        "wall_s": time.perf_counter() - started,
    }
    write(Path(args.out), points, meta)
    print(f"wrote {args.out}/gpu_validate.{{json,csv,md}} in {meta['wall_s']:.1f} s")
    return 0 if math.isfinite(gap) else 1


def write(folder: Path, points: list[Point], meta: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        asdict(p)
        | {"achieved_flops_per_s": p.achieved_flops_per_s, "achieved_bytes_per_s": p.achieved_bytes_per_s}
        for p in points
    ]
    (folder / "gpu_validate.json").write_text(json.dumps({"meta": meta, "points": rows}, indent=2) + "\n")
    with (folder / "gpu_validate.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (folder / "gpu_validate.md").write_text(report(points, meta))


if __name__ == "__main__":
    sys.exit(main())
