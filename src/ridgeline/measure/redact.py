"""Secrets out of everything `measure` stores or prints.

A run knows its secrets: the API key, the values of headers that carry credentials
(Authorization, Cookie, X-Api-Key, ...), the user and password in the URL (and the Basic
header httpx makes of them) and the values of query parameters named like credentials
(`key=`, `api_key=`, `token=`, ...). `Redactor.redact` replaces each of them with `***`,
and so too anything shaped like one that it was not told of: a `Bearer` token, a
`user:pass@` in a URL, a `?key=` value. Every message that can hold a server's or a user's
text goes through `Redactor.clip`, which redacts *before* it cuts the text to length, so
no cut can leave half a secret behind.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from ridgeline.checks import one_line

MASK = "***"
# A header or query parameter whose name says it carries a credential.
_SECRET_NAME = re.compile(r"key|token|secret|passw|auth|sig|credential|session|cookie", re.IGNORECASE)
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@?#'\"]*@")
_QUERY = re.compile(
    r"(?i)([?&;][^=&\s#'\"]*(?:key|token|secret|passw|auth|sig|credential)[^=&\s#'\"]*=)[^&\s#'\"]*"
)
_BEARER = re.compile(r"(?i)\b(bearer)\s+[^\s'\",;]+")
_BASIC = re.compile(r"(?i)\b(basic)\s+[A-Za-z0-9+/]{8,}={0,2}")


def secret_header(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


@dataclass(frozen=True)
class Redactor:
    """The secrets of one run, longest first (so a secret that holds another goes whole)."""

    secrets: tuple[str, ...] = ()

    @classmethod
    def of(cls, url: str, headers: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> Redactor:
        found: set[str] = {s for s in extra if s}
        for name, value in (headers or {}).items():
            if secret_header(name):
                found.add(value)
                found.update(part for part in value.split()[1:])  # the token of "Bearer TOKEN"
        found.update(_url_secrets(url))
        found = {s.strip() for s in found} - {""}
        return cls(tuple(sorted(found, key=len, reverse=True)))

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        text = _USERINFO.sub(rf"\1{MASK}@", text)
        text = _QUERY.sub(rf"\1{MASK}", text)
        text = _BEARER.sub(rf"\1 {MASK}", text)
        return _BASIC.sub(rf"\1 {MASK}", text)

    def clip(self, text: str, limit: int = 240) -> str:
        """Redacted first, then one printable line of at most `limit` characters."""
        return one_line(" ".join(self.redact(text).split()), limit)


def _url_secrets(url: str) -> set[str]:
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:  # a URL too broken to split: the patterns still apply
        return set()
    out: set[str] = set()
    if user or password:
        out.update(x for x in (user, password) if x)
        out.update(unquote(x) for x in (user, password) if x)
        pair = f"{unquote(user or '')}:{unquote(password or '')}"
        out.add(base64.b64encode(pair.encode("utf-8", "replace")).decode("ascii"))
    for item in re.split(r"[&;]", parts.query):
        name, sep, value = item.partition("=")
        if sep and value and _SECRET_NAME.search(unquote(name)):
            out.update((value, unquote(value)))
    return out
