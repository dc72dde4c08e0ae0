"""The lesson in a real browser: Debian's Chromium, headless, driven by Playwright.

The server is `ridgeline web` itself, started once for the module on a free loopback
port; each test gets a fresh browser context (empty localStorage) and saves a screenshot
under test-artifacts/.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect

import ridgeline
from conftest import wait_for_http
from test_web_api import LESSON_TITLES

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "ridgeline", "web", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        assert server.stdout is not None
        assert url in server.stdout.readline()  # it prints the URL
        wait_for_http(url + "api/lesson", "ridgeline web")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


@pytest.fixture
def errors() -> list[str]:
    return []


@pytest.fixture
def page(
    browser: Browser, base_url: str, errors: list[str], request: pytest.FixtureRequest
) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800}, base_url=base_url)
    pg = context.new_page()

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type == "error":
            errors.append(msg.text)

    pg.on("console", on_console)
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    ARTIFACTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"))
    context.close()


def open_lesson(page: Page, fragment: str = "") -> None:
    page.goto(f"/{fragment}")
    expect(page.locator("body")).to_have_attribute("data-ready", "true")
    expect(page.locator("body[data-renders]")).to_be_attached()  # the first view is drawn


def ms(seconds: float) -> str:
    """The page's format: three significant figures."""
    return f"{seconds * 1e3:.3g} ms"


def test_page_loads_with_the_lesson_stage(page: Page, errors: list[str]) -> None:
    open_lesson(page)
    expect(page.locator("#step-title")).to_have_text(LESSON_TITLES[0])
    expect(page.locator("#ttft")).to_have_text("55.9 ms")
    expect(page.locator("#tpot")).to_have_text("6.1 ms")
    expect(page.locator("#ridge")).to_have_text("295")
    expect(page.locator("#ridge-label")).to_have_text("ridge 295 FLOPs/byte")
    expect(page.locator("#prefill-bound")).to_have_text("compute")
    expect(page.locator("#decode-bound")).to_have_text("memory")
    assert errors == []


def test_prompt_slider_moves_ttft_to_the_cores_value(page: Page, errors: list[str]) -> None:
    open_lesson(page)
    slider = page.locator("#prompt-range")
    slider.focus()
    for _ in range(3):
        page.keyboard.press("ArrowRight")
    prompt = int(page.locator("#prompt").input_value())
    assert prompt > 2000
    expected = ridgeline.estimate(prompt=prompt).ttft_s
    expect(page.locator("#ttft")).to_have_text(ms(expected))
    assert float(page.locator("#ttft").get_attribute("data-value") or "nan") == pytest.approx(
        expected, rel=1e-12
    )
    expect(page.locator("#step-title")).to_have_text(LESSON_TITLES[0])  # arrows on a slider move the slider
    assert errors == []


def test_gpu_pill_swaps_the_ridge_from_295_to_153(page: Page, errors: list[str]) -> None:
    open_lesson(page)
    expect(page.locator("#ridge")).to_have_text("295")
    page.locator("#gpu-pills label", has_text="A100").click()
    expect(page.locator("#ridge")).to_have_text("153")
    expect(page.locator("#ridge-label")).to_have_text("ridge 153 FLOPs/byte")
    expect(page.locator("#chart-caption")).to_contain_text("A100")
    assert errors == []


def test_decode_speed_limit_drill(page: Page, errors: list[str]) -> None:
    open_lesson(page, "#step-3")
    expect(page.locator("#step-title")).to_have_text("Drill: the decode speed limit")
    answer = page.locator("#drill-answer")
    verdict = page.locator("#drill-verdict")

    answer.fill("6")
    page.get_by_role("button", name="Check").click()
    expect(verdict).to_contain_text("Right")

    answer.fill("4.8")
    page.get_by_role("button", name="Check").click()
    expect(verdict).to_contain_text("Not quite")
    expect(page.locator("#drill-working")).to_contain_text("5.99 ms")

    # what the user types is text, never markup
    answer.fill('<img src=x id="injected">')
    page.get_by_role("button", name="Check").click()
    expect(verdict).to_have_text("Type a number, for example 6.1.")
    assert page.locator("#injected").count() == 0
    expect(page.locator("#step-list a[href='#step-3']")).to_have_class(re.compile(r"\bsolved\b"))
    assert errors == []


def test_walk_all_eighteen_steps_with_the_keyboard(page: Page, errors: list[str]) -> None:
    open_lesson(page)
    title = page.locator("#step-title")
    expect(title).to_have_text(LESSON_TITLES[0])
    for n, name in enumerate(LESSON_TITLES[1:], start=2):
        page.keyboard.press("n" if n % 2 else "ArrowRight")
        expect(title).to_have_text(name)
        expect(page.locator("body")).to_have_attribute("data-step", str(n))
        assert page.url.endswith(f"#step-{n}")
    page.keyboard.press("ArrowLeft")
    expect(title).to_have_text(LESSON_TITLES[16])
    visited = page.evaluate("() => JSON.parse(localStorage.getItem('ridgeline.lesson.v1')).visited.length")
    assert visited == 18
    assert errors == []


def test_step_by_url_sets_the_playground(page: Page, errors: list[str]) -> None:
    open_lesson(page, "#step-7")
    expect(page.locator("#step-title")).to_have_text("Break it: batch the long requests")
    expect(page.locator("#batch")).to_have_value("64")
    expect(page.locator("#prompt")).to_have_value("8000")
    expect(page.locator("#memory-verdict")).to_have_text("does not fit")
    assert errors == []


def test_phone_width_has_no_sideways_scroll(browser: Browser, base_url: str) -> None:
    context = browser.new_context(viewport={"width": 375, "height": 812}, base_url=base_url)
    pg = context.new_page()
    open_lesson(pg, "#step-10")
    expect(pg.locator("#memory-verdict")).to_have_text("does not fit")
    assert pg.evaluate("() => document.documentElement.scrollWidth") <= 375
    ARTIFACTS.mkdir(exist_ok=True)
    pg.screenshot(path=str(ARTIFACTS / "test_phone_width.png"), full_page=True)
    context.close()
