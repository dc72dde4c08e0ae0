"""The film's nine beats in the seed's words, every number from the core's figures.

Each beat is one caption cue and one section of the transcript. A sentence that would stop
being true for a deployment changes: decode that turns compute-bound, a model that needs
more than one GPU, an accelerator with no predecessor, measurements that disagree with
the bytes. Where a number rests on an assumption, the beat's notes state it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ridgeline.film.figures import BATCH_CONTEXT_TOKENS, PROMPT_TOKENS, Figures
from ridgeline.film.measured import Group, Measured
from ridgeline.film.spoken import (
    article,
    plain,
    si,
    spoken_bandwidth,
    spoken_bytes,
    spoken_count,
    spoken_flops,
    spoken_gpus,
    spoken_percent,
    spoken_rate,
    spoken_ratio,
    spoken_share,
    spoken_time,
    spoken_times,
    spoken_tokens,
    written_time,
)

TITLES = (
    "Two waits",
    "Prefill",
    "Decode",
    "The roofline",
    "Batching",
    "Wasted money",
    "Measured",
    "The cache rides along",
    "Two budgets",
)
SHORT_PROMPT_TOKENS = 500  # below this a measured prompt is "a short prompt"
SAME_TTFT = 0.15  # two TTFTs within 15% are "about" one number
NETWORK_SHARE = 0.5  # predicted prefill under half the measured TTFT: "mostly network"
EXPLAINED = 0.35  # a measured slowdown within 35% (or 4 points) of the extra bytes is explained by them


@dataclass(frozen=True)
class Beat:
    number: int
    title: str
    text: str  # the caption, as spoken
    notes: tuple[str, ...] = field(default_factory=tuple)  # assumptions and details, for the page

    def to_dict(self) -> dict[str, Any]:
        return {"number": self.number, "title": self.title, "text": self.text, "notes": list(self.notes)}


def _a(word: str) -> str:
    return f"{article(word)} {word}"


def _who(f: Figures) -> str:
    """ "an H100" or "two H100s": who does the work."""
    return _a(f.gpu) if f.gpus == 1 else spoken_gpus(f.gpus, f.gpu)


def _weights(f: Figures) -> str:
    return "" if f.weights == "file" else f"{f.weights.upper()} "


def beat_two_waits(f: Figures) -> Beat:
    prefill, decode = f.prefill.prefill.bound, f.decode.decode.bound
    if prefill != decode:
        why = "each limited by a different part of the GPU"
    else:
        waits = "memory" if decode == "memory" else "arithmetic"
        why = f"and on {_a(f.gpu)} both wait on {waits}"
    text = (
        "Paste a long document into a chat and you wait for the first word, then the rest arrive "
        f"at a steady pace, because answering is two jobs, prefill and decode, {why}."
    )
    notes: list[str] = []
    if f.one_gpu is not None:
        one = f.one_gpu
        text += (
            f" {f.model}'s weights alone are {spoken_bytes(one.memory.weight_bytes)}, more than "
            f"one {f.gpu} can serve from its {spoken_bytes(one.gpu.memory_bytes)}, so this film "
            f"splits them over {spoken_gpus(f.gpus, f.gpu)}, each holding and rereading its share."
        )
        notes.append(
            f"One {f.gpu} does not hold {f.model} in {f.weights}: the film chose tensor parallelism "
            f"over {f.gpus} GPUs, the fewest that fit ({si(f.prefill.memory.per_gpu.total_bytes, 'B')} "
            f"of {si(f.prefill.memory.per_gpu.capacity_bytes, 'B')} on each)."
        )
    return Beat(1, TITLES[0], text, tuple(notes))


def beat_prefill(f: Figures) -> Beat:
    e = f.prefill
    p = e.prefill
    if f.gpus == 1:
        where = f"at {_a(f.gpu)}'s {spoken_flops(e.gpu.peak_flops)}"
    else:
        where = f"at {spoken_flops(e.gpu.peak_flops)} on each of {spoken_gpus(f.gpus, f.gpu)}"
    busy = "with every core busy" if p.bound == "compute" else "and even so the chip waits on memory"
    text = (
        f"Prefill pushes the whole prompt through in one pass: {plain(PROMPT_TOKENS)} tokens of "
        f"{f.model} is {spoken_count(p.flops)} operations, and {where} that takes "
        f"{spoken_time(p.time_s, approx='about')}, {busy}."
    )
    notes = [
        f"One prompt of {plain(PROMPT_TOKENS)} tokens at batch 1: {si(p.flops, 'FLOP')}, "
        f"{spoken_share(p.attention_share)} of it attention; {si(p.bytes, 'B')} moved.",
    ]
    if p.comm_s > 0:
        notes.append(f"The GPUs also exchange activations: {written_time(p.comm_s)} of the pass.")
    return Beat(2, TITLES[1], text, tuple(notes))


def beat_decode(f: Figures) -> Beat:
    e = f.decode
    d = e.decode
    wall = spoken_bytes(e.memory.weight_bytes)
    share = "" if f.gpus == 1 else f", {spoken_bytes(d.weight_bytes_per_gpu)} on each GPU,"
    step = spoken_time(d.time_s)
    rate = spoken_rate(e.tokens_per_s, approx="about")
    if d.bound == "memory":
        each = "" if f.gpus == 1 else " each,"
        needs = "needs" if f.gpus == 1 else "need"
        tail = (
            f"so even at {spoken_bandwidth(e.gpu.bandwidth_bytes_per_s)}{each} {_who(f)} {needs} "
            f"{step} a token, {rate} a second."
        )
        text = f"Decode is a drip: each new token rereads all {wall} of weights{share} for just "
    else:
        tail = (
            f"and at {spoken_flops(e.gpu.peak_flops)} those operations, not the reading, set the "
            f"pace: {step} a token, {rate} a second."
        )
        text = f"Decode is a drip: each new token rereads all {wall} of weights{share} for "
    text += f"{spoken_count(d.flops)} operations, {tail}"
    notes = [
        "The bare decode step: one user (batch 1) with a one-token cache, so the bytes are the "
        f"weights, {si(d.weight_bytes_per_gpu, 'B')} per GPU.",
    ]
    if d.comm_s > 0:
        notes.append(f"Of each step, {written_time(d.comm_s)} is the GPUs exchanging activations.")
    return Beat(3, TITLES[2], text, tuple(notes))


def beat_roofline(f: Figures) -> Beat:
    d, p = f.decode.decode, f.prefill.prefill
    ridge = spoken_count(f.prefill.ridge, sig=3)
    di = spoken_count(d.intensity, sig=2, words=True)
    per_byte = f"{di} operation{'' if di == 'one' else 's'} per byte it moves"
    if d.bound == "memory":
        first = f"decode does {per_byte} and sits low on the roofline's memory slope"
    else:
        first = f"decode does {per_byte}, enough to reach the flat compute roof"
    pi = spoken_count(p.intensity, sig=2)
    if p.bound == "compute":
        second = f"while prefill does {pi} and sits on the flat compute roof, past the ridge at {ridge}"
    else:
        second = f"while prefill does {pi} and, short of the ridge at {ridge}, still sits on the slope"
    text = f"That is the part people miss: {first}, {second}."
    notes = (
        f"Intensity is FLOPs per byte moved: decode {d.intensity:.2f}, prefill {p.intensity:,.0f}; "
        f"the ridge is {written_peak(f)} ÷ {si(f.prefill.gpu.bandwidth_bytes_per_s, 'B/s')}.",
    )
    return Beat(4, TITLES[3], text, notes)


def written_peak(f: Figures) -> str:
    return si(f.prefill.gpu.peak_flops, "FLOP/s")


def beat_batching(f: Figures) -> Beat:
    b = f.batched
    users = int(b.inputs["batch"])
    t1, t2 = f.decode.decode.time_s, b.decode.time_s
    grows = f"grows only from {spoken_times(t1, t2)}" if t2 < 2 * t1 else f"grows from {spoken_times(t1, t2)}"
    total = spoken_rate(b.batch_tokens_per_s, approx="over")
    alone = spoken_rate(f.decode.tokens_per_s)
    chip = "the chip turns out" if f.gpus == 1 else "the GPUs turn out"
    if b.decode.bound == "memory":
        text = f"So servers batch decode: {users} users share one read of the weights, the step {grows}, "
    else:
        text = (
            f"So servers batch decode: {users} users share one read of the weights, but that many "
            f"already cross the ridge, so the step {grows}, "
        )
    if b.memory.fits:
        text += f"and {chip} {total} tokens a second instead of {alone}."
    else:
        would = "the chip would turn out" if f.gpus == 1 else "the GPUs would turn out"
        text += (
            f"and {would} {total} tokens a second instead of {alone}, if their caches fitted, "
            "which they do not."
        )
    notes = [
        f"The {spoken_time(t2)} holds at a context of {BATCH_CONTEXT_TOKENS} tokens per user: each "
        f"of the {users} users also rereads its own cache, {si(b.decode.kv_bytes_per_gpu, 'B')} "
        f"in all per GPU, beside the {si(b.decode.weight_bytes_per_gpu, 'B')} of weights they share.",
    ]
    r = f.at_ridge
    if r.decode.bound == "memory":
        still = "stays memory bound: every sequence brings its own KV bytes"
    else:
        still = "turns compute bound: the shared read finally carries enough operations per byte"
    notes.append(
        f"Even at {int(r.inputs['batch'])} users (the ridge), each with {BATCH_CONTEXT_TOKENS} tokens "
        f"cached, this model {still}."
    )
    return Beat(5, TITLES[4], text, tuple(notes))


def _their(r: float, what: str, owner: str) -> str:
    """ "three times an A100's teraflops", "the same teraflops as an H100"."""
    if abs(r - 1) < 0.05:
        return f"the same {what} as {_a(owner)}"
    if r > 1:
        return f"{spoken_ratio(r)} {_a(owner)}'s {what}"
    return f"{spoken_percent(1 - r)} less {what} than {_a(owner)}"


def _its(r: float, what: str) -> str:
    """The second of a pair: "1.6 times its bandwidth", "the same bandwidth"."""
    if abs(r - 1) < 0.05:
        return f"the same {what}"
    if r > 1:
        return f"{spoken_ratio(r)} its {what}"
    return f"{spoken_percent(1 - r)} less {what}"


def _faster(s: float) -> str:
    if abs(s - 1) < 0.05:
        return "one user's decode gets no faster"
    if s < 1:
        return f"one user's decode gets {spoken_percent(1 - s)} slower"
    ratio = spoken_ratio(s)
    return f"one user's decode gets {'twice as fast' if ratio == 'twice' else ratio + ' faster'}"


def beat_wasted_money(f: Figures) -> Beat:
    e, v, lg = f.prefill, f.versus, f.long
    prompt = spoken_tokens(int(lg.inputs["prompt"]))
    wait = spoken_time(lg.ttft_s, places=1)
    attention = spoken_share(lg.prefill.attention_share)
    long = f"{article(prompt)} {prompt}-token prompt still waits {wait}, {attention} of that in attention"
    notes = [
        f"The long prompt: {int(lg.inputs['prompt']):,} tokens at batch 1, TTFT {written_time(lg.ttft_s)}, "
        f"attention {spoken_percent(lg.prefill.attention_share)} of its FLOPs."
    ]
    if v is None or f.versus_name is None:
        if f.no_predecessor:
            lead = f"ridgeline holds no earlier accelerator to set beside {_a(f.gpu)}, but most of its"
            notes.append(
                "No predecessor is known for this accelerator: pass --versus GPU to set one beside it."
            )
        else:
            lead = f"most of {_a(f.gpu)}'s"
        text = (
            f"The failure mode is buying arithmetic for chat: {lead} {spoken_flops(e.gpu.peak_flops)} "
            f"sit idle in one user's decode, which its {spoken_bandwidth(e.gpu.bandwidth_bytes_per_s)} "
            f"hold to {spoken_rate(f.decode.tokens_per_s)} tokens a second, while {long}."
        )
        return Beat(6, TITLES[5], text, tuple(notes))
    flops = e.gpu.peak_flops / v.gpu.peak_flops
    bandwidth = e.gpu.bandwidth_bytes_per_s / v.gpu.bandwidth_bytes_per_s
    speed = f.decode.tokens_per_s / v.tokens_per_s
    other = f.versus_name
    if flops > 1.15 * bandwidth:
        text = (
            f"The failure mode is buying arithmetic for chat: {_a(f.gpu)} has "
            f"{_their(flops, 'teraflops', other)} but only {_its(bandwidth, 'bandwidth')}, "
            f"so {_faster(speed)}, while {long}."
        )
    else:
        text = (
            f"Buying arithmetic for chat is the failure mode, and {_a(f.gpu)} avoids it: it has "
            f"{_their(flops, 'teraflops', other)} and {_its(bandwidth, 'bandwidth')}, "
            f"so {_faster(speed)}, while {long}."
        )
    notes.append(
        f"{f.gpu} against {other}: {written_peak(f)} against {si(v.gpu.peak_flops, 'FLOP/s')}, "
        f"{si(e.gpu.bandwidth_bytes_per_s, 'B/s')} against {si(v.gpu.bandwidth_bytes_per_s, 'B/s')}; "
        f"one user's decode {spoken_rate(f.decode.tokens_per_s)} against {spoken_rate(v.tokens_per_s)} "
        "tokens a second, on the same number of GPUs."
    )
    return Beat(6, TITLES[5], text, tuple(notes))


def _similar(a: float, b: float) -> bool:
    return abs(a - b) <= SAME_TTFT * max(a, b)


def _prompt_name(g: Group) -> str:
    if g.prompt_tokens < SHORT_PROMPT_TOKENS:
        return "a short prompt"
    return f"one of {spoken_tokens(g.prompt_tokens)} tokens"


def beat_measured(f: Figures, m: Measured | None, endpoint: str | None) -> Beat:
    if m is None:
        return _beat_predicted_ttft(f)
    who = f"{_weights(f)}{f.model}" + (f" on {endpoint}" if endpoint else "")
    s, mid, lg = m.short, m.middle, m.long
    if mid is not None and _similar(s.ttft_s, mid.ttft_s):
        first = (
            f"{spoken_time(s.ttft_s, approx='about', places=1)} for {_prompt_name(s)} or {_prompt_name(mid)}"
        )
        near = mid
    elif mid is not None:
        first = (
            f"{spoken_time(s.ttft_s)} for {_prompt_name(s)} and {spoken_time(mid.ttft_s)} "
            f"for {_prompt_name(mid)}"
        )
        near = mid
    else:
        first = f"{spoken_time(s.ttft_s)} for {_prompt_name(s)}"
        near = s
    predicted = f.measured_prompts[near.prompt_tokens]
    network = ", mostly network" if predicted.ttft_s < NETWORK_SHARE * near.ttft_s else ""
    text = f"Measured on a real endpoint, {who}, the first word came after {first}{network}"
    if lg is not None:
        text += f", and {spoken_time(lg.ttft_s)} for {spoken_tokens(lg.prompt_tokens)}."
    else:
        text += "."
    notes = [f"From {m.path}: the median of each prompt length's requests at the lowest load in the file."]
    for g in m.groups:
        e = f.measured_prompts[g.prompt_tokens]
        notes.append(
            f"{g.prompt_tokens:,} prompt tokens ({g.requests} requests): TTFT {written_time(g.ttft_s)} "
            f"measured, {written_time(e.ttft_s)} predicted."
        )
    return Beat(7, TITLES[6], text, tuple(notes))


def _beat_predicted_ttft(f: Figures) -> Beat:
    long = f.cache
    text = (
        f"Without a measured endpoint, here is the prediction: the first word after "
        f"{spoken_time(f.prefill.ttft_s)} for {plain(PROMPT_TOKENS)} tokens and "
        f"{spoken_time(long.ttft_s)} for {spoken_tokens(int(long.inputs['prompt']))}, on {_who(f)} "
        "at full speed, before any network or queueing."
    )
    notes = (
        "A prediction at the ideal preset, not a measurement: pass --measured FILE.jsonl from "
        "`ridgeline measure` to put an endpoint's own numbers here.",
    )
    return Beat(7, "Predicted", text, notes)


def _kv_words(f: Figures) -> tuple[str, str]:
    """ "that prompt's 2.1 gigabytes of KV cache", "13 percent more bytes than the weights alone"."""
    d = f.cache.decode
    share = spoken_percent(d.kv_bytes_per_gpu / d.weight_bytes_per_gpu)
    if f.gpus == 1:
        return (
            f"that prompt's {spoken_bytes(d.kv_bytes_per_gpu)} of KV cache",
            f"{share} more bytes than the weights alone",
        )
    return (
        f"that prompt's KV cache, {spoken_bytes(d.kv_bytes_per_gpu)} on each GPU",
        f"{share} more bytes than its share of the weights",
    )


def beat_cache(f: Figures, m: Measured | None) -> Beat:
    cache, more = _kv_words(f)
    d = f.cache.decode
    extra = d.kv_bytes_per_gpu / d.weight_bytes_per_gpu
    notes = [
        f"The long prompt's cache: {int(f.cache.inputs['prompt']):,} tokens × "
        f"{si(f.cache.memory.kv_bytes_per_token, 'B')} per token, reread by every decode step."
    ]
    rates = m is not None and m.short.decode_tokens_per_s is not None
    if m is None or not rates:
        lead = "" if m is None else "The file holds no decode times, so this is the prediction: "
        slower = 1 - f.cache.tokens_per_s / f.decode.tokens_per_s
        text = (
            f"{lead}Decode would run at up to {spoken_rate(f.decode.tokens_per_s)} tokens a second, and "
            f"{spoken_percent(slower)} slower with {_a(spoken_tokens(int(f.cache.inputs['prompt'])))}-token "
            f"prompt, because each step also rereads {cache}, {more}."
        )
        return Beat(8, TITLES[7], text, tuple(notes))
    assert m is not None and m.short.decode_tokens_per_s is not None
    rate = m.short.decode_tokens_per_s
    ceiling = rate / f.decode.tokens_per_s
    notes.append(
        f"Measured decode {spoken_rate(rate)} tokens a second against a ceiling of "
        f"{spoken_rate(f.decode.tokens_per_s)}: {spoken_percent(ceiling)} of it."
    )
    lg = m.long
    if lg is None or lg.decode_tokens_per_s is None:
        slower = 1 - f.cache.tokens_per_s / f.decode.tokens_per_s
        text = (
            f"Decode ran at {spoken_rate(rate)} tokens a second; the file holds no long prompt, so the "
            f"slowdown is the prediction's: {spoken_percent(slower)} with "
            f"{_a(spoken_tokens(int(f.cache.inputs['prompt'])))}-token prompt, because each step also "
            f"rereads {cache}, {more}."
        )
        return Beat(8, TITLES[7], text, tuple(notes))
    slower = 1 - lg.decode_tokens_per_s / rate
    head = f"Decode ran at {spoken_rate(rate)} tokens a second"
    if slower < 0.02:
        text = f"{head}, and no slower with the long prompt, although each step also rereads {cache}, {more}."
    elif abs(slower - extra) <= max(0.04, EXPLAINED * extra):
        text = (
            f"{head}, then {spoken_percent(slower)} slower with the long prompt, because each step "
            f"also rereads {cache}, {more}."
        )
    elif slower > extra:
        text = (
            f"{head}, then {spoken_percent(slower)} slower with the long prompt, more than {cache} "
            f"explains: it is {more}."
        )
    else:
        text = (
            f"{head}, then only {spoken_percent(slower)} slower with the long prompt, although each "
            f"step also rereads {cache}, {more}."
        )
    notes.append(
        f"Measured slowdown {spoken_percent(slower)} at {lg.prompt_tokens:,} prompt tokens; the extra "
        f"bytes are {spoken_percent(extra)}."
    )
    return Beat(8, TITLES[7], text, tuple(notes))


def beat_two_budgets(f: Figures) -> Beat:
    if f.decode.decode.bound == "memory":
        buy = "buy tokens per second with bandwidth, quantisation and batching, not with faster arithmetic"
    else:
        buy = (
            f"buy tokens per second with faster arithmetic and batching, since on {_a(f.gpu)} even "
            "one user's decode waits on it"
        )
    text = (
        "So treat them as two budgets: cut time to first token by trimming and caching the prompt, "
        f"and {buy}."
    )
    return Beat(9, TITLES[8], text)


def beats(f: Figures, measured: Measured | None = None, endpoint: str | None = None) -> list[Beat]:
    return [
        beat_two_waits(f),
        beat_prefill(f),
        beat_decode(f),
        beat_roofline(f),
        beat_batching(f),
        beat_wasted_money(f),
        beat_measured(f, measured, endpoint),
        beat_cache(f, measured),
        beat_two_budgets(f),
    ]
