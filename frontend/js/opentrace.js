// Open a file the user has on disk, in the player and in the run view alike: a trace.json (one
// written by `gradtrace trace` or by gradtrace.trace(model, …) in Python) or a training run's file
// (the run view's Download): the Open button, or a file dropped anywhere on the page. By default a
// run goes to the run view (handoff.js); the run view shows it in place.
// The file is read here, in the browser, never uploaded, and off the main thread (traceread.js:
// a 300 MB file takes seconds to parse). checkTrace (tracedoc.js) says in one sentence why a
// document cannot be shown (not JSON, a spec rather than a trace, another schema_version, a node
// it names that its graph lacks) before anything on screen changes; a bad file leaves the trace
// that was shown in place.

import { handOff } from "./handoff.js";
import { readTraceBlob } from "./traceread.js";
import { formatBytes } from "./format.js";

/** Bigger files than this are refused before reading: the browser tab would not survive them. */
export const MAX_FILE_BYTES = 512 * 1024 * 1024;

/** Read a File (from the picker or a drop): {trace} ready for showTrace, or {run} (a training
 * run's text, for the run view); `onProgress(text)` hears how far the reading is. */
export async function readTraceFile(file, { onProgress } = {}) {
  if (file.size > MAX_FILE_BYTES) throw new Error(`it is ${formatBytes(file.size)}, more than this viewer opens (${formatBytes(MAX_FILE_BYTES)})`);
  return readTraceBlob(file, { onProgress });
}

const carriesFiles = (e) => [...(e.dataTransfer?.types || [])].includes("Files");

/** A run's file, opened in the player: handed to the run view. */
const runToRunView = (text, name) => handOff("run", name, text, "/watch.html?handoff=run");

/**
 * Wire the Open button (`button` opens the hidden file `input`) and dropping a file on `target`.
 * `open(trace, name, file)` shows a good trace file; `openRun(text, name)` a run's (what it throws
 * is refused too); `refuse(name, message)` reports a bad one; `progress(name, text)` hears how
 * far reading it is.
 */
export function bindOpenTrace({ button, input, target, open, openRun = runToRunView, refuse, progress = () => {} }) {
  async function take(file) {
    if (!file) return;
    let trace;
    try {
      const read = await readTraceFile(file, { onProgress: (text) => progress(file.name, text) });
      if (read.run !== undefined) return await openRun(read.run, file.name);
      trace = read.trace;
    } catch (err) {
      refuse(file.name, err.message);
      return;
    }
    await open(trace, file.name, file);
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
