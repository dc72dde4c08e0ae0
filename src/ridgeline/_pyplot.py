"""matplotlib's pyplot, headless, for the faces that draw PNGs (`compare --plot`,
`search --plot`). matplotlib is optional (`pip install 'ridgeline[plot]'`): without it the
command says so in one line."""

from __future__ import annotations

from typing import Any

from ridgeline.errors import RidgelineError


def pyplot(what: str) -> Any:
    """pyplot on the Agg backend; `what` names the option that needs it."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise RidgelineError(f"{what} needs matplotlib: pip install 'ridgeline[plot]'") from None
    return plt
