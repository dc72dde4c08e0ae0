"""A measured run: prompts prepared up front, then each load point in turn (closed-loop
concurrency or an arrival rate), every finished request appended to the records at once.

Nothing is timed while prompts are built. When the stream carries no usage, the output
is counted by the tokenizer in the background, so a worker sends its next request at
once; if the run is interrupted first, the record is written with the chunk count.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ridgeline import metrics
from ridgeline.checks import check_positive, check_size
from ridgeline.measure import records, workload
from ridgeline.measure.client import (
    CONNECT_KINDS,
    MAX_TIMEOUT_S,
    Endpoint,
    Stream,
    classify,
    clock,
    make_client,
    send,
)
from ridgeline.measure.tokens import Tokenizer, discover, local_tokenizer
from ridgeline.measure.workload import Point, arrival_gaps_s, exact_prompt, request_seed

WARMUP_TOKENS = 4  # output tokens of a warm-up request


@dataclass(frozen=True)
class Plan:
    """What to send. Every number is checked here, not only by the command line: a NaN
    burstiness would spin the arrival sampler forever, a zero rate divide by zero."""

    points: list[Point]
    requests: int  # per point
    output_tokens: int  # decode steps: the tokens after the first (options.OUTPUT_HELP)
    duration_s: float | None = None  # per point: stop sending new requests after this
    warmup: int = 1
    warmup_each_point: bool = False
    burstiness: float = 1.0
    seed: int = 0
    tokenizer: str | None = None  # a local .gguf or tokenizer.json

    def __post_init__(self) -> None:
        if not self.points:
            from ridgeline.errors import RidgelineError

            raise RidgelineError("no load points: give --concurrency or --rate")
        for p in self.points:
            workload.check_point(p)
        check_size("--requests", self.requests, maximum=workload.MAX_REQUESTS)
        check_size("--output-tokens", self.output_tokens, maximum=workload.MAX_TOKENS)
        check_size("--warmup", self.warmup, minimum=0, maximum=workload.MAX_WARMUP)
        check_size("--seed", self.seed, minimum=-(2**63), maximum=2**63 - 1)
        workload.check_burstiness(self.burstiness)
        if self.duration_s is not None:
            check_positive("--duration", self.duration_s, hi=MAX_TIMEOUT_S)

    @property
    def max_tokens(self) -> int:
        """What the server is asked for: the prefill's first token, then one a step."""
        return self.output_tokens + 1


class Unreachable(Exception):
    """No request at a load point got a connection (or none got through TLS): the run
    stops, since every later request would fail the same way."""

    def __init__(self, kind: str, url: str, detail: str, failed: int = 0, where: str = "") -> None:
        self.kind, self.url, self.detail, self.failed, self.where = kind, url, detail, failed, where
        super().__init__(self.message)

    @property
    def message(self) -> str:
        scope = f" for all {self.failed} requests at {self.where}" if self.failed else ""
        if self.kind == "TLS error":
            return (
                f"TLS with {self.url} failed{scope} ({self.detail}): pass --ca-bundle FILE for a "
                "private CA, or --insecure"
            )
        return (
            f"server unreachable at {self.url}: {self.kind}{scope} ({self.detail}); "
            "is it running, and is the URL right?"
        )


class Stop:
    """A signal handler (signal.signal(SIGTERM, stop)) that stops a run as Ctrl-C does:
    the run's task is cancelled at its next await, so no record is torn, the pending ones
    are written, and the caller prints the summary. `signum` says which signal came."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __call__(self, signum: int, frame: Any) -> None:
        self.signum = signum
        if self._loop is not None and self._task is not None:
            self._loop.call_soon_threadsafe(self._task.cancel)

    async def guard(self, coro: Coroutine[Any, Any, Any]) -> None:
        """Run `coro` so that the signal cancels it; a signal before it starts skips it."""
        if self.signum is not None:
            coro.close()
            return
        self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
        try:
            await coro
        except asyncio.CancelledError:
            if self.signum is None:
                raise  # not ours: Ctrl-C, whose handler turns it into KeyboardInterrupt
        finally:
            self._loop = self._task = None


@dataclass
class Hooks:
    """What the command line shows while the run goes on."""

    on_note: Callable[[str], None] = lambda text: None
    on_point: Callable[[int, Point, int], None] = lambda index, point, todo: None
    on_record: Callable[[dict[str, Any]], None] = lambda rec: None


@dataclass
class Prepared:
    text: str
    tokens: int


@dataclass
class Writer:
    """Appends each record the moment it is complete; tracks background token counts."""

    handle: Any
    hooks: Hooks
    written: int = 0
    pending: dict[asyncio.Task[None], Callable[[], dict[str, Any]]] = field(default_factory=dict)
    point_written: int = 0  # of the current load point, and their errors by kind
    point_kinds: Counter[str] = field(default_factory=Counter)
    point_error: str = ""  # the last error message of the point

    def write(self, rec: dict[str, Any]) -> None:
        metrics.append_record(self.handle, rec)
        self.written += 1
        self.point_written += 1
        if rec.get("error"):
            self.point_kinds[str(rec.get("error_kind"))] += 1
            self.point_error = str(rec["error"])
        self.hooks.on_record(rec)

    def start_point(self) -> None:
        self.point_written, self.point_kinds, self.point_error = 0, Counter(), ""

    def unreachable(self, ep: Endpoint, point: Point) -> Unreachable | None:
        """Every request of the point failed before a connection: the server is not there."""
        failed = sum(self.point_kinds[k] for k in CONNECT_KINDS)
        if not self.point_written or failed < self.point_written:
            return None
        kind = self.point_kinds.most_common(1)[0][0]
        detail = self.point_error.removeprefix(f"{kind}: ")
        return Unreachable(kind, ep.shown_url, detail, failed, point.label)

    def flush_pending(self) -> None:
        """Interrupted: write what background counts were still waiting for."""
        for task, fallback in list(self.pending.items()):
            if not task.done():
                task.cancel()
                self.write(fallback())
        self.pending.clear()


async def choose_tokenizer(client: Any, ep: Endpoint, plan: Plan, hooks: Hooks) -> Tokenizer:
    import httpx

    if plan.tokenizer:
        return local_tokenizer(plan.tokenizer)
    try:
        found = await discover(client, ep.base_url, ep.model)
    except httpx.TransportError as exc:  # no connection at all: say so now, not after every request
        kind, message = classify(exc, Stream(), ep)
        raise Unreachable(kind, ep.shown_url, ep.redactor.clip(message)) from None
    if found:
        return found
    hooks.on_note(
        "warning: the server has no tokenize endpoint and no --tokenizer was given: prompt lengths are "
        "estimates (about one token a word), and output counts fall back to chunks when usage is missing"
    )
    return Tokenizer("estimate", overhead=1)


async def prepare(client: Any, tok: Tokenizer, jobs: list[tuple[Point, int]], seed: int) -> list[Prepared]:
    gate = asyncio.Semaphore(8)

    async def one(point: Point, rid: int) -> Prepared:
        async with gate:
            text, count = await exact_prompt(client, tok, point.prompt_tokens, request_seed(seed, point, rid))
            return Prepared(text, count)

    return list(await asyncio.gather(*(one(p, r) for p, r in jobs)))


async def run(plan: Plan, ep: Endpoint, out: Path, resume: bool, hooks: Hooks) -> int:
    """Run the plan, appending records to `out`; returns how many this run wrote."""
    earlier = records.prepare_file(out, resume)
    todo = {p: sorted(set(range(plan.requests)) - records.done_ids(earlier, p)) for p in plan.points}
    caps = [p.concurrency for p in plan.points]
    connections = None if None in caps else max(c for c in caps if c is not None) + 2
    async with make_client(ep, connections) as client:
        tok = await choose_tokenizer(client, ep, plan, hooks)
        active = [p for p in plan.points if todo[p]]
        warm = [
            (p, -1 - i) for p in active[: None if plan.warmup_each_point else 1] for i in range(plan.warmup)
        ]
        jobs = [(p, rid) for p in plan.points for rid in todo[p]] + warm
        hooks.on_note(f"preparing {len(jobs)} prompts with the {tok.source} tokenizer")
        prompts = dict(zip(jobs, await prepare(client, tok, jobs, plan.seed), strict=True))
        run_start = clock()
        with out.open("a", encoding="utf-8") as handle:
            writer = Writer(handle, hooks)
            try:
                for index, point in enumerate(plan.points):
                    if not todo[point]:
                        continue
                    hooks.on_point(index, point, len(todo[point]))
                    writer.start_point()
                    for p, rid in warm:
                        if p == point:
                            await send(client, ep, prompts[p, rid].text, WARMUP_TOKENS)
                    run_point = closed_loop if point.rate_per_s is None else open_loop
                    await run_point(client, ep, tok, plan, point, todo[point], prompts, writer, run_start)
                    await asyncio.gather(*writer.pending)
                    if (dead := writer.unreachable(ep, point)) is not None:
                        raise dead
            finally:
                writer.flush_pending()
    return writer.written


def _finisher(
    client: Any,
    ep: Endpoint,
    tok: Tokenizer,
    plan: Plan,
    point: Point,
    prompts: dict[tuple[Point, int], Prepared],
    writer: Writer,
    run_start: float,
) -> Callable[[Stream, int, float], None]:
    """Turn a finished stream into a record: at once when N is known, else after a count."""

    def finish(s: Stream, rid: int, arrival_s: float) -> None:
        prepared = prompts[point, rid]

        def record(counted: int | None = None) -> dict[str, Any]:
            return records.build(
                s,
                point,
                rid,
                prepared.tokens,
                tok.source,
                plan.max_tokens,
                run_start,
                arrival_s,
                counted,
                ep.model,
            )

        if s.completion_tokens is not None or not s.token_times_s or tok.source == "estimate":
            writer.write(record())
            return

        async def count_then_write() -> None:
            import httpx

            try:
                counted = await tok.count_generated(client, "".join(s.texts))
            except (httpx.HTTPError, ValueError, KeyError):
                counted = None
            writer.pending.pop(task, None)
            writer.write(record(counted))

        task = asyncio.ensure_future(count_then_write())
        writer.pending[task] = record

    return finish


async def closed_loop(
    client: Any,
    ep: Endpoint,
    tok: Tokenizer,
    plan: Plan,
    point: Point,
    ids: list[int],
    prompts: dict[tuple[Point, int], Prepared],
    writer: Writer,
    run_start: float,
) -> None:
    """C workers; each sends its next request the moment its last one finishes."""
    finish = _finisher(client, ep, tok, plan, point, prompts, writer, run_start)
    queue = iter(ids)
    deadline = clock() + plan.duration_s if plan.duration_s else math.inf

    async def worker() -> None:
        for rid in queue:
            if clock() > deadline:
                return
            arrival_s = clock() - run_start
            s = await send(client, ep, prompts[point, rid].text, plan.max_tokens)
            finish(s, rid, arrival_s)

    await asyncio.gather(*(worker() for _ in range(point.concurrency or 1)))


async def open_loop(
    client: Any,
    ep: Endpoint,
    tok: Tokenizer,
    plan: Plan,
    point: Point,
    ids: list[int],
    prompts: dict[tuple[Point, int], Prepared],
    writer: Writer,
    run_start: float,
) -> None:
    """Arrivals on a schedule (gamma gaps at the rate), at most `concurrency` in flight;
    a request that waits for a free slot keeps its scheduled arrival time, so the wait
    shows as queue_s rather than vanishing (coordinated omission)."""
    finish = _finisher(client, ep, tok, plan, point, prompts, writer, run_start)
    gate = asyncio.Semaphore(point.concurrency or len(ids) or 1)
    assert point.rate_per_s is not None
    gaps = arrival_gaps_s(len(ids), point.rate_per_s, plan.burstiness, plan.seed + point.prompt_tokens)
    start = clock()
    deadline = start + plan.duration_s if plan.duration_s else math.inf

    async def one(rid: int, arrival: float) -> None:
        async with gate:
            s = await send(client, ep, prompts[point, rid].text, plan.max_tokens)
        finish(s, rid, arrival - run_start)

    tasks = []
    due = start
    for rid, gap in zip(ids, gaps, strict=True):
        due += gap
        if due > deadline:
            break
        await asyncio.sleep(max(due - clock(), 0.0))
        tasks.append(asyncio.ensure_future(one(rid, due)))
    await asyncio.gather(*tasks)
