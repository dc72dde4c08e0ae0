// Boot the page: the controls ask the API for every number, the views only draw them.

import { api } from "./api.js";
import { drawRoofline } from "./chart.js";
import { fillModels, getState, setState, wireControls } from "./controls.js";
import { linkFilm } from "./film.js";
import { startLesson } from "./lesson.js";
import { describeChart, drawReadouts } from "./readouts.js";
import { playStage, replayStage } from "./stage.js";

let renders = 0; // views drawn
let busy = false; // a request is in flight
let pending = false; // the controls moved while it was
let last = null; // the latest data drawn, redrawn when the window resizes

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
  let data = null;
  try {
    data = await api.playground(getState());
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
  if (pending) update();
}

function draw(data) {
  const { estimate, roofline } = data;
  last = data;
  drawReadouts(estimate);
  drawRoofline(document.getElementById("roofline"), roofline, estimate);
  describeChart(roofline, estimate);
  playStage(document.getElementById("stage"), estimate);
  linkFilm(getState());
}

let resizeTimer = 0;
function redrawOnResize() {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => {
    if (last) drawRoofline(document.getElementById("roofline"), last.roofline, last.estimate);
    replayStage(document.getElementById("stage"));
  }, 150);
}

async function boot() {
  window.addEventListener("resize", redrawOnResize);
  wireControls(() => schedule());
  document.getElementById("replay").addEventListener("click", () => replayStage(document.getElementById("stage")));
  api.models().then((models) => fillModels(models.map((m) => m.name))).catch(() => {});
  await startLesson((state) => {
    setState(state);
    schedule();
  });
  document.body.dataset.ready = "true";
}

boot().catch((err) => {
  const error = document.getElementById("error");
  error.textContent = `The page could not start: ${err.message}`;
  error.hidden = false;
});
