"""The playground's engine menu: an engine profile's rates instead of the lesson's plain
roofline, chosen by name, passed through the state to the core, its band shown when the
profile has one. No engine ("none") is the lesson as it was.

The profile here is the lesson's roofline plus 2 ms a step: the preset's 60% and 80% for
every term, no small-matmul penalty, and a fixed cost of 2 ms on every pass. Like every
engine its 60% is of what a large matmul sustains on the H100 (0.8033 of the data sheet's
989 TFLOP/s, the catalogue's measured share), not of the data sheet itself, and it runs
what an engine runs: it looks the input embedding up (Llama 3.1 8B's untied 128,256 x
4,096 table, not streamed each step) and runs the lm_head on the sampled token only. So by
arithmetic alone its TPOT (memory-bound) is the lesson's, less that table's reads, plus
2 ms; its TTFT (compute-bound) the lesson's FLOPs less that work, at the lower rate, plus
2 ms; and its band is its own times the profile's band.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from playwright.sync_api import Browser, Page, expect

import ridgeline
from conftest import wait_for_http
from ridgeline.deployment import Deployment
from ridgeline.engines import engines
from ridgeline.predict import estimate_on
from ridgeline.web.app import create_app
from test_web_e2e import ARTIFACTS, free_port

NAME = "web-test-overhead"
LABEL = "Roofline + 2 ms"
OVERHEAD_S = 0.002
H100_FLOPS = 989e12  # dense bf16, NVIDIA's data sheet
H100_MATMUL_SHARE = 0.8033  # 794.5 of those sustained (the catalogue's, from the MAMF table)
PREFILL_BAND = (0.9, 1.2)
DECODE_BAND = (0.8, 1.25)
LOAD_BAND = (0.75, 1.5)
PROFILE = f"""
[{NAME}]
label = "{LABEL}"
source = "tests/test_web_engines.py"
compute = {{ gemm = {{ bf16 = 0.6, fp8 = 0.6 }}, half_m_tokens = 0.0, attention = 0.6 }}
memory = {{ weights = {{ w16 = 0.8, w8 = 0.8, w4 = 0.8 }}, kv = 0.8 }}
overhead = {{ fixed_s = {OVERHEAD_S} }}
vendor = {{ nvidia = 1.0 }}
uncertainty = {{ prefill = {list(PREFILL_BAND)}, decode = {list(DECODE_BAND)}, load = {list(LOAD_BAND)} }}
"""
# The lesson's stage (golden: 55.9 ms to the first token, 6.1 ms a token)
STAGE_TTFT_S = 0.0559
STAGE_TPOT_S = 0.0061
EMBEDDING = 128_256 * 4_096  # Llama 3.1 8B's input table (config.json)
PROMPT = 2000  # the stage's prompt


@pytest.fixture(scope="module")
def profile_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("engines") / "engines.toml"
    path.write_text(PROFILE, encoding="utf-8")
    return path


@pytest.fixture
def client(profile_file: Path, monkeypatch: pytest.MonkeyPatch) -> TestClient:
    monkeypatch.setenv("RIDGELINE_ENGINES", str(profile_file))
    return TestClient(create_app(allowed_hosts={"testserver"}))


def test_no_engine_is_the_lesson_as_it_was(client: TestClient) -> None:
    plain = client.get("/api/playground").json()
    named = client.get("/api/playground", params={"engine": "none"}).json()
    assert plain == named
    assert plain["estimate"]["ttft_s"] == pytest.approx(STAGE_TTFT_S, abs=5e-5)
    assert plain["estimate"]["tpot_s"] == pytest.approx(STAGE_TPOT_S, abs=5e-5)
    assert plain["estimate"]["uncertainty"] is None
    assert plain["roofline"]["engine"] is None
    assert (plain["roofline"]["compute_eff"], plain["roofline"]["bandwidth_eff"]) == (0.6, 0.8)


def test_an_engines_overhead_makes_every_step_slower_by_it(client: TestClient) -> None:
    """The profile is the lesson's roofline plus 2 ms a pass, its arithmetic at the achievable
    matmul rate: TTFT and TPOT gain 2 ms, less the work an engine does not run."""
    plain = client.get("/api/estimate").json()
    r = client.get("/api/estimate", params={"engine": NAME})
    assert r.status_code == 200
    e = r.json()
    table_s = EMBEDDING * 2 / (0.8 * 3.35e12)  # bf16, at the profile's 80% of H100 SXM bandwidth
    unrun = 2 * EMBEDDING * PROMPT + 2 * EMBEDDING * (PROMPT - 1)  # the lookup; 1,999 lm_head rows
    run = plain["ttft_s"] * 0.6 * H100_FLOPS - unrun  # the lesson's prefill FLOPs, less those
    assert e["tpot_s"] == pytest.approx(plain["tpot_s"] - table_s + OVERHEAD_S, rel=1e-9)
    assert e["ttft_s"] == pytest.approx(run / (0.6 * H100_FLOPS * H100_MATMUL_SHARE) + OVERHEAD_S, rel=1e-9)
    assert e["tpot_s"] == pytest.approx(STAGE_TPOT_S - table_s + OVERHEAD_S, abs=5e-5)


def test_the_band_is_the_profiles_own(client: TestClient) -> None:
    data = client.get("/api/playground", params={"engine": NAME}).json()
    e, chart = data["estimate"], data["roofline"]
    assert e["uncertainty"]["tpot_s"] == pytest.approx([e["tpot_s"] * x for x in DECODE_BAND])
    assert e["uncertainty"]["ttft_s"] == pytest.approx([e["ttft_s"] * x for x in PREFILL_BAND])
    assert chart["engine"] == {"name": NAME, "label": LABEL, "band": True}
    # its dashed roof: 60% of the achievable matmul rate, 80% of the bandwidth
    compute = 0.6 * H100_MATMUL_SHARE
    assert chart["compute_eff"] == pytest.approx(compute) and chart["bandwidth_eff"] == pytest.approx(0.8)
    assert chart["effective_ridge"] == pytest.approx(compute * H100_FLOPS / (0.8 * 3.35e12))


def test_the_simulators_table_is_priced_by_the_engine(client: TestClient) -> None:
    """Step 15's table, with the profile that adds 2 ms to every pass, and the table names
    the engine. Under light load a step is mostly decodes, so the p50 TPOT is slower by about
    the 2 ms (less the embedding table an engine does not stream); near saturation prefill
    chunks fill the steps, and an engine runs their lm_head on one token a prompt, not on
    every one as the lesson's ledger does, so the engine's table differs both ways."""
    plain = client.get("/api/slo").json()
    priced = client.get("/api/slo", params={"engine": NAME}).json()
    assert plain["deployment"]["engine"] is None and priced["deployment"]["engine"] == LABEL
    light = 8.0  # requests/s: well below where the stage's replica saturates
    for a, b in zip(plain["rows"], priced["rows"], strict=True):
        assert b["tpot_p50_s"] != pytest.approx(a["tpot_p50_s"], rel=1e-3), a["rate_per_s"]
        if a["rate_per_s"] <= light:
            assert b["tpot_p50_s"] > a["tpot_p50_s"] + 0.5 * OVERHEAD_S, a["rate_per_s"]


def test_the_simulators_table_carries_the_load_band(client: TestClient) -> None:
    """With an engine, each row's p50s carry the profile's band under load: the arrivals run
    again with the engine as slow as each end of it. At the lightest rate that is about the
    p50 times each end (the queue barely grows); at the heaviest, where the replica nears
    its capacity, an engine 1.5x as slow is past it, and its queue magnifies the TTFT far
    beyond 1.5x. Without an engine, no band."""
    plain = client.get("/api/slo").json()
    priced = client.get("/api/slo", params={"engine": NAME}).json()
    assert plain["band"] is None and priced["band"] == list(LOAD_BAND)
    lo, hi = LOAD_BAND
    for a, b in zip(plain["rows"], priced["rows"], strict=True):
        assert a["ttft_p50_band_s"] is None and a["tpot_p50_band_s"] is None
        for key in ("ttft", "tpot"):
            low, high = b[f"{key}_p50_band_s"]
            assert low < b[f"{key}_p50_s"] < high
    light, heavy = priced["rows"][0], priced["rows"][-1]
    for key in ("ttft", "tpot"):
        p50 = light[f"{key}_p50_s"]
        assert light[f"{key}_p50_band_s"] == pytest.approx([lo * p50, hi * p50], rel=0.05)
    assert heavy["ttft_p50_band_s"][1] > 3 * hi * heavy["ttft_p50_s"]


@pytest.mark.parametrize("name", sorted(engines()))
def test_every_packaged_engine_reaches_the_core(client: TestClient, name: str) -> None:
    """The menu's profiles: the API's estimate is the core's with that engine, and differs
    from the plain roofline's."""
    e = client.get("/api/estimate", params={"engine": name, "batch": 8}).json()
    core = estimate_on(Deployment.build(engine=name), prompt=2000, output=500, batch=8).to_dict()
    assert e == json.loads(json.dumps(core))
    assert e["tpot_s"] != pytest.approx(ridgeline.estimate(batch=8).tpot_s, rel=1e-6)


def test_in_process_is_estimates_in_process(client: TestClient) -> None:
    """`in_process=true` is `estimate --in-process`: vLLM's TTFT less its server's
    first-token cost (the prefill alone), its TPOT the same; without an engine nothing moves."""
    served = client.get("/api/estimate", params={"engine": "vllm"}).json()
    inside = client.get("/api/estimate", params={"engine": "vllm", "in_process": "true"}).json()
    core = estimate_on(Deployment.build(engine="vllm", in_process=True), prompt=2000, output=500, batch=1)
    assert inside == json.loads(json.dumps(core.to_dict())) and inside["inputs"]["in_process"] is True
    first_token_s = engines()["vllm"].first_token_s
    assert inside["ttft_s"] == pytest.approx(served["ttft_s"] - first_token_s, rel=1e-12)
    assert inside["tpot_s"] == served["tpot_s"]
    plain = client.get("/api/estimate", params={"in_process": "1"}).json()
    assert plain["ttft_s"] == pytest.approx(STAGE_TTFT_S, abs=5e-5)


def test_the_menu_is_ridgeline_engines_json(client: TestClient) -> None:
    from ridgeline.describe import describe_engines

    menu = client.get("/api/engines").json()
    assert menu == json.loads(json.dumps(describe_engines()))
    assert menu[NAME]["label"] == LABEL and {"vllm", "sglang"} <= set(menu)


@pytest.mark.parametrize("endpoint", ["/api/estimate", "/api/playground", "/api/slo"])
def test_an_unknown_engine_is_a_422_that_names_it(client: TestClient, endpoint: str) -> None:
    r = client.get(endpoint, params={"engine": "vllmm"})
    assert r.status_code == 422
    detail = r.json()["detail"]
    assert detail.startswith("unknown engine 'vllmm'") and "vllm" in detail and "ridgeline engines" in detail


def test_an_engine_is_a_name_never_a_file(
    client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's --engine takes FILE.toml; a query string names a profile and nothing else."""
    (tmp_path / "mine.toml").write_text(PROFILE.replace(NAME, "mine"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for value in ("mine.toml", str(tmp_path / "mine.toml"), "../mine.toml"):
        r = client.get("/api/estimate", params={"engine": value})
        assert r.status_code == 422, value
        assert "\n" not in r.json()["detail"]


# --- in the browser ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def engine_server(profile_file: Path) -> Iterator[str]:
    """`ridgeline web` with the test profile among the user's engines."""
    port = free_port()
    env = {**os.environ, "RIDGELINE_ENGINES": str(profile_file)}
    server = subprocess.Popen(
        [sys.executable, "-m", "ridgeline", "web", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_for_http(url + "api/lesson", "ridgeline web")
        yield url
    finally:
        server.terminate()
        server.wait(timeout=10)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


@pytest.mark.parametrize("width", [1400, 390])
def test_the_engine_menu_in_the_page(browser: Browser, engine_server: str, width: int) -> None:
    context = browser.new_context(viewport={"width": width, "height": 900}, base_url=engine_server)
    page: Page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto("/#step-18")
    expect(page.locator("body")).to_have_attribute("data-step", "18")
    engine = page.locator("#engine")
    expect(engine).to_have_value("none")
    expect(engine.locator(f"option[value='{NAME}']")).to_have_text(LABEL)
    expect(page.locator("#tpot")).to_have_text("6.1 ms")
    expect(page.locator("#tpot-band")).to_be_hidden()

    engine.select_option(NAME)
    mine = ridgeline.estimate().tpot_s - EMBEDDING * 2 / (0.8 * 3.35e12) + OVERHEAD_S  # as above
    expect(page.locator("#tpot")).to_have_text(ms(mine))
    lo, hi = (mine * x * 1e3 for x in DECODE_BAND)
    expect(page.locator("#tpot-band")).to_have_text(f"80% band: {lo:.3g}–{hi:.3g} ms")
    expect(page.locator("#ttft-band")).to_be_visible()
    expect(page.locator("#preset")).to_be_disabled()  # the profile sets the rates
    expect(page.locator("#chart-caption")).to_contain_text(f"{LABEL}'s profile")
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"engine-menu-{width}px.png"), full_page=True)

    engine.select_option("vllm")  # a packaged profile: its band when its corpus gave it one
    vllm = estimate_on(Deployment.build(engine="vllm"), prompt=2000, output=500, batch=1)
    expect(page.locator("#tpot")).to_have_text(ms(vllm.tpot_s))
    if vllm.uncertainty:
        lo, hi = (x * 1e3 for x in vllm.uncertainty["tpot_s"])
        expect(page.locator("#tpot-band")).to_have_text(f"80% band: {lo:.3g}–{hi:.3g} ms")
    else:
        expect(page.locator("#tpot-band")).to_be_hidden()

    in_process = page.locator("#in_process")
    expect(in_process).to_be_enabled()
    served = ms(estimate_on(Deployment.build(engine="vllm"), prompt=2000, output=500).ttft_s)
    expect(page.locator("#ttft")).to_have_text(served)
    in_process.check()  # no server before the first token: the prefill alone
    inside = estimate_on(Deployment.build(engine="vllm", in_process=True), prompt=2000, output=500)
    expect(page.locator("#ttft")).to_have_text(ms(inside.ttft_s))
    expect(page.locator("#tpot")).to_have_text(ms(vllm.tpot_s))

    page.keyboard.press("Escape")
    page.locator("#prev").click()  # a step sets its whole state: no engine again
    expect(page.locator("body")).to_have_attribute("data-step", "17")
    expect(engine).to_have_value("none")
    expect(page.locator("#preset")).to_be_enabled()
    expect(in_process).to_be_disabled()  # no engine, no server to leave out
    expect(in_process).not_to_be_checked()
    expect(page.locator("#tpot")).to_have_text("6.1 ms")
    context.close()
    assert errors == []


def test_the_simulators_table_shows_the_band_in_the_page(browser: Browser, engine_server: str) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=engine_server)
    page: Page = context.new_page()
    page.goto("/#step-15")
    expect(page.locator("body")).to_have_attribute("data-step", "15")
    expect(page.locator("#slo-rows tr").first).to_be_visible()
    expect(page.locator("#slo-rows small.band")).to_have_count(0)
    page.locator("#engine").select_option(NAME)
    took = f"{LOAD_BAND[0]:.3g}–{LOAD_BAND[1]:.3g}×"
    expect(page.locator("#slo-caption")).to_contain_text(
        f"Published runs under load took {took} the time {LABEL}'s profile predicts"
    )
    lo, hi = client_rows(engine_server)[0]["ttft_p50_band_s"]  # type: ignore[misc]
    band = page.locator("#slo-rows tr").first.locator("small.band").first
    expect(band).to_have_text(f"p50 {ms(lo)}–{ms(hi)}")
    context.close()


def client_rows(url: str) -> list[dict[str, object]]:
    import httpx

    return httpx.get(url + "api/slo", params={"engine": NAME}, timeout=60).json()["rows"]  # type: ignore[no-any-return]


def test_a_step_the_host_bounds_says_so(client: TestClient) -> None:
    """On a GB200 with TensorRT-LLM's profile, 2,048 decoding sequences wait on the Grace
    host's work (2,048 x 10.68 us x 2.75 = 60.15 ms), which the playground's bound cell
    reads; the lesson's H100 stage has no host term at all."""
    query = {"model": "qwen3-30b-a3b", "gpu": "gb200", "weights": "fp4", "maths": "fp4"}
    query |= {"kv_dtype": "fp8", "engine": "trtllm", "batch": 2048, "prompt": 128, "output": 64}
    decode = client.get("/api/estimate", params=query).json()["decode"]
    assert decode["host_bound"] is True
    assert decode["time_s"] == decode["host_s"] == pytest.approx(2048 * 10.68e-6 * 2.75, rel=1e-3)
    plain = client.get("/api/estimate").json()["decode"]
    assert plain["host_bound"] is False and plain["host_s"] == 0.0


def test_the_apis_maths_is_estimates_without_maths_unless_given(client: TestClient) -> None:
    """`/api/estimate` without `maths` is `estimate` without `--maths`: llama.cpp's quantised
    weights on an RTX 4090 run its int8 MMQ path; the page's maths control, sent, still wins."""
    query = {"model": "llama-2-7b", "gpu": "rtx-4090", "weights": "int4", "engine": "llamacpp"}
    auto = client.get("/api/estimate", params=query).json()
    cli = ridgeline.estimate("llama-2-7b", "rtx-4090", weights="int4", engine="llamacpp").to_dict()
    assert auto["inputs"]["maths"] == "int8" and auto == json.loads(json.dumps(cli))
    chosen = client.get("/api/estimate", params=query | {"maths": "bf16"}).json()
    assert chosen["inputs"]["maths"] == "bf16" and chosen["ttft_s"] > 2 * auto["ttft_s"]


def test_the_pages_auto_maths_is_the_engines_own(browser: Browser, engine_server: str) -> None:
    """In the playground, maths `auto` is `estimate` without --maths: vLLM's fp8 weights on
    an H100 run W8A8, so the prefill is the fp8 one; the bf16 pill prices them weight-only."""
    context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=engine_server)
    page: Page = context.new_page()
    page.goto("/#step-18")
    expect(page.locator("body")).to_have_attribute("data-step", "18")
    page.locator("#engine").select_option("vllm")
    page.locator("#weight-pills label", has_text="fp8").click()
    page.locator("#maths-pills label", has_text="auto").click()
    auto = estimate_on(Deployment.build(weights="fp8", engine="vllm"), prompt=2000, output=500, batch=1)
    expect(page.locator("#ttft")).to_have_text(ms(auto.ttft_s))
    page.locator("#maths-pills label", has_text="bf16").click()
    bf16 = estimate_on(Deployment.build(weights="fp8", maths="bf16", engine="vllm"), prompt=2000, output=500)
    expect(page.locator("#ttft")).to_have_text(ms(bf16.ttft_s))
    assert bf16.ttft_s > 1.5 * auto.ttft_s  # the fp8 peak is twice bf16's on an H100
    context.close()
