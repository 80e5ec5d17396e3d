import { test } from "node:test";
import assert from "node:assert/strict";
import ELK from "../../frontend/node_modules/elkjs/lib/main.js";
import { layoutGraph, defaultCollapsed, prettyName } from "../../frontend/js/layout.js";
import { tinyTrace, goldenTraces } from "./fixtures.mjs";

const elk = new ELK();
const byId = (layout) => new Map(layout.nodes.map((n) => [n.id, n]));
const inside = (n, g) => n.x >= g.x && n.y >= g.y && n.x + n.width <= g.x + g.width && n.y + n.height <= g.y + g.height;

test("data flows top to bottom and module nodes sit inside their box", async () => {
  const layout = await layoutGraph(tinyTrace(), { elk });
  const nodes = byId(layout);
  assert.equal(layout.nodes.length, 5);
  for (const e of layout.edges) {
    assert.ok(nodes.get(e.source).y < nodes.get(e.target).y, `${e.source} above ${e.target}`);
    assert.ok(e.points.length >= 2);
  }
  const lin = layout.groups.find((g) => g.path === "lin");
  assert.ok(lin && !lin.collapsed);
  assert.ok(inside(nodes.get("n1"), lin) && inside(nodes.get("n2"), lin));
  assert.ok(!inside(nodes.get("n0"), lin));
  assert.deepEqual(layout.edges.map((e) => e.kind).sort(), ["data", "data", "leaf", "no_grad"]);
  assert.ok(layout.width > 0 && layout.height > 0);
  const w = nodes.get("n3");
  assert.equal(w.kind, "tensor");
  assert.equal(w.role, "parameter");
});

test("a collapsed module becomes one node m:<path> and its inner edges disappear", async () => {
  const layout = await layoutGraph(tinyTrace(), { elk, collapsed: new Set(["lin"]) });
  const ids = layout.nodes.map((n) => n.id).sort();
  assert.deepEqual(ids, ["m:lin", "n0", "n3", "n4"]);
  assert.equal(byId(layout).get("m:lin").kind, "module");
  assert.deepEqual(layout.edges.map((e) => `${e.source}>${e.target}`).sort(), ["m:lin>n0", "n3>m:lin", "n4>m:lin"]);
  assert.ok(layout.groups.find((g) => g.path === "lin").collapsed);
});

test("hiding inserted nodes bridges the edges through them", async () => {
  const t = tinyTrace();
  t.graph.nodes.find((n) => n.id === "n1").inserted = true;
  const layout = await layoutGraph(t, { elk, showInserted: false });
  assert.ok(!layout.nodes.some((n) => n.id === "n1"));
  assert.deepEqual(layout.edges.map((e) => `${e.id}:${e.source}>${e.target}`).sort(), ["e1:n2>n0", "e2:n3>n2", "e3:n4>n0"]);
});

test("names print like the seeds and big graphs collapse by default", () => {
  assert.equal(prettyName("W0"), "W₀");
  assert.equal(prettyName("a_1"), "a₁");
  assert.equal(prettyName("loss"), "loss");
  assert.equal(defaultCollapsed(tinyTrace()).size, 0);
  assert.deepEqual([...defaultCollapsed(tinyTrace(), 2)], ["lin"]);
});

test("every golden trace lays out with every node placed and no overlaps", async () => {
  for (const [name, trace] of goldenTraces()) {
    const layout = await layoutGraph(trace, { elk });
    assert.equal(layout.nodes.length, trace.graph.nodes.length, name);
    const ns = layout.nodes;
    for (let a = 0; a < ns.length; a++)
      for (let b = a + 1; b < ns.length; b++) {
        const p = ns[a], q = ns[b];
        const overlap = p.x < q.x + q.width && q.x < p.x + p.width && p.y < q.y + q.height && q.y < p.y + p.height;
        assert.ok(!overlap, `${name}: ${p.id} overlaps ${q.id}`);
      }
  }
});
