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
It runs its own event loop in a thread, speaks HTTP/1.1 with chunked bodies, one request
per connection, and keeps the headers and bodies it received.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from typing import Any

KINDS = {
    "http_400": "http_4xx",
    "http_429": "http_429",
    "http_500": "http_5xx",
    "http_503": "http_5xx",
    "timeout": "timeout",
    "disconnect": "disconnect",
    "malformed": "malformed",
    "empty": "empty",
    "non_streaming": "non_streaming",
    "error_event": "server_error",
}
REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
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
        self, script: list[str], tokens: int = 5, interval_s: float = 0.0, prelude_delay_s: float = 0.0
    ) -> None:
        self.script = itertools.cycle(script)
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
        return f"http://127.0.0.1:{self.port}/v1"

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
        server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
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
            if method == "POST" and path.endswith("completions"):
                behaviour = next(self.script)
                self.received.append({"path": path, "headers": headers, "body": json.loads(body or b"{}")})
                await self._complete(behaviour, reader, writer)
            else:
                await self._reply(writer, 404, {"error": {"message": f"no route {path}"}})
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _reply(self, writer: asyncio.StreamWriter, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        writer.write(
            f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n".encode()
            + data
        )
        await writer.drain()

    async def _complete(
        self, behaviour: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
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
        elif behaviour == "ok":
            usage = {"prompt_tokens": 11, "completion_tokens": count, "total_tokens": 11 + count}
            writer.write(_event({"choices": [], "usage": usage}))
        writer.write(_chunk(b"data: [DONE]\n\n") + _chunk(b""))
        await writer.drain()
