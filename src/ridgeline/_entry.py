"""The console script. The CLI is imported inside a guard, so an interrupt during start-up
is status 130 and one line, like an interrupt at any other time."""

from __future__ import annotations

import gc
import sys


def entry() -> None:
    try:
        from ridgeline.cli import main
    except KeyboardInterrupt:
        sys.stderr.write("ridgeline: interrupted\n")
        sys.exit(130)
    status = main()
    # The command has finished, its files are closed and its output written. The collector's
    # last pass at exit would walk every object start-up made (modules, classes, the run's
    # data) to free what the OS frees anyway: a tenth of a short command's time. Frozen, they
    # are left to it; exit handlers and the final flush of stdout run as ever.
    gc.freeze()
    sys.exit(status)
