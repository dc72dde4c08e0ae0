"""Client overhead: how late does `ridgeline measure` stamp a token?

A local server (a separate process) streams tokens at a known rate and writes into each
chunk the moment it sent it, read from CLOCK_MONOTONIC (time.perf_counter on Linux, the
same clock in every process). The client, ridgeline's own streaming code, stamps each
chunk on arrival. The difference is the client's timestamp overhead: loopback, the event
loop, httpx and the SSE parsing, under C concurrent streams.

    python benchmarks/bench_client.py                      # 1, 100 and 500 streams
    python benchmarks/bench_client.py --streams 500 --tokens 20 --interval-ms 100
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

try:
    import ridgeline  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ridgeline.measure.client import Endpoint, make_client, send

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
            await reader.readexactly(length)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                b"Connection: close\r\n\r\n"
            )
            due = time.perf_counter()
            for i in range(tokens):
                due += interval_s
                await asyncio.sleep(max(due - time.perf_counter(), 0.0))
                finish = '"length"' if i == tokens - 1 else "null"
                sent = time.perf_counter()
                body = (
                    f'data: {{"choices":[{{"index":0,"text":"{sent:.9f} ","finish_reason":{finish}}}]}}\n\n'
                )
                writer.write(_chunk(body.encode()))
                await writer.drain()
            usage = f'{{"choices":[],"usage":{{"completion_tokens":{tokens}}}}}'
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


async def run_streams(url: str, streams: int) -> dict[str, float]:
    ep = Endpoint(base_url=url, model="bench", ignore_eos=False, timeout_s=120.0)
    async with make_client(ep, streams + 2) as client:
        results = await asyncio.gather(*(send(client, ep, "x", 16) for _ in range(streams)))
    lag, steady, gap_error = [], [], []
    failed = sum(1 for s in results if s.error)
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
    q = statistics.quantiles(lag, n=100, method="inclusive")
    return {
        "streams": streams,
        "failed": failed,
        "chunks": len(lag),
        "overhead_p50_s": statistics.median(lag),
        "overhead_p99_s": q[98],
        "overhead_max_s": max(lag),
        "steady_p99_s": statistics.quantiles(steady, n=100, method="inclusive")[98],
        "itl_error_p99_s": statistics.quantiles(gap_error, n=100, method="inclusive")[98],
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> int:
    ap = argparse.ArgumentParser(description="ridgeline measure: client timestamp overhead")
    ap.add_argument("--streams", default="1,100,500", help="concurrent streams, comma-separated")
    ap.add_argument("--tokens", type=int, default=20, help="tokens per stream")
    ap.add_argument("--interval-ms", type=float, default=100.0, help="gap between a stream's tokens")
    ap.add_argument("--out", default=None, help="write the figures as JSON here")
    ap.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve, args.tokens, args.interval_ms / 1e3))
        return 0
    port = free_port()
    pace = ["--tokens", str(args.tokens), "--interval-ms", str(args.interval_ms)]
    server = subprocess.Popen([sys.executable, __file__, "--serve", str(port), *pace])
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        rows = [
            asyncio.run(run_streams(f"http://127.0.0.1:{port}/v1", int(n))) for n in args.streams.split(",")
        ]
    finally:
        server.terminate()
        server.wait()
    rate = 1e3 / args.interval_ms
    print(f"{args.tokens} tokens per stream at {rate:g} tokens/s each (server in its own process)")
    print(
        " streams  chunks  failed  overhead p50  overhead p99  overhead max  p99 after start  ITL error p99"
    )
    for r in rows:
        print(
            f"{r['streams']:>8} {r['chunks']:>7} {r['failed']:>7} {r['overhead_p50_s'] * 1e3:>10.3f} ms"
            f" {r['overhead_p99_s'] * 1e3:>10.3f} ms {r['overhead_max_s'] * 1e3:>10.3f} ms"
            f" {r['steady_p99_s'] * 1e3:>13.3f} ms"
            f" {r['itl_error_p99_s'] * 1e3:>10.3f} ms"
        )
    if args.out:
        Path(args.out).write_text(
            json.dumps({"tokens": args.tokens, "interval_ms": args.interval_ms, "rows": rows})
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
