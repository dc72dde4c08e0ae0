"""One streamed request against an OpenAI-compatible server, timed.

t0 is a monotonic clock read at the actual send. Each network read is stamped on
arrival, before any parsing, and every event in it shares that stamp; the first
token-bearing event gives TTFT and the last gives E2E. Parsing waits until the stream
ends (and, over `wire`, for a lull in the other streams' reads), so that under many
concurrent streams no stamp waits behind another's parsing. Failures do not raise: they
come back as an error kind and a short message, so a run records them and goes on.

The stream itself goes over `wire.Wire` (bare HTTP/1.1, a few µs a read) unless a proxy in
the environment covers the URL; then over httpx, which speaks to proxies.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import ssl
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ridgeline.checks import check_positive
from ridgeline.errors import RidgelineError
from ridgeline.measure.redact import Redactor
from ridgeline.measure.sse import MalformedStream, SseParser, interpret, usual
from ridgeline.measure.wire import Reply, Stamped, Wire, WireError

clock = time.perf_counter  # CLOCK_MONOTONIC on Linux, shared by every process

MAX_TIMEOUT_S = 1e6  # eleven days: longer is a typo, and would overflow some clocks' arithmetic
ERROR_BODY_BYTES = 64 * 1024  # of an error reply, enough for any message a server writes
MESSAGE_CHARS = 240  # of a record's `error`

# Error kinds, as records and summaries spell them. Those of CONNECT_KINDS mean no
# connection was made at all: a grid point that gets nothing else means an unreachable server.
CONNECT_KINDS = ("connect refused", "connect timeout", "name not resolved", "connect failed", "TLS error")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP header name (RFC 9110 token)
_SENDABLE = re.compile(r"[\x20-\x7e\t]*")  # what an ASCII header value may hold


def join_url(base: str, path: str) -> str:
    """base + "/" + path, keeping the base's query (`?key=...`) where it belongs."""
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}/{path.lstrip('/')}"))


def server_root(base: str) -> str:
    """The base URL without a trailing `/v1`: where tokenize endpoints live."""
    parts = urlsplit(base)
    path = parts.path.rstrip("/")
    return urlunsplit(parts._replace(path=path.removesuffix("/v1")))


def check_header(name: str, value: str) -> None:
    """A header httpx can send; the message never shows the value (it may be a secret)."""
    if not _TOKEN.fullmatch(name):
        raise RidgelineError(
            f"header name {name[:60]!r} is not a valid HTTP header name: use letters, digits and -"
        )
    if not _SENDABLE.fullmatch(value):
        raise RidgelineError(
            f"the value of header {name!r} cannot be sent over HTTP: it holds a control character or "
            "non-ASCII text (the value is not shown, in case it is a secret)"
        )


def tls_verify(insecure: bool, ca_bundle: str | None) -> bool | str:
    """What to verify servers' certificates with: nothing (False), the system's CAs (True),
    or a CA bundle, checked now and kept as its path so that an Endpoint pickles (for
    --workers); `ssl_context` makes the context."""
    from pathlib import Path

    if insecure:
        return False
    if ca_bundle is None:
        return True
    p = Path(ca_bundle).expanduser()
    if not p.exists():
        raise RidgelineError(f"--ca-bundle {ca_bundle!r}: file not found; give a PEM file of CA certificates")
    try:
        ssl_context(str(p))
    except (ssl.SSLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or type(exc).__name__
        raise RidgelineError(
            f"--ca-bundle {ca_bundle!r} holds no CA certificate ssl can load ({reason}); give a PEM file"
        ) from None
    return str(p)


def ssl_context(verify: bool | str | ssl.SSLContext) -> bool | ssl.SSLContext:
    """`verify` as httpx takes it: a CA bundle's path (a file or a folder) becomes a context."""
    import os

    if not isinstance(verify, str):
        return verify
    if os.path.isdir(verify):
        return ssl.create_default_context(capath=verify)
    return ssl.create_default_context(cafile=verify)


@dataclass(frozen=True)
class Endpoint:
    """Where and how to send: base URL (…/v1), `completions` or `chat`, and options.

    `timeout_s` bounds a whole request, `connect_timeout_s` the connection, and
    `read_timeout_s` the silence between two reads (None: the whole `timeout_s`)."""

    base_url: str = field(repr=False)  # may hold user:pass@ or ?key=
    model: str
    api: str = "completions"
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # may hold the API key
    verify: bool | str | ssl.SSLContext = True
    timeout_s: float = 300.0
    connect_timeout_s: float = 10.0
    read_timeout_s: float | None = None
    ignore_eos: bool = True
    extra_body: dict[str, Any] = field(default_factory=dict)
    secrets: tuple[str, ...] = field(default=(), repr=False)  # more to keep out (a key not sent)

    def __post_init__(self) -> None:
        import httpx

        try:  # an unclosed [IPv6 host] or a port out of range fails to split at all
            parts = urlsplit(self.base_url)
            usable = parts.scheme in ("http", "https") and bool(parts.hostname)
            usable = usable and (parts.port is None or parts.port > 0)
            httpx.URL(self.url)  # what httpx itself would refuse later: a bad IDNA host, a space
        except (ValueError, httpx.InvalidURL):
            usable = False
        if not usable:
            shown = self.redactor.clip(self.base_url, 200)
            raise RidgelineError(
                f"URL {shown!r} must be http:// or https://, a host and an optional port, "
                "e.g. http://127.0.0.1:8080/v1"
            )
        if self.api not in ("completions", "chat"):
            raise RidgelineError(f"--api {self.api!r}: use completions or chat")
        check_positive("--timeout", self.timeout_s, hi=MAX_TIMEOUT_S)
        check_positive("--connect-timeout", self.connect_timeout_s, hi=MAX_TIMEOUT_S)
        if self.read_timeout_s is not None:
            check_positive("--read-timeout", self.read_timeout_s, hi=MAX_TIMEOUT_S)
        for name, value in self.headers.items():
            check_header(name, value)

    @functools.cached_property
    def redactor(self) -> Redactor:
        """What must never be stored or printed: the key, credential headers, URL secrets."""
        return Redactor.of(self.base_url, self.headers, self.secrets)

    @property
    def url(self) -> str:
        return join_url(self.base_url, "chat/completions" if self.api == "chat" else "completions")

    @property
    def shown_url(self) -> str:
        """The base URL as messages show it: no credentials."""
        return self.redactor.clip(self.base_url, 300)

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
    error: str | None = None  # whole here; `send` redacts it, then cuts it to length

    def fail(self, kind: str, message: str) -> Stream:
        if self.error_kind is None:
            self.error_kind, self.error = kind, f"{kind}: {message}"
        return self


def make_client(ep: Endpoint, connections: int | None) -> Any:
    """An httpx client for the endpoint; `connections` None means no limit (open loop)."""
    import httpx

    read_s = ep.read_timeout_s or ep.timeout_s
    return httpx.AsyncClient(
        headers={"Accept-Encoding": "identity"} | ep.headers,  # raw bytes: nothing to decompress
        verify=ssl_context(ep.verify),
        timeout=httpx.Timeout(ep.timeout_s, connect=ep.connect_timeout_s, read=read_s),
        limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
    )


@contextlib.asynccontextmanager
async def open_streams(ep: Endpoint, client: Any) -> AsyncIterator[Any]:
    """What `send` streams over: a `Wire` to the endpoint, or `client` (httpx) when a
    proxy in the environment covers the URL. While it is open the heap is frozen."""
    with _frozen_heap():
        if _proxied(ep.url):
            yield client
            return
        silence_s = ep.read_timeout_s or ep.timeout_s
        wire = Wire(ep.url, ep.headers, ssl_context(ep.verify), ep.connect_timeout_s, silence_s, clock)
        try:
            yield wire
        finally:
            wire.close()


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """What the process holds when streaming starts (its modules, the prompts) is set aside
    from the garbage collector (`gc.freeze`), so that a full collection, which would walk
    all of it (some 30,000 objects and 4 ms here), does not stall the reads of a run."""
    import gc

    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _proxied(url: str) -> bool:
    """Whether HTTP(S)_PROXY / ALL_PROXY (less NO_PROXY) send this URL through a proxy."""
    import urllib.request

    parts = urlsplit(url)
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get(parts.scheme) or proxies.get("all")):
        return False
    bypass = urllib.request.proxy_bypass_environment  # type: ignore[attr-defined]
    return not bypass(parts.hostname or "", proxies)


async def _read_capped(response: Any, limit: int = ERROR_BODY_BYTES) -> bytes:
    body = bytearray()
    async for raw in response.aiter_raw():
        body += raw
        if len(body) >= limit:
            break
    return bytes(body[:limit])


def _http_error(status: int, body: bytes) -> tuple[str, str]:
    """`http 503`: one kind per status, so a 429 (rate limit) stands apart from a 400."""
    text = body.decode("utf-8", "replace")
    try:
        err = json.loads(text).get("error", text)
        text = err.get("message", str(err)) if isinstance(err, dict) else str(err)
    except (ValueError, AttributeError, RecursionError):
        pass
    return f"http {status}", f"HTTP {status} {text}"


def _take(s: Stream, data: str, now: float) -> None:
    quick = usual(data)
    if quick is not None:  # one choice, no usage, no error: most events of a stream
        text, bearing, finish = quick
        if bearing:
            s.token_times_s.append(now)
            s.texts.append(text)
        s.finish_reason = finish or s.finish_reason
        return
    for chunk in interpret(data):
        if chunk.error:
            s.fail("error event", chunk.error)
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
            s.fail(*_http_error(response.status_code, await _read_capped(response)))
            return
        if "text/event-stream" not in response.headers.get("content-type", ""):
            await _read_capped(response)
            s.fail(
                "not streaming", f"the reply is {response.headers.get('content-type') or 'untyped'}, not SSE"
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


async def _stream_wire(wire: Wire, body: dict[str, Any], s: Stream, timeout_s: float) -> None:
    def stamp(now: float) -> None:
        s.send_s = now

    def after(reply: Reply) -> Iterator[None]:  # run by the wire's backlog, off the reads' path
        status = s.status = reply.status
        if reply.error is None and status is not None and status >= 400:
            s.fail(*_http_error(status, reply.payload(ERROR_BODY_BYTES)))
        elif reply.error is None and not reply.sse:
            kind = reply.headers.get("content-type") or "untyped"
            s.fail("not streaming", f"the reply is {kind}, not SSE")
        else:
            yield from _parsing(s, reply.arrivals())

    reply = await wire.exchange(wire.request(body), stamp, after, timeout_s)
    if reply.error is not None:
        raise reply.error


def _parse(s: Stream, arrivals: Iterable[Stamped]) -> None:
    """Events in arrival order, each stamped with the read that completed it."""
    for _ in _parsing(s, arrivals):
        pass


def _parsing(s: Stream, arrivals: Iterable[Stamped], every: int = 16) -> Iterator[None]:
    """`_parse` in slices: it pauses after each `every` reads, so a `Backlog` can run the
    event loop's reads (and stamp them) in between."""
    parser = SseParser()
    now = s.send_s
    for i, (now, raw) in enumerate(arrivals, 1):
        for data in parser.feed(raw):
            if s.first_event_s is None:
                s.first_event_s = now
            _take(s, data, now)
            if s.done:
                return
        if not i % every:
            yield
    for data in parser.close():
        _take(s, data, now)


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception and what it wraps, outermost first (httpx wraps httpcore wraps OSError)."""
    out: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in out:
        out.append(cur)
        cur = cur.__cause__ or cur.__context__
    return out


def classify(exc: Exception, s: Stream, ep: Endpoint) -> tuple[str, str]:
    """An httpx failure as (kind, message): which phase failed, and why."""
    import socket

    import httpx

    tokens = len(s.token_times_s)
    causes = _causes(exc)
    if isinstance(exc, httpx.ConnectTimeout):
        return "connect timeout", f"no connection within {ep.connect_timeout_s:g} s"
    if isinstance(exc, httpx.ReadTimeout):
        silence = ep.read_timeout_s or ep.timeout_s
        return "read timeout", f"the server sent nothing for {silence:g} s (after {tokens} tokens)"
    if isinstance(exc, httpx.WriteTimeout):
        return "write timeout", "the request could not be sent in time"
    if isinstance(exc, httpx.PoolTimeout):
        return "pool timeout", "no free connection in time"
    tls = next((c for c in causes if isinstance(c, ssl.SSLError)), None)
    if tls is not None:
        reason = getattr(tls, "verify_message", None) or getattr(tls, "reason", None) or str(tls)
        return "TLS error", f"the TLS handshake failed: {reason}"
    if isinstance(exc, httpx.ConnectError):
        if any(isinstance(c, ConnectionRefusedError) for c in causes):
            return "connect refused", "nothing listens at that host and port"
        if any(isinstance(c, socket.gaierror) for c in causes):
            return "name not resolved", f"no address for the host ({causes[-1]})"
        return "connect failed", f"no connection ({causes[-1]})"
    if isinstance(exc, (httpx.ReadError, httpx.WriteError)) or (
        isinstance(exc, httpx.RemoteProtocolError)
        and any(word in str(exc).lower() for word in ("disconnect", "closed", "incomplete"))
    ):
        if s.status is None:
            return (
                "disconnected before reply",
                f"the server closed the connection ({exc or type(exc).__name__})",
            )
        return "disconnected mid-stream", f"the connection was cut after {tokens} tokens"
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.LocalProtocolError)):
        return "protocol error", f"{type(exc).__name__}: {exc}"
    return "transport error", f"{type(exc).__name__}: {exc}"


async def send(client: Any, ep: Endpoint, prompt: str, max_tokens: int) -> Stream:
    """Stream one request; never raises for a server's or the network's failure. The
    error message is redacted (no key, no URL credentials) before it is cut to length."""
    import httpx

    s = Stream(send_s=clock())  # the send, until _stream stamps it exactly
    try:
        body = ep.body(prompt, max_tokens)
        if isinstance(client, Wire):  # which bounds the request's time itself
            await _stream_wire(client, body, s, ep.timeout_s)
        else:
            await asyncio.wait_for(_stream(client, ep, body, s), ep.timeout_s)
    except asyncio.TimeoutError:
        s.fail(
            "request timeout",
            f"no complete answer within {ep.timeout_s:g} s ({len(s.token_times_s)} tokens)",
        )
    except MalformedStream as exc:
        s.fail("malformed SSE", str(exc))
    except WireError as exc:
        s.fail(exc.kind, exc.message(len(s.token_times_s)))
    except httpx.HTTPError as exc:
        s.fail(*classify(exc, s, ep))
    except (OSError, ssl.SSLError) as exc:  # a socket error httpx did not wrap
        s.fail("transport error", f"{type(exc).__name__}: {exc}")
    if s.error_kind is None:
        if not s.token_times_s:
            s.fail("empty stream", "the stream carried no generated token")
        elif not s.done and s.finish_reason is None:
            s.fail("disconnected mid-stream", f"the stream ended early after {len(s.token_times_s)} tokens")
    if s.error is not None:
        s.error = ep.redactor.clip(s.error, MESSAGE_CHARS)
    return s
