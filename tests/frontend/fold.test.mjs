import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { defaultCollapsed, repeatedBlocks } from "../../frontend/js/fold.js";
import { FONTS, chipWidth, textWidth } from "../../frontend/js/metrics.js";

/** A chain x -> net.0 -> net.1 -> ... (alternating Linear/Tanh, 2 ops each) -> loss. */
function sequentialTrace(blocks, { sandwich = false } = {}) {
  const modules = [{ path: "", type: "SpecRoot" }, { path: "net", type: "Sequential" }];
  const nodes = [{ id: "x", kind: "tensor", module: null }];
  const edges = [];
  let prev = "x";
  for (let i = 0; i < 2 * blocks; i++) {
    const path = `net.${i}`;
    modules.push({ path, type: i % 2 ? "Tanh" : "Linear" });
    const a = `n${i}a`;
    const b = `n${i}b`;
    nodes.push({ id: a, kind: "op", op: i % 2 ? "TanhBackward0" : "AddmmBackward0", module: path }, { id: b, kind: "op", op: "ViewBackward0", module: path });
    edges.push({ id: `e${i}a`, source: prev, target: a }, { id: `e${i}b`, source: a, target: b });
    prev = b;
    if (sandwich) {
      // An op outside the modules between every two of them: folding would need upward edges.
      nodes.push({ id: `o${i}`, kind: "op", op: "MulBackward0", module: null });
      edges.push({ id: `eo${i}`, source: prev, target: `o${i}` });
      prev = `o${i}`;
    }
  }
  nodes.push({ id: "loss", kind: "op", op: "SumBackward0", module: null });
  edges.push({ id: "eL", source: prev, target: "loss" });
  return { graph: { nodes, edges, modules }, events: [] };
}

test("a long run of (Linear, Tanh) blocks folds its middle into one box with a count", () => {
  const folds = repeatedBlocks(sequentialTrace(10));
  assert.equal(folds.length, 1);
  const [f] = folds;
  assert.equal(f.period, 2);
  assert.equal(f.count, 8); // 10 blocks, the first and the last stay open
  assert.deepEqual(f.types, ["Linear", "Tanh"]);
  assert.equal(f.id, "net.2~17");
  assert.equal(f.paths.length, 16);
});

test("blocks with data leaving and re-entering between them are not folded", () => {
  assert.deepEqual(repeatedBlocks(sequentialTrace(10, { sandwich: true })), []);
});

test("the default collapse folds before collapsing, and never collapses the root alone", () => {
  const trace = sequentialTrace(60);
  assert.deepEqual([...defaultCollapsed(trace, 100, Infinity)], ["net.2~117"]);
  assert.equal(defaultCollapsed(trace, 1000, Infinity).size, 0);
  const flat = sequentialTrace(60, { sandwich: true });
  const set = defaultCollapsed(flat, 200);
  assert.ok(set.size > 1 && !set.has("net"), [...set].join(","));
});

test("text metrics: graph.css uses the measured fonts at the sizes metrics.js assumes", () => {
  const css = readFileSync(new URL("../../frontend/css/graph.css", import.meta.url), "utf8");
  assert.match(css, /\.gt-graph \{[^}]*font-family: "DejaVu Sans"/);
  assert.match(css, new RegExp(`\\.gt-graph text \\{[^}]*font-size: ${FONTS.label.size}px`));
  assert.match(css, new RegExp(`\\.gt-sublabel \\{[^}]*font-size: ${FONTS.sublabel.size}px[^}]*"DejaVu Sans Mono"`));
  assert.match(css, new RegExp(`\\.gt-grad text \\{[^}]*font-size: ${FONTS.chip.size}px`));
  assert.match(css, new RegExp(`\\.gt-node--op text:not\\(\\.gt-sublabel\\) \\{ font-size: ${FONTS.opLabel.size}px`));
  assert.match(css, new RegExp(`\\.gt-group-title \\{[^}]*font-size: ${FONTS.groupTitle.size}px`));
  // Chromium's measureText of "MmBackward0 (1, 3)" in DejaVu Sans at 100 px: 1036.6 px.
  assert.ok(Math.abs(textWidth("MmBackward0 (1, 3)", { face: "sans", size: 100 }) - 1036.6) < 3);
  assert.equal(chipWidth("1.000"), Math.ceil(5 * 0.6 * FONTS.chip.size) + 12);
});

test("a tall graph past the small ones opens at the depth whose drawing has few enough rows", () => {
  // 80 modules under net (Linear, Tanh, …), each 2 ops and an op between them: 242 nodes in one chain
  const trace = sequentialTrace(40, { sandwich: true });
  assert.ok(trace.graph.nodes.length > 120 && trace.graph.nodes.length < 400);
  const set = defaultCollapsed(trace);
  assert.ok(set.size > 1, "collapsed");
  assert.equal(defaultCollapsed(trace, 400, Infinity).size, 0); // under the node budget, no row budget: whole
  // small graphs stay whole however tall
  assert.equal(defaultCollapsed(sequentialTrace(15, { sandwich: true })).size, 0); // 92 nodes
});
