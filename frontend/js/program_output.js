// What a program run printed, in a panel under the editor: its stdout, then its stderr (warnings
// land there), each said when the server cut it, and the exception it raised with its line.
// outputParts is pure (tested in tests/frontend); createProgramOutput only writes the DOM.

import { h } from "./dom.js";
import { handOff } from "./handoff.js";

/** A program that called gradtrace.watch: the link to its run in the run view (its permalink's
 * URL, else the run handed over in this tab), or null. */
export function runLink(result) {
  const run = result?.watch;
  if (!run) return null;
  const flags = run.flags.length;
  const text = `Open its training run: ${run.steps.length} logged steps, ${flags} flag${flags === 1 ? "" : "s"} →`;
  if (result.id) return h("a", { class: "program-output-run", href: `/watch.html?program=${encodeURIComponent(result.id)}`, text });
  return h("button", { type: "button", class: "program-output-run", text, onclick: () => handOff("run", "your program's run", JSON.stringify(run), "/watch.html?handoff=run") });
}

/** The panel's parts for one /api/v1/run answer: [{kind: "stdout"|"stderr"|"note"|"exception", text}]. */
export function outputParts(result) {
  const parts = [];
  for (const stream of ["stdout", "stderr"]) {
    const text = result?.[stream] || "";
    if (text) parts.push({ kind: stream, text: text.endsWith("\n") ? text.slice(0, -1) : text });
    if (result?.[`${stream}_truncated`]) parts.push({ kind: "note", text: `… (${stream} was cut: the program printed more than the server keeps)` });
  }
  const exc = result?.exception;
  if (exc) parts.push({ kind: "exception", text: `${exc.line ? `Line ${exc.line}: ` : ""}${exc.type}: ${exc.message}` });
  return parts;
}

/** A one-line summary for the panel's heading: how many lines were printed, how long it ran. */
export function outputSummary(result) {
  const lines = (result?.stdout || "").split("\n").filter((line, k, all) => line || k < all.length - 1).length;
  const took = Number.isFinite(result?.seconds) ? ` in ${result.seconds.toFixed(2)} s` : "";
  const said = lines ? `${lines} printed line${lines === 1 ? "" : "s"}` : "nothing printed";
  return `Output: ${said}${took}${result?.exception ? `, raised ${result.exception.type}` : ""}`;
}

export function createProgramOutput(el) {
  return {
    show(result) {
      const parts = outputParts(result);
      const pre = parts.length
        ? h(
            "pre",
            { class: "program-output-text", tabindex: "0", "aria-label": "What the program printed" },
            parts.map((p) => h("span", { class: `program-output-${p.kind}`, text: `${p.text}\n` })),
          )
        : null; // nothing printed: the heading says so
      el.replaceChildren(...[h("h2", { class: "program-output-title", text: outputSummary(result) }), runLink(result), pre].filter(Boolean));
      el.hidden = false;
    },
    clear() {
      el.hidden = true;
      el.replaceChildren();
    },
  };
}
