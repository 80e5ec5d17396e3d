// The narration (narration.js) and the local derivatives it prints (localgrad.js), on the engine's
// golden traces and on hand-built nodes whose derivatives are worked out by hand here: every
// event kind has a sentence, the numbers are the trace's, nothing is shown raw.
import { test } from "node:test";
import assert from "node:assert/strict";
import { buildTimeline } from "../../frontend/js/timeline.js";
import { narrate, passError } from "../../frontend/js/narration.js";
import { localDerivative, num } from "../../frontend/js/localgrad.js";
import { goldenTrace, goldenTraces, tinyTrace } from "./fixtures.mjs";

const KINDS = ["pass_start", "pass_end", "node_created", "module_forward_pre", "module_forward", "node_pre", "node_post", "module_backward_pre", "module_backward", "tensor_hook", "post_accumulate_grad", "grad_write", "hook_action", "zero_grad", "sgd_step", "optimizer_step", "error"];

const tv = (values, shape = [values.length]) => ({ shape, dtype: "float64", stats: { numel: values.length, norm: 0 }, values });
const op = (name, saved = []) => ({ id: "n", kind: "op", op: name, saved });
const sv = (name, values, shape) => ({ name, value: tv(values, shape) });
const sc = (name, scalar) => ({ name, scalar });
const post = (gIn, gOut) => ({ payload: { grad_inputs: gIn, grad_outputs: gOut } });

function story(trace) {
  const timeline = buildTimeline(trace);
  return { timeline, at: (i) => narrate(trace, timeline, i) };
}

test("every event of every golden trace is told in words, never by its kind", () => {
  const traces = [...goldenTraces(), ["tiny", tinyTrace()]];
  assert.ok(traces.length > 1);
  for (const [name, trace] of traces) {
    const { timeline, at } = story(trace);
    timeline.events.forEach((ev, i) => {
      const n = at(i);
      assert.ok(n.text.length > 10, `${name} #${i} ${ev.kind}: "${n.text}"`);
      for (const kind of KINDS) {
        assert.ok(!n.text.includes(kind) && !n.short.includes(kind), `${name} #${i}: "${n.text}" / "${n.short}" names ${kind}`);
      }
      for (const d of n.details) assert.ok(!/undefined|NaN|\[object/.test(d), `${name} #${i}: ${d}`);
      assert.ok(!/undefined|\[object/.test(n.text), `${name} #${i}: ${n.text}`);
    });
  }
});

test("seed 002: a node's sentence, its chain-rule step with the local derivative, the hook's", () => {
  const trace = goldenTrace("spec_seed002_full_backward_hook");
  const { timeline, at } = story(trace);
  const seqOf = (kind, node) => timeline.events.find((e) => e.kind === kind && (node === undefined || e.node === node)).seq;
  // PowBackward0 of y = s²: receives ∂loss/∂y, local derivative 2s from the saved s
  const pow = trace.graph.nodes.find((n) => n.op === "PowBackward0" && n.module === "f1");
  const s = pow.saved.find((x) => x.name === "_saved_self").value.values[0];
  const ev = timeline.events[seqOf("node_post", pow.id)];
  const gOut = ev.payload.grad_outputs[0].values[0];
  const gIn = ev.payload.grad_inputs[0].values[0];
  const n = at(ev.seq);
  assert.match(n.text, /^PowBackward0 \(f1\.s\^2\) receives ∂loss\/∂pow\(f1\.s\) = −1\.848 and sends ∂loss\/∂f1\.s = −1\.02 to ViewBackward0\.$/);
  assert.equal(n.details.length, 1);
  assert.ok(n.details[0].includes(`= 2·x = ${num(2 * s)} (from the saved self)`), n.details[0]);
  assert.ok(n.details[0].includes(`(${num(gOut)}) · ${num(2 * s)} = ${num(gIn)}`), n.details[0]);
  assert.ok(Math.abs(gOut * 2 * s - gIn) < 1e-6); // the trace's numbers obey the step told
  // the full backward hook: what it saw; a hook_action follows (×2): before → after
  const hook = at(seqOf("module_backward"));
  assert.equal(hook.text, "The full backward hook on f1 sees grad_output ∂loss/∂(f1's output) = −1.848 and grad_input ∂loss/∂(f1's input) = −0.408.");
  assert.match(hook.details[0], /changed value/);
  assert.equal(at(seqOf("hook_action")).text, "The hook on f1 scales grad_input by 2: −0.408 → −0.8159.");
  // a .grad write: before → after
  assert.equal(at(seqOf("grad_write")).text, "f1.f.bias.grad is written: None → −1.02.");
});

test("accumulation reads +=, with before → after", () => {
  const { timeline, at } = story(goldenTrace("spec_seed001_tensor_hooks"));
  const writes = timeline.events.filter((e) => e.kind === "grad_write");
  assert.equal(at(writes[1].seq).text, "w.grad accumulates (+=): 2 → 5.");
  const post = timeline.events.find((e) => e.kind === "post_accumulate_grad");
  assert.equal(at(post.seq).text, "The post accumulate grad hook on w sees w.grad = 2, after accumulation.");
});

test("an error: PyTorch's message, the node that raised, and the banner through the pass's end", () => {
  const trace = goldenTrace("spec_seed001_retain_graph");
  const { timeline, at } = story(trace);
  const err = timeline.events.find((e) => e.kind === "error");
  const n = at(err.seq);
  assert.equal(n.tone, "error");
  assert.deepEqual(n.error, { exception: "RuntimeError", message: err.message, node: err.node, label: "PowBackward0" });
  assert.ok(n.text.startsWith("PowBackward0 (y = x^2) raised RuntimeError: Trying to backward through the graph a second time"));
  const last = timeline.events.length - 1;
  assert.equal(passError(trace, timeline, last)?.message, err.message);
  assert.equal(passError(trace, timeline, err.seq - 1), null);
  assert.match(at(last).text, /stopped: PowBackward0 raised RuntimeError/);
});

test("the forward: why …Backward0, once; the end of the forward points to ▶", () => {
  const { timeline, at } = story(goldenTrace("spec_seed002_full_backward_hook"));
  const created = timeline.events.filter((e) => e.kind === "node_created").map((e) => at(e.seq));
  assert.equal(created.filter((n) => n.details.some((d) => d.startsWith("Why "))).length, 1);
  const end = at(timeline.passes.get(0).last_seq);
  assert.equal(end.tone, "cue");
  assert.match(end.text, /The story is in the backward pass: press ▶/);
});

test("local derivatives as numbers, from saved tensors only", () => {
  const text = (node, slot, p = post([], [])) => {
    const d = localDerivative(node, slot, p);
    return d.missing || d.notShown || d.text;
  };
  assert.equal(text(op("AddBackward0", [sc("_saved_alpha", 1)]), 1), "1");
  assert.equal(text(op("SubBackward0", [sc("_saved_alpha", 1)]), 1), "−1");
  assert.equal(text(op("MulBackward0", [sv("_saved_other", [3, -2]), sv("_saved_self", [0.5, 4])]), 0), "[3, −2]");
  assert.equal(text(op("MulBackward0", [sv("_saved_other", [3, -2]), sv("_saved_self", [0.5, 4])]), 1), "[0.5, 4]");
  assert.match(text(op("MulBackward0", [sv("_saved_other", [3])]), 1), /does not hold the saved self/);
  assert.equal(text(op("DivBackward0", [sv("_saved_self", [1, 6]), sv("_saved_other", [2, 3])]), 0), "[0.5, 0.3333]");
  assert.equal(text(op("DivBackward0", [sv("_saved_self", [1, 6]), sv("_saved_other", [2, 3])]), 1), "[−0.25, −0.6667]");
  assert.equal(text(op("PowBackward0", [sc("_saved_exponent", 3), sv("_saved_self", [2, -1])]), 0), "[12, 3]");
  const mm = op("MmBackward0", [sv("_saved_self", [1, 2], [1, 2]), sv("_saved_mat2", [1, 2, 3, 4, 5, 6], [2, 3])]);
  assert.equal(text(mm, 0), "[[1, 4], [2, 5], [3, 6]]"); // mat2ᵀ
  assert.equal(text(mm, 1), "[[1], [2]]"); // selfᵀ
  const addmm = op("AddmmBackward0", [sc("_saved_beta", 1), sc("_saved_alpha", 1), sv("_saved_mat1", [0.19], [1, 1]), sv("_saved_mat2", [0.4], [1, 1])]);
  assert.deepEqual([0, 1, 2].map((k) => text(addmm, k)), ["1", "[[0.4]]", "[[0.19]]"]);
  assert.equal(text(op("ReluBackward0", [sv("_saved_result", [0, 2.5, 0.1])]), 0), "[0, 1, 1]");
  assert.equal(text(op("TanhBackward0", [sv("_saved_result", [0.5])]), 0), "0.75");
  assert.equal(text(op("SigmoidBackward0", [sv("_saved_result", [0.25])]), 0), "0.1875");
  // GELU'(1) = Φ(1) + φ(1) = 0.8413447 + 0.2419707; GELU'(−2) = Φ(−2) − 2φ(−2) = 0.0227501 − 0.1079819
  assert.equal(text(op("GeluBackward0", [sv("_saved_self", [1, -2]), sc("_saved_approximate", "none")]), 0), "[1.083, −0.08523]");
  assert.equal(text(op("SumBackward0"), 0), "1");
  assert.equal(text(op("MeanBackward0"), 0, post([tv([0, 0, 0, 0], [2, 2])], [tv([1], [])])), "0.25");
  assert.equal(text(op("ViewBackward0"), 0, post([tv([1, 2], [2])], [tv([1, 2], [1, 2])])), "δ rearranged to (2,)");
  assert.equal(text(op("TransposeBackward0"), 0, post([tv([1, 2], [2, 1])], [tv([1, 2], [1, 2])])), "δ rearranged to (2, 1)");
  assert.equal(text(op("SoftmaxBackward0", [sc("_saved_dim", 18446744073709552000), sv("_saved_result", [0.25, 0.75], [1, 2])]), 0), "[[0.1875, −0.1875], [−0.1875, 0.1875]] (first slice along dim 1)");
  assert.equal(text(op("LogSoftmaxBackward0", [sc("_saved_dim", 1), sv("_saved_result", [Math.log(0.25), Math.log(0.75)], [1, 2])]), 0), "[[0.75, −0.75], [−0.25, 0.25]] (first slice along dim 1)");
  // layer norm over 3 features of x = [1, 2, 3]: μ = 2, 1/σ = √1.5, x̂ = [−1.2247, 0, 1.2247]
  const rstd = Math.sqrt(1.5);
  const ln = op("NativeLayerNormBackward0", [sv("_saved_input", [1, 2, 3], [1, 3]), sv("_saved_result1", [2], [1, 1]), sv("_saved_result2", [rstd], [1, 1]), sv("_saved_weight", [1, 1, 1]), sc("_saved_normalized_shape", [3])]);
  assert.equal(text(ln, 0), "[[0.2041, −0.4082, 0.2041], [−0.4082, 0.8165, −0.4082], [0.2041, −0.4082, 0.2041]] (first row of x)");
  assert.equal(text(ln, 1), "[−1.225, 0, 1.225]");
  assert.equal(text(ln, 2), "1");
  assert.equal(text(op("EmbeddingBackward0", [sv("_saved_indices", [3, 0, 3])]), 0), "rows [3, 0, 3]");
  assert.equal(text(op("ConvolutionBackward0"), 0), "local Jacobian not shown for ConvolutionBackward0");
});

test("optimizer steps have their sentences: zero_grad and an SGD step", () => {
  const trace = tinyTrace();
  const add = (kind, payload) => trace.events.push({ seq: trace.events.length, pass_index: 3, phase: "step", kind, payload });
  const first = trace.events.length;
  add("pass_start", {});
  add("sgd_step", { lr: 0.1, after: { w: tv([1.8], [1]) } });
  add("zero_grad", { set_to_none: true, tensors: ["w"] });
  add("pass_end", {});
  trace.passes.push({ index: 3, phase: "step", label: "sgd_step lr=0.1", step: 2, first_seq: first, last_seq: first + 3 });
  const { at } = story(trace);
  assert.equal(at(first + 1).text, "SGD step, lr = 0.1: every parameter p ← p − 0.1·p.grad: w → 1.8.");
  assert.equal(at(first + 2).text, "zero_grad: w.grad set to None.");
  assert.equal(at(first + 3).text, "sgd_step lr=0.1 is done.");
});

test("a recorded program's optimizer step has its sentence", () => {
  const trace = tinyTrace();
  const add = (kind, payload) => trace.events.push({ seq: trace.events.length, pass_index: 3, phase: "step", kind, payload });
  const first = trace.events.length;
  add("pass_start", {});
  add("optimizer_step", { optimizer: "Adam", name: "optimizer", lr: 0.01, after: { w: tv([1.8], [1]) } });
  add("pass_end", {});
  trace.passes.push({ index: 3, phase: "step", label: "optimizer.step #1", step: null, first_seq: first, last_seq: first + 2 });
  const { at } = story(trace);
  assert.equal(at(first + 1).text, "optimizer.step() (Adam, lr = 0.01) updates the parameters: w → 1.8.");
  assert.equal(at(first + 1).short, "parameters updated");
});

test("number runs: lists of numbers fold, short brackets and the shape stay in the sentence", async () => {
  const { numberRuns, glanceText } = await import("../../frontend/js/narration.js");
  const text = "sends ∂L/∂x = [−0.9237, 0.1, [1, 2]] (30, 2) to layers[0] and 0.5 to y";
  const runs = numberRuns(text);
  assert.equal(runs.map((r) => r.text).join(""), text);
  assert.deepEqual(runs.filter((r) => r.numbers).map((r) => r.text), ["[−0.9237, 0.1, [1, 2]]"]);
  assert.equal(glanceText(text), "sends ∂L/∂x = […] (30, 2) to layers[0] and 0.5 to y");
  assert.deepEqual(numberRuns("[unclosed 1, 2, 3, 4"), [{ text: "[unclosed 1, 2, 3, 4", numbers: false }]);
});

test("reading weight: a short step passes quickly, a chain-rule step with its numbers waits", async () => {
  const { readingWeight } = await import("../../frontend/js/narration.js");
  const traces = [...goldenTraces(), ["tiny", tinyTrace()]];
  for (const [name, trace] of traces) {
    const { timeline, at } = story(trace);
    const weights = timeline.events.map((_, i) => readingWeight(at(i)));
    for (const w of weights) assert.ok(w >= 0.5 && w <= 4, `${name}: ${w}`);
    const runs = timeline.events.map((ev, i) => [ev.kind, weights[i], at(i)]);
    const pre = runs.filter(([k]) => k === "node_pre").map(([, w]) => w);
    const post = runs.filter(([k, , s]) => k === "node_post" && s.details.length).map(([, w]) => w);
    if (pre.length && post.length) assert.ok(Math.min(...post) > Math.min(...pre), `${name}: a chain-rule step dwells longer than the shortest "runs" step`);
  }
  assert.equal(readingWeight({ text: "x runs", details: [] }), 0.5);
  assert.equal(readingWeight({ text: "y".repeat(2000), details: [] }), 4);
});

test("a tensor the model's code made inside forward (no name, no grad) is explained, not just 'tensor'", () => {
  const trace = {
    graph: { nodes: [{ id: "n3", kind: "tensor", label: "tensor", tensor: null, role: "input", shape: [1, 16], dtype: "int64", module: null, requires_grad: false, created_seq: 1 }], edges: [], modules: [] },
    events: [
      { seq: 0, kind: "pass_start", pass_index: 0, phase: "forward" },
      { seq: 1, kind: "node_created", node: "n3", pass_index: 0, phase: "forward" },
      { seq: 2, kind: "pass_end", pass_index: 0, phase: "forward" },
    ],
    passes: [{ index: 0, phase: "forward", first_seq: 0, last_seq: 2, label: "forward #1" }],
  };
  const n = narrate(trace, buildTimeline(trace), 1);
  assert.match(n.text, /^An unnamed 1×16 tensor enters the graph: the model's own code made it inside forward/);
  assert.equal(n.short, "unnamed tensor");
});
