"""The console script. The CLI is imported inside a guard, so an interrupt during start-up
is status 130 and one line, like an interrupt at any other time."""

from __future__ import annotations

import sys


def entry() -> None:
    try:
        from ridgeline.cli import main
    except KeyboardInterrupt:
        sys.stderr.write("ridgeline: interrupted\n")
        sys.exit(130)
    sys.exit(main())
