import { test } from "node:test";
import assert from "node:assert/strict";
import { perSampleOf, weightOfNode, positionGrid, storageText } from "../../frontend/js/persample.js";
import { goldenTrace } from "./fixtures.mjs";


test("seed 000's MLP: a B × T grid of contribution norms per Linear weight", () => {
  const trace = goldenTrace("module_seed000_mlp");
  const records = trace.analyses.per_sample;
  assert.ok(records.length >= 2);
  for (const record of records) {
    const leaf = trace.graph.nodes.find((n) => n.kind === "tensor" && n.tensor === record.weight);
    assert.equal(weightOfNode(trace, leaf), record.weight);
    const acc = trace.graph.nodes.find((n) => n.op === "AccumulateGrad" && n.tensor === record.weight);
    assert.equal(weightOfNode(trace, acc), record.weight);
    assert.deepEqual(perSampleOf(trace, record.weight), [record]);
    const [call] = record.calls;
    const grid = positionGrid(call);
    assert.equal(grid.rows * grid.cols, call.sample_dims.reduce((a, b) => a * b, 1));
    assert.equal(grid.nums.length, grid.rows * grid.cols);
    assert.ok(grid.nums.every((x) => x >= 0));
    assert.match(storageText(record), /factors \(a, δ\): [\d,]+ numbers · W\.grad: [\d,]+ numbers/);
  }
  const input = trace.graph.nodes.find((n) => n.kind === "tensor" && n.role === "input");
  assert.equal(weightOfNode(trace, input), null);
});
