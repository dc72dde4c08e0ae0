// The roofline chart: log-log SVG drawn from the server's numbers (roofs, ridge, points).

import { g3, si, whole } from "./format.js";

const SVG = "http://www.w3.org/2000/svg";
const PAD = { left: 58, right: 14, top: 18, bottom: 44 };
let W = 640;
let H = 400;

function el(name, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== null) node.textContent = text;
  return node;
}

function decadeLabel(exp) {
  const v = 10 ** exp;
  if (v < 1) return g3(v);
  if (v < 1000) return String(v);
  return si(v).replace(" ", "");
}

// Domain in decades: fixed so that swapping GPUs moves the roof, widened to keep points in view.
function domain(r, training) {
  const xs = [r.prefill.intensity, r.decode.intensity, r.ridge, ...(training ? [r.training.intensity] : [])];
  const ys = [r.peak_flops, r.prefill.attainable_flops, r.decode.attainable_flops];
  return {
    x0: Math.min(-1, Math.floor(Math.log10(Math.min(...xs)) - 0.3)),
    x1: Math.max(6, Math.ceil(Math.log10(Math.max(...xs)) + 0.3)),
    y0: Math.min(11, Math.floor(Math.log10(Math.min(...ys)) - 0.3)),
    y1: Math.max(16, Math.ceil(Math.log10(Math.max(...ys)) + 0.7)),
  };
}

// Move a label left (or right) until it lies inside the drawing: nothing is cut at an edge.
function keepInside(node) {
  const box = node.getBBox();
  const x = Number(node.getAttribute("x"));
  if (box.x + box.width > W - 2) node.setAttribute("x", String(x - (box.x + box.width - (W - 2))));
  else if (box.x < 2) node.setAttribute("x", String(x + (2 - box.x)));
}

// The drawing is sized in CSS pixels, so its text stays legible at any width.
export function drawRoofline(svg, r, estimate, { training = false } = {}) {
  W = Math.round(Math.min(820, Math.max(280, svg.clientWidth || 640)));
  H = Math.round(Math.min(420, Math.max(260, W * 0.62)));
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.classList.toggle("compact", W < 440);
  const d = domain(r, training);
  const sx = (x) => PAD.left + ((Math.log10(x) - d.x0) / (d.x1 - d.x0)) * (W - PAD.left - PAD.right);
  const sy = (y) => H - PAD.bottom - ((Math.log10(y) - d.y0) / (d.y1 - d.y0)) * (H - PAD.top - PAD.bottom);
  const keep = [...svg.children].filter((c) => c.tagName === "title" || c.tagName === "desc");
  svg.replaceChildren(...keep);

  const clip = el("clipPath", { id: "plot-area" });
  clip.append(el("rect", { x: PAD.left, y: PAD.top, width: W - PAD.left - PAD.right, height: H - PAD.top - PAD.bottom }));
  const defs = el("defs");
  defs.append(clip);
  svg.append(defs);

  const grid = el("g", { class: "grid" });
  for (let e = d.x0; e <= d.x1; e += 1) {
    grid.append(el("line", { x1: sx(10 ** e), x2: sx(10 ** e), y1: PAD.top, y2: H - PAD.bottom }));
    grid.append(el("text", { x: sx(10 ** e), y: H - PAD.bottom + 16, "text-anchor": "middle", class: "tick" }, decadeLabel(e)));
  }
  for (let e = d.y0; e <= d.y1; e += 1) {
    grid.append(el("line", { x1: PAD.left, x2: W - PAD.right, y1: sy(10 ** e), y2: sy(10 ** e) }));
    grid.append(el("text", { x: PAD.left - 6, y: sy(10 ** e) + 4, "text-anchor": "end", class: "tick" }, decadeLabel(e)));
  }
  svg.append(grid);
  svg.append(el("text", { x: (PAD.left + W - PAD.right) / 2, y: H - 8, "text-anchor": "middle", class: "axis" },
    "arithmetic intensity (FLOPs per byte)"));
  svg.append(el("text", { x: 14, y: (PAD.top + H - PAD.bottom) / 2, "text-anchor": "middle", class: "axis",
    transform: `rotate(-90 14 ${(PAD.top + H - PAD.bottom) / 2})` }, "attainable FLOP/s"));

  const plot = el("g", { "clip-path": "url(#plot-area)" });
  const line = (points, cls) => el("polyline", { points: points.map(([x, y]) => `${sx(x)},${sy(y)}`).join(" "), class: cls });
  plot.append(line(r.effective_roof, "roof effective"));
  plot.append(line(r.roof, "roof"));

  const rx = sx(r.ridge);
  const ry = sy(r.peak_flops);
  plot.append(el("line", { x1: rx, x2: rx, y1: ry, y2: H - PAD.bottom, class: "ridge-line" }));
  plot.append(el("circle", { cx: rx, cy: ry, r: 4.5, class: "ridge-dot" }));
  svg.append(plot);

  const labels = el("g", { class: "labels" });
  const compact = W < 440; // phone width: one line per label, no region names
  labels.append(el("text", { x: rx, y: H - PAD.bottom - (compact ? 8 : 24), "text-anchor": "middle", class: "ridge-label", id: "ridge-label" },
    `ridge ${whole(r.ridge)} FLOPs/byte`));
  if (!compact) {
    labels.append(el("text", { x: rx - 10, y: H - PAD.bottom - 8, "text-anchor": "end", class: "region" }, "← memory-bound (slope)"));
    labels.append(el("text", { x: rx + 10, y: H - PAD.bottom - 8, "text-anchor": "start", class: "region" }, "compute-bound (roof) →"));
  }
  svg.append(labels);

  // On the roof a label sits above it (prefill) or below the point (decode); on the slope,
  // beside the point, under the line. So the two labels never cross.
  const point = (p, cls, lines, above, short = null) => {
    const g = el("g", { class: `point ${cls}` });
    const x = sx(p.intensity);
    const y = sy(p.attainable_flops);
    g.append(el("circle", { cx: x, cy: y, r: 7 }));
    const beside = p.bound === "memory";
    const anchor = x > W - 180 ? "end" : "start";
    const dx = (anchor === "end" ? -1 : 1) * (beside ? 12 : -4);
    const y0 = beside ? y + 5 : above ? Math.max(sy(r.peak_flops) - 26, PAD.top + 12) : y + 24;
    (compact ? [short ?? lines[0]] : lines).forEach((line, k) => {
      g.append(el("text", { x: x + dx, y: y0 + 15 * k, "text-anchor": anchor, class: k ? "sub" : "" }, line));
    });
    return g;
  };
  const i = estimate.inputs;
  svg.append(point(r.decode, "decode", [
    `decode · batch ${whole(i.batch)}`, `${g3(r.decode.intensity)} FLOPs/byte, ${r.decode.bound}-bound`], false));
  svg.append(point(r.prefill, "prefill", [
    `prefill · ${whole(r.prefill.tokens)} tokens`, `${whole(r.prefill.intensity)} FLOPs/byte, ${r.prefill.bound}-bound`], true));
  if (training) {
    // On the roof, right of the prefill: its label sits below the point, clear of the prefill's.
    svg.append(point(r.training, "training", [
      `training step · ${whole(r.training.tokens)} tokens`, `about ${whole(r.training.intensity)} FLOPs/byte, ${r.training.bound}-bound`],
    false, "training"));
  }
  for (const node of svg.querySelectorAll(".labels text, .point text")) keepInside(node);
  svg.dataset.ridge = String(r.ridge);
  svg.dataset.training = training ? String(r.training.intensity) : "";
}
