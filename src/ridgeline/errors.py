"""The one exception a user can cause, with the fix in its message; and the one a signal
causes once a command has said it stopped."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable


class RidgelineError(ValueError):
    """A user mistake: bad input, an unknown name, a file that cannot be read.

    The message is one line that names the bad value and says how to fix it; the
    command line prints it on stderr and exits with status 2.
    """


class Stopped(Exception):
    """A command stopped by Ctrl-C or SIGTERM that has said so in one line (see
    interrupts.py); the command line exits with `status`, 130 or 143."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def unknown_name(
    kind: str, name: str, known: Iterable[str], listing: str, compared: str | None = None
) -> RidgelineError:
    """An unknown catalogue name, with the closest known names suggested (to `compared`, the
    name as the catalogue reads it, where that is not the name in lower case)."""
    import difflib

    names = sorted(known)
    compared = str(name).lower() if compared is None else compared
    close = difflib.get_close_matches(compared[:200], names, n=3, cutoff=0.4)
    hint = f"did you mean {', '.join(close)}? " if close else ""
    return RidgelineError(f"unknown {kind} {name!r}: {hint}`{listing}` lists them")
