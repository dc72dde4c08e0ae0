// Step 15's table: the simulator's p50 and p99 TTFT and TPOT at a few arrival rates,
// against a chat SLO. The server simulates it live; the static site carries the one its
// export simulated, and says so.

import { g3, seconds, whole } from "./format.js";

const panel = () => document.getElementById("slo");

export function hideSlo() {
  panel().hidden = true;
}

export function waitSlo() {
  panel().hidden = false;
  panel().classList.add("stale");
}

function cell(text, cls = "", label = "") {
  const td = document.createElement("td");
  td.textContent = text;
  if (cls) td.className = cls;
  if (label) td.dataset.label = label;
  return td;
}

function pair(p50, p99, limit, band) {
  const td = document.createElement("td");
  const b = document.createElement("b");
  b.textContent = seconds(p99);
  b.className = p99 <= limit ? "ok" : "over";
  td.append(`${seconds(p50)} · `, b);
  if (band) {
    // the engine's band under load on the median: these arrivals again on the engine as slow as each end
    const small = document.createElement("small");
    small.className = "band";
    small.textContent = `p50 ${seconds(band[0])}–${seconds(band[1])}`;
    td.append(document.createElement("br"), small);
  }
  return td;
}

export function drawSlo(table, message) {
  const box = panel();
  box.hidden = false;
  box.classList.remove("stale");
  const body = document.getElementById("slo-rows");
  const note = document.getElementById("slo-note");
  const caption = document.getElementById("slo-caption");
  if (!table) {
    body.replaceChildren();
    caption.textContent = "";
    document.getElementById("slo-table").hidden = true;
    note.textContent = message.replaceAll("`", "");
    box.dataset.state = "none";
    return;
  }
  document.getElementById("slo-table").hidden = false;
  const d = table.deployment;
  const w = table.workload;
  caption.textContent =
    `${whole(w.requests)} chat requests, prompts around ${whole(w.prompt_mean)} tokens and answers around ` +
    `${whole(w.output_mean)} (${w.lengths}), arriving at random (Poisson) on one ${d.gpu_label}` +
    `${d.tp > 1 ? ` × ${d.tp}` : ""} with ${d.model} in ${d.weights}${d.engine ? `, priced by ${d.engine}'s profile` : ""}: ` +
    `continuous batching, prompts in ` +
    `chunks, a paged KV cache. SLO: p99 TTFT ≤ ${seconds(table.slo.ttft_p99_s)}, ` +
    `p99 TPOT ≤ ${seconds(table.slo.tpot_p99_s)}.` +
    (table.band
      ? ` Published runs under load took ${g3(table.band[0])}–${g3(table.band[1])}× the time ` +
        `${d.engine}'s profile predicts, four in five of them: each p50's band is these arrivals ` +
        `again on an engine that much slower or faster, whose queue widens it near capacity.`
      : "");
  body.replaceChildren(...table.rows.map((r) => {
    const tr = document.createElement("tr");
    const ttft = pair(r.ttft_p50_s, r.ttft_p99_s, table.slo.ttft_p99_s, r.ttft_p50_band_s);
    ttft.dataset.label = "TTFT p50 · p99";
    const tpot = pair(r.tpot_p50_s, r.tpot_p99_s, table.slo.tpot_p99_s, r.tpot_p50_band_s);
    tpot.dataset.label = "TPOT p50 · p99";
    const verdict = r.met ? "met" : r.overloaded ? "overloaded" : "missed";
    tr.append(
      cell(`${g3(r.rate_per_s)}/s`, "", "arrivals"),
      cell(whole(r.mean_batch), "", "mean batch"),
      ttft,
      tpot,
      cell(whole(r.tokens_per_s_per_gpu), "", "tokens/s per GPU"),
      cell(verdict, `verdict ${r.met ? "good" : "bad"}`, "SLO"),
    );
    return tr;
  }));
  if (table.precomputed) {
    const code = document.createElement("code");
    code.textContent = "ridgeline web";
    note.replaceChildren(
      "Simulated when this static site was exported: the simulator needs numpy, which the page's Python " +
      "does not have. ", code, " runs it live for any state.");
  } else {
    note.textContent = "Simulated live by ridgeline's serving simulator for this state; move the controls to run it again.";
  }
  box.dataset.state = table.precomputed ? "precomputed" : "live";
}
