"""SIGTERM as Ctrl-C. While a long command runs (a simulation, a plan, a search, a film), a
SIGTERM raises where the process is, as Ctrl-C does, so the command keeps or cleans up what
it has as it would on Ctrl-C. A command that has nothing of its own to say about an interrupt
lets `SigtermInterrupts(say=True)` say it: one line, and status 130 (Ctrl-C) or 143
(SIGTERM) through `Stopped`, which the CLI returns as the process's status."""

from __future__ import annotations

import sys
from typing import Any

from ridgeline.errors import Stopped


class Terminated(KeyboardInterrupt):
    """A SIGTERM, raised inside `SigtermInterrupts()`."""


class SigtermInterrupts:
    """While inside, SIGTERM raises Terminated; `signame` says whether it came. Outside the
    main thread (where no handler can be set) SIGTERM keeps its handler. With `say`, an
    interrupt leaving the block is one line on stderr and Stopped."""

    def __init__(self, say: bool = False) -> None:
        self.say = say
        self.signame: str | None = None
        self.previous: Any = None

    def __enter__(self) -> SigtermInterrupts:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():

            def interrupt(signum: int, frame: Any) -> None:
                self.signame = "SIGTERM"
                raise Terminated

            self.previous = signal.signal(signal.SIGTERM, interrupt)
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if self.previous is not None:
            import signal

            signal.signal(signal.SIGTERM, self.previous)
            self.previous = None
        if self.say and isinstance(exc, KeyboardInterrupt):
            sigterm = self.signame == "SIGTERM"
            sys.stderr.write(f"ridgeline: {'terminated (SIGTERM)' if sigterm else 'interrupted'}\n")
            raise Stopped(143 if sigterm else 130) from None
