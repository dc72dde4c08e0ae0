"""GPU validation: a Llama-architecture model with random weights in plain PyTorch, timed
on a real GPU and held against ridgeline's prediction.

    python benchmarks/gpu_validate.py                       # Llama 3.1 8B shape, bf16, CUDA
    python benchmarks/gpu_validate.py --gpu h100-sxm        # predict for a named catalogue entry
    python benchmarks/gpu_validate.py --dry-run             # tiny shapes on the CPU

It first measures the card's own ceilings (a large bf16 matrix product and a device-to-device
copy), then times prefill at several prompt lengths (batch 1) and single decode steps at
several batches and contexts, on a static KV cache, and writes `gpu_validate.json`, `.csv`
and a short Markdown report of predicted (presets `ideal` and `lesson`, and the `per-op`
method) against measured to --out. Passes are timed as CUDA graphs (what serving engines
run) and eagerly (the difference is launch overhead, what `ridgeline fit` calls per-step
overhead); decode steps also in their two big parts, the weight matmuls alone and every
layer's attention alone, against the per-op ledger's weight and KV bytes. As servers do,
the prefill computes logits for the last position only; ridgeline's ledger counts 2·P FLOPs
for every token, the lm_head included, so on an 8B model it overstates prefill FLOPs by
about 13%. Needs only PyTorch; takes about 30 s on an H200.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
import time
import warnings
from collections.abc import Sequence
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
from ridgeline.engines import small_m_rate
from ridgeline.errors import RidgelineError
from ridgeline.hardware import builtin_catalogue, get_accelerator, resolve_name
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
FULL_DECODE = (
    (1, 128),
    (1, 2048),
    (1, 16384),
    (8, 2048),
    (32, 2048),
    (64, 2048),
    (128, 2048),
    (256, 2048),
)
DRY_PREFILL = (16, 48)
DRY_DECODE = ((1, 16), (2, 40))
SWEEP_TOKENS = (1, 4, 16, 32, 64, 96, 128, 192, 256, 384, 512, 1024, 2048, 4096, 8192)
DRY_SWEEP_TOKENS = (1, 8, 32)


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
    """Llama in plain tensors: RMSNorm, GQA attention with RoPE, SwiGLU MLP, untied head.
    Each weight is stored [out, in] and applied by `F.linear`, as `nn.Linear` holds it and as
    serving engines load checkpoints."""

    def __init__(self, s: Shape, device: str, dtype: torch.dtype, max_context: int) -> None:
        self.s, self.device, self.dtype = s, device, dtype
        gen = torch.Generator(device=device).manual_seed(0)

        def w(*shape: int) -> torch.Tensor:
            return torch.randn(*shape, device=device, dtype=dtype, generator=gen) * 0.02

        self.embed = w(s.vocab, s.hidden)
        self.layers = [
            {
                "attn_norm": torch.ones(s.hidden, device=device, dtype=dtype),
                "wq": w(s.heads * s.head_dim, s.hidden),
                "wk": w(s.kv_heads * s.head_dim, s.hidden),
                "wv": w(s.kv_heads * s.head_dim, s.hidden),
                "wo": w(s.hidden, s.heads * s.head_dim),
                "mlp_norm": torch.ones(s.hidden, device=device, dtype=dtype),
                "w_gate": w(s.mlp, s.hidden),
                "w_up": w(s.mlp, s.hidden),
                "w_down": w(s.hidden, s.mlp),
            }
            for _ in range(s.layers)
        ]
        self.norm = torch.ones(s.hidden, device=device, dtype=dtype)
        self.lm_head = w(s.vocab, s.hidden)
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
        return F.rms_norm(x, (self.s.hidden,), weight, self.s.eps)

    def rope(self, x: torch.Tensor, start: int) -> torch.Tensor:
        """Rotate pairs (first half, second half) of each head by position x angle."""
        t = x.shape[2]
        cos, sin = self.cos[start : start + t][None, None], self.sin[start : start + t][None, None]
        a, b = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)

    def attend(self, q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, causal: bool) -> torch.Tensor:
        """Grouped-query attention in PyTorch's fused kernel, which reads each cached key and
        value once for its whole group of query heads (as the ledger counts it); causal from
        an empty cache, over the whole cache for one new token."""
        return F.scaled_dot_product_attention(q, keys, values, is_causal=causal, enable_gqa=True)

    def matmuls(self, ids: torch.Tensor) -> torch.Tensor:
        """The forward pass's weight matmuls alone, in order (no norms, rotation, cache or
        attention): the floor a decode step's weight reads set."""
        x = self.embed[ids]
        for layer in self.layers:
            q, _, _ = F.linear(x, layer["wq"]), F.linear(x, layer["wk"]), F.linear(x, layer["wv"])
            x = x + F.linear(q, layer["wo"])
            x = x + F.linear(F.linear(x, layer["w_gate"]) * F.linear(x, layer["w_up"]), layer["w_down"])
        return F.linear(x[:, -1], self.lm_head)

    def attention_only(
        self, q: torch.Tensor, kv: list[tuple[torch.Tensor, torch.Tensor]], context: int
    ) -> None:
        """Every layer's attention for one new token over `context` cached ones, nothing else:
        what a decode step spends reading the KV cache."""
        for k_cache, v_cache in kv:
            self.attend(q, k_cache[:, :, :context], v_cache[:, :, :context], causal=False)

    def forward(
        self, ids: torch.Tensor, start: int, kv: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> torch.Tensor:
        """Tokens `ids` [batch, T] at positions start .. start+T-1; logits of the last one."""
        s = self.s
        b, t = ids.shape
        x = self.embed[ids]
        for layer, (k_cache, v_cache) in zip(self.layers, kv, strict=True):
            h = self.rms(x, layer["attn_norm"])
            q = F.linear(h, layer["wq"]).view(b, t, s.heads, s.head_dim).transpose(1, 2)
            k = F.linear(h, layer["wk"]).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
            v = F.linear(h, layer["wv"]).view(b, t, s.kv_heads, s.head_dim).transpose(1, 2)
            q, k = self.rope(q, start), self.rope(k, start)
            k_cache[:, :, start : start + t] = k
            v_cache[:, :, start : start + t] = v
            keys, values = k_cache[:, :, : start + t], v_cache[:, :, : start + t]
            att = self.attend(q, keys, values, causal=start == 0 and t > 1)
            x = x + F.linear(att.transpose(1, 2).reshape(b, t, s.heads * s.head_dim), layer["wo"])
            h = self.rms(x, layer["mlp_norm"])
            x = x + F.linear(
                F.silu(F.linear(h, layer["w_gate"])) * F.linear(h, layer["w_up"]), layer["w_down"]
            )
        return F.linear(self.rms(x[:, -1], self.norm), self.lm_head)


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


def ceilings(device: str, dtype: torch.dtype, dry_run: bool) -> tuple[float, float]:
    """The card's own ceilings: FLOP/s of a large square matrix product on random data (the
    mean of ten after three warm-ups) and bytes/s of a device-to-device copy (read plus
    written, the median of ten)."""
    n, copy_bytes = (256, 8 << 20) if dry_run else (8192, 4 << 30)
    gen = torch.Generator(device=device).manual_seed(1)
    a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
    with torch.inference_mode():
        for _ in range(3):
            a @ b
        sync(device)
        matmul_s = statistics.fmean(timed_s(lambda: a @ b, device, 10))
        source = torch.empty(copy_bytes // 2, device=device, dtype=torch.bfloat16)
        target = torch.empty_like(source)
        target.copy_(source)
        sync(device)
        copy_s = statistics.median(timed_s(lambda: target.copy_(source), device, 10))
    return 2 * n**3 / matmul_s, 2 * copy_bytes / copy_s


def gqa_backends(model: Llama) -> list[str]:
    """The fused attention backends that take grouped-query attention for one new token
    over a cache here (PyTorch picks the first that does, in its own order)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    s = model.s
    q = torch.zeros(2, s.heads, 1, s.head_dim, device=model.device, dtype=model.dtype)
    kv = torch.zeros(2, s.kv_heads, 64, s.head_dim, device=model.device, dtype=model.dtype)
    taken = []
    for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION):
        try:  # a backend that declines says why in warnings, then raises: only the raise counts
            with sdpa_kernel(backend), torch.inference_mode(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
        except RuntimeError:
            continue
        taken.append(backend.name.lower())
    return taken


def catalogue_name(device_name: str) -> str | None:
    """The catalogue entry for the card's name as PyTorch reports it (nvidia-smi's), the way
    --gpu reads it: "NVIDIA H100 80GB HBM3" is h100-sxm."""
    return resolve_name(device_name, builtin_catalogue())


def time_prefill(model: Llama, n: int, repeats: int, graphs: bool) -> tuple[float, float | None]:
    """One prefill of n tokens: (as a CUDA graph, eager) on a GPU, else (eager, None)."""
    kv = model.cache(1, n)
    ids = torch.randint(0, model.s.vocab, (1, n), device=model.device)
    with torch.inference_mode():

        def prefill() -> torch.Tensor:
            return model.forward(ids, 0, kv)

        prefill()  # warm-up: kernels chosen, memory pooled
        sync(model.device)
        eager = best_time(prefill, model.device, repeats, graphs=False)
        return (best_time(prefill, model.device, repeats, graphs), eager) if graphs else (eager, None)


@dataclass
class PassTimes:
    step_s: float  # the whole pass: a CUDA graph on a GPU, else eager
    eager_s: float | None  # with graphs: the whole step launched op by op
    matmuls_s: float | None  # the weight matmuls alone (a graph where the step is one)
    attention_s: float | None  # every layer's attention over the cache alone (likewise)


def graph_time(fn: Any, steps: int) -> float:
    """Median time of `fn` captured once as a CUDA graph and replayed."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    graph.replay()
    sync("cuda")
    return statistics.median(timed_s(graph.replay, "cuda", steps))


def best_time(fn: Any, device: str, repeats: int, graphs: bool) -> float:
    """Median time of `fn`: captured once as a CUDA graph and replayed, or launched eagerly."""
    return graph_time(fn, repeats) if graphs else statistics.median(timed_s(fn, device, repeats))


def time_decode(model: Llama, batch: int, context: int, steps: int, graphs: bool) -> PassTimes:
    """One decode step at `context` cached tokens, whole and in its two big parts."""
    kv = model.cache(batch, context + 1)
    ids = torch.randint(0, model.s.vocab, (batch, 1), device=model.device)
    q = torch.randn(batch, model.s.heads, 1, model.s.head_dim, device=model.device, dtype=model.dtype)
    with torch.inference_mode():

        def step() -> torch.Tensor:
            return model.forward(ids, context, kv)

        def matmuls() -> torch.Tensor:
            return model.matmuls(ids)

        def attention() -> None:
            model.attention_only(q, kv, context + 1)

        for fn in (step, matmuls, attention):
            fn()
        sync(model.device)
        eager = best_time(step, model.device, steps, graphs=False)
        step_s = best_time(step, model.device, steps, graphs) if graphs else eager
        matmuls_s, attention_s = (best_time(fn, model.device, steps, graphs) for fn in (matmuls, attention))
        return PassTimes(step_s, eager if graphs else None, matmuls_s, attention_s)


@dataclass
class SweepPoint:
    tokens: int
    time_s: float
    flops: float
    weight_bytes: float
    form_s: float = 0.0  # the fitted roofline form's time


def matmul_sweep(model: Llama, tokens: tuple[int, ...], repeats: int, graphs: bool) -> list[SweepPoint]:
    """One layer's weight matmuls as engines run them (QKV fused, output, gate and up fused,
    down) for M tokens at a time: each M's time, FLOPs and weight bytes."""
    layer = model.layers[0]
    qkv = torch.cat((layer["wq"], layer["wk"], layer["wv"]))
    gate_up = torch.cat((layer["w_gate"], layer["w_up"]))
    weights = (qkv, layer["wo"], gate_up, layer["w_down"])
    params = sum(w.numel() for w in weights)
    out = []
    with torch.inference_mode():
        for m in tokens:
            x = torch.randn(m, model.s.hidden, device=model.device, dtype=model.dtype)
            z = torch.randn(m, model.s.mlp, device=model.device, dtype=model.dtype)

            def matmuls(x: torch.Tensor = x, z: torch.Tensor = z) -> None:
                F.linear(x, qkv), F.linear(x, layer["wo"]), F.linear(x, gate_up), F.linear(z, layer["w_down"])

            matmuls()
            sync(model.device)
            took = best_time(matmuls, model.device, repeats, graphs)
            out.append(SweepPoint(m, took, 2.0 * m * params, float(params * qkv.element_size())))
    return out


def fit_form(points: list[SweepPoint], ceiling_flops: float) -> tuple[float, float, float]:
    """The engine profiles' matmul form fitted to a sweep: time = max(FLOPs / (share x ceiling
    x M / (M + half_m)), weight bytes / bandwidth), the bandwidth read off the one-token
    point. Returns (share, half_m, bandwidth), by least squares on log time over a grid."""
    bandwidth = points[0].weight_bytes / points[0].time_s

    def form(p: SweepPoint, share: float, half_m: float) -> float:
        rate = small_m_rate(share * ceiling_flops, p.tokens, half_m)
        return max(p.flops / rate, p.weight_bytes / bandwidth)

    def loss(share: float, half_m: float) -> float:
        return sum(math.log(form(p, share, half_m) / p.time_s) ** 2 for p in points)

    grid = [(s / 100, h) for s in range(40, 121) for h in (*range(0, 256), *range(256, 4097, 8))]
    share, half_m = min(grid, key=lambda g: loss(*g))
    for p in points:
        p.form_s = form(p, share, half_m)
    return share, half_m, bandwidth


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
    per_op_s: float
    flops: float
    bytes: float
    weight_bytes: float  # the per-op ledger's weight reads (matmuls, gathered rows, norms)
    kv_bytes: float  # the per-op ledger's KV cache reads and writes
    matmuls_s: float | None = None  # decode on a GPU: the weight matmuls alone
    attention_s: float | None = None  # decode on a GPU: every layer's attention alone

    @property
    def achieved_flops_per_s(self) -> float:
        return self.flops / self.measured_s

    @property
    def achieved_bytes_per_s(self) -> float:
        return self.bytes / self.measured_s


def predictions(arch: Architecture, gpu: str, phase: str, batch: int, tokens: int) -> tuple[Any, Any, Any]:
    """One pass priced three ways: preset `ideal`, preset `lesson`, and method `per-op`
    (whose ledger also says which bytes are weights read by matmuls and which are KV)."""
    out = []
    for preset, method in (("ideal", "lesson"), ("lesson", "lesson"), ("lesson", "per-op")):
        m = Deployment.build(arch, gpu, preset=preset, method=method)
        out.append(prefill_step(m, tokens, batch) if phase == "prefill" else decode_step(m, tokens, batch))
    return out[0], out[1], out[2]


def ms(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    return f"{seconds * 1e3:.2f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.1f} µs"


def report(points: list[Point], meta: dict[str, Any], sweep: Sequence[SweepPoint] = ()) -> str:
    lines = [
        f"# GPU validation: {meta['model']} on {meta['device_name']}",
        "",
        f"Predicted with `--gpu {meta['gpu']}`; {meta['dtype']}, torch {meta['torch']}"
        + (" (dry run: CPU timings against GPU predictions are not comparable)" if meta["dry_run"] else "")
        + (
            ". Passes timed as CUDA graphs; `eager` launches each operation from Python."
            if meta["cuda_graphs"]
            else "."
        ),
        "",
        f"Measured ceilings: a {meta['ceiling_matmul_n']}³ matrix product at "
        f"{meta['ceiling_flops_per_s'] / 1e12:.4g} TFLOP/s ({meta['ceiling_flops_share']:.1%} of the "
        f"catalogue's {meta['peak_flops'] / 1e12:.4g}); a device copy at "
        f"{meta['ceiling_bytes_per_s'] / 1e12:.3g} TB/s ({meta['ceiling_bytes_share']:.1%} of "
        f"{meta['peak_bytes_per_s'] / 1e12:.3g}).",
        "",
        "| phase | batch | tokens | measured | eager | ideal | lesson | per-op | measured / lesson "
        "| measured / per-op | achieved | of measured ceiling |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in points:
        prefill = p.phase == "prefill"
        achieved = (
            f"{p.achieved_flops_per_s / 1e12:.3g} TFLOP/s"
            if prefill
            else f"{p.achieved_bytes_per_s / 1e12:.3g} TB/s"
        )
        share = (
            p.achieved_flops_per_s / meta["ceiling_flops_per_s"]
            if prefill
            else p.achieved_bytes_per_s / meta["ceiling_bytes_per_s"]
        )
        lines.append(
            f"| {p.phase} | {p.batch} | {p.tokens:,} | {ms(p.measured_s)} | {ms(p.eager_s)} | "
            f"{ms(p.ideal_s)} | {ms(p.lesson_s)} | {ms(p.per_op_s)} | {p.measured_s / p.lesson_s:.3g} | "
            f"{p.measured_s / p.per_op_s:.3g} | {achieved} | {share:.0%} |"
        )
    lines += [
        "",
        f"KV cache check (prefill vs prefill + one cached step): relative logit gap {meta['cache_gap']:.1e}. "
        "Fused attention backends that take grouped queries here: "
        f"{', '.join(meta['gqa_backends']) or 'none'}.",
    ]
    parts = [p for p in points if p.matmuls_s is not None and p.attention_s is not None]
    if parts:
        how = ", each a CUDA graph" if meta["cuda_graphs"] else ""
        lines += [
            "",
            f"Decode in parts{how}: the weight matmuls alone (against the ledger's weight bytes) and "
            "every layer's attention alone (against its KV bytes); the rest is norms, rotation, "
            "residuals, cache writes and launches.",
            "",
            "| batch | context | step | matmuls | weights at | attention | KV at | rest |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for p in parts:
            assert p.matmuls_s is not None and p.attention_s is not None
            weights_at, kv_at = p.weight_bytes / p.matmuls_s, p.kv_bytes / p.attention_s
            ceiling = meta["ceiling_bytes_per_s"]
            lines.append(
                f"| {p.batch} | {p.tokens:,} | {ms(p.measured_s)} | {ms(p.matmuls_s)} | "
                f"{weights_at / 1e12:.3g} TB/s ({weights_at / ceiling:.0%}) | "
                f"{ms(p.attention_s)} | {kv_at / 1e12:.3g} TB/s ({kv_at / ceiling:.0%}) | "
                f"{ms(p.measured_s - p.matmuls_s - p.attention_s)} |"
            )
    if sweep:
        lines += [
            "",
            "One layer's weight matmuls (QKV and gate/up fused, as engines fuse them) for M tokens "
            "at a time, against the engine profiles' form fitted to them: time = max(FLOPs / (share "
            "x ceiling x M / (M + half_m)), weight bytes / bandwidth), the bandwidth the one-token "
            f"point's: share {meta['sweep_share']:.2f}, half_m {meta['sweep_half_m_tokens']:g} tokens, "
            f"{meta['sweep_weight_bytes_per_s'] / 1e12:.3g} TB/s.",
            "",
            "| tokens | time | TFLOP/s | weights at | form | form / measured |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for q in sweep:
            lines.append(
                f"| {q.tokens:,} | {ms(q.time_s)} | {q.flops / q.time_s / 1e12:.3g} | "
                f"{q.weight_bytes / q.time_s / 1e12:.3g} TB/s | {ms(q.form_s)} | {q.form_s / q.time_s:.3f} |"
            )
    if not meta["complete"]:
        lines += ["", "Incomplete: the run stopped before its last point."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--gpu",
        default="auto",
        help="catalogue entry to predict with (h100-sxm, h200, ...; auto: read off the card's name)",
    )
    ap.add_argument("--out", default="gpu_validate_out", help="folder for the JSON, CSV and Markdown")
    ap.add_argument("--dry-run", action="store_true", help="tiny shapes on the CPU: checks the script")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per point (median reported)")
    ap.add_argument("--no-graphs", action="store_true", help="time decode eagerly only")
    args = ap.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        sys.stderr.write("gpu_validate: no CUDA device; pass --dry-run to check the script on the CPU\n")
        return 2
    device = "cpu" if args.dry_run else "cuda"
    device_name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    gpu = args.gpu
    if gpu == "auto":
        gpu = "h100-sxm" if args.dry_run else (catalogue_name(device_name) or "")
        if not gpu:
            sys.stderr.write(f"gpu_validate: {device_name!r} is not in the catalogue; name one with --gpu\n")
            return 2
    try:
        hw = get_accelerator(gpu)
    except RidgelineError as err:
        sys.stderr.write(f"gpu_validate: {err}\n")
        return 2
    shape, dtype = (TINY, torch.float32) if args.dry_run else (LLAMA_8B, torch.bfloat16)
    arch = tiny_architecture(shape) if args.dry_run else get_model("llama-3.1-8b")
    prefill_points, decode_points = (DRY_PREFILL, DRY_DECODE) if args.dry_run else (FULL_PREFILL, FULL_DECODE)
    max_context = max([*prefill_points, *(c + 1 for _, c in decode_points)])
    graphs = device == "cuda" and not args.no_graphs
    started = time.perf_counter()
    flops_ceiling, bytes_ceiling = ceilings(device, dtype, args.dry_run)
    peak_flops = hw.peak_flops["bf16"]
    meta: dict[str, Any] = {
        "model": arch.name,
        "gpu": gpu,
        "device_name": device_name,
        "dtype": str(dtype).removeprefix("torch."),
        "torch": torch.__version__,
        "dry_run": args.dry_run,
        "cuda_graphs": graphs,
        "ceiling_matmul_n": 256 if args.dry_run else 8192,
        "ceiling_flops_per_s": flops_ceiling,
        "ceiling_bytes_per_s": bytes_ceiling,
        "peak_flops": peak_flops,
        "peak_bytes_per_s": hw.bandwidth_bytes_per_s,
        "ceiling_flops_share": flops_ceiling / peak_flops,
        "ceiling_bytes_share": bytes_ceiling / hw.bandwidth_bytes_per_s,
        "catalogue_matmul_share": hw.matmul_share.get("bf16"),
        "complete": False,
    }
    print(
        f"ceilings: {flops_ceiling / 1e12:.4g} TFLOP/s, {bytes_ceiling / 1e12:.3g} TB/s "
        f"(catalogue {gpu}: {peak_flops / 1e12:.4g}, {hw.bandwidth_bytes_per_s / 1e12:.3g})",
        flush=True,
    )
    torch.manual_seed(0)
    model = Llama(shape, device, dtype, max_context)
    meta["cache_gap"] = cache_consistency(model, 32)
    meta["gqa_backends"] = gqa_backends(model)
    print(f"fused attention backends taking GQA decode: {meta['gqa_backends'] or 'none'}", flush=True)
    points: list[Point] = []
    folder = Path(args.out)
    for phase, batch, tokens in [
        *(("prefill", 1, n) for n in prefill_points),
        *(("decode", b, c) for b, c in decode_points),
    ]:
        ideal, lesson, per_op = predictions(arch, gpu, phase, batch, tokens)
        if phase == "prefill":
            times = PassTimes(*time_prefill(model, tokens, args.repeats, graphs), None, None)
        else:
            times = time_decode(model, batch, tokens, max(args.repeats, 20), graphs)
        point = Point(
            phase=phase,
            batch=batch,
            tokens=tokens,
            measured_s=times.step_s,
            eager_s=times.eager_s,
            ideal_s=float(ideal.time_s),
            lesson_s=float(lesson.time_s),
            per_op_s=float(per_op.time_s),
            flops=float(ideal.flops),
            bytes=float(ideal.bytes),
            weight_bytes=float(per_op.weight_bytes_per_gpu),
            kv_bytes=float(per_op.kv_bytes_per_gpu),
            matmuls_s=times.matmuls_s,
            attention_s=times.attention_s,
        )
        points.append(point)
        print(
            f"{phase} b{batch:<3} n{tokens:>6}: {ms(times.step_s)} (eager {ms(times.eager_s)}, "
            f"matmuls {ms(times.matmuls_s)}, attention {ms(times.attention_s)}; "
            f"lesson {ms(point.lesson_s)}, per-op {ms(point.per_op_s)})",
            flush=True,
        )
        meta["wall_s"] = time.perf_counter() - started
        write(folder, points, meta)  # after every point: a run cut short keeps what it measured
    swept_tokens = DRY_SWEEP_TOKENS if args.dry_run else SWEEP_TOKENS
    sweep = matmul_sweep(model, swept_tokens, max(args.repeats, 20), graphs)
    share, half_m, bandwidth = fit_form(sweep, flops_ceiling)
    meta |= {"sweep_share": share, "sweep_half_m_tokens": half_m, "sweep_weight_bytes_per_s": bandwidth}
    print(f"matmuls against tokens: share {share:.2f} of the ceiling, half at {half_m:g} tokens", flush=True)
    meta["complete"], meta["wall_s"] = True, time.perf_counter() - started
    write(folder, points, meta, sweep)
    print(f"wrote {args.out}/gpu_validate.{{json,csv,md}} in {meta['wall_s']:.1f} s")
    return 0 if math.isfinite(meta["cache_gap"]) else 1


def write(folder: Path, points: list[Point], meta: dict[str, Any], sweep: Sequence[SweepPoint] = ()) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rows = [
        asdict(p)
        | {"achieved_flops_per_s": p.achieved_flops_per_s, "achieved_bytes_per_s": p.achieved_bytes_per_s}
        for p in points
    ]
    swept = [asdict(p) for p in sweep]
    data = {"meta": meta, "points": rows, "sweep": swept}
    (folder / "gpu_validate.json").write_text(json.dumps(data, indent=2) + "\n")
    with (folder / "gpu_validate.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (folder / "gpu_validate.md").write_text(report(points, meta, sweep))


if __name__ == "__main__":
    sys.exit(main())
