// The stage: one request (or a batch of them) played in slow motion on a canvas.
// Prefill floods every prompt through in one pass; then each decode step reads the weights
// once and drops one token into every lane. The timeline underneath is to scale.

import { gigabytes, percent, seconds, whole } from "./format.js";

const COLORS = {
  ink: "#1f2328", muted: "#57606a", line: "#d0d7de", prefill: "#b45309", prefillSoft: "#fde7c8", attention: "#7c2d12",
  decode: "#1d4ed8", decodeSoft: "#dbe5fd", weights: "#6d28d9", weightsSoft: "#ede4fb",
};
const MAX_LANES = 6;
const LANE_H = 22;
const TOP = 30; // labels (and the prefill's attention bar) above the lanes
const BOTTOM = 80; // status line and timeline below them
const BOTTOM_NARROW = 98; // a phone: the timeline's two labels on two lines
const NARROW = 560; // below this width (CSS px) the stage draws its compact layout
const DECODE_SCREEN_S = 5;

let plan = null;
let frame = 0;
let startedAt = 0;

function reducedMotion() {
  return window.matchMedia("(prefers-reduced-motion: reduce)").matches;
}

// The stage's title says how many requests it plays.
function title(i) {
  const h = document.getElementById("stage-title");
  h.textContent = i.batch > 1
    ? `The stage: ${whole(i.batch)} requests, decoding together`
    : "The stage: one request";
}

export function playStage(canvas, estimate) {
  title(estimate.inputs);
  const share = estimate.ttft_s / estimate.total_s;
  plan = {
    e: estimate,
    // Screen time: the prefill gets at least 0.8 s so that it can be seen at all.
    prefillScreen: Math.min(3, Math.max(0.8, share * (DECODE_SCREEN_S / (1 - share)))),
    decodeScreen: DECODE_SCREEN_S,
  };
  const i = estimate.inputs;
  canvas.setAttribute("aria-label",
    `${whole(i.batch)} request(s): prefill of ${whole(i.prompt)} tokens in ${seconds(estimate.ttft_s)}, ` +
    `(attention ${percent(estimate.prefill.attention_share)} of its FLOPs), ` +
    `then ${whole(i.output)} tokens at ${seconds(estimate.tpot_s)} each; decode is ` +
    `${percent(estimate.decode_share)} of ${seconds(estimate.total_s)}.`);
  const lanes = Math.min(i.batch, MAX_LANES);
  const bottom = (canvas.clientWidth || 600) < NARROW ? BOTTOM_NARROW : BOTTOM;
  canvas.style.height = `${TOP + Math.max(lanes * LANE_H, 44) + bottom}px`;
  cancelAnimationFrame(frame);
  startedAt = performance.now();
  if (reducedMotion()) draw(canvas, plan.prefillScreen + plan.decodeScreen);
  else frame = requestAnimationFrame(function tick(now) {
    const t = (now - startedAt) / 1000;
    draw(canvas, t);
    if (t < plan.prefillScreen + plan.decodeScreen + 0.2) frame = requestAnimationFrame(tick);
  });
}

export function replayStage(canvas) {
  if (plan) playStage(canvas, plan.e);
}

function sized(canvas) {
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || 600;
  const height = canvas.clientHeight || 200;
  if (canvas.width !== Math.round(width * ratio)) canvas.width = Math.round(width * ratio);
  if (canvas.height !== Math.round(height * ratio)) canvas.height = Math.round(height * ratio);
  const ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  return { ctx, width, height };
}

let fontPx = 12;
// Text at the stage's size, set smaller (down to 10 px) when it would not fit `room` pixels.
function text(ctx, s, x, y, color = COLORS.ink, align = "left", weight = "", room = Infinity) {
  ctx.fillStyle = color;
  ctx.textAlign = align;
  let px = fontPx;
  ctx.font = `${weight} ${px}px system-ui, sans-serif`;
  while (px > 10 && ctx.measureText(s).width > room) {
    px -= 0.5;
    ctx.font = `${weight} ${px}px system-ui, sans-serif`;
  }
  ctx.fillText(s, x, y);
}

function draw(canvas, t) {
  const { ctx, width, height } = sized(canvas);
  const { e, prefillScreen, decodeScreen } = plan;
  const i = e.inputs;
  const narrow = width < NARROW;
  fontPx = narrow ? 13 : 12; // a phone shows the canvas at its own size: keep the text legible
  ctx.clearRect(0, 0, width, height);

  const inPrefill = t < prefillScreen;
  const fill = Math.min(1, t / prefillScreen); // prompt flooded so far
  const done = Math.max(0, Math.min(1, (t - prefillScreen) / decodeScreen)); // decode progress
  const simTime = inPrefill ? fill * e.ttft_s : e.ttft_s + done * (e.total_s - e.ttft_s);
  const steps = Math.max(1, Math.ceil(done * i.output));

  // Regions: labels, lanes, a status line, then the timeline.
  const top = TOP;
  const lanes = Math.min(i.batch, MAX_LANES);
  const laneH = LANE_H;
  const block = lanes * laneH;

  // Weights in memory; each read fans out to every lane: the batch shares it.
  const wx = 8;
  const ww = narrow ? 66 : Math.min(100, width * 0.17);
  const wh = Math.max(block, 44);
  const pulse = inPrefill ? fill < 1 : done < 1 && (t * 6) % 1 < 0.5;
  ctx.fillStyle = pulse ? COLORS.weights : COLORS.weightsSoft;
  ctx.fillRect(wx, top, ww, wh);
  const weightInk = pulse ? "#fff" : COLORS.weights;
  text(ctx, "weights", wx + ww / 2, top + wh / 2 - 3, weightInk, "center", "600");
  text(ctx, gigabytes(e.memory.per_gpu.weight_bytes), wx + ww / 2, top + wh / 2 + 12, weightInk, "center");
  if (!narrow) text(ctx, "memory, per GPU", wx, 14, COLORS.muted);

  const lx = wx + ww + (narrow ? 16 : 36);
  const lw = width - lx - 8;
  ctx.strokeStyle = pulse ? COLORS.weights : COLORS.line;
  ctx.lineWidth = pulse ? 2 : 1;
  for (let k = 0; k < lanes; k += 1) {
    ctx.beginPath();
    ctx.moveTo(wx + ww, top + wh / 2);
    ctx.lineTo(lx - 4, top + k * laneH + laneH / 2);
    ctx.stroke();
  }

  // Lanes: each user's prompt (flooded at once), then the answer's tokens, one per step.
  const pw = Math.min(lw * 0.28, 160);
  const ox = lx + pw + 10;
  const ow = lw - pw - 10;
  const drops = Math.max(1, Math.min(i.output, Math.floor(ow / 7)));
  const shown = inPrefill ? 0 : Math.min(drops, Math.ceil(done * drops));
  const dw = Math.max(2, ow / drops - 2);
  for (let k = 0; k < lanes; k += 1) {
    const y = top + k * laneH;
    ctx.fillStyle = COLORS.prefillSoft;
    ctx.fillRect(lx, y + 2, pw, laneH - 4);
    ctx.fillStyle = COLORS.prefill;
    ctx.fillRect(lx, y + 2, pw * fill, laneH - 4);
    ctx.fillStyle = COLORS.decodeSoft;
    ctx.fillRect(ox, y + 4, ow, laneH - 8);
    ctx.fillStyle = COLORS.decode;
    for (let j = 0; j < shown; j += 1) ctx.fillRect(ox + j * (ow / drops), y + 4, dw, laneH - 8);
  }
  const users = i.batch > 1 ? ` · ${whole(i.batch)} users${i.batch > lanes ? ` (${lanes} shown)` : ""}` : "";
  const attention = e.prefill.attention_share;
  if (narrow) {
    const who = i.batch > 1 ? ` · ${whole(i.batch)} users` : "";
    text(ctx, `prompt ${whole(i.prompt)} → answer ${whole(i.output)} tokens${who}`, wx, 14, COLORS.ink, "left", "600", width - 2 * wx);
  } else {
    text(ctx, `prompt: ${whole(i.prompt)} tokens`, lx, 14, COLORS.prefill, "left", "600", ox - lx - 8);
    text(ctx, `answer: ${whole(i.output)} tokens${users}`, ox, 14, COLORS.decode, "left", "600", width - ox - 8);
  }
  // The prefill's FLOPs: matrix multiplies, then attention's share (which grows with N²).
  ctx.fillStyle = COLORS.prefillSoft;
  ctx.fillRect(lx, 19, pw, 5);
  ctx.fillStyle = COLORS.attention;
  ctx.fillRect(lx + pw * (1 - attention), 19, Math.max(1, pw * attention), 5);

  // Status line and the clock.
  const below = narrow ? BOTTOM_NARROW : BOTTOM; // status, timeline and labels
  const sy = height - below + 28;
  const status = narrow
    ? inPrefill ? "Prefill: one pass" : done < 1 ? `Decode step ${whole(steps)} of ${whole(i.output)}` : "Done"
    : inPrefill
      ? i.batch > 1
        ? `Prefill: ${whole(i.batch)} prompts, ${whole(i.batch * i.prompt)} tokens, as one pass (see below)`
        : `Prefill: ${whole(i.prompt)} tokens in one pass, one read of the weights; ${percent(attention)} of its FLOPs are attention`
      : done < 1
        ? `Decode step ${whole(steps)} of ${whole(i.output)}: one weight read, ${whole(i.batch)} new token${i.batch > 1 ? "s" : ""}`
        : `Done: ${whole(i.output + 1)} tokens per user (the prefill emits the first)`;
  text(ctx, status, 8, sy, COLORS.ink, "left", "600", width - 90);
  text(ctx, `t = ${seconds(simTime)}`, width - 8, sy, COLORS.muted, "right");

  // The timeline, to scale, with the playhead.
  const tx = 8;
  const tw = width - 16;
  const ty = height - below + 40;
  const split = tx + tw * (e.ttft_s / e.total_s);
  ctx.fillStyle = COLORS.prefill;
  ctx.fillRect(tx, ty, Math.max(2, split - tx), 12);
  ctx.fillStyle = COLORS.decodeSoft;
  ctx.fillRect(split, ty, tx + tw - split, 12);
  ctx.fillStyle = COLORS.decode;
  ctx.fillRect(split, ty, (tx + tw - split) * done, 12);
  const px = tx + tw * (simTime / e.total_s);
  ctx.fillStyle = COLORS.ink;
  ctx.fillRect(px - 1, ty - 4, 2, 20);
  const attn = `${percent(attention)} attention`;
  text(ctx, narrow ? `TTFT ${seconds(e.ttft_s)} · ${attn}` : `prefill (TTFT) ${seconds(e.ttft_s)}, ${attn}`,
    tx, ty + 28, COLORS.prefill, "left", "600", narrow ? tw : tw / 2 - 8);
  const tail = narrow ? `decode ${percent(e.decode_share)}` : `decode ${percent(e.decode_share)} of ${seconds(e.total_s)}`;
  text(ctx, `${tail} · TPOT ${seconds(e.tpot_s)}`, tx + tw, ty + (narrow ? 46 : 28), COLORS.decode, "right", "600",
    narrow ? tw : tw / 2 - 8);
}
