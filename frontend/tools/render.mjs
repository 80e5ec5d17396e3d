#!/usr/bin/env node
// gradtrace's offline renderer: a trace JSON in, a static/animated SVG or just the layout out.
// Layout runs in-process through the viewer's own layout.js + elkjs, so every picture matches
// the viewer's. The Python side (gradtrace.render) runs it once per Python process with
// --serve and sends it one request after another; laid-out graphs are kept (keyed by the
// graph, not the values), so a second picture of the same model skips the layout.
//
//   node frontend/tools/render.mjs --format svg|layout [--animated] [--phase both]
//        [--theme light] [--no-values] [--depth N] [--direction down|right]
//        [--in trace.json] [--out file] [--cache-dir DIR]
//   --depth N: every module N deep is one box (torchview's depth); without it, the viewer's
//   rule (big graphs fold repeated blocks, then collapse as deep as fits). Repeated blocks
//   fold either way. --direction right: data flows left to right.
//   node frontend/tools/render.mjs --serve [--cache-dir DIR]   (requests on stdin, answers on stdout:)
//     request:  {"args": [same options as above], "length": N}\n  + N bytes of trace JSON
//     answer:   {"ok": true, "length": N, "layout_from": "memory"|"disk"|"elk", "warning"?: "…"}\n
//               + N bytes   |   {"ok": false, "bad": bool, "error": "…"}\n
//
// --cache-dir keeps layouts on disk too (DIR/layouts), so a new process drawing a model drawn
// before (the CLI again, a notebook after a restart, a docs build) reads its layout instead of
// running ELK; they are keyed by the graph's structure and by the layout code itself.
//
// Input: a trace. Exit 2 on bad input (message on stderr, naming what is wrong), 1 on an
// internal failure.

import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, readdirSync, renameSync, statSync, unlinkSync, utimesSync, writeFileSync } from "node:fs";
import module from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { resolveTensorData } from "../js/tensordata.js";
import { layoutGraph } from "../js/layout.js";
import { exportCollapsed } from "../js/export/collapse.js";
import { buildDiagramSvg } from "../js/export/svg.js";

// Node >= 22 keeps compiled code on disk: a fresh process loads elkjs in a fraction of the time.
module.enableCompileCache?.();

const here = dirname(fileURLToPath(import.meta.url));
const FRONTEND = join(here, "..");
// Layouts kept for reuse: at most this many, holding at most this many nodes between them.
const LAYOUTS_KEPT = 32;
const LAYOUT_NODES_KEPT = 50_000;
// Layouts kept on disk (--cache-dir): at most this many files, the least recently used go.
const DISK_LAYOUTS_KEPT = 500;

class InputError extends Error {}

const OPTIONS = {
  format: { type: "string", default: "svg" },
  animated: { type: "boolean", default: false },
  phase: { type: "string", default: "both" },
  theme: { type: "string", default: "light" },
  "no-values": { type: "boolean", default: false },
  depth: { type: "string" },
  direction: { type: "string", default: "down" },
  in: { type: "string" },
  out: { type: "string" },
  serve: { type: "boolean", default: false },
  "cache-dir": { type: "string" },
};
const CHOICES = { format: ["svg", "layout"], phase: ["forward", "backward", "both"], theme: ["light", "dark"], direction: ["down", "right"] };

function parseOptions(args) {
  const { values: opts } = parseArgs({ args, options: OPTIONS, allowPositionals: false });
  for (const [k, allowed] of Object.entries(CHOICES)) {
    if (!allowed.includes(opts[k])) throw new InputError(`--${k} must be one of ${allowed.join(", ")} (got ${JSON.stringify(opts[k])})`);
  }
  if (opts.depth !== undefined) {
    if (!/^[1-9][0-9]{0,2}$/.test(opts.depth)) throw new InputError(`--depth must be a whole number from 1 (got ${JSON.stringify(opts.depth)})`);
    opts.depth = Number(opts.depth);
  }
  return opts;
}

function parseTrace(raw) {
  let trace;
  try {
    trace = JSON.parse(raw);
  } catch (err) {
    throw new InputError(`input is not JSON: ${err.message}`);
  }
  if (!trace || typeof trace !== "object" || !trace.graph || !Array.isArray(trace.graph.nodes) || !Array.isArray(trace.graph.edges)) {
    throw new InputError("input is not a gradtrace trace: graph.nodes and graph.edges are required");
  }
  if (!Array.isArray(trace.events)) throw new InputError("input is not a gradtrace trace: events is required");
  return resolveTensorData(trace);
}

let tools = null;
let givenElk = null;
/** Use this ELK instance (snapshot.cjs's, loaded and warmed up in the startup snapshot). */
export function useElk(elk) {
  givenElk = elk;
}
/** The viewer's modules and one ELK instance, loaded once per process. */
async function loadTools() {
  if (!tools) {
    const elk = givenElk ?? new (await import(join(FRONTEND, "node_modules/elkjs/lib/main.js"))).default();
    const css = readFileSync(join(FRONTEND, "css/graph.css"), "utf8");
    tools = { elk, layoutGraph, exportCollapsed, buildDiagramSvg, css };
  }
  return tools;
}

const layouts = new Map(); // graph hash -> layout, oldest first
// Tensor payloads on graph nodes (saved tensors, values) never move a box: a new trace of the
// same model, with other numbers, has the same layout.
const PAYLOAD_KEYS = new Set(["saved", "value"]);
const withoutPayloads = (key, value) => (PAYLOAD_KEYS.has(key) ? undefined : value);
/** The still picture's layout (modules collapsed as deep as fits), computed once per graph:
 * {layout, from: "memory" | "disk" | "elk", warning?}. */
async function layoutOf(trace, cacheDir, { depth = null, direction = "down" } = {}) {
  const t = await loadTools();
  // The graph and when each module call starts (a module called twice gets one box per call),
  // and how it is drawn (depth, direction).
  const calls = trace.events.filter((ev) => ev.kind === "module_forward_pre").map((ev) => [ev.module, ev.seq]);
  const how = depth === null && direction === "down" ? "" : JSON.stringify({ depth, direction }); // ("": the keys of layouts kept before these options)
  const key = createHash("sha256").update(JSON.stringify(trace.graph, withoutPayloads)).update(JSON.stringify(calls)).update(how).digest("hex");
  let layout = layouts.get(key);
  let from = "memory";
  let warning;
  if (layout) layouts.delete(key);
  else {
    const disk = cacheDir ? diskLayouts(cacheDir, key) : null;
    layout = disk?.read();
    from = "disk";
    if (!layout) {
      const collapsed = t.exportCollapsed(trace, { depth });
      layout = await t.layoutGraph(trace, { elk: t.elk, collapsed, showInserted: true, direction: direction.toUpperCase() });
      from = "elk";
      warning = disk?.write(layout);
    }
  }
  layouts.set(key, layout);
  let kept = 0;
  for (const l of layouts.values()) kept += l.nodes.length;
  while (layouts.size > 1 && (layouts.size > LAYOUTS_KEPT || kept > LAYOUT_NODES_KEPT)) {
    const [oldest, old] = layouts.entries().next().value;
    kept -= old.nodes.length;
    layouts.delete(oldest);
  }
  return { layout, from, warning };
}

let codeHash = null;
/** A hash of the code a layout comes from (the viewer's modules, elkjs): a changed layout rule
 * or another elkjs lays every graph out anew. */
function layoutCodeHash() {
  if (!codeHash) {
    const hash = createHash("sha256");
    for (const dir of ["js", "js/export"]) {
      for (const name of readdirSync(join(FRONTEND, dir)).filter((f) => f.endsWith(".js")).sort()) {
        hash.update(`${dir}/${name}\n`).update(readFileSync(join(FRONTEND, dir, name)));
      }
    }
    codeHash = hash.update(readFileSync(join(FRONTEND, "node_modules/elkjs/package.json"))).digest("hex");
  }
  return codeHash;
}

/** The layout file of graph `key` in `cacheDir`: read() -> layout or undefined; write(layout) ->
 * undefined, or a warning when the file could not be written (the picture is drawn all the same). */
function diskLayouts(cacheDir, key) {
  const dir = join(cacheDir, "layouts");
  const file = join(dir, `${createHash("sha256").update(key).update(layoutCodeHash()).digest("hex")}.json`);
  return {
    read() {
      let text;
      try {
        text = readFileSync(file, "utf8");
      } catch {
        return undefined; // not drawn before
      }
      try {
        const layout = JSON.parse(text);
        if (!Array.isArray(layout?.nodes)) return undefined;
        const now = new Date();
        utimesSync(file, now, now); // recently used: kept longest
        return layout;
      } catch {
        return undefined; // a torn or foreign file: laid out again, and written over
      }
    },
    write(layout) {
      try {
        mkdirSync(dir, { recursive: true });
        const partial = `${file}.${process.pid}.partial`;
        writeFileSync(partial, JSON.stringify(layout));
        renameSync(partial, file); // whole or not at all, whoever else writes the same file
        forgetOldest(dir);
        return undefined;
      } catch (err) {
        return `layouts are not kept in ${dir}: ${err.message}`;
      }
    },
  };
}

/** Keep at most DISK_LAYOUTS_KEPT layout files in `dir`, dropping the least recently used. */
function forgetOldest(dir) {
  const names = readdirSync(dir).filter((f) => f.endsWith(".json"));
  if (names.length <= DISK_LAYOUTS_KEPT) return;
  const used = (name) => {
    try {
      return statSync(join(dir, name)).mtimeMs;
    } catch {
      return 0;
    }
  };
  const byAge = names.map((name) => [used(name), name]).sort((a, b) => a[0] - b[0]);
  for (const [, name] of byAge.slice(0, names.length - DISK_LAYOUTS_KEPT)) {
    try {
      unlinkSync(join(dir, name));
    } catch {
      // another process took it already
    }
  }
}

/** One request: the trace JSON text and the options -> {output text, where the layout came from, warning?}. */
async function render(raw, opts) {
  const trace = parseTrace(raw);
  const { layout, from, warning } = await layoutOf(trace, opts["cache-dir"], { depth: opts.depth ?? null, direction: opts.direction });
  const done = { from, warning };
  if (opts.format === "layout") return { output: JSON.stringify(layout), ...done };
  const { buildDiagramSvg, css } = await loadTools();
  const output = buildDiagramSvg(trace, layout, { animated: opts.animated, phase: opts.phase, theme: opts.theme, values: !opts["no-values"], css });
  return { output, ...done };
}

function isBadInput(err) {
  return err instanceof InputError || err.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" || err.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE";
}

/** Answer framed requests from stdin until it closes, one at a time, in order (layouts kept in
 * `cacheDir` too, when given). */
async function serve(cacheDir) {
  let buffer;
  let header = null;
  let queue = Promise.resolve();
  const answer = async (args, body) => {
    try {
      const opts = parseOptions(args);
      opts["cache-dir"] ??= cacheDir;
      const { output, from, warning } = await render(body.toString("utf8"), opts);
      const out = Buffer.from(output, "utf8");
      process.stdout.write(JSON.stringify({ ok: true, length: out.length, layout_from: from, warning }) + "\n");
      process.stdout.write(out);
    } catch (err) {
      process.stdout.write(JSON.stringify({ ok: false, bad: isBadInput(err), error: err.message }) + "\n");
      if (!isBadInput(err) && err.stack) process.stderr.write(err.stack + "\n");
    }
  };
  // Chunks are kept in a list and joined once a whole request is there (joining on every
  // 64 KiB chunk would copy a big trace hundreds of times).
  let chunks = [];
  let pending = 0;
  process.stdin.on("data", (chunk) => {
    chunks.push(chunk);
    pending += chunk.length;
    for (;;) {
      if (!header) {
        if (chunk.indexOf(10) < 0 && chunks.length > 1) return;
        buffer = Buffer.concat(chunks);
        const end = buffer.indexOf(10);
        if (end < 0) return;
        header = JSON.parse(buffer.subarray(0, end).toString("utf8"));
        buffer = buffer.subarray(end + 1);
        chunks = [buffer];
        pending = buffer.length;
      }
      if (pending < header.length) return;
      buffer = Buffer.concat(chunks);
      const body = buffer.subarray(0, header.length);
      const args = header.args;
      buffer = buffer.subarray(header.length);
      chunks = [buffer];
      pending = buffer.length;
      header = null;
      queue = queue.then(() => answer(args, body));
      chunk = buffer;
    }
  });
}

export async function main(argv = process.argv.slice(2)) {
  const opts = parseOptions(argv);
  if (opts.serve) return serve(opts["cache-dir"]);
  const { output, warning } = await render(readFileSync(opts.in ?? 0, "utf8"), opts);
  if (warning) process.stderr.write(`render: ${warning}\n`);
  if (opts.out) writeFileSync(opts.out, output);
  else process.stdout.write(output);
}

export function fail(err) {
  const bad = isBadInput(err);
  process.stderr.write(`render: ${bad ? "" : "internal error: "}${err.message}\n`);
  if (!bad && err.stack) process.stderr.write(err.stack + "\n");
  process.exit(bad ? 2 : 1);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main().catch(fail);
