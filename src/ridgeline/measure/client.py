"""One streamed request against an OpenAI-compatible server, timed.

t0 is a monotonic clock read at the actual send. Each network read is stamped on
arrival, before any parsing, and every event in it shares that stamp; the first
token-bearing event gives TTFT and the last gives E2E. Parsing waits until the stream
ends, so that under many concurrent streams no stamp waits behind another's parsing.
Failures do not raise: they come back as an error kind and a short message, so a run
records them and goes on.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from ridgeline.measure.sse import MalformedStream, SseParser, interpret

clock = time.perf_counter  # CLOCK_MONOTONIC on Linux, shared by every process


@dataclass(frozen=True)
class Endpoint:
    """Where and how to send: base URL (…/v1), `completions` or `chat`, and options."""

    base_url: str
    model: str
    api: str = "completions"
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # may hold the API key
    verify: bool | str = True
    timeout_s: float = 300.0
    connect_timeout_s: float = 10.0
    ignore_eos: bool = True
    extra_body: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        path = "chat/completions" if self.api == "chat" else "completions"
        return f"{self.base_url.rstrip('/')}/{path}"

    def body(self, prompt: str, max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 0.0,
        }
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        if self.ignore_eos:  # vLLM and SGLang honour ignore_eos; llama.cpp servers min_tokens
            body.update(ignore_eos=True, min_tokens=max_tokens)
        return body | self.extra_body


@dataclass
class Stream:
    """What came back. Times are absolute clock readings; None until they happen."""

    send_s: float = 0.0
    status: int | None = None
    first_event_s: float | None = None  # any event, a role-only prelude included
    token_times_s: list[float] = field(default_factory=list)  # each token-bearing event
    texts: list[str] = field(default_factory=list)
    completion_tokens: int | None = None  # usage.completion_tokens
    prompt_tokens: int | None = None  # usage.prompt_tokens
    finish_reason: str | None = None
    done: bool = False
    error_kind: str | None = None
    error: str | None = None

    def fail(self, kind: str, message: str) -> Stream:
        if self.error_kind is None:
            self.error_kind, self.error = kind, f"{kind}: {message}"[:240]
        return self


def make_client(ep: Endpoint, connections: int | None) -> Any:
    """An httpx client for the endpoint; `connections` None means no limit (open loop)."""
    import httpx

    return httpx.AsyncClient(
        headers={"Accept-Encoding": "identity"} | ep.headers,  # raw bytes: nothing to decompress
        verify=ep.verify,
        timeout=httpx.Timeout(ep.timeout_s, connect=ep.connect_timeout_s),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )


def _http_error(status: int, body: bytes) -> tuple[str, str]:
    kind = "http_429" if status == 429 else f"http_{status // 100}xx"
    text = body.decode("utf-8", "replace")
    try:
        err = json.loads(text).get("error", text)
        text = err.get("message", str(err)) if isinstance(err, dict) else str(err)
    except (ValueError, AttributeError):
        pass
    return kind, f"HTTP {status} {' '.join(text.split())[:120]}"


def _take(s: Stream, data: str, now: float) -> None:
    for chunk in interpret(data):
        if chunk.error:
            s.fail("server_error", chunk.error)
        if chunk.done:
            s.done = True
        if chunk.token_bearing:
            s.token_times_s.append(now)
            s.texts.append(chunk.text)
        s.finish_reason = chunk.finish_reason or s.finish_reason
        if chunk.completion_tokens is not None:
            s.completion_tokens = chunk.completion_tokens
        if chunk.prompt_tokens is not None:
            s.prompt_tokens = chunk.prompt_tokens


async def _stream(client: Any, ep: Endpoint, body: dict[str, Any], s: Stream) -> None:
    request = client.build_request("POST", ep.url, json=body)
    s.send_s = clock()
    response = await client.send(request, stream=True)
    try:
        s.status = response.status_code
        if response.status_code >= 400:
            s.fail(*_http_error(response.status_code, await response.aread()))
            return
        if "text/event-stream" not in response.headers.get("content-type", ""):
            await response.aread()
            s.fail(
                "non_streaming", f"the reply is {response.headers.get('content-type') or 'untyped'}, not SSE"
            )
            return
        arrivals: list[tuple[float, bytes]] = []
        tail = b""
        try:
            async for raw in response.aiter_raw():
                arrivals.append((clock(), raw))  # stamp first, parse once the stream is over
                if b"[DONE]" in tail + raw:
                    break
                tail = raw[-8:]
        finally:
            _parse(s, arrivals)
    finally:
        await response.aclose()


def _parse(s: Stream, arrivals: list[tuple[float, bytes]]) -> None:
    """Events in arrival order, each stamped with the read that completed it."""
    parser = SseParser()
    for now, raw in arrivals:
        for data in parser.feed(raw):
            if s.first_event_s is None:
                s.first_event_s = now
            _take(s, data, now)
            if s.done:
                return
    for data in parser.close():
        _take(s, data, arrivals[-1][0])


async def send(client: Any, ep: Endpoint, prompt: str, max_tokens: int) -> Stream:
    """Stream one request; never raises for a server's or the network's failure."""
    import httpx

    s = Stream()
    try:
        await asyncio.wait_for(_stream(client, ep, ep.body(prompt, max_tokens), s), ep.timeout_s)
    except (asyncio.TimeoutError, httpx.TimeoutException):
        s.fail("timeout", f"no complete answer within {ep.timeout_s:g} s ({len(s.token_times_s)} tokens)")
    except MalformedStream as exc:
        s.fail("malformed", str(exc))
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
        s.fail("disconnect", f"{type(exc).__name__} after {len(s.token_times_s)} tokens")
    except httpx.ConnectError as exc:
        s.fail("connect", f"cannot connect to {ep.url} ({exc})")
    except httpx.HTTPError as exc:
        s.fail("transport", f"{type(exc).__name__}: {exc}")
    if s.error_kind is None:
        if not s.token_times_s:
            s.fail("empty", "the stream carried no generated token")
        elif not s.done and s.finish_reason is None:
            s.fail("disconnect", f"the stream ended early after {len(s.token_times_s)} tokens")
    return s
