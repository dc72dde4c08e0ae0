"""`ridgeline film`: options parsed here, the film made in ridgeline.film.make.

Only typer and the standard library load at start-up; matplotlib, numpy and Rich load
inside the command.
"""

from __future__ import annotations

from typing import Optional

import typer

from ridgeline.options import GPU, MODEL, WEIGHTS


def register(app: typer.Typer) -> None:
    @app.command()
    def film(
        model: str = MODEL,
        gpu: str = GPU,
        weights: Optional[str] = WEIGHTS,
        tp: Optional[int] = typer.Option(
            None,
            "--tp",
            help="Tensor-parallel GPUs (default: 1, or the fewest of 2, 4, 8 that hold the model).",
        ),
        versus: Optional[str] = typer.Option(
            None,
            "--versus",
            help="Accelerator for beat 6 to compare with (default: its predecessor; none: no comparison).",
        ),
        measured: Optional[str] = typer.Option(
            None, "--measured", help="Records from `ridgeline measure` (JSONL) for beats 7 and 8."
        ),
        endpoint: Optional[str] = typer.Option(
            None, "--endpoint", help="Who served --measured, as beat 7 names it (e.g. CoreWeave)."
        ),
        out: Optional[str] = typer.Option(
            None,
            "--out",
            help="Folder to write (default: $RIDGELINE_FILMS or ./films, then one per deployment).",
        ),
        no_video: bool = typer.Option(
            False, "--no-video", help="Skip film.mp4: captions, transcript and voice only."
        ),
        no_voice: bool = typer.Option(
            False, "--no-voice", help="Skip narration.wav: cue times from the seed's reading pace."
        ),
        fps: int = typer.Option(12, "--fps", help="Frames a second, 1 to 60: fewer render faster."),
        size: str = typer.Option(
            "1280x720", "--size", help="Frame size WIDTHxHEIGHT in pixels, even numbers."
        ),
        as_json: bool = typer.Option(
            False, "--json", help="Print a JSON summary: paths, durations, cue texts."
        ),
    ) -> None:
        """The seed's film, for any model and accelerator: captions.vtt, transcript.md,
        narration.wav (espeak-ng) and film.mp4 (matplotlib, ffmpeg), every number from the core
        at the ideal preset. Beats: two waits, prefill, decode, the roofline, batching, wasted
        money, measured (or predicted), the cache rides along, two budgets."""
        from ridgeline.film.make import Options, make

        options = Options(
            model=model,
            gpu=gpu,
            weights=weights,
            tp=tp,
            versus=versus,
            measured=measured,
            endpoint=endpoint,
            out=out,
            video=not no_video,
            voice=not no_voice,
            fps=fps,
            size=size,
        )
        summary = make(options, progress=True)
        if as_json:
            import json
            import sys

            sys.stdout.write(json.dumps(summary, indent=2, allow_nan=False) + "\n")
            return
        from rich.console import Console

        console = Console()
        console.print(f"[bold]{summary['out']}[/bold]: {summary['duration_s']:.1f} s of film")
        for name, path in summary["files"].items():
            if path:
                console.print(f"  {name:<10} {path}")
