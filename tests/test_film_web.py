"""The film in the lesson: the page links to the film of its state; /film serves the
transcript and captions, and plays the video once `ridgeline film` has rendered one."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from ridgeline.film.make import slug
from ridgeline.web.app import create_app


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TestClient:
    monkeypatch.setenv("RIDGELINE_FILMS", str(tmp_path / "films"))
    return TestClient(create_app({"testserver"}))


def test_the_lesson_links_to_the_film_of_its_state(client: TestClient) -> None:
    assert 'id="film-link"' in client.get("/").text
    script = client.get("/static/js/film.js")
    assert script.status_code == 200 and "/film?" in script.text
    assert "linkFilm(getState())" in client.get("/static/js/main.js").text


def test_the_film_page_serves_transcript_and_captions_before_any_render(client: TestClient) -> None:
    page = client.get("/film", params={"model": "qwen2.5-7b", "gpu": "h200"})
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "Content-Security-Policy" in page.headers
    assert "No film has been rendered" in page.text and "<video" not in page.text
    assert "ridgeline film --model qwen2.5-7b --gpu h200 --weights bf16" in page.text
    assert "Qwen2.5 7B on one H200 in BF16" in page.text and "0:00 Two waits" in page.text
    vtt = client.get("/film/captions.vtt", params={"model": "qwen2.5-7b", "gpu": "h200"})
    assert vtt.headers["content-type"].startswith("text/vtt") and vtt.text.count(" --> ") == 9
    md = client.get("/film/transcript.md", params={"model": "qwen2.5-7b", "gpu": "h200"})
    assert md.headers["content-type"].startswith("text/markdown") and "## The maths" in md.text
    assert client.get("/film/film.mp4").status_code == 404


def test_a_rendered_film_is_played_with_its_own_captions(client: TestClient, tmp_path: Path) -> None:
    folder = tmp_path / "films" / slug("llama-3.1-70b", "h100-sxm", "bf16", 2)
    folder.mkdir(parents=True)
    (folder / "film.mp4").write_bytes(b"\x00\x00\x00\x18ftypisom" + b"\x00" * 64)
    (folder / "captions.vtt").write_text("WEBVTT\n\n1\n00:00:00.000 --> 00:00:01.000\nrendered\n")
    (folder / "transcript.md").write_text("# Rendered transcript\n")
    state = {"model": "llama-3.1-70b", "gpu": "h100-sxm"}  # tp 1 does not fit: the film chose 2
    page = client.get("/film", params=state)
    assert "<video" in page.text and "/film/film.mp4?" in page.text and "<track" in page.text
    assert "Rendered transcript" in page.text
    video = client.get("/film/film.mp4", params=state)
    assert video.status_code == 200 and video.headers["content-type"] == "video/mp4"
    assert video.content.startswith(b"\x00\x00\x00\x18ftyp")
    assert "rendered" in client.get("/film/captions.vtt", params=state).text


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"gpu": "h900"}, "unknown GPU 'h900'"),
        ({"model": "../etc/passwd"}, "model"),
        ({"tp": "0"}, "tp"),
    ],
)
def test_bad_state_is_a_422_in_one_line(client: TestClient, params: dict[str, str], says: str) -> None:
    r = client.get("/film/captions.vtt", params=params)
    assert r.status_code == 422 and says in r.json()["detail"]
