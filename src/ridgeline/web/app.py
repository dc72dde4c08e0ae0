"""The web face: a FastAPI app serving the page, the lesson and a JSON API.

Every number comes from the core: `/api/estimate` is `ridgeline estimate --json`,
`/api/roofline` is `ridgeline roofline --json`, `/api/gpus` and `/api/models` are the
catalogues' `--json`, and `/api/playground` adds to an estimate the chart the page draws.
Inputs are validated and capped so that no request runs away; a user mistake is a 422
whose `detail` is one line. Every JSON body is strict (no NaN, no Infinity). The server
answers only to the address it serves (`hosts.py`), and the page loads nothing from
elsewhere: no CDN, so no Swagger UI; the schema is at `/api/openapi.json`.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import BeforeValidator
from starlette.exceptions import HTTPException

from ridgeline._files import dumps
from ridgeline.checks import check_number, one_line
from ridgeline.errors import RidgelineError
from ridgeline.precision import AUTO_MATHS
from ridgeline.web import film, hosts, lesson
from ridgeline.web.view import (
    MAX_BATCH,
    MAX_TOKENS,
    MAX_TP,
    NAME,
    NO_ENGINE,
    State,
    check_model,
    estimate_dict,
    playground,
)

STATIC_DIR = Path(__file__).parent / "static"
MAX_DETAIL = 500  # characters in an error's one line
# numbers as a person types them: no spaces, control characters, underscores or hex
WHOLE = re.compile(r"-?[0-9]{1,15}")
DECIMAL = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?")
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def _digits(value: Any) -> Any:
    """Pydantic would read `' 8\\n'` as 8; a query's whole number is digits and nothing else."""
    if isinstance(value, str) and not WHOLE.fullmatch(value):
        raise ValueError("write a whole number in digits")
    return value


Whole = Annotated[int, BeforeValidator(_digits)]  # with Query(...) inside Annotated[], not as a default


def state_query(
    model: str = Query("llama-3.1-8b", max_length=64, pattern=NAME, description="Catalogue model name."),
    gpu: str = Query("h100-sxm", max_length=64, pattern=NAME, description="Accelerator name."),
    weights: str = Query("bf16", max_length=16, pattern=NAME, description="Weight dtype: bf16, fp8, int4..."),
    prompt: Annotated[Whole, Query(ge=1, le=MAX_TOKENS, description="Prompt tokens.")] = 2000,
    output: Annotated[Whole, Query(ge=1, le=MAX_TOKENS, description="Output tokens (decode steps).")] = 500,
    batch: Annotated[Whole, Query(ge=1, le=MAX_BATCH, description="Identical requests served together.")] = 1,
    tp: Annotated[Whole, Query(ge=1, le=MAX_TP, description="Tensor-parallel GPUs.")] = 1,
    preset: str = Query("lesson", max_length=16, pattern=NAME, description="ideal or lesson."),
    maths: str = Query(
        AUTO_MATHS,
        max_length=16,
        pattern=NAME,
        description="Arithmetic dtype, or auto: the engine's for the weights (`estimate` without --maths).",
    ),
    engine: str = Query(
        NO_ENGINE,
        max_length=64,
        pattern=NAME,
        description="Engine profile (`ridgeline engines`), or none: the lesson's roofline.",
    ),
    in_process: bool = Query(
        False, description="With an engine: run in its process, no server before the first token."
    ),
) -> State:
    return State(model, gpu, weights, prompt, output, batch, tp, preset, maths, engine, in_process)


class StrictJSONResponse(JSONResponse):
    """JSON as ridgeline writes it: a NaN or an infinity is a bug that fails here, never
    a body that a browser's JSON.parse refuses."""

    def render(self, content: Any) -> bytes:
        return dumps(content, indent=None).encode("utf-8")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def _one_line(exc: RequestValidationError) -> str:
    """FastAPI's list of errors as one line per bad value: name, problem, what was sent."""
    parts = []
    for err in exc.errors():
        name = ".".join(str(x) for x in err.get("loc", ())[1:]) or "request"
        got = f", got {_shown(err['input'])}" if err.get("input") is not None else ""
        parts.append(f"{name}: {err.get('msg', 'invalid')}{got}")
    return one_line("; ".join(parts), MAX_DETAIL)


def finite_number(name: str, text: str) -> float:
    """A number from a query string, written as a decimal and finite (`nan`, `inf` and
    `1e400` are not), refused in one line that quotes what was sent."""
    try:
        if not DECIMAL.fullmatch(text):
            raise ValueError(text)
        return check_number(name, float(text))
    except ValueError:  # not a decimal, or (RidgelineError) not a finite one
        raise RidgelineError(f"{name} must be a finite number, got {_shown(text)}") from None


def create_app(allowed_hosts: Collection[str] | None = None) -> FastAPI:
    """The app, answering only to `allowed_hosts`: `name:port` values as a browser sends
    them in the Host header (`hosts.allowed_hosts(host, port)`; the default is what
    `ridgeline web` serves, 127.0.0.1:8000). Tests pass `{"testserver"}`."""
    lesson.check_placeholders()  # a broken placeholder stops the server here, not in a learner's page
    app = FastAPI(
        title="ridgeline",
        summary="The cost of an LLM token, from the roofline up: the lesson and its API.",
        docs_url=None,  # Swagger UI and ReDoc load from a CDN, which the policy refuses
        redoc_url=None,
        openapi_url="/api/openapi.json",
        default_response_class=StrictJSONResponse,
    )

    @app.exception_handler(RidgelineError)
    async def user_mistake(request: Request, exc: RidgelineError) -> JSONResponse:
        return StrictJSONResponse({"detail": one_line(str(exc), MAX_DETAIL)}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def bad_input(request: Request, exc: RequestValidationError) -> JSONResponse:
        return StrictJSONResponse({"detail": _one_line(exc)}, status_code=422)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        detail = one_line(str(exc.detail), MAX_DETAIL)
        return StrictJSONResponse({"detail": detail}, status_code=exc.status_code, headers=exc.headers)

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response

    @app.get("/api/estimate")
    def api_estimate(s: State = Depends(state_query)) -> JSONResponse:
        """Exactly `ridgeline estimate --json` for these inputs."""
        return StrictJSONResponse(estimate_dict(s))

    @app.get("/api/playground")
    def api_playground(s: State = Depends(state_query)) -> JSONResponse:
        """The estimate and the roofline chart the page draws for one state."""
        return StrictJSONResponse(playground(s))

    @app.get("/api/slo")
    def api_slo(s: State = Depends(state_query)) -> JSONResponse:
        """Step 15's table: the simulator's p50 and p99 TTFT and TPOT for this deployment
        under a small chat workload at a few arrival rates, against a chat SLO."""
        from ridgeline.web.slo import slo_table

        return StrictJSONResponse(slo_table(s))

    @app.get("/api/roofline")
    def api_roofline(
        gpu: str = Query("h100-sxm", max_length=64, pattern=NAME),
        maths: str = Query("bf16", max_length=16, pattern=NAME),
        model: str = Query("llama-3.1-8b", max_length=64, pattern=NAME),
        prompt: Annotated[Whole, Query(ge=1, le=MAX_TOKENS)] = 2000,
        batch: Annotated[Whole, Query(ge=1, le=MAX_BATCH)] = 1,
        context: Annotated[Whole, Query(ge=0, le=MAX_TOKENS)] = 0,
        preset: str = Query("ideal", max_length=16, pattern=NAME),
    ) -> JSONResponse:
        """Exactly `ridgeline roofline --json`."""
        from ridgeline.points import roofline_points

        points = roofline_points(check_model(model), gpu, maths, prompt, batch, context, preset)
        return StrictJSONResponse(points.to_dict())

    @app.get("/api/gpus")
    def api_gpus() -> JSONResponse:
        """Exactly `ridgeline gpus --json`."""
        from ridgeline.describe import describe_gpus

        return StrictJSONResponse(describe_gpus())

    @app.get("/api/engines")
    def api_engines() -> JSONResponse:
        """Exactly `ridgeline engines --json`."""
        from ridgeline.describe import describe_engines

        return StrictJSONResponse(describe_engines())

    @app.get("/api/models")
    def api_models() -> JSONResponse:
        """Exactly `ridgeline models --json`."""
        from ridgeline.describe import describe_all

        return StrictJSONResponse(describe_all())

    @app.get("/api/lesson")
    def api_lesson() -> JSONResponse:
        """The steps in order: number, slug, title, section, takeaway, whether it has a drill."""
        return StrictJSONResponse(lesson.outline())

    @app.get("/api/lesson/{n}")
    def api_step(n: Whole) -> JSONResponse:
        """One step: the state it sets, its prose with the core's numbers, its drill."""
        return StrictJSONResponse(lesson.rendered(n))

    @app.get("/api/lesson/{n}/check")
    def api_check(
        n: Whole, answer: str = Query(..., max_length=64, description="A number, in the drill's unit.")
    ) -> JSONResponse:
        """Mark a drill's answer against the core's value."""
        return StrictJSONResponse(lesson.check(n, finite_number("answer", answer)))

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    film.register(app, state_query)
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    # outermost, so a request for another host reaches nothing else
    if allowed_hosts is None:
        allowed_hosts = hosts.allowed_hosts("127.0.0.1", 8000)
    app.add_middleware(hosts.HostCheck, allowed=allowed_hosts, headers=SECURITY_HEADERS)
    return app


app = create_app()
