"""`ridgeline web`: registered on the CLI; imports FastAPI and uvicorn only when run."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def web(
        host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (loopback by default)."),
        port: int = typer.Option(8000, "--port", help="TCP port to listen on."),
        open_browser: bool = typer.Option(False, "--open", help="Open the lesson in a web browser."),
    ) -> None:
        """Serve the lesson and the playground in the browser (FastAPI on uvicorn)."""
        from ridgeline.web.serve import serve

        serve(host, port, open_browser)
