import { test } from "node:test";
import assert from "node:assert/strict";
import ELK from "../../frontend/node_modules/elkjs/lib/main.js";
import { layoutGraph } from "../../frontend/js/layout.js";
import { placeChips, compactGradText, leafChipText } from "../../frontend/js/chips.js";
import { tinyTrace, goldenTraces } from "./fixtures.mjs";

const elk = new ELK();
const box = (c) => ({ x: c.x - c.width / 2, y: c.y - 8, width: c.width, height: 16 });
const overlap = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

test("chip texts", () => {
  const tv = { shape: [2], dtype: "float32", stats: { numel: 2, norm: 2.5, nan: 0, inf: 0 }, values: [1.5, -2] };
  assert.equal(leafChipText(tv), ".grad [1.50, −2.00]");
  assert.equal(compactGradText(tv), "‖g‖ 2.50");
  assert.equal(compactGradText(null), "None");
});

test("placed chips overlap no node and no other chip", async () => {
  for (const [name, trace] of [["tiny", tinyTrace()], ...goldenTraces()]) {
    const layout = await layoutGraph(trace, { elk });
    const spots = placeChips(layout, trace);
    const placed = [...spots.leaf.values(), ...spots.value.values(), ...[...spots.edge.values()].filter((s) => !s.compact)].map(box);
    assert.ok(placed.length > 0, name);
    for (const [i, a] of placed.entries()) {
      for (const n of layout.nodes) assert.ok(!overlap(a, n), `${name}: chip ${i} over node ${n.id}`);
      for (const b of placed.slice(i + 1)) assert.ok(!overlap(a, b), `${name}: chips overlap`);
    }
    // Every edge that carries a gradient gets a chip somewhere.
    const withGrads = layout.edges.filter((e) => trace.graph.edges.find((t) => t.id === e.id.split("~")[0])?.grads?.length);
    assert.equal(withGrads.filter((e) => !spots.edge.has(e.id)).length, 0, name);
  }
});
