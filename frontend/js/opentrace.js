// Open a trace.json the user has on disk (one written by `gradtrace trace` or by
// gradtrace.trace(model, …) in Python): the Open button, or a file dropped anywhere on the page.
// A training run's file (the run view's Download) goes to the run view (handoff.js).
// The file is read here, in the browser, never uploaded. checkTrace says in one sentence why a
// document cannot be shown (not JSON, a spec rather than a trace, another schema_version) before
// anything on screen changes; a bad file leaves the trace that was shown in place.

import { handOff } from "./handoff.js";
import { resolveTensorData } from "./tensordata.js";

/** The trace document versions this viewer draws (tensordata.js reads both number layouts). */
export const SCHEMA_VERSIONS = [2, 3];
/** Bigger files than this are refused before reading: the browser tab would not survive them. */
export const MAX_FILE_BYTES = 512 * 1024 * 1024;

/** Why a parsed document is not a trace this viewer can draw, or "" when it is one. */
export function checkTrace(doc) {
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) return "it is not a gradtrace trace (the JSON is not an object)";
  if (doc.schema_version === undefined) {
    if (doc.spec_version !== undefined) return "it is a model spec, not a trace: paste it into the editor and press Run";
    return "it is not a gradtrace trace (it has no schema_version)";
  }
  if (!SCHEMA_VERSIONS.includes(doc.schema_version)) {
    const known = SCHEMA_VERSIONS.join(" or ");
    return `it is a trace of schema_version ${JSON.stringify(doc.schema_version)}; this viewer reads ${known} (trace the spec again with this gradtrace)`;
  }
  const missing = [
    ["graph.nodes", Array.isArray(doc.graph?.nodes)],
    ["graph.edges", Array.isArray(doc.graph?.edges)],
    ["events", Array.isArray(doc.events)],
    ["passes", Array.isArray(doc.passes)],
  ].filter(([, ok]) => !ok);
  if (missing.length) return `it is not a complete gradtrace trace (no ${missing.map(([name]) => name).join(", ")})`;
  return "";
}

/** The JSON of a file's text; throws an Error saying it is not JSON. */
function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(`it is not JSON (${err.message})`);
  }
}

/** A parsed document as a trace ready for showTrace; throws an Error saying what is wrong. */
function traceOf(doc) {
  const why = checkTrace(doc);
  if (why) throw new Error(why);
  return resolveTensorData(doc);
}

/** Parse and check a trace's text; throws an Error whose message says what is wrong. */
export function parseTrace(text) {
  return traceOf(parseJson(text));
}

async function readText(file) {
  if (file.size > MAX_FILE_BYTES) throw new Error(`it is ${Math.round(file.size / 2 ** 20)} MiB, more than this viewer opens (${MAX_FILE_BYTES / 2 ** 20} MiB)`);
  return file.text();
}

/** Read a File (from the picker or a drop) into a trace ready for showTrace. */
export async function readTraceFile(file) {
  return parseTrace(await readText(file));
}

/** A training run's file (the run view's Download: gradtrace.watch's run) is the run view's to show. */
const isRun = (doc) => typeof doc?.format === "string" && doc.format.startsWith("gradtrace-run-view/");

const carriesFiles = (e) => [...(e.dataTransfer?.types || [])].includes("Files");

/**
 * Wire the Open button (`button` opens the hidden file `input`) and dropping a file on `target`.
 * `open(trace, name)` shows a good file; `refuse(name, message)` reports a bad one.
 */
export function bindOpenTrace({ button, input, target, open, refuse }) {
  async function take(file) {
    if (!file) return;
    let trace;
    try {
      const text = await readText(file);
      const doc = parseJson(text);
      if (isRun(doc)) return handOff("run", file.name, text, "/watch.html?handoff=run");
      trace = traceOf(doc);
    } catch (err) {
      refuse(file.name, err.message);
      return;
    }
    await open(trace, file.name);
  }
  button.addEventListener("click", () => input.click());
  input.addEventListener("change", () => {
    const [file] = input.files;
    input.value = ""; // the same file chosen again is a new change
    take(file);
  });
  // While a file is dragged over the page, the body says so (CSS shows where it will land).
  let depth = 0;
  const over = (on) => target.classList.toggle("is-dropping", on);
  target.addEventListener("dragenter", (e) => {
    if (!carriesFiles(e)) return;
    depth += 1;
    over(true);
  });
  target.addEventListener("dragover", (e) => {
    if (!carriesFiles(e)) return;
    e.preventDefault(); // without it the browser would navigate to the file
    e.dataTransfer.dropEffect = "copy";
  });
  target.addEventListener("dragleave", () => {
    depth = Math.max(0, depth - 1);
    if (!depth) over(false);
  });
  target.addEventListener("drop", (e) => {
    if (!e.dataTransfer?.files?.length) return;
    e.preventDefault();
    depth = 0;
    over(false);
    take(e.dataTransfer.files[0]);
  });
}
