"""`ridgeline film`: the figures, the words, the voice, the frames, then one MP4.

Writes into the output folder: captions.vtt, transcript.md, narration.wav (unless no voice)
and film.mp4 (unless no video). The frames go straight into the ffmpeg binary that the
`imageio-ffmpeg` wheel ships, which muxes the narration and the captions (as a soft
mov_text subtitle track) beside them.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ridgeline.checks import check_size
from ridgeline.errors import RidgelineError
from ridgeline.interrupts import SigtermInterrupts

DEFAULT_SIZE = "1280x720"
DEFAULT_FPS = 12
MAX_FPS = 60
WIDTH_RANGE = (64, 3840)
HEIGHT_RANGE = (36, 2160)
FILMS_ENV = "RIDGELINE_FILMS"  # the folder of films, one per deployment, that the web lesson plays


@dataclass(frozen=True)
class Options:
    model: str = "llama-3.1-8b"
    gpu: str = "h100-sxm"
    weights: str | None = None
    tp: int | None = None
    versus: str | None = None
    measured: str | None = None
    endpoint: str | None = None
    out: str | None = None
    video: bool = True
    voice: bool = True
    fps: int = DEFAULT_FPS
    size: str = DEFAULT_SIZE


def parse_size(text: str) -> tuple[int, int]:
    """ "1280x720" -> (1280, 720): even numbers (H.264 in yuv420p halves both)."""
    match = re.fullmatch(r"\s*([0-9]{1,6})\s*[xX×]\s*([0-9]{1,6})\s*", str(text))
    if match is None:
        raise RidgelineError(f"--size must be WIDTHxHEIGHT in pixels, such as 1280x720, got {text!r}")
    w = check_size("--size width", int(match.group(1)), *WIDTH_RANGE)
    h = check_size("--size height", int(match.group(2)), *HEIGHT_RANGE)
    if w % 2 or h % 2:
        raise RidgelineError(f"--size must have an even width and height (H.264 halves them), got {text!r}")
    return w, h


def films_root() -> Path:
    """Where films go by default and where the web lesson looks: $RIDGELINE_FILMS, else ./films."""
    return Path(os.environ.get(FILMS_ENV) or "films")


def slug(model: str, gpu: str, weights: str, tp: int) -> str:
    """One deployment's folder name: llama-3.1-8b_h100-sxm_bf16_tp1."""
    raw = f"{model}_{gpu}_{weights}_tp{tp}"
    return re.sub(r"[^A-Za-z0-9._-]+", "-", raw).strip(".-")[:200] or "film"


def check_out(path: Path) -> Path:
    """A folder to write into: made if missing; refused if it is a file or cannot be made."""
    if path.exists() and not path.is_dir():
        raise RidgelineError(f"--out {str(path)!r} is a file: give a folder for the film")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RidgelineError(f"--out {str(path)!r}: cannot make the folder ({exc.strerror or exc})") from None
    if not os.access(path, os.W_OK):
        raise RidgelineError(f"--out {str(path)!r} is not writable: give another folder")
    return path


def ffmpeg() -> str:
    try:
        import imageio_ffmpeg
    except ImportError:
        raise RidgelineError(
            "the video needs the ffmpeg of imageio-ffmpeg: pip install 'ridgeline[film]', or pass --no-video"
        ) from None
    return str(imageio_ffmpeg.get_ffmpeg_exe())


def _check_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise RidgelineError(
            "the video is drawn with matplotlib: pip install 'ridgeline[film]', or pass --no-video"
        ) from None


def prepare(o: Options) -> tuple[Any, ...]:
    """Check every input before any work: the figures, the words, the output folder."""
    from ridgeline.film.figures import gather
    from ridgeline.film.measured import read_measured
    from ridgeline.film.script import beats

    fps = check_size("--fps", o.fps, 1, MAX_FPS)
    size = parse_size(o.size)
    if o.endpoint is not None and (
        not o.endpoint.strip() or len(o.endpoint) > 80 or not o.endpoint.isprintable()
    ):
        raise RidgelineError(f"--endpoint must be a short name such as CoreWeave, got {o.endpoint!r}")
    if o.endpoint is not None and o.measured is None:
        raise RidgelineError("--endpoint names who served --measured: pass --measured FILE.jsonl too")
    measured = read_measured(o.measured) if o.measured is not None else None
    figures = gather(o.model, o.gpu, o.weights, o.tp, o.versus, measured)
    script = beats(figures, measured, o.endpoint)
    if o.out is not None:
        out = Path(o.out).expanduser()
    else:
        e = figures.prefill
        out = films_root() / slug(e.model.name, e.gpu.name, figures.weights, figures.tp)
    if o.video:
        ffmpeg()
        _check_matplotlib()
    if o.voice:
        from ridgeline.film.voice import espeak

        espeak()
    return figures, measured, script, check_out(out), fps, size


def make(o: Options, progress: bool = True) -> dict[str, Any]:
    """Write the film; returns the summary that `--json` prints."""
    from ridgeline.film import page, voice

    figures, measured, script, out, fps, size = prepare(o)
    texts = [b.text for b in script]
    started = time.perf_counter()
    with _progress(progress) as bar:
        files: dict[str, str | None] = {
            "captions": None,
            "transcript": None,
            "narration": None,
            "video": None,
        }
        if o.voice:
            task = bar.add_task("voice", total=len(texts))
            wav = out / "narration.wav"
            timing = voice.narrate(texts, wav, step=lambda: bar.advance(task))
            files["narration"] = str(wav)
        else:
            timing = voice.paced(texts)
        vtt = out / "captions.vtt"
        md = out / "transcript.md"
        _write(vtt, page.captions(script, timing, figures))
        _write(md, page.transcript(script, timing, figures, measured))
        files["captions"], files["transcript"] = str(vtt), str(md)
        render_s = None
        frames = 0
        if o.video:
            mp4 = out / "film.mp4"
            frames = round(timing.duration_s * fps)
            task = bar.add_task("frames", total=frames)
            t0 = time.perf_counter()
            encode(
                figures,
                measured,
                o.endpoint,
                script,
                timing,
                size,
                fps,
                mp4,
                wav=out / "narration.wav" if o.voice else None,
                vtt=vtt,
                step=lambda: bar.advance(task),
            )
            render_s = time.perf_counter() - t0
            files["video"] = str(mp4)
    return {
        "out": str(out),
        "files": files,
        "duration_s": timing.duration_s,
        "voiced": timing.voiced,
        "video": None
        if not o.video
        else {"fps": fps, "width": size[0], "height": size[1], "frames": frames, "render_s": render_s},
        "elapsed_s": time.perf_counter() - started,
        "deployment": figures.summary(),
        "measured": None if measured is None else measured.to_dict(),
        "cues": [
            {**b.to_dict(), "start_s": start, "end_s": end}
            for b, (start, end) in zip(script, timing.cues, strict=True)
        ],
    }


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise RidgelineError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None


class _Quiet:
    """A progress bar that shows nothing (for --json and tests that ask for quiet)."""

    def __enter__(self) -> _Quiet:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, name: str, total: int) -> int:
        return 0

    def advance(self, task: int) -> None:
        return None


def _progress(show: bool) -> Any:
    if not show:
        return _Quiet()
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    return Progress(
        TextColumn("{task.description:>7}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
    )


def encode(
    figures: Any,
    measured: Any,
    endpoint: str | None,
    script: Any,
    timing: Any,
    size: tuple[int, int],
    fps: int,
    mp4: Path,
    wav: Path | None,
    vtt: Path,
    step: Any,
) -> None:
    """Draw every frame into ffmpeg's stdin; ffmpeg adds the narration and the captions."""
    from ridgeline.film.draw import Film, Frames

    film = Film(figures, script, timing.spans(), measured, endpoint)
    frames = Frames(film, *size)
    w, h = size
    part = mp4.with_name(mp4.name + ".part")
    cmd = [ffmpeg(), "-hide_banner", "-loglevel", "error", "-y"]
    cmd += ["-f", "rawvideo", "-pix_fmt", "rgba", "-s", f"{w}x{h}", "-r", str(fps), "-i", "pipe:0"]
    inputs = 1
    maps = ["-map", "0:v"]
    if wav is not None:
        cmd += ["-i", str(wav)]
        maps += ["-map", f"{inputs}:a"]
        inputs += 1
    cmd += ["-i", str(vtt)]
    maps += ["-map", f"{inputs}:s"]
    cmd += maps
    cmd += [
        "-c:v",
        "libx264",
        "-preset",
        "veryfast",
        "-tune",
        "animation",
        "-crf",
        "23",
        "-pix_fmt",
        "yuv420p",
    ]
    if wav is not None:
        cmd += ["-c:a", "aac", "-b:a", "96k"]
    cmd += ["-c:s", "mov_text", "-metadata:s:s:0", "language=eng", "-movflags", "+faststart"]
    cmd += ["-f", "mp4", str(part)]
    n = round(timing.duration_s * fps)
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None
    with SigtermInterrupts():  # SIGTERM as Ctrl-C: the half-written film is removed
        try:
            for i in range(n):
                proc.stdin.write(frames.frame(i / fps))
                step()
            proc.stdin.close()
            err = proc.stderr.read() if proc.stderr is not None else b""
            code = proc.wait()
        except BrokenPipeError:
            err = proc.stderr.read() if proc.stderr is not None else b""
            code = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            part.unlink(missing_ok=True)
            raise
    if code != 0:
        part.unlink(missing_ok=True)
        detail = err.decode(errors="replace").strip().splitlines()
        raise RidgelineError(f"ffmpeg could not write the film: {detail[-1] if detail else f'exit {code}'}")
    part.replace(mp4)
