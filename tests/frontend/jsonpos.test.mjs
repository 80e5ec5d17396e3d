// jsonpos.js: the editor's error places, read from momoa's source locations (the same package
// the page loads from /vendor/momoa/).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as momoa from "../../frontend/node_modules/@humanwhocodes/momoa/dist/momoa.js";
import { locatePointers, syntaxErrorAt } from "../../frontend/js/jsonpos.js";

const locatePointer = (momoa, text, pointer, message = "") => locatePointers(momoa, text, [{ pointer, message }])[0];

const text = `{
  "title": "t",
  "forward": [
    "x1 = f0(x)",
    "y = f1(x1)"
  ],
  "inputs": {"a/b": {"value": [1, 2]}},
  "modules": {
    "f0": {
      "in_features": 1,
      "type": "Lineaar"
    }
  }
}`;

test("a pointer maps to the line of its member or element", () => {
  assert.equal(locatePointer(momoa, text, "/title").line, 2);
  const fwd = locatePointer(momoa, text, "/forward/1");
  assert.equal(fwd.line, 5);
  assert.equal(text.slice(fwd.start, fwd.end), '"y = f1(x1)"');
  assert.equal(locatePointer(momoa, text, "/inputs/a~1b/value/1").line, 7);
  assert.equal(locatePointer(momoa, text, "/modules/f0").line, 9);
});

test("a missing pointer falls back to its nearest parent", () => {
  assert.equal(locatePointer(momoa, text, "/forward/9").pointer, "/forward");
  assert.equal(locatePointer(momoa, text, "/nope").pointer, "");
  assert.equal(locatePointer(momoa, "{nope", "/a"), null);
});

test("an unknown module type is placed at its \"type\" line, not the module's", () => {
  // The API's message for this spec names the module and quotes the key.
  const message = "/modules/f0: unknown 'type' 'Lineaar'; expected one of 'Linear', 'Conv1d'";
  const loc = locatePointer(momoa, text, "/modules/f0", message);
  assert.equal(loc.pointer, "/modules/f0/type");
  assert.equal(loc.line, 11);
  // A quoted word that is no key of that object changes nothing.
  assert.equal(locatePointer(momoa, text, "/modules/f0", "bad 'weight'").line, 9);
});

test("a trailing comma is placed at the comma, in objects and arrays", () => {
  const obj = '{\n  "a": 1,\n  "b": 2,\n}';
  assert.throws(() => JSON.parse(obj));
  assert.deepEqual(syntaxErrorAt(momoa, obj), { line: 3, column: 9, offset: 20, trailingComma: true });
  const arr = '{\n  "forward": [\n    "y = f(x)",\n  ]\n}';
  const loc = syntaxErrorAt(momoa, arr);
  assert.equal(loc.line, 3);
  assert.equal(loc.trailingComma, true);
});

test("other syntax errors give the parser's own line; valid JSON gives null", () => {
  const missing = '{\n  "title": "x",\n  "forward": [\n}';
  assert.equal(syntaxErrorAt(momoa, missing).line, 4);
  assert.equal(syntaxErrorAt(momoa, missing).trailingComma, false);
  assert.equal(syntaxErrorAt(momoa, '{\n  "a": 1\n  "b": 2\n}').line, 3);
  assert.equal(syntaxErrorAt(momoa, '{\n  "a": \u00a7\n}').line, 2);
  assert.equal(syntaxErrorAt(momoa, text), null);
});
