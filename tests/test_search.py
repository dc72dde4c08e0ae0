"""`ridgeline search`: the deployment space against an SLO.

The prune stage never removes a point the simulate stage would keep; a point's row is the
same whichever executor ran it; Ctrl-C keeps every finished point and --resume finishes the
rest; the cost of a point is the lesson's arithmetic; bad input is one line and status 2."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conftest import ROOT, ctrl_c_delivered, shipped_load_band, shipped_server_share
from ridgeline import metrics
from ridgeline.cli import main
from ridgeline.engines import get_engine
from ridgeline.errors import RidgelineError
from ridgeline.models import get_model
from ridgeline.search.answer import pareto_front
from ridgeline.search.executors import Executor, check_ray_address, connect
from ridgeline.search.fidelity import Least
from ridgeline.search.launch import launch
from ridgeline.search.prune import bounds, demand, prune
from ridgeline.search.run import Settings, search
from ridgeline.search.space import Point, make_space, point_seed
from ridgeline.search.stage import Context, Screened, Task, simulate_task
from ridgeline.search.store import read_rows
from ridgeline.simulate.workload import Lengths, Workload

pytest.importorskip("pyarrow")

# A small space: one cheap and one expensive accelerator, two dtypes, two engines.
SMALL = ["--gpu", "l4,h100-sxm", "--tp", "1,2", "--weights", "bf16,fp8", "--maths", "bf16",
         "--kv-dtype", "bf16", "--engine", "vllm,trtllm", "--replicas", "1,2"]  # fmt: skip
TRAFFIC = ["--rate", "4", "--prompt-tokens", "1000", "--output-tokens", "100", "--requests", "150",
           "--slo-ttft-p99", "0.3", "--slo-tpot-p99", "0.03"]  # fmt: skip


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def search_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = run(capsys, "search", *args, "--json")
    assert code == 0, err
    return json.loads(out)


def by_key(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["key"]: r for r in rows}


# --- the prune stage ------------------------------------------------------------------------

WORKLOADS = {
    "fixed lengths": Workload(Lengths("fixed", 2000), Lengths("fixed", 200), rate_per_s=4.0, requests=150,
                              duration_s=None),
    "lognormal lengths, prefix hits": Workload(Lengths("lognormal", 1500, 0.6),
                                               Lengths("lognormal", 150, 0.6), rate_per_s=4.0, requests=150,
                                               duration_s=None, prefix_hit_rate=0.3),
    "a shared prefix, uniform lengths": Workload(Lengths("uniform", 3000, 0.3), Lengths("fixed", 100),
                                                 rate_per_s=3.0, requests=150, duration_s=None,
                                                 shared_prefix_tokens=512),
}  # fmt: skip


@pytest.mark.parametrize("attainment", [None, 0.9], ids=["p99", "goodput"])
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_pruning_never_removes_a_point_the_simulation_would_keep(name: str, attainment: float | None) -> None:
    """Simulate every point of a small space, pruned or not: no pruned point meets the SLO,
    and the prune stage did remove points for latency and for memory (it is not vacuous).
    A screen of a point's first requests never says more than its whole run: every p99 of
    the run is at least the screen's bound on it, no more requests meet the targets than the
    screen allows, and a point the screen says misses does miss."""
    arch = get_model("llama-3.1-8b")
    space = make_space(
        {"gpu": "l4,a10g,h100-sxm", "tp": "1,2", "weights": "bf16,fp8", "maths": "bf16,fp8",
         "kv_dtype": "bf16", "engine": "vllm,trtllm", "chunked_prefill": "on,off", "replicas": "1,2"},
        None, arch,
    )  # fmt: skip
    w = WORKLOADS[name]
    slo = metrics.Slo(ttft_s=0.35, tpot_s=0.03)
    dem = demand(w, arch.max_context, 16)
    pruned = prune(space, arch, dem, slo, attainment, w.rate_per_s or 1.0, 16, 0.9)
    assert pruned.latency > 0 and pruned.memory + pruned.latency + pruned.invalid > 0
    kept = {p.key for p in pruned.survivors}
    # every point that builds, simulated: the deployments come from a prune that removes nothing
    loose = prune(space, arch, dem, metrics.Slo(ttft_s=1e6), None, w.rate_per_s or 1.0, 16, 0.9)
    shapes = list(loose.deployments)
    ctx = Context("llama-3.1-8b", w, slo, attainment, w.rate_per_s or 1.0, "round-robin", 16, 0.9, None,
                  tuple(loose.deployments[s] for s in shapes))  # fmt: skip
    every = [Point(s, p.max_num_seqs, p.max_num_batched_tokens, r, p.chunked_prefill)
             for s in shapes for p in loose.survivors if p.shape == s for r in (1, 2)]  # fmt: skip
    every = list({p.key: p for p in every}.values())
    met = set()
    for p in every:
        task = Task(p.key, shapes.index(p.shape), p.max_num_seqs, p.max_num_batched_tokens, p.replicas,
                    point_seed(0, p.key), chunked_prefill=p.chunked_prefill)  # fmt: skip
        row = simulate_task(ctx, task)
        assert isinstance(row, dict)
        if row["status"] == "error":  # a drawn prompt longer than any step holds whole: refused
            assert not p.chunked_prefill and "whole prefill" in row["error"], (p.key, row["error"])
            continue
        if row["status"] == "met":
            met.add(p.key)
        # each simulated p99 is at least the closed form's bound on it
        b = bounds(loose.deployments[p.shape], dem, slo)
        assert row["ttft_p99_s"] >= b.ttft_s * (1 - 1e-9)
        assert row["e2e_p99_s"] >= b.e2e_s * (1 - 1e-9)
        assert b.tpot_s is not None and row["tpot_p99_s"] >= b.tpot_s * (1 - 1e-9)
        for first in (25, 60):  # the search screens 1/6 of a run; 60 holds more of the run's tail
            screened = simulate_task(ctx, replace(task, screen=first))
            assert isinstance(screened, Screened) and screened.error is None
            for key, least in (("ttft", screened.ttft_s), ("tpot", screened.tpot_s), ("e2e", screened.e2e_s)):
                assert least is None or row[f"{key}_p99_s"] >= least * (1 - 1e-9), (p.key, key, first)
            assert row["slo_attainment"] <= screened.attainment + 1e-12
            assert (screened.prompt_tokens_mean, screened.output_tokens_mean) == (
                row["prompt_tokens_mean"], row["output_tokens_mean"])  # fmt: skip
            least = Least(screened.ttft_s, screened.tpot_s, screened.e2e_s, screened.attainment)
            assert not (least.missed(ctx) and row["status"] == "met"), p.key
    assert met, "the space should hold points that meet the SLO"
    assert met <= kept, f"pruned but met in simulation: {sorted(met - kept)[:3]}"
    assert len(kept) < len(every)
    assert {p.chunked_prefill for p in every} == {True, False}  # both ways of prefilling were run


def test_a_request_that_cannot_fit_is_removed_for_memory() -> None:
    """32,000 prompt tokens hold 4.2 GB of bf16 KV cache (131,072 bytes a token) in llama-3.1-8b:
    more than a 24 GB L4 has left beside 16 GB of weights."""
    arch = get_model("llama-3.1-8b")
    space = make_space({"gpu": "l4,h100-sxm", "tp": "1", "weights": "bf16", "maths": "bf16",
                        "kv_dtype": "bf16", "engine": "vllm", "replicas": "1"}, None, arch)  # fmt: skip
    w = Workload(Lengths("fixed", 32000), Lengths("fixed", 10), rate_per_s=0.1, requests=20, duration_s=None)
    pruned = prune(space, arch, demand(w, arch.max_context, 16), metrics.Slo(ttft_s=100.0), None, 0.1)
    assert pruned.memory == 1 and [p.shape.gpu for p in pruned.survivors] == ["h100-sxm"]
    assert "needs more KV cache" in pruned.notes["memory"]


# --- executors, the Parquet file, Ctrl-C and --resume ---------------------------------------


def test_ray_returns_the_same_rows_as_the_process_pool(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real local Ray cluster (on loopback, 2 CPUs) runs the small search; its Parquet rows
    equal the process pool's, point for point, because a point's seed comes from its key."""
    ray = pytest.importorskip("ray")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    pool = search_json(capsys, *SMALL, *TRAFFIC, "--workers", "2", "--out", str(tmp_path / "pool"))
    connect(ray, "local", 2)  # search's own start of a local Ray: loopback only
    try:
        on_ray = search_json(capsys, *SMALL, *TRAFFIC, "--ray", "auto", "--out", str(tmp_path / "ray"))
    finally:
        ray.shutdown()
    assert on_ray["executor"]["kind"] == "ray" and pool["executor"]["kind"] == "local"
    pool_rows, ray_rows = by_key(read_rows(tmp_path / "pool")), by_key(read_rows(tmp_path / "ray"))
    assert len(pool_rows) == pool["stages"]["survivors"] > 4
    assert pool_rows == ray_rows
    assert on_ray["cheapest"] == pool["cheapest"]


def test_the_serial_and_pool_executors_agree(tmp_path: Path) -> None:
    arch = get_model("llama-3.1-8b")
    axes = {"gpu": "h100-sxm", "tp": "1,2", "weights": "bf16", "maths": "bf16", "kv_dtype": "bf16",
            "engine": "vllm,sglang", "replicas": "1,2"}  # fmt: skip
    space = make_space(axes, None, arch)
    s = Settings("llama-3.1-8b", arch, Workload(Lengths("fixed", 500), Lengths("fixed", 50), rate_per_s=5.0,
                 requests=100, duration_s=None), metrics.Slo(ttft_s=0.5))  # fmt: skip
    one = search(space, s, Executor("local", 1), str(tmp_path / "one"))
    two = search(space, s, Executor("local", 2), str(tmp_path / "two"))
    assert by_key(one.rows) == by_key(two.rows) == by_key(read_rows(tmp_path / "two"))


def test_an_interrupted_search_keeps_its_points_and_resume_finishes_it(tmp_path: Path) -> None:
    """Ctrl-C after the third point: those three are in the folder; --resume simulates only
    the others, and the rows are those of a search never interrupted."""
    arch = get_model("llama-3.1-8b")
    space = make_space({"gpu": "h100-sxm,h200", "tp": "1,2", "weights": "bf16", "maths": "bf16",
                        "kv_dtype": "bf16", "engine": "vllm", "replicas": "1,2"}, None, arch)  # fmt: skip
    w = Workload(Lengths("fixed", 500), Lengths("fixed", 50), rate_per_s=5.0, requests=100, duration_s=None)
    s = Settings("llama-3.1-8b", arch, w, metrics.Slo(ttft_s=0.5))
    out = str(tmp_path / "partial")

    def ctrl_c_at_three(done: int, total: int) -> None:
        if done == 3:
            raise KeyboardInterrupt

    first = search(space, s, Executor("local", 1), out, progress=ctrl_c_at_three)
    assert first.interrupted == "SIGINT"
    assert len(read_rows(out)) == 3 == first.stages.simulated
    with pytest.raises(Exception, match="--resume continues it"):
        search(space, s, Executor("local", 1), out)
    resumed = search(space, s, Executor("local", 2), out, resume=True)
    assert resumed.interrupted is None
    assert resumed.stages.resumed == 3 and resumed.stages.simulated == resumed.stages.survivors - 3
    whole = search(space, s, Executor("local", 1), str(tmp_path / "whole"))
    assert by_key(read_rows(out)) == by_key(whole.rows) == by_key(resumed.rows)


def test_resume_refuses_another_workload(tmp_path: Path) -> None:
    arch = get_model("llama-3.1-8b")
    space = make_space({"gpu": "h100-sxm", "tp": "1", "weights": "bf16", "maths": "bf16", "kv_dtype": "bf16",
                        "engine": "vllm", "replicas": "1"}, None, arch)  # fmt: skip
    w = Workload(Lengths("fixed", 500), Lengths("fixed", 50), rate_per_s=5.0, requests=100, duration_s=None)
    search(space, Settings("m", arch, w, metrics.Slo(ttft_s=0.5)), Executor(), str(tmp_path / "r"))
    other = Settings("m", arch, w, metrics.Slo(ttft_s=0.4))
    with pytest.raises(Exception, match=r"searched with another slo\.ttft_s \(0\.5, now 0\.4\)"):
        search(space, other, Executor(), str(tmp_path / "r"), resume=True)
    reseeded = Settings("m", arch, replace(w, seed=w.seed + 1), metrics.Slo(ttft_s=0.5))
    with pytest.raises(Exception, match=rf"another workload\.seed \({w.seed}, now {w.seed + 1}\)"):
        search(space, reseeded, Executor(), str(tmp_path / "r"), resume=True)


@pytest.mark.parametrize(
    ("column", "value"), [("ttft_p99_s", math.nan), ("usd_per_million_tokens", -math.inf), ("replicas", 0)]
)
def test_resume_refuses_a_part_holding_what_no_search_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], column: str, value: float
) -> None:
    """A part edited (or damaged) so that Parquet still reads it: one line naming the part and
    the column, status 2, no answer made from it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = tmp_path / "edited"
    search_json(capsys, *SMALL, *TRAFFIC, "--workers", "1", "--out", str(out))
    part = sorted(out.glob("part-*.parquet"))[0]
    rows = pq.read_table(part).to_pylist()
    rows[0][column] = value
    pq.write_table(pa.Table.from_pylist(rows, schema=pq.read_schema(part)), part)
    again = ("--workers", "1", "--out", str(out), "--resume")
    code, stdout, err = run(capsys, "search", *SMALL, *TRAFFIC, *again)
    assert code == 2 and stdout == ""
    assert len(err.strip().splitlines()) == 1 and part.name in err and f"{column} = " in err


def test_ctrl_c_on_the_command_line_keeps_every_finished_point(tmp_path: Path) -> None:
    """A real SIGINT to a running `ridgeline search` on two worker processes: status 130, one
    line on stderr naming how many points are kept, and exactly those rows in the folder."""
    out = tmp_path / "interrupted"
    env = os.environ | {"RIDGELINE_CONFIG_DIR": str(tmp_path / "config")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ridgeline", "search", "--gpu", "h100-sxm,h200,a100-80gb-sxm",
         "--tp", "1,2,4", "--weights", "bf16,fp8", "--maths", "bf16", "--kv-dtype", "bf16,fp8",
         "--engine", "vllm,sglang", "--replicas", "1,2,3", "--rate", "8", "--prompt-tokens", "1000",
         "--output-tokens", "200", "--requests", "1500", "--slo-ttft-p99", "1", "--slo-tpot-p99", "0.05",
         "--workers", "2", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path,
        preexec_fn=ctrl_c_delivered,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(out.glob("part-*.parquet")):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert stderr.count("\n") == 1 and "--resume continues" in stderr and "Traceback" not in stderr
    kept = int(stderr.split(" points are in")[0].rsplit(" ", 1)[1].replace(",", ""))
    assert kept >= 1 and len(read_rows(out)) == kept


# --- the answer ---------------------------------------------------------------------------


def test_a_point_costs_its_gpus_over_the_tokens_it_serves(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """$ per million tokens = GPUs x price / (rate x tokens per request x 3600) x 1e6: two
    replicas of TP 2 at $2.50 an hour, 3 requests/s of 1,000 prompt tokens and 200 emitted."""
    data = search_json(
        capsys, "--gpu", "h100-sxm", "--tp", "2", "--weights", "bf16", "--maths", "bf16", "--kv-dtype",
        "bf16", "--engine", "vllm", "--replicas", "2", "--rate", "3", "--prompt-tokens", "1000",
        "--output-tokens", "199", "--requests", "120", "--slo-ttft-p99", "1", "--price", "2.5",
        "--workers", "1", "--out", str(tmp_path / "cost"),
    )  # fmt: skip
    best = data["cheapest"]
    assert best["gpus"] == 4 and best["gpus_per_replica"] == 2 and best["replicas"] == 2
    assert best["usd_per_hour"] == pytest.approx(4 * 2.5)
    assert best["usd_per_million_tokens"] == pytest.approx(4 * 2.5 / (3 * (1000 + 200) * 3600) * 1e6)
    assert best["usd_per_million_output_tokens"] == pytest.approx(4 * 2.5 / (3 * 200 * 3600) * 1e6)
    assert data["front"] == [best]


def test_the_json_answer_has_its_documented_keys(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = search_json(capsys, *SMALL, *TRAFFIC, "--workers", "1", "--out", str(tmp_path / "j"))
    assert set(data) == {"model", "workload", "slo", "space", "executor", "stages", "cheapest", "front",
                         "front_of", "launch", "out", "interrupted", "cheapest_band", "notes",
                         "warnings"}  # fmt: skip
    assert set(data["stages"]) == {"points", "invalid", "memory", "latency", "survivors", "resumed",
                                   "simulated", "screened", "full", "met", "missed", "dominated", "errors",
                                   "prune_s", "simulate_s"}  # fmt: skip
    st = data["stages"]
    assert st["points"] == st["invalid"] + st["memory"] + st["latency"] + st["survivors"]
    assert st["survivors"] == st["met"] + st["missed"] + st["dominated"] + st["errors"] == st["simulated"]
    assert st["latency"] > 0  # an L4 cannot decode llama-3.1-8b in 30 ms a token
    assert set(data["launch"]) == {"engine", "command", "argv", "replicas", "gpus_per_replica", "assumptions",
                                   "files"}  # fmt: skip
    rows = read_rows(tmp_path / "j")
    assert all(r["status"] in ("met", "missed", "dominated", "error") for r in rows)
    assert data["cheapest"]["usd_per_million_tokens"] == min(
        r["usd_per_million_tokens"] for r in rows if r["status"] == "met"
    )


def test_the_pareto_front_keeps_only_the_undominated() -> None:
    def row(key: str, cost: float, ttft: float, tpot: float) -> dict[str, Any]:
        return {"key": key, "status": "met", "usd_per_million_tokens": cost, "ttft_p99_s": ttft,
                "tpot_p99_s": tpot}  # fmt: skip

    rows = [row("a", 1, 0.5, 0.05), row("b", 2, 0.2, 0.05), row("c", 2, 0.6, 0.06), row("d", 3, 0.2, 0.01),
            row("e", 3, 0.3, 0.02), row("f", 1, 0.5, 0.05)]  # fmt: skip
    # c is beaten by a on every axis; e by d; f ties a exactly, so both stay
    assert [r["key"] for r in pareto_front(rows)] == ["a", "f", "b", "d"]


def test_the_plot_is_a_png(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png = tmp_path / "front.png"
    search_json(capsys, *SMALL, *TRAFFIC, "--workers", "1", "--out", str(tmp_path / "p"), "--plot", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_table_names_the_stages_and_the_launch_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, err = run(capsys, "search", *SMALL, *TRAFFIC, "--workers", "1", "--out", str(tmp_path / "t"))
    assert code == 0, err
    assert "prune" in out and "simulate" in out and "cheapest inside the SLO" in out and "assumes:" in out


# --- the launch command -------------------------------------------------------------------


def launch_row(engine: str, **extra: Any) -> dict[str, Any]:
    row = {"engine": engine, "tp": 2, "pp": 1, "ep": 1, "max_num_seqs": 128, "max_num_batched_tokens": 4096,
           "weights": "fp8", "maths": "fp8", "kv_dtype": "fp8", "replicas": 3, "gpus_per_replica": 2,
           "policy": get_engine(engine).scheduler.policy, "kv_tokens": 100_000}  # fmt: skip
    return row | extra


@pytest.mark.parametrize(
    ("engine", "expected"),
    [
        ("vllm", ["vllm serve meta-llama/Llama-3.1-8B", "--tensor-parallel-size 2", "--max-num-seqs 128",
                  "--max-num-batched-tokens 4096", "--kv-cache-dtype fp8", "--quantization fp8"]),
        ("sglang", ["python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B", "--tp-size 2",
                    "--max-running-requests 128", "--chunked-prefill-size 4096", "--kv-cache-dtype fp8_e4m3",
                    "--quantization fp8", "--cuda-graph-max-bs 128"]),
        ("trtllm", ["trtllm-serve meta-llama/Llama-3.1-8B", "--tp_size 2", "--max_batch_size 128",
                    "--max_num_tokens 4096", "--extra_llm_api_options"]),
        ("llamacpp", ["llama-server -m meta-llama/Llama-3.1-8B", "--parallel 128", "--batch-size 4096",
                      "--cache-type-k q8_0"]),
    ],
)  # fmt: skip
def test_each_engine_gets_its_own_launch_command(engine: str, expected: list[str]) -> None:
    from ridgeline.deployment import Deployment

    d = Deployment.build("llama-3.1-8b", "h100-sxm", weights="fp8", maths="fp8", kv_dtype="fp8", tp=2,
                         engine=engine)  # fmt: skip
    found = launch(launch_row(engine), "meta-llama/Llama-3.1-8B", d, 16, 0.9)
    assert found is not None
    for part in expected:
        assert part in found.command
    assert any("3 of these" in note for note in found.assumptions)
    if engine == "trtllm":
        assert "GUARANTEED_NO_EVICT" in found.files["extra-llm-api-options.yaml"]
        assert "dtype: fp8" in found.files["extra-llm-api-options.yaml"]
        # every decode batch up to the 128 sequences is captured, as the profile priced them
        assert (
            "cuda_graph_config:\n  enable_padding: true\n  max_batch_size: 128"
            in found.files["extra-llm-api-options.yaml"]
        )


def test_sglangs_static_fraction_holds_the_weights_and_the_simulated_cache() -> None:
    """SGLang's pool is --mem-fraction-static of memory less the weights: the fraction the
    command carries gives back the simulation's KV room, to the hundredth of memory below it
    (0.9 of memory less activations and runtime, not vLLM's 0.9 itself)."""
    from ridgeline.deployment import Deployment
    from ridgeline.memory import stored_weight_bytes_per_gpu
    from ridgeline.simulate.kvcache import kv_cache

    d = Deployment.build("llama-3.1-8b", "h100-sxm", weights="fp8", maths="fp8", kv_dtype="fp8", tp=2,
                         engine="sglang")  # fmt: skip
    found = launch(launch_row("sglang"), "meta-llama/Llama-3.1-8B", d, 16, 0.9)
    assert found is not None
    fraction = float(found.command.split("--mem-fraction-static ")[1].split()[0])
    room = kv_cache(d, 16, 0.9, 128, 4096).room_bytes_per_gpu
    memory, weights = d.hw.memory_bytes, stored_weight_bytes_per_gpu(d)
    assert fraction * memory - weights <= room < (fraction + 0.01) * memory - weights
    assert fraction < 0.9 and any("--mem-fraction-static" in note for note in found.assumptions)


def test_a_catalogue_name_in_a_launch_command_is_an_assumption() -> None:
    from ridgeline.deployment import Deployment

    d = Deployment.build("llama-3.1-8b", "h100-sxm", engine="vllm")
    found = launch(launch_row("vllm", weights="bf16", maths="bf16", kv_dtype="bf16", tp=1), "llama-3.1-8b", d,
                   16, 0.9)  # fmt: skip
    assert found is not None and "--quantization" not in found.command
    assert any("catalogue name" in note for note in found.assumptions)


# --- --engine for simulate and plan ---------------------------------------------------------


def test_simulate_takes_the_engine_profiles_scheduler(capsys: pytest.CaptureFixture[str]) -> None:
    sched = get_engine("trtllm").scheduler
    code, out, err = run(capsys, "simulate", "--engine", "trtllm", "--requests", "30", "--json")
    assert code == 0, err
    engine = json.loads(out)["engine"]
    assert (engine["policy"], engine["max_num_seqs"], engine["max_num_batched_tokens"]) == (
        sched.policy,
        sched.max_num_seqs,
        sched.max_num_batched_tokens,
    )
    code, out, err = run(capsys, "simulate", "--engine", "trtllm", "--max-num-seqs", "64", "--requests", "30",
                         "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["engine"]["max_num_seqs"] == 64
    code, out, err = run(capsys, "simulate", "--requests", "30", "--json")
    assert json.loads(out)["engine"]["policy"] == "vllm"


def test_plan_takes_an_engine(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "plan", "--engine", "sglang", "--rate", "1", "--slo-ttft-p99", "2",
                         "--slo-tpot-p99", "0.2", "--requests", "100", "--seeds", "2", "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["plans"][0]["replicas"] >= 1


# --- bad input: one line, status 2 ----------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--gpu", "h100-sxmm"], "unknown GPU"),
        (["--tp", ""], "lists no values"),
        (["--tp", "1,,2"], "empty value"),
        (["--tp", "0"], "--tp must be a whole number"),
        (["--tp", "two"], "is not a whole number"),
        (["--replicas=-3"], "is not a whole number"),
        (["--max-num-seqs", "0"], "--max-num-seqs must be a whole number"),
        (["--requests", "0"], "--requests must be"),
        (["--workers", "0"], "--workers must be"),
        (["--weights", "fp7"], "unknown weight dtype"),
        (["--engine", "tgi"], "unknown engine"),
        (["--ray", "http://127.0.0.1:9/v1"], "is not auto, local, HOST:PORT"),
        (["--plot", "front.svg"], "must name a .png"),
        (["--tp", "3"], "no point of the space builds"),
        (["--goodput", "1.5"], "--goodput must be"),
        (["--gpu", "mi300x", "--engine", "trtllm"], "TensorRT-LLM does not run on amd accelerators"),
        (["--chunked-prefill", "partly"], "is not on, off or engine"),
        (["--out", "s3://user:secret@bucket/run"], "takes a local folder, not a URL"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, args: list[str], fragment: str
) -> None:
    base = ["--rate", "1", "--slo-ttft-p99", "1", "--gpu", "h100-sxm", "--engine", "vllm", "--workers", "1",
            "--out", str(tmp_path / "bad")]  # fmt: skip
    code, out, err = run(capsys, "search", *base, *args)
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("ridgeline: error:") and fragment in err, err
    assert "secret" not in err  # a URL's credentials are not echoed


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("tp = [1, 2\n", "cannot parse"),
        ("tp = []\n", "lists no values"),
        ('tp = ["one"]\n', "is not a whole number"),
        ("tp = [1.5]\n", "must be a whole number"),
        ("gpus = ['h100-sxm']\n", "unknown axis 'gpus'"),
        ("engine = [{ name = 'vllm' }]\n", "list of plain values"),
    ],
)
def test_a_bad_space_file_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, fragment: str
) -> None:
    space = tmp_path / "space.toml"
    space.write_text(text, encoding="utf-8")
    code, out, err = run(capsys, "search", "--rate", "1", "--slo-ttft-p99", "1", "--space", str(space),
                         "--out", str(tmp_path / "o"))  # fmt: skip
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and fragment in err, err


def test_a_space_file_sets_the_axes_and_flags_win(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    space = tmp_path / "space.toml"
    text = 'gpu = ["h100-sxm", "h200"]\ntp = [1]\nweights = ["bf16"]\nmaths = ["bf16"]\nkv_dtype = ["bf16"]\n'
    space.write_text(text + 'engine = ["vllm"]\nreplicas = [1, 2]\n', encoding="utf-8")
    data = search_json(capsys, "--space", str(space), "--gpu", "h200", "--rate", "2", "--requests", "100",
                       "--slo-ttft-p99", "1", "--workers", "1", "--out", str(tmp_path / "o"))  # fmt: skip
    assert data["space"]["gpu"] == ["h200"] and data["space"]["replicas"] == [1, 2]
    assert data["stages"]["points"] == 2


def test_an_existing_search_is_not_overwritten_by_accident(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["--gpu", "h100-sxm", "--tp", "1", "--weights", "bf16", "--maths", "bf16", "--kv-dtype", "bf16",
            "--engine", "vllm", "--replicas", "1", "--rate", "2", "--requests", "100", "--slo-ttft-p99", "1",
            "--workers", "1", "--out", str(tmp_path / "o")]  # fmt: skip
    search_json(capsys, *args)
    code, _, err = run(capsys, "search", *args)
    assert code == 2 and "--resume continues it" in err
    assert search_json(capsys, *args, "--overwrite")["stages"]["simulated"] == 1
    assert search_json(capsys, *args, "--resume")["stages"]["resumed"] == 1


def test_ray_addresses_are_checked_before_ray_starts() -> None:
    assert check_ray_address("auto") == "auto"
    assert check_ray_address("10.0.0.5:6379") == "10.0.0.5:6379"
    assert check_ray_address("ray://head.example:10001") == "ray://head.example:10001"
    for bad in ("", "-", "head", "a:b:c:d", "head:99999", "http://user:secret@127.0.0.1:9/v1"):
        with pytest.raises(Exception, match="is not auto"):
            check_ray_address(bad)


def test_the_search_module_is_not_loaded_by_the_core() -> None:
    code = "import sys, ridgeline; ridgeline.estimate()\n"
    code += "print(any(m.startswith('ridgeline.search') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.stdout.strip() == "False", out.stderr


def test_a_pool_that_sends_screens_ahead_decides_as_one_process_does(tmp_path: Path) -> None:
    """Several windows, with screens and whole runs: the pool starts each next window's first
    screens beside this window's whole runs, and still gives every row and every count of
    the search run in one process (a screen sent ahead and never asked for counts nowhere)."""
    arch = get_model("llama-3.1-8b")
    axes = {"gpu": "l4,h100-sxm", "tp": "1,2", "weights": "bf16,fp8", "maths": "bf16", "kv_dtype": "bf16",
            "engine": "vllm,trtllm", "replicas": "1,2,3"}  # fmt: skip
    space = make_space(axes, None, arch)
    w = Workload(Lengths("fixed", 1000), Lengths("fixed", 100), rate_per_s=4.0, requests=240, duration_s=None)
    s = Settings("llama-3.1-8b", arch, w, metrics.Slo(ttft_s=0.3, tpot_s=0.03))
    one = search(space, s, Executor("local", 1), str(tmp_path / "one"))
    two = search(space, s, Executor("local", 2), str(tmp_path / "two"))
    assert one.stages.full > 0 and one.stages.screened > 0 and one.stages.survivors > 12  # three windows
    assert by_key(one.rows) == by_key(two.rows)
    counts = ("screened", "full", "met", "missed", "dominated", "errors")
    assert [getattr(one.stages, c) for c in counts] == [getattr(two.stages, c) for c in counts]


def test_a_pool_started_before_the_prune_stage_ends_with_the_search(tmp_path: Path) -> None:
    """The pool's workers start while the prune stage runs; a search that stops before its
    simulate stage (here: no point builds), has nothing to simulate (no point survives), or
    needs no pool (one point), ends them all the same."""
    import multiprocessing

    arch = get_model("llama-3.1-8b")
    w = Workload(Lengths("fixed", 500), Lengths("fixed", 50), rate_per_s=5.0, requests=100, duration_s=None)
    s = Settings("llama-3.1-8b", arch, w, metrics.Slo(ttft_s=0.5))
    axes = {"gpu": "h100-sxm", "weights": "bf16", "maths": "bf16", "kv_dtype": "bf16", "engine": "vllm",
            "replicas": "1"}  # fmt: skip
    with pytest.raises(RidgelineError, match="no point of the space builds"):
        search(make_space(axes | {"tp": "3"}, None, arch), s, Executor("local", 2), str(tmp_path / "none"))
    assert multiprocessing.active_children() == []
    one_point = make_space(axes | {"tp": "1"}, None, arch)
    too_fast = replace(s, slo=metrics.Slo(ttft_s=1e-6))
    none = search(one_point, too_fast, Executor("local", 2), str(tmp_path / "0"))
    assert none.stages.survivors == 0 and none.rows == [] and none.cheapest is None
    assert multiprocessing.active_children() == []
    alone = search(one_point, s, Executor("local", 2), str(tmp_path / "one"))
    assert alone.stages.survivors == 1 and len(alone.rows) == 1
    assert multiprocessing.active_children() == []


def test_the_answer_warns_when_its_replicas_api_servers_cannot_keep_up(tmp_path: Path) -> None:
    """The cheapest point's replicas each take the fleet's rate over their number; at more
    than 1 / (the profile's server work on a request) a second, its one API server process
    cannot pass them on, and the answer says so, as simulate does (it decides nothing)."""
    arch = get_model("llama-3.1-8b")
    p = get_engine("vllm")
    capacity = 1 / (p.request_s + 100 * p.prompt_token_s + 101 * p.stream_token_s)  # 100 in, 101 out
    w = Workload(
        Lengths("fixed", 100), Lengths("fixed", 100), rate_per_s=1.2 * capacity, requests=300, duration_s=None
    )
    s = Settings("llama-3.1-8b", arch, w, metrics.Slo(ttft_s=30.0, tpot_s=1.0))
    axes = {
        "gpu": "h100-sxm",
        "tp": "1",
        "weights": "bf16",
        "maths": "bf16",
        "kv_dtype": "bf16",
        "engine": "vllm",
    }
    one = search(
        make_space(axes | {"replicas": "1"}, None, arch), s, Executor("local", 1), str(tmp_path / "1")
    )
    assert one.cheapest is not None
    (warning,) = [x for x in one.warnings if "server-bound" in x]
    assert warning.startswith("the cheapest point: server-bound: vLLM's API server")
    assert f"at most {capacity:.3g} requests/s" in warning
    two = search(
        make_space(axes | {"replicas": "2"}, None, arch), s, Executor("local", 1), str(tmp_path / "2")
    )
    assert two.cheapest is not None and not any("server-bound" in x for x in two.warnings)


def test_the_cheapest_point_is_run_again_at_the_ends_of_its_engines_band(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an engine whose profile has a band under load, the answer's point runs again with
    the engine as fast and as slow as its ends: a faster engine's p99s are no longer, a slower
    one's no shorter, and an SLO between the point's p99 TTFT and its slow end's is met at the
    predicted speed and missed at the slow end. A profile without a band: none."""
    arch = get_model("llama-3.1-8b")
    busy = shipped_server_share("vllm", 2.0, 1000, 100 + 1)  # the first token and 100 more
    lo, hi = shipped_load_band("vllm", busy)
    w = Workload(Lengths("fixed", 1000), Lengths("fixed", 100), rate_per_s=2.0, requests=200, duration_s=None)
    axes = {"gpu": "h100-sxm", "tp": "1", "weights": "bf16", "maths": "bf16", "kv_dtype": "bf16"}
    space = make_space(axes | {"engine": "vllm", "replicas": "1"}, None, arch)

    def answer(space: Any, ttft_s: float, folder: str) -> Any:
        settings = Settings("llama-3.1-8b", arch, w, metrics.Slo(ttft_s=ttft_s))
        return search(space, settings, Executor("local", 1), str(tmp_path / folder))

    loose = answer(space, 5.0, "loose")
    b, best = loose.cheapest_band, loose.cheapest
    assert b is not None and best is not None
    assert b["profile"] == "vllm" and b["time_ratio"] == pytest.approx([lo, hi], rel=1e-12)
    assert b["server_share"] == pytest.approx(busy, rel=1e-12) and 0 < busy < 0.2
    assert b["fast"]["status"] == b["slow"]["status"] == "met"
    assert b["fast"]["ttft_p99_s"] < best["ttft_p99_s"] < b["slow"]["ttft_p99_s"]
    assert b["fast"]["tpot_p99_s"] < best["tpot_p99_s"] < b["slow"]["tpot_p99_s"]
    tight = answer(space, (best["ttft_p99_s"] + b["slow"]["ttft_p99_s"]) / 2, "tight")
    assert tight.cheapest is not None and tight.cheapest_band is not None
    assert tight.cheapest_band["slow"]["status"] == "missed"
    assert tight.cheapest_band["fast"]["status"] == "met"
    mine = tmp_path / "mine.toml"  # a user's profile: no band
    mine.write_text(
        '[mine]\nlabel = "mine"\ncompute = { gemm = { bf16 = 0.6 } }\n'
        "memory = { weights = { w16 = 0.8, w8 = 0.7, w4 = 0.6 } }\n"
    )
    monkeypatch.setenv("RIDGELINE_ENGINES", str(mine))
    plain = answer(make_space(axes | {"engine": "mine", "replicas": "1"}, None, arch), 5.0, "plain")
    assert plain.cheapest is not None and plain.cheapest_band is None


def test_a_pool_forks_only_while_its_process_runs_one_thread() -> None:
    """Forked workers start with the parent's imports; a fork copies no other thread, so once
    one runs (a web server's, Ray's) the pool spawns fresh interpreters instead."""
    code = (
        "import sys, threading, time\n"
        "from ridgeline.search.executors import start_method\n"
        "alone = start_method()\n"
        "threading.Thread(target=time.sleep, args=(0.5,), daemon=True).start()\n"
        "print(alone, start_method(), 'numpy' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    alone, threaded, numpy_loaded = out.stdout.split()
    assert threaded == "spawn"
    if sys.platform == "linux":
        assert (alone, numpy_loaded) == ("fork", "True")  # loaded here, once, for every worker
    else:
        assert alone == "spawn"


def test_a_stored_mix_computes_in_the_maths_of_its_width() -> None:
    """gpt-oss's checkpoint (MXFP4 experts, 4.5 bits a weight on average) is searched as
    stored: bf16 maths only, not fp8 (W8A8 wants 8-bit weights); DeepSeek-V3's FP8
    checkpoint computes in fp8 as well."""
    for model, maths in (("gpt-oss-120b", {"bf16"}), ("deepseek-v3", {"bf16", "fp8"})):
        arch = get_model(model)
        space = make_space({"gpu": "h200", "tp": "8", "engine": "vllm", "replicas": "1"}, None, arch)
        assert space.to_dict()["weights"] == ["file"]
        w = Workload(
            Lengths("fixed", 1000), Lengths("fixed", 100), rate_per_s=1.0, requests=50, duration_s=None
        )
        pruned = prune(space, arch, demand(w, arch.max_context, 16), metrics.Slo(ttft_s=10.0), None, 1.0)
        assert {p.shape.maths for p in pruned.survivors} == maths
        if maths == {"bf16"}:
            assert "fp8 maths on the stored mix of weights" in pruned.notes["invalid"]


# --- chunked prefill as an axis ---------------------------------------------------------------


def test_chunked_prefill_is_an_axis_and_a_whole_prefill_must_fit_the_budget() -> None:
    """3,000-token prompts and 300 output tokens: unchunked, vLLM's policy needs a step of
    3,300 tokens (a preempted request prefills its output again) and TensorRT-LLM's 3,000, so
    a budget of 2,048 is no configuration for either, while 8,192 is; chunked, both are."""
    arch = get_model("llama-3.1-8b")
    space = make_space({"gpu": "h100-sxm", "tp": "1", "weights": "bf16", "maths": "bf16", "kv_dtype": "bf16",
                        "engine": "vllm,trtllm", "max_num_batched_tokens": "2048,8192",
                        "chunked_prefill": "on,off", "replicas": "1"}, None, arch)  # fmt: skip
    assert space.to_dict()["chunked_prefill"] == ["on", "off"]
    w = Workload(Lengths("fixed", 3000), Lengths("fixed", 300), rate_per_s=2.0, requests=100, duration_s=None)
    pruned = prune(space, arch, demand(w, arch.max_context, 16), metrics.Slo(ttft_s=10.0), None, 2.0)
    kept = {(p.shape.engine, p.max_num_batched_tokens, p.chunked_prefill) for p in pruned.survivors}
    knobs = ((2048, True), (8192, True), (8192, False))
    assert kept == {(e, b, c) for e in ("vllm", "trtllm") for b, c in knobs}
    assert pruned.invalid == 2
    assert "vllm: with chunked prefill off" in pruned.notes["invalid"]  # vLLM's shape comes first
    assert "needs 3,300 tokens in one step" in pruned.notes["invalid"]
    keys = {p.key for p in pruned.survivors if not p.chunked_prefill}
    assert keys and all("|tokens8192|whole|x1" in key for key in keys)
    with pytest.raises(RidgelineError, match="not on, off or engine"):
        make_space({"chunked_prefill": "sometimes"}, None, arch)


@pytest.mark.parametrize(
    ("engine", "expected"),
    [
        ("vllm", "--no-enable-chunked-prefill --max-model-len 4096"),
        ("sglang", "--chunked-prefill-size -1 --max-prefill-tokens 4096"),
        ("trtllm", "--max_num_tokens 4096"),
        ("llamacpp", "--batch-size 4096"),
    ],
)
def test_a_launch_command_turns_chunked_prefill_off_as_its_engine_does(engine: str, expected: str) -> None:
    from ridgeline.deployment import Deployment

    d = Deployment.build("llama-3.1-8b", "h100-sxm", weights="fp8", maths="fp8", kv_dtype="fp8", tp=2,
                         engine=engine)  # fmt: skip
    found = launch(launch_row(engine, chunked_prefill=False), "meta-llama/Llama-3.1-8B", d, 16, 0.9)
    assert found is not None and expected in found.command
    assert "--enable-chunked-prefill" not in found.command.split()
    if engine == "vllm":  # a budget that covers the model's context needs no cap on it
        whole = launch(launch_row(engine, chunked_prefill=False, max_num_batched_tokens=d.arch.max_context),
                       "meta-llama/Llama-3.1-8B", d, 16, 0.9)  # fmt: skip
        assert whole is not None and "--max-model-len" not in whole.command
    if engine == "trtllm":
        assert "enable_chunked_prefill: false" in found.files["extra-llm-api-options.yaml"]
    if engine == "llamacpp":
        assert any("no switch for chunked prefill" in note for note in found.assumptions)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("overlap", [False, True])
def test_a_launch_command_schedules_as_the_simulated_engine_did(engine: str, overlap: bool) -> None:
    """Each engine's own default needs no flag; the other way round takes its switch:
    vLLM's --no-async-scheduling, SGLang's --disable-overlap-schedule, TensorRT-LLM's
    disable_overlap_scheduler."""
    from dataclasses import replace

    from ridgeline.deployment import Deployment

    profile = get_engine(engine)
    profile = replace(profile, scheduler=replace(profile.scheduler, overlap=overlap))
    d = Deployment.build("llama-3.1-8b", "h100-sxm", weights="fp8", maths="fp8", kv_dtype="fp8", tp=2,
                         engine=profile)  # fmt: skip
    found = launch(launch_row(engine), "meta-llama/Llama-3.1-8B", d, 16, 0.9)
    assert found is not None
    words = found.command.split()
    options = found.files.get("extra-llm-api-options.yaml", "")
    assert ("--no-async-scheduling" in words) == (engine == "vllm" and not overlap)
    assert "--async-scheduling" not in words
    assert ("--disable-overlap-schedule" in words) == (engine == "sglang" and not overlap)
    assert ("disable_overlap_scheduler: true" in options) == (engine == "trtllm" and not overlap)


def test_data_parallel_attention_is_an_axis_whose_bounds_hold() -> None:
    """`--dp-attention off,on` doubles the shapes; llama.cpp has no such mode (invalid). Every
    point that builds, simulated whole and screened: each p99 is at least the closed form's
    bound (a request alone, its attention on one GPU) and at least its screen's, as the
    prune and fidelity stages assume."""
    arch = get_model("qwen3-30b-a3b")
    space = make_space(
        {"gpu": "h100-sxm", "tp": "2", "weights": "fp8", "maths": "bf16", "kv_dtype": "bf16",
         "engine": "vllm,sglang,trtllm,llamacpp", "dp_attention": "off,on", "replicas": "1"},
        None, arch,
    )  # fmt: skip
    assert space.dp_attention == (False, True) and space.to_dict()["dp_attention"] == ["off", "on"]
    w = Workload(Lengths("lognormal", 1500, 0.6), Lengths("fixed", 100), rate_per_s=8.0, requests=120,
                 duration_s=None)  # fmt: skip
    slo = metrics.Slo(ttft_s=0.5, tpot_s=0.05)
    dem = demand(w, arch.max_context, 16)
    loose = prune(space, arch, dem, metrics.Slo(ttft_s=1e6), None, 8.0, 16, 0.9)
    assert loose.invalid == 1 and "no data-parallel attention" in loose.notes["invalid"]
    shapes = list(loose.deployments)
    assert sum(s.dp_attention for s in shapes) == 3 and len(shapes) == 7
    ctx = Context("qwen3-30b-a3b", w, slo, None, 8.0, "round-robin", 16, 0.9, None,
                  tuple(loose.deployments[s] for s in shapes))  # fmt: skip
    assert len(loose.survivors) == 7
    for p in loose.survivors:
        assert ("|dp|" in p.key) == p.shape.dp_attention
        task = Task(p.key, shapes.index(p.shape), p.max_num_seqs, p.max_num_batched_tokens, p.replicas,
                    point_seed(0, p.key), chunked_prefill=p.chunked_prefill)  # fmt: skip
        row = simulate_task(ctx, task)
        assert isinstance(row, dict) and row["status"] != "error", row
        assert row["dp_attention"] is p.shape.dp_attention
        b = bounds(loose.deployments[p.shape], dem, slo)
        assert row["ttft_p99_s"] >= b.ttft_s * (1 - 1e-9), p.key
        assert b.tpot_s is not None and row["tpot_p99_s"] >= b.tpot_s * (1 - 1e-9), p.key
        screened = simulate_task(ctx, replace(task, screen=30))
        assert isinstance(screened, Screened) and screened.error is None
        for key, least in (("ttft", screened.ttft_s), ("tpot", screened.tpot_s), ("e2e", screened.e2e_s)):
            assert least is None or row[f"{key}_p99_s"] >= least * (1 - 1e-9), (p.key, key)


@pytest.mark.parametrize(
    ("engine", "expected", "yaml"),
    [
        ("vllm", ["--tensor-parallel-size 1", "--data-parallel-size 2", "--enable-expert-parallel"], ""),
        ("sglang", ["--tp-size 2", "--dp-size 2", "--enable-dp-attention"], ""),
        ("trtllm", ["--tp_size 2", "--max_batch_size 128"], "enable_attention_dp: true"),
    ],
)  # fmt: skip
def test_a_launch_command_runs_attention_data_parallel_as_its_engine_does(
    engine: str, expected: list[str], yaml: str
) -> None:
    from ridgeline.deployment import Deployment

    d = Deployment.build("qwen3-30b-a3b", "h100-sxm", weights="fp8", maths="fp8", kv_dtype="fp8", tp=2,
                         dp_attention=True, engine=engine)  # fmt: skip
    found = launch(launch_row(engine, dp_attention=True), "Qwen/Qwen3-30B-A3B", d, 16, 0.9)
    assert found is not None
    for part in expected:
        assert part in found.command
    if yaml:
        assert yaml in found.files["extra-llm-api-options.yaml"]
    plain = launch(launch_row(engine), "Qwen/Qwen3-30B-A3B", d, 16, 0.9)
    assert (
        plain is not None and "--dp-size" not in plain.command and "--data-parallel-size" not in plain.command
    )


def test_dp_attention_on_the_command_line_is_on_or_off(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "search", "--model", "qwen3-30b-a3b", "--dp-attention", "engine", *TRAFFIC)
    assert code == 2 and "on or off" in err and len(err.strip().splitlines()) == 1


def test_a_mixture_of_experts_model_weighs_both_layouts_by_default() -> None:
    """Engines serve large MoE models with attention data-parallel, so the search tries both
    ways for one unless told; a dense model's axis is off. At TP 1 the two are one shape."""
    moe = make_space({"gpu": "h200", "tp": "1,8", "weights": "fp8", "maths": "fp8", "kv_dtype": "bf16",
                      "engine": "sglang"}, None, get_model("deepseek-v3"))  # fmt: skip
    assert moe.dp_attention == (False, True)
    assert [(s.tp, s.dp_attention) for s in moe.shapes()] == [(1, False), (8, False), (8, True)]
    dense = make_space({"gpu": "h200", "tp": "1,8", "engine": "sglang"}, None, get_model("llama-3.1-70b"))
    assert dense.dp_attention == (False,)
    only = make_space({"gpu": "h200", "tp": "1", "weights": "fp8", "maths": "fp8", "kv_dtype": "bf16",
                       "engine": "sglang", "dp_attention": "on"}, None, get_model("deepseek-v3"))  # fmt: skip
    assert [(s.tp, s.dp_attention) for s in only.shapes()] == [
        (1, True)
    ]  # asked for alone: kept, then invalid


def test_maths_auto_runs_each_engines_own_and_estimates_price() -> None:
    """`--maths auto`: each point runs the maths `estimate` runs without --maths, the engine's
    for its weights on its accelerator: llama.cpp's int4 weights in int8 (its MMQ kernels) on
    an RTX 4090, vLLM's fp8 weights in fp8 on an H100 but in bf16 on an A100 (no fp8 peak). A
    point's deployment is then exactly estimate's, so its lone-request TTFT bound is too."""
    from ridgeline.deployment import Deployment
    from ridgeline.engines import engines
    from ridgeline.hardware import get_accelerator
    from ridgeline.predict import estimate_on
    from ridgeline.search.prune import build

    arch = get_model("llama-3.1-8b")
    space = make_space({"gpu": "rtx-4090,h100-sxm,a100-80gb-sxm", "tp": "1", "weights": "int4-g128,fp8",
                        "maths": "auto", "kv_dtype": "bf16", "engine": "llamacpp,vllm", "replicas": "1"},
                       None, arch)  # fmt: skip
    profiles, gpus = engines(), {g: get_accelerator(g) for g in space.gpu}
    ran = {}
    for shape in space.shapes():
        d = build(arch, shape, gpus, profiles)
        ran[shape.engine, shape.gpu, shape.weights] = d.prec.maths
        alone = Deployment.build(arch, shape.gpu, weights=shape.weights, engine=shape.engine)
        assert d.prec == alone.prec and estimate_on(d).ttft_s == estimate_on(alone).ttft_s
    assert ran["llamacpp", "rtx-4090", "int4-g128"] == "int8"
    assert ran["vllm", "h100-sxm", "fp8"] == "fp8" and ran["vllm", "a100-80gb-sxm", "fp8"] == "bf16"
    assert ran["vllm", "h100-sxm", "int4-g128"] == "bf16"  # W4A16: Marlin unpacks into bf16
    with pytest.raises(RidgelineError, match="auto is each engine's own maths"):
        make_space({"maths": "auto,fp8"}, None, arch)
