// The only module that calls fetch. Relative URLs (one origin), stale requests aborted, and the
// API's error envelope {"error": {"code", "message", "path", "errors"}} turned into an ApiError.
// Every trace it answers has its tensor numbers resolved (tensordata.js) before a caller sees it.

import { resolveTensorData } from "./tensordata.js";

export class ApiError extends Error {
  /** `errors`: every problem the API listed ({path, line, column, message}; the first is this one);
   * `line`/`column`: where in a program's source the (first) problem is, when the API says. */
  constructor(status, code, message, path, errors = [], { line = null, column = null } = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.path = path || null;
    this.errors = errors;
    this.line = line;
    this.column = column;
  }
}

/** fetch, with network failures and the API's error envelope turned into ApiErrors. */
async function send(url, options = {}) {
  let resp;
  try {
    resp = await fetch(url, options);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, "network", `cannot reach the server: ${err.message}`);
  }
  if (resp.ok) return resp;
  const body = parseJson(await resp.text());
  const e = (body && body.error) || {};
  const detail = body && Array.isArray(body.detail) ? body.detail.map((d) => d.msg).join("; ") : null;
  const where = { line: Number.isInteger(e.line) ? e.line : null, column: Number.isInteger(e.column) ? e.column : null };
  throw new ApiError(resp.status, e.code || "http_error", e.message || detail || `HTTP ${resp.status}`, e.path, Array.isArray(e.errors) ? e.errors : [], where);
}

function parseJson(text) {
  try {
    return text ? JSON.parse(text) : null;
  } catch {
    return null;
  }
}

async function request(url, options = {}) {
  return parseJson(await (await send(url, options)).text());
}

/** A trace the API answers, ready for the viewer. */
async function requestTrace(url, options = {}) {
  return resolveTensorData(await request(url, options));
}

const json = (body) => ({ method: "POST", headers: { "Content-Type": "application/json" }, body });

// One run at a time: a new trace or program run aborts the one still on its way.
let traceController = null;
function latest() {
  if (traceController) traceController.abort();
  traceController = new AbortController();
  return traceController.signal;
}

export const api = {
  examples: () => request("/api/v1/examples"),
  example: (id) => request(`/api/v1/examples/${encodeURIComponent(id)}`),
  /** POST the spec text as is (the server names the bad field or line); aborts the previous call. */
  trace(specText) {
    return requestTrace("/api/v1/trace", { ...json(specText), signal: latest() });
  },
  /** Run a program as written (in the server's jail): {trace (or null), stdout, stderr,
   * *_truncated, exception ({type, message, line} or null), seconds, id}; aborts the previous call. */
  async run(python) {
    const result = await request("/api/v1/run", { ...json(JSON.stringify({ python })), signal: latest() });
    return { ...result, trace: resolveTensorData(result?.trace ?? null) };
  },
  /** A program's permalink: {python} (POST it to run() again: the server answers from its cache). */
  savedRun: (id) => request(`/api/v1/runs/${encodeURIComponent(id)}`),
  /** POST a spec object for its trace (no abort: compare mode's second trace). */
  traceOf: (spec) => requestTrace("/api/v1/trace", json(JSON.stringify(spec))),
  /** The comparison of a (baseline) and b, each a spec object or a permalink id. */
  compare: (a, b) => request("/api/v1/compare", json(JSON.stringify({ a, b }))),
  /** {python} -> {spec}, or {spec} -> {python} (PyTorch source read, never run, by the server). */
  translate: (body) => request("/api/v1/translate", json(JSON.stringify(body))),
  share: (specText) => request("/api/v1/specs", json(specText)),
  savedSpec: (id) => request(`/api/v1/specs/${encodeURIComponent(id)}`),
  savedTrace: (id) => requestTrace(`/api/v1/specs/${encodeURIComponent(id)}/trace`),
  /** The trace file `gradtrace view FILE` serves (404 on a plain `gradtrace serve`), as a Blob:
   * a big one is parsed off the main thread (traceread.js), not here. */
  openedTraceBlob: async () => (await send("/api/v1/opened-trace")).blob(),
  /** The gallery's whole programs (gradtrace.watch training runs): [{id, title, description, python}]. */
  programExamples: () => request("/api/v1/program-examples"),
  /** The run `gradtrace view RUN_DIR` serves: its run view document, as committed now. */
  openedRun: () => request("/api/v1/opened-run", { cache: "no-store" }),
  /** The full trace that run saved at `step`, as text (the player reads it as it reads a file). */
  openedRunTrace: async (step) => (await send(`/api/v1/opened-run/traces/${encodeURIComponent(step)}`)).text(),
  /** A permalink as the one-file offline player: {blob, filename} (the server names the file). */
  async playerHtml(id, theme = "") {
    const query = theme ? `?theme=${encodeURIComponent(theme)}` : "";
    const resp = await send(`/api/v1/specs/${encodeURIComponent(id)}/player.html${query}`);
    const named = /filename="([^"]+)"/.exec(resp.headers.get("Content-Disposition") || "");
    return { blob: await resp.blob(), filename: named ? named[1] : null };
  },
};
