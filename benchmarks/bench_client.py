"""Client overhead: how late does `ridgeline measure` stamp a token?

A local server (a separate process) streams tokens at a known rate and writes into each
chunk the moment it sent it, read from CLOCK_MONOTONIC (time.perf_counter on Linux, the
same clock in every process). The client, ridgeline's own streaming code, stamps each
chunk on arrival. The difference is the client's timestamp overhead: loopback, the event
loop, httpx and the SSE parsing, under C concurrent streams.

It also times the client's CPU: per chunk (the slope between streams of 10 and 50 tokens)
and per request, and spreads the streams over client processes as `--workers` does.

    python benchmarks/bench_client.py                      # 1, 100 and 500 streams; 1 and 2 workers
    python benchmarks/bench_client.py --streams 500 --workers 1,2,4 --tokens 20 --interval-ms 100
    python benchmarks/bench_client.py --via httpx          # the same over httpx: the old client
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

try:
    import ridgeline  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ridgeline.measure.client import Endpoint, Stream, make_client, open_streams, send

# --- the server: raw asyncio, HTTP/1.1, chunked SSE, one request per connection ------------


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def serve(port: int, tokens: int, interval_s: float) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
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
            count = int(body.get("max_tokens") or tokens)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                b"Connection: close\r\n\r\n"
            )
            due = time.perf_counter()
            for i in range(count):
                due += interval_s
                await asyncio.sleep(max(due - time.perf_counter(), 0.0))
                finish = '"length"' if i == count - 1 else "null"
                sent = time.perf_counter()
                body = (
                    f'data: {{"choices":[{{"index":0,"text":"{sent:.9f} ","finish_reason":{finish}}}]}}\n\n'
                )
                writer.write(_chunk(body.encode()))
                await writer.drain()
            usage = f'{{"choices":[],"usage":{{"completion_tokens":{count}}}}}'
            writer.write(_chunk(f"data: {usage}\n\ndata: [DONE]\n\n".encode()) + _chunk(b""))
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


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


def client_process(url: str, streams: int, tokens: int, via: str = "wire") -> dict[str, Any]:
    """One client process's streams: the lag of each chunk behind its send, and CPU."""
    results, cpu_s = asyncio.run(streams_once(url, streams, tokens, via))
    lag: list[float] = []
    steady: list[float] = []
    gap_error: list[float] = []
    for s in results:
        if s.error:
            continue
        sent = [float(t.split()[0]) for t in s.texts]
        lags = [got - at for got, at in zip(s.token_times_s, sent, strict=True)]
        lag += lags
        steady += lags[2:]  # past the start, when 500 connections open at once
        got_gaps = [b - a for a, b in itertools.pairwise(s.token_times_s)]
        sent_gaps = [b - a for a, b in itertools.pairwise(sent)]
        gap_error += [abs(g - h) for g, h in zip(got_gaps, sent_gaps, strict=True)]
    failed = sum(1 for s in results if s.error)
    return {"lag": lag, "steady": steady, "gap_error": gap_error, "failed": failed, "cpu_s": cpu_s}


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
        "steady_p99_s": p99(steady),
        "itl_error_p99_s": p99(gap_error),
        "cpu_per_chunk_s": sum(p["cpu_s"] for p in parts) / max(len(lag), 1),
    }


class _Bare(asyncio.Protocol):
    """The floor: a reader that only stamps each read, with no HTTP and no parsing."""

    def __init__(self) -> None:
        self.reads: list[tuple[float, bytes]] = []
        self.closed = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.reads.append((time.perf_counter(), data))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set_result(None)


async def _floor(port: int, streams: int, tokens: int) -> list[float]:
    loop = asyncio.get_running_loop()
    body = json.dumps({"max_tokens": tokens}).encode()
    request = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    readers = []
    for _ in range(streams):
        transport, reader = await loop.create_connection(_Bare, "127.0.0.1", port)
        transport.write(request)
        readers.append(reader)
    await asyncio.gather(*(r.closed for r in readers))
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


def main() -> int:
    ap = argparse.ArgumentParser(description="ridgeline measure: client timestamp overhead")
    ap.add_argument("--streams", default="1,100,500", help="concurrent streams, comma-separated")
    ap.add_argument("--workers", default="1,2", help="client processes to try at each (--workers)")
    ap.add_argument("--tokens", type=int, default=20, help="tokens per stream")
    ap.add_argument("--interval-ms", type=float, default=100.0, help="gap between a stream's tokens")
    ap.add_argument("--via", default="wire", choices=("wire", "httpx"), help="the client's transport")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    ap.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve, args.tokens, args.interval_ms / 1e3))
        return 0
    port = free_port()
    pace = ["--tokens", str(args.tokens), "--interval-ms", str(args.interval_ms)]
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port), *pace])
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        cost = cpu_cost(port, via=args.via)
        floors = [floor_row(port, int(n), args.tokens) for n in args.streams.split(",")]
        rows = [
            run_row(url, int(n), args.tokens, int(w), args.via)
            for n in args.streams.split(",")
            for w in args.workers.split(",")
            if int(w) <= int(n)
        ]
    finally:
        server.terminate()
        server.wait()
    rate = 1e3 / args.interval_ms
    each = f"{args.tokens} tokens per stream at {rate:g} tokens/s each"
    print(f"{each} (server in its own process), client over {args.via}")
    print(
        f"client CPU: {cost['cpu_per_chunk_s'] * 1e6:.1f} µs per chunk (slope, 100 streams of 10 and 50"
        f" tokens), {cost['cpu_per_request_s'] * 1e6:.0f} µs per request; a bare reader that only"
        f" stamps: {cost['floor_cpu_per_chunk_s'] * 1e6:.1f} µs per chunk"
    )
    print(
        " streams workers  chunks failed  overhead p50  overhead p99  overhead max  p99 after start"
        "  ITL error p99  CPU/chunk"
    )
    for r in rows:
        print(
            f"{r['streams']:>8} {r['workers']:>7} {r['chunks']:>7} {r['failed']:>6}"
            f" {r['overhead_p50_s'] * 1e3:>10.3f} ms {r['overhead_p99_s'] * 1e3:>10.3f} ms"
            f" {r['overhead_max_s'] * 1e3:>10.3f} ms {r['steady_p99_s'] * 1e3:>13.3f} ms"
            f" {r['itl_error_p99_s'] * 1e3:>10.3f} ms {r['cpu_per_chunk_s'] * 1e6:>7.1f} µs"
        )
    for f in floors:
        print(
            f"{f['streams']:>8}   floor {f['chunks']:>7}        {f['overhead_p50_s'] * 1e3:>10.3f} ms"
            f" {f['overhead_p99_s'] * 1e3:>10.3f} ms {f['overhead_max_s'] * 1e3:>10.3f} ms"
            "   (a bare asyncio reader that only stamps: the machine's floor)"
        )
    if args.out:
        figures = {"tokens": args.tokens, "interval_ms": args.interval_ms, "cpu": cost}
        Path(args.out).write_text(json.dumps(figures | {"rows": rows, "floor": floors}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
