"""A measured run: prompts prepared up front, then each load point in turn (closed-loop
concurrency or an arrival rate), every finished request appended to the records at once.

Nothing is timed while prompts are built. When the stream carries no usage, the output
is counted by the tokenizer in the background, so a worker sends its next request at
once; if the run is interrupted first, the record is written with the chunk count.
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
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
    open_streams,
    send,
)
from ridgeline.measure.tokens import Tokenizer, discover, local_tokenizer
from ridgeline.measure.workload import Point, arrival_gaps_s, exact_prompt, request_seed

WARMUP_TOKENS = 4  # output tokens of a warm-up request
MAX_SEED = 2**63 - 1  # simulate's bound too: one seed means the same in every command


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
        check_size("--seed", self.seed, minimum=0, maximum=MAX_SEED)  # as simulate takes it
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
        if self.handle is not None:  # None: a parent whose workers write
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
        found = await discover(client, ep.base_url, ep.model, ep.timeout_s)
    except httpx.TransportError as exc:  # no connection at all: say so now, not after every request
        kind, message = classify(exc, Stream(), ep)
        raise Unreachable(kind, ep.shown_url, ep.redactor.clip(message)) from None
    if found:
        return found
    hooks.on_note(
        f"warning: the server has no tokenize endpoint that answers within --timeout ({ep.timeout_s:g} s) "
        "and no --tokenizer was given: prompt lengths are "
        "estimates (about one token a word), and output counts fall back to chunks when usage is missing"
    )
    return Tokenizer("estimate", overhead=1)


async def prepare(
    client: Any, tok: Tokenizer, jobs: list[tuple[Point, int]], seed: int, ep: Endpoint
) -> list[Prepared]:
    """Every prompt, counted, before anything is sent. A tokenize endpoint that answered at
    discovery and then fails (an error status, a reply that never ends) stops the run in one
    line: a prompt of unknown length would make its record lie."""
    import httpx

    from ridgeline.errors import RidgelineError

    gate = asyncio.Semaphore(8)

    async def one(point: Point, rid: int) -> Prepared:
        async with gate:
            text, count = await exact_prompt(client, tok, point.prompt_tokens, request_seed(seed, point, rid))
            return Prepared(text, count)

    tasks = [asyncio.ensure_future(one(p, r)) for p, r in jobs]
    try:
        return list(await asyncio.gather(*tasks))
    except (httpx.HTTPError, ValueError, KeyError, TypeError) as exc:
        if tok.source != "server" or isinstance(exc, RidgelineError):
            raise
        why = ep.redactor.clip(f"{tok.url}: {str(exc) or type(exc).__name__}", 300)
        raise RidgelineError(
            f"the server's tokenize endpoint failed while the prompts were prepared ({why}); nothing "
            "was sent: pass --tokenizer FILE (a .gguf or tokenizer.json) to count tokens locally"
        ) from None
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def run(plan: Plan, ep: Endpoint, out: Path, resume: bool, hooks: Hooks, workers: int = 1) -> int:
    """Run the plan, appending records to `out`; returns how many this run wrote. With
    `workers` > 1 the streams of each point are spread over that many processes."""
    check_size("--workers", workers, maximum=MAX_WORKERS)
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
        prompts = dict(zip(jobs, await prepare(client, tok, jobs, plan.seed, ep), strict=True))
        run_start = clock()
        if workers > 1:
            job = {
                "ep": ep,
                "plan": plan,
                "tok": replace(tok, local=None),
                "out": str(out),
                "run_start": run_start,
            }
            return await _in_workers(workers, job, plan, ep, todo, prompts, warm, hooks)
        async with open_streams(ep, client) as streams:
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
                                await send(streams, ep, prompts[p, rid].text, WARMUP_TOKENS)
                        (share,) = shares(plan, point, todo[point], prompts, 1, clock())
                        await run_share(streams, client, ep, tok, plan, share, writer, run_start)
                        if (dead := writer.unreachable(ep, point)) is not None:
                            raise dead
                finally:
                    writer.flush_pending()
    return writer.written


@dataclass(frozen=True)
class Share:
    """What one process runs of a load point: its requests and their prompts, its part of
    the concurrency (closed loop: that many in flight; open loop: at most that many, None
    for no cap) and, open loop, its arrivals on the point's schedule (rid, clock reading)."""

    point: Point
    prompts: dict[int, Prepared]
    concurrency: int | None
    arrivals: list[tuple[int, float]] | None
    deadline: float  # no request is sent after this clock reading


def shares(
    plan: Plan, point: Point, ids: list[int], prompts: dict[tuple[Point, int], Prepared], n: int, start: float
) -> list[Share]:
    """The point split over n processes (fewer when the concurrency is smaller): closed
    loop, the concurrency as evenly as it goes and the requests dealt in proportion; open
    loop, the schedule drawn once from `start` and its arrivals dealt in turn."""
    deadline = start + plan.duration_s if plan.duration_s else math.inf
    cap = point.concurrency
    if point.rate_per_s is None:
        cap = cap or 1
    used = min(n, cap) if cap else n
    parts = [cap // used + (i < cap % used) for i in range(used)] if cap else [None] * used
    if point.rate_per_s is None:
        owner = [i for i, k in enumerate(parts) for _ in range(k or 0)]  # in-flight slot -> process
        dealt: list[list[int]] = [[] for _ in range(used)]
        for k, rid in enumerate(ids):
            dealt[owner[k % len(owner)]].append(rid)
        return [
            Share(point, {rid: prompts[point, rid] for rid in dealt[i]}, parts[i], None, deadline)
            for i in range(used)
        ]
    gaps = arrival_gaps_s(len(ids), point.rate_per_s, plan.burstiness, plan.seed + point.prompt_tokens)
    dues = list(itertools.accumulate(gaps, initial=start))[1:]
    schedule = list(zip(ids, dues, strict=True))
    return [
        Share(
            point,
            {rid: prompts[point, rid] for rid, _ in schedule[i::used]},
            parts[i],
            schedule[i::used],
            deadline,
        )
        for i in range(used)
    ]


async def run_share(
    streams: Any,
    client: Any,
    ep: Endpoint,
    tok: Tokenizer,
    plan: Plan,
    share: Share,
    writer: Writer,
    run_start: float,
) -> None:
    """Send a share's requests, write their records, and wait for any background counts."""
    finish = _finisher(client, ep, tok, plan, share.point, share.prompts, writer, run_start)
    if share.arrivals is None:
        await closed_loop(streams, ep, plan, share, finish, run_start)
    else:
        await open_loop(streams, ep, plan, share, finish, run_start)
    await asyncio.gather(*writer.pending)


def _finisher(
    client: Any,
    ep: Endpoint,
    tok: Tokenizer,
    plan: Plan,
    point: Point,
    prompts: dict[int, Prepared],
    writer: Writer,
    run_start: float,
) -> Callable[[Stream, int, float], None]:
    """Turn a finished stream into a record: at once when N is known, else after a count."""

    def finish(s: Stream, rid: int, arrival_s: float) -> None:
        prepared = prompts[rid]

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
    streams: Any,
    ep: Endpoint,
    plan: Plan,
    share: Share,
    finish: Callable[[Stream, int, float], None],
    run_start: float,
) -> None:
    """C workers; each sends its next request the moment its last one finishes."""
    queue = iter(share.prompts)

    async def worker() -> None:
        for rid in queue:
            if clock() > share.deadline:
                return
            arrival_s = clock() - run_start
            s = await send(streams, ep, share.prompts[rid].text, plan.max_tokens)
            finish(s, rid, arrival_s)

    await asyncio.gather(*(worker() for _ in range(share.concurrency or 1)))


async def open_loop(
    streams: Any,
    ep: Endpoint,
    plan: Plan,
    share: Share,
    finish: Callable[[Stream, int, float], None],
    run_start: float,
) -> None:
    """Arrivals on a schedule (gamma gaps at the rate), at most `concurrency` in flight;
    a request that waits for a free slot keeps its scheduled arrival time, so the wait
    shows as queue_s rather than vanishing (coordinated omission)."""
    arrivals = share.arrivals or []
    gate = asyncio.Semaphore(share.concurrency or len(arrivals) or 1)

    async def one(rid: int, arrival: float) -> None:
        async with gate:
            s = await send(streams, ep, share.prompts[rid].text, plan.max_tokens)
        finish(s, rid, arrival - run_start)

    tasks = []
    for rid, due in arrivals:
        if due > share.deadline:
            break
        await asyncio.sleep(max(due - clock(), 0.0))
        tasks.append(asyncio.ensure_future(one(rid, due)))
    await asyncio.gather(*tasks)


# --- worker processes ------------------------------------------------------------------------
#
# With --workers N the parent prepares everything (file, tokenizer, prompts) and then deals
# each point out as Shares to N processes (`python -c ...workers.main()`), one event loop
# each. A worker appends its records to the one JSONL itself, each a single O_APPEND write
# of a whole line, so lines never interleave and a killed parent loses no finished request;
# it tells the parent of each (error kind, TTFT) to count and show. Workers run in their own
# session: Ctrl-C and SIGTERM reach the parent, which tells them to stop; they flush what
# they hold and exit. A worker whose parent vanishes (its stdin closes) does the same.
#
# Messages are pickled frames, eight bytes of length first: parent -> worker ("warm",
# texts), ("share", Share), ("stop",); worker -> parent ("ready",), ("record", slim),
# ("done",), ("error", text).

MAX_WORKERS = 256
SLIM_KEYS = ("error", "error_kind", "ttft_s", "e2e_s", "send_s", "output_tokens")
STOP_GRACE_S = 30.0  # for workers to flush and exit once told to stop


def send_frame(stream: Any, message: Any) -> None:
    import pickle

    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(8, "big") + data)
    stream.flush()


def read_frame(stream: Any) -> Any:
    """The next message, or None at the end of the stream."""
    import pickle

    head = stream.read(8)
    if len(head) < 8:
        return None
    data = stream.read(int.from_bytes(head, "big"))
    return pickle.loads(data) if data else None


class _Workers:
    """The parent's side: N processes, a thread per process reading its messages."""

    def __init__(self, n: int, job: dict[str, Any], writer: Writer) -> None:
        import subprocess
        import sys
        import threading

        self.loop = asyncio.get_running_loop()
        self.writer = writer
        self.waiting: dict[int, asyncio.Future[None]] = {}
        self.ready = [self.loop.create_future() for _ in range(n)]
        self.procs: list[Any] = []
        self.pumps: list[threading.Thread] = []
        code = "from ridgeline.measure.workers import main; main()"
        for i in range(n):
            proc = subprocess.Popen(
                [sys.executable, "-c", code],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                start_new_session=True,  # Ctrl-C goes to the parent, which stops the workers
            )
            self.procs.append(proc)
            send_frame(proc.stdin, job)
            self.pumps.append(threading.Thread(target=self._pump, args=(i,), daemon=True))
            self.pumps[-1].start()

    def _pump(self, i: int) -> None:
        stream = self.procs[i].stdout
        while (message := read_frame(stream)) is not None:
            self.loop.call_soon_threadsafe(self._deliver, i, message)
        self.loop.call_soon_threadsafe(self._deliver, i, ("exit",))

    def _deliver(self, i: int, message: tuple[Any, ...]) -> None:
        kind = message[0]
        if kind == "record":
            self.writer.write(message[1])
            return
        futures = [f for f in (self.ready[i], self.waiting.get(i)) if f is not None and not f.done()]
        if not futures:
            return
        if kind in ("ready", "done"):
            futures[0].set_result(None)
        else:
            why = message[1] if kind == "error" else "it stopped unexpectedly"
            for f in futures:
                f.set_exception(RuntimeError(f"measuring worker {i + 1}: {why}"))

    async def each(self, messages: dict[int, Any]) -> None:
        """Send worker i its message and wait until every one has done its part."""
        for i, message in messages.items():
            self.waiting[i] = self.loop.create_future()
            send_frame(self.procs[i].stdin, message)
        try:
            await asyncio.gather(*(self.waiting[i] for i in messages))
        finally:
            self.waiting.clear()

    async def stop(self) -> None:
        """Tell every worker to stop, and wait while they flush and exit."""
        for proc in self.procs:
            try:
                send_frame(proc.stdin, ("stop",))
                proc.stdin.close()
            except (BrokenPipeError, OSError, ValueError):
                pass

        def wait() -> None:
            import subprocess

            for proc in self.procs:
                try:
                    proc.wait(STOP_GRACE_S)
                except subprocess.TimeoutExpired:  # it would not stop
                    proc.kill()
                    proc.wait()
            for pump in self.pumps:
                pump.join()

        await asyncio.shield(asyncio.to_thread(wait))
        await asyncio.sleep(0)  # deliver the last messages the pumps read


async def _in_workers(
    n: int,
    job: dict[str, Any],
    plan: Plan,
    ep: Endpoint,
    todo: dict[Point, list[int]],
    prompts: dict[tuple[Point, int], Prepared],
    warm: list[tuple[Point, int]],
    hooks: Hooks,
) -> int:
    writer = Writer(None, hooks)  # the workers write; the parent counts
    pool = _Workers(n, job, writer)
    try:
        await asyncio.gather(*pool.ready)
        for index, point in enumerate(plan.points):
            if not todo[point]:
                continue
            hooks.on_point(index, point, len(todo[point]))
            writer.start_point()
            texts = [prompts[p, rid].text for p, rid in warm if p == point]
            if texts:
                await pool.each({0: ("warm", texts)})
            dealt = shares(plan, point, todo[point], prompts, n, clock() + 0.05)
            await pool.each({i: ("share", share) for i, share in enumerate(dealt)})
            if (dead := writer.unreachable(ep, point)) is not None:
                raise dead
    finally:
        await pool.stop()
    return writer.written
