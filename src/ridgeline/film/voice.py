"""The narration: each cue spoken by espeak-ng into a WAV, its length read from the WAV's
header, the cues joined with short silences by the standard library's `wave`. Without a
voice, each cue lasts as long as the seed's narrator takes over as many characters.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import wave
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ridgeline.errors import RidgelineError

VOICE = "en-gb"  # the seed is in British English ("quantisation")
WORDS_PER_MINUTE = 150  # espeak-ng's default is 175; the seed's narrator is slower still
LEAD_S = 0.25  # silence before the first cue
GAP_S = 0.6  # between cues
TAIL_S = 1.0  # after the last
# The seed's nine captions hold 1,800 characters spoken over 150.8 s.
READING_PACE_CHARS_PER_S = 11.9


@dataclass(frozen=True)
class Timing:
    """When each cue is spoken, and the whole film's length."""

    cues: tuple[tuple[float, float], ...]  # (start_s, end_s), one per cue
    duration_s: float
    voiced: bool

    def spans(self) -> list[tuple[float, float]]:
        """Each beat's stretch of film: from its cue's start (the first from 0) to the next
        cue's start (the last to the end)."""
        starts = [0.0] + [start for start, _ in self.cues[1:]]
        ends = [*starts[1:], self.duration_s]
        return list(zip(starts, ends, strict=True))


def lay_out(lengths_s: Sequence[float], voiced: bool) -> Timing:
    t = LEAD_S
    cues = []
    for length in lengths_s:
        cues.append((t, t + length))
        t += length + GAP_S
    return Timing(tuple(cues), t - GAP_S + TAIL_S, voiced)


def paced(texts: Sequence[str]) -> Timing:
    """Cue times at the seed's reading pace."""
    return lay_out([len(text) / READING_PACE_CHARS_PER_S for text in texts], voiced=False)


def espeak() -> str:
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise RidgelineError(
            "espeak-ng is not installed, so the film has no voice: install it "
            "(apt-get install espeak-ng) or pass --no-voice"
        )
    return exe


def wav_seconds(path: str | Path) -> float:
    """A WAV's length from its header: frames / frame rate."""
    with wave.open(str(path), "rb") as w:
        return w.getnframes() / w.getframerate()


def speak(text: str, path: Path, exe: str) -> None:
    """One cue into a WAV; the text goes on stdin, so no word of it is read as an option."""
    try:
        subprocess.run(
            [exe, "-v", VOICE, "-s", str(WORDS_PER_MINUTE), "-w", str(path), "--stdin"],
            input=text.encode("utf-8"),
            check=True,
            capture_output=True,
            timeout=120,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as exc:
        detail = getattr(exc, "stderr", b"") or b""
        raise RidgelineError(
            f"espeak-ng could not speak a cue ({detail.decode(errors='replace').strip() or exc}); "
            "pass --no-voice to make the film without one"
        ) from None


def narrate(texts: Sequence[str], out: Path, step: Callable[[], None] | None = None) -> Timing:
    """Speak every cue, then write `out`: the cues in order with LEAD_S before, GAP_S between
    and TAIL_S after. Cue times come from each WAV's measured length."""
    exe = espeak()
    with tempfile.TemporaryDirectory(prefix="ridgeline-film-") as tmp:
        paths = []
        for i, text in enumerate(texts):
            path = Path(tmp) / f"cue{i + 1}.wav"
            speak(text, path, exe)
            paths.append(path)
            if step is not None:
                step()
        lengths = [wav_seconds(p) for p in paths]
        with wave.open(str(paths[0]), "rb") as first:
            params = first.getparams()
        frame_bytes = params.sampwidth * params.nchannels

        def silence(seconds: float) -> bytes:
            return b"\x00" * (round(seconds * params.framerate) * frame_bytes)

        with wave.open(str(out), "wb") as w:
            w.setnchannels(params.nchannels)
            w.setsampwidth(params.sampwidth)
            w.setframerate(params.framerate)
            w.writeframes(silence(LEAD_S))
            for i, path in enumerate(paths):
                with wave.open(str(path), "rb") as cue:
                    if cue.getparams()[:3] != params[:3]:
                        raise RidgelineError("espeak-ng wrote cues in different formats; pass --no-voice")
                    w.writeframes(cue.readframes(cue.getnframes()))
                w.writeframes(silence(GAP_S if i < len(paths) - 1 else TAIL_S))
    return lay_out(lengths, voiced=True)
