// The entry of render.mjs's V8 startup snapshot (node --snapshot-blob BLOB --build-snapshot
// snapshot.cjs): the layout engine (elkjs, one file) is loaded, one ELK made and warmed up with
// representative layouts, so a process started from BLOB (node --snapshot-blob BLOB -- --serve ...) skips
// the half second elkjs costs a fresh Node. gradtrace.render.node_tool builds BLOB on first use
// into the user's cache folder and falls back to plain render.mjs when it cannot.
// A snapshot holds one script only: elkjs is read and run here, the viewer's modules
// (render.mjs and what it imports) are loaded when the process starts.
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");
const v8 = require("node:v8");

const FRONTEND = join(__dirname, "..");
const source = readFileSync(join(FRONTEND, "node_modules/elkjs/lib/elk.bundled.js"), "utf8");
const elkModule = { exports: {} };
new Function("module", "exports", "require", source)(elkModule, elkModule.exports, undefined);
const elk = new elkModule.exports();
// A warm-up: the engine's classes are set up and its code compiled before the snapshot is taken.
// It lays out the graphs of snapshot-warmup.json (recorded from layout.js by
// scripts/snapshot_warmup.py: module boxes, a module called twice, attention, a graph laid out
// box by box), so the bytecode of the code paths a first drawing runs is in the snapshot. Once
// is enough: V8 keeps bytecode in a snapshot, never type feedback nor optimised code, so more
// rounds warm nothing more (measured: the first drawing's CPU time the same with 1 and 3). What
// stays cold is in BENCHMARKS.md. Without the file, a three-box toy.
const box = (id) => ({ id, width: 40, height: 20 });
let warmUp = [
  {
    id: "warm-up",
    layoutOptions: { "elk.algorithm": "layered" },
    children: [box("a"), box("b"), box("c")],
    edges: [
      { id: "ab", sources: ["a"], targets: ["b"] },
      { id: "ac", sources: ["a"], targets: ["c"] },
    ],
  },
];
try {
  warmUp = JSON.parse(readFileSync(join(FRONTEND, "tools", "snapshot-warmup.json"), "utf8"));
} catch {
  // (an installation without the file: the toy warms the engine up)
}
// Laid out one after another (elkjs answers on a timer): the snapshot is taken once all are done.
(async () => {
  // (a graph ELK refuses warms nothing, and must not cost the snapshot)
  for (const graph of warmUp) await elk.layout(graph).catch(() => undefined);
})();

v8.startupSnapshot.setDeserializeMainFunction(() => {
  // (a snapshot's main cannot import(); Node >= 22 requires an ES module synchronously)
  const load = require("node:module").createRequire(join(FRONTEND, "tools", "render.mjs"));
  const render = load(join(FRONTEND, "tools", "render.mjs"));
  render.useElk(elk);
  render.main(process.argv.slice(1)).catch(render.fail);
});
