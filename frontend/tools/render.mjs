#!/usr/bin/env node
// gradtrace's offline renderer: a trace JSON in, a static/animated SVG, a standalone HTML file,
// or just the layout out. Layout runs in-process through the viewer's own layout.js + elkjs,
// so every picture matches the viewer's. The Python side (gradtrace.render) calls this.
//
//   node frontend/tools/render.mjs --format svg|html|layout [--animated] [--phase both]
//        [--theme light] [--no-values] [--mode embed|full] [--no-elk] [--in trace.json] [--out file]
//
// Input: a trace, or {"trace": …, "layout": …} with a precomputed layout. Exit 2 on bad input
// (message on stderr, naming what is wrong), 1 on an internal failure.

import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const here = dirname(fileURLToPath(import.meta.url));
const FRONTEND = join(here, "..");

class InputError extends Error {}

const OPTIONS = {
  format: { type: "string", default: "svg" },
  animated: { type: "boolean", default: false },
  phase: { type: "string", default: "both" },
  theme: { type: "string", default: "light" },
  "no-values": { type: "boolean", default: false },
  mode: { type: "string", default: "embed" },
  "no-elk": { type: "boolean", default: false },
  in: { type: "string" },
  out: { type: "string" },
};
const CHOICES = { format: ["svg", "html", "layout"], phase: ["forward", "backward", "both"], theme: ["light", "dark"], mode: ["embed", "full"] };

function readInput(path) {
  const raw = readFileSync(path ?? 0, "utf8");
  let doc;
  try {
    doc = JSON.parse(raw);
  } catch (err) {
    throw new InputError(`input is not JSON: ${err.message}`);
  }
  const trace = doc && doc.trace ? doc.trace : doc;
  if (!trace || typeof trace !== "object" || !trace.graph || !Array.isArray(trace.graph.nodes) || !Array.isArray(trace.graph.edges)) {
    throw new InputError("input is not a gradtrace trace: graph.nodes and graph.edges are required");
  }
  if (!Array.isArray(trace.events)) throw new InputError("input is not a gradtrace trace: events is required");
  return { trace, layout: doc.trace ? doc.layout ?? null : null };
}

/** Modules collapsed: a picture as deep as fits (exportCollapsed), the player as the viewer does. */
async function collapsedFor(trace, still) {
  const { defaultCollapsed } = await import(join(FRONTEND, "js/layout.js"));
  const { exportCollapsed } = await import(join(FRONTEND, "js/export/collapse.js"));
  return still ? exportCollapsed(trace) : defaultCollapsed(trace);
}

/** The viewer's layout, computed with elkjs in this process. */
export async function computeLayout(trace, collapsed) {
  const { default: ELK } = await import(join(FRONTEND, "node_modules/elkjs/lib/main.js"));
  const { layoutGraph } = await import(join(FRONTEND, "js/layout.js"));
  return layoutGraph(trace, { elk: new ELK(), collapsed, showInserted: true });
}

async function main() {
  const { values: opts } = parseArgs({ options: OPTIONS, allowPositionals: false });
  // HTML follows the reader's colour scheme unless a theme is asked for.
  const themeGiven = process.argv.some((a) => a === "--theme" || a.startsWith("--theme="));
  for (const [k, allowed] of Object.entries(CHOICES)) {
    if (!allowed.includes(opts[k])) throw new InputError(`--${k} must be one of ${allowed.join(", ")} (got ${JSON.stringify(opts[k])})`);
  }
  const { trace, layout: given } = readInput(opts.in);
  const collapsed = await collapsedFor(trace, opts.format !== "html");
  const layout = given ?? (await computeLayout(trace, collapsed));
  let output;
  if (opts.format === "layout") output = JSON.stringify(layout);
  else if (opts.format === "svg") {
    const { buildDiagramSvg } = await import(join(FRONTEND, "js/export/svg.js"));
    const css = readFileSync(join(FRONTEND, "css/graph.css"), "utf8");
    output = buildDiagramSvg(trace, layout, { animated: opts.animated, phase: opts.phase, theme: opts.theme, values: !opts["no-values"], css });
  } else {
    const { buildStandaloneHtml } = await import(join(here, "standalone.mjs"));
    output = await buildStandaloneHtml(trace, layout, { mode: opts.mode, theme: themeGiven ? opts.theme : null, elk: !opts["no-elk"], collapsed: given ? [] : [...collapsed] });
  }
  if (opts.out) writeFileSync(opts.out, output);
  else process.stdout.write(output);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err) => {
    const bad = err instanceof InputError || err.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" || err.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE";
    process.stderr.write(`render: ${bad ? "" : "internal error: "}${err.message}\n`);
    if (!bad && err.stack) process.stderr.write(err.stack + "\n");
    process.exit(bad ? 2 : 1);
  });
}
