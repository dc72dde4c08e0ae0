"""HTTP/1.1 on a bare asyncio transport, for the one request `measure` times: a streamed POST.

httpx spends about 100 µs of CPU on each network read of a stream (anyio cancel scopes,
httpcore, h11, its byte chunker); at 500 streams a token's stamp waits behind hundreds of
those. Here a read costs a clock reading, a walk over the chunked framing (sizes only, the
payload is sliced, never parsed) and a list append; the request's coroutine wakes once,
when the reply is over. SSE events and JSON are parsed after that (`client._parse`).

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
import socket
import ssl
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

Stamped = tuple[float, bytes]  # a clock reading, and the bytes the read returned
READ_BYTES = 64 * 1024  # at most, a read
DONE_GRACE_S = 0.25  # after [DONE], how long to wait for the end of the body
MAX_HEAD_BYTES = 64 * 1024  # a status line and headers; more is not an HTTP reply
CAPPED_BYTES = 64 * 1024  # of a reply that is not a stream (an error), enough for any message
_HEAD, _BODY, _OVER = 0, 1, 2  # where a reply is
_CHUNKED, _LENGTH, _CLOSE = 0, 1, 2  # how its body ends


class WireError(Exception):
    """A failure as the records name it: a kind, and a message that may count the tokens
    parsed so far (known only once the stream is parsed)."""

    def __init__(self, kind: str, message: Callable[[int], str]) -> None:
        super().__init__(kind)
        self.kind, self.message = kind, message


def _fixed(kind: str, text: str) -> WireError:
    return WireError(kind, lambda tokens: text)


def _size(text: str, base: int) -> int:
    """A Content-Length (base 10) or a chunk size (base 16): digits only, nothing negative."""
    text = text.strip()
    digits = "0123456789abcdefABCDEF"[: 22 if base == 16 else 10]
    if not text or any(c not in digits for c in text):
        raise ValueError(f"a body length {text[:20]!r} that is not a number")
    return int(text, base)


class _Reply(asyncio.BufferedProtocol):
    """One connection. For each exchange: the status, the headers, and the body as it
    arrived, each piece stamped with the clock when its read returned. Reads go into a
    buffer that every connection of the Wire shares: each read is copied out of it before
    the next (a plain Protocol gets a fresh 256 KiB bytes object a read, which costs more
    than the rest of the read together)."""

    def __init__(self, clock: Callable[[], float], buffer: memoryview) -> None:
        self.clock, self.buffer = clock, buffer
        self.transport: Any = None
        self.lost = False
        self.begin(0.0, 0.0)

    def begin(self, now: float, silence_s: float) -> None:
        self.phase = _HEAD
        self.head = b""
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body: list[Stamped] = []
        self.sse = False
        self.framing, self.left, self.crlf, self.trailers, self.pending = _CLOSE, 0, 0, False, b""
        self.ended = self.extra = False
        self.keep = False
        self.size, self.cap = 0, 0
        self.tail = b""
        self.error: WireError | None = None
        self.last_read_s = now
        self.silence_s = silence_s
        self.waiter: asyncio.Future[None] | None = None
        self.timer: asyncio.TimerHandle | None = None

    # --- asyncio.Protocol ---

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.buffer

    def buffer_updated(self, nbytes: int) -> None:
        now = self.clock()  # first: the stamp is the read's, before any work on it
        self.received(now, self.buffer[:nbytes].tobytes())

    def data_received(self, data: bytes) -> None:
        self.received(self.clock(), data)

    def received(self, now: float, data: bytes) -> None:
        self.last_read_s = now
        try:
            if self.phase == _BODY:
                self._body(now, data)
            elif self.phase == _HEAD:
                self._head(now, data)
            else:
                self.keep = False  # bytes nobody asked for: not a connection to reuse
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

    def _head(self, now: float, data: bytes) -> None:
        self.head += data
        end = self.head.find(b"\r\n\r\n")
        if end < 0:
            if len(self.head) > MAX_HEAD_BYTES:
                raise ValueError("the reply's headers never end")
            return
        lines = self.head[:end].split(b"\r\n")
        rest = self.head[end + 4 :]
        version, _, status_text = lines[0].partition(b" ")
        code = status_text[:3]
        if not version.startswith(b"HTTP/") or not code.isdigit():
            raise ValueError("the reply does not start with an HTTP status line")
        if code.startswith(b"1"):  # 100 Continue and the like: the real reply follows
            self.head = b""
            if rest:
                self._head(now, rest)
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
        self.head = b""
        self.phase = _BODY
        if self.framing == _LENGTH and not self.left:
            self._over()
        elif rest:
            self._body(now, rest)

    def _body(self, now: float, data: bytes) -> None:
        if self.framing == _CHUNKED:
            piece = self._dechunk(data)
        elif self.framing == _LENGTH:
            piece = data[: self.left]
            self.left -= len(piece)
            self.extra = len(piece) < len(data)
            self.ended = not self.left
        else:
            piece = data
        if piece:
            self.body.append((now, piece))
            if self.sse:
                seen = self.tail + piece
                if not self.ended and (b"data: [DONE]" in seen or b"data:[DONE]" in seen):
                    self._last_event()
                self.tail = piece[-16:]
            else:
                self.size += len(piece)
                if self.size >= self.cap:
                    self.keep = False  # the rest is unread
                    self._over()
                    return
        if self.ended:
            self._over()

    def _last_event(self) -> None:
        """[DONE]: a server need not end the body after it. The end usually follows at once,
        and then the connection can be kept; if it does not come soon, the reply is over."""
        if self.framing == _CLOSE:
            self._over()
            return
        if self.timer is not None:
            self.timer.cancel()  # silence after [DONE] is no read timeout
        self.timer = asyncio.get_running_loop().call_later(DONE_GRACE_S, self._over)

    def _dechunk(self, data: bytes) -> bytes:
        """The payload bytes of `data` under chunked framing; sets `ended` at the last chunk."""
        buf = self.pending + data if self.pending else data
        self.pending = b""
        out = []
        i, n = 0, len(buf)
        while i < n and not self.ended:
            if self.left:
                j = min(n, i + self.left)
                out.append(buf[i:j])
                self.left -= j - i
                i = j
                if not self.left:
                    self.crlf = 2
            elif self.crlf:
                step = min(self.crlf, n - i)
                i += step
                self.crlf -= step
            else:
                j = buf.find(b"\n", i)
                if j < 0:
                    if n - i > 4096:
                        raise ValueError("a chunk-size line that never ends")
                    self.pending = buf[i:]
                    break
                line = buf[i:j].rstrip(b"\r")
                i = j + 1
                if self.trailers:
                    self.ended = not line  # the blank line after the last chunk's trailers
                    continue
                size = _size(line.split(b";", 1)[0].decode("latin-1"), 16)
                self.left, self.trailers = size, size == 0
        self.extra = self.ended and i < n
        return out[0] if len(out) == 1 else b"".join(out)

    def _over(self) -> None:
        if self.phase == _OVER:
            return
        self.phase = _OVER
        self.keep = self.keep and self.ended and not self.extra and not self.lost
        self._wake()

    def _fail(self, error: WireError) -> None:
        if self.phase == _OVER:
            return
        self.error, self.phase, self.keep = error, _OVER, False
        if self.transport is not None:
            self.transport.abort()
        self._wake()

    def _wake(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def watch(self) -> None:
        """The read timeout: silence for `silence_s` since the last read (or the send)."""
        self.timer = None
        if self.phase == _OVER:
            return
        left = self.last_read_s + self.silence_s - self.clock()
        if left > 0:
            self.timer = asyncio.get_running_loop().call_later(left, self.watch)
            return
        silence = self.silence_s
        self._fail(
            WireError(
                "read timeout", lambda n: f"the server sent nothing for {silence:g} s (after {n} tokens)"
            )
        )


class Backlog:
    """Work that must not delay a stamp, such as parsing a finished stream. It runs in one
    task, in passes of at most `budget_s`, and each pass yields to the event loop, whose
    reads are stamped before the next pass; a piece of work is a generator that pauses
    every few dozen microseconds. When many streams end at once (a batch that finishes
    together) their parsing no longer holds up the tokens of the streams still running."""

    def __init__(self, clock: Callable[[], float], budget_s: float = 0.5e-3) -> None:
        self.clock, self.budget_s = clock, budget_s
        self.queue: deque[tuple[Iterator[None], asyncio.Future[None]]] = deque()
        self.task: asyncio.Task[None] | None = None

    async def run(self, work: Iterator[None]) -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self.queue.append((work, done))
        if self.task is None or self.task.done():
            self.task = loop.create_task(self._drain())
        await done

    async def _drain(self) -> None:
        while self.queue:
            until = self.clock() + self.budget_s
            while self.queue and self.clock() < until:
                work, done = self.queue[0]
                try:
                    if not done.done():  # not abandoned (its request timed out)
                        next(work)
                        continue
                except StopIteration:
                    done.set_result(None)
                except Exception as exc:
                    done.set_exception(exc)
                self.queue.popleft()
            await asyncio.sleep(0)

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
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
        self.idle: list[_Reply] = []
        self.busy: set[_Reply] = set()
        self.buffer = memoryview(bytearray(READ_BYTES))
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

    async def exchange(self, payload: bytes, stamp: Callable[[float], None]) -> _Reply:
        """Send `payload`; return the connection once its reply is over (read it, then
        `release` it). `stamp` is called with the send time (again if it is retried)."""
        for attempt in (0, 1):
            stamp(self.clock())
            conn, reused = await self._acquire()
            self.busy.add(conn)
            loop = asyncio.get_running_loop()
            conn.begin(self.clock(), self.silence_s)
            conn.waiter = loop.create_future()
            conn.timer = loop.call_later(self.silence_s, conn.watch)
            try:
                conn.transport.write(payload)
                await conn.waiter
            except BaseException:  # cancelled (the request's timeout, Ctrl-C): this connection is done
                self._drop(conn)
                raise
            stale = reused and attempt == 0 and conn.error is not None and conn.status is None
            if stale and conn.error is not None and conn.error.kind == "disconnected before reply":
                self._drop(conn)  # a kept-alive connection the server had closed: once more, fresh
                continue
            return conn
        raise AssertionError("unreachable")  # pragma: no cover

    def release(self, conn: _Reply) -> None:
        self.busy.discard(conn)
        if conn.keep and not conn.lost and not conn.transport.is_closing():
            self.idle.append(conn)
        elif conn.error:
            conn.transport.abort()
        else:
            conn.transport.close()

    def _drop(self, conn: _Reply) -> None:
        self.busy.discard(conn)
        if conn.transport is not None:
            conn.transport.abort()

    async def _acquire(self) -> tuple[_Reply, bool]:
        while self.idle:
            conn = self.idle.pop()
            if not conn.lost and not conn.transport.is_closing():
                return conn, True
        timeout_s = self.connect_timeout_s
        try:
            return await asyncio.wait_for(self._connect(), timeout_s), False
        except asyncio.TimeoutError:
            raise _fixed("connect timeout", f"no connection within {timeout_s:g} s") from None

    async def _connect(self) -> _Reply:
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
                    lambda: _Reply(self.clock, self.buffer),
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
