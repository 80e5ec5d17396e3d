// Schema 3 traces write each tensor's base64 numbers once (`tensor_data`, `data` an index into
// it); resolveTensorData turns them back into what the viewer reads, wherever a TensorValue sits,
// and tensorDataJson writes the document back as it came. Schema 2 traces pass untouched.
import { test } from "node:test";
import assert from "node:assert/strict";
import { resolveTensorData, tensorDataJson } from "../../frontend/js/tensordata.js";
import { tensorNumbers } from "../../frontend/js/format.js";
import { goldenTraces } from "./fixtures.mjs";

const base64Of = (numbers) => Buffer.from(new Float32Array(numbers).buffer).toString("base64");
// 17 and 20 numbers: past the 16 a trace writes inline as `values`, so these travel as `data`
const SEVENTEEN = Array.from({ length: 17 }, (_, i) => i - 8);
const TWENTY = Array.from({ length: 20 }, (_, i) => 0.5 * i);
const stats = (numel) => ({ numel, min: 0, max: 1, mean: 0.5, std: 0.1, norm: 1, nan: 0, inf: 0 });
const numbersAt = (data, numel) => ({ shape: [numel], dtype: "float32", stats: stats(numel), values: null, data, truncated: false });
const tiny = () => ({ shape: [2], dtype: "float32", stats: stats(2), values: [0.25, "NaN"], data: null, truncated: false });
const cut = () => ({ shape: [64], dtype: "float32", stats: stats(64), values: null, data: null, truncated: true });

/** A schema 3 trace with TensorValues everywhere one can sit: index 0 shared by a node's value,
 * its saved tensor and a grad; index 1 on an edge and deep in an event payload; index 7 dangling. */
function schema3Trace() {
  return {
    schema_version: 3,
    graph: {
      nodes: [{ id: "n0", kind: "op", shape: [17], dtype: "float32", value: numbersAt(0, 17), saved: [{ name: "self", value: numbersAt(0, 17) }] }],
      edges: [{ id: "e0", source: "n1", target: "n0", grads: [{ pass_index: 1, value: numbersAt(1, 20) }] }],
    },
    events: [
      { seq: 0, kind: "module_forward", payload: { outputs: [numbersAt(7, 17), null] } },
      { seq: 1, kind: "hook", payload: { returned: [[numbersAt(1, 20)]], action: { scale: 2 } } },
    ],
    values: { x: tiny(), h: numbersAt(0, 17) },
    grads: { "f.weight": numbersAt(1, 20), "f.bias": null, cut: cut() },
    analyses: { linear: [{ weight: "f.weight", a: [numbersAt(0, 17)], reconstructed: numbersAt(1, 20) }], per_sample: [{ calls: [{ sample_norms: tiny() }] }] },
    tensor_data: [base64Of(SEVENTEEN), base64Of(TWENTY)],
  };
}

test("schema 3: every index resolves to its numbers, in graph, edges, nested payloads, values, grads, analyses", () => {
  const trace = resolveTensorData(schema3Trace());
  const [node] = trace.graph.nodes;
  assert.deepEqual(tensorNumbers(node.value), SEVENTEEN);
  assert.deepEqual(tensorNumbers(node.saved[0].value), SEVENTEEN);
  assert.deepEqual(tensorNumbers(trace.values.h), SEVENTEEN);
  assert.deepEqual(tensorNumbers(trace.analyses.linear[0].a[0]), SEVENTEEN);
  assert.deepEqual(tensorNumbers(trace.graph.edges[0].grads[0].value), TWENTY);
  assert.deepEqual(tensorNumbers(trace.events[1].payload.returned[0][0]), TWENTY);
  assert.deepEqual(tensorNumbers(trace.grads["f.weight"]), TWENTY);
  assert.deepEqual(tensorNumbers(trace.analyses.linear[0].reconstructed), TWENTY);
  // a shared index is one string, not a copy per record
  assert.equal(node.value.data, trace.tensor_data[0]);
  assert.equal(node.saved[0].value.data, trace.tensor_data[0]);
});

test("schema 3: an index with no entry is a truncated value (stats only)", () => {
  const trace = resolveTensorData(schema3Trace());
  const dangling = trace.events[0].payload.outputs[0];
  assert.equal(dangling.data, null);
  assert.equal(dangling.truncated, true);
  assert.deepEqual(dangling.stats, stats(17));
  assert.equal(tensorNumbers(dangling), null);
  assert.equal(trace.events[0].payload.outputs[1], null); // "no tensor" stays null
});

test("schema 3: the drawing copy (tensor_data: []) keeps stats and the tiny inline values", () => {
  const drawing = { ...schema3Trace(), tensor_data: [] };
  const trace = resolveTensorData(drawing);
  for (const tv of [trace.graph.nodes[0].value, trace.graph.edges[0].grads[0].value, trace.grads["f.weight"]]) {
    assert.deepEqual([tv.data, tv.values, tv.truncated], [null, null, true]);
  }
  assert.deepEqual(tensorNumbers(trace.values.x), [0.25, NaN]);
});

test("tiny values, stats-only values, nulls and non-tensor fields are left as they were", () => {
  const before = schema3Trace();
  const trace = resolveTensorData(schema3Trace());
  assert.deepEqual(trace.values.x, tiny());
  assert.deepEqual(trace.analyses.per_sample, before.analyses.per_sample);
  assert.deepEqual(trace.grads.cut, cut());
  assert.equal(trace.grads["f.bias"], null);
  assert.deepEqual(trace.events[1].payload.action, { scale: 2 });
  assert.deepEqual(trace.tensor_data, before.tensor_data);
  const node = trace.graph.nodes[0]; // shape and dtype but no stats: a node, not a TensorValue
  assert.deepEqual([node.id, node.shape, node.dtype], ["n0", [17], "float32"]);
});

test("resolving twice, or a record reached twice, changes nothing more", () => {
  const once = resolveTensorData(schema3Trace());
  const twice = resolveTensorData(resolveTensorData(schema3Trace()));
  assert.deepEqual(twice, once);
  const shared = numbersAt(1, 20);
  const trace = resolveTensorData({ schema_version: 3, graph: { nodes: [{ value: shared }], edges: [{ grads: [{ value: shared }] }] }, events: [], tensor_data: [base64Of(SEVENTEEN), base64Of(TWENTY)] });
  assert.equal(trace.graph.edges[0].grads[0].value, shared);
  assert.deepEqual(tensorNumbers(shared), TWENTY);
});

test("schema 2: the document is returned untouched (its data is base64 already)", () => {
  const schema2 = { schema_version: 2, graph: { nodes: [{ id: "n0", value: numbersAt(base64Of(SEVENTEEN), 17) }], edges: [] }, events: [], grads: { w: cut() } };
  const copy = structuredClone(schema2);
  assert.equal(resolveTensorData(schema2), schema2);
  assert.deepEqual(schema2, copy);
  assert.deepEqual(tensorNumbers(schema2.graph.nodes[0].value), SEVENTEEN);
  assert.equal(resolveTensorData(null), null);
});

test("an unresolved index is an error, not a tensor shown without its numbers", () => {
  assert.throws(() => tensorNumbers(numbersAt(0, 17)), /index into tensor_data/);
});

test("tensorDataJson writes a resolved schema 3 trace back with indices, each block once", () => {
  const trace = resolveTensorData(schema3Trace());
  const written = JSON.parse(tensorDataJson(trace, 1));
  const expected = schema3Trace();
  const dangling = expected.events[0].payload.outputs[0]; // resolved as a cut value: written as one
  Object.assign(dangling, { data: null, truncated: true });
  assert.deepEqual(written, expected);
  const schema2 = { schema_version: 2, graph: { nodes: [], edges: [] }, events: [], values: { h: numbersAt(base64Of(SEVENTEEN), 17) } };
  assert.equal(tensorDataJson(schema2, 1), JSON.stringify(schema2, null, 1));
});

test("tensorDataJson keeps each record's own index when two blocks hold the same numbers", () => {
  const doc = { schema_version: 3, graph: { nodes: [{ value: numbersAt(0, 17) }, { value: numbersAt(1, 17) }], edges: [] }, events: [], tensor_data: [base64Of(SEVENTEEN), base64Of(SEVENTEEN)] };
  const text = JSON.stringify(doc);
  assert.equal(tensorDataJson(resolveTensorData(JSON.parse(text))), text);
});

test("tensorDataJson refuses numbers that are not the block they were read from", () => {
  const trace = resolveTensorData(schema3Trace());
  trace.values.h.data = base64Of([1, 2, 3]);
  assert.throws(() => tensorDataJson(trace), /not the trace's tensor_data block/);
  const copied = { ...resolveTensorData(schema3Trace()), values: { h: { ...numbersAt(0, 17), data: base64Of(SEVENTEEN) } } };
  assert.throws(() => tensorDataJson(copied), /not the trace's tensor_data block/);
});

test("golden traces: resolved, written back and read again, the same numbers", () => {
  const goldens = goldenTraces();
  assert.ok(goldens.length > 0);
  for (const [name, trace] of goldens) {
    const again = resolveTensorData(JSON.parse(tensorDataJson(trace)));
    assert.deepEqual(again, trace, name);
    const weights = Object.values(trace.grads).filter((g) => g && (g.data || g.values));
    assert.ok(weights.length > 0, name);
    for (const g of weights) assert.equal(tensorNumbers(g).length, g.stats.numel, name);
  }
});
