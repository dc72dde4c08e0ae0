// The API: every number the page shows comes from here. One set of calls, two backends:
// the server's JSON API (`ridgeline web`), or, in the static site (`ridgeline web --export`),
// the same Python core running in the page through Pyodide (`ridgeline/web/browser.py`).

export class ApiError extends Error {}

const meta = (name) => document.querySelector(`meta[name="${name}"]`);
export const backend = meta("ridgeline-backend")?.content === "pyodide" ? "pyodide" : "server";

// --- the server -------------------------------------------------------------------------

async function getJson(path, params) {
  const query = params ? `?${new URLSearchParams(params)}` : "";
  const response = await fetch(`${path}${query}`, { headers: { Accept: "application/json" } });
  const body = await response.json();
  if (!response.ok) throw new ApiError(typeof body.detail === "string" ? body.detail : response.statusText);
  return body;
}

const server = {
  playground: (state) => getJson("api/playground", state),
  slo: (state) => getJson("api/slo", state),
  models: () => getJson("api/models"),
  engines: () => getJson("api/engines"),
  lesson: () => getJson("api/lesson"),
  step: (n) => getJson(`api/lesson/${n}`),
  check: (n, answer) => getJson(`api/lesson/${n}/check`, { answer: String(answer) }),
};

// --- Python in the page ---------------------------------------------------------------------

let python = null; // a promise of ridgeline.web.browser, loaded once

function loadScript(src, integrity) {
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = src;
    if (integrity) {
      script.integrity = integrity;
      script.crossOrigin = "anonymous";
    }
    script.onload = resolve;
    script.onerror = () => reject(new ApiError(`Pyodide could not be loaded from ${src}`));
    document.head.append(script);
  });
}

async function startPython() {
  const tag = meta("ridgeline-pyodide");
  const indexURL = new URL(tag.content, document.baseURI).href;
  const t0 = performance.now();
  await loadScript(`${indexURL}pyodide.js`, tag.dataset.integrity);
  const pyodide = await globalThis.loadPyodide({ indexURL });
  const core = await fetch(new URL("py/ridgeline.zip", document.baseURI));
  if (!core.ok) throw new ApiError(`py/ridgeline.zip: ${core.status} ${core.statusText}`);
  pyodide.unpackArchive(await core.arrayBuffer(), "zip", { extractDir: "/home/pyodide/ridgeline-site" });
  pyodide.runPython("import sys; sys.path.insert(0, '/home/pyodide/ridgeline-site')");
  const t1 = performance.now();
  const browser = pyodide.pyimport("ridgeline.web.browser");
  // how long Python took to start in the page, and the core's import within it (benchmarks)
  document.body.dataset.pythonMs = String(Math.round(performance.now() - t0));
  document.body.dataset.importMs = String(Math.round(performance.now() - t1));
  return browser;
}

async function call(name, ...args) {
  if (!python) python = startPython();
  const browser = await python;
  const body = JSON.parse(browser.call(name, ...args));
  if ("error" in body) throw new ApiError(body.error);
  return body.ok;
}

const inPage = {
  playground: (state) => call("playground", JSON.stringify(state)),
  slo: (state) => call("slo", JSON.stringify(state)),
  models: () => call("models"),
  engines: () => call("engines"),
  lesson: () => call("lesson"),
  step: (n) => call("step", n),
  check: (n, answer) => call("check", n, String(answer)),
};

export const api = backend === "pyodide" ? inPage : server;
