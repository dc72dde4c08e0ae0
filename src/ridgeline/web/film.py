"""The film in the lesson: `/film` for the playground's state.

The transcript and the captions are made on request from the core (cue times at the seed's
reading pace). When `ridgeline film` has rendered this deployment into the films folder
($RIDGELINE_FILMS, else ./films where `ridgeline web` runs), the page plays its film.mp4
and serves that film's own captions and transcript, timed by its narration.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import Depends, FastAPI
from fastapi.responses import FileResponse, HTMLResponse, Response
from starlette.exceptions import HTTPException

from ridgeline.web.view import State, check_model


@lru_cache(maxsize=64)
def _made(model: str, gpu: str, weights: str, tp: int) -> tuple[str, str, str, str]:
    """(folder name, deployment in words, captions, transcript) for a state, at reading pace."""
    from ridgeline.film import page
    from ridgeline.film.figures import gather
    from ridgeline.film.make import slug
    from ridgeline.film.script import beats
    from ridgeline.film.voice import paced

    f = gather(check_model(model), gpu, weights, None if tp == 1 else tp)
    script = beats(f)
    timing = paced([b.text for b in script])
    e = f.prefill
    name = slug(e.model.name, e.gpu.name, f.weights, f.tp)
    return name, page.deployment(f), page.captions(script, timing, f), page.transcript(script, timing, f)


def _film(s: State) -> tuple[str, str, str, str, Path | None]:
    """The state's film: its words, and the rendered folder when there is one."""
    from ridgeline.film.make import films_root

    name, who, vtt, md = _made(s.model, s.gpu, s.weights, s.tp)
    folder = films_root() / name
    rendered = folder if (folder / "film.mp4").is_file() and (folder / "captions.vtt").is_file() else None
    if rendered is not None:
        vtt = (rendered / "captions.vtt").read_text(encoding="utf-8")
        transcript = rendered / "transcript.md"
        md = transcript.read_text(encoding="utf-8") if transcript.is_file() else md
    return name, who, vtt, md, rendered


def _query(s: State) -> str:
    return html.escape(urlencode({"model": s.model, "gpu": s.gpu, "weights": s.weights, "tp": s.tp}))


def _page(s: State) -> str:
    from markdown_it import MarkdownIt

    from ridgeline.film.make import films_root

    name, who, _, md, rendered = _film(s)
    q = _query(s)
    if rendered is not None:
        player = (
            f'<video class="film" controls preload="metadata" src="/film/film.mp4?{q}">'
            f'<track kind="captions" srclang="en" label="English" src="/film/captions.vtt?{q}" default>'
            "</video>"
        )
    else:
        tp = "" if s.tp == 1 else f" --tp {s.tp}"
        command = f"ridgeline film --model {s.model} --gpu {s.gpu} --weights {s.weights}{tp}"
        player = (
            '<p class="notice">No film has been rendered for this deployment yet. Run '
            f"<code>{html.escape(command)}</code> where <code>ridgeline web</code> runs (it writes "
            f"<code>{html.escape(str(films_root() / name))}</code>), then reload. Until then, here are "
            "its transcript and captions.</p>"
        )
    body = MarkdownIt("commonmark", {"html": False}).render(md)
    return (
        '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>The film: {html.escape(who)} · ridgeline</title>\n"
        '<link rel="icon" href="data:,">\n<link rel="stylesheet" href="/static/style.css">\n'
        '<link rel="stylesheet" href="/static/film.css">\n</head>\n<body>\n'
        '<header class="top"><h1><span class="brand">ridgeline</span> The film</h1>'
        f'<p class="tagline">{html.escape(who)}, the ideal preset · <a href="/">back to the lesson</a></p>'
        "</header>\n"
        f'<main class="film-page">\n{player}\n'
        f'<p class="downloads"><a href="/film/transcript.md?{q}">transcript.md</a> · '
        f'<a href="/film/captions.vtt?{q}">captions.vtt</a></p>\n'
        f'<article class="prose">{body}</article>\n</main>\n</body>\n</html>\n'
    )


def register(app: FastAPI, state_query: Callable[..., Any]) -> None:
    """Add the film's routes to the lesson's app."""

    @app.get("/film", response_class=HTMLResponse, include_in_schema=False)
    def film_page(s: State = Depends(state_query)) -> HTMLResponse:
        return HTMLResponse(_page(s), headers={"Cache-Control": "no-cache"})

    @app.get("/film/captions.vtt")
    def film_captions(s: State = Depends(state_query)) -> Response:
        """The film's captions (WebVTT) for this state: one cue per beat."""
        return Response(_film(s)[2], media_type="text/vtt; charset=utf-8")

    @app.get("/film/transcript.md")
    def film_transcript(s: State = Depends(state_query)) -> Response:
        """The film's page (Markdown): transcript with time stamps, the maths, the caveats."""
        return Response(_film(s)[3], media_type="text/markdown; charset=utf-8")

    @app.get("/film/film.mp4")
    def film_video(s: State = Depends(state_query)) -> FileResponse:
        """The rendered film, when `ridgeline film` has made one for this state."""
        rendered = _film(s)[4]
        if rendered is None:
            raise HTTPException(404, "no film rendered for this deployment: run `ridgeline film` first")
        return FileResponse(rendered / "film.mp4", media_type="video/mp4")
