"""`ridgeline film`'s words: the seed's nine captions come back number for number, another
deployment's numbers are the core's, and sentences change where they would stop being true.

Golden numbers come from the seed's own captions (../shared/seeds/004_...), read here, never
from this code's output. The MP4 is checked in test_film_video.py, the lesson's film page in
test_film_web.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

import ridgeline
from conftest import run_cli
from ridgeline.cli import main
from ridgeline.film.figures import gather
from ridgeline.film.measured import read_measured
from ridgeline.film.script import beats
from ridgeline.film.spoken import (
    article,
    spoken_bytes,
    spoken_count,
    spoken_rate,
    spoken_ratio,
    spoken_share,
    spoken_time,
    spoken_tokens,
)
from ridgeline.film.voice import paced

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
SEED_CAPTIONS = SEEDS / "004_c3032a7674dc1baf.txt"
SEED_LENGTH_S = 2 * 60 + 34  # "Film, 2:34" on the seed's page


def seed_cues() -> list[str]:
    if not SEED_CAPTIONS.exists():
        pytest.skip("../shared/seeds is not beside this checkout")
    text = SEED_CAPTIONS.read_text(encoding="utf-8")
    return [c.strip() for c in re.findall(r"^\d+\n[\d:.]+ --> [\d:.]+\n(.+)$", text, re.M)]


# The numbers the issue lists for the default film, as the seed's captions say them.
SEED_NUMBERS = {
    2: ["2,000 tokens", "33 trillion", "989 teraflops", "about 34 milliseconds"],
    3: ["16 gigabytes", "16 billion", "3.35 terabytes a second", "4.8 milliseconds", "about 209 a second"],
    4: ["one operation per byte", "prefill does 2,000", "the ridge at 295"],
    5: ["64 users", "from 4.8 to 5.4 milliseconds", "over 11,000 tokens a second", "instead of 209"],
    6: [
        "three times an A100's teraflops",
        "1.6 times its bandwidth",
        "1.6 times faster",
        "32,000-token prompt",
        "0.8 seconds",
        "a third of that in attention",
    ],
    7: ["about 0.3 seconds", "2,000 tokens", "0.74 seconds for 16,000"],
    8: ["156 tokens a second", "13 percent slower", "2.1 gigabytes of KV cache", "13 percent more bytes"],
}


def numbers(text: str) -> list[str]:
    """Every figure a sentence states: digits, and the number words a person says."""
    words = r"one|two|three|four|five|six|seven|eight|nine|twice|half|a third|a quarter"
    return re.findall(rf"\d[\d,.]*\d|\d|\b(?:{words})\b", text)


def seed_records(path: Path) -> Path:
    """The seed's published measurements as records: about 0.3 s to the first token for a
    34- or a 2,081-token prompt, 0.74 s for 16,361; 156 tokens a second, 13% slower long."""
    rows = []
    for i, (prompt, target, ttft_s, rate) in enumerate(
        [(34, 32, 0.30, 156.0), (2081, 2000, 0.31, 156.0), (16361, 16000, 0.74, 136.0)] * 3
    ):
        rows.append(
            {
                "prompt_tokens": prompt,
                "output_tokens": 129,
                "concurrency": 1,
                "ttft_s": ttft_s,
                "e2e_s": ttft_s + 128 / rate,
                "tpot_s": 1 / rate,
                "error": None,
                "request_id": i,
                "target_prompt_tokens": target,
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def default_cues() -> list[str]:
    return [b.text for b in beats(gather())]


@pytest.fixture
def seed_measured(tmp_path: Path):
    return read_measured(seed_records(tmp_path / "seed.jsonl"))


# ---- the golden film ----------------------------------------------------------------------


@pytest.mark.parametrize("beat", range(1, 10))
def test_default_cue_states_the_seeds_numbers(beat: int, default_cues: list[str], seed_measured) -> None:
    """For Llama 3.1 8B on an H100 in bf16 every cue says the seed's numbers. Beats 7 and 8
    are the seed's measurements, so they come from the seed's records."""
    seed = seed_cues()[beat - 1]
    if beat in (7, 8):
        ours = beats(gather(measured=seed_measured), seed_measured, "CoreWeave")[beat - 1].text
    else:
        ours = default_cues[beat - 1]
    for phrase in SEED_NUMBERS.get(beat, []):
        assert phrase in seed, f"the list is wrong: {phrase!r} is not in the seed's cue {beat}"
        assert phrase in ours, f"cue {beat} lost {phrase!r}: {ours}"
    assert numbers(ours) == numbers(seed)


def test_the_seed_film_comes_back_word_for_word(seed_measured) -> None:
    """Defaults, the seed's measurements and its endpoint: the seed's nine captions exactly."""
    ours = [b.text for b in beats(gather(measured=seed_measured), seed_measured, "CoreWeave")]
    assert ours == seed_cues()


def test_without_measurements_beats_7_and_8_say_they_are_predictions(default_cues: list[str]) -> None:
    assert "here is the prediction" in default_cues[6]
    assert "after 34 milliseconds for 2,000 tokens and 0.33 seconds for 16,000" in default_cues[6]
    assert default_cues[7].startswith("Decode would run at up to 209 tokens a second")
    assert default_cues[:6] == seed_cues()[:6] and default_cues[8] == seed_cues()[8]


def test_the_batching_assumption_is_stated() -> None:
    """The 5.4 ms holds at a context of 242 tokens per user; the transcript says so."""
    notes = " ".join(beats(gather())[4].notes)
    assert "context of 242 tokens per user" in notes
    assert "295 users" in notes and "stays memory bound" in notes


# ---- measured beats -----------------------------------------------------------------------


def test_seed_measurements_are_read_as_short_middle_long(seed_measured) -> None:
    m = seed_measured
    assert (m.short.prompt_tokens, m.middle.prompt_tokens, m.long.prompt_tokens) == (34, 2081, 16361)
    assert m.short.decode_tokens_per_s == pytest.approx(156)
    assert m.long.decode_tokens_per_s == pytest.approx(136)
    assert m.long.ttft_s == pytest.approx(0.74)


def _records(path: Path, rows: list[tuple[int, float, float]]) -> Path:
    lines = []
    for prompt, ttft_s, rate in rows:
        rec = {
            "prompt_tokens": prompt,
            "output_tokens": 65,
            "ttft_s": ttft_s,
            "tpot_s": 1 / rate,
            "error": None,
        }
        lines.append(json.dumps(rec) + "\n")
    path.write_text("".join(lines))
    return path


def test_a_slowdown_the_bytes_do_not_explain_is_not_blamed_on_them(tmp_path: Path) -> None:
    m = read_measured(_records(tmp_path / "r.jsonl", [(100, 0.2, 150.0), (16000, 0.9, 90.0)]))
    text = beats(gather(measured=m), m)[7].text
    assert (
        "40 percent slower" in text and "more than that prompt's 2.1 gigabytes of KV cache explains" in text
    )
    assert "because" not in text


def test_no_slowdown_is_said_plainly(tmp_path: Path) -> None:
    m = read_measured(_records(tmp_path / "r.jsonl", [(100, 0.2, 150.0), (16000, 0.9, 149.5)]))
    assert "no slower with the long prompt, although" in beats(gather(measured=m), m)[7].text


def test_one_prompt_length_gives_the_predicted_slowdown(tmp_path: Path) -> None:
    m = read_measured(_records(tmp_path / "r.jsonl", [(100, 0.2, 150.0)] * 2))
    seven, eight = (b.text for b in beats(gather(measured=m), m)[6:8])
    assert "0.2 seconds for a short prompt" in seven and "for 16,000" not in seven
    assert "the slowdown is the prediction's" in eight


def test_failed_and_loaded_requests_are_left_out(tmp_path: Path) -> None:
    rows = [
        {"prompt_tokens": 100, "ttft_s": 0.2, "tpot_s": 0.01, "error": None, "concurrency": 1},
        {"prompt_tokens": 100, "ttft_s": 9.0, "tpot_s": 0.5, "error": None, "concurrency": 8},
        {"prompt_tokens": 100, "ttft_s": None, "tpot_s": None, "error": "http 500", "concurrency": 1},
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    m = read_measured(path)
    assert m.short.requests == 1 and m.short.ttft_s == 0.2


# ---- another deployment: the core's numbers -----------------------------------------------


def _num(pattern: str, text: str) -> float:
    match = re.search(pattern, text)
    assert match, f"{pattern!r} not in {text!r}"
    return float(match.group(1).replace(",", ""))


def test_qwen_on_h200_states_the_estimates_numbers() -> None:
    """Every number in the Qwen2.5 7B / H200 cues is the core's, to its spoken rounding."""
    q = ridgeline.estimate("qwen2.5-7b", "h200", weights="bf16", prompt=2000, output=1, preset="ideal")
    d = ridgeline.estimate("qwen2.5-7b", "h200", weights="bf16", prompt=1, output=1, preset="ideal")
    b = ridgeline.estimate(
        "qwen2.5-7b", "h200", weights="bf16", prompt=242, output=1, batch=64, preset="ideal"
    )
    lg = ridgeline.estimate("qwen2.5-7b", "h200", weights="bf16", prompt=32000, output=1, preset="ideal")
    c = ridgeline.estimate("qwen2.5-7b", "h200", weights="bf16", prompt=16000, output=1, preset="ideal")
    old = ridgeline.estimate("qwen2.5-7b", "h100-sxm", weights="bf16", prompt=1, output=1, preset="ideal")
    h200, h100 = ridgeline.get_accelerator("h200"), ridgeline.get_accelerator("h100-sxm")
    cues = [b.text for b in beats(gather("qwen2.5-7b", "h200"))]

    two = cues[1]
    assert "2,000 tokens of Qwen2.5 7B" in two
    assert _num(r"is (\d+) trillion operations", two) == pytest.approx(q.prefill.flops / 1e12, abs=0.5)
    assert _num(r"H200's (\d+) teraflops", two) == pytest.approx(h200.peak_flops["bf16"] / 1e12, abs=0.5)
    assert _num(r"about (\d+) milliseconds", two) == pytest.approx(q.ttft_s * 1e3, abs=0.5)

    three = cues[2]
    assert _num(r"all (\d+) gigabytes", three) == pytest.approx(d.memory.weight_bytes / 1e9, abs=0.5)
    assert _num(r"just (\d+) billion", three) == pytest.approx(d.decode.flops / 1e9, abs=0.5)
    assert _num(r"at ([\d.]+) terabytes", three) == pytest.approx(
        h200.bandwidth_bytes_per_s / 1e12, abs=0.005
    )
    assert _num(r"needs ([\d.]+) milliseconds", three) == pytest.approx(d.decode.time_s * 1e3, abs=0.05)
    assert _num(r"about (\d+) a second", three) == pytest.approx(d.tokens_per_s, abs=0.5)

    four = cues[3]
    assert "decode does one operation per byte" in four and d.decode.intensity == pytest.approx(1, abs=0.05)
    assert _num(r"prefill does ([\d,]+)", four) == pytest.approx(q.prefill.intensity, rel=0.05)
    assert _num(r"ridge at (\d+)", four) == pytest.approx(q.ridge, abs=0.5)

    five = cues[4]
    assert _num(r"from ([\d.]+) to", five) == pytest.approx(d.decode.time_s * 1e3, abs=0.05)
    assert _num(r"to ([\d.]+) milliseconds", five) == pytest.approx(b.decode.time_s * 1e3, abs=0.05)
    over = _num(r"over ([\d,]+) tokens", five)
    assert over <= b.batch_tokens_per_s < over * 1.1

    six = cues[5]  # the H200's predecessor is the H100: same teraflops, more bandwidth
    assert "the same teraflops as an H100" in six
    ratio = h200.bandwidth_bytes_per_s / h100.bandwidth_bytes_per_s
    assert _num(r"and ([\d.]+) times its bandwidth", six) == pytest.approx(ratio, abs=0.05)
    assert _num(r"decode gets ([\d.]+) times faster", six) == pytest.approx(
        d.tokens_per_s / old.tokens_per_s, abs=0.05
    )
    assert _num(r"waits ([\d.]+) seconds", six) == pytest.approx(lg.ttft_s, abs=0.05)
    assert "30 percent of that in attention" in six and lg.prefill.attention_share == pytest.approx(
        0.30, abs=0.005
    )

    eight = cues[7]
    assert _num(r"up to (\d+) tokens", eight) == pytest.approx(d.tokens_per_s, abs=0.5)
    slower = 1 - c.tokens_per_s / d.tokens_per_s
    assert _num(r"and (\d+) percent slower", eight) == pytest.approx(100 * slower, abs=0.5)
    kv = c.decode.kv_bytes_per_gpu
    assert _num(r"prompt's (\d+) megabytes", eight) == pytest.approx(kv / 1e6, abs=0.5)
    assert _num(r"(\d+) percent more bytes", eight) == pytest.approx(
        100 * kv / c.decode.weight_bytes_per_gpu, abs=0.5
    )


# ---- sentences that change ----------------------------------------------------------------


def test_no_predecessor_changes_the_sentence_rather_than_lying() -> None:
    six = beats(gather(gpu="mi300x"))[5].text
    assert "ridgeline holds no earlier accelerator to set beside an MI300X" in six
    assert "times" not in six


def test_versus_picks_the_comparison() -> None:
    six = beats(gather(gpu="b200", versus="a100-80gb-sxm"))[5].text
    assert "an A100's teraflops" in six and "B200" in six
    declined = beats(gather(versus="none"))[5].text
    assert "most of an H100's 989 teraflops sit idle" in declined and "no earlier" not in declined


def test_a_model_that_does_not_fit_is_a_film_about_tensor_parallelism() -> None:
    f = gather("llama-3.1-70b")
    cues = [b.text for b in beats(f)]
    # 141 GB of bf16 weights; an H100's 80 GiB (85.9 GB) plans 77.3 GB: two hold 70.6 GB each
    # and a 2,500-token conversation
    assert f.tp == 2 and f.tp_chosen
    assert "more than one H100 can serve from its 86 gigabytes" in cues[0]
    assert "over two H100s" in cues[0]
    assert "on each of two H100s" in cues[1] and "on each GPU" in cues[2]


def test_decode_that_turns_compute_bound_is_said_so() -> None:
    slow = replace(
        ridgeline.get_accelerator("h100-sxm"), name="slow-chip", peak_flops={"bf16": 1e12, "fp16": 1e12}
    )
    cues = [b.text for b in beats(gather(gpu=slow))]
    assert "both wait on arithmetic" in cues[0]
    assert "those operations, not the reading, set the pace" in cues[2]
    assert "enough to reach the flat compute roof" in cues[3]
    assert "not with faster arithmetic" not in cues[8]


def test_a_short_context_caps_the_long_prompt() -> None:
    six = beats(gather("gemma-2-9b", "rtx-4090"))[5].text
    assert "an 8,000-token prompt" in six


# ---- spoken numbers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("said", "expected"),
    [
        (spoken_count(3.317e13), "33 trillion"),
        (spoken_count(1.606e10), "16 billion"),
        (spoken_count(2032), "2,000"),
        (spoken_count(1.0003, words=True), "one"),
        (spoken_count(11_846, approx="over"), "over 11,000"),
        (spoken_count(19_480, approx="over"), "over 19,000"),
        (spoken_count(4.2e6), "4.2 million"),
        (spoken_time(0.03354, approx="about"), "about 34 milliseconds"),
        (spoken_time(0.004794), "4.8 milliseconds"),
        (spoken_time(0.791, places=1), "0.8 seconds"),
        (spoken_time(0.74), "0.74 seconds"),
        (spoken_time(1.0), "1 second"),
        (spoken_time(12.34, places=1), "12 seconds"),
        (spoken_rate(208.58, approx="about"), "about 209"),
        (spoken_rate(84.6), "85"),
        (spoken_rate(1994), "1,990"),
        (spoken_rate(4.56), "4.6"),
        (spoken_bytes(1.606e10), "16 gigabytes"),
        (spoken_bytes(2.1446e9), "2.1 gigabytes"),
        (spoken_bytes(1.411e11), "141 gigabytes"),
        (spoken_bytes(9.18e8), "918 megabytes"),
        (spoken_ratio(3.17), "three times"),
        (spoken_ratio(1.642), "1.6 times"),
        (spoken_ratio(2.02), "twice"),
        (spoken_ratio(3.5), "3.5 times"),
        (spoken_ratio(1.01), "the same"),
        (spoken_share(0.343), "a third"),
        (spoken_share(0.0316), "a thirtieth"),
        (spoken_share(0.5), "half"),
        (spoken_share(0.128), "13 percent"),
        (spoken_tokens(16_361), "16,000"),
        (spoken_tokens(2081), "2,000"),
        (spoken_tokens(34), "34"),
        (article("H100"), "an"),
        (article("B200"), "a"),
        (article("MI300X"), "an"),
        (article("8,000"), "an"),
        (article("Llama"), "a"),
    ],
)
def test_numbers_are_spoken_as_a_person_says_them(said: str, expected: str) -> None:
    assert said == expected


def test_without_a_voice_the_seeds_words_take_about_the_seeds_length() -> None:
    """The reading pace is the seed's: its own nine captions last about 2:34."""
    assert paced(seed_cues()).duration_s == pytest.approx(SEED_LENGTH_S, rel=0.03)


# ---- the command --------------------------------------------------------------------------


def test_help_shows_every_option() -> None:
    proc = run_cli("film", "--help", env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    for option in (
        "--model",
        "--gpu",
        "--weights",
        "--tp",
        "--versus",
        "--measured",
        "--endpoint",
        "--out",
        "--no-video",
        "--no-voice",
        "--fps",
        "--size",
        "--json",
    ):
        assert option in proc.stdout, option


def test_words_only_json_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "film"
    assert main(["film", "--no-video", "--no-voice", "--out", str(out), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["out"] == str(out) and summary["voiced"] is False and summary["video"] is None
    assert [c["number"] for c in summary["cues"]] == list(range(1, 10))
    assert summary["cues"][1]["text"] == seed_cues()[1]
    assert sorted(p.name for p in out.iterdir()) == ["captions.vtt", "transcript.md"]
    vtt = (out / "captions.vtt").read_text()
    assert vtt.startswith("WEBVTT\n") and vtt.count(" --> ") == 9
    page = (out / "transcript.md").read_text()
    for title in (
        "0:00 Two waits",
        "Prefill",
        "Decode",
        "The roofline",
        "Batching",
        "Wasted money",
        "Predicted",
        "The cache rides along",
        "Two budgets",
        "## The maths",
        "## The honest caveats",
    ):
        assert title in page, title
    assert "ridge = 989 TFLOP/s / 3.35 TB/s = 295 operations per byte" in page


def test_default_out_is_one_folder_per_deployment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RIDGELINE_FILMS", str(tmp_path))
    assert main(["film", "--no-video", "--no-voice", "--model", "llama-3.1-70b"]) == 0
    assert (tmp_path / "llama-3.1-70b_h100-sxm_bf16_tp2" / "captions.vtt").is_file()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--model", "no-such-model"], "no-such-model"),
        (["--gpu", "h900"], "unknown GPU 'h900'"),
        (["--versus", "h900"], "unknown GPU 'h900'"),
        (["--versus", "h100-sxm"], "--versus 'h100-sxm' is the film's own --gpu"),
        (["--size", "0x0"], "--size width must be a whole number"),
        (["--size", "abc"], "--size must be WIDTHxHEIGHT"),
        (["--size", "321x180"], "even width and height"),
        (["--fps", "0"], "--fps must be a whole number from 1 to 60"),
        (["--fps", "1000"], "--fps must be a whole number from 1 to 60"),
        (["--measured", "/no/such/file.jsonl"], "records file not found"),
        (["--endpoint", "CoreWeave"], "--endpoint names who served --measured"),
        (["--model", "llama-3.1-70b", "--tp", "1"], "does not fit on 1 × h100-sxm"),
        (["--tp", "0"], "--tp"),
    ],
)
def test_bad_input_is_one_clear_line(
    args: list[str], says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["film", "--no-video", "--no-voice", "--out", str(tmp_path / "f"), *args])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert says in err and "\n" not in err and "Traceback" not in err


def test_an_unreadable_measured_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for content in (b"not json\n", b"\x00\xff\xfe binary\n", b'{"prompt_tokens": "many"}\n', b""):
        path = tmp_path / "bad.jsonl"
        path.write_bytes(content)
        assert (
            main(["film", "--no-video", "--no-voice", "--out", str(tmp_path / "f"), "--measured", str(path)])
            == 2
        )
        err = capsys.readouterr().err.strip()
        assert "bad.jsonl" in err and "\n" not in err
    assert main(["film", "--no-video", "--no-voice", "--measured", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


def test_an_out_that_is_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "taken"
    path.write_text("mine")
    assert main(["film", "--no-video", "--no-voice", "--out", str(path)]) == 2
    assert "is a file: give a folder" in capsys.readouterr().err
    assert path.read_text() == "mine"
