import { test } from "node:test";
import assert from "node:assert/strict";
import { pointerLocations, locate, syntaxErrorLine } from "../../frontend/js/jsonpos.js";

const text = `{
  "title": "t",
  "forward": [
    "x1 = f0(x)",
    "y = f1(x1)"
  ],
  "inputs": {"a/b": {"value": [1, 2]}}
}`;

test("pointers map to the line of their value", () => {
  const locs = pointerLocations(text);
  assert.equal(locs["/title"].line, 2);
  assert.equal(locs["/forward/1"].line, 5);
  assert.equal(text.slice(locs["/forward/1"].start, locs["/forward/1"].end), '"y = f1(x1)"');
  assert.equal(locs["/inputs/a~1b/value/1"].line, 7);
});

test("a missing pointer falls back to its nearest parent", () => {
  assert.equal(locate(text, "/forward/9").pointer, "/forward");
  assert.equal(locate(text, "/nope").pointer, "");
});

test("syntax errors give a line", () => {
  const bad = '{\n  "a": 1,\n  "b": \n}';
  try {
    JSON.parse(bad);
  } catch (err) {
    assert.equal(syntaxErrorLine(bad, err), 4);
  }
});
