// The readouts: times, rates, intensities, bounds and the memory plan, as the server sent them.

import { g3, gigabytes, oneDecimal, percent, seconds, span, whole } from "./format.js";

function put(id, textValue, value) {
  const node = document.getElementById(id);
  node.textContent = textValue;
  if (value !== undefined) node.dataset.value = String(value);
}

export function drawReadouts(e, r, { slo = false } = {}) {
  put("ttft", seconds(e.ttft_s), e.ttft_s);
  const i = e.inputs;
  // Batched prefill: the estimate runs every prompt as one pass, so TTFT is the whole batch's.
  put("ttft-note", i.batch > 1 ? `all ${whole(i.batch)} prompts in one pass` : "");
  put("tpot-note", i.batch > 1 ? `each of ${whole(i.batch)} users` : "");
  put("tpot", seconds(e.tpot_s), e.tpot_s);
  drawBand("ttft", e, r);
  drawBand("tpot", e, r);
  put("tps-user", whole(e.tokens_per_s), e.tokens_per_s);
  put("tps-total", whole(e.batch_tokens_per_s), e.batch_tokens_per_s);
  put("ridge", whole(e.ridge), e.ridge);
  put("total", seconds(e.total_s), e.total_s);
  put("share", `${percent(e.decode_share)} decode`, e.decode_share);
  put("prefill-intensity", whole(e.prefill.intensity), e.prefill.intensity);
  put("decode-intensity", oneDecimal(e.decode.intensity), e.decode.intensity);
  // the roofline's bound, or "host" where the engine's CPU work a step outlasts the GPU's
  put("prefill-bound", e.prefill.waits_on);
  put("decode-bound", e.decode.waits_on);
  put("prefill-attention", percent(e.prefill.attention_share), e.prefill.attention_share);
  put("decode-attention", percent(e.decode.attention_share), e.decode.attention_share);
  drawStageNote(e, r, slo);
  drawMemory(e.memory, e.inputs);
  const explain = document.getElementById("explain");
  explain.replaceChildren(...e.explain.map((line) => {
    const li = document.createElement("li");
    li.textContent = line;
    return li;
  }));
}

// An engine profile's band: the 80% interval of measured / predicted its corpus left.
function drawBand(key, e, r) {
  const node = document.getElementById(`${key}-band`);
  const band = e.uncertainty?.[`${key}_s`];
  node.hidden = !band;
  node.textContent = band ? `80% band: ${span(band[0], band[1])}` : "";
  node.title = band ? `${r.engine.label}'s profile: the interval that held 80% of the held-out measurements of sources it was not made from` : "";
  if (band) node.dataset.value = JSON.stringify(band);
  else delete node.dataset.value;
}

// Where the stage's numbers hold: each user's context, and what a batched prefill means.
function drawStageNote(e, r, slo) {
  const i = e.inputs;
  const note = document.getElementById("stage-note");
  if (i.batch <= 1) {
    note.hidden = true;
    note.textContent = "";
    return;
  }
  note.hidden = false;
  note.textContent =
    `Each of the ${whole(i.batch)} users holds ${whole(i.prompt)} tokens of context at the first decode step ` +
    `and ${whole(r.decode.context_last)} at the last; TPOT and tokens/s hold at those contexts (longer ones ` +
    `read more KV cache every step). The prefill here is all ${whole(i.batch)} prompts as one pass of ` +
    `${whole(r.prefill.tokens)} tokens, so every user waits the whole ${seconds(e.ttft_s)} for a first token. ` +
    `A server's scheduler runs it in ${whole(r.prefill_chunks)} chunk${r.prefill_chunks > 1 ? "s" : ""} of up to ` +
    `${whole(r.prefill_chunk_tokens)} tokens between decode steps, so the first users start sooner; ` +
    (slo ? "the simulator's table above shows the TTFT users feel."
      : "ridgeline's serving simulator (step 15) shows the TTFT users feel.");
}

function drawMemory(m, inputs) {
  const g = m.per_gpu;
  const other = g.activation_bytes + g.overhead_bytes;
  const scale = Math.max(g.capacity_bytes, g.total_bytes);
  const widths = { weights: g.weight_bytes, kv: g.kv_bytes, other };
  for (const [name, bytes] of Object.entries(widths)) {
    document.getElementById(`seg-${name}`).style.width = `${(100 * bytes) / scale}%`;
  }
  document.getElementById("mark-usable").style.left = `${(100 * g.usable_bytes) / scale}%`;
  const membar = document.getElementById("membar");
  membar.classList.toggle("over", !m.fits);
  const verdict = document.getElementById("memory-verdict");
  verdict.textContent = !m.fits ? "does not fit" : m.serves ? "fits and serves" : "fits, too little KV room to serve";
  verdict.className = `verdict ${!m.fits ? "bad" : m.serves ? "good" : "warn"}`;
  const swatch = (cls, label) => {
    const span = document.createElement("span");
    span.className = `key ${cls}`;
    span.textContent = label;
    return span;
  };
  const memoryText = document.getElementById("memory-text");
  memoryText.replaceChildren(
    swatch("weights", `weights ${gigabytes(g.weight_bytes)}`), " + ",
    swatch("kv", `KV ${gigabytes(g.kv_bytes)}`), " + ",
    swatch("other", `runtime ${gigabytes(other)}`),
    ` = ${gigabytes(g.total_bytes)} of ${gigabytes(g.usable_bytes)} usable (red line; ` +
    `${gigabytes(g.capacity_bytes)} on the GPU). Room for ${whole(m.max_batch)} sequences of ` +
    `${whole(inputs.prompt + inputs.output)} tokens.`,
  );
  memoryText.dataset.value = String(g.total_bytes);
  const suggestions = document.getElementById("suggestions");
  suggestions.hidden = m.suggestions.length === 0;
  suggestions.textContent = m.suggestions.length
    ? `Plans that serve: ${m.suggestions.map((s) => `${s.weights} on ${s.gpus} GPU${s.gpus > 1 ? "s" : ""}`).join(", ")}.`
    : "";
}

export function describeChart(r, e) {
  const caption = document.getElementById("chart-caption");
  const pct = (x) => `${Math.round(x * 100)}%`;
  caption.textContent =
    `${e.gpu.label}: ${whole(r.peak_flops / 1e12)} TFLOP/s (${e.inputs.maths}), ` +
    `${g3(r.bandwidth_bytes_per_s / 1e12)} TB/s. ` +
    `Solid roof: 100% of peak. ` +
    (r.engine
      ? `Dashed: what ${r.engine.label}'s profile reaches on a large pass (${pct(r.compute_eff)} of FLOP/s ` +
        `for its matmuls, ${pct(r.bandwidth_eff)} of bandwidth for its weight reads); its fixed costs ` +
        `per step add to the times.`
      : `Dashed: what the kernels reach (${pct(r.compute_eff)} of FLOP/s, ${pct(r.bandwidth_eff)} of bandwidth).`);
  document.getElementById("chart-desc").textContent =
    `Ridge at ${whole(r.ridge)} FLOPs per byte. Prefill of ${whole(r.prefill.tokens)} tokens at ` +
    `${whole(r.prefill.intensity)} FLOPs per byte is ${r.prefill.bound}-bound; decode at batch ` +
    `${whole(r.decode.batch)} at ${oneDecimal(r.decode.intensity)} FLOPs per byte is ${r.decode.bound}-bound.`;
}
