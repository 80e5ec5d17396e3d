// The graphs the renderer's startup snapshot lays out while it is built (frontend/tools/
// snapshot-warmup.json, written by scripts/snapshot_warmup.py): ELK lays each out, and they are
// layout.js's graphs of today (a warm-up with other options would warm other code up).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import ELK from "../../frontend/node_modules/elkjs/lib/main.js";
import { LAYOUT_OPTIONS, WHOLE_HIERARCHY_UP_TO } from "../../frontend/js/layout.js";

const graphs = JSON.parse(readFileSync(new URL("../../frontend/tools/snapshot-warmup.json", import.meta.url), "utf8"));
const count = (g) => (g.children || []).reduce((n, c) => n + 1 + count(c), 0);

test("every warm-up graph is one ELK lays out", async () => {
  const elk = new ELK();
  assert.ok(graphs.length >= 4);
  for (const graph of graphs) {
    const done = await elk.layout(structuredClone(graph));
    assert.ok(done.width > 0 && done.height > 0, graph.id);
  }
});

test("the warm-up has whole hierarchies with today's options and a graph laid out box by box", () => {
  const whole = graphs.filter((g) => g.layoutOptions["elk.hierarchyHandling"] === "INCLUDE_CHILDREN");
  assert.ok(whole.length >= 3);
  for (const g of whole) assert.deepEqual(g.layoutOptions, LAYOUT_OPTIONS);
  // box by box: a model of more than WHOLE_HIERARCHY_UP_TO drawn nodes, in several ELK calls
  assert.ok(graphs.some((g) => g.layoutOptions["elk.hierarchyHandling"] === undefined && count(g) > 50));
  assert.ok(WHOLE_HIERARCHY_UP_TO < 200);
});
