"""The simulate stage: each survivor run only as far as the answer needs.

The answer is the cheapest point whose run met the SLO and the Pareto front of those that
met it ($ per million tokens against p99 TTFT and TPOT). A point needs its whole run only if
it could be in that answer; a point that is sure to miss, or that a point already run and
met beats on all three, cannot be. So the survivors go cheapest first, WINDOW at a time, and
each point of a window is decided with what the windows before it found:

1. bound: a point beaten by a met point on its cost and on the closed forms' least p99s
   (prune.bounds) is "dominated" without a run (fidelity "bound");
2. screen: the others run the first requests of their own run (stage.screen: the first
   replica's first 1/24 of them, then, for those still undecided, 1/6), which bounds the whole
   run's p99s from below; a bound past a target is "missed", a point beaten on the bounds
   "dominated" (fidelity "screen");
3. full: the rest run whole, WHOLE_BATCH at a time, cheapest and furthest inside the SLO first,
   and are met, missed or error; a point that a met point of an earlier batch beats on its
   screen's bounds is "dominated" without its run (fidelity "screen").

Beaten means a met point Q with Q's cost <= P's, Q's p99 TTFT <= P's least and Q's p99 TPOT
<= P's least, one of them strictly: then Q is at least as good as P on all three and better on
one, so P is on no front and is not the cheapest. A point's cost is known before its run:
its $ per hour and its run's token means, which come from the requests alone (stage.run_means).
The answer is therefore the one an exhaustive run gives (`Settings.exhaustive`, which runs
every survivor whole; tests/test_search_fidelity.py compares the two), on one condition.

The condition, for the screen: adding later requests to a run never serves an earlier one
sooner. Each engine admits in arrival order, and a later request only adds tokens to steps
(which the step price makes no faster) and competes for the batch and the KV cache. It is a
property of the simulator, not a theorem about every scheduler: it held for every screened
request of a ninth of the README's example's points (153: the first replica's first 100 and
400 of 2,400 requests; and 151 with the fleet's first 200, 400 and 800);
tests/test_search.py screens and runs whole every point of a small space (three workloads),
and tests/test_search_fidelity.py holds every whole run's p99s to its `*_least_s` columns.

Every executor gives the same rows: a window's decisions read only the windows before it
and its own earlier batches, the windows' and batches' sizes are constants, and a point's
screen and run depend on the point alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ridgeline.errors import RidgelineError
from ridgeline.search.executors import Session
from ridgeline.search.prune import SLACK, Bounds
from ridgeline.search.stage import LEAST, Context, Screened, Task, point_row, run_means, token_costs

WINDOW = 32  # points decided together at most: the windows before them decide what they need
FIRST_WINDOW = 4  # the first windows are smaller (4, 8, 16): the cheapest points that meet the
# SLO are held against the next ones sooner
WHOLE_BATCH = 2  # whole runs sent together: a batch's met points can beat the next batches' points
SCREENS = (24, 6)  # a screen runs the first 1/24 of a point's requests; a second one 1/6
OnRow = Callable[[dict[str, Any]], None]


@dataclass
class Work:
    screened: int = 0  # screens run
    full: int = 0  # whole runs


@dataclass
class Least:
    """The least each p99 of a point's whole run can be, and the most share of requests that
    can meet every target."""

    ttft_s: float | None
    tpot_s: float | None
    e2e_s: float | None
    attainment: float

    @classmethod
    def of(cls, b: Bounds) -> Least:
        """The closed forms' least p99s and most attainment (prune.bounds)."""
        return cls(b.ttft_s, b.tpot_s, b.e2e_s, b.attainment)

    @classmethod
    def of_row(cls, row: dict[str, Any]) -> Least:
        """The bounds a decided point's row holds."""
        ttft, tpot, e2e = (row[column] for column in LEAST.values())
        return cls(ttft, tpot, e2e, row["slo_attainment_most"])

    def raised(self, s: Screened) -> Least:
        """With a screen's bounds: the larger of each."""

        def most(a: float | None, b: float | None) -> float | None:
            return b if a is None else a if b is None else max(a, b)

        return Least(
            most(self.ttft_s, s.ttft_s), most(self.tpot_s, s.tpot_s), most(self.e2e_s, s.e2e_s),
            min(self.attainment, s.attainment),
        )  # fmt: skip

    def missed(self, ctx: Context) -> bool:
        """No run above these bounds meets the SLO."""
        if ctx.attainment is not None:
            return self.attainment < ctx.attainment * (1 - SLACK)
        for key in LEAST:
            limit, least = getattr(ctx.slo, key), getattr(self, key)
            if limit is not None and least is not None and least * (1 - SLACK) > limit:
                return True
        return False

    def columns(self) -> dict[str, Any]:
        return {column: getattr(self, key) for key, column in LEAST.items()} | {
            "slo_attainment_most": self.attainment
        }


@dataclass
class Met:
    """The points run whole that met the SLO: what a later point is held against."""

    cost: list[float] = field(default_factory=list)
    ttft_s: list[float] = field(default_factory=list)
    tpot_s: list[float] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    arrays: tuple[Any, ...] | None = None  # cost, ttft_s and tpot_s as arrays, until the next add

    def add(self, row: dict[str, Any]) -> None:
        self.cost.append(row["usd_per_million_tokens"])
        self.ttft_s.append(row["ttft_p99_s"])
        self.tpot_s.append(0.0 if row["tpot_p99_s"] is None else row["tpot_p99_s"])  # as answer.py reads it
        self.keys.append(row["key"])
        self.arrays = None

    def beaten_by(self, cost: float, least: Least) -> str | None:
        """The first met point that beats any run of this cost above these bounds, or None."""
        if not self.keys or least.ttft_s is None:
            return None
        import numpy as np

        if self.arrays is None:  # a window's points all read the same met points
            self.arrays = tuple(np.asarray(x) for x in (self.cost, self.ttft_s, self.tpot_s))
        c, t, p = self.arrays
        ttft = least.ttft_s * (1 - SLACK)
        tpot = 0.0 if least.tpot_s is None else least.tpot_s * (1 - SLACK)
        beats = (c <= cost) & (t <= ttft) & (p <= tpot) & ((c < cost) | (t < ttft) | (p < tpot))
        found = np.flatnonzero(beats)
        return self.keys[found[0]] if len(found) else None


def screen_requests(per_point: int) -> tuple[int, ...]:
    """Requests of each screen of a run of `per_point` (the first replica's, at most)."""
    return tuple(max(1, math.ceil(per_point / share)) for share in SCREENS)


def fixed_means(ctx: Context, tasks: Sequence[Task]) -> tuple[float, float] | None:
    """A run's token means when every seed draws the same lengths (a trace, fixed lengths)."""
    w = ctx.workload
    same = w.trace is not None or (w.prompt.kind == "fixed" and w.output.kind == "fixed")
    return run_means(ctx, tasks[0]) if same and tasks else None


def simulate_stage(
    ctx: Context,
    tasks: Sequence[Task],
    closed: Sequence[Bounds],
    session: Session,
    done: dict[str, dict[str, Any]],
    on_row: OnRow,
    per_point: int,
    work: Work,
    exhaustive: bool = False,
) -> None:
    """Decide every task (cheapest first; `closed` its closed-form bounds) that `done` does not
    hold yet, handing each final row to `on_row` and counting the runs it took in `work`."""
    stage = Stage(ctx, session, done, on_row, work, screen_requests(per_point), exhaustive)
    stage.means = None if exhaustive else fixed_means(ctx, tasks)
    spans = windows(len(tasks))
    for i, (start, end) in enumerate(spans):
        after, last = spans[i + 1] if i + 1 < len(spans) else (end, end)  # the next window
        stage.window(tasks[start:end], closed[start:end], tasks[after:last], closed[after:last])


def windows(n: int) -> list[tuple[int, int]]:
    """(start, end) of each window over n points: FIRST_WINDOW, twice that, ... up to WINDOW."""
    out, start, size = [], 0, FIRST_WINDOW
    while start < n:
        out.append((start, min(n, start + size)))
        start, size = start + size, min(2 * size, WINDOW)
    return out


@dataclass
class Stage:
    """The windows, one after another: each one's points bounded, screened short, screened
    longer and run whole, a batch of tasks each (the executor runs a batch on every worker)."""

    ctx: Context
    session: Session
    done: dict[str, dict[str, Any]]
    on_row: OnRow
    work: Work
    screens: tuple[int, ...]
    exhaustive: bool
    means: tuple[float, float] | None = None  # every run's token means, when they are the same
    met: Met = field(default_factory=Met)
    points: dict[str, tuple[Task, Least]] = field(default_factory=dict)  # the window's
    whole: list[Task] = field(default_factory=list)  # the window's points to run whole
    undecided: list[Task] = field(default_factory=list)  # after the window's last screen
    screens_of: dict[str, Screened] = field(default_factory=dict)  # the window's last screen of each point

    def window(
        self,
        tasks: Sequence[Task],
        closed: Sequence[Bounds],
        upcoming: Sequence[Task] = (),
        upcoming_closed: Sequence[Bounds] = (),
    ) -> None:
        """Bound, screen (short, then longer), run whole; then the window's met points join
        those the next windows are held against. The next window's (`upcoming`) first
        screens are sent with the whole runs, for workers that would otherwise wait for
        the last of them: that window's decisions still wait for this one's met points."""
        self.points = {t.key: (t, Least.of(b)) for t, b in zip(tasks, closed, strict=True)}
        self.whole = []
        self.screens_of = {}
        screens: list[Task] = []
        resumed: list[str] = []
        for key, (task, least) in self.points.items():
            if key in self.done:
                resumed.append(key)
                continue
            if self.exhaustive:
                self.whole.append(task)
                continue
            if self.means is not None and (beaten := self.beaten_on_bounds(task, least)) is not None:
                self.emit(decided(self.ctx, task, least, "bound", "dominated", beaten, self.means))
                continue
            screens.append(task)
        for n in self.screens:
            self.undecided = []
            self.session.run([replace(task, screen=n) for task in screens], self.screened)
            screens = self.undecided
        self.whole += screens
        ahead = self.first_screens(upcoming, upcoming_closed) if self.whole else []
        if self.exhaustive:
            self.session.run(self.whole, self.ran, ahead)
            for key in self.points:
                if (row := self.done.get(key)) is not None and row["status"] == "met":
                    self.met.add(row)
            return
        self.run_whole(ahead, resumed)

    def run_whole(self, ahead: Sequence[Task], resumed: Sequence[str]) -> None:
        """The window's whole runs, WHOLE_BATCH at a time, in `promise`'s order: each batch's
        met points join those the later batches are held against, so a point that one of them
        beats is decided without its run. Points run whole by an earlier, interrupted search
        (`resumed`) keep their place in the order and are not run again: the rows are those of
        a search never interrupted."""
        order = sorted(
            [self.points[key][0] for key in resumed if self.done[key]["fidelity"] == "full"] + self.whole,
            key=self.promise,
        )
        while order:
            order = [task for task in order if not self.beaten_now(task)]
            batch, order = order[:WHOLE_BATCH], order[WHOLE_BATCH:]
            self.session.run([task for task in batch if task.key not in self.done], self.ran, ahead)
            for task in batch:
                if (row := self.done[task.key])["status"] == "met":
                    self.met.add(row)

    def promise(self, task: Task) -> tuple[float, float, str]:
        """Cheapest first, then the furthest inside the SLO's targets on its least p99s (a
        point that beats others has low ones), then by key: the order of the window's whole
        runs. Only what a resumed row holds too: its cost from its requests alone (as its run
        counts it), its bounds as its screens left them."""
        row = self.done.get(task.key)
        least = Least.of_row(row) if row is not None else self.points[task.key][1]
        try:
            cost = self.cost(task, self.means or run_means(self.ctx, task))
        except RidgelineError:  # its requests cannot be drawn: its run says why, last
            cost = math.inf
        margin = 0.0
        for key in LEAST:
            limit, value = getattr(self.ctx.slo, key), getattr(least, key)
            if limit and value is not None:
                margin += value / limit
        return cost, margin, task.key

    def beaten_now(self, task: Task) -> bool:
        """Whether a point the window's earlier batches ran beats this one on its screen's
        bounds (it is then decided, as a screen's point is)."""
        s = self.screens_of.get(task.key)
        if task.key in self.done or s is None or s.error is not None:
            return False
        least = self.points[task.key][1]
        tokens = (s.prompt_tokens_mean, s.output_tokens_mean)
        beaten = self.met.beaten_by(self.cost(task, tokens), least)
        if beaten is not None:
            self.emit(decided(self.ctx, task, least, "screen", "dominated", beaten, tokens, s))
        return beaten is not None

    def first_screens(self, tasks: Sequence[Task], closed: Sequence[Bounds]) -> list[Task]:
        """The first screens the next window will likely run: its points not done, less
        those the met points so far already beat on their bounds (more met points can
        only beat more, so these are never screened)."""
        if self.exhaustive or not self.screens:
            return []
        return [
            replace(task, screen=self.screens[0])
            for task, b in zip(tasks, closed, strict=True)
            if task.key not in self.done and self.beaten_on_bounds(task, Least.of(b)) is None
        ]

    def beaten_on_bounds(self, task: Task, least: Least) -> str | None:
        """The met point that beats this one on its closed-form bounds alone, with no run (when
        the run's token means, and so its cost, are known before it), or None."""
        if self.means is None:
            return None
        return self.met.beaten_by(self.cost(task, self.means), least)

    def screened(self, s: Screened) -> None:
        task, least = self.points[s.key]
        self.work.screened += 1
        if s.error is not None:  # the whole run decides, and says why
            self.whole.append(task)
            return
        least = least.raised(s)
        self.points[s.key] = (task, least)
        self.screens_of[s.key] = s
        tokens = (s.prompt_tokens_mean, s.output_tokens_mean)
        if least.missed(self.ctx):
            self.emit(decided(self.ctx, task, least, "screen", "missed", None, tokens, s))
        elif (beaten := self.met.beaten_by(self.cost(task, tokens), least)) is not None:
            self.emit(decided(self.ctx, task, least, "screen", "dominated", beaten, tokens, s))
        else:
            self.undecided.append(task)

    def ran(self, row: dict[str, Any]) -> None:
        self.work.full += 1
        self.emit(row | self.points[row["key"]][1].columns())

    def emit(self, row: dict[str, Any]) -> None:
        self.done[row["key"]] = row
        self.on_row(row)

    def cost(self, task: Task, tokens: tuple[float, float]) -> float:
        return token_costs(self.ctx, task.usd_per_hour(self.ctx), *tokens)["usd_per_million_tokens"]


def decided(
    ctx: Context,
    task: Task,
    least: Least,
    fidelity: str,
    status: str,
    beaten_by: str | None,
    means: tuple[float, float],
    s: Screened | None = None,
) -> dict[str, Any]:
    """The row of a point decided without its whole run: its bounds, its cost, no p99s."""
    row = point_row(ctx, task)
    row.update(
        status=status,
        fidelity=fidelity,
        dominated_by=beaten_by,
        requests=0 if s is None else s.requests,
        kv_tokens=None if s is None else s.kv_tokens,
        prompt_tokens_mean=means[0],
        output_tokens_mean=means[1],
        **token_costs(ctx, row["usd_per_hour"], *means),
        **least.columns(),
    )
    return row
