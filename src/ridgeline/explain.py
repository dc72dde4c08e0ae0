"""Say in a line or two what dominates a request and what would help most, computed
from the estimate's own numbers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from ridgeline.deployment import Deployment
from ridgeline.engines import FORMAT_BITS, float4_native, stored_dtype, stored_format, unpacked
from ridgeline.memory import MemoryPlan, held_whole_bytes
from ridgeline.precision import BITS, Precision
from ridgeline.request import Timeline
from ridgeline.roofline import StepTime
from ridgeline.step import decode_step

WORTH_SAYING = 1.1  # the least speed-up a suggestion names: below it, it would read "1.0x faster"


def _side(step: StepTime, m: Deployment) -> str:
    """Where the step sits against the ridge that decides its bound: the preset's effective
    ridge, or under an engine profile the step's own (StepTime.ridge), since its kernels reach
    a different share of the peak at each shape (short matmuls, narrow experts)."""
    i = float(step.intensity)
    ridge, named = m.effective_ridge, "the effective ridge of {ridge}"
    if m.engine is not None and float(step.compute_s) > 0:
        ridge = float(step.ridge)
        named = "the ridge of {ridge} that " + m.engine.label + "'s kernels reach on this step"
    ratio = i / ridge
    where = "above" if step.bound == "compute" else "below"
    times = f"{ratio:.1f}x" if ratio >= 1 else f"1/{1 / ratio:.0f} of"
    if 0.5 <= ratio < 1:  # not "1/1 of" just below it: hundredths, rounded down
        times = f"{math.floor(ratio * 100) / 100:.2f}x"
    return f"{i:,.1f} FLOPs per byte, {times} {named.format(ridge=f'{ridge:,.0f}')} ({where} it)"


def explain(
    m: Deployment,
    t: Timeline,
    mem: MemoryPlan,
    prompt: int,
    batch: int,
    busiest_reads: float = 1.0,
    unmeasured: Sequence[str] = (),
    busiest_attention: float = 1.0,
    one_source: Sequence[str] = (),
) -> list[str]:
    gpu = m.hw.name
    tokens = batch * prompt
    p = t.prefill
    if p.host_bound:  # the roofline's bound is the GPU's; the step waits on the engine's CPU
        waits = f", but the engine's host work ({float(p.host_s) * 1e3:,.2f} ms) outlasts the GPU's"
        answers = "the host's work"
    else:
        waits, answers = "", "arithmetic" if p.bound == "compute" else "memory bandwidth"
    lines = [
        f"Prefill of {tokens:,} token{'s' if tokens != 1 else ''} does {_side(p, m)}: "
        f"{p.bound}-bound on {gpu}{waits}, so TTFT {t.ttft_s * 1e3:,.1f} ms answers to {answers}"
        + _before_first_token(m, t),
    ]
    d = t.first_decode  # the figures below are the step's own, one GPU's share
    weights = float(d.weight_bytes_per_gpu)
    kv = float(d.kv_bytes_per_gpu)
    waits = ", but the step waits on the engine's host (below)" if d.host_bound else ""
    lines.append(
        f"Decode at batch {batch} does {_side(d, m)}: {d.bound}-bound{waits}; each step reads "
        f"{weights / 1e9:,.2f} GB of weights and {kv / 1e9:,.2f} GB of KV cache per GPU, "
        f"so TPOT is {t.tpot_s * 1e3:,.2f} ms and decode is {t.decode_share:.0%} of the request."
    )
    lines.append(_advice(m, t, mem, prompt, batch, weights, kv))
    if m.par.pp > 1:
        lines.append(
            f"{m.par.pp} pipeline stages each hold 1/{m.par.pp} of the layers but take turns: with one "
            f"micro-batch each GPU idles {m.par.pipeline_bubble:.0%} of every step (the bubble), "
            "so pipeline parallelism buys memory, not latency."
        )
    if busiest_reads >= WORTH_SAYING:  # 1 without expert parallelism
        lines.append(
            f"With experts spread over {m.par.ep} GPUs, each holds whole experts: at batch {batch} the "
            f"busiest reads {busiest_reads:.1f}x the mean GPU's routed experts and the step waits for it, "
            "where tensor parallelism alone slices every expert evenly."
        )
    if m.par.dp_attention:
        lines.append(_dp_attention(m, mem, batch, busiest_attention))
    if m.engine is not None and t.prefill.bound == "compute":
        lines += [line for line in (_sustained(m, m.engine.label), _matmul_path(m)) if line]
    if m.engine is not None and BITS[m.prec.maths] < 16:
        lines.append(_narrow_maths(m, m.engine.label))
    if m.engine is not None and d.bound == "memory":
        line = _streamed(m, m.engine.label)
        if line:
            lines.append(line)
    if m.engine is not None and m.hw.dies > 1:
        lines.append(
            f"{m.hw.name} is one GPU of {m.hw.dies} dies: each kernel ends only when every die's cores "
            f"have, so a step pays its launches {m.hw.dies} times ({d.overhead_s * 1e3:,.2f} ms of this "
            f"decode step's {d.time_s * 1e3:,.2f} ms): small models and short steps feel it most."
        )
    if m.engine is not None:
        lines += evidence(m.engine.label, unmeasured, one_source)
    return lines


def evidence(profile: str, unmeasured: Sequence[str], one_source: Sequence[str]) -> list[str]:
    """What a band is worth where the prediction rests on terms no published run moved
    (EngineProfile.unmeasured), or one source's runs alone (EngineProfile.one_source)."""
    lines = []
    if unmeasured:
        lines.append(
            f"{profile}'s profile keeps its priors for {', '.join(unmeasured)}: no published run in "
            "the corpus moved them, so its band, made of other runs, may be too narrow."
        )
    if one_source:
        them = "them" if len(one_source) > 1 else "it"
        lines.append(
            f"{profile}'s profile fits {', '.join(one_source)} to one source's runs alone: no second "
            f"source confirms {them}, so a run unlike that source's may miss by more than its band says."
        )
    return lines


def _before_first_token(m: Deployment, t: Timeline) -> str:
    """The end of the prefill's line: where TTFT is more than the prefill, what the rest is
    (an engine's server before the first token, or a calibration's fixed offset)."""
    if t.offset_s <= 0:
        return "."
    who = (
        f"{m.engine.label}'s server spends before the first token (tokenising, the chat template, "
        "the HTTP round trip)"
        if m.engine is not None
        else "the calibration's fixed offset adds before the first token (the network, a queue)"
    )
    return (
        f" in its prefill's {float(t.prefill.time_s) * 1e3:,.1f} ms; the other {t.offset_s * 1e3:,.1f} ms "
        f"are what {who}."
    )


def _narrow_maths(m: Deployment, label: str) -> str:
    """How an engine multiplies in fewer than 16 bits: weights and activations both in that
    dtype (W8A8, W4A4), or narrower weights unpacked into it (llama.cpp's int8 MMQ)."""
    maths = m.prec.maths
    bits = FORMAT_BITS[stored_format(m.arch, m.prec)]
    if bits == BITS[maths]:
        how = f"weights and activations both in {maths}"
    elif float4_native(m.arch, m.prec, m.hw):
        how = f"its 4-bit float weights beside {maths} activations, as the tensor cores take them"
    else:
        how = f"its {bits:.0f}-bit weights unpacked into {maths} on the tensor cores"
    return (
        f"{label} multiplies in {maths} ({how}), at {m.hw.name}'s {maths} peak: it speeds the "
        "compute-bound prefill, not the bytes decode reads; --maths bf16 prices the matmuls in bf16."
    )


HELD_BELOW = 0.75  # a part's sustained share of its peak worth a line of its own


def _sustained(m: Deployment, label: str) -> str:
    """Where a large matmul on the part sustains well under its data sheet's peak (the
    catalogue's matmul_share: measured, or the same die's measured boards' rate at this
    board's power), which an engine profile's compute-bound steps answer to; "" where it sustains most."""
    hw, maths = m.hw, m.prec.maths
    share = hw.achievable(maths)
    if share >= HELD_BELOW:
        return ""
    return (
        f"A large {maths} matmul on {hw.name} sustains {hw.sustained(maths) / 1e12:,.0f} TFLOP/s, "
        f"{share:.0%} of the data sheet's {hw.peak(maths) / 1e12:,.0f} (the catalogue's matmul_share: "
        "under that load its board power, heat and kernels hold it below the boost clock the peak "
        f"assumes), and {label}'s kernels reach their shares of that: prefill answers to it."
    )


def _matmul_path(m: Deployment) -> str:
    """What the engine's matmuls keep of their rate for the way they take the weights, where
    a compute-bound prefill answers to it: weights narrower than 16-bit maths unpacked inside
    each matmul (int4 under bf16, MXFP4 on a part without an fp4 MMA) keep the profile's
    dequant share, and on a part whose full rate needs asynchronous MMA its dequant_async of
    that again where they feed the warp-level MMA (not where the profile says unpack_async);
    a profile whose every matmul runs at the warp-level MMA's rate (warp_mma_only) keeps
    dequant_async on its 16-bit ones too. "" elsewhere, and for narrower maths, which
    _narrow_maths tells."""
    engine, hw, maths = m.engine, m.hw, m.prec.maths
    fmt = stored_format(m.arch, m.prec)
    native = float4_native(m.arch, m.prec, hw)
    if engine is None:
        return ""
    warp = hw.async_mma and engine.warp_mma(fmt, maths, native)
    if not unpacked(fmt, maths, native):
        return (
            f"{hw.name}'s tensor cores reach their full rate only through asynchronous MMA, and "
            f"{engine.label}'s matmuls reach what the warp-level MMA does there: "
            f"{engine.dequant_async:.0%} of their share (its profile's dequant_async), its 16-bit ones too."
            if warp
            else ""
        )
    if BITS[maths] < 16:
        return ""
    dtype = stored_dtype(m.arch, m.prec.weights) or fmt
    kept = engine.dequant_factor(fmt, maths, native=native)  # the unpacking's share, before any MMA's
    line = (
        f"{engine.label} unpacks its {FORMAT_BITS[fmt]:.0f}-bit weights ({dtype}) into {maths} inside "
        f"each matmul, keeping {kept:.0%} of the matmul rate (its profile's dequant.{fmt})"
    )
    if warp:
        line += (
            f", and {engine.dequant_async:.0%} of that again (dequant_async): the unpacked weights feed "
            f"the warp-level MMA, not {hw.name}'s asynchronous one"
        )
    elif hw.async_mma:
        line += f", and no more: its kernels unpack them into the operands of {hw.name}'s asynchronous MMA"
    return line + ". The compute-bound prefill pays it; decode reads the packed bytes."


def _streamed(m: Deployment, label: str) -> str:
    """Where the engine's matrix-vector kernels, not the memory, set how fast a decode step
    reads its weights: the cores' bytes in flight (its profile's memory.stream), below the
    bandwidth's share (EngineProfile.cores_bind); "" where they do not."""
    engine, hw = m.engine, m.hw
    fmt = stored_format(m.arch, m.prec)
    if engine is None or not engine.cores_bind(fmt, hw):
        return ""
    rate = engine.weight_bytes_per_s(fmt, hw, engine.vendor_memory_factor(hw.vendor_name))
    return (
        f"{label}'s matrix-vector kernels stream {rate / 1e12:.2f} TB/s of weights on {hw.name} "
        f"({hw.units} GPU cores at {hw.clock_hz / 1e9:.2f} GHz, {engine.stream[fmt]:.1f} bytes a core a "
        f"clock): {rate / hw.bandwidth_bytes_per_s:.0%} of its {hw.bandwidth_bytes_per_s / 1e12:.2f} TB/s, "
        "so decode waits on the loads its cores keep in flight, not on the memory."
    )


def _dp_attention(m: Deployment, mem: MemoryPlan, batch: int, busiest: float) -> str:
    """What data-parallel attention buys (a cache with nothing replicated, and no all-reduce
    after attention) and costs (what it holds whole on every GPU, and the busiest GPU's share
    of the sequences)."""
    tp = m.par.tp
    held = held_whole_bytes(m)
    what = "every weight but the routed experts" if m.par.dp_dense else "all the attention weights"
    line = (
        f"Attention runs data-parallel over the {tp} GPUs: each holds {what} ({held / 1e9:,.2f} GB) "
        f"and the whole cache of 1/{tp} of the sequences, none of it replicated (room for "
        f"{mem.max_batch:,} sequences)"
    )
    if busiest < WORTH_SAYING:
        return line + "."
    return (
        line + f"; at batch {batch} the busiest GPU holds {math.ceil(batch / tp)} of them and each "
        f"step waits for it, {busiest:.1f}x the mean GPU's data-parallel work: it pays at large "
        "batches, not at small ones."
    )


def _advice(
    m: Deployment, t: Timeline, mem: MemoryPlan, prompt: int, batch: int, weights: float, kv: float
) -> str:
    if not mem.fits:
        fix = mem.cheapest
        how = f"; cheapest plan that serves: {fix.weights} weights on {fix.gpus} GPU(s)" if fix else ""
        return (
            f"It does not fit: each GPU needs {mem.per_gpu.total_bytes / 1e9:,.1f} GB of "
            f"{mem.per_gpu.usable_bytes / 1e9:,.1f} GB usable{how}."
        )
    d = t.first_decode
    if d.host_bound:  # neither maths nor bytes: the engine's CPU work sets the step
        waits = (
            f"At batch {batch} the engine's host work ({float(d.host_s) * 1e3:,.2f} ms a step on "
            f"{m.hw.name}'s host) outlasts the GPU's ({float(d.gpu_s) * 1e3:,.2f} ms): the step waits "
            "on the CPU and the GPU idles, so "
        )
        per_step = m.engine_reach.host_step_s if m.engine else 0.0  # on this accelerator's host
        if per_step >= float(d.host_s) - per_step:  # the step's own work, not its sequences'
            return waits + (
                "a faster host, not faster maths or narrower weights, would shorten TPOT; the work is "
                "the step's, not each sequence's, so a larger batch costs the host no more and raises "
                "throughput until the GPU's work outlasts it."
            )
        return waits + (
            "fewer sequences a replica or a faster host, not faster maths or narrower weights, would "
            "shorten TPOT."
        )
    comm = float(d.comm_s)
    if comm > 0.25 * float(t.first_decode.time_s):
        return (
            f"Communication is {comm / float(t.first_decode.time_s):.0%} of each decode step: "
            "fewer GPUs or a faster interconnect would help more than more GPUs."
        )
    if t.decode_share < 0.5:
        return (
            "The prompt dominates: trim or cache it (prefix caching), or run the maths in fp8, to cut TTFT."
        )
    if t.first_decode.bound == "compute":
        narrow = ("fp8", "int8", "fp4")
        narrower = next((f for f in narrow if BITS[f] < BITS[m.prec.maths] and m.hw.has_peak(f)), "")
        helps = f"faster maths ({narrower}) helps." if narrower else "a part with more FLOP/s helps."
        return f"Decode is already compute-bound: more batch only trades latency; {helps}"
    if kv > weights:
        return (
            f"KV reads outweigh the weights ({kv / weights:.1f}x): an fp8 KV cache or shorter "
            "contexts help most; more batch adds still more KV."
        )
    room = f" (memory holds {mem.max_batch:,})" if mem.max_batch > batch else ""
    advice = (
        f"Weight reads dominate decode: batching shares them, so more sequences per step raise "
        f"throughput almost for free{room}"
    )
    if m.prec.weight_bytes_per_param > Precision("int4-g128").weight_bytes_per_param:
        int4 = replace(m, prec=Precision("int4-g128", m.prec.maths, m.prec.kv))
        faster = float(t.first_decode.time_s) / float(decode_step(int4, prompt, batch).time_s)
        if faster >= WORTH_SAYING:  # not from 4.5-bit weights to 4.125 ("1.0x faster")
            advice += f"; int4-g128 weights would make each step {faster:.1f}x faster"
    return advice + "."
