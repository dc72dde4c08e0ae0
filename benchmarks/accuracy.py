"""How close the engine profiles come to published measurements: every corpus row, its
predicted and measured value and the signed error, in-sample and with the row's source left
out of the fit; then the median and worst error by regime and by engine.

Run: python benchmarks/accuracy.py [--rows] [--markdown]   (the README's accuracy table is
its --markdown output, pasted by hand)
"""

from __future__ import annotations

import argparse
import statistics
import time

from ridgeline.accuracy import corpus, report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", action="store_true", help="print every row")
    ap.add_argument("--markdown", action="store_true", help="the summary as a Markdown table")
    args = ap.parse_args()
    t0 = time.perf_counter()
    checked = report.check()
    took = time.perf_counter() - t0
    if args.rows:
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
    optimistic = sum(corpus.optimistic(c.row, c.held_out) for c in checked)
    print(f"\n{len(checked)} rows in {took:.1f} s; held-out predictions faster than measured: "
          f"{optimistic / len(checked):.0%}; median signed held-out error "
          f"{statistics.median(c.held_out_error for c in checked):+.1%}")  # fmt: skip


if __name__ == "__main__":
    main()
