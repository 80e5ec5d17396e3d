// Traces far bigger than the gallery's (issue 38): a 60,000-op chain, drawn without a recursion
// or a spread that runs out of call stack, in slices the page can yield between, to the same
// picture as in one go; and a trace naming nodes it does not have is refused by name.
import { test } from "node:test";
import assert from "node:assert/strict";
import ELK from "../../frontend/node_modules/elkjs/lib/main.js";
import { layoutGraph, defaultCollapsed } from "../../frontend/js/layout.js";
import { stackChain } from "../../frontend/js/chainlayout.js";
import { placeChips, placeChipsInSlices } from "../../frontend/js/chips.js";
import { buildScene, buildSceneInSlices } from "../../frontend/js/scene.js";
import { buildTimeline, frameAt } from "../../frontend/js/timeline.js";
import { danglingReferences, referenceProblem } from "../../frontend/js/refs.js";
import { checkTrace } from "../../frontend/js/tracedoc.js";
import { goldenTraces, tinyTrace } from "./fixtures.mjs";

const elk = new ELK();
const stats = (v) => ({ numel: 2, min: v, max: v, mean: v, std: 0, norm: v * Math.SQRT2, nan: 0, inf: 0 });
const value = (v) => ({ shape: [2], dtype: "float32", stats: stats(v), values: [v, v], data: null, truncated: false });

/**
 * What gradtrace.trace writes for `x = x * 1.0001` repeated `ops` times, then `.sum()`, backward:
 * x (n0), AccumulateGrad (n1), MulBackward0 n2…, SumBackward0 last; forward then backward events.
 */
function chainTrace(ops) {
  const nodes = [
    { id: "n0", kind: "tensor", label: "x", role: "parameter", shape: [2], module: "", created_seq: 0, grad_fn: "n1", value: value(1) },
    { id: "n1", kind: "op", label: "AccumulateGrad", op: "AccumulateGrad", role: "accumulate", shape: [2], module: "", created_seq: 0, variable: "n0" },
  ];
  const edges = [{ id: "e0", source: "n0", target: "n1", kind: "leaf", grads: [] }];
  for (let k = 0; k <= ops; k++) {
    const id = `n${k + 2}`;
    const last = k === ops;
    nodes.push({ id, kind: "op", label: last ? "SumBackward0" : "MulBackward0", op: last ? "SumBackward0" : "MulBackward0", role: last ? "loss" : "intermediate", shape: last ? [] : [2], module: "", created_seq: k + 1, value: value(1 + k / 1e4) });
    edges.push({ id: `e${k + 1}`, source: k === 0 ? "n1" : `n${k + 1}`, target: id, kind: "data", grads: [] });
  }
  const events = [];
  const push = (ev) => events.push({ seq: events.length, payload: {}, hook: null, message: null, module: "", target: ev.node ?? null, ...ev });
  for (const n of nodes) push({ pass_index: 0, phase: "forward", kind: "node_created", node: n.id });
  const firstBackward = events.length;
  const into = new Map(edges.map((e) => [e.target, e]));
  for (let k = nodes.length - 1; k >= 1; k--) {
    const node = nodes[k].id;
    push({ pass_index: 1, phase: "backward", kind: "node_pre", node });
    const seq = events.length;
    push({ pass_index: 1, phase: "backward", kind: "node_post", node });
    const edge = into.get(node);
    if (edge && edge.kind === "data") edge.grads.push({ pass_index: 1, seq, value: value(1) });
  }
  push({ pass_index: 1, phase: "backward", kind: "grad_write", node: "n0", payload: { after: value(1), accumulated: false } });
  const passes = [
    { index: 0, phase: "forward", label: "forward #1", first_seq: 0, last_seq: firstBackward - 1 },
    { index: 1, phase: "backward", label: "backward #1 of loss", first_seq: firstBackward, last_seq: events.length - 1 },
  ];
  return { schema_version: 3, title: `${ops}-op chain`, graph: { nodes, edges, modules: [{ path: "", type: "Chain", parent: null }] }, events, passes, tensor_data: [] };
}

/** A nextTask that counts the slices and the longest stretch of work between two of them (ms). */
function slicer() {
  const s = { slices: 0, longest: 0, last: performance.now() };
  s.nextTask = () => {
    const now = performance.now();
    s.longest = Math.max(s.longest, now - s.last);
    s.slices += 1;
    s.last = performance.now();
    return Promise.resolve();
  };
  return s;
}

test("a 60,000-op chain is laid out, folded and stacked without running out of call stack", async () => {
  const trace = chainTrace(60000);
  assert.equal(defaultCollapsed(trace).size, 0, "a chain of loose ops has nothing to fold");
  const s = slicer();
  const layout = await layoutGraph(trace, { elk, nextTask: s.nextTask });
  assert.equal(layout.nodes.length, trace.graph.nodes.length);
  assert.ok(s.slices >= 4, `laid out in ${s.slices} slices`);
  // top to bottom, in chain order
  const y = new Map(layout.nodes.map((n) => [n.id, n.y]));
  for (const e of trace.graph.edges) assert.ok(y.get(e.source) < y.get(e.target), e.id);
  // stackChain alone, on a chain longer than a call may take arguments
  const children = Array.from({ length: 200000 }, (_, i) => ({ id: `c${i}`, width: 60 + (i % 7), height: 24 }));
  const edges = children.slice(1).map((c, i) => ({ id: `s${i}`, sources: [`c${i}`], targets: [c.id] }));
  const stacked = stackChain({ id: "root", layoutOptions: { "elk.padding": "[top=16,left=16,bottom=16,right=16]" }, children, edges });
  assert.equal(stacked.children.length, 200000);
  assert.equal(stacked.width, 16 + 66 + 16);
});

test("chips placed and a scene built in slices are the ones made in one go", async () => {
  const traces = [["chain", chainTrace(3000)], ...goldenTraces().slice(0, 3)];
  for (const [name, trace] of traces) {
    const layout = await layoutGraph(trace, { elk, collapsed: defaultCollapsed(trace) });
    const whole = placeChips(structuredClone(layout), trace);
    const s = slicer();
    const sliced = await placeChipsInSlices(layout, trace, { nextTask: s.nextTask, sliceMs: 1 });
    assert.deepEqual(sliced, whole, name);
    assert.equal(placeChips(layout, trace), sliced, `${name}: placeChips finds the sliced spots`);
    const scene = await buildSceneInSlices(layout, trace, { nextTask: s.nextTask, sliceMs: 1, spots: sliced });
    const again = buildScene(layout, trace);
    assert.deepEqual(scene.layers, again.layers, name);
    assert.equal(scene.width, again.width, name);
    const timeline = buildTimeline(trace);
    const frame = frameAt(timeline, timeline.events.length - 1);
    assert.deepEqual(scene.looks(frame), again.looks(frame), name);
    if (name === "chain") assert.ok(s.slices > 2, `${name}: ${s.slices} slices`);
  }
});

test("frameAt keeps its last frame: asked again for the same step, the same frame", () => {
  const timeline = buildTimeline(tinyTrace());
  const a = frameAt(timeline, 3);
  assert.equal(frameAt(timeline, 3), a);
  assert.notEqual(frameAt(timeline, 4), a);
  assert.deepEqual(frameAt(timeline, 3), a);
});

test("every golden trace's references resolve", () => {
  for (const [name, trace] of goldenTraces()) assert.deepEqual(danglingReferences(trace), { found: [], total: 0 }, name);
  assert.equal(referenceProblem(chainTrace(10)), "");
});

test("a trace naming nodes it does not have is refused with the references named", () => {
  const trace = chainTrace(10);
  trace.graph.edges[3].target = "n404";
  trace.events[30].node = "n405";
  trace.graph.nodes[1].variable = "n406";
  trace.graph.edges[5].source = "n407";
  trace.graph.edges[6].source = "n408";
  const { found, total } = danglingReferences(trace);
  assert.equal(total, 5);
  assert.deepEqual(found, [
    { where: "node n1", field: "variable", id: "n406" },
    { where: "edge e3", field: "target", id: "n404" },
    { where: "edge e5", field: "source", id: "n407" },
  ]);
  const why = checkTrace(trace);
  assert.equal(why, 'it names nodes its graph does not have: node n1\'s variable "n406"; edge e3\'s target "n404"; edge e5\'s source "n407" and 2 more (the file was changed or cut short; trace the model again)');
  const noId = chainTrace(2);
  delete noId.graph.edges[0].target;
  noId.graph.nodes.push({ kind: "op" });
  assert.match(checkTrace(noId), /graph\.nodes\[\d+\] has no string id; edge e0's target ""/);
});
