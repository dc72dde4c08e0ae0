"""The web lesson's JSON API: the same numbers as the CLI's --json, bad input a 422 with
one line that names it."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

import ridgeline
from ridgeline.points import roofline_points
from ridgeline.web.app import create_app

P8 = 8_030_261_248  # Llama 3.1 8B parameters, counted by hand in test_core.py
# The seed's "What you will learn": its seven sections
SECTIONS = [
    "Two phases",
    "FLOPs per byte",
    "Batching",
    "Fewer bytes per weight",
    "More than one GPU",
    "What users feel",
    "Recap & playground",
]
LESSON_TITLES = [
    "One request, two very different halves",
    "FLOPs per byte",
    "Drill: the decode speed limit",
    "A 20-token prompt",
    "Eight conversations, one read",
    "Sixty-four at once",
    "Break it: batch the long requests",
    "fp8: half the bytes",
    "int4 weights, bf16 maths",
    "Break it: 70B on one GPU",
    "Fitting is not enough",
    "Four GPUs, then eight",
    "Drill: weights per GPU",
    "A 16,000-token prompt",
    "Turning milliseconds into an SLO",
    "Training is the other workload",
    "Cheat sheet",
    "Playground",
]


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(allowed_hosts={"testserver"}))  # TestClient's Host header


def as_json(data: object) -> object:
    """What a dict looks like after a trip through JSON."""
    return json.loads(json.dumps(data))


def test_estimate_defaults_are_the_lesson_stage(client: TestClient) -> None:
    """55.9 ms until the first token appears; 6.1 ms each; 3.11 s; 98% decode."""
    r = client.get("/api/estimate")
    assert r.status_code == 200
    data = r.json()
    assert data["ttft_s"] == pytest.approx(0.0559, abs=5e-5)
    assert data["tpot_s"] == pytest.approx(0.0061, abs=5e-5)
    assert data["total_s"] == pytest.approx(3.11, abs=5e-3)
    assert data["decode_share"] == pytest.approx(0.98, abs=5e-3)
    assert data == as_json(ridgeline.estimate().to_dict())


@pytest.mark.parametrize(
    "params",
    [
        {"gpu": "a100-80gb-sxm", "weights": "fp8", "batch": 8},
        {"model": "llama-3.1-70b", "tp": 4, "weights": "int4", "prompt": 16000, "output": 100},
        {"preset": "ideal", "prompt": 20, "output": 1, "gpu": "mi300x"},
    ],
)
def test_estimate_is_ridgeline_estimate_json(client: TestClient, params: dict) -> None:
    r = client.get("/api/estimate", params=params)
    assert r.status_code == 200
    assert r.json() == as_json(ridgeline.estimate(**params).to_dict())


def test_playground_adds_the_chart(client: TestClient) -> None:
    data = client.get("/api/playground").json()
    assert data["estimate"] == as_json(ridgeline.estimate().to_dict())
    chart = data["roofline"]
    assert chart["ridge"] == pytest.approx(989e12 / 3.35e12)
    assert chart["effective_ridge"] == pytest.approx(0.6 * 989e12 / (0.8 * 3.35e12))
    assert chart["prefill"]["bound"] == "compute" and chart["decode"]["bound"] == "memory"
    # the roof at 100%: the slope is bandwidth x intensity, the flat part the peak
    (i0, y0), (ridge, peak), (_, y2) = chart["roof"]
    assert y0 == pytest.approx(3.35e12 * i0)
    assert peak == pytest.approx(989e12) and y2 == pytest.approx(989e12)
    assert ridge == pytest.approx(chart["ridge"])
    # the decode speed limit: 16.06 GB of weights at 80% of 3.35 TB/s, about 6 ms
    assert chart["decode_floor_s"] == pytest.approx(2 * P8 / (0.8 * 3.35e12), rel=1e-4)
    # causal attention is about a thirtieth of a 2,000-token prefill
    assert chart["prefill_attention_share"] == pytest.approx(1 / 30, abs=0.004)


def test_playground_a100_ridge_is_153(client: TestClient) -> None:
    chart = client.get("/api/playground", params={"gpu": "a100-80gb-sxm"}).json()["roofline"]
    assert chart["ridge"] == pytest.approx(153, abs=0.5)


def test_roofline_is_ridgeline_roofline_json(client: TestClient) -> None:
    params = {"gpu": "rtx-4090", "prompt": 300, "batch": 16, "context": 1000}
    r = client.get("/api/roofline", params=params)
    assert r.status_code == 200
    assert r.json() == as_json(roofline_points(**params).to_dict())
    assert r.json()["ridge"] == pytest.approx(164, abs=0.5)


def test_gpus_and_models(client: TestClient) -> None:
    gpus = client.get("/api/gpus").json()
    assert gpus["h100-sxm"]["ridge"] == pytest.approx(295, abs=0.5)
    assert {"h100-sxm", "a100-80gb-sxm", "rtx-4090", "h200", "b200", "mi300x"} <= set(gpus)
    models = client.get("/api/models").json()
    by_name = {m["name"]: m for m in models}
    assert by_name["llama-3.1-8b"]["parameters"] == P8
    assert by_name["llama-3.1-8b"]["kv_bytes_per_token"] == 131072  # 128 KiB a token


def test_lesson_has_the_eighteen_steps_in_order(client: TestClient) -> None:
    lesson = client.get("/api/lesson").json()
    steps = lesson["steps"]
    assert [s["title"] for s in steps] == LESSON_TITLES
    assert [s["n"] for s in steps if s["drill"]] == [3, 13]
    assert [s["title"] for s in lesson["sections"]] == SECTIONS
    assert [n for s in lesson["sections"] for n in s["steps"]] == list(range(1, 19))
    assert all(s["takeaway_html"] and "{{" not in s["takeaway_html"] for s in steps)


def test_the_simulator_shows_p50_and_p99_against_the_slo_and_the_batching_trade(client: TestClient) -> None:
    """Interactive SLOs are TTFT and TPOT at p99; offline work is tokens per second per GPU;
    batching trades the second for the first."""
    table = client.get("/api/slo", params={"batch": 32}).json()
    assert table["precomputed"] is False
    assert table["slo"] == {"ttft_p99_s": 0.5, "tpot_p99_s": 0.05}
    rows = table["rows"]
    assert len(rows) >= 4
    for row in rows:
        assert row["ttft_p50_s"] <= row["ttft_p99_s"] and row["tpot_p50_s"] <= row["tpot_p99_s"]
    # more arrivals, bigger batches: more tokens a second per GPU, longer p99s
    for key in ("mean_batch", "tokens_per_s_per_gpu", "tpot_p99_s"):
        values = [row[key] for row in rows]
        assert values == sorted(values), key
    assert rows[0]["met"] and not rows[-1]["met"]  # until the SLO breaks
    # the batch does not change the table: the simulator forms its own batches
    assert client.get("/api/slo", params={"batch": 1}).json()["rows"] == rows


def test_playground_places_a_training_step_and_counts_prefill_chunks(client: TestClient) -> None:
    chart = client.get("/api/playground", params={"batch": 8}).json()["roofline"]
    training = chart["training"]
    # 6·P FLOPs a token over 16 bytes a parameter: 6/16 of the tokens in a step
    assert training["intensity"] == pytest.approx(6 / 16 * training["tokens"], rel=1e-9)
    assert training["bound"] == "compute" and training["intensity"] > chart["effective_ridge"]
    assert chart["prefill"]["tokens"] == 16_000
    assert chart["prefill_chunks"] == 2 and chart["prefill_chunk_tokens"] == 8192
    assert chart["decode"]["context"] == 2000 and chart["decode"]["context_last"] == 2499


@pytest.mark.parametrize("n", range(1, 19))
def test_every_step_renders_with_the_cores_numbers(client: TestClient, n: int) -> None:
    step = client.get(f"/api/lesson/{n}").json()
    assert step["title"] == LESSON_TITLES[n - 1]
    assert "{{" not in step["html"] and "}}" not in step["html"]
    assert set(step["state"]) >= {"model", "gpu", "weights", "prompt", "output", "batch", "tp", "preset"}


def test_step_one_states_the_lesson_numbers(client: TestClient) -> None:
    html = client.get("/api/lesson/1").json()["html"]
    for text in ("55.9 ms", "6.1 ms", "3.11 s", "98%"):
        assert text in html


def test_step_seven_sets_a_batch_of_long_requests(client: TestClient) -> None:
    step = client.get("/api/lesson/7").json()
    assert step["state"]["batch"] == 64 and step["state"]["prompt"] == 8000
    assert "does not fit" in step["html"]


def test_drill_decode_speed_limit(client: TestClient) -> None:
    """At 80% of the bandwidth, 4.8 ms becomes about 6 ms."""
    right = client.get("/api/lesson/3/check", params={"answer": 6}).json()
    assert right["correct"] is True
    assert right["expected"] == pytest.approx(2 * P8 / (0.8 * 3.35e12) * 1e3, rel=1e-4)
    wrong = client.get("/api/lesson/3/check", params={"answer": 4.8}).json()
    assert wrong["correct"] is False
    assert "5.99 ms" in wrong["working_html"] and "16.06 GB" in wrong["working_html"]


def test_drill_weights_per_gpu(client: TestClient) -> None:
    """70B in bf16 at TP 8: 70.55e9 x 2 B / 8 = 17.6 GB per GPU."""
    assert client.get("/api/lesson/13/check", params={"answer": 17.64}).json()["correct"] is True
    wrong = client.get("/api/lesson/13/check", params={"answer": 35.3}).json()
    assert wrong["correct"] is False and "17.6 GB" in wrong["working_html"]


@pytest.mark.parametrize(
    "path, params, fragment",
    [
        ("/api/estimate", {"batch": 0}, "batch"),
        ("/api/estimate", {"batch": 5000}, "batch"),
        ("/api/estimate", {"prompt": -1}, "prompt"),
        ("/api/estimate", {"prompt": "many"}, "prompt"),
        ("/api/estimate", {"prompt": 2_000_000}, "prompt"),
        ("/api/estimate", {"output": 0}, "output"),
        ("/api/estimate", {"tp": 65}, "tp"),
        ("/api/estimate", {"tp": 3}, "--tp 3"),
        ("/api/estimate", {"gpu": "h999"}, "unknown GPU 'h999'"),
        ("/api/estimate", {"model": "../../etc/passwd"}, "model"),
        ("/api/estimate", {"model": "meta-llama/Llama-3.1-8B"}, "model"),
        ("/api/estimate", {"model": "tests.gguf"}, "unknown model"),
        ("/api/estimate", {"weights": "int3"}, "unknown weight dtype 'int3'"),
        ("/api/estimate", {"preset": "fast"}, "unknown preset 'fast'"),
        ("/api/estimate", {"prompt": 130_000, "output": 5000}, "exceeds llama-3.1-8b's context"),
        ("/api/playground", {"batch": 4097}, "batch"),
        ("/api/roofline", {"context": -5}, "context"),
        ("/api/lesson/99", {}, "step 99 does not exist"),
        ("/api/lesson/1/check", {"answer": 6}, "step 1 has no drill"),
        ("/api/lesson/3/check", {"answer": "six"}, "answer"),
        ("/api/lesson/3/check", {"answer": "nan"}, "answer"),
        ("/api/lesson/3/check", {}, "answer"),
    ],
)
def test_bad_input_is_a_422_with_one_line(client: TestClient, path: str, params: dict, fragment: str) -> None:
    r = client.get(path, params=params)
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert isinstance(detail, str) and "\n" not in detail
    assert fragment in detail


def test_page_and_assets_are_served_with_a_strict_policy(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and 'id="roofline"' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    for asset in ("/static/style.css", "/static/js/main.js", "/static/js/chart.js"):
        assert client.get(asset).status_code == 200
    assert "http" not in page.text.replace("http-equiv", "")  # no CDN: everything is local
