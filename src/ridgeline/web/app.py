"""The web face: a FastAPI app serving the page, the lesson and a JSON API.

Every number comes from the core: `/api/estimate` is `ridgeline estimate --json`,
`/api/roofline` is `ridgeline roofline --json`, `/api/gpus` and `/api/models` are the
catalogues' `--json`, and `/api/playground` adds to an estimate the chart the page draws.
Inputs are validated and capped so that no request runs away; a user mistake is a 422
whose `detail` is one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles

from ridgeline.errors import RidgelineError
from ridgeline.web import lesson
from ridgeline.web.view import State, check_model, estimate_dict, playground

STATIC_DIR = Path(__file__).parent / "static"
MAX_TOKENS = 1_000_000  # prompt or output; the model's context caps them further
MAX_BATCH = 4096
MAX_TP = 64
NAME = r"^[A-Za-z0-9][A-Za-z0-9._\-]*$"  # catalogue names: no paths, no URLs
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def state_query(
    model: str = Query("llama-3.1-8b", max_length=64, pattern=NAME, description="Catalogue model name."),
    gpu: str = Query("h100-sxm", max_length=64, pattern=NAME, description="Accelerator name."),
    weights: str = Query("bf16", max_length=16, pattern=NAME, description="Weight dtype: bf16, fp8, int4..."),
    prompt: int = Query(2000, ge=1, le=MAX_TOKENS, description="Prompt tokens."),
    output: int = Query(500, ge=1, le=MAX_TOKENS, description="Output tokens (decode steps)."),
    batch: int = Query(1, ge=1, le=MAX_BATCH, description="Identical requests served together."),
    tp: int = Query(1, ge=1, le=MAX_TP, description="Tensor-parallel GPUs."),
    preset: str = Query("lesson", max_length=16, pattern=NAME, description="ideal or lesson."),
    maths: str = Query("bf16", max_length=16, pattern=NAME, description="Arithmetic dtype."),
) -> State:
    return State(model, gpu, weights, prompt, output, batch, tp, preset, maths)


def _one_line(exc: RequestValidationError) -> str:
    """FastAPI's list of errors as one line per bad value: name, problem, what was sent."""
    parts = []
    for err in exc.errors():
        name = ".".join(str(x) for x in err.get("loc", ())[1:]) or "request"
        got = f", got {err['input']!r}" if err.get("input") is not None else ""
        parts.append(f"{name}: {err.get('msg', 'invalid')}{got}")
    return "; ".join(parts)


def create_app() -> FastAPI:
    app = FastAPI(
        title="ridgeline",
        summary="The cost of an LLM token, from the roofline up: the lesson and its API.",
        docs_url="/api/docs",
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )

    @app.exception_handler(RidgelineError)
    async def user_mistake(request: Request, exc: RidgelineError) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def bad_input(request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": _one_line(exc)}, status_code=422)

    @app.middleware("http")
    async def security_headers(request: Request, call_next: Any) -> Response:
        response: Response = await call_next(request)
        response.headers.update(SECURITY_HEADERS)
        return response

    @app.get("/api/estimate")
    def api_estimate(s: State = Depends(state_query)) -> JSONResponse:
        """Exactly `ridgeline estimate --json` for these inputs."""
        return JSONResponse(estimate_dict(s))

    @app.get("/api/playground")
    def api_playground(s: State = Depends(state_query)) -> JSONResponse:
        """The estimate and the roofline chart the page draws for one state."""
        return JSONResponse(playground(s))

    @app.get("/api/roofline")
    def api_roofline(
        gpu: str = Query("h100-sxm", max_length=64, pattern=NAME),
        maths: str = Query("bf16", max_length=16, pattern=NAME),
        model: str = Query("llama-3.1-8b", max_length=64, pattern=NAME),
        prompt: int = Query(2000, ge=1, le=MAX_TOKENS),
        batch: int = Query(1, ge=1, le=MAX_BATCH),
        context: int = Query(0, ge=0, le=MAX_TOKENS),
        preset: str = Query("ideal", max_length=16, pattern=NAME),
    ) -> JSONResponse:
        """Exactly `ridgeline roofline --json`."""
        from ridgeline.points import roofline_points

        return JSONResponse(roofline_points(check_model(model), gpu, maths, prompt, batch, context, preset))

    @app.get("/api/gpus")
    def api_gpus() -> JSONResponse:
        """Exactly `ridgeline gpus --json`."""
        from ridgeline.describe import describe_gpus

        return JSONResponse(describe_gpus())

    @app.get("/api/models")
    def api_models() -> JSONResponse:
        """Exactly `ridgeline models --json`."""
        from ridgeline.describe import describe_all

        return JSONResponse(describe_all())

    @app.get("/api/lesson")
    def api_lesson() -> JSONResponse:
        """The steps in order: number, slug, title, whether it has a drill."""
        return JSONResponse({"steps": [lesson.summary(s) for s in lesson.load_steps()]})

    @app.get("/api/lesson/{n}")
    def api_step(n: int) -> JSONResponse:
        """One step: the state it sets, its prose with the core's numbers, its drill."""
        return JSONResponse(lesson.rendered(n))

    @app.get("/api/lesson/{n}/check")
    def api_check(n: int, answer: float = Query(..., allow_inf_nan=False)) -> JSONResponse:
        """Mark a drill's answer against the core's value."""
        return JSONResponse(lesson.check(n, answer))

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    return app


app = create_app()
