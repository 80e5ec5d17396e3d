// The run view's folded blocks: which nodes repeat across layers.N (and h.N.attn…) and which one a
// heatmap row shows by default (the weight's gradient).
import assert from "node:assert/strict";
import { test } from "node:test";

import { blockOf, repeatedBlocks, rowLabel } from "../../frontend/js/watchheatmap.js";

const node = (module, op, ordinal, param = null) => ({ key: `${module}/${op}#${ordinal}`, module, op, param });

test("a module path splits at its first number", () => {
  assert.deepEqual(blockOf("layers.3"), { prefix: "layers.", index: 3, rest: "" });
  assert.deepEqual(blockOf("transformer.h.11.attn.c_attn"), { prefix: "transformer.h.", index: 11, rest: ".attn.c_attn" });
  assert.deepEqual(blockOf("0"), { prefix: "", index: 0, rest: "" });
  assert.equal(blockOf("(model)"), null);
  assert.equal(blockOf("head"), null);
});

test("blocks that share nodes fold into one heatmap, the weight's gradient first", () => {
  const nodes = [node("(loss)", "MseLossBackward0", 0), node("head", "AddmmBackward0", 0)];
  for (const k of [0, 1, 2]) nodes.push(node(`layers.${k}`, "AddmmBackward0", 0), node(`layers.${k}`, "AccumulateGrad", "weight", `layers.${k}.weight`));
  nodes.push(node("layers.2", "ReluBackward0", 0)); // only in one block: not a row template
  const [block, ...others] = repeatedBlocks(nodes);
  assert.equal(others.length, 0);
  assert.equal(block.prefix, "layers.");
  assert.deepEqual(block.indices, [0, 1, 2]);
  assert.deepEqual(block.templates.map((t) => t.key), ["AccumulateGrad#weight", "AddmmBackward0#0"]);
  assert.deepEqual(block.templates[0].cells, [3, 5, 7]); // indices into nodes, a row per block
  assert.equal(block.templates[1].label, "Addmm#0");
});

test("a run without repeated blocks has no heatmap", () => {
  assert.deepEqual(repeatedBlocks([node("fc1", "AddmmBackward0", 0), node("layers.0", "AddmmBackward0", 0)]), []);
});

test("a row is named by its last path part and number", () => {
  assert.equal(rowLabel("layers.", 3), "layers.3");
  assert.equal(rowLabel("transformer.h.", 11), "…h.11");
  assert.equal(rowLabel("", 0), "0");
});

test("in a transformer block the first parameter's weight gradient is drawn first", () => {
  const nodes = [];
  for (const k of [0, 1]) nodes.push(node(`h.${k}`, "AddBackward0", 0), node(`h.${k}.ln_1`, "AccumulateGrad", "weight", `h.${k}.ln_1.weight`), node(`h.${k}.ln_1`, "AccumulateGrad", "bias"));
  assert.deepEqual(repeatedBlocks(nodes)[0].templates.map((t) => t.key), ["ln_1/AccumulateGrad#weight", "ln_1/AccumulateGrad#bias", "AddBackward0#0"]);
});
