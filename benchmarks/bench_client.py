"""Client overhead: how late does `ridgeline measure` stamp a token?

A local server (a separate process) streams tokens at a known rate and writes into each
chunk the moment it sent it, read from CLOCK_MONOTONIC (time.perf_counter on Linux, the
same clock in every process); it keeps its connections open between requests, as serving
engines do. The client, ridgeline's own streaming code, stamps each chunk on arrival. The
difference is the client's timestamp overhead: loopback, the event loop, the HTTP reader
(or httpx, `--via httpx`) and whatever else the client does meanwhile, such as parsing the
streams that ended, under C concurrent streams. Beside it, the floor: the same streams read
by a bare asyncio reader that only stamps and keeps each read. Each row says the machine's
load (the 1-minute average) when it ran: on a shared machine, read the figures with it.

It also times the client's CPU: per chunk (the slope between streams of 10 and 50 tokens)
and per request, and spreads the streams over client processes as `--workers` does.

    python benchmarks/bench_client.py                      # 1, 100 and 500 streams; 1 and 2 workers
    python benchmarks/bench_client.py --streams 500 --workers 1,2,4 --tokens 20 --interval-ms 100
    python benchmarks/bench_client.py --via httpx          # the same over httpx: the old client
    python benchmarks/bench_client.py --repeat 5           # five interleaved rounds, and their spread
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import gc
import itertools
import json
import os
import selectors
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

try:
    import ridgeline  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ridgeline.measure.client import Endpoint, Stream, make_client, open_streams, send

# --- the server: raw asyncio, HTTP/1.1, chunked SSE, connections kept alive ------------------


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def serve(port: int, tokens: int, interval_s: float) -> None:
    """Each request gets `max_tokens` chunks `interval_s` apart, each holding its send time,
    then usage, [DONE] and the end of the body; the connection stays open for the next
    request, as a serving engine's does (so no stream ends in a connection's teardown)."""

    async def stream(writer: asyncio.StreamWriter, count: int) -> None:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        due = time.perf_counter()
        head, send = b'data: {"choices":[{"index":0,"text":"', writer.transport.write
        for i in range(count):
            due += interval_s
            await asyncio.sleep(max(due - time.perf_counter(), 0.0))
            tail = b' ","finish_reason":%s}]}\n\n' % (b'"length"' if i == count - 1 else b"null")
            # as little as can be between the stamp and the bytes leaving: a descheduled
            # server here would count as the client's lag
            stamp = b"%.9f" % time.perf_counter()
            send(b"%x\r\n%s%s%s\r\n" % (len(head) + len(stamp) + len(tail), head, stamp, tail))
            await writer.drain()
        usage = f'{{"choices":[],"usage":{{"completion_tokens":{count}}}}}'
        writer.write(_chunk(f"data: {usage}\n\ndata: [DONE]\n\n".encode()) + _chunk(b""))
        await writer.drain()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(h.split(b":")[1])
                        for h in head.split(b"\r\n")
                        if h.lower().startswith(b"content-length")
                    ),
                    0,
                )
                body = json.loads(await reader.readexactly(length) or b"{}")
                await stream(writer, int(body.get("max_tokens") or tokens))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def collect() -> None:  # the garbage collector, in a task of its own
        while True:
            await asyncio.sleep(1.0)
            gc.collect()

    # A collection that starts between a chunk's time stamp and its write would count as
    # the client's lag: the collector runs only in its own task, between writes.
    gc.disable()
    gc.freeze()
    collector = asyncio.ensure_future(collect())
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()
    collector.cancel()


# --- the client ------------------------------------------------------------------------------


async def streams_once(url: str, streams: int, tokens: int, via: str = "wire") -> tuple[list[Stream], float]:
    """`streams` requests at once through ridgeline's client, over its own HTTP/1.1 reader
    (`wire`) or over httpx (`httpx`, what it used before, and still does through a proxy);
    and the CPU seconds it spent."""
    ep = Endpoint(base_url=url, model="bench", ignore_eos=False, timeout_s=120.0)
    async with make_client(ep, streams + 2) as client, open_streams(ep, client) as wire:
        cpu = time.process_time()
        over = wire if via == "wire" else client
        results = await asyncio.gather(*(send(over, ep, "x", tokens) for _ in range(streams)))
        return results, time.process_time() - cpu


class _Watched(selectors.DefaultSelector):
    """The event loop's selector, noting when each wait for the network began and ended, by
    the clock and by the thread's CPU time."""

    def __init__(self) -> None:
        super().__init__()
        self.waits: list[tuple[float, float]] = []  # (began, ended)
        self.walls: list[float] = []  # each wait's start and end, in order
        self.cpus: list[float] = []  # the thread's CPU time at each of those

    def select(self, timeout: float | None = None) -> Any:
        began, cpu = time.perf_counter(), time.thread_time()
        ready = super().select(timeout)
        ended = time.perf_counter()
        self.waits.append((began, ended))
        self.walls += (began, ended)
        self.cpus += (cpu, time.thread_time())
        return ready

    def cpu_at(self, t: float) -> float:
        i = min(max(bisect.bisect_right(self.walls, t), 1), len(self.walls) - 1)
        w0, w1, c0, c1 = self.walls[i - 1], self.walls[i], self.cpus[i - 1], self.cpus[i]
        return c0 + (c1 - c0) * min(max((t - w0) / (w1 - w0), 0.0), 1.0) if w1 > w0 else c0

    def own(self, got: float, sent: float) -> float:
        """The client's own part of a chunk's lag: the CPU time its thread spent from the
        send (or, if the event loop was waiting then, from the end of that wait) to the
        stamp. The rest is the kernel's and the scheduler's: delivery, wake-up, other
        processes on the core."""
        began, ended = self.waits[max(bisect.bisect_right(self.walls[1::2], got) - 1, 0)]
        return self.cpu_at(got) - self.cpu_at(ended if sent >= began else sent)


def client_process(url: str, streams: int, tokens: int, via: str = "wire") -> dict[str, Any]:
    """One client process's streams: the lag of each chunk behind its send, the client's
    own part of it, and CPU."""
    selector = _Watched()
    loop = asyncio.SelectorEventLoop(selector)
    try:
        results, cpu_s = loop.run_until_complete(streams_once(url, streams, tokens, via))
    finally:  # as asyncio.run ends
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    lag: list[float] = []
    own: list[float] = []
    steady: list[float] = []
    gap_error: list[float] = []
    for s in results:
        if s.error:
            continue
        sent = [float(t.split()[0]) for t in s.texts]
        lags = [got - at for got, at in zip(s.token_times_s, sent, strict=True)]
        lag += lags
        own += [selector.own(got, at) for got, at in zip(s.token_times_s, sent, strict=True)]
        steady += lags[2:]  # past the start, when 500 connections open at once
        got_gaps = [b - a for a, b in itertools.pairwise(s.token_times_s)]
        sent_gaps = [b - a for a, b in itertools.pairwise(sent)]
        gap_error += [abs(g - h) for g, h in zip(got_gaps, sent_gaps, strict=True)]
    failed = sum(1 for s in results if s.error)
    return {
        "lag": lag,
        "own": own,
        "steady": steady,
        "gap_error": gap_error,
        "failed": failed,
        "cpu_s": cpu_s,
    }


def run_row(url: str, streams: int, tokens: int, workers: int, via: str = "wire") -> dict[str, Any]:
    """The streams spread over `workers` client processes, as `measure --workers` does."""
    if workers == 1:
        parts = [client_process(url, streams, tokens, via)]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        shares = [streams // workers + (i < streams % workers) for i in range(workers)]
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
            jobs = [url] * workers, shares, [tokens] * workers, [via] * workers
            parts = list(pool.map(client_process, *jobs))
    lag = [x for p in parts for x in p["lag"]]
    own = [x for p in parts for x in p["own"]]
    steady = [x for p in parts for x in p["steady"]]
    gap_error = [x for p in parts for x in p["gap_error"]]

    def p99(xs: list[float]) -> float:
        return statistics.quantiles(xs, n=100, method="inclusive")[98]

    return {
        "streams": streams,
        "workers": workers,
        "failed": sum(p["failed"] for p in parts),
        "chunks": len(lag),
        "overhead_p50_s": statistics.median(lag),
        "overhead_p99_s": p99(lag),
        "overhead_max_s": max(lag),
        "own_p99_s": p99(own),
        "steady_p99_s": p99(steady),
        "itl_error_p99_s": p99(gap_error),
        "cpu_per_chunk_s": sum(p["cpu_s"] for p in parts) / max(len(lag), 1),
    }


class _Bare(asyncio.BufferedProtocol):
    """The floor: a reader that only stamps each read and keeps a copy of its bytes, with no
    HTTP and no parsing; the stream is over at the end of its body (the server's last chunk
    ends with the last-chunk marker, `0` and a blank line)."""

    def __init__(self, buffer: memoryview) -> None:
        self.buffer = buffer
        self.reads: list[tuple[float, bytes]] = []
        self.closed = asyncio.get_running_loop().create_future()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        self.reads.append((time.perf_counter(), self.buffer[:nbytes].tobytes()))
        if self.reads[-1][1].endswith(b"\r\n0\r\n\r\n") and not self.closed.done():
            self.closed.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def _floor(port: int, streams: int, tokens: int) -> list[float]:
    loop = asyncio.get_running_loop()
    body = json.dumps({"max_tokens": tokens}).encode()
    request = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    readers, transports = [], []
    buffer = memoryview(bytearray(64 * 1024))
    for _ in range(streams):
        transport, reader = await loop.create_connection(lambda: _Bare(buffer), "127.0.0.1", port)
        transport.write(request)
        readers.append(reader)
        transports.append(transport)
    await asyncio.gather(*(r.closed for r in readers))
    for transport in transports:
        transport.close()
    return [
        now - float(part.split(b" ")[0])
        for r in readers
        for now, data in r.reads
        for part in data.split(b'"text":"')[1:]
    ]


def floor_cpu(port: int, streams: int, tokens: int) -> float:
    cpu = time.process_time()
    asyncio.run(_floor(port, streams, tokens))
    return time.process_time() - cpu


def floor_row(port: int, streams: int, tokens: int) -> dict[str, Any]:
    """The same streams read by the bare reader: what Python's event loop alone allows."""
    lag = asyncio.run(_floor(port, streams, tokens))
    return {
        "streams": streams,
        "chunks": len(lag),
        "overhead_p50_s": statistics.median(lag),
        "overhead_p99_s": statistics.quantiles(lag, n=100, method="inclusive")[98],
        "overhead_max_s": max(lag),
    }


def cpu_cost(
    port: int, streams: int = 100, tokens: tuple[int, int] = (10, 50), via: str = "wire"
) -> dict[str, float]:
    """CPU per chunk as the slope between two stream lengths (the fixed cost of a request,
    its connection and its record, drops out), and CPU per request as the intercept; and
    the bare reader's slope, the event loop's own share of a chunk."""
    url = f"http://127.0.0.1:{port}/v1"
    few, many = (client_process(url, streams, n, via)["cpu_s"] for n in tokens)
    bare_few, bare_many = (floor_cpu(port, streams, n) for n in tokens)
    chunks = streams * (tokens[1] - tokens[0])
    return {
        "cpu_per_chunk_s": (many - few) / chunks,
        "cpu_per_request_s": few / streams - tokens[0] * (many - few) / chunks,
        "floor_cpu_per_chunk_s": (bare_many - bare_few) / chunks,
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def _print_row(r: dict[str, Any]) -> None:
    """A row of the table; a floor row (no workers) leaves the client's columns blank."""

    def ms(key: str, width: int = 10) -> str:
        return f"{r[key] * 1e3:>{width}.3f} ms" if key in r else " " * (width + 3)

    workers, failed = r.get("workers", "floor"), r.get("failed", "")
    cpu = f"{r['cpu_per_chunk_s'] * 1e6:>7.1f} µs" if "cpu_per_chunk_s" in r else " " * 10
    print(
        f"{r['streams']:>8} {workers:>7} {r['chunks']:>7} {failed:>6} {ms('overhead_p50_s')}"
        f" {ms('overhead_p99_s')} {ms('overhead_max_s')} {ms('own_p99_s')} {ms('steady_p99_s', 13)}"
        f" {ms('itl_error_p99_s')}"
        f" {cpu} {r['load']:>5}",
        flush=True,
    )


def _print_cost(cost: dict[str, Any]) -> None:
    print(
        f"client CPU: {cost['cpu_per_chunk_s'] * 1e6:.1f} µs per chunk (slope, 100 streams of 10 and 50"
        f" tokens), {cost['cpu_per_request_s'] * 1e6:.0f} µs per request; a bare reader that only"
        f" stamps: {cost['floor_cpu_per_chunk_s'] * 1e6:.1f} µs per chunk; load {cost['load']}",
        flush=True,
    )


def _spread(xs: list[float], scale: float, unit: str) -> str:
    return f"median {statistics.median(xs) * scale:.2f} {unit} ({min(xs) * scale:.2f}–{max(xs) * scale:.2f})"


@contextlib.contextmanager
def _server(tokens: int, interval_ms: float, nice: int) -> Iterator[int]:
    """The bench's server in a process of its own, at that niceness; its port, once it listens."""
    port = free_port()
    pace = ["--tokens", str(tokens), "--interval-ms", str(interval_ms), "--server-nice", str(nice)]
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port), *pace])
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        yield port
    finally:
        server.terminate()
        server.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description="ridgeline measure: client timestamp overhead")
    ap.add_argument("--streams", default="1,100,500", help="concurrent streams, comma-separated")
    ap.add_argument("--workers", default="1,2", help="client processes to try at each (--workers)")
    ap.add_argument("--tokens", type=int, default=20, help="tokens per stream")
    ap.add_argument("--interval-ms", type=float, default=100.0, help="gap between a stream's tokens")
    ap.add_argument("--via", default="wire", choices=("wire", "httpx"), help="the client's transport")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of every row, interleaved")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    ap.add_argument(
        "--server-nice",
        type=int,
        default=10,
        help="the niceness of the server the overhead rows read from: a core it shares with the "
        "client goes to the client first, as if it ran on a machine of its own (0: equal shares; "
        "the CPU slope always reads from a server with equal shares)",
    )
    ap.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        os.nice(args.server_nice)
        asyncio.run(serve(args.serve, args.tokens, args.interval_ms / 1e3))
        return 0
    rate = 1e3 / args.interval_ms
    each = f"{args.tokens} tokens per stream at {rate:g} tokens/s each"
    print(f"{each} (server in its own process), client over {args.via}; load: the 1-minute load average")
    costs: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    floors: list[dict[str, Any]] = []
    with (
        _server(args.tokens, args.interval_ms, 0) as even,
        _server(args.tokens, args.interval_ms, args.server_nice) as port,
    ):
        url = f"http://127.0.0.1:{port}/v1"
        for _ in range(args.repeat):
            costs.append(cpu_cost(even, via=args.via) | {"load": _load()})
            _print_cost(costs[-1])
            print(
                " streams workers  chunks failed  overhead p50  overhead p99  overhead max      own p99"
                "  p99 after start  ITL error p99  CPU/chunk  load"
            )
            for n in map(int, args.streams.split(",")):
                floors.append(floor_row(port, n, args.tokens) | {"load": _load()})
                _print_row(floors[-1])
                for w in (w for w in map(int, args.workers.split(",")) if w <= n):
                    rows.append(run_row(url, n, args.tokens, w, args.via) | {"load": _load()})
                    _print_row(rows[-1])
    print("floor: a bare asyncio reader that only stamps and keeps each read, on the same server")
    print(
        "own: the client's own part of a chunk's lag, the CPU time it spent from the send (or, if its"
        " event loop was waiting then, from the end of that wait) to the stamp"
    )
    if args.repeat > 1:
        print(f"over {args.repeat} rounds, timestamp overhead p99:")
        for key in dict.fromkeys((r["streams"], r["workers"]) for r in rows):
            same = [r for r in rows if (r["streams"], r["workers"]) == key]
            total, own = (
                _spread([r["overhead_p99_s"] for r in same], 1e3, "ms"),
                _spread([r["own_p99_s"] for r in same], 1e3, "ms"),
            )
            print(f"  {key[0]} streams, {key[1]} worker(s): {total}; own {own}")
        for n in dict.fromkeys(f["streams"] for f in floors):
            got = [f["overhead_p99_s"] for f in floors if f["streams"] == n]
            print(f"  {n} streams, floor: {_spread(got, 1e3, 'ms')}")
        print(f"  CPU per chunk: {_spread([c['cpu_per_chunk_s'] for c in costs], 1e6, 'µs')}")
    if args.out:
        figures = {"tokens": args.tokens, "interval_ms": args.interval_ms, "cpu": costs}
        Path(args.out).write_text(json.dumps(figures | {"rows": rows, "floor": floors}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
