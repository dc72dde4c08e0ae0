// The lesson: steps by URL (#step-7) and keyboard, an outline of its sections, drills checked
// by the core, progress kept in localStorage. Step prose is HTML rendered from the package's
// lesson files (by the server, or by the same Python in the page); anything the user types
// is only ever shown as text.

import { api } from "./api.js";

const STORE = "ridgeline.lesson.v1";
let steps = [];
let sections = [];
let current = 0;
const cache = new Map();
let applyStep = () => {};

function load() {
  try {
    const saved = JSON.parse(localStorage.getItem(STORE) || "{}");
    return { current: saved.current || 1, visited: saved.visited || [], solved: saved.solved || [] };
  } catch {
    return { current: 1, visited: [], solved: [] };
  }
}

function save(progress) {
  try {
    localStorage.setItem(STORE, JSON.stringify(progress));
  } catch {
    // storage full or disabled: progress is a convenience
  }
}

function stepFromHash() {
  const match = /^#step-(\d+)$/.exec(window.location.hash);
  const n = match ? Number(match[1]) : 0;
  return n >= 1 && n <= steps.length ? n : 0;
}

async function fetchStep(n) {
  if (!cache.has(n)) cache.set(n, api.step(n));
  return cache.get(n);
}

function marks(a, s, progress) {
  if (s.n === current) a.setAttribute("aria-current", "step");
  if (progress.visited.includes(s.n)) a.classList.add("visited");
  if (s.drill) a.classList.add("has-drill");
  if (progress.solved.includes(s.n)) a.classList.add("solved");
}

function drawList(progress) {
  const list = document.getElementById("step-list");
  list.replaceChildren(...steps.map((s) => {
    const li = document.createElement("li");
    const a = document.createElement("a");
    a.href = `#step-${s.n}`;
    a.textContent = String(s.n);
    a.title = `${s.n}. ${s.title} (${s.section})`;
    a.setAttribute("aria-label", `Step ${s.n}: ${s.title}${progress.solved.includes(s.n) ? " (solved)" : ""}`);
    marks(a, s, progress);
    li.append(a);
    return li;
  }));
}

// The outline: the seven sections, each step with its one-line takeaway.
function drawOutline(progress) {
  const list = document.getElementById("outline-list");
  list.replaceChildren(...sections.map((section) => {
    const li = document.createElement("li");
    const h = document.createElement("h3");
    h.textContent = section.title;
    const ol = document.createElement("ol");
    ol.className = "outline-steps";
    for (const n of section.steps) {
      const s = steps[n - 1];
      const item = document.createElement("li");
      const a = document.createElement("a");
      a.href = `#step-${n}`;
      a.className = "outline-step";
      const num = document.createElement("span");
      num.className = "num";
      num.textContent = String(n);
      const title = document.createElement("span");
      title.className = "title";
      title.textContent = s.title;
      a.append(num, title);
      marks(a, s, progress);
      a.addEventListener("click", () => closeOutline(false));
      const takeaway = document.createElement("p");
      takeaway.className = "takeaway-line";
      takeaway.innerHTML = s.takeaway_html; // lesson file, rendered by the core
      item.append(a, takeaway);
      ol.append(item);
    }
    li.append(h, ol);
    return li;
  }));
}

function outlineOpen() {
  return !document.getElementById("outline").hidden;
}

function openOutline() {
  drawOutline(load());
  document.getElementById("outline").hidden = false;
  document.getElementById("step-article").hidden = true;
  const toggle = document.getElementById("outline-toggle");
  toggle.setAttribute("aria-expanded", "true");
  toggle.textContent = "Back to the step";
  document.querySelector("#outline-list a[aria-current]")?.scrollIntoView({ block: "nearest" });
  document.getElementById("outline-title").focus({ preventScroll: true });
}

function closeOutline(focus = true) {
  document.getElementById("outline").hidden = true;
  document.getElementById("step-article").hidden = false;
  const toggle = document.getElementById("outline-toggle");
  toggle.setAttribute("aria-expanded", "false");
  toggle.textContent = "Outline";
  if (focus) toggle.focus({ preventScroll: true });
}

async function show(n, { focus = true } = {}) {
  const step = await fetchStep(n);
  current = n;
  const progress = load();
  progress.current = n;
  if (!progress.visited.includes(n)) progress.visited.push(n);
  save(progress);

  const section = steps[n - 1]?.section;
  document.getElementById("step-kicker").textContent = `Step ${n} of ${steps.length}${section ? ` · ${section}` : ""}`;
  const title = document.getElementById("step-title");
  title.textContent = step.title;
  document.getElementById("step-body").innerHTML = step.html; // lesson file, rendered by the core
  document.getElementById("step-takeaway").innerHTML = step.takeaway_html ? `<strong>Takeaway.</strong> ${step.takeaway_html}` : "";
  document.getElementById("step-takeaway").hidden = !step.takeaway_html;
  document.title = `${n}. ${step.title} · ridgeline`;
  document.body.classList.toggle("wide-step", Boolean(step.wide));
  labelTables(document.getElementById("step-body"));
  fitFormulas();
  drawDrill(step, progress);
  drawList(progress);
  if (outlineOpen()) closeOutline(false);
  document.getElementById("prev").disabled = n <= 1;
  document.getElementById("next").disabled = n >= steps.length;
  document.body.dataset.step = String(n);
  applyStep(step);
  if (focus) title.focus({ preventScroll: true });
  if (n < steps.length) fetchStep(n + 1).catch(() => cache.delete(n + 1));
}

// Tables become stacked cards in a narrow column: each cell carries its column's name.
function labelTables(root) {
  for (const table of root.querySelectorAll("table")) {
    const heads = [...table.querySelectorAll("thead th")].map((th) => th.textContent.trim());
    for (const row of table.querySelectorAll("tbody tr")) {
      [...row.children].forEach((cell, k) => {
        if (heads[k]) cell.dataset.label = heads[k];
        if (!cell.textContent.trim()) cell.classList.add("empty");
      });
    }
  }
}

// A block formula that is wider than its column is set smaller until it fits (it never
// scrolls and is never cut off); the lesson's formulas are written to fit at 70%.
export function fitFormulas() {
  for (const math of document.querySelectorAll("#step-body math[display='block']")) {
    math.style.fontSize = "";
    let size = 100;
    while (math.scrollWidth > math.clientWidth + 0.5 && size > 70) {
      size -= 5;
      math.style.fontSize = `${size}%`;
    }
  }
}

function drawDrill(step, progress) {
  const form = document.getElementById("drill");
  form.hidden = !step.drill;
  document.getElementById("drill-verdict").replaceChildren();
  document.getElementById("drill-working").replaceChildren();
  document.getElementById("drill-feedback").className = "feedback";
  document.getElementById("drill-answer").value = "";
  if (!step.drill) return;
  document.getElementById("drill-question").innerHTML = step.drill.question_html; // lesson file
  document.getElementById("drill-unit").textContent = step.drill.unit;
  if (progress.solved.includes(step.n)) {
    document.getElementById("drill-verdict").textContent = "You have solved this one before.";
  }
}

// "6", "6.0 ms", "5,99": the first number in what was typed, or NaN.
function parseAnswer(typed) {
  const match = /-?\d+(?:[.,]\d+)?(?:e-?\d+)?/i.exec(typed.trim());
  return match ? Number(match[0].replace(",", ".")) : NaN;
}

// The verdict: a small coloured badge (when there is one), then plain text.
function verdictLine(kind, badge, text) {
  const verdict = document.getElementById("drill-verdict");
  if (!badge) {
    verdict.replaceChildren(text);
    return;
  }
  const mark = document.createElement("span");
  mark.className = `badge ${kind}`;
  mark.textContent = badge;
  verdict.replaceChildren(mark, ` ${text}`);
}

async function check(event) {
  event.preventDefault();
  const n = current;
  const typed = document.getElementById("drill-answer").value;
  const working = document.getElementById("drill-working");
  const box = document.getElementById("drill-feedback");
  const answer = parseAnswer(typed);
  if (!Number.isFinite(answer)) {
    box.className = "feedback wrong";
    verdictLine("wrong", "", "Type a number, for example 6.1.");
    working.replaceChildren();
    return;
  }
  let result;
  try {
    result = await api.check(n, answer);
  } catch (error) {
    box.className = "feedback wrong";
    verdictLine("wrong", "", error.message);
    return;
  }
  if (n !== current) return;
  const unit = result.unit;
  const expected = Number(result.expected.toPrecision(3));
  box.className = `feedback ${result.correct ? "right" : "wrong"}`;
  if (result.correct) verdictLine("right", "Right", `${answer} ${unit}. The model says ${expected} ${unit}.`);
  else verdictLine("wrong", "Not quite", `You said ${answer} ${unit}; the model says ${expected} ${unit}. Here is the working:`);
  working.innerHTML = result.working_html; // lesson file, rendered by the core; no user text
  box.scrollIntoView({ block: "nearest" });
  if (result.correct) {
    const progress = load();
    if (!progress.solved.includes(n)) progress.solved.push(n);
    save(progress);
    drawList(progress);
  }
}

function go(delta) {
  const n = Math.min(steps.length, Math.max(1, current + delta));
  if (n !== current) window.location.hash = `#step-${n}`;
}

function typing(target) {
  return target instanceof HTMLElement &&
    (target.isContentEditable || ["INPUT", "SELECT", "TEXTAREA"].includes(target.tagName));
}

export async function startLesson(onStep) {
  applyStep = onStep;
  const wanted = Number(/^#step-(\d+)$/.exec(window.location.hash)?.[1] ?? load().current);
  fetchStep(wanted).catch(() => cache.delete(wanted)); // in parallel with the list
  const outline = await api.lesson();
  steps = outline.steps;
  sections = outline.sections;
  document.getElementById("prev").addEventListener("click", () => go(-1));
  document.getElementById("next").addEventListener("click", () => go(1));
  document.getElementById("outline-toggle").addEventListener("click", () => (outlineOpen() ? closeOutline() : openOutline()));
  document.getElementById("drill").addEventListener("submit", check);
  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey || typing(event.target)) return;
    if (event.key === "ArrowRight" || event.key === "n") go(1);
    else if (event.key === "ArrowLeft" || event.key === "p") go(-1);
    else if (event.key === "o") (outlineOpen() ? closeOutline() : openOutline());
    else if (event.key === "Escape" && outlineOpen()) closeOutline();
    else return;
    event.preventDefault();
  });
  window.addEventListener("hashchange", () => {
    const n = stepFromHash();
    if (n) show(n);
  });
  const n = stepFromHash() || Math.min(load().current, steps.length);
  if (!stepFromHash()) window.history.replaceState(null, "", `#step-${n}`);
  await show(n, { focus: false });
}
