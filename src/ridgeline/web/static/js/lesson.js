// The lesson: steps by URL (#step-7) and keyboard, drills checked by the server, progress
// kept in localStorage. Step prose is HTML the server rendered from the package's lesson
// files; anything the user types is only ever shown as text.

import { api } from "./api.js";

const STORE = "ridgeline.lesson.v1";
let steps = [];
let current = 0;
const cache = new Map();
let applyState = () => {};

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

function drawList(progress) {
  const list = document.getElementById("step-list");
  list.replaceChildren(...steps.map((s) => {
    const li = document.createElement("li");
    const a = document.createElement("a");
    a.href = `#step-${s.n}`;
    a.textContent = String(s.n);
    a.title = s.title;
    a.setAttribute("aria-label", `Step ${s.n}: ${s.title}${progress.solved.includes(s.n) ? " (solved)" : ""}`);
    if (s.n === current) a.setAttribute("aria-current", "step");
    if (progress.visited.includes(s.n)) a.classList.add("visited");
    if (s.drill) a.classList.add("has-drill");
    if (progress.solved.includes(s.n)) a.classList.add("solved");
    li.append(a);
    return li;
  }));
}

async function show(n, { focus = true } = {}) {
  const step = await fetchStep(n);
  current = n;
  const progress = load();
  progress.current = n;
  if (!progress.visited.includes(n)) progress.visited.push(n);
  save(progress);

  document.getElementById("step-kicker").textContent = `Step ${n} of ${steps.length}`;
  const title = document.getElementById("step-title");
  title.textContent = step.title;
  document.getElementById("step-body").innerHTML = step.html; // server-rendered lesson file
  document.title = `${n}. ${step.title} · ridgeline`;
  drawDrill(step, progress);
  drawList(progress);
  document.getElementById("prev").disabled = n <= 1;
  document.getElementById("next").disabled = n >= steps.length;
  document.body.dataset.step = String(n);
  applyState(step.state);
  if (focus) title.focus({ preventScroll: true });
  if (n < steps.length) fetchStep(n + 1).catch(() => cache.delete(n + 1));
}

function drawDrill(step, progress) {
  const form = document.getElementById("drill");
  form.hidden = !step.drill;
  document.getElementById("drill-verdict").textContent = "";
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

async function check(event) {
  event.preventDefault();
  const n = current;
  const typed = document.getElementById("drill-answer").value;
  const verdict = document.getElementById("drill-verdict");
  const working = document.getElementById("drill-working");
  const box = document.getElementById("drill-feedback");
  const answer = parseAnswer(typed);
  if (!Number.isFinite(answer)) {
    box.className = "feedback wrong";
    verdict.textContent = "Type a number, for example 6.1.";
    working.replaceChildren();
    return;
  }
  let result;
  try {
    result = await api.check(n, answer);
  } catch (error) {
    box.className = "feedback wrong";
    verdict.textContent = error.message;
    return;
  }
  if (n !== current) return;
  const unit = result.unit;
  const expected = Number(result.expected.toPrecision(3));
  box.className = `feedback ${result.correct ? "right" : "wrong"}`;
  verdict.textContent = result.correct
    ? `Right: ${answer} ${unit}. The model says ${expected} ${unit}.`
    : `Not quite: you said ${answer} ${unit}; the model says ${expected} ${unit}. Here is the working:`;
  working.innerHTML = result.working_html; // server-rendered lesson file, no user text
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

export async function startLesson(onState) {
  applyState = onState;
  const wanted = Number(/^#step-(\d+)$/.exec(window.location.hash)?.[1] ?? load().current);
  fetchStep(wanted).catch(() => cache.delete(wanted)); // in parallel with the list
  steps = (await api.lesson()).steps;
  document.getElementById("prev").addEventListener("click", () => go(-1));
  document.getElementById("next").addEventListener("click", () => go(1));
  document.getElementById("drill").addEventListener("submit", check);
  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey || typing(event.target)) return;
    if (event.key === "ArrowRight" || event.key === "n") go(1);
    else if (event.key === "ArrowLeft" || event.key === "p") go(-1);
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
