"""The web face under bad input and hostile pages.

"Every API endpoint, on any bad query value, answers a 4xx with one line; a 200 is strict
JSON; no request runs away." Checked over every endpoint and parameter with a seeded
generator of bad values: NaN, infinities, negatives, 1e400, integers of thousands of
digits, words, unknown names, over-long strings and control characters.

"The server answers only to the address it serves": DNS rebinding gets a 400.
"The page loads nothing from elsewhere": no CDN, so no Swagger UI.
"""

from __future__ import annotations

import random
import re
import time
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient

from ridgeline._files import loads_json
from ridgeline.web import hosts
from ridgeline.web.app import StrictJSONResponse, create_app

SEED = 20240601
RANDOM_CASES_PER_ENDPOINT = 60
HANG_S = 10.0  # a guard against a request that never ends, not a speed test (see benchmarks/)
MAX_DETAIL = 600

NAMES = ("model", "gpu", "weights", "preset", "maths", "engine")
STATE_INTS = ("prompt", "output", "batch", "tp")
# each endpoint: its query parameters, by kind
STATE = {**dict.fromkeys(NAMES, "name"), **dict.fromkeys(STATE_INTS, "int"), "in_process": "switch"}
ENDPOINTS: dict[str, dict[str, str]] = {
    "/api/estimate": STATE,
    "/api/playground": STATE,
    "/api/slo": STATE,
    "/api/roofline": {
        **dict.fromkeys(("model", "gpu", "preset", "maths"), "name"),
        **dict.fromkeys(("prompt", "batch"), "int"),
        "context": "int0",
    },
    "/api/lesson/{n}": {"n": "step"},
    "/api/lesson/{n}/check": {"n": "drill", "answer": "number"},
    "/api/gpus": {},
    "/api/models": {},
    "/api/lesson": {},
}
VALID = {"n": "3", "answer": "6"}  # the others have defaults

HUGE = "9" * 5000
CONTROL = "\x00\x01\x07\x08\t\n\r\x1b\x7f\u2028"
# values that no parameter of a kind accepts: each must be a 4xx
BAD: dict[str, list[str]] = {
    "int": [
        "nan",
        "inf",
        "-inf",
        "-1",
        "0",
        "1e400",
        "1e3",
        "1.5",
        HUGE,
        "-" + HUGE,
        "ten",
        "",
        " ",
        "\x00",
        "1\n",
        "a" * 5000,
        "0x10",
        "true",
        "[]",
        "4097000",
    ],
    "name": [
        "nan",
        "-1",
        "",
        " ",
        "../../etc/passwd",
        "/etc/passwd",
        "http://evil.example/x",
        "h999",
        "int3",
        "no-such-name",
        "a" * 5000,
        "llama-3.1-8b\n",
        "h100-sxm\r\nX-Evil: 1",
        "\x00",
        "💥",
        "é",
        "%00",
        "${jndi}",
        "<script>",
    ],
    "number": [
        "nan",
        "NaN",
        "inf",
        "-inf",
        "Infinity",
        "1e400",
        "-1e400",
        "9" * 400,
        "six",
        "",
        "a" * 5000,
        "\x00",
        "6\n",
        "0x6",
        "[6]",
    ],
    "step": ["0", "-1", "19", "99", HUGE, "nan", "x", "1.5", "\x00", "1e3", "a" * 5000],
}
BAD["switch"] = ["maybe", "2", "-1", "nan", "", " ", "\x00", "tru", "truee", "💥", HUGE, "[true]"]
BAD["int0"] = [v for v in BAD["int"] if v != "0"]
BAD["drill"] = [*BAD["step"], "1", "2"]  # steps 1 and 2 have no drill
# values a parameter of the kind may accept (or refuse): mixed in at random
ODD: dict[str, list[str]] = {
    "int": ["1", "2", "3", "8", "64", "4096", "1000000", "0"],
    "name": [
        "llama-3.1-70b",
        "deepseek-v3",
        "mixtral-8x7b",
        "b200",
        "rtx-4090",
        "mi300x",
        "fp8",
        "int4",
        "int4-g128",
        "fp16",
        "ideal",
        "LLAMA-3.1-8B",
        "H100-SXM",
        "vllm",
        "trtllm",
        "none",
    ],
    "number": ["-1", "0", "1e308", "-1e308", "5e-324", "6", "17.64", "1_000", " 6 "],
    "step": [str(n) for n in range(1, 19)],
}
ODD["switch"] = ["true", "false", "1", "0", "TRUE", "off", "on", "yes", "no"]
ODD["int0"] = ODD["int"]
ODD["drill"] = ["3", "13", *ODD["step"][:4]]


def junk(rng: random.Random) -> str:
    """A random string: digits, signs, letters, control characters, far Unicode."""
    alphabet = "0123456789.-+eE_ nainfNAIF" + CONTROL + "/%&=?#\\\"'<>" + "é€💥\ufffd"
    return "".join(rng.choice(alphabet) for _ in range(rng.choice((1, 3, 8, 40, 300))))


def some_value(rng: random.Random, kind: str) -> str:
    pick = rng.random()
    if pick < 0.45:
        return rng.choice(BAD[kind])
    if pick < 0.75:
        return rng.choice(ODD[kind])
    if pick < 0.9:
        return junk(rng)
    return rng.choice([str(rng.randint(-(10**30), 10**30)), repr(rng.uniform(-1e300, 1e300)), "9" * 400])


def url_of(path: str, values: dict[str, str]) -> tuple[str, dict[str, str]]:
    if "{n}" in path:
        path = path.replace("{n}", quote(values.get("n", VALID["n"]), safe=""))
    return path, {k: v for k, v in values.items() if k != "n"}


def assert_well_behaved(client: TestClient, path: str, values: dict[str, str]) -> httpx.Response:
    url, params = url_of(path, values)
    start = time.perf_counter()
    r = client.get(url, params=params)
    took_s = time.perf_counter() - start
    where = f"{path} {values!r}"
    assert took_s < HANG_S, where
    assert r.status_code < 500, f"{where}: {r.status_code} {r.text[:300]}"
    assert r.headers["content-type"].startswith("application/json"), where
    body = loads_json(r.content)  # strict: NaN and Infinity refused
    if r.status_code >= 400:
        detail = body["detail"]
        assert isinstance(detail, str) and detail, where
        assert detail.isprintable() and len(detail) <= MAX_DETAIL, f"{where}: {detail!r}"
    return r


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(allowed_hosts={"testserver"}), raise_server_exceptions=False)


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_every_bad_value_of_every_parameter_is_a_4xx_with_one_line(client: TestClient, path: str) -> None:
    for name, kind in ENDPOINTS[path].items():
        for value in BAD[kind]:
            values = {**VALID, name: value}
            r = assert_well_behaved(client, path, values)
            assert 400 <= r.status_code < 500, f"{path} {name}={value!r}: {r.status_code} {r.text[:200]}"
    # parameters an endpoint does not take are ignored, whatever they hold
    assert assert_well_behaved(client, path, {**VALID, "x": "\x00" * 100, "nan": "inf"}).status_code < 400


@pytest.mark.parametrize("path", list(ENDPOINTS))
def test_random_mixtures_of_bad_and_odd_values_never_break_the_server(client: TestClient, path: str) -> None:
    rng = random.Random(f"{SEED}{path}")
    names = list(ENDPOINTS[path])
    for _ in range(RANDOM_CASES_PER_ENDPOINT if names else 3):
        values = dict(VALID)
        for name in rng.sample(names, rng.randint(1, len(names))) if names else ():
            values[name] = some_value(rng, ENDPOINTS[path][name])
        assert_well_behaved(client, path, values)


def test_the_largest_valid_requests_finish(client: TestClient) -> None:
    """The caps: a million-token prompt, a batch of 4,096, 64 GPUs; each answers or says why not."""
    big = [
        {"model": "deepseek-v3", "gpu": "h100-sxm", "batch": "4096", "prompt": "100000", "tp": "8"},
        {"model": "llama-3.1-8b", "batch": "4096", "prompt": "1", "output": "1000000"},
        {"model": "llama-3.1-70b", "batch": "4096", "prompt": "120000", "output": "8000", "tp": "64"},
        {"model": "mixtral-8x7b", "weights": "int4", "batch": "4096", "tp": "8"},
    ]
    for values in big:
        for path in ("/api/estimate", "/api/playground"):
            assert_well_behaved(client, path, values)
    assert_well_behaved(client, "/api/roofline", {"batch": "4096", "prompt": "1000000", "context": "1000000"})


def test_raw_query_strings_that_are_not_utf8_or_not_percent_encoded(client: TestClient) -> None:
    for raw in ("model=%ff", "model=%zz", "prompt=%", "prompt=1&prompt=x", "gpu=%c0%af", "=&&==", "tp=%2B1"):
        r = client.get(f"/api/estimate?{raw}")
        assert r.status_code < 500 and "\n" not in r.json().get("detail", "")


def test_bodies_are_strict_json() -> None:
    """A NaN is a bug that fails at the server, never a body JSON.parse refuses."""
    assert StrictJSONResponse({"ttft_s": 0.0559}).body == b'{"ttft_s":0.0559}'
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError):
            StrictJSONResponse({"ttft_s": bad})


# --- DNS rebinding: the Host header -------------------------------------------------------


def test_a_page_on_another_host_is_refused() -> None:
    """evil.example pointed at 127.0.0.1 still sends its own name: 400, in one line."""
    client = TestClient(create_app(allowed_hosts=hosts.allowed_hosts("127.0.0.1", 8123)))
    for host in (
        "evil.example",
        "evil.example:8123",
        "127.0.0.1:9999",
        "127.0.0.1.evil.example:8123",
        "localhost.evil.example:8123",
        "testserver",
        "127.0.0.1:8123 ",
        "",
    ):
        r = client.get("/api/estimate", headers={"host": host})
        assert r.status_code == 400, host
        detail = r.json()["detail"]
        assert "\n" not in detail and "127.0.0.1:8123" in detail
        assert r.headers["x-content-type-options"] == "nosniff"
    assert client.get("/", headers={"host": "evil.example"}).status_code == 400
    assert client.get("/static/style.css", headers={"host": "evil.example"}).status_code == 400


def test_the_address_served_is_answered() -> None:
    client = TestClient(create_app(allowed_hosts=hosts.allowed_hosts("127.0.0.1", 8123)))
    for host in ("127.0.0.1:8123", "localhost:8123", "LOCALHOST:8123"):
        assert client.get("/api/lesson", headers={"host": host}).status_code == 200, host
    assert client.get("/", headers={"host": "127.0.0.1:8123"}).status_code == 200


def test_the_default_app_serves_127_0_0_1_port_8000_only() -> None:
    client = TestClient(create_app())
    assert client.get("/api/lesson").status_code == 400  # Host: testserver
    assert client.get("/api/lesson", headers={"host": "127.0.0.1:8000"}).status_code == 200


@pytest.mark.parametrize(
    "host, port, answered, refused",
    [
        (
            "127.0.0.1",
            8000,
            ["127.0.0.1:8000", "localhost:8000"],
            ["[::1]:8000", "127.0.0.1", "evil.example:8000"],
        ),
        ("localhost", 8000, ["localhost:8000", "127.0.0.1:8000", "[::1]:8000"], ["evil.example:8000"]),
        ("::1", 8000, ["[::1]:8000", "localhost:8000"], ["::1:8000", "127.0.0.1:8000"]),
        ("192.168.1.5", 9000, ["192.168.1.5:9000"], ["localhost:9000", "192.168.1.6:9000"]),
        ("myhost.lan", 9000, ["myhost.lan:9000", "MyHost.lan:9000"], ["myhost.lan", "evil.example:9000"]),
        ("127.0.0.1", 80, ["127.0.0.1", "127.0.0.1:80", "localhost"], ["evil.example"]),
        # bound to every address: any IP address, never a name DNS could point anywhere
        (
            "0.0.0.0",
            8000,
            ["192.168.1.5:8000", "[fe80::1]:8000", "localhost:8000", "10.0.0.1:8000"],
            ["evil.example:8000", "192.168.1.5:8001", "192.168.1.5", "1.2.3.4.nip.io:8000"],
        ),
        ("::", 8000, ["[::1]:8000", "127.0.0.1:8000"], ["evil.example:8000", "[::1]"]),
    ],
)
def test_allowed_hosts_for_each_address(
    host: str, port: int, answered: list[str], refused: list[str]
) -> None:
    allowed = hosts.allowed_hosts(host, port)
    for value in answered:
        assert hosts.host_allowed(value, allowed), value
    for value in refused:
        assert not hosts.host_allowed(value, allowed), value


def test_ridgeline_web_serves_the_host_and_port_it_binds(monkeypatch: pytest.MonkeyPatch) -> None:
    """`ridgeline web --port 8765` builds an app that answers to 127.0.0.1:8765 only."""
    import uvicorn

    from ridgeline.web import serve

    served: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(app=app, **kw))
    serve.serve("127.0.0.1", 8765)
    assert served["host"] == "127.0.0.1" and served["port"] == 8765
    client = TestClient(served["app"], base_url="http://127.0.0.1:8765")
    assert client.get("/api/lesson").status_code == 200
    assert client.get("/api/lesson", headers={"host": "evil.example:8765"}).status_code == 400


# --- No CDN: every page and asset is local ------------------------------------------------

# where a page, a style sheet or a script names another resource
REFERENCE = re.compile(
    r"""(?:\b(?:src|href|action|poster|data|srcset|formaction)\s*=\s*|url\(\s*|@import\s+|"""
    r"""\bfrom\s+|\bimport\s*\(\s*|\bimport\s+|fetch\(\s*|new\s+URL\(\s*)["'`]?([^"'`)\s>]+)""",
    re.IGNORECASE,
)
LOOPBACK = {"127.0.0.1", "localhost", "::1", "testserver"}


def served_texts(client: TestClient) -> dict[str, str]:
    """The page, every asset it reaches (following references), and every lesson step."""
    texts: dict[str, str] = {}
    todo = ["/"]
    while todo:
        url = todo.pop()
        if url in texts:
            continue
        r = client.get(url)
        assert r.status_code == 200, url
        texts[url] = r.text
        for ref in REFERENCE.findall(r.text):
            target = urljoin(url, ref).split("#")[0].split("?")[0]
            if target.startswith("/static/") and target.endswith((".js", ".css")):
                todo.append(target)
    steps = client.get("/api/lesson").json()["steps"]
    for step in steps:
        data = client.get(f"/api/lesson/{step['n']}").json()
        texts[f"/api/lesson/{step['n']}"] = data["html"] + str(data.get("drill") or "")
    return texts


def test_no_served_page_loads_anything_from_another_host(client: TestClient) -> None:
    texts = served_texts(client)
    assert "/" in texts and any(u.endswith(".js") for u in texts) and any(u.endswith(".css") for u in texts)
    for url, text in texts.items():
        for ref in REFERENCE.findall(text):
            parts = urlsplit(ref)
            if parts.scheme in ("http", "https") or ref.startswith("//"):
                assert parts.hostname in LOOPBACK, f"{url} loads {ref}"
            assert parts.scheme in ("", "http", "https", "data", "mailto"), f"{url} loads {ref}"


def test_no_swagger_ui_or_redoc_and_nothing_links_to_them(client: TestClient) -> None:
    """They load from a CDN that the page's own policy refuses: a blank page. The schema stays."""
    for url in ("/api/docs", "/docs", "/redoc", "/api/redoc", "/docs/oauth2-redirect"):
        assert client.get(url).status_code == 404, url
    schema = client.get("/api/openapi.json")
    assert schema.status_code == 200 and "/api/estimate" in loads_json(schema.content)["paths"]
    for url, text in served_texts(client).items():
        assert "/docs" not in text and "redoc" not in text.lower(), url
