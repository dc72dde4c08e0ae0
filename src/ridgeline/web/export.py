"""`ridgeline web --export DIR`: the lesson as a static site, its numbers from the core in
the browser (Pyodide).

DIR holds the same page (`index.html`, `static/`), the ridgeline core as Python source in
`py/ridgeline.zip` (with `web/view.py`, `web/lesson.py`, `web/browser.py`, the lesson's
steps, and markdown-it-py, which renders them), and step 15's simulator table, worked out
here because the simulator needs numpy. The page's `api.js` sees that no server is behind
it, loads Pyodide, unpacks the zip and calls `browser.py` where it would call `/api/...`.

Pyodide comes from PYODIDE_URL, pinned to PYODIDE_VERSION, its loader checked against
PYODIDE_JS_SRI (Subresource Integrity); with `--pyodide PATH` (the npm package `pyodide`,
unpacked) it is copied into DIR/pyodide/ instead, and the site works offline.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import re
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

import ridgeline
from ridgeline.errors import RidgelineError

PYODIDE_VERSION = "314.0.7"  # Python 3.14; scripts/test.sh fetches the same with `npm pack`
PYODIDE_URL = f"https://cdn.jsdelivr.net/npm/pyodide@{PYODIDE_VERSION}/"  # the npm package's files
PYODIDE_JS_SRI = "sha384-hYKrcQ7FiKU7f1c92md9N2eh7BoBVX4CPkNDfQyyVclsjZevvDOBUkajGcYk1EF8"
# What the page needs of a Pyodide distribution (its npm package holds these and a few more).
PYODIDE_FILES = (
    "pyodide.js",
    "pyodide.asm.mjs",
    "pyodide.asm.wasm",
    "python_stdlib.zip",
    "pyodide-lock.json",
)
PYODIDE_EXTRA = ("package.json", "README.md", "LICENSE")  # copied when present

PACKAGE = Path(ridgeline.__file__).parent
WEB = Path(__file__).parent
MARKER = ".ridgeline-export"  # in DIR: a folder this command wrote, so it may write it again
# The core is every top-level module but the command line's; of the faces, only what the
# page's Python needs. Subpackages (simulate, measure, film, ...) stay out: they are faces.
NOT_CORE = {"cli.py", "_render.py", "_entry.py", "__main__.py", "options.py"}
WEB_MODULES = ("__init__.py", "view.py", "lesson.py", "browser.py", "slo.py")
DATA_SKIP = {"corpus"}  # published measurements: the accuracy report's, not the lesson's
# Pure-Python libraries the lesson's Markdown needs, shipped beside the core with their licences.
LIBRARIES = {"markdown_it": "markdown-it-py", "mdurl": "mdurl"}
BACKEND_META = '<meta name="ridgeline-backend" content="server">'


@dataclass(frozen=True)
class Exported:
    folder: Path
    files: int
    bytes: int
    pyodide: str  # the URL the page loads Pyodide from (relative when copied)
    pyodide_version: str
    simulated: list[str]  # the states whose simulator table the site carries


def sri(data: bytes) -> str:
    return "sha384-" + base64.b64encode(hashlib.sha384(data).digest()).decode("ascii")


def check_out_dir(out: Path) -> None:
    """DIR must be new, empty, or an earlier export: never a folder of someone's files."""
    if out.exists() and not out.is_dir():
        raise RidgelineError(f"--export {str(out)!r} is a file; give a folder for the site")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise RidgelineError(
            f"--export {str(out)!r} is not empty and was not written by `ridgeline web --export`; "
            "give a new or empty folder"
        )


def find_pyodide(path: Path) -> Path:
    """The folder holding pyodide.js: PATH itself, or PATH/package (an unpacked `npm pack`)."""
    for folder in (path, path / "package", path / "node_modules" / "pyodide"):
        if (folder / "pyodide.js").is_file():
            missing = [name for name in PYODIDE_FILES if not (folder / name).is_file()]
            if missing:
                raise RidgelineError(
                    f"--pyodide {str(folder)!r} lacks {', '.join(missing)}: give the unpacked npm "
                    f"package pyodide@{PYODIDE_VERSION}"
                )
            return folder
    raise RidgelineError(
        f"--pyodide {str(path)!r} holds no pyodide.js: give the unpacked npm package, e.g. "
        f"node_modules/pyodide or the package/ folder of `npm pack pyodide@{PYODIDE_VERSION}`"
    )


def pyodide_version(folder: Path) -> str:
    try:
        data = json.loads((folder / "package.json").read_text(encoding="utf-8"))
        return str(data.get("version", "unknown"))
    except (OSError, ValueError):
        return "unknown"


def _core_files() -> list[tuple[Path, str]]:
    """(file, name in the zip) for the core, the web modules the page's Python needs, the
    lesson's steps and the package's data."""
    files = [(p, f"ridgeline/{p.name}") for p in sorted(PACKAGE.glob("*.py")) if p.name not in NOT_CORE]
    files += [(WEB / name, f"ridgeline/web/{name}") for name in WEB_MODULES]
    files += [(p, f"ridgeline/web/lesson/{p.name}") for p in sorted((WEB / "lesson").glob("*.md"))]
    data = PACKAGE / "data"
    for p in sorted(data.rglob("*")):
        rel = p.relative_to(data)
        if p.is_file() and rel.parts[0] not in DATA_SKIP and "__pycache__" not in rel.parts:
            files.append((p, f"ridgeline/data/{rel.as_posix()}"))
    return files


def _library_files() -> list[tuple[Path, str]]:
    files = []
    for module, dist_name in LIBRARIES.items():
        dist = importlib.metadata.distribution(dist_name)
        root = Path(str(dist.locate_file(module)))
        files += [(p, f"{module}/{p.relative_to(root).as_posix()}") for p in sorted(root.rglob("*.py"))]
        for f in dist.files or ():
            if "LICEN" in f.name.upper():
                files.append((Path(str(dist.locate_file(f))), f"licenses/{dist_name}/{f.name}"))
    return files


def build_zip(target: Path, simulated: dict[str, object]) -> None:
    """The Python the page loads into Pyodide: the core, the lesson, markdown-it-py, and
    the simulator's tables as `ridgeline/web/simulated.json`."""
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for path, name in _core_files() + _library_files():
            z.write(path, name)
        z.writestr("ridgeline/web/simulated.json", json.dumps(simulated, allow_nan=False))


def simulate_steps() -> dict[str, object]:
    """Step 15's table (every step whose front matter shows "slo"), worked out now: the
    simulator needs numpy, which the browser's Python does not have."""
    from ridgeline.web import lesson
    from ridgeline.web.slo import key_of, slo_table

    lesson.check_placeholders()  # a broken placeholder fails the export, not the learner's page
    tables: dict[str, object] = {}
    for step in lesson.load_steps():
        if "slo" in step.show:
            table = dict(slo_table(step.state))
            table["precomputed"] = True
            tables[key_of(step.state)] = table
    return tables


def static_page(pyodide_url: str, integrity: str) -> str:
    """index.html as the server sends it, told that Python runs in the page."""
    page = (WEB / "static" / "index.html").read_text(encoding="utf-8")
    if BACKEND_META not in page:
        raise RidgelineError("index.html has lost its backend <meta>: the export cannot mark it static")
    origin = re.match(r"https://[^/]+", pyodide_url)
    remote = f" {origin.group(0)}" if origin else ""
    policy = (
        f"default-src 'self'; script-src 'self' 'wasm-unsafe-eval'{remote}; connect-src 'self'{remote}; "
        "img-src 'self' data:; style-src 'self'; object-src 'none'; base-uri 'none'"
    )
    metas = (
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">\n'
        '  <meta name="ridgeline-backend" content="pyodide">\n'
        f'  <meta name="ridgeline-pyodide" content="{pyodide_url}" data-integrity="{integrity}" '
        f'data-version="{PYODIDE_VERSION}">'
    )
    return page.replace(BACKEND_META, metas)


def export_site(out: Path, pyodide: Path | None = None) -> Exported:
    """Write the static lesson into `out`; with `pyodide`, copy that Pyodide beside it."""
    out = Path(out).expanduser()
    check_out_dir(out)
    source = find_pyodide(Path(pyodide).expanduser()) if pyodide is not None else None
    simulated = simulate_steps()
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name in ("static", "py", "pyodide"):
            if (out / name).exists():
                shutil.rmtree(out / name)
        shutil.copytree(WEB / "static", out / "static", ignore=shutil.ignore_patterns("__pycache__"))
        (out / "py").mkdir()
        build_zip(out / "py" / "ridgeline.zip", simulated)
        if source is not None:
            (out / "pyodide").mkdir()
            for name in PYODIDE_FILES + PYODIDE_EXTRA:
                if (source / name).is_file():
                    shutil.copyfile(source / name, out / "pyodide" / name)
            url = "pyodide/"
            integrity = sri((out / "pyodide" / "pyodide.js").read_bytes())
            version = pyodide_version(source)
        else:
            url, integrity, version = PYODIDE_URL, PYODIDE_JS_SRI, PYODIDE_VERSION
        (out / "index.html").write_text(static_page(url, integrity), encoding="utf-8")
        (out / MARKER).write_text(f"ridgeline {ridgeline.__version__}\n", encoding="utf-8")
    except OSError as exc:  # the system's failure, not the user's: status 1
        raise OSError(exc.errno, f"cannot write the site into {str(out)!r}: {exc.strerror or exc}") from None
    files = [p for p in out.rglob("*") if p.is_file()]
    return Exported(
        folder=out,
        files=len(files),
        bytes=sum(p.stat().st_size for p in files),
        pyodide=url,
        pyodide_version=version,
        simulated=sorted(simulated),
    )
