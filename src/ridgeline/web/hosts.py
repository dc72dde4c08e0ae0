"""The Host header check: a defence against DNS rebinding.

A page on evil.example can point its own name at 127.0.0.1 and then read this server's
answers as if they were its own. The browser still sends `Host: evil.example:PORT`, so a
server that answers only to the address it serves (`127.0.0.1:PORT`, `localhost:PORT`)
is safe. A server bound to every address (`--host 0.0.0.0`) cannot know the names it is
reached by; it answers to any IP address written as such and to `localhost`, never to a
name that DNS could point anywhere.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from typing import Any

from ridgeline._files import dumps
from ridgeline.checks import one_line

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

WILDCARDS = ("", "0.0.0.0", "::")
ANY_IP = "*ip*"  # in an allowed set: any IP address literal, at the served port


def _literal(host: str) -> str:
    """An address as a Host header writes it: IPv6 in brackets, names in lower case."""
    return f"[{host}]" if ":" in host else host.lower()


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """The Host header values a server bound to host:port answers to."""
    if host in WILDCARDS:
        names = {"localhost", ANY_IP}
    elif host == "localhost":
        names = {"localhost", "127.0.0.1", "[::1]"}
    elif is_loopback(host):
        names = {_literal(host), "localhost"}
    else:
        names = {_literal(host)}
    allowed = {f"{name}:{port}" for name in names}
    if port == 80:  # browsers leave the default port out
        allowed |= names
    return frozenset(allowed)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _split(value: str) -> tuple[str, str]:
    """`name:port`, `[v6]:port` or a bare name, as (host, ':port' or '')."""
    if value.startswith("["):
        host, _, rest = value.partition("]")
        return host[1:], rest
    host, colon, port = value.rpartition(":")
    return (host, colon + port) if colon else (value, "")


def host_allowed(value: str, allowed: Collection[str]) -> bool:
    value = value.lower()
    if value in allowed:
        return True
    if not any(a.startswith(ANY_IP) for a in allowed):
        return False
    host, port = _split(value)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return ANY_IP + port in allowed


class HostCheck:
    """ASGI middleware: refuse, with a 400 and one line of JSON, any HTTP request whose
    Host header is not one of `allowed` (exact `name:port` values, see `allowed_hosts`)."""

    def __init__(self, app: ASGIApp, allowed: Collection[str], headers: dict[str, str]) -> None:
        self.app = app
        self.allowed = frozenset(a.lower() for a in allowed)
        self.headers = [(k.lower().encode(), v.encode()) for k, v in headers.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        hosts = [v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"]
        if len(hosts) == 1 and host_allowed(hosts[0], self.allowed):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        asked = f"host {one_line(repr(hosts[0])[:80])}" if len(hosts) == 1 else "this request's Host header"
        served = " or ".join(sorted(a.replace(ANY_IP, "any IP address") for a in self.allowed))
        detail = f"this server does not answer to {asked}: open it as {served}"
        body = dumps({"detail": detail}, indent=None).encode("utf-8")
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 400, "headers": headers + self.headers})
        await send({"type": "http.response.body", "body": body})
