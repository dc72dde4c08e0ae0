"""The bare HTTP/1.1 reader that times a stream (`measure/wire.py`): the body and its end
found wherever the network cuts the bytes, each event stamped by the read that completed
it, connections kept alive and reused, `[DONE]` honoured on a body that never ends, and
the work after a reply kept out of the way of the reads."""

from __future__ import annotations

import asyncio
import gc
import json
import math
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import replace
from typing import Any

from ridgeline.measure.client import Endpoint, Stream, _parse, open_streams, send
from ridgeline.measure.wire import Backlog, Wire, _Conn

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunk(data: bytes, ext: bytes = b"") -> bytes:
    return b"%x%s\r\n%s\r\n" % (len(data), ext, data)


def _token(text: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "text": text}]}).encode() + b"\n\n"


class _Clock:
    """A clock that reads 1, 2, 3, ...: the n-th read is stamped n."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return float(self.reads)


def _conn(clock: Callable[[], float] = lambda: 0.0) -> _Conn:
    wire = Wire("http://127.0.0.1:9/v1/completions", {}, False, 1.0, 1.0, clock)
    conn = _Conn(wire)
    conn.begin(0.0, 1.0, math.inf, math.inf)
    return conn


def _feed(conn: _Conn, parts: list[bytes]) -> None:
    """As asyncio's transport does: a buffer from the protocol, the bytes into it, their count."""
    for part in parts:
        buffer = conn.get_buffer(-1)
        buffer[: len(part)] = part
        conn.buffer_updated(len(part))


async def _replies(parts_of: Iterator[list[bytes]]) -> list[_Conn]:
    out = []
    for parts in parts_of:
        conn = _conn()
        _feed(conn, parts)
        out.append(conn)
    return out


def test_a_chunked_reply_survives_any_split_of_the_bytes() -> None:
    """The bare reader finds the same body, and the end of it, wherever the network cuts
    the reply: in the head, in a chunk-size line, in a payload, in a CRLF; once or twice."""
    events = [_token(" a"), b": ping\n\n", b"data: [DONE]\n\n"]
    framed = b"".join(_chunk(e, b";ext=1") for e in events) + b"0\r\nX-Trailer: t\r\n\r\n"
    reply = HEAD + framed
    n = len(reply)
    cuts = [(a, b) for a in range(1, n) for b in range(a, n, 7)]
    conns = asyncio.run(_replies(iter([reply[:a], reply[a:b], reply[b:]] for a, b in cuts)))
    for conn in conns:
        got = conn.take()
        assert got.status == 200 and got.sse and got.error is None
        assert b"".join(data for _, data in got.arrivals()) == b"".join(events)
        assert conn.ended and conn.keep  # the whole body read: the connection can serve again


def test_a_chunk_size_that_is_not_hex_is_a_protocol_error() -> None:
    async def read() -> _Conn:
        conn = _conn()
        _feed(conn, [HEAD + b"zz\r\n" + _token(" a") + b"\r\n"])
        return conn

    conn = asyncio.run(read())
    assert conn.error is not None and conn.error.kind == "protocol error"
    assert "'zz'" in conn.error.message(0)


def test_each_event_is_stamped_by_the_read_that_completed_it() -> None:
    """Three tokens: the first whole in read 2 (after the head, read 1); the second cut
    across reads 3 and 4; the third in read 5 with [DONE]. The n-th read is stamped n."""
    one, two, three = _token(" one"), _token(" two"), _token(" three")
    parts = [HEAD, _chunk(one), _chunk(two)[:9], _chunk(two)[9:], _chunk(three) + _chunk(b"data: [DONE]\n\n")]

    async def read() -> _Conn:
        conn = _conn(_Clock())
        _feed(conn, parts)
        return conn

    conn = asyncio.run(read())
    s = Stream()
    _parse(s, conn.take().arrivals())
    assert s.token_times_s == [2.0, 4.0, 5.0]
    assert s.texts == [" one", " two", " three"] and s.done


def test_done_split_across_chunks_ends_a_reply_whose_body_never_ends() -> None:
    """A server that sends `data: [DONE]` in two chunks and then holds the connection open
    without ending the body: the stream is complete, not a read timeout."""
    writes = [HEAD + _chunk(_token(" a")) + _chunk(b"data: [DO"), _chunk(b"NE]\n\n")]
    got, seen = asyncio.run(_against(_script([writes], hold=True), lambda w, ep: send(w, ep, "x", 1)))
    assert got.error is None and got.done and got.texts == [" a"]
    assert seen["connections"] == 1


def test_a_kept_alive_connection_serves_the_next_request() -> None:
    reply = HEAD + _chunk(_token(" a")) + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"

    async def three(wire: Wire, ep: Endpoint) -> list[Stream]:
        return [await send(wire, ep, "x", 1) for _ in range(3)]

    got, seen = asyncio.run(_against(_script([[reply]] * 3), three))
    assert all(s.error is None and s.texts == [" a"] for s in got)
    assert seen == {"connections": 1, "requests": 3}


def test_a_kept_alive_connection_the_server_dropped_is_retried_on_a_fresh_one() -> None:
    """The server keeps the first connection after its reply, then closes it when the next
    request comes: that request goes again, once, on a new connection."""
    reply = HEAD + _chunk(_token(" a")) + _chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"

    async def two(wire: Wire, ep: Endpoint) -> list[Stream]:
        return [await send(wire, ep, "x", 1) for _ in range(2)]

    got, seen = asyncio.run(_against(_script([[reply], None, [reply]]), two))
    assert all(s.error is None and s.texts == [" a"] for s in got)
    assert seen == {"connections": 2, "requests": 3}


def test_a_request_timeout_counts_the_tokens_that_came() -> None:
    """Two tokens, then silence shorter than the read timeout: the request's own timeout
    ends it, and says how many tokens came before."""
    writes = [HEAD + _chunk(_token(" a")) + _chunk(_token(" b"))]

    async def late(wire: Wire, ep: Endpoint) -> Stream:
        return await send(wire, replace(ep, timeout_s=0.5), "x", 5)

    got, _ = asyncio.run(_against(_script([writes], hold=True), late))
    assert got.error_kind == "request timeout"
    assert got.error == "request timeout: no complete answer within 0.5 s (2 tokens)"


def test_the_heap_is_frozen_while_streams_are_open_and_thawed_after() -> None:
    async def inside() -> int:
        ep = Endpoint(base_url="http://127.0.0.1:9/v1", model="m")
        async with open_streams(ep, None):
            return gc.get_freeze_count()

    assert asyncio.run(inside()) > 0
    assert gc.get_freeze_count() == 0


def _script(replies: list[list[bytes] | None], hold: bool = False) -> Callable[..., Awaitable[None]]:
    """A server that answers the n-th request with the n-th reply's writes (None: close the
    connection unanswered), keeps connections alive, and with `hold` never ends the last."""
    queue = iter(replies)

    async def handle(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, seen: dict[str, int]
    ) -> None:
        seen["connections"] += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                seen["requests"] += 1
                writes = next(queue)
                if writes is None:
                    return
                for data in writes:
                    writer.write(data)
                    await writer.drain()
                    await asyncio.sleep(0.01)
                if hold:
                    await reader.read()  # until the client closes
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    return handle


async def _against(handle: Callable[..., Awaitable[None]], use: Callable[[Wire, Endpoint], Any]) -> Any:
    seen = {"connections": 0, "requests": 0}
    server = await asyncio.start_server(lambda r, w: handle(r, w, seen), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    ep = Endpoint(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout_s=10, read_timeout_s=3)
    wire = Wire(ep.url, {}, False, 5.0, 3.0, time.perf_counter)
    try:
        got = await use(wire, ep)
    finally:
        wire.close()
        server.close()
        await server.wait_closed()
    return got, seen


# --- the backlog: what follows a reply waits for a lull in the reads ------------------------


class _Now:
    def __init__(self) -> None:
        self.s = 0.0

    def __call__(self) -> float:
        return self.s


def _work(log: list[str], name: str, steps: int) -> Iterator[bool]:
    for i in range(steps):
        log.append(f"{name}{i}")
        yield False
    yield True  # handed over


def test_the_backlog_waits_for_a_lull_in_the_reads() -> None:
    """Work queued during a burst of reads runs once no read has come for `quiet_s`."""

    async def go() -> list[str]:
        now, log = _Now(), []
        backlog = Backlog(now, budget_s=1.0, quiet_s=1e-3, patience_s=1.0)
        backlog.last_read_s = now.s = 10.0
        backlog.add(_work(log, "a", 2))
        now.s = 10.0005  # half the lull
        backlog._slice()
        assert log == []
        now.s = 10.001
        backlog._slice()
        backlog.close()
        return log

    assert asyncio.run(go()) == ["a0", "a1"]


def test_the_backlog_runs_anyway_when_the_reads_never_pause() -> None:
    async def go() -> list[str]:
        now, log = _Now(), []
        backlog = Backlog(now, budget_s=1.0, quiet_s=1e-3, patience_s=5e-3)
        backlog.add(_work(log, "a", 1))
        for step in range(1, 6):  # a read every millisecond, just under the lull
            now.s = backlog.last_read_s = step * 1e-3
            backlog._slice()
        backlog.close()
        return log

    assert asyncio.run(go()) == ["a0"]  # at 5 ms: its patience, not a lull


def test_the_backlog_hands_over_one_reply_a_slice() -> None:
    """A slice stops after a reply is handed to its coroutine, whose own work runs before
    the reads of the next loop iteration are taken."""

    async def go() -> list[list[str]]:
        now, log = _Now(), []
        backlog = Backlog(now, budget_s=1.0, quiet_s=0.0, patience_s=0.0)
        for name in "abc":
            backlog.add(_work(log, name, 1))
        slices = []
        for _ in range(3):
            backlog._slice()
            slices.append(log[:])
            log.clear()
        backlog.close()
        return slices

    assert asyncio.run(go()) == [["a0"], ["b0"], ["c0"]]


def test_a_slice_stops_at_its_budget() -> None:
    async def go() -> list[str]:
        now, log = _Now(), []
        backlog = Backlog(now, budget_s=2.5, quiet_s=0.0, patience_s=0.0)

        def slow() -> Iterator[bool]:  # each step takes one second of the fake clock
            for i in range(10):
                log.append(f"s{i}")
                now.s += 1.0
                yield False

        backlog.add(slow())
        backlog._slice()
        backlog.close()
        return log

    assert asyncio.run(go()) == ["s0", "s1", "s2"]
