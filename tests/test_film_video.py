"""The film as a viewer gets it: one MP4, checked with the ffmpeg binary that imageio-ffmpeg
ships. Its length is the narration's, it carries one video, one audio and one subtitle
(mov_text) stream, and its frames show the sluice in beat 2 and the tap in beat 3 where the
drawing puts them.

Rendered once, small (320x180 at 4 frames a second), so the file runs in well under a minute
on two cores.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import wave
from pathlib import Path
from typing import Any

import pytest

from ridgeline.film.draw import SLUICE, TAP, fraction_box
from ridgeline.film.make import Options, make

imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")
pytest.importorskip("matplotlib")
if shutil.which("espeak-ng") is None:
    pytest.skip("espeak-ng is not installed (scripts/test.sh installs it)", allow_module_level=True)

WIDTH, HEIGHT, FPS = 320, 180, 4


@pytest.fixture(scope="module")
def film(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("film")
    return make(Options(out=str(out), size=f"{WIDTH}x{HEIGHT}", fps=FPS), progress=False)


def probe(path: str) -> str:
    """What `ffmpeg -i` says about a file (it exits 1 for want of an output; the text is on stderr)."""
    proc = subprocess.run(
        [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-i", path],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.stderr


def frame_at(video: str, t: float, png: Path) -> Any:
    """The frame t seconds in, through a PNG, as an RGB array."""
    import matplotlib.image as mpimg

    subprocess.run(
        [
            imageio_ffmpeg.get_ffmpeg_exe(),
            "-hide_banner",
            "-loglevel",
            "error",
            "-y",
            "-ss",
            f"{t:.3f}",
            "-i",
            video,
            "-frames:v",
            "1",
            str(png),
        ],
        check=True,
        timeout=60,
    )
    image = mpimg.imread(str(png))
    assert image.shape[:2] == (HEIGHT, WIDTH)
    return (image[:, :, :3] * 255).astype(int)


def region(image: Any, box: tuple[float, float, float, float]) -> Any:
    """The pixels inside a canvas box (the frame is 16:9, so no letterbox)."""
    left, bottom, right, top = fraction_box(box)
    rows = slice(round((1 - top) * HEIGHT) + 1, round((1 - bottom) * HEIGHT) - 1)
    cols = slice(round(left * WIDTH) + 1, round(right * WIDTH) - 1)
    return image[rows, cols]


def share(pixels: Any, colour: str) -> float:
    """The share of pixels that read as prefill amber or decode blue."""
    r, b = pixels[..., 0], pixels[..., 2]
    hit = (r - b > 60) & (r > 150) if colour == "amber" else (b - r > 80) & (b > 120)
    return float(hit.mean())


def middle(film: dict[str, Any], beat: int) -> float:
    cues = film["cues"]
    start = 0.0 if beat == 1 else cues[beat - 1]["start_s"]
    end = cues[beat]["start_s"] if beat < len(cues) else film["duration_s"]
    return (start + end) / 2


def test_every_file_is_written(film: dict[str, Any]) -> None:
    files = film["files"]
    assert all(
        files[k] and Path(files[k]).is_file() for k in ("captions", "transcript", "narration", "video")
    )
    assert film["voiced"] is True and film["video"]["frames"] == round(film["duration_s"] * FPS)


def test_duration_matches_the_narration(film: dict[str, Any]) -> None:
    with wave.open(film["files"]["narration"], "rb") as w:
        narration_s = w.getnframes() / w.getframerate()
    h, m, s = re.search(r"Duration: (\d+):(\d+):([\d.]+)", probe(film["files"]["video"])).groups()
    video_s = int(h) * 3600 + int(m) * 60 + float(s)
    assert video_s == pytest.approx(narration_s, rel=0.02)
    assert film["duration_s"] == pytest.approx(narration_s, rel=0.002)


def test_one_video_one_audio_one_subtitle_stream(film: dict[str, Any]) -> None:
    streams = re.findall(r"Stream #\d+:\d+.*?: (Video|Audio|Subtitle): (\w+)", probe(film["files"]["video"]))
    kinds = sorted(kind for kind, _ in streams)
    assert kinds == ["Audio", "Subtitle", "Video"], streams
    assert ("Subtitle", "mov_text") in streams and ("Video", "h264") in streams


def test_captions_are_timed_by_the_voice(film: dict[str, Any]) -> None:
    """Each cue starts where its audio starts and ends where it ends: the WAV is silent
    between cues and speaking inside them."""
    import numpy as np

    with wave.open(film["files"]["narration"], "rb") as w:
        rate = w.getframerate()
        samples = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    for a, b in zip(film["cues"], film["cues"][1:], strict=False):
        gap = samples[round(a["end_s"] * rate) + 50 : round(b["start_s"] * rate) - 50]
        assert len(gap) > 0 and np.abs(gap).max() == 0
        spoken = samples[round(b["start_s"] * rate) : round(b["end_s"] * rate)]
        assert np.abs(spoken).max() > 1000


def test_beat_2_is_a_sluice_and_beat_3_a_tap(film: dict[str, Any], tmp_path: Path) -> None:
    """Prefill floods the channel left of the chip; decode leaves it empty and drips from the
    tap above the chip, which prefill does not have."""
    video = film["files"]["video"]
    prefill = frame_at(video, middle(film, 2), tmp_path / "beat2.png")
    decode = frame_at(video, middle(film, 3), tmp_path / "beat3.png")
    assert share(region(prefill, SLUICE), "amber") > 0.5
    assert share(region(decode, SLUICE), "amber") < 0.02
    assert share(region(decode, TAP), "blue") > 0.5
    assert share(region(prefill, TAP), "blue") < 0.02
    assert abs(region(prefill, SLUICE) - region(decode, SLUICE)).mean() > 40
