// Complex tensors in the viewer: the engine writes complex64/complex128 as each element's real
// and imaginary parts in turn (base64 `data`, or a `values` list of two numbers an element);
// the viewer shows magnitudes |z|, as the trace's stats are (stats.of === "magnitude"). The
// base64 strings below are gradtrace.engine.summarize's encoding of torch tensors, the expected
// lists torch's z.abs() (the oracle is torch, not this decoder).
import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeBase64Numbers, formatTensorChip, formatTensorInline, isComplex, tensorNumbers } from "../../frontend/js/format.js";

// torch.tensor([3+4j, -1e-3-0j, complex(inf, 1), 0.5j], dtype=...)
const VECTORS = {
  complex64: ["AABAQAAAgEBvEoO6AAAAAAAAgH8AAIA/AAAAAAAAAD8=", [5.0, 0.0010000000474974513, Infinity, 0.5]],
  complex128: ["AAAAAAAACEAAAAAAAAAQQPyp8dJNYlC/AAAAAAAAAAAAAAAAAADwfwAAAAAAAPA/AAAAAAAAAAAAAAAAAADgPw==", [5.0, 0.001, Infinity, 0.5]],
};

for (const [dtype, [b64, want]] of Object.entries(VECTORS)) {
  test(`complex data decodes to magnitudes: ${dtype}`, () => {
    assert.ok(isComplex(dtype));
    assert.deepEqual(Array.from(decodeBase64Numbers(b64, dtype)), want);
    const tv = { shape: [4], dtype, stats: { numel: 4, of: "magnitude" }, data: b64 };
    assert.deepEqual(tensorNumbers(tv), want);
  });
}

test("a tiny complex tensor's values list is pairs: one magnitude an element", () => {
  const tv = { shape: [2], dtype: "complex64", stats: { numel: 2, of: "magnitude" }, values: [3, 4, 0, "-Infinity"] };
  assert.deepEqual(tensorNumbers(tv), [5, Infinity]);
  assert.equal(formatTensorChip(tv), "|z| [5.00, inf]");
  assert.match(formatTensorInline(tv), /^\|z\| \[5(\.0+)?, /);
  const scalar = { shape: [], dtype: "complex128", stats: { numel: 1, of: "magnitude" }, values: [0, -2] };
  assert.deepEqual(tensorNumbers(scalar), [2]);
  assert.match(formatTensorChip(scalar), /^\|z\| 2(\.0+)?$/);
});

test("a real tensor is unchanged: no |z| mark", () => {
  assert.ok(!isComplex("float32"));
  assert.equal(formatTensorChip({ shape: [], dtype: "float32", stats: { numel: 1 }, values: [2] }), "2.000");
});
