import { test } from "node:test";
import assert from "node:assert/strict";
import ELK from "../../frontend/node_modules/elkjs/lib/main.js";
import { layoutGraph, defaultCollapsed, prettyName, WHOLE_HIERARCHY_UP_TO } from "../../frontend/js/layout.js";
import { stackChain } from "../../frontend/js/chainlayout.js";
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
    assertNoOverlaps(layout, name);
  }
});

/** A chain of `blocks` equal modules "0", "1", …: a parameter, its AccumulateGrad and an op each. */
function chainTrace(blocks) {
  const nodes = [{ id: "x", kind: "tensor", label: "x", role: "input", shape: [2, 4], module: null, created_seq: 0 }];
  const edges = [];
  const events = [];
  const modules = [{ path: "", type: "Sequential", parent: null }];
  let prev = "x";
  for (let k = 0; k < blocks; k++) {
    const m = String(k);
    modules.push({ path: m, type: "Linear", parent: "" });
    events.push({ seq: events.length, kind: "module_forward_pre", module: m });
    const seq = events.length;
    nodes.push({ id: `w${k}`, kind: "tensor", label: "W", role: "parameter", shape: [4, 4], module: m, created_seq: seq });
    nodes.push({ id: `g${k}`, kind: "op", op: "AccumulateGrad", label: "AccumulateGrad", module: m, created_seq: seq });
    nodes.push({ id: `o${k}`, kind: "op", op: "MmBackward0", label: "MmBackward0", shape: [2, 4], module: m, created_seq: seq });
    edges.push({ id: `e${k}w`, source: `w${k}`, target: `g${k}`, kind: "leaf" });
    edges.push({ id: `e${k}g`, source: `g${k}`, target: `o${k}`, kind: "data" });
    edges.push({ id: `e${k}x`, source: prev, target: `o${k}`, kind: k ? "data" : "no_grad" });
    prev = `o${k}`;
  }
  nodes.push({ id: "loss", kind: "op", op: "SumBackward0", label: "SumBackward0", shape: [], module: null, created_seq: events.length });
  edges.push({ id: "eloss", source: prev, target: "loss", kind: "data" });
  return { schema_version: 2, title: "chain", graph: { nodes, edges, modules }, events, passes: [] };
}

/** What gradtrace.trace records for nn.Sequential(Linear(4, 4), Tanh(), …) with `blocks` pairs. */
function linearTanhTrace(blocks) {
  const nodes = [{ id: "x", kind: "tensor", label: "x", tensor: "x", role: "input", shape: [2, 4], module: null, created_seq: 0 }];
  const edges = [];
  const events = [];
  const modules = [{ path: "", type: "Sequential", parent: null }];
  const add = (node) => nodes.push({ created_seq: events.length, ...node });
  const link = (id, source, target, kind = "data") => edges.push({ id, source, target, kind });
  let prev = "x";
  for (let k = 0; k < 2 * blocks; k += 2) {
    const [lin, act] = [String(k), String(k + 1)];
    modules.push({ path: lin, type: "Linear", parent: "" }, { path: act, type: "Tanh", parent: "" });
    events.push({ seq: events.length, kind: "module_forward_pre", module: lin });
    add({ id: `w${k}`, kind: "tensor", label: `${lin}.weight`, tensor: `${lin}.weight`, shape: [4, 4], module: lin, role: "parameter" });
    add({ id: `gw${k}`, kind: "op", op: "AccumulateGrad", label: "AccumulateGrad", tensor: `${lin}.weight`, module: lin });
    add({ id: `t${k}`, kind: "op", op: "TBackward0", label: "TBackward0", module: lin, role: "intermediate" });
    add({ id: `b${k}`, kind: "tensor", label: `${lin}.bias`, tensor: `${lin}.bias`, shape: [4], module: lin, role: "parameter" });
    add({ id: `gb${k}`, kind: "op", op: "AccumulateGrad", label: "AccumulateGrad", tensor: `${lin}.bias`, module: lin });
    add({ id: `a${k}`, kind: "op", op: "AddmmBackward0", label: "AddmmBackward0", shape: [2, 4], module: lin, role: "intermediate" });
    events.push({ seq: events.length, kind: "module_forward_pre", module: act });
    add({ id: `h${k}`, kind: "op", op: "TanhBackward0", label: "TanhBackward0", shape: [2, 4], module: act, role: "intermediate" });
    link(`e${k}w`, `w${k}`, `gw${k}`, "leaf");
    link(`e${k}gw`, `gw${k}`, `t${k}`);
    link(`e${k}b`, `b${k}`, `gb${k}`, "leaf");
    link(`e${k}gb`, `gb${k}`, `a${k}`);
    link(`e${k}x`, prev, `a${k}`, k ? "data" : "no_grad");
    link(`e${k}t`, `t${k}`, `a${k}`);
    link(`e${k}h`, `a${k}`, `h${k}`);
    prev = `h${k}`;
  }
  return { schema_version: 2, title: "linear-tanh", graph: { nodes, edges, modules }, events, passes: [] };
}

/** No two node boxes of a layout overlap. */
function assertNoOverlaps(layout, name) {
  const ns = layout.nodes;
  for (let a = 0; a < ns.length; a++)
    for (let b = a + 1; b < ns.length; b++) {
      const p = ns[a], q = ns[b];
      const overlap = p.x < q.x + q.width && q.x < p.x + p.width && p.y < q.y + q.height && q.y < p.y + p.height;
      assert.ok(!overlap, `${name}: ${p.id} overlaps ${q.id}`);
    }
}

/** What every layout promises, whichever way it was computed. */
function assertSoundLayout(layout, name) {
  const nodes = byId(layout);
  const ns = layout.nodes;
  assertNoOverlaps(layout, name);
  for (const n of ns) {
    if (!n.module || n.kind === "module") continue;
    const boxes = layout.groups.filter((g) => g.path === n.module && !g.collapsed);
    assert.ok(boxes.some((g) => inside(n, g)), `${name}: ${n.id} sits inside a box of ${n.module}`);
  }
  const onBorder = (p, n) => {
    const inX = p.x >= n.x - 1 && p.x <= n.x + n.width + 1;
    const inY = p.y >= n.y - 1 && p.y <= n.y + n.height + 1;
    const edgeX = Math.abs(p.x - n.x) <= 1 || Math.abs(p.x - n.x - n.width) <= 1;
    const edgeY = Math.abs(p.y - n.y) <= 1 || Math.abs(p.y - n.y - n.height) <= 1;
    return inX && inY && (edgeX || edgeY);
  };
  for (const e of layout.edges) {
    const pts = e.points;
    assert.ok(pts.length >= 2, `${name}: ${e.id} is routed`);
    assert.ok(onBorder(pts[0], nodes.get(e.source)), `${name}: ${e.id} starts on ${e.source}`);
    assert.ok(onBorder(pts[pts.length - 1], nodes.get(e.target)), `${name}: ${e.id} ends on ${e.target}`);
    for (let i = 1; i < pts.length; i++) {
      const straight = Math.abs(pts[i].x - pts[i - 1].x) < 0.5 || Math.abs(pts[i].y - pts[i - 1].y) < 0.5;
      assert.ok(straight, `${name}: ${e.id} is routed orthogonally`);
    }
  }
}

test("golden traces laid out box by box keep every promise of the whole-hierarchy layout", async () => {
  for (const [name, trace] of goldenTraces()) {
    for (const wholeUpTo of [Infinity, 0]) {
      const layout = await layoutGraph(trace, { elk, wholeUpTo });
      assert.equal(layout.nodes.length, trace.graph.nodes.length, name);
      assertSoundLayout(layout, `${name} (whole up to ${wholeUpTo})`);
    }
  }
});

test("a deep chain is laid out box by box: top to bottom, and equal blocks look the same", async () => {
  const trace = chainTrace(60);
  const layout = await layoutGraph(trace, { elk });
  assert.ok(layout.nodes.length > WHOLE_HIERARCHY_UP_TO);
  assertSoundLayout(layout, "chain");
  const nodes = byId(layout);
  for (const e of layout.edges) assert.ok(nodes.get(e.source).y < nodes.get(e.target).y, `${e.source} above ${e.target}`);
  const boxes = layout.groups.filter((g) => /^\d+$/.test(g.path)).sort((a, b) => a.path - b.path);
  assert.equal(boxes.length, 60);
  const shape = (g) => {
    const k = g.path;
    const at = (id) => [nodes.get(id).x - g.x, nodes.get(id).y - g.y];
    return [g.width, g.height, ...["w", "g", "o"].flatMap((p) => at(p + k))].map((v) => v.toFixed(1)).join(" ");
  };
  assert.equal(new Set(boxes.map(shape)).size, 1, "every block laid out alike");
  for (let k = 1; k < boxes.length; k++) assert.ok(boxes[k].y >= boxes[k - 1].y + boxes[k - 1].height, "blocks stack downwards");
  // A column, not a staircase: the whole chain is about as wide as one block.
  assert.ok(layout.width < 3 * boxes[1].width, `width ${layout.width}`);
});

test("a Linear+Tanh stack laid out box by box: edges stay orthogonal where they cross box borders", async () => {
  const layout = await layoutGraph(linearTanhTrace(70), { elk });
  assert.equal(layout.nodes.length, 1 + 70 * 7);
  assertSoundLayout(layout, "linear-tanh");
  assert.ok(layout.width < 600, `a column, not a staircase (width ${layout.width})`);
});

test("stackChain stacks a chain in its edge order and leaves anything else to ELK", () => {
  const layoutOptions = { "elk.padding": "[top=16,left=16,bottom=16,right=16]", "elk.layered.spacing.nodeNodeBetweenLayers": "28" };
  const box = (id, width, height, ports = []) => ({ id, width, height, ports });
  const children = [box("c", 40, 20), box("a", 60, 30, [{ id: "a>", x: 10, y: 30 }]), box("b", 80, 20)];
  const edge = (id, s, t) => ({ id, sources: [s], targets: [t] });
  const r = stackChain({ id: "root", layoutOptions, children, edges: [edge("e1", "a>", "b"), edge("e2", "b", "c")] });
  const at = new Map(r.children.map((c) => [c.id, c]));
  assert.deepEqual(["a", "b", "c"].map((id) => at.get(id).y), [16, 16 + 30 + 28, 16 + 30 + 28 + 20 + 28]);
  assert.equal(r.width, 16 + 80 + 16);
  assert.equal(r.height, 16 + 30 + 28 + 20 + 28 + 20 + 16);
  const [e1, e2] = r.edges.map((e) => e.sections[0]);
  assert.deepEqual(e1.startPoint, { x: at.get("a").x + 10, y: at.get("a").y + 30 }, "from a's port");
  assert.deepEqual(e1.endPoint, { x: at.get("b").x + 40, y: at.get("b").y }, "into the top of b");
  assert.equal(e2.startPoint.y, at.get("b").y + 20);
  // Two sources feeding one target, or an edge to the level's own port: not a chain.
  assert.equal(stackChain({ id: "r", layoutOptions, children, edges: [edge("e1", "a>", "c"), edge("e2", "b", "c")] }), null);
  assert.equal(stackChain({ id: "r", layoutOptions, children, ports: [{ id: "p" }], edges: [] }), null);
});
