"""A measuring worker: one process of `ridgeline measure --workers N` (see `run._in_workers`).

It reads its job and then its shares of each load point from stdin, streams them on its
own event loop, appends each record to the run's JSONL itself and tells the parent about
it on stdout. It stops when told to, or when its stdin closes (the parent is gone): what
it holds is flushed first, as a run interrupted in one process does.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from ridgeline.measure.client import make_client, open_streams, send
from ridgeline.measure.run import (
    SLIM_KEYS,
    WARMUP_TOKENS,
    Hooks,
    Writer,
    read_frame,
    run_share,
    send_frame,
)
from ridgeline.measure.tokens import local_tokenizer


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
    inbox, outbox = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # stdout carries frames only
    job = read_frame(inbox)
    if job is None:
        return
    try:
        asyncio.run(_serve(job, inbox, outbox))
    except Exception as exc:  # told to the parent in one line, without a secret in it
        text = job["ep"].redactor.clip(f"{type(exc).__name__}: {exc}", 500)
        with contextlib.suppress(OSError):
            send_frame(outbox, ("error", text))


async def _serve(job: dict[str, Any], inbox: Any, outbox: Any) -> None:
    loop = asyncio.get_running_loop()
    messages: asyncio.Queue[Any] = asyncio.Queue()

    def pump() -> None:
        while (message := read_frame(inbox)) is not None:
            loop.call_soon_threadsafe(messages.put_nowait, message)
        loop.call_soon_threadsafe(messages.put_nowait, ("stop",))  # the parent is gone

    threading.Thread(target=pump, daemon=True).start()
    ep, plan, tok = job["ep"], job["plan"], job["tok"]
    if tok.source == "local":
        tok = local_tokenizer(plan.tokenizer)

    def tell(rec: dict[str, Any]) -> None:
        send_frame(outbox, ("record", {k: rec.get(k) for k in SLIM_KEYS}))

    async with make_client(ep, None) as client, open_streams(ep, client) as streams:
        with Path(job["out"]).open("a", encoding="utf-8") as handle:
            writer = Writer(handle, Hooks(on_record=tell))

            async def do(message: tuple[Any, ...]) -> None:
                if message[0] == "warm":
                    for text in message[1]:
                        await send(streams, ep, text, WARMUP_TOKENS)
                elif message[0] == "share":
                    writer.start_point()
                    await run_share(streams, client, ep, tok, plan, message[1], writer, job["run_start"])

            send_frame(outbox, ("ready",))
            try:
                while (message := await messages.get())[0] != "stop":
                    work = asyncio.ensure_future(do(message))
                    stop = asyncio.ensure_future(messages.get())
                    await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
                    if stop.done():  # told to stop mid-share: what finished is written
                        work.cancel()
                        await asyncio.gather(work, return_exceptions=True)
                        return
                    stop.cancel()
                    work.result()
                    send_frame(outbox, ("done",))
            finally:
                writer.flush_pending()
