"""PNG plots for `compare --plot DIR`: measured points over the predicted curves.

matplotlib is optional (`pip install 'ridgeline[plot]'`) and imported only here.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ridgeline._pyplot import pyplot
from ridgeline.deployment import Deployment
from ridgeline.errors import RidgelineError
from ridgeline.measure.compare import Comparison, Group, predict


def plot(m: Deployment, c: Comparison, folder: Path) -> list[Path]:
    """ttft_vs_prompt.png and tpot_vs_context.png in `folder`; returns their paths."""
    plt = pyplot("--plot")
    import numpy as np

    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RidgelineError(
            f"--plot: cannot make the folder {str(folder)!r}: {exc.strerror or exc}"
        ) from None
    out: list[Path] = []
    prompts = [r.prompt_tokens for r in c.rows]
    if not prompts:
        return out
    span = np.unique(np.linspace(1, max(prompts) * 1.1, 40).astype(int))
    concurrencies = sorted({r.concurrency for r in c.rows})

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    curve = [predict(m, Group(int(p), 1, 1, 2, 0.0, None, 0.0))[0] for p in span]
    ax.plot(span, curve, color="0.3", label="predicted (batch 1)")
    if c.ttft_offset_s is not None and c.prefill_slope is not None:
        fitted = [c.ttft_offset_s + c.prefill_slope * (t - m.eff.ttft_offset_s) for t in curve]
        ax.plot(span, fitted, color="0.6", linestyle="--", label="measured line (offset + slope)")
    for conc in concurrencies:
        rows = [r for r in c.rows if r.concurrency == conc]
        ax.plot([r.prompt_tokens for r in rows], [r.ttft_s for r in rows], "o", label=f"measured, C={conc}")
    ax.set(xlabel="prompt tokens", ylabel="TTFT (s)", title=f"{c.model} on {c.gpu}: time to first token")
    ax.legend()
    out.append(_save(fig, folder / "ttft_vs_prompt.png", plt))

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    steps = max(r.output_tokens for r in c.rows) - 1
    for conc in concurrencies:
        model_curve = [predict(m, Group(int(p), conc, 1, steps + 1, 0.0, None, 0.0))[1] for p in span]
        line = ax.plot(span + steps / 2, np.array(model_curve) * 1e3, label=f"predicted, C={conc}")
        rows = [r for r in c.rows if r.concurrency == conc and r.tpot_s]
        ax.plot(
            [r.prompt_tokens + (r.output_tokens - 1) / 2 for r in rows],
            [(r.tpot_s or 0.0) * 1e3 for r in rows],
            "o",
            color=line[0].get_color(),
            label=f"measured, C={conc}",
        )
    ceiling = replace(m, eff=replace(m.eff, compute=1.0, bandwidth=1.0, step_overhead_s=0.0))
    top = [predict(ceiling, Group(int(p), 1, 1, steps + 1, 0.0, None, 0.0))[1] * 1e3 for p in span]
    ax.plot(span + steps / 2, top, color="0.6", linestyle=":", label="ceiling (100% bandwidth), C=1")
    ax.set(xlabel="mean context (tokens)", ylabel="TPOT (ms)", title=f"{c.model} on {c.gpu}: time per token")
    ax.set_ylim(bottom=0)
    ax.legend()
    out.append(_save(fig, folder / "tpot_vs_context.png", plt))
    return out


def _save(fig: Any, path: Path, plt: Any) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
