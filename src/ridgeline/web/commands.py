"""`ridgeline web`: registered on the CLI; imports FastAPI and uvicorn only when run."""

from __future__ import annotations

from typing import Optional

import typer

from ridgeline.errors import RidgelineError


def register(app: typer.Typer) -> None:
    @app.command()
    def web(
        host: Optional[str] = typer.Option(
            None, "--host", help="Address to bind (loopback, 127.0.0.1, by default)."
        ),
        port: Optional[int] = typer.Option(None, "--port", help="TCP port to listen on (8000 by default)."),
        open_browser: bool = typer.Option(False, "--open", help="Open the lesson in a web browser."),
        export: Optional[str] = typer.Option(
            None,
            "--export",
            metavar="DIR",
            help="Write the lesson as a static site into DIR (Python runs in the page, through "
            "Pyodide) instead of serving it.",
        ),
        pyodide: Optional[str] = typer.Option(
            None,
            "--pyodide",
            metavar="PATH",
            help="With --export: copy this Pyodide (the unpacked npm package) into the site, so it "
            "works offline; by default the page loads a pinned Pyodide from a CDN.",
        ),
    ) -> None:
        """Serve the lesson and the playground in the browser (FastAPI on uvicorn), or write
        them as a static site with --export."""
        if export is None:
            if pyodide is not None:
                raise RidgelineError("--pyodide goes with --export DIR: it is copied into the static site")
            from ridgeline.web.serve import serve

            serve(host or "127.0.0.1", 8000 if port is None else port, open_browser)
            return
        if host is not None or port is not None or open_browser:
            raise RidgelineError(
                "--export writes a static site and serves nothing: drop --host, --port and --open"
            )
        if not export.strip() or "\x00" in export:
            raise RidgelineError(f"--export needs a folder name, got {export!r}")
        if pyodide is not None and (not pyodide.strip() or "\x00" in pyodide):
            raise RidgelineError(f"--pyodide needs a folder, got {pyodide!r}")
        from pathlib import Path

        from ridgeline.web.export import export_site

        done = export_site(Path(export), Path(pyodide) if pyodide is not None else None)
        where = (
            f"Pyodide {done.pyodide_version} copied into {done.folder / 'pyodide'} (works offline)"
            if pyodide is not None
            else f"Pyodide {done.pyodide_version} loaded from {done.pyodide} (pinned, integrity-checked)"
        )
        typer.echo(
            f"ridgeline web: wrote the lesson as a static site to {done.folder} "
            f"({done.files} files, {done.bytes / 1e6:.1f} MB); {where}.\n"
            f"Serve the folder from any static host, e.g.: python -m http.server -d {done.folder}"
        )
