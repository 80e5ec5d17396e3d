// What a still picture collapses (issue 24, item 2): by default the viewer's rule (fold.js),
// with a depth every module that deep as one box, repeated blocks folded either way.
import { test } from "node:test";
import assert from "node:assert/strict";
import { exportCollapsed } from "../../frontend/js/export/collapse.js";
import { defaultCollapsed } from "../../frontend/js/fold.js";

/** A Sequential of `n` (Linear, Tanh) pairs: modules "0" … "2n-1", a few nodes each. */
function chain(n) {
  const modules = [{ path: "", type: "Sequential" }];
  const nodes = [{ id: "x", kind: "tensor", module: null }];
  const edges = [];
  let prev = "x";
  for (let i = 0; i < 2 * n; i++) {
    const linear = i % 2 === 0;
    modules.push({ path: String(i), type: linear ? "Linear" : "Tanh" });
    const ops = linear ? ["AddmmBackward0", "TBackward0"] : ["TanhBackward0"];
    for (const op of ops) {
      const id = `n${nodes.length}`;
      nodes.push({ id, kind: "op", op, module: String(i), created_seq: nodes.length, shape: [2, 8] });
      edges.push({ id: `e${edges.length}`, source: prev, target: id, kind: "data" });
      prev = id;
    }
  }
  return { graph: { nodes, edges, modules }, events: [] };
}

test("by default a picture collapses what the viewer does", () => {
  for (const n of [3, 150]) assert.deepEqual([...exportCollapsed(chain(n))], [...defaultCollapsed(chain(n))]);
  assert.deepEqual([...exportCollapsed(chain(150))], ["2~297"]); // past 400 nodes; the first and last block stay open
  assert.equal(exportCollapsed(chain(3)).size, 0); // a small graph: nothing
});

test("a depth collapses every module that deep and folds repeated blocks", () => {
  const set = exportCollapsed(chain(100), { depth: 1 });
  assert.ok(set.has("2~197") && set.has("0") && set.has("199") && set.has("57"));
  assert.equal(exportCollapsed(chain(2), { depth: 1 }).size, 4); // too short to fold: 4 boxes
});

test("a depth must be a whole number from 1", () => {
  for (const depth of [0, -1, 1.5]) assert.throws(() => exportCollapsed(chain(2), { depth }), /depth must be a whole number/);
});
