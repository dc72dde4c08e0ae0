// Boot the page: the controls ask the API for every number, the views only draw them.

import { api, backend } from "./api.js";
import { drawRoofline } from "./chart.js";
import { fillEngines, fillModels, getState, setState, wireControls } from "./controls.js";
import { linkFilm } from "./film.js";
import { fitFormulas, startLesson } from "./lesson.js";
import { describeChart, drawReadouts } from "./readouts.js";
import { drawSlo, hideSlo, waitSlo } from "./slo.js";
import { playStage, replayStage } from "./stage.js";

let renders = 0; // views drawn
let busy = false; // a request is in flight
let pending = false; // the controls moved while it was
let last = null; // the latest data drawn, redrawn when the window resizes
let shows = []; // what else the current step shows: "slo", "training"

// Light debouncing: ask at once when idle; while a request is in flight, remember only
// that the controls moved, and ask again for their latest state when it returns.
function schedule() {
  if (busy) pending = true;
  else update();
}

async function update() {
  busy = true;
  pending = false;
  const error = document.getElementById("error");
  const state = getState();
  let data = null;
  try {
    data = await api.playground(state);
  } catch (err) {
    error.textContent = err.message;
    error.hidden = false;
    document.getElementById("view").classList.add("stale");
  }
  busy = false;
  if (data) {
    error.hidden = true;
    document.getElementById("view").classList.remove("stale");
    draw(data);
  }
  document.body.dataset.renders = String(++renders);
  if (shows.includes("slo")) updateSlo(state);
  if (pending) update();
}

let sloAsked = ""; // the state whose table was last asked for
async function updateSlo(state) {
  const key = JSON.stringify(state);
  if (key === sloAsked) return;
  sloAsked = key;
  waitSlo();
  try {
    const table = await api.slo(state);
    if (sloAsked === key) drawSlo(table, null);
  } catch (err) {
    if (sloAsked === key) drawSlo(null, err.message);
  }
}

function draw(data) {
  const { estimate, roofline } = data;
  last = data;
  drawReadouts(estimate, roofline, { slo: shows.includes("slo") });
  drawRoofline(document.getElementById("roofline"), roofline, estimate, { training: shows.includes("training") });
  describeChart(roofline, estimate);
  playStage(document.getElementById("stage"), estimate, roofline);
  linkFilm(getState());
}

let resizeTimer = 0;
function redrawOnResize() {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    if (last) drawRoofline(document.getElementById("roofline"), last.roofline, last.estimate, { training: shows.includes("training") });
    replayStage(document.getElementById("stage"));
    fitFormulas();
  }, 150);
}

async function boot() {
  document.body.dataset.backend = backend;
  if (backend === "pyodide") {
    document.getElementById("film-link").hidden = true; // the film needs `ridgeline web`
    document.getElementById("step-kicker").textContent = "Loading Python in this page (Pyodide)…";
  }
  window.addEventListener("resize", redrawOnResize);
  wireControls(() => schedule());
  document.getElementById("replay").addEventListener("click", () => replayStage(document.getElementById("stage")));
  await startLesson((step) => {
    shows = step.show || [];
    sloAsked = "";
    if (!shows.includes("slo")) hideSlo();
    setState(step.state);
    schedule();
  });
  api.models().then((models) => fillModels(models.map((m) => m.name))).catch(() => {});
  api.engines().then(fillEngines).catch(() => {});
  document.body.dataset.ready = "true";
}

boot().catch((err) => {
  const error = document.getElementById("error");
  error.textContent = `The page could not start: ${err.message}`;
  error.hidden = false;
});
