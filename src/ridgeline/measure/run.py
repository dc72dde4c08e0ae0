"""A measured run: prompts prepared up front, then each load point in turn (closed-loop
concurrency or an arrival rate), every finished request appended to the records at once.

Nothing is timed while prompts are built. When the stream carries no usage, the output
is counted by the tokenizer in the background, so a worker sends its next request at
once; if the run is interrupted first, the record is written with the chunk count.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ridgeline import metrics
from ridgeline.measure import records
from ridgeline.measure.client import Endpoint, Stream, clock, make_client, send
from ridgeline.measure.tokens import Tokenizer, discover, local_tokenizer
from ridgeline.measure.workload import Point, arrival_gaps_s, exact_prompt, request_seed

WARMUP_TOKENS = 4  # output tokens of a warm-up request


@dataclass(frozen=True)
class Plan:
    points: list[Point]
    requests: int  # per point
    output_tokens: int
    duration_s: float | None = None  # per point: stop sending new requests after this
    warmup: int = 1
    warmup_each_point: bool = False
    burstiness: float = 1.0
    seed: int = 0
    tokenizer: str | None = None  # a local .gguf or tokenizer.json


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

    def write(self, rec: dict[str, Any]) -> None:
        metrics.append_record(self.handle, rec)
        self.written += 1
        self.hooks.on_record(rec)

    def flush_pending(self) -> None:
        """Interrupted: write what background counts were still waiting for."""
        for task, fallback in list(self.pending.items()):
            if not task.done():
                task.cancel()
                self.write(fallback())
        self.pending.clear()


async def choose_tokenizer(client: Any, ep: Endpoint, plan: Plan, hooks: Hooks) -> Tokenizer:
    if plan.tokenizer:
        return local_tokenizer(plan.tokenizer)
    found = await discover(client, ep.base_url, ep.model)
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
                    for p, rid in warm:
                        if p == point:
                            await send(client, ep, prompts[p, rid].text, WARMUP_TOKENS)
                    run_point = closed_loop if point.rate_per_s is None else open_loop
                    await run_point(client, ep, tok, plan, point, todo[point], prompts, writer, run_start)
                    await asyncio.gather(*writer.pending)
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
                plan.output_tokens,
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
            s = await send(client, ep, prompts[point, rid].text, plan.output_tokens)
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
            s = await send(client, ep, prompts[point, rid].text, plan.output_tokens)
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
