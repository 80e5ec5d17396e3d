import { test } from "node:test";
import assert from "node:assert/strict";
import { compareMarks, compareHref, ratioText } from "../../frontend/js/compare.js";
import { goldenTrace } from "./fixtures.mjs";

const diffOf = (status, ratio = null) => ({ name: "", status, ratio });

test("factors as the graph prints them", () => {
  assert.equal(ratioText(2), "×2");
  assert.equal(ratioText(0.5), "×0.5");
  assert.equal(ratioText(-1), "×\u22121");
  assert.equal(ratioText(1.2346), "×1.235");
  assert.equal(ratioText(null), "changed");
  assert.equal(compareHref("full-backward-hook-x2", "full-backward-hook"), "#example=full-backward-hook-x2&compare=full-backward-hook");
});

test("marks: changed edges with their factor, the nodes they leave, changed leaves, nodes only b has", () => {
  const trace = goldenTrace("spec_seed002_full_backward_hook");
  const [e1, e2, e3] = trace.graph.edges;
  const leaf = trace.graph.nodes.find((n) => n.kind === "tensor" && n.role === "parameter");
  const inserted = trace.graph.nodes.find((n) => n.inserted);
  const diff = {
    edges: {
      matched: [
        { a: "x1", b: e1.id, grads: [diffOf("changed", 2)] },
        { a: "x2", b: e2.id, grads: [diffOf("changed", 2), diffOf("changed", 3)] }, // two passes, two factors
        { a: "x3", b: e3.id, grads: [diffOf("unchanged")] },
      ],
    },
    grads: [{ name: leaf.tensor, status: "changed", ratio: 2 }],
    nodes: { only_b: [inserted.id], only_a: [] },
  };
  const marks = compareMarks(trace, diff);
  assert.deepEqual([...marks.edges], [[e1.id, 2], [e2.id, null]]);
  assert.equal(marks.nodes.get(e1.source), e1.source === e2.source ? null : 2);
  assert.ok(!marks.edges.has(e3.id));
  assert.equal(marks.nodes.get(leaf.id), 2);
  assert.deepEqual([...marks.onlyHere], [inserted.id]);
});
