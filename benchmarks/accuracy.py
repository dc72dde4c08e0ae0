"""How close the engine profiles come to published measurements: every corpus row, its
predicted and measured value and the signed error, in-sample and with the row's source left
out of the fit; then the median and worst error by regime and by engine.

Run: python benchmarks/accuracy.py [--rows] [--markdown] [--checks] [--beyond] [--newer]   (the
README's accuracy tables are its --markdown and --rows --markdown output, pasted by hand)

--checks does the same for the corpus's sources kept as independent checks (corpus.CHECKS:
GPUStack's Qwen3-14B and Qwen3-32B pages, its DeepSeek-R1 page and its Qwen3-235B-A22B
pages), which no profile was fitted to: the fitted profile's prediction is their held-out
one, and the summary adds each source, accelerator and model. The bands are made of every
held-out row, the check sources' among them, so it also rebuilds them without each check
source in turn and says how many of that source's rows they hold.

--beyond predicts the cells of a corpus source's table that the corpus does not hold: the
TensorRT-LLM 1.0 throughput table (perf-overview.md @00f37686): its FP8 cells for Llama 3.1
8B and 70B on H100 and H200, and 405B at TP 8 on both (49 cells beside the corpus's 11), and
its FP4 cells for Llama 3.3 70B and Qwen3-30B-A3B on B200 and GB200, and Llama 3.1 405B at
TP 4 on both (57 beside 3). They are not independent of the
fit (their source is in it), so the held-out figure, the profile fitted without that
source, is the one to read: how well the model carries across lengths, and across models,
within one engine version.

--newer predicts the cells of TensorRT-LLM's current throughput table (perf-overview.md
@03e27c7d) for models and accelerators the catalogue holds: Llama 3.3 70B in FP8 at TP 2 on
H200 and H100, in NVFP4 at TP 1 on B200 and GB200, and Qwen3-30B-A3B in NVFP4 on both (27
cells). No corpus row comes from that table or its engine version.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from ridgeline.accuracy import corpus, report

BEYOND_GROUP = "TensorRT-LLM 1.0 docs"
# a corpus row of that table for each precision: trtllm-bench offline, fp8 weights, maths and
# KV (ModelOpt FP8), or NVFP4 weights and maths with an fp8 KV (ModelOpt FP4)
FP8, FP4 = "C01", "D27"
# Total output tokens/s of trtllm-bench throughput, ModelOpt FP8 or FP4 checkpoints, by
# (template, model, accelerator, TP) and (input, output); the requests per length pair are
# the doc's own.
BEYOND_REQUESTS = {(128, 128): 30000, (128, 2048): 3000, (128, 4096): 1500, (500, 2000): 3000,
                   (1000, 1000): 3000, (1000, 2000): 1500, (2048, 128): 3000, (2048, 2048): 1500,
                   (5000, 500): 1500, (20000, 2000): 1000}  # fmt: skip
BEYOND_LENGTHS = tuple(BEYOND_REQUESTS)
BEYOND = {
    (FP8, "llama-3.1-8b", "h100-sxm", 1): (28312, 22714, 14325, 17660, 15220, 13899, 3450, 9305, 3459, 1351),
    (FP8, "llama-3.1-8b", "h200", 1): (27911, 26221, 18027, 20770, 17744, 16828, 3538, 12194, 3902, 1804),
    (FP8, "llama-3.1-70b", "h100-sxm", 2): (6378, 6651, 4199, 5222, 4205, 4146, 762, 3082, 898, 437),
    (FP8, "llama-3.1-70b", "h200", 1): (3803, 4336, 2872, 3666, 2909, 2994, 442, 2003, 566, 283),
    (FP8, "llama-3.1-405b", "h200", 8): (3814, 5348, 4741, 4724, 3330, 3722, 456, 2948, 650, 505),
    (FP8, "llama-3.1-405b", "h100-sxm", 8): (3627, 4340, 3116, 3994, 2919, 2895, 453, 2296, 610, 345),
    (FP4, "llama-3.1-70b", "b200", 1): (11147, 9922, 6831, 7762, 7007, 6271, 1339, 4783, 1459, 665),
    (FP4, "llama-3.1-70b", "gb200", 1): (12189, 11309, 7849, 9028, 7326, 6513, 1450, 5646, 1602, 755),
    (FP4, "qwen3-30b-a3b", "b200", 1): (39827, 37844, 24953, 27817, 25828, 22051, 6251, 17554, 6142, 2944),
    (FP4, "llama-3.1-405b", "b200", 4): (6281, 8020, 6345, 6244, 5209, 4933, 749, 4212, 1048, 672),
    (FP4, "llama-3.1-405b", "gb200", 4): (6740, 8151, 6608, 6540, 5389, 5135, 797, 4407, 1112, 739),
    (FP4, "qwen3-30b-a3b", "gb200", 1): (24107, 31311, 26337, 20604, 17481, 17177, 6595, 14719, 5908, 3203),
}  # fmt: skip


# TensorRT-LLM's current perf-overview (docs/source/developer-guide/perf-overview.md @03e27c7d,
# trtllm-bench, PyTorch backend, ModelOpt checkpoints): output tokens/s per GPU, by (template,
# model, accelerator, TP) and (input, output); the requests per length pair are the doc's own
# (1,000/1,000 takes 1,024/1,024's). No corpus row comes from it: a held-out check of a later
# engine version than any the profile was fitted to.
NEWER_GROUP_LEFT_OUT = BEYOND_GROUP  # the same engine's nearest source, left out for the held-out column
NEWER_REQUESTS = {(1000, 1000): 3000, (1024, 1024): 3000, (1024, 8192): 1500, (8192, 1024): 1500,
                  (32768, 1024): 1000}  # fmt: skip
NEWER = {
    (FP8, "llama-3.1-70b", "h200", 2): {(1000, 1000): 2587, (1024, 1024): 2582, (1024, 8192): 2009,
                                        (8192, 1024): 537, (32768, 1024): 120},
    (FP8, "llama-3.1-70b", "h100-sxm", 2): {(1000, 1000): 2209, (8192, 1024): 398},
    (FP4, "llama-3.1-70b", "b200", 1): {(1000, 1000): 6920, (1024, 1024): 6842, (1024, 8192): 3242,
                                        (8192, 1024): 1362, (32768, 1024): 274},
    (FP4, "llama-3.1-70b", "gb200", 1): {(1000, 1000): 7769, (1024, 1024): 7751, (1024, 8192): 3805,
                                         (8192, 1024): 1491, (32768, 1024): 302},
    (FP4, "qwen3-30b-a3b", "b200", 1): {(1000, 1000): 26971, (1024, 1024): 26611, (1024, 8192): 13497,
                                        (8192, 1024): 5735, (32768, 1024): 1265},
    (FP4, "qwen3-30b-a3b", "gb200", 1): {(1000, 1000): 22856, (1024, 1024): 22201, (1024, 8192): 14272,
                                         (8192, 1024): 6201, (32768, 1024): 1380},
}  # fmt: skip
FAR = 0.40  # the bound on any one row's error


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", action="store_true", help="print every row")
    ap.add_argument("--markdown", action="store_true", help="the tables as Markdown (--rows too)")
    ap.add_argument("--checks", action="store_true", help="the sources kept as checks, never fitted")
    ap.add_argument("--beyond", action="store_true", help="the cells of a corpus table the corpus lacks")
    ap.add_argument("--newer", action="store_true", help="a newer TensorRT-LLM table, not in the corpus")
    args = ap.parse_args()
    if args.beyond:
        beyond()
        return
    if args.newer:
        newer()
        return
    t0 = time.perf_counter()
    checked = report.check(corpus.check_rows() if args.checks else None)
    took = time.perf_counter() - t0
    if args.rows and args.markdown:
        print("| id | source | engine | kind | model | gpu | tp | measured | predicted | error | held out |")
        print("|---|---|---|---|---|---|--:|--:|--:|--:|--:|")
        for c in checked:
            r = c.row
            line = (r.id, r.group, r.engine, r.kind, r.model, r.gpu, str(r.tp), f"{r.measured:.4g} {r.unit}",
                    f"{c.predicted:.4g}", f"{c.error:+.1%}", f"{c.held_out_error:+.1%}")  # fmt: skip
            print("| " + " | ".join(line) + " |")
        print()
    elif args.rows:
        head = ("measured", "predicted", "error", "held out")
        print(f"{'id':4} {'engine':8} {'kind':13} " + " ".join(f"{h:>10}" for h in head))
        for c in checked:
            r = c.row
            print(
                f"{r.id:4} {r.engine:8} {r.kind:13} {r.measured:10.4g} {c.predicted:10.4g} "
                f"{c.error:+10.1%} {c.held_out_error:+10.1%}"
            )
    groups = [("all", checked)]
    groups += [(f"regime {k}", v) for k, v in report.by(checked, "regime").items()]
    groups += [(f"engine {k}", v) for k, v in report.by(checked, "engine").items()]
    if args.checks:
        keys = (("group", "source"), ("gpu", "gpu"), ("model", "model"))
        groups += [(f"{label} {k}", v) for key, label in keys for k, v in report.by(checked, key).items()]
    if args.markdown:
        print(
            "| rows | n | median \\|error\\| held out | worst held out | median in-sample | band coverage |"
        )
        print("|---|---|---|---|---|---|")
    for name, cs in groups:
        held = [c.held_out_error for c in cs]
        fitted = [c.error for c in cs]
        worst = max(held, key=abs)
        cells = (
            name,
            str(len(cs)),
            f"{report.median_abs(held):.1%}",
            f"{worst:+.0%}",
            f"{report.median_abs(fitted):.1%}",
            f"{report.covered(cs):.0%}",
        )
        if args.markdown:
            print("| " + " | ".join(cells) + " |")
        else:
            print(f"{cells[0]:18} n={cells[1]:>3}  held out: median {cells[2]:>6}, worst {cells[3]:>6};"
                  f"  in-sample median {cells[4]:>6};  inside band {cells[5]}")  # fmt: skip
    if args.checks:
        seen = report.unseen_coverage(report.check(), checked)
        inside, n = (sum(x) for x in zip(*seen.values(), strict=True))
        each = ", ".join(f"{source} {i}/{k}" for source, (i, k) in seen.items())
        print(f"\nbands rebuilt without each check source hold {inside / n:.0%} of its rows ({each})")
    optimistic = sum(corpus.optimistic(c.row, c.held_out) for c in checked)
    print(f"\n{len(checked)} rows in {took:.1f} s; held-out predictions faster than measured: "
          f"{optimistic / len(checked):.0%}; median signed held-out error "
          f"{statistics.median(c.held_out_error for c in checked):+.1%}")  # fmt: skip
    for name, error in (("held out", "held_out_error"), ("in-sample", "error")):
        far = [c.row.id for c in checked if abs(getattr(c, error)) > FAR]
        print(f"rows more than {FAR:.0%} off {name}: {len(far)}" + (f" ({', '.join(far)})" if far else ""))


def beyond() -> None:
    cell = _cells(BEYOND_GROUP)
    held = {(r.model, r.gpu, r.tp, r.input, r.output) for r in corpus.rows() if r.group == BEYOND_GROUP}
    # per block (template, model, accelerator, TP): each cell's error fitted and held out
    blocks: dict[tuple[str, str, str, int], list[tuple[float, float]]] = {}
    for (template, model, gpu, tp), measured in BEYOND.items():
        for (i, o), value in zip(BEYOND_LENGTHS, measured, strict=True):
            if (model, gpu, tp, i, o) not in held:  # else a corpus row already
                errors = cell(template, model, gpu, tp, i, o, BEYOND_REQUESTS[i, o], float(value))
                blocks.setdefault((template, model, gpu, tp), []).append(errors)
    print()
    for (_, model, gpu, tp), cells in blocks.items():
        print(f"{model:14} {gpu:9} {tp:2} {len(cells):2} cells: " + _medians(cells, "fitted"))
    print()
    for template, name in ((FP8, "FP8"), (FP4, "FP4")):
        cells = [c for key, block in blocks.items() if key[0] == template for c in block]
        print(f"{name}: {len(cells)} cells: " + _medians(cells, "with the fitted profile")
              + f"; median signed {statistics.median(e for e, _ in cells):+.1%}, "
              f"{statistics.median(h for _, h in cells):+.1%}")  # fmt: skip


def newer() -> None:
    cell = _cells(NEWER_GROUP_LEFT_OUT)
    cells = [
        cell(template, model, gpu, tp, i, o, NEWER_REQUESTS[i, o], float(per_gpu * tp))
        for (template, model, gpu, tp), table in NEWER.items()
        for (i, o), per_gpu in table.items()
    ]
    print(f"\n{len(cells)} cells: " + _medians(cells, "with the fitted profile"))


def _cells(left_out: str) -> Callable[..., tuple[float, float]]:
    """Print the cells' header, and return a cell's check: a corpus row of the template's
    mapping moved to the cell (model, accelerator, TP, lengths, requests, its measured value),
    predicted by the fitted profile and by the one fitted without the source `left_out`; it
    prints the cell's line and returns its two errors."""
    from dataclasses import replace

    from ridgeline.engines import builtin_engines

    by_id = {r.id: r for r in corpus.rows()}
    fitted = builtin_engines()[by_id[FP8].engine]
    fold = report.fold_profile(fitted, report.folds()[by_id[FP8].engine][left_out])
    print(f"{'model':14} {'gpu':9} {'tp':>2} {'in/out':>11} {'measured':>9} {'predicted':>9} "
          f"{'error':>7} {'held out':>8}")  # fmt: skip

    def cell(template: str, model: str, gpu: str, tp: int, i: int, o: int, requests: int,
             measured: float) -> tuple[float, float]:  # fmt: skip
        row = replace(by_id[template], id="cell", model=model, gpu=gpu, tp=tp, input=i, output=o,
                      requests=requests, measured=measured)  # fmt: skip
        pred = corpus.predict(row, fitted)
        error, held_error = corpus.error(row, pred), corpus.error(row, corpus.predict(row, fold))
        print(f"{model:14} {gpu:9} {tp:2} {f'{i}/{o}':>11} {measured:9.0f} {pred:9.0f} "
              f"{error:+7.1%} {held_error:+8.1%}")  # fmt: skip
        return error, held_error

    return cell


def _medians(cells: list[tuple[float, float]], fitted: str) -> str:
    """The median |error| of the cells, fitted and held out."""
    e, h = [c[0] for c in cells], [c[1] for c in cells]
    return f"median |error| {report.median_abs(e):.1%} {fitted}, {report.median_abs(h):.1%} held out"


if __name__ == "__main__":
    main()
