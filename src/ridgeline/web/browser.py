"""The lesson's API without a server: the page's JavaScript calls these under Pyodide.

`ridgeline web --export DIR` ships the core, this module, `view.py` and `lesson.py` (with
the lesson's steps) as Python source; `static/js/api.js` loads them into Pyodide when the
page has no server behind it, and sends each call here instead of to `/api/...`. Every
answer is the same JSON the server gives for the same question (`app.py`'s routes call the
same functions), as text: `{"ok": value}`, or `{"error": "one line"}` where the server
answers 422. Nothing here imports numpy or the web face's server libraries.

The simulator needs numpy, so step 15's table comes from the export (`slo.py` at export
time, for that step's state) and is read from SIMULATED; other states say so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from ridgeline._files import dumps, loads_json
from ridgeline.checks import one_line
from ridgeline.errors import RidgelineError
from ridgeline.web import lesson
from ridgeline.web.view import State, state_from
from ridgeline.web.view import playground as playground_of

SIMULATED = Path(__file__).parent / "simulated.json"  # written by the export
MAX_DETAIL = 500  # characters in an error's one line, as the server's
MAX_ANSWER = 64  # characters in a drill's answer, as the server's


def _query(text: str) -> dict[str, Any]:
    try:
        query = loads_json(text)
    except ValueError:
        raise RidgelineError("the page sent a query that is not JSON") from None
    if not isinstance(query, dict):
        raise RidgelineError("the page sent a query that is not an object")
    return query


def _state(text: str) -> State:
    return state_from(_query(text))


def playground(query: str) -> Any:
    """`/api/playground`: the estimate and the chart for a state."""
    return playground_of(_state(query))


def models() -> Any:
    """`/api/models`: exactly `ridgeline models --json`."""
    from ridgeline.describe import describe_all

    return describe_all()


def engines() -> Any:
    """`/api/engines`: exactly `ridgeline engines --json`."""
    from ridgeline.describe import describe_engines

    return describe_engines()


def lesson_outline() -> Any:
    """`/api/lesson`: the steps, their sections and takeaways."""
    return lesson.outline()


def step(n: int) -> Any:
    """`/api/lesson/{n}`: a step's state, prose and drill, its numbers from the core."""
    return lesson.rendered(_whole(n))


def check(n: int, answer: str) -> Any:
    """`/api/lesson/{n}/check`: a drill's answer marked against the core's value."""
    text = str(answer)
    if len(text) > MAX_ANSWER:
        raise RidgelineError(f"answer: at most {MAX_ANSWER} characters")
    try:
        value = float(text)
    except ValueError:
        raise RidgelineError(f"answer must be a finite number, got {text[:40]!r}") from None
    if not math.isfinite(value):
        raise RidgelineError(f"answer must be a finite number, got {text[:40]!r}")
    return lesson.check(_whole(n), value)


@lru_cache(maxsize=1)
def _simulated() -> dict[str, Any]:
    if not SIMULATED.is_file():
        return {}
    data = json.loads(SIMULATED.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def slo(query: str) -> Any:
    """`/api/slo`: step 15's table, as the export simulated it."""
    from ridgeline.web.slo import key_of

    s = _state(query)
    table = _simulated().get(key_of(s))
    if table is None:
        raise RidgelineError(
            "this static copy of the lesson carries the simulator's table for step 15's own state "
            "only (it was simulated when the site was exported); run `ridgeline web` to simulate "
            "this one live"
        )
    return table


def _whole(n: Any) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, float)) or not float(n).is_integer():
        raise RidgelineError(f"step must be a whole number, got {n!r}")
    return int(n)


CALLS: dict[str, Callable[..., Any]] = {
    "playground": playground,
    "models": models,
    "engines": engines,
    "lesson": lesson_outline,
    "step": step,
    "check": check,
    "slo": slo,
}


def call(name: str, *args: Any) -> str:
    """One call from the page, answered as JSON text: {"ok": value} or {"error": "one line"}."""
    try:
        if name not in CALLS:
            raise RidgelineError(f"no such call {name!r}: use {', '.join(CALLS)}")
        return dumps({"ok": CALLS[name](*args)}, indent=None)
    except RidgelineError as exc:
        return dumps({"error": one_line(str(exc), MAX_DETAIL)}, indent=None)
