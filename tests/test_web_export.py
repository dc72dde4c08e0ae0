"""`ridgeline web --export DIR`: the lesson as a static site, the same page, its numbers from
the same Python core running in the browser through Pyodide, with no ridgeline server.

The browser test serves the export with Python's own static file server on 127.0.0.1 and
drives Debian's Chromium through Playwright. Pyodide is the npm package that
`scripts/test.sh` fetches once with `npm pack` into .cache/ (git-ignored); nothing downloads
here, and the tests that need it are skipped, saying why, when it is missing.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

import ridgeline
from conftest import ROOT, run_cli, wait_for_http
from ridgeline.deployment import Deployment
from ridgeline.describe import describe_engines
from ridgeline.predict import estimate_on
from ridgeline.web import lesson
from ridgeline.web.export import MARKER, PYODIDE_JS_SRI, PYODIDE_URL, PYODIDE_VERSION, sri
from ridgeline.web.slo import RATES_PER_S, key_of
from ridgeline.web.view import State, playground

PYODIDE = ROOT / ".cache" / "pyodide" / PYODIDE_VERSION / "package"
needs_pyodide = pytest.mark.skipif(
    not (PYODIDE / "pyodide.js").is_file(),
    reason=f"no local Pyodide: scripts/test.sh fetches it (npm pack pyodide@{PYODIDE_VERSION} into .cache/)",
)
ARTIFACTS = ROOT / "test-artifacts"
LOAD_TIMEOUT_MS = 120_000  # Pyodide starts in seconds; a slow shared machine gets room
# The libraries the page's Python must do without: numpy, and the web face's server side.
NOT_IN_THE_PAGE = ("numpy", "fastapi", "starlette", "pydantic", "uvicorn", "typer", "rich", "httpx", "gguf")


def as_json(data: object) -> object:
    return json.loads(json.dumps(data))


def export(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("web", "--export", str(out), *extra)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An export that loads Pyodide from its pinned URL (the default)."""
    out = tmp_path_factory.mktemp("site") / "site"
    proc = export(out)
    assert proc.returncode == 0, proc.stderr
    assert "python -m http.server -d" in proc.stdout
    return out


def test_the_export_is_the_same_page_told_to_run_python_in_it(site: Path) -> None:
    page = (site / "index.html").read_text(encoding="utf-8")
    served = (ROOT / "src/ridgeline/web/static/index.html").read_text(encoding="utf-8")
    assert '<meta name="ridgeline-backend" content="pyodide">' in page
    assert f'content="{PYODIDE_URL}" data-integrity="{PYODIDE_JS_SRI}"' in page
    assert f"pyodide@{PYODIDE_VERSION}/" in PYODIDE_URL
    assert "Content-Security-Policy" in page and "'wasm-unsafe-eval'" in page
    # one page: the export adds its <meta> lines and nothing else
    assert page.count('id="') == served.count('id="')
    for js in (ROOT / "src/ridgeline/web/static/js").glob("*.js"):
        assert (site / "static" / "js" / js.name).read_bytes() == js.read_bytes()
    assert (site / MARKER).is_file()


def test_the_export_ships_the_core_and_the_lesson_as_python_source_and_no_face(site: Path) -> None:
    names = set(zipfile.ZipFile(site / "py" / "ridgeline.zip").namelist())
    for needed in (
        "ridgeline/__init__.py",
        "ridgeline/predict.py",
        "ridgeline/step.py",
        "ridgeline/data/gpus.toml",
        "ridgeline/data/models/llama-3.1-70b.json",
        "ridgeline/web/view.py",
        "ridgeline/web/lesson.py",
        "ridgeline/web/browser.py",
        "ridgeline/web/lesson/03-drill-decode-speed-limit.md",
        "markdown_it/__init__.py",
        "mdurl/__init__.py",
        "licenses/markdown-it-py/LICENSE",
    ):
        assert needed in names, needed
    for face in (
        "ridgeline/cli.py",
        "ridgeline/options.py",
        "ridgeline/web/app.py",
        "ridgeline/web/export.py",
    ):
        assert face not in names, face
    for folder in ("simulate/", "measure/", "film/", "web/static/"):
        assert not any(n.startswith(f"ridgeline/{folder}") for n in names), folder
    assert not any(n.endswith((".pyc", ".so")) for n in names)


def test_step_fifteens_simulation_is_worked_out_at_export_time(site: Path) -> None:
    with zipfile.ZipFile(site / "py" / "ridgeline.zip") as z:
        tables = json.loads(z.read("ridgeline/web/simulated.json"))
    step = lesson.get_step(15)
    assert list(tables) == [key_of(step.state)]
    table = tables[key_of(step.state)]
    assert table["precomputed"] is True and len(table["rows"]) >= 4


SHIPPED = textwrap.dedent(
    """
    import json, sys, zipfile
    site, unpacked = sys.argv[1], sys.argv[2]
    zipfile.ZipFile(site + "/py/ridgeline.zip").extractall(unpacked)
    BLOCKED = set(sys.argv[3].split(","))

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is not in the page")
            return None

    sys.meta_path.insert(0, Refuse())
    sys.path = [unpacked] + [p for p in sys.path if "site-packages" not in p and "/src" not in p]
    from ridgeline.web import browser

    out = {
        "playground": json.loads(browser.call("playground", json.dumps({"gpu": "a100-80gb-sxm",
                                                                        "batch": 8}))),
        "lesson": json.loads(browser.call("lesson")),
        "steps": [json.loads(browser.call("step", n)) for n in range(1, 19)],
        "right": json.loads(browser.call("check", 3, "6")),
        "wrong": json.loads(browser.call("check", 13, "35.3")),
        "models": json.loads(browser.call("models")),
        "engines": json.loads(browser.call("engines")),
        "vllm": json.loads(browser.call("playground", json.dumps({"engine": "vllm", "batch": 8}))),
        "in_process": json.loads(
            browser.call("playground", json.dumps({"engine": "vllm", "in_process": True}))
        ),
        "not_a_switch": json.loads(browser.call("playground", json.dumps({"in_process": "maybe"}))),
        "no_engine": json.loads(browser.call("playground", json.dumps({"engine": "vllmm"}))),
        "slo": json.loads(browser.call("slo", json.dumps(json.loads(sys.argv[4])))),
        "slo_elsewhere": json.loads(browser.call("slo", json.dumps({"gpu": "b200"}))),
        "bad": json.loads(browser.call("playground", json.dumps({"batch": 5000}))),
        "unknown": json.loads(browser.call("playground", json.dumps({"gpu": "h999"}))),
        "not_json": json.loads(browser.call("playground", "{")),
        "files": sorted({(m.__file__ or "").startswith(unpacked) for name, m in list(sys.modules.items())
                         if name.startswith("ridgeline")}),
        "loaded": sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED),
    }
    print(json.dumps(out))
    """
)


def test_the_shipped_python_answers_as_the_server_without_numpy_or_the_servers_libraries(
    site: Path, tmp_path: Path
) -> None:
    """The core runs there without numpy and without the web face's dependencies."""
    step15 = {
        k: getattr(lesson.get_step(15).state, k) for k in ("model", "gpu", "weights", "prompt", "output")
    }
    proc = subprocess.run(
        [sys.executable, "-c", SHIPPED, str(site), str(tmp_path / "py"), ",".join(NOT_IN_THE_PAGE),
         json.dumps({**step15, "batch": 32})],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["loaded"] == []
    assert out["files"] == [True]  # every ridgeline module came from the export, none from src/
    assert out["playground"]["ok"] == as_json(playground(State(gpu="a100-80gb-sxm", batch=8)))
    assert out["playground"]["ok"]["roofline"]["ridge"] == pytest.approx(153, abs=0.5)
    assert out["lesson"]["ok"] == as_json(lesson.outline())
    assert [s["ok"] for s in out["steps"]] == [as_json(lesson.rendered(n)) for n in range(1, 19)]
    assert out["right"]["ok"]["correct"] is True and out["wrong"]["ok"]["correct"] is False
    assert {m["name"] for m in out["models"]["ok"]} >= {"llama-3.1-8b", "llama-3.1-70b"}
    assert out["engines"]["ok"] == as_json(describe_engines())
    assert out["vllm"]["ok"] == as_json(playground(State(engine="vllm", batch=8)))
    assert out["vllm"]["ok"]["roofline"]["engine"]["label"] == "vLLM"
    assert out["in_process"]["ok"] == as_json(playground(State(engine="vllm", in_process=True)))
    assert out["in_process"]["ok"]["estimate"]["inputs"]["in_process"] is True
    assert out["not_a_switch"] == {"error": "in_process: write true or false, got 'maybe'"}
    assert out["no_engine"]["error"].startswith("unknown engine 'vllmm'")
    assert out["slo"]["ok"]["precomputed"] is True
    assert "ridgeline web" in out["slo_elsewhere"]["error"]  # the live server simulates others
    assert out["bad"] == {"error": "batch must lie in 1..4,096, got 5,000"}
    assert "unknown GPU 'h999'" in out["unknown"]["error"]
    assert "not JSON" in out["not_json"]["error"]


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--pyodide", "x"], "--pyodide goes with --export DIR"),
        (["--export", "{tmp}/new", "--port", "8123"], "serves nothing"),
        (["--export", "{tmp}/new", "--open"], "serves nothing"),
        (["--export", "{tmp}/new", "--pyodide", "{tmp}"], "holds no pyodide.js"),
        (["--export", "{tmp}/full"], "not empty and was not written by"),
        (["--export", "{tmp}/full/a-file"], "is a file"),
        (["--export", ""], "needs a folder"),
    ],
)
def test_export_mistakes_are_one_line(tmp_path: Path, args: list[str], fragment: str) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "a-file").write_text("someone's work\n")
    proc = run_cli("web", *(a.format(tmp=tmp_path) for a in args))
    assert proc.returncode == 2, proc.stderr
    assert fragment in proc.stderr and proc.stderr.count("\n") == 1
    assert (tmp_path / "full" / "a-file").read_text() == "someone's work\n"
    assert not (tmp_path / "new").exists()


def test_an_export_can_be_written_again_over_itself(site: Path, tmp_path: Path) -> None:
    out = tmp_path / "again"
    assert export(out).returncode == 0
    (out / "static" / "stale.js").write_text("// from an older export\n")
    assert export(out).returncode == 0
    assert not (out / "static" / "stale.js").exists()


@needs_pyodide
def test_the_pinned_integrity_hash_is_the_npm_packages() -> None:
    """The CDN URL serves the npm package's files: its pyodide.js must hash to the pin."""
    assert json.loads((PYODIDE / "package.json").read_text())["version"] == PYODIDE_VERSION
    assert sri((PYODIDE / "pyodide.js").read_bytes()) == PYODIDE_JS_SRI
    lock = json.loads((PYODIDE / "pyodide-lock.json").read_text())
    assert tuple(int(x) for x in lock["info"]["python"].split(".")[:2]) >= (3, 10)  # the core's floor


# --- the static site in Chromium, with no ridgeline server --------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def offline_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("offline") / "site"
    proc = export(out, "--pyodide", str(PYODIDE))
    assert proc.returncode == 0, proc.stderr
    assert "works offline" in proc.stdout
    return out


@pytest.fixture(scope="module")
def static_url(offline_site: Path) -> Iterator[str]:
    """Python's static file server, nothing else: no ridgeline server runs."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
         "--directory", str(offline_site)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_for_http(url, "the static file server")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


@needs_pyodide
def test_the_static_site_teaches_with_no_server(browser: Browser, static_url: str) -> None:
    """The stage shows 55.9 ms and 6.1 ms, the A100 pill moves the ridge to 153, and a
    drill is marked right: every number from the core, in the page."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, reduced_motion="reduce")
    page: Page = context.new_page()
    errors: list[str] = []
    asked: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("request", lambda request: asked.append(request.url))

    page.goto(static_url + "#step-1")
    expect(page.locator("body[data-renders]")).to_be_attached(timeout=LOAD_TIMEOUT_MS)
    expect(page.locator("body")).to_have_attribute("data-backend", "pyodide")
    expect(page.locator("#ttft")).to_have_text("55.9 ms")
    expect(page.locator("#tpot")).to_have_text("6.1 ms")
    expect(page.locator("#ridge")).to_have_text("295")
    expect(page.locator("#film-link")).to_be_hidden()  # the film needs `ridgeline web`

    page.locator("#gpu-pills label", has_text="A100").click()
    expect(page.locator("#ridge")).to_have_text("153")
    expect(page.locator("#ridge-label")).to_have_text("ridge 153 FLOPs/byte")

    page.goto(static_url + "#step-3")
    expect(page.locator("#step-title")).to_have_text("Drill: the decode speed limit")
    page.locator("#drill-answer").fill("6")
    page.get_by_role("button", name="Check").click()
    expect(page.locator("#drill-verdict")).to_contain_text("Right")

    page.goto(static_url + "#step-8")
    page.locator("#maths-pills label", has_text="fp8").click()
    w8a8 = ridgeline.estimate(weights="fp8", maths="fp8").ttft_s
    expect(page.locator("#ttft")).to_have_text(f"{w8a8 * 1e3:.3g} ms")

    page.goto(static_url + "#step-15")
    expect(page.locator("#slo")).to_have_attribute("data-state", "precomputed")
    expect(page.locator("#slo-rows tr")).to_have_count(len(RATES_PER_S))
    expect(page.locator("#slo-note")).to_contain_text("exported")

    page.goto(static_url + "#step-18")
    expect(page.locator("#step-title")).to_have_text("Playground")
    page.locator("#engine").select_option("vllm")  # an engine profile, in the page's Python too
    vllm = estimate_on(Deployment.build(engine="vllm"), prompt=2000, output=500, batch=1)
    expect(page.locator("#tpot")).to_have_text(f"{vllm.tpot_s * 1e3:.3g} ms")
    page.locator("#engine").select_option("none")
    expect(page.locator("#tpot")).to_have_text("6.1 ms")
    # a slider move redraws from the page's Python: the prompt's ladder climbs 1, 2, 3, 4, 5,
    # 6, 8, then ten rungs a decade (10, 12, 16, 20, ...), so rung 27 is 1,000
    page.locator("#prompt-range").evaluate(
        "(r) => { r.value = '27'; r.dispatchEvent(new Event('input', { bubbles: true })); }"
    )
    expect(page.locator("#prompt")).to_have_value("1000")
    expect(page.locator("#ttft")).to_have_text(f"{ridgeline.estimate(prompt=1000).ttft_s * 1e3:.3g} ms")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "test_static_site.png"))
    context.close()

    assert not [u for u in asked if "/api/" in u]  # nothing asked a server
    assert errors == []


@needs_pyodide
def test_the_static_site_needs_nothing_from_elsewhere(offline_site: Path) -> None:
    """With --pyodide the site holds everything it loads: it works offline."""
    page = (offline_site / "index.html").read_text(encoding="utf-8")
    assert 'content="pyodide/"' in page and "https://" not in page
    for name in (
        "pyodide.js",
        "pyodide.asm.mjs",
        "pyodide.asm.wasm",
        "python_stdlib.zip",
        "pyodide-lock.json",
    ):
        assert (offline_site / "pyodide" / name).is_file(), name
    assert f'data-integrity="{sri((offline_site / "pyodide" / "pyodide.js").read_bytes())}"' in page
