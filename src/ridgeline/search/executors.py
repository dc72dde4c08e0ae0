"""Where the simulate stage runs: in this process, on a pool of local processes, or as Ray
tasks on a Ray cluster. A session starts the workers once (and hands them the context once);
each `run` of a batch of tasks calls `on_done` with every finished task as it arrives, in
whatever order they finish; what a task gives depends on the task alone (its seed comes from
its point's key), so every executor gives the same rows.

Ctrl-C: pool workers ignore SIGINT; the parent stops waiting, hands on every row already
finished (`on_row`), stops the workers and re-raises, so no finished point is lost. Ray's
pending tasks are cancelled the same way.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import re
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ridgeline.errors import RidgelineError
from ridgeline.search.stage import Context, Task, pool_worker, ray_task, simulate_task

OnDone = Callable[[Any], None]  # a row (dict) or a Screened
MAX_WORKERS = 1024
RAY_HINT = "pip install 'ridgeline[ray]'"
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$")


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class Executor:
    """`local` with `workers` processes (1: this process alone), or `ray` at `address`
    (auto: the cluster `ray start` left running; local: a Ray started here, on loopback;
    else HOST:PORT or ray://HOST:PORT)."""

    kind: str = "local"
    workers: int = 1
    address: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "workers": self.workers, "address": self.address}

    def prestart(self) -> PoolSession | None:
        """A local pool's workers, started now so that their start-up (a fresh interpreter
        and its imports each) overlaps the prune stage; `session` hands them their context.
        None where the stage would not run on a local pool."""
        if self.kind != "local" or self.workers <= 1:
            return None
        pool = PoolSession(None, self.workers)
        pool.start()
        return pool

    def session(self, ctx: Context, most: int, started: PoolSession | None = None) -> Session:
        """Workers for a stage of at most `most` points, started when the session is entered
        (or already, by `prestart`: `started`, closed here when the stage does not use it)."""
        if self.kind == "ray":
            return RaySession(ctx, self.address or "auto", self.workers)
        if self.workers <= 1 or most <= 1:
            if started is not None:
                started.close()
            return Session(ctx)
        if started is not None:
            started.ctx = ctx  # a worker or two more than `most` wait idle: rows do not depend on it
            return started
        return PoolSession(ctx, min(self.workers, most))


class Session:
    """This process alone: each task runs here, in order."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def run(self, tasks: Sequence[Task], on_done: OnDone, after: Sequence[Task] = ()) -> None:
        """Run `tasks`, each result to `on_done`. `after`: tasks a later `run` will likely ask
        for, which a pool starts once these are under way (its workers would otherwise wait
        for this batch's last ones); a session without spare workers ignores them."""
        for task in tasks:
            on_done(simulate_task(self.ctx, task))


def make_executor(workers: int | None, ray: str | None) -> Executor:
    """The executor the options ask for, checked before anything runs."""
    if workers is not None:
        from ridgeline.checks import check_size

        check_size("--workers", workers, 1, MAX_WORKERS)
    if ray is None:
        return Executor("local", workers if workers is not None else cores())
    address = check_ray_address(ray)
    if address != "local" and workers is not None:
        raise RidgelineError("--workers sets a local pool; on a Ray cluster its CPUs decide: drop --workers")
    try:
        import ray as _  # noqa: F401
    except ImportError:
        raise RidgelineError(f"--ray needs Ray: {RAY_HINT}") from None
    return Executor("ray", workers if workers is not None else cores(), address)


def check_ray_address(text: str) -> str:
    """auto, local, HOST:PORT or ray://HOST:PORT; anything else is refused before Ray starts."""
    value = text.strip() if isinstance(text, str) else ""
    if value.lower() in ("auto", "local"):
        return value.lower()
    rest = value.removeprefix("ray://")
    host, sep, port = rest.rpartition(":")
    host = host.strip("[]")
    ok = bool(sep) and port.isascii() and port.isdigit() and 0 < int(port[:6] or 0) < 65536
    if ok:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            ok = bool(_HOST.match(host))
    if not ok:
        raise RidgelineError(
            f"--ray {text!r:.80} is not auto, local, HOST:PORT or ray://HOST:PORT; "
            "e.g. --ray auto on a node of a cluster started with `ray start --head`"
        )
    return value


GROUP_POINTS = 8  # tasks of one deployment handed to a pool worker at once


def groups(tasks: Sequence[Task], size: int = GROUP_POINTS) -> list[list[Task]]:
    """The tasks in runs of one deployment, at most `size` a run: a worker then fills its
    step model of a deployment once for the run (simulate.run.step_model)."""
    out: list[list[Task]] = []
    for task in tasks:
        last = out[-1] if out else None
        if last and last[0].deployment == task.deployment and len(last) < size:
            last.append(task)
        else:
            out.append([task])
    return out


def ident(task: Task) -> tuple[str, int]:
    """A task's name in a pool's messages: its point and its screen (0: the whole run)."""
    return task.key, task.screen


def start_method() -> str:
    """How a pool's workers start: forked on Linux while this process runs its main thread
    alone (a fork copies no other thread, and so no lock another thread holds), with numpy
    and the simulator loaded once, here, for every worker; spawned elsewhere (a fresh
    interpreter each, and its imports)."""
    import threading

    # Python's threads only: native pools (pyarrow's, a BLAS's) are not counted, so a pool
    # must start before this process writes Parquet or multiplies matrices (run.search
    # starts it first)
    if sys.platform == "linux" and threading.active_count() == 1:
        import numpy  # noqa: F401  # the stages need it (bounds, long runs): loaded once, before the fork

        return "fork"
    return "spawn"


class PoolSession(Session):
    """`workers` processes (forked or spawned: start_method), each given the context once,
    then runs of one deployment's tasks from a shared queue; each result comes back the
    moment its task finishes. Tasks sent ahead (`run`'s `after`) queue behind the batch;
    their results wait here until a `run` asks for them. A worker that dies (killed, out of
    memory) stops the search with one line instead of leaving it waiting."""

    def __init__(self, ctx: Context | None, workers: int) -> None:
        super().__init__(ctx)  # type: ignore[arg-type]  # None until `prestart`'s session sets it
        self.workers = workers
        self.procs: list[Any] = []
        self.pipes: list[Any] = []  # each worker's, for its context
        self.closed = False
        self.sent: set[tuple[str, int]] = set()  # in a worker's hands or queued, not back yet
        self.kept: dict[tuple[str, int], Any] = {}  # back, not asked for yet

    def start(self) -> None:
        """Start the workers; each waits for its context (`__enter__` sends it)."""
        import multiprocessing

        mp: Any = multiprocessing.get_context(start_method())
        for stream in (sys.stdout, sys.stderr):  # a forked worker flushes its copy as it ends
            if stream is not None:
                stream.flush()
        self.inbox: Any = mp.Queue()
        self.outbox: Any = mp.Queue()
        for _ in range(self.workers):
            reader, writer = mp.Pipe(duplex=False)
            self.procs.append(
                mp.Process(target=pool_worker, args=(reader, self.inbox, self.outbox), daemon=True)
            )
            self.pipes.append(writer)
        for proc in self.procs:
            proc.start()

    def __enter__(self) -> PoolSession:
        if not self.procs:
            self.start()
        for pipe in self.pipes:
            pipe.send(self.ctx)
        return self

    def send(self, tasks: Sequence[Task]) -> None:
        """Queue the tasks not already sent: whole runs before screens (the longest first: no
        worker is left with one at the end), in runs of one deployment short enough that
        every worker has some."""
        tasks = [t for t in tasks if ident(t) not in self.sent and ident(t) not in self.kept]
        size = max(1, min(GROUP_POINTS, len(tasks) // (2 * self.workers)))
        for group in groups(sorted(tasks, key=lambda t: (t.screen > 0, t.deployment, t.key)), size):
            self.inbox.put(group)
        self.sent.update(ident(t) for t in tasks)

    def receive(self) -> tuple[tuple[str, int], Any] | None:
        """The next result back (None after half a second without one), or the worker's
        failure or death as one line."""
        import queue

        try:
            kind, name, value = self.outbox.get(timeout=0.5)
        except queue.Empty:
            dead = [p.exitcode for p in self.procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(
                    f"a simulate-stage worker died (exit code {dead[0]}); the points it ran are "
                    "not in the results: --resume runs them again"
                ) from None
            return None
        if kind == "error":
            raise RuntimeError(f"a simulate-stage worker failed: {value}")
        self.sent.discard(name)
        return name, value

    def run(self, tasks: Sequence[Task], on_done: OnDone, after: Sequence[Task] = ()) -> None:
        import queue

        self.send(tasks)
        self.send(after)
        wanted = {ident(t) for t in tasks}
        done = 0

        def take(name: tuple[str, int], value: Any) -> None:
            nonlocal done
            if name in wanted:
                done += 1
                on_done(value)
            else:
                self.kept[name] = value  # sent ahead: a later run's

        for task in tasks:
            if ident(task) in self.kept:
                take(ident(task), self.kept.pop(ident(task)))
        try:
            while done < len(tasks):
                got = self.receive()
                if got is not None:
                    take(*got)
        except KeyboardInterrupt:
            while True:  # every result already back is a finished task: keep it
                try:
                    kind, name, value = self.outbox.get_nowait()
                except queue.Empty:
                    break
                if kind == "done":
                    take(name, value)
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            if exc[0] is None:
                while self.sent:  # tasks sent ahead that no run asked for: a worker must not
                    self.receive()  # wait at its exit on results nobody reads
                for _ in self.procs:  # a clean end: each worker finishes its loop
                    self.inbox.put(None)
                for proc in self.procs:
                    proc.join(timeout=5)
        finally:
            self.close()

    def close(self) -> None:
        """Stop the workers (those still running: terminated) and close the queues; a
        pool never entered tells its workers there is no context. Once only."""
        if self.closed or not self.procs:
            return
        self.closed = True
        for pipe in self.pipes:
            with contextlib.suppress(OSError):  # OSError: it has ended already
                pipe.send(None)  # a worker still waiting for its context ends
            pipe.close()
        for proc in self.procs:
            if proc.is_alive():
                proc.terminate()
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for q in (self.inbox, self.outbox):
            q.cancel_join_thread()
            q.close()


class RaySession(Session):
    """Ray tasks, a few per CPU in flight at once; connects to the cluster unless this process
    already has (then it leaves the connection as it found it)."""

    def __init__(self, ctx: Context, address: str, workers: int) -> None:
        super().__init__(ctx)
        self.address = address
        self.workers = workers
        self.started = False

    def __enter__(self) -> RaySession:
        import ray

        self.started = not ray.is_initialized()
        if self.started:
            connect(ray, self.address, self.workers)
        try:
            self.token = uuid.uuid4().hex
            self.boxed = [ray.put(self.ctx)]
            self.remote = ray.remote(num_cpus=1)(ray_task)
            self.window = max(4, 4 * int(ray.cluster_resources().get("CPU", 1)))
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def run(self, tasks: Sequence[Task], on_done: OnDone, after: Sequence[Task] = ()) -> None:
        import ray

        pending: list[Any] = []
        sent = 0

        def top_up() -> None:
            nonlocal sent
            while sent < len(tasks) and len(pending) < self.window:
                pending.append(self.remote.remote(self.boxed, self.token, tasks[sent]))
                sent += 1

        top_up()
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for result in ray.get(done):
                    on_done(result)
                top_up()
        except KeyboardInterrupt:
            if pending:
                done, pending = ray.wait(pending, num_returns=len(pending), timeout=0)
                for result in ray.get(done):
                    on_done(result)
            for ref in pending:
                ray.cancel(ref, force=True)
            raise

    def __exit__(self, *exc: object) -> None:
        if self.started:
            import ray

            ray.shutdown()
            self.started = False


def reachable(address: str, timeout_s: float = 5.0) -> None:
    """Something answers at HOST:PORT, or one line says not (Ray itself would retry for minutes)."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise RidgelineError(
            f"nothing answers at {address!r} ({exc.strerror or type(exc).__name__}): start the cluster's "
            "head with `ray start --head` and give its address, or use --ray local or --workers N"
        ) from None


def connect(ray: Any, address: str, workers: int) -> None:
    """ray.init, with one line for the user when there is no cluster to join."""
    quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
    if address not in ("auto", "local"):
        reachable(address)
    try:
        if address == "local":  # a Ray of our own, on loopback only
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            ray.init(
                address="local",
                num_cpus=workers,
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                **quiet,
            )
        else:
            ray.init(address=address, **quiet)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RidgelineError(
            f"cannot join the Ray cluster at {address!r} ({reason[:200]}): start one with "
            "`ray start --head` (a cluster with token authentication also needs RAY_AUTH_MODE=token "
            "here), or use --ray local or --workers N"
        ) from None
