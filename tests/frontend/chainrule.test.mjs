// The inspector's math (operands.js, chainrule.js) on the engine's golden traces: operands carry
// the program's names, the numbers are the trace's own, and every formula is valid TeX for the
// vendored KaTeX (rendered here with throwOnError).
import { test } from "node:test";
import assert from "node:assert/strict";
import katex from "../../frontend/node_modules/katex/dist/katex.mjs";
import { operandNames, texName, forwardOpName, moduleType } from "../../frontend/js/operands.js";
import { chainRuleSteps, outerProduct, rootName, texNumber, texTensor } from "../../frontend/js/chainrule.js";
import { formatTensorInline } from "../../frontend/js/format.js";
import { goldenTrace, goldenTraces } from "./fixtures.mjs";

const seed002 = goldenTrace("spec_seed002_full_backward_hook");

/** What the inspector passes: the node's last node_post in `pass` and its slot -> source map. */
function stepsOf(trace, nodeId, passIndex) {
  const node = trace.graph.nodes.find((n) => n.id === nodeId);
  const post = trace.events.filter((e) => e.kind === "node_post" && e.node === nodeId && e.pass_index === passIndex).pop();
  const sources = trace.graph.edges.filter((e) => e.target === nodeId && e.slot !== null).map((e) => ({ slot: e.slot, id: e.source, noGrad: false }));
  return chainRuleSteps({ node, names: operandNames(trace), post, sources, root: rootName(trace, passIndex) });
}

test("program names, never node ids: leaves, AccumulateGrad, named and unnamed intermediates", () => {
  const names = operandNames(seed002);
  const text = (id) => names.get(id).text;
  assert.equal(text("n0"), "x");
  assert.equal(text("n7"), "f0.bias"); // AccumulateGrad stands for its leaf
  assert.equal(text("n9"), "x1");
  assert.equal(text("n20"), "y");
  assert.equal(text("n22"), "loss");
  assert.equal(text("n2"), "view(x)");
  assert.equal(text("n5"), "f0.weightᵀ");
  assert.equal(text("n10"), "x1"); // the hook's inserted node passes x1 through
  for (const [, trace] of goldenTraces()) for (const [id, n] of operandNames(trace)) assert.doesNotMatch(n.text, /^n\d+$|input \d/, `${id} named ${n.text}`);
});

test("TeX names and numbers", () => {
  assert.equal(texName("a0"), "a_{0}");
  assert.equal(texName("f1.f.bias"), "f_{1}.f.\\mathrm{bias}");
  assert.equal(texName("W0.weight"), "W_{0}.\\mathrm{weight}");
  assert.equal(texName("hidden_state"), "\\mathrm{hidden\\_state}");
  assert.equal(forwardOpName("AddmmBackward0"), "addmm");
  assert.equal(texNumber(-0.4079606533050537), "-0.4080");
  assert.equal(texNumber(-0.4079606533050537, { paren: true }), "(-0.4080)");
  assert.equal(texNumber(-1.5e-5), "-1.500\\times 10^{-5}");
  assert.equal(texNumber(1.5e-5), "1.500\\times 10^{-5}");
  assert.equal(texNumber("NaN"), "\\text{NaN}");
  assert.equal(texNumber("-Infinity"), "-\\infty");
  assert.equal(texTensor(null), "\\text{None}");
});

test("seed 002: AddmmBackward0 of f0 — δ_out, the local derivatives and δ_in are the trace's numbers", () => {
  const rows = stepsOf(seed002, "n8", 1);
  assert.deepEqual(rows.map((r) => r.source.text), ["f0.bias", "view(x)", "f0.weightᵀ"]);
  for (const row of rows) {
    const edge = seed002.graph.edges.find((e) => e.target === "n8" && e.slot === row.slot);
    // δ_in printed is exactly the gradient the trace holds on that edge.
    assert.ok(row.text.endsWith(`= ${formatTensorInline(edge.grads[0].value, 6)}`), row.text);
    assert.match(row.text, /^∂loss\/∂/);
    // δ_out printed is the node's grad_outputs (the seed's ×2 hook action doubled it: −0.8159).
    assert.match(row.text, / = \[−0\.8159\] · /);
  }
  // δ_in / δ_out of one-number tensors: 1 for the bias, W = 0.3 for the input, x = 0.3 for W.
  assert.ok(Math.abs(rows[0].local - 1) < 1e-6);
  assert.ok(Math.abs(rows[1].local - 0.3) < 1e-6);
  assert.ok(Math.abs(rows[2].local - 0.3) < 1e-6);
  assert.match(rows[1].tex, /\\dfrac\{\\partial \\mathrm\{loss\}\}\{\\partial \\operatorname\{view\}\(x\)\}/);
});

test("seed 002: the loss node starts from δ = 1; AccumulateGrad writes the leaf's .grad", () => {
  const [first] = stepsOf(seed002, "n22", 1);
  assert.match(first.text, /^∂loss\/∂sub\(y\) = ∂loss\/∂loss · ∂loss\/∂sub\(y\) = \[1\.000\] · −1\.848 = \[−1\.848\]$/);
  const [acc] = stepsOf(seed002, "n16", 1);
  assert.equal(acc.text, "f1.f.bias.grad += ∂loss/∂f1.f.bias = [−1.020]");
});

test("outer product Σ δ ⊗ a of a Linear weight: the analysis' own numbers and error", () => {
  const rec = seed002.analyses.linear.find((r) => r.weight === "f0.weight");
  const { tex, text, matches } = outerProduct(rec, rootName(seed002, 1));
  assert.equal(matches, true);
  // (the golden spec's hook doubles grad_input: δ = −0.8159, a = x = 0.3, W.grad = −0.2448)
  assert.equal(text[0], "∂loss/∂f0.weight = Σ δ ⊗ a = [−0.2448]");
  assert.match(tex[0], /\\delta \\otimes a = \\delta\^\{\\top\} a = \\begin\{bmatrix\}-0\.8159\\end\{bmatrix\} 0\.3000 = -0\.2448/);
  assert.equal(text[2], "max error 0 ✓ matches");
});

test("large tensors are written as shape and norm", () => {
  const tv = { shape: [5, 6, 2], dtype: "float32", stats: { numel: 60, norm: 3.8729833 }, data: null, values: null, truncated: true };
  assert.equal(texTensor(tv), "\\underbrace{\\lVert\\cdot\\rVert = 3.873}_{(5,\\,6,\\,2)}");
});

test("every formula of every golden trace is valid KaTeX", () => {
  let count = 0;
  for (const [name, trace] of goldenTraces()) {
    for (const p of trace.passes.filter((x) => x.phase === "backward")) {
      for (const n of trace.graph.nodes.filter((x) => x.kind === "op")) {
        for (const row of stepsOf(trace, n.id, p.index)) {
          assert.doesNotThrow(() => katex.renderToString(row.tex, { throwOnError: true }), `${name} ${n.id}: ${row.tex}`);
          count++;
        }
      }
    }
    for (const rec of trace.analyses?.linear || []) for (const t of outerProduct(rec, rootName(trace, rec.pass_index)).tex) katex.renderToString(t, { throwOnError: true });
  }
  assert.ok(count > 20, `only ${count} formulas checked`);
});

test("modules by their spec type, tensors by their program name", () => {
  const trace = {
    spec: { modules: { f1: { type: "Module", modules: { f: { type: "Linear" } } }, seq: { type: "Sequential", layers: [{ type: "ReLU" }] } } },
    graph: {
      nodes: [{ id: "n0", kind: "tensor", label: "tensor", tensor: "d" }],
      edges: [],
      modules: [{ path: "f1", type: "ProgramModule" }, { path: "net", type: "MyNet" }],
    },
  };
  assert.equal(moduleType(trace, "f1"), "Module");
  assert.equal(moduleType(trace, "f1.f"), "Linear");
  assert.equal(moduleType(trace, "seq.0"), "ReLU");
  assert.equal(moduleType(trace, "net"), "MyNet"); // not in the spec: the class name
  assert.equal(moduleType(trace, ""), "");
  assert.equal(moduleType({ spec: null, graph: { modules: [{ path: "", type: "ResNet" }] } }, ""), "ResNet");
  assert.equal(operandNames(trace).get("n0").text, "d");
});

test("a shared weight: one δ ⊗ a term per call, summed", () => {
  const tv = (values, shape) => ({ shape, dtype: "float32", stats: { numel: values.length, norm: 1 }, values });
  const rec = {
    module: "f", weight: "f.weight", pass_index: 1, a_shape: [1, 2], delta_shape: [1, 1],
    a: [tv([1, 2], [1, 2]), tv([3, 4], [1, 2])],
    delta: [tv([0.5], [1, 1]), tv([-1], [1, 1])],
    reconstructed: tv([-2.5, -3], [1, 2]), grad: tv([-2.5, -3], [1, 2]), max_error: 0, matches: true,
  };
  const { tex } = outerProduct(rec, { text: "L", tex: "L" });
  assert.equal(
    tex[0],
    "\\dfrac{\\partial L}{\\partial f.\\mathrm{weight}} = \\sum_{\\text{2 calls}} \\delta \\otimes a = \\Delta^{\\top} A" +
      " = \\begin{bmatrix}0.5000\\end{bmatrix} \\begin{bmatrix}1.000 & 2.000\\end{bmatrix}" +
      " + \\begin{bmatrix}-1.000\\end{bmatrix} \\begin{bmatrix}3.000 & 4.000\\end{bmatrix}" +
      " = \\begin{bmatrix}-2.500 & -3.000\\end{bmatrix}",
  );
  katex.renderToString(tex[0], { throwOnError: true });
});
