"""How fast the web lesson feels, measured in real headless Chromium against `ridgeline web`.

- page load: from navigation to the first view drawn (lesson step, chart, readouts), in a
  fresh browser context each time (nothing cached);
- redraw per slider move: in the page, from the slider's input event to the next paint
  after the new numbers are drawn (the page waits 30 ms for the slider to settle, and
  that wait is included); every move asks the server for a state it has not seen;
- the API alone: one /api/playground call from Python, for comparison;
- the static site (`ridgeline web --export DIR --pyodide PATH`, served by Python's static
  file server, no ridgeline server): the first load, from navigation to the first view drawn
  with Python started in the page (Pyodide: the interpreter, the standard library, the core),
  and the same redraws, answered by the core inside the page.

Run: python benchmarks/bench_web.py [--screenshot docs/roofline.png] [--pyodide PATH]
(figures go into the README by hand). Needs /usr/bin/chromium (Debian's `chromium`); the
static site needs a local Pyodide: PATH, or the copy scripts/test.sh keeps in .cache/.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from playwright.sync_api import Page, sync_playwright

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
# One slider move in the page: set the value, then time until the redraw is painted.
MOVE = """async ([id, index]) => {
  const range = document.getElementById(id);
  const before = Number(document.body.dataset.renders);
  const t0 = performance.now();
  range.value = String(index);
  range.dispatchEvent(new Event("input", { bubbles: true }));
  await new Promise((resolve) => {
    const seen = new MutationObserver(() => {
      if (Number(document.body.dataset.renders) > before) { seen.disconnect(); resolve(); }
    });
    seen.observe(document.body, { attributes: true, attributeFilter: ["data-renders"] });
  });
  await new Promise((resolve) => requestAnimationFrame(() => resolve()));
  return performance.now() - t0;
}"""


ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def static_site(pyodide: Path) -> Iterator[str]:
    """The lesson exported with this Pyodide, served by `python -m http.server`."""
    with tempfile.TemporaryDirectory() as tmp:
        site = Path(tmp) / "site"
        cmd = [sys.executable, "-m", "ridgeline", "web", "--export", str(site), "--pyodide", str(pyodide)]
        subprocess.run(cmd, check=True, capture_output=True)
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(site)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}/"
        try:
            for _ in range(300):
                try:
                    if httpx.get(url, timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.1)
            yield url
        finally:
            server.terminate()
            server.wait(timeout=10)


def default_pyodide() -> Path | None:
    from ridgeline.web.export import PYODIDE_VERSION

    path = ROOT / ".cache" / "pyodide" / PYODIDE_VERSION / "package"
    return path if (path / "pyodide.js").is_file() else None


def start_server() -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    cmd = [sys.executable, "-m", "ridgeline", "web", "--port", str(port)]
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    url = f"http://127.0.0.1:{port}/"
    for _ in range(300):
        try:
            if httpx.get(url + "api/lesson", timeout=2).status_code == 200:
                return server, url
        except httpx.TransportError:
            time.sleep(0.1)
    server.terminate()
    raise SystemExit("ridgeline web did not start")


def wait_ready(page: Page) -> None:
    page.wait_for_selector("body[data-renders]", state="attached", timeout=120_000)


def page_loads(browser, url: str, repeats: int = 10) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    for k in range(repeats):
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        t0 = time.perf_counter()
        page.goto(f"{url}#step-{1 + k % 18}")
        wait_ready(page)
        times.append(time.perf_counter() - t0)
        context.close()
    return times


def slider_moves(browser, url: str, slider: str, positions: range) -> list[float]:  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.goto(f"{url}#step-18")
    wait_ready(page)
    page.wait_for_timeout(300)
    times = [page.evaluate(MOVE, [slider, i]) / 1e3 for i in positions]
    context.close()
    return times


def api_calls(url: str, prompts: list[int]) -> list[float]:
    times = []
    with httpx.Client() as client:
        for prompt in prompts:
            t0 = time.perf_counter()
            client.get(url + "api/playground", params={"prompt": prompt, "output": 321}).raise_for_status()
            times.append(time.perf_counter() - t0)
    return times


def screenshot(browser, url: str, path: Path) -> None:  # type: ignore[no-untyped-def]
    """The roofline view at 1280x800, the stage at rest (reduced motion draws its last frame)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800}, reduced_motion="reduce")
    page = context.new_page()
    page.goto(f"{url}#step-1")
    wait_ready(page)
    page.wait_for_timeout(300)
    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path))
    context.close()


def summary(times_s: list[float]) -> dict[str, float]:
    ordered = sorted(times_s)
    return {
        "n": len(ordered),
        "median_ms": 1e3 * statistics.median(ordered),
        "p90_ms": 1e3 * ordered[int(0.9 * (len(ordered) - 1))],
        "max_ms": 1e3 * ordered[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screenshot", type=Path, help="also save the roofline view as a PNG here")
    parser.add_argument(
        "--pyodide", type=Path, help="a local Pyodide (the unpacked npm package) for the static site"
    )
    args = parser.parse_args()
    pyodide = args.pyodide or default_pyodide()
    server, url = start_server()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            result = {
                "page_load": summary(page_loads(browser, url)),
                "redraw_prompt_slider": summary(slider_moves(browser, url, "prompt-range", range(0, 50))),
                "redraw_batch_slider": summary(slider_moves(browser, url, "batch-range", range(1, 24))),
                "api_playground_alone": summary(api_calls(url, list(range(1001, 1031)))),
            }
            if args.screenshot:
                screenshot(browser, url, args.screenshot)
            if pyodide is not None:
                with static_site(pyodide) as site:
                    result["static_first_load"] = summary(page_loads(browser, site, repeats=5))
                    result["static_redraw_prompt_slider"] = summary(
                        slider_moves(browser, site, "prompt-range", range(0, 50))
                    )
                    result["static_redraw_batch_slider"] = summary(
                        slider_moves(browser, site, "batch-range", range(1, 24))
                    )
            else:
                result["static_first_load"] = "skipped: no local Pyodide (--pyodide PATH, or scripts/test.sh)"
            browser.close()
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
