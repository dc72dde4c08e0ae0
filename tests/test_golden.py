"""Every modelled number the seed documents state, reproduced within its tolerance.

The cases live in tests/data/golden/seed_cases.csv, an identical copy of
../shared/golden/seed_cases.csv; its README gives the conventions.
"""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from ridgeline import estimate
from ridgeline.deployment import Deployment
from ridgeline.ledger import (
    TRAINING_BYTES_PER_PARAM,
    kv_bytes,
    model_weight_bytes,
    pass_work,
    training_flops_per_token,
)
from ridgeline.memory import plan
from ridgeline.models import get_model
from ridgeline.parallel import make_parallel
from ridgeline.request import compute_bound_tokens
from ridgeline.step import decode_step, prefill_step

GOLDEN = Path(__file__).parent / "data" / "golden" / "seed_cases.csv"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "golden" / "seed_cases.csv"
ROWS = list(csv.DictReader(GOLDEN.open()))


def _int(row: dict[str, str], key: str, default: int = 0) -> int:
    return int(row[key]) if row[key] else default


def machine(row: dict[str, str], **changes: str):
    return Deployment.build(
        changes.get("model", row["model"] or "llama-3.1-8b"),
        changes.get("gpu", row["gpu"] or "h100-sxm"),
        weights=changes.get("weights", row["weights"] or "bf16"),
        tp=_int(row, "tp", 1),
        preset=row["preset"] or "ideal",
    )


def value(row: dict[str, str]) -> float | str | bool:
    q = row["quantity"]
    batch, context, prompt = _int(row, "batch", 1), _int(row, "context"), _int(row, "prompt")
    m = machine(row)
    if q in ("ttft_s", "tpot_s", "total_s", "decode_share"):
        e = estimate(
            row["model"], row["gpu"], weights=row["weights"], prompt=prompt, output=_int(row, "output"),
            batch=batch, preset=row["preset"],
        )  # fmt: skip
        return getattr(e, q)
    if q == "parameters":
        return get_model(row["model"]).parameters
    if q == "training_flops_per_token":
        return training_flops_per_token(get_model(row["model"]))
    if q == "training_bytes_per_param":
        return TRAINING_BYTES_PER_PARAM
    if q == "ridge":
        return m.ridge
    if q == "weight_bytes":
        return model_weight_bytes(m.arch, m.prec)
    if q == "weight_bytes_per_gpu":
        return plan(m, context, batch).per_gpu.weight_bytes
    if q == "fits":
        return plan(m, context, batch).fits
    if q == "kv_bytes_per_token":
        return pass_work(m.arch, m.prec, 1).kv_write_bytes
    if q == "kv_bytes":
        return batch * kv_bytes(m.arch, m.prec, context)
    if q == "kv_share_of_weights":
        return batch * kv_bytes(m.arch, m.prec, context) / model_weight_bytes(m.arch, m.prec)
    if q == "compute_bound_tokens":
        return compute_bound_tokens(m)
    if q.startswith("prefill_"):
        step = prefill_step(m, prompt, batch)
        work = pass_work(m.arch, m.prec, prompt, 0, batch)
        return {
            "prefill_flops": step.flops,
            "prefill_time_s": step.time_s,
            "prefill_intensity": step.intensity,
            "prefill_attention_share": work.attention_flops / work.flops,
        }[q]
    step = decode_step(m, context, batch)
    rate = 1.0 / step.time_s
    if q == "decode_flops_per_token":
        return step.flops / batch
    if q == "decode_step_time_s":
        return step.time_s
    if q == "decode_tokens_per_s":
        return rate
    if q == "batch_tokens_per_s":
        return batch * rate
    if q == "decode_intensity":
        return step.intensity
    if q == "decode_bound":
        return step.bound
    if q == "decode_speedup_vs_bf16":
        other = machine(row, weights=row["reference"])
        return rate * decode_step(other, context, batch).time_s
    if q == "decode_speedup_vs_gpu":
        other = machine(row, gpu=row["reference"])
        return rate * decode_step(other, context, batch).time_s
    if q == "fraction_of_decode_ceiling":
        return float(row["reference"]) / rate
    raise AssertionError(f"golden quantity {q} has no computation")


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['id']}-{r['quantity']}" for r in ROWS])
def test_golden_row(row: dict[str, str]) -> None:
    got = value(row)
    expected = row["expected"]
    if expected in ("true", "false"):
        assert got is (expected == "true"), row["source"]
    elif expected in ("memory", "compute"):
        assert got == expected, row["source"]
    else:
        assert float(got) == pytest.approx(float(expected), abs=float(row["tolerance"])), row["source"]


def test_golden_copy_matches_shared() -> None:
    if not SHARED.exists():
        pytest.skip("../shared is not beside this checkout")
    assert GOLDEN.read_text() == SHARED.read_text()


def test_every_golden_row_is_covered() -> None:
    assert len(ROWS) == 40 and len({r["id"] for r in ROWS}) == 40


def test_tp_rows_use_the_split() -> None:
    """Weights per GPU = parameters x bytes / tensor-parallel size."""
    m = Deployment.build("llama-3.1-70b", preset="ideal")
    m4 = replace(m, par=make_parallel(m.arch, 4))
    assert plan(m4, 0).per_gpu.weight_bytes == pytest.approx(m.arch.parameters * 2 / 4)
