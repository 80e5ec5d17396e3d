// Integer tensors print as integers (issue 24, item 7): the dtype decides, so an int64 target
// [0, 2] is "[0, 2]" on a chip and in the inspector's text, while a float [0., 2.] keeps
// "[0, 2.00]" (its significant digits say it is a float).
import { test } from "node:test";
import assert from "node:assert/strict";
import { formatChipNumbers, formatElement, formatTensorChip, formatTensorInline, isIntegerDtype } from "../../frontend/js/format.js";
import { gradChipText, leafChipText, valueChipText } from "../../frontend/js/chips.js";

const tensor = (dtype, values) => ({ shape: [values.length], dtype, stats: { numel: values.length, norm: 1, nan: 0, inf: 0 }, values });

test("an int64 target prints as integers on a chip", () => {
  assert.equal(valueChipText(tensor("int64", [0, 2])), "[0, 2]");
  assert.equal(formatTensorChip(tensor("int64", [0, 2])), "[0, 2]");
  assert.equal(valueChipText(tensor("int32", [-3])), "\u22123");
  assert.equal(valueChipText(tensor("uint8", [255, 0, 7])), "[255, 0, 7]");
  assert.equal(valueChipText(tensor("bool", [1, 0])), "[True, False]");
  assert.equal(leafChipText(tensor("int64", [4])), ".grad 4");
});

test("float tensors keep their significant digits", () => {
  assert.equal(valueChipText(tensor("float32", [0, 2])), "[0, 2.00]");
  assert.equal(valueChipText(tensor("float64", [2])), "2.000");
  assert.equal(gradChipText(tensor("float32", [1.5, -2])), "[1.50, \u22122.00]");
  assert.equal(formatChipNumbers([2], [1]), "2.000"); // no dtype: a float, as before
});

test("the inspector's inline text prints integers whole, however large", () => {
  assert.equal(formatTensorInline(tensor("int64", [0, 2, -7, 123456789])), "[0, 2, \u22127, 123456789]");
  assert.equal(formatTensorInline(tensor("float32", [0.5, 2])), "[0.5000, 2.000]");
  assert.equal(formatElement(9007199254740991, "int64"), "9007199254740991"); // no exponent
  assert.equal(formatElement("NaN", "int64"), "NaN"); // (cannot happen in an int tensor; still no crash)
});

test("which dtypes are integers", () => {
  for (const d of ["int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8", "bool"]) assert.ok(isIntegerDtype(d), d);
  for (const d of ["float64", "float32", "float16", "bfloat16", undefined]) assert.ok(!isIntegerDtype(d), String(d));
});
