"""A small OpenAI-style streaming server that misbehaves on cue, for the client's tests.

Each completion request takes the next behaviour of a script (cycling):
    ok              a keep-alive, a role-only prelude, `tokens` chunks `interval_s` apart,
                    a usage chunk and [DONE]
    ok_no_usage     the same without the usage chunk
    http_400, http_429, http_500, http_503   an error status with a JSON error body
    timeout         headers, one keep-alive, then silence
    disconnect      two tokens, then the connection is cut mid-stream
    malformed       one token, then a data line that is not JSON
    empty           [DONE] and nothing else
    non_streaming   a complete application/json reply
    error_event     one token, then an error object inside the stream
    echo_401        HTTP 401 whose error message echoes the Authorization header and the
                    request line (with its query string) back, as careless servers do
    echo_event      one token, then an in-stream error echoing the same, padded so that a
                    cut to length would fall inside the secret
    echo_malformed  one token, then a non-JSON data line holding the same
    close           the connection closed before any reply
It runs its own event loop in a thread, speaks HTTP/1.1 with chunked bodies, one request
per connection, and keeps the headers and bodies it received. With `tls=(cert, key)` it
speaks HTTPS. `closed_port()` and `Blackhole` give a port that refuses connections and one
that never completes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import ssl
import threading
from typing import Any

KINDS = {  # behaviour -> the error kind the client records for it
    "http_400": "http 400",
    "http_429": "http 429",
    "http_500": "http 500",
    "http_503": "http 503",
    "timeout": "request timeout",
    "disconnect": "disconnected mid-stream",
    "malformed": "malformed SSE",
    "empty": "empty stream",
    "non_streaming": "not streaming",
    "error_event": "error event",
}
ECHOES = {"echo_401": "http 401", "echo_event": "error event", "echo_malformed": "malformed SSE"}


def closed_port() -> int:
    """A port on 127.0.0.1 with nothing listening: connecting is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Blackhole:
    """A port whose accept queue is full: a connection attempt is never answered, so the
    client's connect timeout fires (Linux drops the SYN of a full queue)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(0)
        self.port = int(self.sock.getsockname()[1])
        self.fillers: list[socket.socket] = []
        for _ in range(4):  # fill the queue (a backlog of 0 still admits one or two)
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", self.port))
            self.fillers.append(c)

    def __enter__(self) -> Blackhole:
        return self

    def __exit__(self, *exc: object) -> None:
        for c in self.fillers:
            c.close()
        self.sock.close()


REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    401: "Unauthorized",
    429: "Too Many Requests",
    500: "Error",
    503: "Busy",
}


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _event(obj: Any) -> bytes:
    return _chunk(f"data: {json.dumps(obj)}\n\n".encode())


def _token(text: str, finish: str | None = None) -> dict[str, Any]:
    return {"object": "text_completion", "choices": [{"index": 0, "text": text, "finish_reason": finish}]}


class FaultServer:
    def __init__(
        self,
        script: list[str],
        tokens: int = 5,
        interval_s: float = 0.0,
        prelude_delay_s: float = 0.0,
        tls: tuple[str, str] | None = None,
    ) -> None:
        self.script = itertools.cycle(script)
        self.tls = tls
        self.tokens = tokens
        self.interval_s = interval_s
        self.prelude_delay_s = prelude_delay_s
        self.received: list[dict[str, Any]] = []
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> FaultServer:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop and self._stop:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        context = None
        if self.tls:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(*self.tls)
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=context)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            if method == "POST" and path.split("?")[0].endswith("completions"):
                behaviour = next(self.script)
                self.received.append({"path": path, "headers": headers, "body": json.loads(body or b"{}")})
                echo = f"{lines[0]} with Authorization: {headers.get('authorization', '')}"
                await self._complete(behaviour, reader, writer, echo)
            else:
                await self._other(method, path, body, writer)
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            with contextlib.suppress(ConnectionError, ssl.SSLError):  # a TLS peer already gone
                writer.close()

    async def _other(self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter) -> None:
        """A request that is not a completion: no such route (a subclass may answer it)."""
        await self._reply(writer, 404, {"error": {"message": f"no route {path}"}})

    async def _reply(self, writer: asyncio.StreamWriter, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        writer.write(
            f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
            + data
        )
        await writer.drain()

    async def _complete(
        self, behaviour: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, echo: str
    ) -> None:
        if behaviour == "close":
            return
        if behaviour == "echo_401":
            await self._reply(writer, 401, {"error": {"message": f"invalid key: {echo}", "code": 401}})
            return
        if behaviour.startswith("http_"):
            status = int(behaviour.removeprefix("http_"))
            await self._reply(writer, status, {"error": {"message": f"injected {status}", "code": status}})
            return
        if behaviour == "non_streaming":
            await self._reply(
                writer, 200, _token("all at once", "length") | {"usage": {"completion_tokens": 3}}
            )
            return
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
            b"Connection: close\r\n\r\n"
        )
        writer.write(_chunk(b": keep-alive\n\n"))
        await writer.drain()
        if behaviour == "timeout":
            await reader.read()  # silence until the client gives up and closes
            return
        if behaviour == "empty":
            writer.write(_chunk(b"data: [DONE]\n\n") + _chunk(b""))
            await writer.drain()
            return
        writer.write(
            _event({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]})
        )
        writer.write(_event(_token("")))  # an empty text: no token yet
        await writer.drain()
        await asyncio.sleep(self.prelude_delay_s)
        count = {"disconnect": 2, "malformed": 1, "error_event": 1}.get(behaviour, self.tokens)
        if behaviour.startswith("echo_"):
            count = 1
        for i in range(count):
            writer.write(
                _event(
                    _token(f" tok{i}", "length" if i == count - 1 and behaviour.startswith("ok") else None)
                )
            )
            await writer.drain()
            await asyncio.sleep(self.interval_s)
        if behaviour == "disconnect":
            writer.transport.abort()
            return
        if behaviour == "malformed":
            writer.write(_chunk(b"data: {this is not json\n\n"))
        elif behaviour == "error_event":
            writer.write(_event({"error": {"message": "injected failure mid-stream"}}))
        elif behaviour == "echo_event":
            # The key lands about 228 characters into the record's `error`: a cut to its 240
            # characters before redaction would leave half of it behind.
            padding = "x" * max(0, 185 - len(echo.split("Authorization: ")[0]))
            writer.write(_event({"error": {"message": f"denied {padding} {echo}"}}))
        elif behaviour == "echo_malformed":
            writer.write(_chunk(f"data: <html>{'y' * 30} {echo}\n\n".encode()))
        elif behaviour == "ok":
            usage = {"prompt_tokens": 11, "completion_tokens": count, "total_tokens": 11 + count}
            writer.write(_event({"choices": [], "usage": usage}))
        writer.write(_chunk(b"data: [DONE]\n\n") + _chunk(b""))
        await writer.drain()
