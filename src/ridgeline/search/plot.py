"""`search --plot FILE.png`: $ per million tokens against p99 TTFT and p99 TPOT, every
point run whole, those that met the SLO, the Pareto front and the cheapest (a point decided
on a screen or on its bounds has no p99s to draw).

matplotlib is optional (`pip install 'ridgeline[plot]'`) and imported only here.
"""

from __future__ import annotations

from pathlib import Path

from ridgeline._pyplot import pyplot
from ridgeline.checks import one_line
from ridgeline.errors import RidgelineError
from ridgeline.search.run import SearchResult


def check_plot_path(path: str) -> None:
    """A .png whose folder exists, and matplotlib to draw it: checked before the search runs."""
    p = Path(path).expanduser()
    if not isinstance(path, str) or p.suffix.lower() != ".png":
        raise RidgelineError(
            f"--plot {one_line(repr(path), 100)} must name a .png file, e.g. --plot front.png"
        )
    if not p.parent.is_dir():
        raise RidgelineError(f"--plot: the folder {one_line(repr(str(p.parent)), 200)} does not exist")
    pyplot("--plot")


def plot_front(r: SearchResult, path: str) -> None:
    plt = pyplot("--plot")
    from matplotlib import ticker

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), sharex=True)
    simulated = [row for row in r.rows if row["fidelity"] == "full" and row["status"] != "error"]
    met = [row for row in simulated if row["status"] == "met"]
    limits = {"ttft_p99_s": r.slo.get("ttft_s"), "tpot_p99_s": r.slo.get("tpot_s")}
    for ax, key, name in zip(
        axes, ("ttft_p99_s", "tpot_p99_s"), ("p99 TTFT (s)", "p99 TPOT (s)"), strict=True
    ):
        pts = [row for row in simulated if row[key] is not None]
        ax.scatter(
            [row["usd_per_million_tokens"] for row in pts], [row[key] for row in pts],
            s=10, color="0.75", label="run whole",
        )  # fmt: skip
        good = [row for row in met if row[key] is not None]
        ax.scatter(
            [row["usd_per_million_tokens"] for row in good], [row[key] for row in good],
            s=14, color="tab:blue", label="met the SLO",
        )  # fmt: skip
        front = [row for row in r.front if row[key] is not None]
        ax.plot(
            [row["usd_per_million_tokens"] for row in front], [row[key] for row in front],
            "o", color="tab:red", markersize=5, label="Pareto front",
        )  # fmt: skip
        if r.cheapest is not None and r.cheapest[key] is not None:
            ax.plot([r.cheapest["usd_per_million_tokens"]], [r.cheapest[key]], "*", color="black",
                    markersize=14, label="cheapest")  # fmt: skip
        if limits[key]:
            ax.axhline(limits[key], color="tab:red", linestyle="--", linewidth=0.8, label="target")
        ax.set(xlabel="$ per million tokens", ylabel=name, yscale="log")
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f"${x:.3g}"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    rate = f"{r.workload['rate_per_s']:.3g} requests/s"
    fig.suptitle(f"{r.model}: {rate}, {len(simulated):,} of {len(r.rows):,} points run whole")
    fig.tight_layout()
    try:
        fig.savefig(Path(path).expanduser(), dpi=120)
    except OSError as exc:
        raise RidgelineError(
            f"--plot: cannot write {one_line(repr(path), 200)}: {exc.strerror or exc}"
        ) from None
    finally:
        plt.close(fig)
