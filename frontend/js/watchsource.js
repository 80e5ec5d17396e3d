// Where the run view's run comes from (the run view document, runs/view_data.py):
//   - `gradtrace view RUN_DIR` (the page with no query): GET /api/v1/opened-run, asked again while
//     the page is open (a run still being written grows);
//   - a gallery program (?example=<id>) or a program's permalink (?program=<id>): the program
//     posted to POST /api/v1/run as written, its `watch` document (priced like any trace, cached);
//   - a file: the run view's Download, read back by Open (here or the player's), never uploaded;
//   - a notebook cell: the document embedded in the page (<script id="run-data">).

import { api } from "./api.js";
import { takeHandoff } from "./handoff.js";
import { RUN_FORMAT, parseJson } from "./tracedoc.js";

/** Why a parsed document is not a run this view draws, or "". */
function checkRun(doc) {
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) return "it is not a gradtrace run (the JSON is not an object)";
  if (doc.format !== RUN_FORMAT) {
    if (doc.schema_version !== undefined) return "it is a trace, not a run: open it in the player (gradtrace's main page)";
    return `it is not a gradtrace run view (format ${JSON.stringify(doc.format ?? null)}; this view reads ${RUN_FORMAT})`;
  }
  for (const k of ["steps", "loss", "nodes", "edges", "grad_out", "flags"]) if (!Array.isArray(doc[k])) return `it is not a complete run (no ${k})`;
  if (doc.grad_out.length !== doc.steps.length) return "it is not a complete run (grad_out has not one row per step)";
  return "";
}

/** A run's text (a file, a hand-off) as a run document; throws an Error saying what is wrong. */
export function parseRun(text) {
  const doc = parseJson(text);
  const why = checkRun(doc);
  if (why) throw new Error(why);
  return doc;
}

/** The run a POST /run answer carries, or an Error saying why there is none. */
function runOfAnswer(result) {
  if (result?.watch) return result.watch;
  const exc = result?.exception;
  if (exc) return new Error(`the program raised ${exc.type}${exc.line ? ` at line ${exc.line}` : ""} before its run logged a step: ${exc.message}`);
  return new Error("the program ran but did not call gradtrace.watch: there is no run to show (the player draws what it recorded)");
}

/** Run a program on the server; its run, with what it printed. */
async function runProgram(python, setStatus) {
  setStatus("running the program on the server (a training run takes some seconds)…");
  const result = await api.run(python);
  const run = runOfAnswer(result);
  if (run instanceof Error) throw run;
  return { run, printed: result.stdout || "", permalink: result.id || null };
}

/**
 * Where this page's run is: {kind, load(), poll, title, about}. `load()` resolves to {run,
 * printed?, permalink?}; `poll`: ask again every few seconds (a run being written).
 */
export function sourceOfPage(setStatus) {
  const query = new URLSearchParams(location.search);
  const embedded = document.getElementById("run-data");
  if (embedded) return { kind: "embedded", poll: false, load: async () => ({ run: parseRun(embedded.textContent) }) };
  if (query.get("handoff") === "run") {
    const handed = takeHandoff("run");
    if (handed) return { kind: "file", name: handed.name, poll: false, load: async () => ({ run: parseRun(handed.text) }) };
  }
  const example = query.get("example");
  if (example) {
    return {
      kind: "example",
      id: example,
      poll: false,
      load: async () => {
        const programs = await api.programExamples();
        const program = programs.find((p) => p.id === example);
        if (!program) throw new Error(`there is no gallery program ${JSON.stringify(example)} (there are ${programs.map((p) => p.id).join(", ")})`);
        return { ...(await runProgram(program.python, setStatus)), about: program.description };
      },
    };
  }
  const permalink = query.get("program");
  if (permalink) {
    return { kind: "program", id: permalink, poll: false, load: async () => runProgram((await api.savedRun(permalink)).python, setStatus) };
  }
  return { kind: "opened", poll: true, load: async () => ({ run: await api.openedRun() }) };
}

/** The full trace saved at `step` as text: carried in the run, else asked of `gradtrace view`. */
export async function fullTraceText(run, step, source) {
  const carried = run.full_traces?.[String(step)];
  if (carried) return JSON.stringify(carried);
  if (source.kind === "opened") return api.openedRunTrace(step);
  throw new Error(`the full trace of step ${step} did not travel with this run${run.cut?.length ? ` (${run.cut.join("; ")})` : ""}`);
}
