"""Server-sent events, and what one OpenAI streaming chunk says.

An SSE stream is lines; `data:` lines accumulate into an event that a blank line ends,
and lines starting with `:` are comments (keep-alives). A chunk is token-bearing when it
carries generated text: `choices[].text` (completions) or `choices[].delta.content`
(chat; also reasoning text and tool calls). A role-only prelude (`delta: {"role":
"assistant"}`), a usage-only chunk and a keep-alive carry none.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from ridgeline.metrics import MAX_RECORD_TOKENS


class MalformedStream(ValueError):
    """A data event that is not a JSON object, nor `[DONE]`."""


# Messages quote what the server sent at this length; the client redacts them and only then
# cuts them to a record's length, so a secret the server echoed is never left half-cut.
QUOTE_CHARS = 4096


class Chunk(NamedTuple):  # a tuple: one is made per event, and a tuple is made fastest
    text: str = ""
    token_bearing: bool = False
    done: bool = False  # the `[DONE]` sentinel
    finish_reason: str | None = None
    completion_tokens: int | None = None  # from a usage block
    prompt_tokens: int | None = None
    error: str | None = None  # an error object sent inside the stream


class SseParser:
    """Feed raw bytes as they arrive; get back the data payloads of complete events."""

    def __init__(self) -> None:
        self._pending = b""
        self._data: list[str] = []

    def feed(self, raw: bytes) -> list[str]:
        if (  # the usual read: one whole event of one `data:` line, nothing carried over
            not self._pending
            and not self._data
            and raw[:5] == b"data:"
            and raw.find(b"\n") == len(raw) - 2
            and raw[-1:] == b"\n"
            and b"\r" not in raw
        ):
            value = raw[6:-2] if raw[5:6] == b" " else raw[5:-2]
            return [value.decode("utf-8", "replace")]
        self._pending += raw
        if b"\r" in self._pending:
            self._pending = self._pending.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        events = []
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            if not line:  # a blank line ends the event
                if self._data:
                    events.append("\n".join(self._data))
                    self._data = []
                continue
            if line.startswith(b":"):
                continue  # a comment: keep-alive
            field, _, value = line.partition(b":")
            if field == b"data":
                self._data.append(value.removeprefix(b" ").decode("utf-8", "replace"))
        return events

    def close(self) -> list[str]:
        """The last event, when the stream ends without its blank line."""
        return self.feed(b"\n\n")


def _usage(obj: dict[str, Any]) -> tuple[int | None, int | None]:
    usage = obj.get("usage")
    if not isinstance(usage, dict):
        return None, None
    return _count(usage.get("completion_tokens")), _count(usage.get("prompt_tokens"))


def _count(value: Any) -> int | None:
    """A token count a server reports, if it is one (a bool, a negative or a float is not)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_RECORD_TOKENS
    return int(value) if ok else None


def _choice_text(choice: dict[str, Any]) -> tuple[str, bool]:
    """Generated text of one choice, and whether it carries a token at all."""
    if isinstance(choice.get("text"), str):
        return choice["text"], bool(choice["text"])
    delta = choice.get("delta") or choice.get("message") or {}
    if not isinstance(delta, dict):
        return "", False
    text = "".join(
        delta[key] for key in ("reasoning_content", "reasoning", "content") if isinstance(delta.get(key), str)
    )
    return text, bool(text) or bool(delta.get("tool_calls"))


_scan = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # json.loads, unwrapped


def _loads(data: str) -> Any:
    """json.loads(data), a microsecond sooner for the usual `{...}` with nothing around it."""
    if data[:1] == "{" and data[-1:] == "}":
        try:
            obj, end = _scan(data, 0)
        except StopIteration:
            end = -1
        if end == len(data):
            return obj
    return json.loads(data)


def usual(data: str) -> tuple[str, bool, str | None] | None:
    """The usual event, read quickly: a JSON object with one choice, no usage and no error,
    as `interpret` would read it: (text, token_bearing, finish_reason). None for any other
    event, which `interpret` reads (and, if it is malformed, says why)."""
    if data[:1] != "{" or data[-1:] != "}":
        return None
    try:
        obj, end = _scan(data, 0)
    except (StopIteration, ValueError, RecursionError):
        return None
    if end != len(data) or type(obj) is not dict or "error" in obj or obj.get("usage") is not None:
        return None
    choices = obj.get("choices")
    if type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict:
        return None
    text, bearing = _choice_text(choices[0])
    reason = choices[0].get("finish_reason")
    return text, bearing, reason[:40] if isinstance(reason, str) and reason else None


def interpret(data: str) -> list[Chunk]:
    """One event's data as chunks. Lenient with servers that put several `data:` lines
    in one event: when the whole does not parse, each line is tried on its own."""
    if len(data) < 32 and data.strip() == "[DONE]":
        return [Chunk(done=True)]
    try:
        obj = _loads(data)
    except (ValueError, RecursionError):
        lines = data.split("\n")
        if len(lines) > 1:
            return [c for line in lines for c in interpret(line)]
        raise MalformedStream(f"not JSON: {data[:QUOTE_CHARS]}") from None
    if not isinstance(obj, dict):
        raise MalformedStream(f"not a JSON object: {data[:QUOTE_CHARS]}")
    if "error" in obj:
        err = obj["error"]
        message = err.get("message", err) if isinstance(err, dict) else err
        return [Chunk(error=str(message)[:QUOTE_CHARS])]
    choices = obj.get("choices")
    if choices is not None and not isinstance(choices, list):
        raise MalformedStream("'choices' is not a list")
    text, bearing, finish = "", False, None
    for choice in choices or []:
        if not isinstance(choice, dict):
            raise MalformedStream("a choice is not an object")
        piece, carries = _choice_text(choice)
        text, bearing = text + piece, bearing or carries
        reason = choice.get("finish_reason")
        finish = reason[:40] if isinstance(reason, str) and reason else finish
    out, inp = _usage(obj)
    return [Chunk(text, bearing, False, finish, out, inp)]
