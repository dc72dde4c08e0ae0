"""Counting tokens: the server's own tokenizer where it has an endpoint, else a local
one, else an estimate (about one token per common English word, with a warning).

Endpoints tried, in order, against the server's root (the base URL without `/v1`):
`POST /extras/tokenize {"input"}` (llama-cpp-python), `POST /tokenize {"model",
"prompt"}` (vLLM) and `POST /tokenize {"content"}` (llama.cpp's own server). Counts
include the special tokens the server adds (a BOS), as the prompt the model reads does;
`count_generated` subtracts them, since generated text carries none.

A count is one exchange bounded as a request is: it ends within `--timeout` and its reply
is capped in size, so a server that trickles its tokenize reply forever, or sends one
without end, fails that count (a ValueError) instead of holding the run up.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ridgeline.errors import RidgelineError
from ridgeline.measure.client import join_url, server_root

ENDPOINTS = (
    ("/extras/tokenize", "input"),
    ("/tokenize", "prompt"),
    ("/tokenize", "content"),
)
# A reply holds a count, or a list of token ids: at most one id a byte of text, each id
# under 16 bytes with its comma and space, beside a megabyte for everything else.
REPLY_BYTES = 1 << 20
REPLY_BYTES_PER_TEXT_BYTE = 16


@dataclass
class Tokenizer:
    """source: server | local | estimate. `overhead` = tokens of the empty text;
    `timeout_s` bounds each count the server makes (--timeout)."""

    source: str
    overhead: int = 0
    url: str = ""
    key: str = ""
    model: str = ""
    local: Any = field(default=None, repr=False)
    timeout_s: float = 300.0

    async def count(self, client: Any, text: str) -> int:
        if self.source == "estimate":
            return len(text.split()) + self.overhead
        if self.source == "local":
            return len(self.local(text))
        body = {self.key: text}
        if self.key == "prompt":
            body["model"] = self.model
        limit = REPLY_BYTES + REPLY_BYTES_PER_TEXT_BYTE * len(text.encode())
        try:
            raw = await asyncio.wait_for(_post(client, self.url, body, limit), self.timeout_s)
        except asyncio.TimeoutError:
            raise ValueError(f"no complete tokenize reply within {self.timeout_s:g} s") from None
        try:
            data = json.loads(raw)
        except RecursionError:
            raise ValueError("the tokenize reply is nested too deeply") from None
        count = data.get("count") if isinstance(data, dict) else None
        if count is None and isinstance(data, dict) and isinstance(data.get("tokens"), list):
            count = len(data["tokens"])
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ValueError("the tokenize reply holds no count of tokens")
        return count

    async def count_generated(self, client: Any, text: str) -> int:
        return max(await self.count(client, text) - self.overhead, 0)


async def _post(client: Any, url: str, body: dict[str, Any], limit: int) -> bytes:
    """The reply's body, refused (ValueError) once it passes `limit` bytes."""
    async with client.stream("POST", url, json=body) as resp:
        resp.raise_for_status()
        data = bytearray()
        async for chunk in resp.aiter_bytes():
            data += chunk
            if len(data) > limit:
                raise ValueError(f"the tokenize reply runs past {limit:,} bytes")
        return bytes(data)


async def discover(client: Any, base_url: str, model: str, timeout_s: float = 300.0) -> Tokenizer | None:
    """The first tokenize endpoint that answers with tokens, or None. The search as a whole
    ends within `timeout_s` (--timeout), as one request would: endpoints that have not
    answered by then are endpoints that do not answer."""
    try:
        return await asyncio.wait_for(_first_answering(client, base_url, model, timeout_s), timeout_s)
    except asyncio.TimeoutError:
        return None


async def _first_answering(client: Any, base_url: str, model: str, timeout_s: float) -> Tokenizer | None:
    import httpx

    root = server_root(base_url)
    for path, key in ENDPOINTS:
        tok = Tokenizer("server", url=join_url(root, path), key=key, model=model, timeout_s=timeout_s)
        try:
            tok.overhead = await tok.count(client, "")
            if await tok.count(client, "hello world") <= tok.overhead:
                continue
        except (httpx.ConnectError, httpx.ConnectTimeout):
            raise  # no server there: every other endpoint would fail the same way
        except (httpx.HTTPError, ValueError, KeyError, TypeError):
            continue
        return tok
    return None


def local_tokenizer(path: str) -> Tokenizer:
    """A tokenizer from a file: a .gguf (through llama-cpp-python, vocabulary only) or a
    Hugging Face tokenizer.json (through the `tokenizers` package)."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise RidgelineError(f"--tokenizer {path}: file not found; give a .gguf or a tokenizer.json")
    if p.suffix == ".gguf":
        try:
            from llama_cpp import Llama
        except ImportError:
            raise RidgelineError(
                "--tokenizer FILE.gguf needs llama-cpp-python: pip install llama-cpp-python"
            ) from None
        try:
            vocab = Llama(str(p), vocab_only=True, verbose=False)
        except (RuntimeError, ValueError, OSError) as e:  # llama.cpp refused the file
            raise RidgelineError(f"--tokenizer {path}: not a readable GGUF vocabulary ({e})") from None

        def encode(text: str) -> list[int]:
            return list(vocab.tokenize(text.encode("utf-8"), add_bos=True, special=True))

    else:
        try:
            from tokenizers import Tokenizer as HfTokenizer
        except ImportError:
            raise RidgelineError(
                "--tokenizer tokenizer.json needs the tokenizers package: pip install tokenizers"
            ) from None
        try:
            hf = HfTokenizer.from_file(str(p))
        except Exception as e:  # the tokenizers package raises plain Exception on bad files
            raise RidgelineError(f"--tokenizer {path}: not a readable tokenizer.json ({e})") from None

        def encode(text: str) -> list[int]:
            return list(hf.encode(text).ids)

    return Tokenizer("local", overhead=len(encode("")), local=encode)
