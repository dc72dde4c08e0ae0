"""The film's words on paper: `captions.vtt` (one cue per beat) and `transcript.md` (the
page: headline, transcript with time stamps, the maths filled in, the caveats)."""

from __future__ import annotations

from collections.abc import Sequence

from ridgeline.film.figures import PRESET, PROMPT_TOKENS, Figures
from ridgeline.film.measured import Measured
from ridgeline.film.script import Beat
from ridgeline.film.spoken import (
    article,
    clock,
    si,
    spoken_count,
    spoken_gpus,
    vtt_time,
    written_count,
    written_time,
)
from ridgeline.film.voice import Timing

TITLE = "Prefill vs decode: time to first token and tokens per second"


def deployment(f: Figures) -> str:
    """ "Llama 3.1 8B on one H100 in BF16"."""
    weights = "its checkpoint's own weights" if f.weights == "file" else f.weights.upper()
    return f"{f.model} on {spoken_gpus(f.gpus, f.gpu)} in {weights}"


def captions(beats: Sequence[Beat], timing: Timing, f: Figures) -> str:
    source = "the narration's measured audio" if timing.voiced else "the seed's reading pace"
    lines = [
        "WEBVTT",
        "",
        f"NOTE ridgeline film: {deployment(f)}, the {PRESET} preset. Cue times from {source}.",
        "",
    ]
    for beat, (start, end) in zip(beats, timing.cues, strict=True):
        lines += [str(beat.number), f"{vtt_time(start)} --> {vtt_time(end)}", beat.text, ""]
    return "\n".join(lines)


def _headline(f: Figures) -> str:
    prefill = "arithmetic" if f.prefill.prefill.bound == "compute" else "memory bandwidth"
    decode = "memory bandwidth" if f.decode.decode.bound == "memory" else "arithmetic"
    return (
        f"Watch {spoken_gpus(f.gpus, f.gpu)} serve {f.model}: prefill floods the whole prompt "
        f"through at once and is limited by {prefill}, while decode drips one token at a time, "
        f"rereads all {si(f.decode.memory.weight_bytes, 'B')} of weights for each, and is limited "
        f"by {decode}."
    )


def _maths(f: Figures) -> list[str]:
    e, p, d = f.prefill, f.prefill.prefill, f.decode.decode
    c = f.cache.decode
    peak, bw = si(e.gpu.peak_flops, "FLOP/s"), si(e.gpu.bandwidth_bytes_per_s, "B/s")
    per_gpu = "" if f.gpus == 1 else " per GPU"
    return [
        "## The maths",
        "",
        f"Every number below is `ridgeline estimate --preset {PRESET}` for this deployment.",
        "",
        "### The roofline",
        "",
        "```",
        "time  = max(operations / peak FLOP/s, bytes moved / bandwidth)",
        f"ridge = {peak} / {bw} = {written_count(e.ridge)} operations per byte",
        "```",
        "",
        f"Below {written_count(e.ridge)} operations per byte {article(f.gpu)} {f.gpu} waits on memory "
        "(the slope); above it, on arithmetic (the flat roof).",
        "",
        "### Prefill: the whole prompt in one pass",
        "",
        "Two operations per weight per token, plus causal attention, which grows with the square of "
        f"the prompt: 2PN + 2LdN², with P = {spoken_count(e.model.parameters, sig=3)} parameters, N = "
        f"{PROMPT_TOKENS:,} tokens, L = {e.model.layers} layers and d = {e.model.hidden:,}.",
        "",
        "```",
        f"operations  = {si(p.flops, 'FLOP')} for {PROMPT_TOKENS:,} tokens "
        f"({p.attention_share:.1%} of it attention)",
        f"compute     = {written_time(p.compute_s)}{per_gpu}    memory = {written_time(p.memory_s)}"
        + ("" if p.comm_s == 0 else f"    communication = {written_time(p.comm_s)}"),
        f"TTFT        = {written_time(e.ttft_s)}   ({p.bound}-bound, {p.intensity:,.0f} operations per byte)",
        "```",
        "",
        "### Decode: one token, every weight",
        "",
        "```",
        f"bytes per step = {si(d.weight_bytes_per_gpu, 'B')} of weights + "
        f"{si(d.kv_bytes_per_gpu, 'B')} of KV cache{per_gpu}   (batch 1, a one-token cache)",
        f"step           = {written_time(d.time_s)}   "
        f"({d.bound}-bound, {d.intensity:.2f} operations per byte)",
        f"tokens/s       = {written_count(f.decode.tokens_per_s)} at best",
        "```",
        "",
        "### Why the cache slows decode",
        "",
        "```",
        f"KV bytes per token = {si(f.cache.memory.kv_bytes_per_token, 'B')}",
        f"a {int(f.cache.inputs['prompt']):,}-token cache = {si(c.kv_bytes_per_gpu, 'B')}{per_gpu}, "
        f"{c.kv_bytes_per_gpu / c.weight_bytes_per_gpu:.1%} of the weights' "
        f"{si(c.weight_bytes_per_gpu, 'B')}",
        f"tokens/s = {written_count(f.cache.tokens_per_s)} with it, "
        f"{written_count(f.decode.tokens_per_s)} without",
        "```",
        "",
    ]


def _caveats(f: Figures, measured: Measured | None) -> list[str]:
    lines = [
        "## The honest caveats",
        "",
        "- The roofline is a ceiling, not a prediction: real kernels reach perhaps 40 to 70 percent "
        "of peak arithmetic and 70 to 90 percent of peak bandwidth, and the film's arithmetic "
        f"(the `{PRESET}` preset) ignores activation traffic and kernel overheads.",
    ]
    if measured is not None:
        lines.append(
            "- A provider rarely publishes its hardware, its batch size or its scheduler, so the "
            "measured numbers include queueing and other users' load, and holding them against "
            f"{f.gpu}'s ceiling assumes a GPU the provider may not name."
        )
    else:
        lines.append(
            "- Beats 7 and 8 are predictions: no endpoint was measured. `ridgeline film --measured "
            "FILE.jsonl` puts measurements there."
        )
    if f.weights.startswith(("int", "fp8")):
        lines.append(
            f"- {f.weights.upper()} here means weight-only quantisation with the arithmetic in BF16."
        )
    if f.gpus > 1:
        lines.append(
            "- Tensor parallelism's communication is a simple model: ring all-reduces at the "
            "interconnect's bandwidth plus a fixed latency each, never overlapped with compute."
        )
    return [*lines, ""]


def transcript(beats: Sequence[Beat], timing: Timing, f: Figures, measured: Measured | None = None) -> str:
    minutes = clock(timing.duration_s)
    lines = [
        f"# {TITLE}",
        "",
        f"**ridgeline film** · {deployment(f)} · the `{PRESET}` preset · film, {minutes}",
        "",
        f"> {_headline(f)}",
        "",
        "## Transcript",
        "",
    ]
    for beat, (start, _) in zip(beats, timing.cues, strict=True):
        lines += [f"### {clock(start)} {beat.title}", "", beat.text, ""]
        lines += [f"- {note}" for note in beat.notes]
        if beat.notes:
            lines.append("")
    lines += _maths(f)
    lines += _caveats(f, measured)
    source = "the narration's measured audio" if timing.voiced else "the seed's reading pace"
    lines.append(f"Time stamps from {source}; the film is {timing.duration_s:.1f} s long.")
    return "\n".join(lines) + "\n"
