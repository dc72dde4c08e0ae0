"""HTTP/1.1 on a bare asyncio transport, for the one request `measure` times: a streamed POST.

httpx spends about 100 µs of CPU on each network read of a stream (anyio cancel scopes,
httpcore, h11, its byte chunker); at 500 streams a token's stamp waits behind hundreds of
those. Here the bytes land in the reply's own buffer, with no copy, and a read costs a
clock reading, an append of it, and the chunked framing's walk over what arrived (sizes
only: a payload is noted as offsets, never sliced nor parsed). What a read leaves behind
is a float and three ints in lists, nothing the garbage collector would have to walk.

Everything after a reply, parsing included, waits in a `Backlog` for a lull in the reads
and then runs in short slices after them; the request's coroutine wakes once, when its
reply is parsed.

What httpx did and this keeps: keep-alive connections reused (LIFO), a stale one retried
once on a fresh connection, TLS with httpx's own context (certifi, SSL_CERT_FILE, a CA
bundle, --insecure), URL credentials as Basic auth, and the same error kinds. A proxy in
the environment is not spoken here: `client.open_streams` keeps httpx for it.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import json
import math
import re
import socket
import ssl
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Stamped = tuple[float, bytes]  # a clock reading, and the payload bytes of that read
FIRST_BYTES = 4096  # a reply's buffer to start with (a page); it doubles when a read could fill it
READ_ROOM = 2048  # room left for a read, at least
SPARE_BYTES = 64 * 1024  # where bytes nobody asked for land (a reply already over)
DONE_GRACE_S = 0.25  # after [DONE], how long to wait for the end of the body
MAX_HEAD_BYTES = 64 * 1024  # a status line and headers; more is not an HTTP reply
MAX_SIZE_LINE = 4096  # a chunk-size line, extensions included
CAPPED_BYTES = 64 * 1024  # of a reply that is not a stream (an error), enough for any message
_HEAD, _BODY, _OVER = 0, 1, 2  # where a reply is
_CHUNKED, _LENGTH, _CLOSE = 0, 1, 2  # how its body ends
_SIZE_LINE = re.compile(rb"[ \t]*([0-9A-Fa-f]+)[ \t\r]*(?:;[^\n]*)?\n")  # `1a;ext=1\r\n`
_DONE = (b"data: [DONE]", b"data:[DONE]")


class WireError(Exception):
    """A failure as the records name it: a kind, and a message that may count the tokens
    parsed so far (known only once the stream is parsed)."""

    def __init__(self, kind: str, message: Callable[[int], str]) -> None:
        super().__init__(kind)
        self.kind, self.message = kind, message


def _fixed(kind: str, text: str) -> WireError:
    return WireError(kind, lambda tokens: text)


def _timed_out(timeout_s: float) -> WireError:
    return WireError("request timeout", lambda n: f"no complete answer within {timeout_s:g} s ({n} tokens)")


def _size(text: str, base: int) -> int:
    """A Content-Length (base 10) or a chunk size (base 16): digits only, nothing negative."""
    text = text.strip()
    digits = "0123456789abcdefABCDEF"[: 22 if base == 16 else 10]
    if not text or any(c not in digits for c in text):
        raise ValueError(f"a body length {text[:20]!r} that is not a number")
    return int(text, base)


@dataclass
class Reply:
    """One exchange, over: the status and headers, the raw bytes as they came (framing
    included), the clock reading of each read, and where the payload lies in the bytes:
    `pieces` holds (read, start, end) triples, flat, in order."""

    status: int | None
    headers: dict[str, str]
    sse: bool
    error: WireError | None
    raw: bytearray
    stamps: list[float]
    pieces: list[int]
    failure: Exception | None = None  # what the work after the reply raised

    def arrivals(self) -> Iterator[Stamped]:
        """Each read that brought payload: its stamp and its payload bytes."""
        raw, stamps, p = memoryview(self.raw), self.stamps, self.pieces
        k, n = 0, len(p)
        while k < n:
            read, data = p[k], raw[p[k + 1] : p[k + 2]].tobytes()
            k += 3
            while k < n and p[k] == read:  # more chunks in the same read
                data += raw[p[k + 1] : p[k + 2]]
                k += 3
            yield stamps[read], data

    def payload(self, limit: int) -> bytes:
        """The first `limit` bytes of the body (an error reply's message)."""
        return b"".join(data for _, data in self.arrivals())[:limit]


class _Conn(asyncio.BufferedProtocol):
    """One connection, one exchange at a time. Reads go straight into the reply's buffer,
    at its end; each read's clock reading is appended to `stamps` before anything else."""

    __slots__ = (  # hundreds of these are read in turn: no dict per connection to look in
        "after", "at", "backlog", "cap", "clock", "deadline_s", "done_seen", "ended", "error",
        "extra", "filled", "framing", "grace", "headers", "keep", "last_read_s", "left", "lost",
        "phase", "pieces", "raw", "silence_s", "size", "skip", "sse", "stamps", "status", "tail",
        "timeout_s", "timer", "trailers", "transport", "view", "waiter", "wire",
    )  # fmt: skip

    def __init__(self, wire: Wire) -> None:
        self.wire, self.clock, self.backlog = wire, wire.clock, wire.backlog
        self.transport: Any = None
        self.lost = False
        self.phase = _OVER  # until `begin`
        self.keep = False
        self.waiter: asyncio.Future[Reply] | None = None
        self.after: Callable[[Reply], Iterator[None]] | None = None
        self.timer: asyncio.TimerHandle | None = None

    def begin(self, now: float, silence_s: float, deadline_s: float, timeout_s: float) -> None:
        self.phase = _HEAD
        self.raw = bytearray(FIRST_BYTES)
        self.view = memoryview(self.raw)
        self.filled = 0  # bytes in `raw`
        self.at = 0  # how far the head or the body's framing has been read
        self.stamps: list[float] = []
        self.pieces: list[int] = []
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.sse = False
        self.framing, self.left, self.skip, self.trailers = _CLOSE, 0, 0, False
        self.ended = self.extra = False
        self.keep = False
        self.size, self.cap = 0, 0
        self.tail = b""  # the payload's last bytes, while it stops mid-line
        self.done_seen = self.grace = False  # `data: [DONE]` came; the wait for the end began
        self.error: WireError | None = None
        self.last_read_s = now
        self.silence_s, self.deadline_s, self.timeout_s = silence_s, deadline_s, timeout_s

    def take(self) -> Reply:
        return Reply(self.status, self.headers, self.sse, self.error, self.raw, self.stamps, self.pieces)

    # --- asyncio.BufferedProtocol ---

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        if self.phase == _OVER:
            return self.wire.spare
        if len(self.raw) - self.filled < READ_ROOM:
            raw = bytearray(2 * len(self.raw))  # a fresh one: the old may still be lent out
            raw[: self.filled] = self.view[: self.filled]
            self.raw, self.view = raw, memoryview(raw)
        return self.view[self.filled :]

    def buffer_updated(self, nbytes: int) -> None:
        now = self.clock()  # first: the stamp is the read's, before any work on it
        self.backlog.last_read_s = now
        if self.phase == _OVER:
            self.keep = False  # bytes nobody asked for: not a connection to reuse
            return
        start = self.filled
        self.filled = start + nbytes
        self.stamps.append(now)
        self.last_read_s = now
        try:
            if self.phase == _BODY:
                self._body(start)
            else:
                self._head(start)
        except ValueError as exc:  # not HTTP/1.1 as a server writes it
            self._fail(_fixed("protocol error", str(exc)))

    def eof_received(self) -> bool:
        return False  # close; connection_lost says what it meant

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self.phase == _BODY and self.framing == _CLOSE:
            self._over()  # a body that ends with the connection
        elif self.phase == _HEAD and self.waiter is not None:
            why = str(exc) if exc else "Server disconnected without sending a response."
            self._fail(_fixed("disconnected before reply", f"the server closed the connection ({why})"))
        elif self.phase == _BODY:
            self._fail(
                WireError("disconnected mid-stream", lambda n: f"the connection was cut after {n} tokens")
            )

    # --- the reply ---

    def _head(self, start: int) -> None:
        end = self.raw.find(b"\r\n\r\n", max(self.at, start - 3), self.filled)
        if end < 0:
            if self.filled - self.at > MAX_HEAD_BYTES:
                raise ValueError("the reply's headers never end")
            return
        lines = bytes(self.view[self.at : end]).split(b"\r\n")
        self.at = end + 4
        version, _, status_text = lines[0].partition(b" ")
        code = status_text[:3]
        if not version.startswith(b"HTTP/") or not code.isdigit():
            raise ValueError("the reply does not start with an HTTP status line")
        if code.startswith(b"1"):  # 100 Continue and the like: the real reply follows
            if self.filled > self.at:
                self._head(self.at)
            return
        self.status = int(code)
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            self.headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
        get = self.headers.get
        if "chunked" in get("transfer-encoding", "").lower():
            self.framing = _CHUNKED
        elif "content-length" in self.headers:
            self.framing, self.left = _LENGTH, _size(get("content-length", ""), 10)
        elif self.status in (204, 304):
            self.framing, self.left = _LENGTH, 0
        self.keep = version == b"HTTP/1.1" and "close" not in get("connection", "").lower()
        self.sse = self.status < 400 and "text/event-stream" in get("content-type", "")
        self.cap = 0 if self.sse else CAPPED_BYTES
        self.phase = _BODY
        if self.framing == _LENGTH and not self.left:
            self._over()
        elif self.filled > self.at:
            self._body(self.at)

    def _body(self, start: int) -> None:
        end = self.filled
        if self.framing == _CHUNKED:
            self._dechunk(end)
        elif self.framing == _LENGTH:
            stop = min(end, start + self.left)
            self.left -= stop - start
            self.extra, self.ended = stop < end, not self.left
            self._piece(start, stop)
        else:
            self._piece(start, end)
        if self.ended:
            self._over()
        elif self.done_seen and self.phase == _BODY:
            self._last_event()

    def _dechunk(self, end: int) -> None:
        """Walk the chunked framing from `at` to `end`, noting each payload's piece; sets
        `ended` at the last chunk. A size line cut by the read waits in `raw` for the next."""
        raw, i, left = self.raw, self.at, self.left
        while i < end:
            if left:  # in a payload
                j = min(end, i + left)
                left -= j - i
                self._piece(i, j)
                i = j
                if left or self.phase != _BODY:
                    break
                self.skip = 2  # the CRLF after it
            if self.skip:
                step = min(self.skip, end - i)
                i += step
                self.skip -= step
            elif self.trailers:
                j = raw.find(b"\n", i, end)
                if j < 0:
                    break
                blank = not raw[i:j].rstrip(b"\r")  # the blank line after the trailers
                i = j + 1
                if blank:
                    self.ended = True
                    break
            else:
                m = _SIZE_LINE.match(raw, i, end)
                if m is None:
                    j = raw.find(b"\n", i, end)
                    if j >= 0:  # a whole line, not a size: say what it held
                        size = bytes(raw[i:j]).split(b";", 1)[0].decode("latin-1")
                        _size(size, 16)
                        raise ValueError(f"a chunk-size line {size[:20]!r} that HTTP/1.1 does not allow")
                    if end - i > MAX_SIZE_LINE:
                        raise ValueError("a chunk-size line that never ends")
                    break
                left = int(m[1], 16)
                self.trailers = not left
                i = m.end()
        self.at, self.left = i, left
        self.extra = self.ended and i < end

    def _piece(self, i: int, j: int) -> None:
        """Payload at raw[i:j], brought by the latest read."""
        if i >= j:
            return
        p = self.pieces
        p.append(len(self.stamps) - 1)
        p.append(i)
        p.append(j)
        if not self.sse:
            self.size += j - i
            if self.size >= self.cap:
                self.keep = False  # the rest is unread
                self._over()
            return
        raw = self.raw
        if self.tail or raw.find(b"[DONE]", i, j) >= 0:
            seen = self.tail + raw[i:j]
            self.done_seen = self.done_seen or _DONE[0] in seen or _DONE[1] in seen
            self.tail = b"" if seen.endswith(b"\n") else bytes(seen[-16:])
        elif raw[j - 1] != 10:  # the payload stops mid-line: keep its end for the next
            self.tail = bytes(raw[max(i, j - 16) : j])

    def _last_event(self) -> None:
        """[DONE]: a server need not end the body after it. The end usually follows at once,
        and then the connection can be kept; if it does not come soon, the reply is over."""
        if self.framing == _CLOSE:
            self._over()
            return
        if self.grace:
            return
        if self.timer is not None:
            self.timer.cancel()  # silence after [DONE] is no read timeout
        self.grace = True
        self.timer = asyncio.get_running_loop().call_later(DONE_GRACE_S, self._over)

    def _over(self) -> None:
        if self.phase == _OVER:
            return
        self.phase = _OVER
        self.keep = self.keep and self.ended and not self.extra and not self.lost
        self._settle()

    def _fail(self, error: WireError) -> None:
        if self.phase == _OVER:
            return
        self.error, self.phase, self.keep = error, _OVER, False
        if self.transport is not None:
            self.transport.abort()
        self._settle()

    def _settle(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.waiter is not None:
            self.backlog.add(self.wire.settle(self, self.waiter))

    def watch(self) -> None:
        """The read timeout (silence for `silence_s` since the last read, or the send) and
        the request's own."""
        self.timer = None
        if self.phase == _OVER:
            return
        now = self.clock()
        left = min(self.last_read_s + self.silence_s, self.deadline_s) - now
        if left > 0:
            self.timer = asyncio.get_running_loop().call_later(left, self.watch)
            return
        if now >= self.deadline_s:
            self._fail(_timed_out(self.timeout_s))
            return
        silence = self.silence_s
        self._fail(
            WireError(
                "read timeout", lambda n: f"the server sent nothing for {silence:g} s (after {n} tokens)"
            )
        )


class Backlog:
    """Work that must not delay a stamp: all that follows a reply, its parsing included.

    Tokens come in bursts, one chunk per stream each decode step, so the work waits for a
    lull: `quiet_s` with no read on any connection. It waits no longer than `patience_s`,
    in case the reads never pause. Then it runs in slices of at most `budget_s`, each a
    timer callback, which the event loop runs after the reads it found ready, and each
    slice hands at most one finished reply to its coroutine (whose own work then runs
    before the next reads are taken). A piece of work is a generator that pauses every
    few dozen microseconds."""

    def __init__(
        self,
        clock: Callable[[], float],
        budget_s: float = 0.3e-3,
        quiet_s: float = 0.5e-3,
        patience_s: float = 5e-3,
    ) -> None:
        self.clock, self.budget_s, self.quiet_s, self.patience_s = clock, budget_s, quiet_s, patience_s
        self.last_read_s = -math.inf  # on any connection: each read sets it
        self.queue: deque[tuple[Iterator[bool], float]] = deque()
        self.timer: asyncio.TimerHandle | None = None

    def add(self, work: Iterator[bool]) -> None:
        """Queue `work`, whose steps yield True once it has handed its result over."""
        self.queue.append((work, self.clock()))
        if self.timer is None:
            self._arm(self.quiet_s)

    def _arm(self, delay_s: float) -> None:
        self.timer = asyncio.get_running_loop().call_later(delay_s, self._slice)

    def _slice(self) -> None:
        self.timer = None
        if not self.queue:
            return
        now = self.clock()
        wait_s = min(self.last_read_s + self.quiet_s, self.queue[0][1] + self.patience_s) - now
        if wait_s > 0:
            self._arm(wait_s)
            return
        until = now + self.budget_s
        while self.queue:
            work = self.queue[0][0]
            handed = next(work, None)
            if handed is None:
                self.queue.popleft()
            elif handed or self.clock() >= until:
                break
        if self.queue:
            self._arm(0.0)

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.queue.clear()


class Wire:
    """Streamed POSTs to one endpoint over reused HTTP/1.1 connections."""

    def __init__(
        self,
        url: str,
        headers: dict[str, str],
        verify: Any,
        connect_timeout_s: float,
        silence_s: float,
        clock: Callable[[], float],
    ) -> None:
        import httpx

        parsed = httpx.URL(url)
        self.clock, self.connect_timeout_s, self.silence_s = clock, connect_timeout_s, silence_s
        self.tls = httpx.create_ssl_context(verify=verify) if parsed.scheme == "https" else None
        self.host = parsed.raw_host.decode("ascii").strip("[]")
        self.port = parsed.port or (443 if self.tls else 80)
        fields = {
            "Host": parsed.netloc.decode("ascii"),
            "Accept": "*/*",
            "Accept-Encoding": "identity",  # raw bytes: nothing to decompress
            "Connection": "keep-alive",
            "User-Agent": "ridgeline",
        }
        for name, value in headers.items():  # the caller's win, whatever their case
            fields = {k: v for k, v in fields.items() if k.lower() != name.lower()} | {name: value}
        if parsed.username or parsed.password:  # as httpx does: URL credentials are Basic auth
            pair = base64.b64encode(f"{parsed.username}:{parsed.password}".encode()).decode("ascii")
            fields = {k: v for k, v in fields.items() if k.lower() != "authorization"}
            fields["Authorization"] = f"Basic {pair}"
        lines = [
            f"POST {parsed.raw_path.decode('ascii')} HTTP/1.1",
            *(f"{k}: {v}" for k, v in fields.items()),
        ]
        self.head = ("\r\n".join(lines) + "\r\nContent-Type: application/json\r\n").encode("latin-1")
        self.idle: list[_Conn] = []
        self.busy: set[_Conn] = set()
        self.spare = memoryview(bytearray(SPARE_BYTES))
        self.backlog = Backlog(clock)

    def close(self) -> None:
        self.backlog.close()
        for conn in [*self.idle, *self.busy]:
            if conn.transport is not None:
                conn.transport.abort()
        self.idle.clear()
        self.busy.clear()

    def request(self, body: dict[str, Any]) -> bytes:
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
        return self.head + b"Content-Length: %d\r\n\r\n" % len(data) + data

    async def exchange(
        self,
        payload: bytes,
        stamp: Callable[[float], None],
        after: Callable[[Reply], Iterator[None]],
        timeout_s: float = math.inf,
    ) -> Reply:
        """Send `payload` and return its reply once it is over and `after(reply)` (the
        reply's parsing, run in the backlog) is done; a reply whose connection failed
        carries the error. `stamp` is called with the send time (again if it is retried).
        `timeout_s` bounds the whole exchange: connecting, sending, the reply."""
        deadline_s = self.clock() + timeout_s
        for attempt in (0, 1):
            stamp(self.clock())
            conn, reused = await self._acquire(deadline_s, timeout_s)
            loop = asyncio.get_running_loop()
            conn.begin(self.clock(), self.silence_s, deadline_s, timeout_s)
            waiter = conn.waiter = loop.create_future()
            conn.after = after
            self.busy.add(conn)
            conn.timer = loop.call_later(min(self.silence_s, timeout_s), conn.watch)
            try:
                conn.transport.write(payload)
                reply = await waiter
            except BaseException:  # cancelled (Ctrl-C): this connection is done
                if conn.waiter is waiter:  # not yet handed back
                    self._drop(conn)
                raise
            if reply.failure is not None:
                raise reply.failure
            error = reply.error
            stale = reused and attempt == 0 and error is not None and reply.status is None
            if stale and error is not None and error.kind == "disconnected before reply":
                continue  # a kept-alive connection the server had closed: once more, fresh
            return reply
        raise AssertionError("unreachable")  # pragma: no cover

    def settle(self, conn: _Conn, waiter: asyncio.Future[Reply]) -> Iterator[bool]:
        """What follows a reply, as backlog work: the connection back to the pool (or
        closed), the caller's work on the reply, then the reply handed to its coroutine."""
        reply, after = conn.take(), conn.after
        conn.waiter = conn.after = None
        try:
            self.release(conn)
            for _ in after(reply) if after is not None else ():
                if waiter.done():  # abandoned: its request was cancelled
                    return
                yield False
        except Exception as exc:  # handed to the coroutine, which raises it
            reply.failure = exc
        if not waiter.done():
            waiter.set_result(reply)
            yield True

    def release(self, conn: _Conn) -> None:
        self.busy.discard(conn)
        if conn.keep and not conn.lost and not conn.transport.is_closing():
            self.idle.append(conn)
        elif conn.error:
            conn.transport.abort()
        else:
            conn.transport.close()

    def _drop(self, conn: _Conn) -> None:
        self.busy.discard(conn)
        conn.waiter = conn.after = None
        conn.phase = _OVER
        if conn.timer is not None:
            conn.timer.cancel()
            conn.timer = None
        if conn.transport is not None:
            conn.transport.abort()

    async def _acquire(self, deadline_s: float, timeout_s: float) -> tuple[_Conn, bool]:
        while self.idle:
            conn = self.idle.pop()
            if conn.keep and not conn.lost and not conn.transport.is_closing():
                return conn, True
            conn.transport.abort()
        left_s = deadline_s - self.clock()
        limit_s = min(self.connect_timeout_s, left_s)
        try:
            return await asyncio.wait_for(self._connect(), max(limit_s, 0.0)), False
        except asyncio.TimeoutError:
            if limit_s < self.connect_timeout_s:
                raise _timed_out(timeout_s) from None
            raise _fixed("connect timeout", f"no connection within {self.connect_timeout_s:g} s") from None

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        try:
            literal = ipaddress.ip_address(self.host)  # no resolver thread for an address
            targets = [(socket.AF_INET6 if literal.version == 6 else socket.AF_INET, 0, self.host)]
        except ValueError:
            try:
                found = await loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            except socket.gaierror as exc:
                raise _fixed("name not resolved", f"no address for the host ({exc})") from None
            targets = [(family, proto, str(address[0])) for family, _, proto, _, address in found]
        errors: list[OSError] = []
        for family, proto, address in targets:
            try:
                _, conn = await loop.create_connection(
                    lambda: _Conn(self),
                    host=address,
                    port=self.port,
                    family=family,
                    proto=proto,
                    ssl=self.tls,
                    server_hostname=self.host if self.tls else None,
                )
                return conn
            except ssl.SSLError as exc:
                reason = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or str(exc)
                raise _fixed("TLS error", f"the TLS handshake failed: {reason}") from None
            except OSError as exc:
                errors.append(exc)
        if errors and all(isinstance(e, ConnectionRefusedError) for e in errors):
            raise _fixed("connect refused", "nothing listens at that host and port")
        raise _fixed("connect failed", f"no connection ({errors[-1] if errors else 'no address'})")
