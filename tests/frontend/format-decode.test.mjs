// The viewer's one decoder of TensorValue `data` (schema 2: base64 of the tensor's own
// little-endian bytes), checked against vectors the engine wrote: each base64 string below
// is gradtrace.engine.summarize's encoding of a torch tensor, each list what torch holds
// (as float64; "inf"/"-inf" and null for NaN), so the oracle is torch, not this decoder.
import { test } from "node:test";
import assert from "node:assert/strict";
import { decodeBase64Numbers, formatTensorChip, smallTensorNumbers, tensorNumbers } from "../../frontend/js/format.js";

const VECTORS = {
  float64: ["mpmZmZmZuT9VVVVVVVXVv1nz+MIfbqUBAAAAAAAA8H8AAAAAAAD4fw==", [0.1, -0.3333333333333333, 1e-300, "inf", null]],
  float32: ["zczMPauqqr7CFgEAAACA/w==", [0.10000000149011612, -0.3333333432674408, 9.99994610111476e-41, "-inf"]],
  float16: ["Zi7/+wEAAHwAfg==", [0.0999755859375, -65504.0, 5.960464477539063e-08, "inf", null]],
  bfloat16: ["zT1i/wsAgP8=", [0.10009765625, -3.00405527047391e38, 1.0101904577379033e-39, "-inf"]],
  int64: ["AQAAAAAA4P8AAAAAAAAAAAcAAAAAAAAA", [-9007199254740991, 0, 7]],
  int32: ["AAAAgP///38=", [-2147483648, 2147483647]],
  int16: ["AIAFAA==", [-32768, 5]],
  int8: ["gH8=", [-128, 127]],
  uint8: ["AP8=", [0, 255]],
  bool: ["AQAB", [1, 0, 1]],
};

const expected = (v) => (v === null ? NaN : v === "inf" ? Infinity : v === "-inf" ? -Infinity : v);

for (const [dtype, [b64, want]] of Object.entries(VECTORS)) {
  test(`data decodes by dtype: ${dtype}`, () => {
    const got = Array.from(decodeBase64Numbers(b64, dtype));
    assert.deepEqual(got, want.map(expected)); // deepEqual: NaN equals NaN, exact doubles
    const tv = { shape: [want.length], dtype, stats: { numel: want.length }, data: b64 };
    assert.deepEqual(tensorNumbers(tv), want.map(expected));
  });
}

test("float64 is not rounded through float32", () => {
  const [x] = decodeBase64Numbers(VECTORS.float64[0], "float64");
  assert.equal(x, 0.1);
  assert.notEqual(x, Math.fround(0.1));
});

test("stats-only values and unknown dtypes give no numbers", () => {
  assert.equal(tensorNumbers({ shape: [3], dtype: "float32", stats: { numel: 3 }, truncated: true }), null);
  // (complex64 is decoded now, to magnitudes: see complex.test.mjs; float8 has no reader)
  assert.equal(tensorNumbers({ shape: [1], dtype: "float8_e4m3fn", stats: { numel: 1 }, data: "AA==" }), null);
  assert.deepEqual(tensorNumbers({ shape: [2], dtype: "float32", stats: { numel: 2 }, values: [1, "NaN"] }), [1, NaN]);
});

test("smallTensorNumbers decodes only tensors small enough to print (by their shape)", () => {
  const tiny = { shape: [2], dtype: "float32", values: [0.5, -1] };
  assert.deepEqual(smallTensorNumbers(tiny, 3), [0.5, -1]);
  // A big tensor is never decoded: its (here unreadable) data is not even looked at.
  const big = { shape: [64, 64], dtype: "float32", data: "not base64 at all" };
  assert.equal(smallTensorNumbers(big, 3), null);
  assert.equal(smallTensorNumbers(null, 3), null);
  assert.equal(formatTensorChip({ shape: [64, 64], dtype: "float32", data: "not base64 at all" }), "(64, 64)");
});
