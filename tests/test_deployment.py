"""One deployment, one step price: every face asks the core the same question and gets
the same answer."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import llama_server
from conftest import ROOT, cli_json
from ridgeline import Deployment, estimate, estimate_on
from ridgeline.simulate import Workload, simulate
from ridgeline.simulate.workload import Lengths

PACKAGE = ROOT / "src" / "ridgeline"


def one_request(d: Deployment, prompt: int, output: int) -> dict:
    w = Workload(requests=1, prompt=Lengths("fixed", prompt), output=Lengths("fixed", output))
    return simulate(d, w).records[0]


def test_an_ideal_deployment_reports_ideal() -> None:
    e = estimate_on(Deployment.build(preset="ideal"), prompt=2000, output=500)
    assert e.inputs["preset"] == "ideal"
    assert e.inputs["compute_eff"] == 1.0 and e.inputs["bandwidth_eff"] == 1.0
    # the film's arithmetic: 16.06 GB + 2,000 x 128 KiB of KV at 3.35 TB/s
    assert e.decode.time_s == pytest.approx((16.06e9 + 2001 * 131072) / 3.35e12, rel=2e-3)


def test_a_gguf_is_priced_by_its_stored_bytes_in_every_face() -> None:
    """simulate used to price a .gguf as bf16 while estimate read its real bytes per weight."""
    gguf = str(llama_server.gguf_path())
    d = Deployment.build(gguf, "h100-sxm")
    assert d.prec.weights == "file"
    e = estimate_on(d, prompt=512, output=16)
    r = one_request(d, 512, 16)
    assert r["ttft_s"] == pytest.approx(e.ttft_s, rel=1e-9)
    assert r["tpot_s"] == pytest.approx(e.tpot_s, rel=1e-9)
    sim = cli_json(
        "simulate", "--model", gguf, "--requests", "1", "--prompt-tokens", "512", "--output-tokens", "16"
    )
    est = cli_json("estimate", "--model", gguf, "--prompt-tokens", "512", "--output-tokens", "16")
    assert sim["deployment"]["weights"] == est["inputs"]["weights"] == "file"
    assert sim["ttft_s"]["p50"] == pytest.approx(est["ttft_s"], rel=1e-9)
    assert sim["tpot_s"]["p50"] == pytest.approx(est["tpot_s"], rel=1e-9)


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gemma-2-9b", "mixtral-8x7b"])
def test_the_per_op_method_reaches_the_simulator(model: str) -> None:
    d = Deployment.build(model, "h100-sxm", method="per-op", tp=2 if model == "mixtral-8x7b" else 1)
    e = estimate_on(d, prompt=1500, output=40)
    lesson = estimate_on(d.with_method("lesson"), prompt=1500, output=40)
    assert e.ttft_s != lesson.ttft_s  # the two methods differ, so the check below can fail
    r = one_request(d, 1500, 40)
    assert r["ttft_s"] == pytest.approx(e.ttft_s, rel=1e-9)
    assert r["tpot_s"] == pytest.approx(e.tpot_s, rel=1e-9)


def test_the_per_op_method_reaches_simulate_on_the_command_line() -> None:
    args = ["--prompt-tokens", "1000", "--output-tokens", "20", "--method", "per-op"]
    sim = cli_json("simulate", "--requests", "1", *args)
    est = cli_json("estimate", *args)
    assert sim["ttft_s"]["p50"] == pytest.approx(est["ttft_s"], rel=1e-9)


@pytest.mark.parametrize(
    ("tp", "ep", "dp"), [(2, 1, False), (4, 2, False), (8, 8, False), (4, 1, True), (8, 8, True)]
)
def test_lesson_and_per_op_agree_under_expert_parallelism(tp: int, ep: int, dp: bool) -> None:
    """Both methods split a pass over GPUs the same way (parallel.gpu_share); they differ only
    in accounting (embedding and lm_head, per-operator maxima, launches), within 15%, as
    on a dense model. Before, Mixtral at --tp 4 --ep 2 gave 4.75 ms against 2.40 ms. Under
    data-parallel attention both hold attention whole on every GPU."""
    kw = {"tp": tp, "ep": ep, "dp_attention": dp, "prompt": 2000, "output": 100}
    lesson = estimate("mixtral-8x7b", **kw)
    per_op = estimate("mixtral-8x7b", method="per-op", **kw)
    assert per_op.tpot_s == pytest.approx(lesson.tpot_s, rel=0.15)
    assert per_op.ttft_s == pytest.approx(lesson.ttft_s, rel=0.15)
    # each GPU reads the same weight bytes either way (the per-op ledger reads only the
    # embedding rows it needs: 4,096 x 2 bytes instead of 32,000 x 4,096 x 2)
    embedding = (32000 - 1) * 4096 * 2 / tp
    assert per_op.decode.weight_bytes_per_gpu == pytest.approx(
        lesson.decode.weight_bytes_per_gpu - embedding, rel=1e-3
    )


@pytest.mark.parametrize(
    "part, says",
    [
        (dict(model=3), "a model is a catalogue name or a path, got int"),
        (dict(model=None), "a model is a catalogue name or a path, got NoneType"),
        (dict(engine=3.5), "an engine is a profile's name, a .toml file or an EngineProfile, got float"),
        (dict(engine=["vllm"]), "an engine is a profile's name, a .toml file or an EngineProfile, got list"),
        (dict(weights=4), "--weights is a weight format's name, got int"),
        (dict(maths=["fp8"]), "--maths is a dtype's name, got list"),
        (dict(preset={"lesson"}), "--preset is a preset's name, got set"),
        (dict(method=1), "--method is a timing method's name, got int"),
        (dict(gpu_file=3), "--gpu-file is a file's path, got int"),
        (dict(calibration=3.0), "--calibration is a file's path, got float"),
        (dict(dp_attention="yes"), "--dp-attention must be true or false, got 'yes'"),
        (dict(in_process="no"), "in_process must be true or false, got 'no'"),
        # a list where a number goes is not hashable: the deployments built before cannot
        # hold it, and the size's own check names it
        (dict(tp=[2]), "--tp must be a whole number from 1 to 65,536, got [2]"),
    ],
)
def test_a_value_of_the_wrong_type_is_one_clear_error(part: dict, says: str) -> None:
    from ridgeline.errors import RidgelineError

    with pytest.raises(RidgelineError) as caught:
        Deployment.build(**part)
    assert str(caught.value) == says


def test_a_path_names_a_part_as_its_text_does(tmp_path: Path) -> None:
    from ridgeline.engines import get_engine
    from ridgeline.models import get_model

    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "model_type": "llama", "hidden_size": 2048, "num_hidden_layers": 16,
        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192,
        "vocab_size": 128256, "max_position_embeddings": 8192,
    }))  # fmt: skip
    assert get_model(config) == get_model(str(config))
    profile = tmp_path / "mine.toml"
    profile.write_text(
        '[mine]\nlabel = "mine"\ncompute = { gemm = { bf16 = 0.6 } }\n'
        "memory = { weights = { w16 = 0.8, w8 = 0.7, w4 = 0.6 } }\n"
    )
    assert get_engine(profile) == get_engine(str(profile))
    assert get_engine(profile).name == "mine"


def test_old_option_spellings_still_work() -> None:
    new = cli_json("estimate", "--prompt-tokens", "300", "--output-tokens", "7")
    old = cli_json("estimate", "--prompt", "300", "--output=7")
    assert new == old
    help_text = subprocess.run(
        [sys.executable, "-m", "ridgeline", "estimate", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    assert "--prompt-tokens" in help_text and "--prompt " not in help_text


def _imports(path: Path) -> set[str]:
    """Every ridgeline module a file imports: at the top, inside a function, or for type
    checking alone (a module that names another's types depends on it too)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("ridgeline"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ridgeline"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def test_no_import_cycle_in_the_package() -> None:
    modules = {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }
    graph = {
        name: {m for m in _imports(path) if m in modules and m != name and not name.startswith(m + ".")}
        for name, path in modules.items()
    }
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> None:
        state[n] = 1
        stack.append(n)
        for m in graph[n]:
            if state.get(m) == 1:
                raise AssertionError("import cycle: " + " -> ".join([*stack[stack.index(m) :], m]))
            if m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)
    assert len(graph) > 50


def _layers() -> dict[str, int]:
    """ARCHITECTURE.md's layout, top to bottom: each entry's files and folders, and its rank."""
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    block = text.split("```\nsrc/ridgeline/\n", 1)[1].split("```", 1)[0]
    rank: dict[str, int] = {}
    for i, line in enumerate(ln for ln in block.splitlines() if not ln.startswith("   ")):
        for name in line.strip().split("  ", 1)[0].split(", "):
            rank[name.strip()] = i
    return rank


def _entry(module: str) -> str:
    """The layout's entry a module belongs to: its file, or its sub-package's folder."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__.py"
    return f"{parts[0]}/" if len(parts) > 1 or (PACKAGE / parts[0]).is_dir() else f"{parts[0]}.py"


def test_every_import_points_up_the_architecture_layout() -> None:
    """ARCHITECTURE.md lists every module, and a module imports only what is listed above it
    (or in its own entry): the layering the document promises, held to the code."""
    rank = _layers()
    modules = {
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"): p
        for p in PACKAGE.rglob("*.py")
    }
    unlisted = sorted({_entry(m) for m in modules} - set(rank))
    assert not unlisted, f"ARCHITECTURE.md does not list {unlisted}"
    upward = []
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ridgeline"):
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                           for a in node.names]  # fmt: skip
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name in modules]
            else:
                continue
            upward += [f"{name} -> {t}" for t in targets if rank[_entry(t)] > rank[_entry(name)]]
    assert not upward, "imports of a module listed below the importer: " + ", ".join(sorted(upward))


def test_the_core_stands_alone() -> None:
    """import ridgeline and an estimate pull in no face's library: the static lesson and
    the film build on a core that runs alone."""
    code = (
        "import sys, json, ridgeline\n"
        "e = ridgeline.estimate('llama-3.1-8b', 'h100-sxm', prompt=2000, output=500)\n"
        "heavy = [m for m in ('fastapi', 'uvicorn', 'httpx', 'gguf', 'typer', 'rich', 'starlette', 'numpy')"
        " if m in sys.modules]\n"
        "print(json.dumps({'heavy': heavy, 'ttft': e.ttft_s}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    data = json.loads(out.stdout)
    assert data["heavy"] == []
    assert data["ttft"] == pytest.approx(0.0559, abs=5e-5)


def test_the_package_ships_its_type_hints() -> None:
    assert (PACKAGE / "py.typed").is_file()


def test_the_public_api_is_keyword_only_after_two_arguments() -> None:
    with pytest.raises(TypeError):
        estimate("llama-3.1-8b", "h100-sxm", "bf16")  # type: ignore[misc]
    with pytest.raises(TypeError):
        Deployment.build("llama-3.1-8b", "h100-sxm", "bf16")  # type: ignore[misc]
