"""The lesson: Markdown steps with TOML front matter, their numbers filled in by the core.

A step file `lesson/NN-slug.md` starts with front matter between `+++` lines:

    title = "FLOPs per byte"
    section = "FLOPs per byte"   # the outline's section (consecutive steps share one)
    takeaway = "..."             # the step in one line, shown in the outline and after the step
    wide = false                 # optional: give the lesson column more room (the cheat sheet)
    show = ["slo"]               # optional: more on the page: "slo" (the simulator's table for
                                 # this state), "training" (training's point on the chart)
    [state]            # the playground's state for this step (unset keys keep the defaults)
    prompt = 2000
    [compare.fp8]      # another state, named: the step's state with these changes
    weights = "fp8"
    [drill]            # optional: a question answered with a number
    question = "..."
    answer = "roofline.decode_floor_s"
    unit = "ms"
    tolerance = 0.05   # relative
    working = "Markdown shown with the verdict"

The body is Markdown (raw HTML allowed, so maths is MathML). A placeholder
`{{ path | format }}` is a value of the step's state: a key of `ridgeline estimate --json`
(`ttft_s`, `memory.per_gpu.weight_bytes`) or of the chart (`roofline.ridge`), optionally
prefixed by a comparison's name (`fp8.tpot_s`); `{{ a / b | x }}` is a ratio of two values
and `{{ a * b | GB }}` a product.

FastAPI-free, so the page's Python in the browser (`browser.py`, under Pyodide) fills the
same placeholders with the same code.
"""

from __future__ import annotations

import html
import math
import re
import sys
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from ridgeline._format import seconds, si
from ridgeline.errors import RidgelineError
from ridgeline.predict import JSON_KEYS
from ridgeline.web.view import STATE_KEYS, State, estimate_dict, roofline_dict

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

LESSON_DIR = Path(__file__).parent / "lesson"
PLACEHOLDER = re.compile(
    r"\{\{\s*(?P<a>[a-z0-9_.]+)\s*(?:(?P<op>[/*])\s*(?P<b>[a-z0-9_.]+)\s*)?(?:\|\s*(?P<fmt>[A-Za-z0-9%/]+)\s*)?\}\}"
)
# A drill's unit: what to multiply the core's SI value by to get the number asked for.
UNIT_SCALE = {"ms": 1e3, "s": 1.0, "GB": 1e-9, "tokens": 1.0, "tokens/s": 1.0, "FLOPs/byte": 1.0}

SHOWS = ("slo", "training")  # what a step may add to the page (front matter `show`)

_markdown = MarkdownIt("commonmark", {"html": True, "typographer": False}).enable("table")


@dataclass(frozen=True)
class Drill:
    question: str
    answer: str  # a placeholder path: the value the core computes
    unit: str
    tolerance: float  # relative
    working: str  # Markdown with placeholders, shown with the verdict


@dataclass(frozen=True)
class Step:
    n: int
    slug: str
    title: str
    state: State
    body: str
    section: str = ""
    takeaway: str = ""
    wide: bool = False
    show: tuple[str, ...] = ()
    compare: dict[str, State] = field(default_factory=dict)
    drill: Drill | None = None


def _state(base: State, changes: dict[str, Any], where: str) -> State:
    unknown = set(changes) - set(STATE_KEYS)
    if unknown:
        raise RidgelineError(f"{where}: unknown state keys {sorted(unknown)}; use {', '.join(STATE_KEYS)}")
    return replace(base, **changes)


def parse_step(text: str, name: str, n: int) -> Step:
    """One step file: `+++` TOML front matter `+++`, then Markdown."""
    parts = text.replace("\r\n", "\n").split("+++\n", 2)
    if len(parts) != 3 or parts[0].strip():
        raise RidgelineError(f"{name}: a lesson step starts with front matter between '+++' lines")
    meta = tomllib.loads(parts[1])
    state = _state(State(), meta.get("state", {}), name)
    compare = {key: _state(state, changes, name) for key, changes in meta.get("compare", {}).items()}
    clash = set(compare) & {*JSON_KEYS, "roofline"}
    if clash:
        raise RidgelineError(f"{name}: comparison names {sorted(clash)} hide estimate keys; rename them")
    drill = meta.get("drill")
    if drill and drill.get("unit") not in UNIT_SCALE:
        raise RidgelineError(f"{name}: drill unit must be one of {', '.join(UNIT_SCALE)}")
    show = meta.get("show", [])
    if not isinstance(show, list) or not all(isinstance(x, str) and x in SHOWS for x in show):
        raise RidgelineError(f"{name}: show lists what else the page shows: {', '.join(SHOWS)}")
    for key in ("title", "section", "takeaway"):
        if not isinstance(meta.get(key, ""), str):
            raise RidgelineError(f"{name}: {key} must be text")
    return Step(
        n=n,
        slug=name.removesuffix(".md").split("-", 1)[1],
        title=meta["title"],
        state=state,
        body=parts[2],
        section=meta.get("section", ""),
        takeaway=meta.get("takeaway", ""),
        wide=bool(meta.get("wide", False)),
        show=tuple(show),
        compare=compare,
        drill=Drill(**drill) if drill else None,
    )


@lru_cache(maxsize=1)
def load_steps() -> tuple[Step, ...]:
    files = sorted(LESSON_DIR.glob("[0-9][0-9]-*.md"))
    return tuple(parse_step(p.read_text(encoding="utf-8"), p.name, i + 1) for i, p in enumerate(files))


@lru_cache(maxsize=1)
def check_placeholders() -> int:
    """Fill every placeholder of every step (prose, takeaway, drill) from the core, so a
    broken one stops the server or the export from starting instead of reaching a learner.
    Returns the number of placeholders filled."""
    filled = 0
    for step in load_steps():
        texts = [step.body, step.takeaway]
        if step.drill is not None:
            texts += [step.drill.question, step.drill.working]
            lookup(step, step.drill.answer)
        for text in texts:
            filled += len(PLACEHOLDER.findall(text))
            fill(step, text)
    return filled


def get_step(n: int) -> Step:
    steps = load_steps()
    if not 1 <= n <= len(steps):
        raise RidgelineError(f"step {n} does not exist: the lesson has steps 1 to {len(steps)}")
    return steps[n - 1]


def values(s: State) -> dict[str, Any]:
    """Everything a placeholder can name for one state."""
    return {**estimate_dict(s), "roofline": roofline_dict(s)}


def lookup(step: Step, path: str) -> Any:
    """A value by its path, or a plain number written in the placeholder."""
    if re.fullmatch(r"[0-9]+(\.[0-9]+)?", path):
        return float(path)
    head, _, rest = path.partition(".")
    if head in step.compare:
        data: Any = values(step.compare[head])
        keys = rest.split(".")
    else:
        data, keys = values(step.state), path.split(".")
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            raise RidgelineError(f"step {step.n}: placeholder '{path}' names no value")
        data = data[key]
    return data


def format_value(value: Any, fmt: str | None) -> str:
    """Units as the lesson writes them: decimal GB and TB/s (a capacity in GiB too), times in ms or s."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return str(value)
    v = float(value)
    formats = {
        "ms": lambda: seconds(v),  # ms below a second, s above
        "s": lambda: f"{v:.3g} s",
        "pct": lambda: f"{v:.0%}",
        "x": lambda: f"{v:.2g}×" if v < 10 else f"{v:,.0f}×",
        "int": lambda: f"{v:,.0f}",
        "d1": lambda: f"{v:,.1f}",
        "d2": lambda: f"{v:,.2f}",
        "GB": lambda: f"{v / 1e9:.3g} GB",
        "GB2": lambda: f"{v / 1e9:,.2f} GB",
        "GiB": lambda: f"{v / 2**30:.3g} GiB",  # a memory's capacity as its maker names it
        "TB/s": lambda: f"{v / 1e12:.3g} TB/s",
        "TFLOPs": lambda: f"{v / 1e12:,.0f} TFLOP/s",
        "si": lambda: si(v),
        "bn": lambda: f"{v / 1e9:.3g} billion",
        "KiB": lambda: f"{v / 1024:,.0f} KiB",
        "usd": lambda: f"${v:,.2f}",
    }
    if fmt is None:
        return f"{v:,.3g}"
    if fmt not in formats:
        raise RidgelineError(f"unknown placeholder format '{fmt}': use one of {', '.join(formats)}")
    return formats[fmt]()


def fill(step: Step, text: str) -> str:
    def one(match: re.Match[str]) -> str:
        value = lookup(step, match["a"])
        if match["b"]:
            other = lookup(step, match["b"])
            value = value / other if match["op"] == "/" else value * other
        return html.escape(format_value(value, match["fmt"]))

    return PLACEHOLDER.sub(one, text)


def render_markdown(step: Step, text: str) -> str:
    return _markdown.render(fill(step, text))


def summary(step: Step) -> dict[str, Any]:
    return {
        "n": step.n,
        "slug": step.slug,
        "title": step.title,
        "section": step.section,
        "takeaway_html": _markdown.renderInline(fill(step, step.takeaway)),
        "wide": step.wide,
        "show": list(step.show),
        "drill": step.drill is not None,
    }


@lru_cache(maxsize=1)
def outline() -> dict[str, Any]:
    """The steps in order, and the sections they fall into (the seed's "What you will learn")."""
    steps = load_steps()
    sections: list[dict[str, Any]] = []
    for s in steps:
        if not sections or sections[-1]["title"] != s.section:
            sections.append({"title": s.section, "steps": []})
        sections[-1]["steps"].append(s.n)
    return {"steps": [summary(s) for s in steps], "sections": sections}


@lru_cache(maxsize=64)
def rendered(n: int) -> dict[str, Any]:
    """A step as the page shows it: its state, its prose with the core's numbers, its drill."""
    step = get_step(n)
    state = {key: getattr(step.state, key) for key in STATE_KEYS}
    drill = None
    if step.drill:
        question = _markdown.renderInline(fill(step, step.drill.question))
        drill = {"question_html": question, "unit": step.drill.unit}
    return {**summary(step), "state": state, "html": render_markdown(step, step.body), "drill": drill}


def check(n: int, answer: float) -> dict[str, Any]:
    """Mark a drill's answer against the core's value, within the step's tolerance."""
    step = get_step(n)
    if step.drill is None:
        raise RidgelineError(f"step {n} has no drill: drills are at steps {drill_steps()}")
    d = step.drill
    expected = float(lookup(step, d.answer)) * UNIT_SCALE[d.unit]
    correct = math.isfinite(answer) and abs(answer - expected) <= d.tolerance * abs(expected)
    return {
        "correct": correct,
        "expected": expected,
        "unit": d.unit,
        "tolerance": d.tolerance,
        "working_html": render_markdown(step, d.working),
    }


def drill_steps() -> str:
    return ", ".join(str(s.n) for s in load_steps() if s.drill)
