// The playground's controls: pills, selects and log-scale sliders, read into one state.

const NICE = [1, 1.2, 1.6, 2, 2.5, 3, 4, 5, 6, 8];

// Slider positions map to round numbers on a log scale; the number box holds the exact value.
function ladder(max, steps) {
  const values = [];
  for (let decade = 1; decade <= max; decade *= 10) {
    for (const m of steps) {
      const v = Math.round(m * decade);
      if (v <= max && !values.includes(v)) values.push(v);
    }
  }
  if (values[values.length - 1] !== max) values.push(max);
  return values;
}

// Batches: powers of two and the halfway points between them (1, 2, 3, 4, 6, 8, 12, ...).
function batchLadder(max) {
  const values = [1];
  for (let p = 2; p <= max; p *= 2) {
    if (p >= 4) values.push((p * 3) / 4);
    values.push(p);
  }
  return values;
}

const LADDERS = {
  prompt: ladder(128000, NICE),
  output: ladder(32000, NICE),
  batch: batchLadder(4096),
};

// engine "none": the lesson's plain roofline (the preset's flat fractions of peak)
const DEFAULTS = {
  model: "llama-3.1-8b", gpu: "h100-sxm", weights: "bf16", maths: "bf16",
  prompt: 2000, output: 500, batch: 1, tp: 1, preset: "lesson", engine: "none", in_process: false,
};

const form = () => document.getElementById("controls");

function nearestIndex(values, v) {
  let best = 0;
  for (let i = 1; i < values.length; i += 1) {
    if (Math.abs(Math.log(values[i] / v)) < Math.abs(Math.log(values[best] / v))) best = i;
  }
  return best;
}

function setSlider(name, value) {
  const range = document.getElementById(`${name}-range`);
  const box = document.getElementById(name);
  const i = nearestIndex(LADDERS[name], value);
  range.value = String(i);
  range.setAttribute("aria-valuetext", `${Number(value).toLocaleString("en-US")}`);
  box.value = String(value);
}

function setRadio(name, value) {
  const input = form().querySelector(`input[name="${name}"][value="${CSS.escape(value)}"]`);
  if (input) input.checked = true;
  else form().querySelectorAll(`input[name="${name}"]`).forEach((el) => { el.checked = false; });
}

function setSelect(id, value) {
  const select = document.getElementById(id);
  if (![...select.options].some((o) => o.value === String(value))) {
    select.add(new Option(String(value), String(value)));
  }
  select.value = String(value);
}

export function setState(state) {
  const s = { ...DEFAULTS, ...state };
  setRadio("gpu", s.gpu);
  setRadio("weights", s.weights);
  setRadio("maths", s.maths);
  setSelect("model", s.model);
  setSelect("tp", s.tp);
  setSelect("preset", s.preset);
  setSelect("engine", s.engine);
  document.getElementById("in_process").checked = Boolean(s.in_process);
  for (const name of ["prompt", "output", "batch"]) setSlider(name, s[name]);
  current = s;
  showEngine();
}

// An engine profile sets every rate itself, so the preset's kernels have no say while one is
// chosen; and only an engine has a server whose first-token cost running in process drops.
function showEngine() {
  const preset = document.getElementById("preset");
  const engine = current.engine !== "none";
  preset.disabled = engine;
  preset.title = engine
    ? "The engine profile's rates replace the preset's: choose engine none to use it"
    : "lesson: kernels reach 60% of peak FLOP/s and 80% of bandwidth; ideal: 100% of both";
  document.getElementById("in_process").disabled = !engine;
}

let current = { ...DEFAULTS };

export function getState() {
  return { ...current };
}

function readForm() {
  const f = form();
  const checked = (name) => f.querySelector(`input[name="${name}"]:checked`)?.value;
  const next = {
    ...current,
    gpu: checked("gpu") ?? current.gpu,
    weights: checked("weights") ?? current.weights,
    maths: checked("maths") ?? current.maths,
    model: document.getElementById("model").value,
    tp: Number(document.getElementById("tp").value),
    preset: document.getElementById("preset").value,
    engine: document.getElementById("engine").value,
    // in process only with an engine: without one there is no server to leave out
    in_process: document.getElementById("engine").value !== "none" && document.getElementById("in_process").checked,
  };
  for (const name of ["prompt", "output", "batch"]) {
    const n = Number(document.getElementById(name).value);
    if (Number.isInteger(n) && n >= 1) next[name] = n;
  }
  return next;
}

// The engine menu: none (the lesson's roofline), then each profile by its label.
export function fillEngines(profiles) {
  const select = document.getElementById("engine");
  const chosen = select.value;
  const options = Object.entries(profiles).map(([name, p]) => new Option(p.label || name, name));
  select.replaceChildren(new Option("none (plain roofline)", "none"), ...options);
  select.value = chosen in profiles ? chosen : "none";
}

export function fillModels(names) {
  const select = document.getElementById("model");
  const chosen = select.value;
  select.replaceChildren(...names.map((n) => new Option(n, n)));
  select.value = names.includes(chosen) ? chosen : DEFAULTS.model;
}

// Calls onChange(state) whenever a control moves.
export function wireControls(onChange) {
  for (const name of ["prompt", "output", "batch"]) {
    const range = document.getElementById(`${name}-range`);
    const box = document.getElementById(name);
    range.min = "0";
    range.max = String(LADDERS[name].length - 1);
    range.step = "1";
    range.addEventListener("input", () => {
      const v = LADDERS[name][Number(range.value)];
      box.value = String(v);
      range.setAttribute("aria-valuetext", v.toLocaleString("en-US"));
      current = readForm();
      onChange(getState());
    });
    box.addEventListener("change", () => {
      const v = Number(box.value);
      if (!Number.isInteger(v) || v < 1) return;
      setSlider(name, v);
      current = readForm();
      onChange(getState());
    });
  }
  form().addEventListener("change", (event) => {
    if (event.target.type === "range" || event.target.type === "number") return;
    current = readForm();
    showEngine();
    onChange(getState());
  });
  form().addEventListener("submit", (event) => event.preventDefault());
}
