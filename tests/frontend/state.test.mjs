import { test } from "node:test";
import assert from "node:assert/strict";
import { readHash, writeHash, createStore, DEFAULTS } from "../../frontend/js/state.js";

test("the hash round-trips and leaves defaults out", () => {
  const state = { ...DEFAULTS, example: "seed002", step: 41, node: "n8", inserted: false, collapsed: new Set(["f0", "f1"]) };
  const hash = writeHash(state);
  assert.equal(hash, "#example=seed002&step=41&node=n8&collapsed=f0%2Cf1&inserted=0");
  assert.deepEqual(readHash(hash), { example: "seed002", step: 41, node: "n8", collapsed: new Set(["f0", "f1"]), inserted: false });
  assert.equal(writeHash(DEFAULTS), "");
  assert.deepEqual(readHash("#step=-3&speed=abc"), { step: 0, speed: DEFAULTS.speed });
});

test("the store reports only what changed", () => {
  const s = createStore({ step: 2 });
  const calls = [];
  s.on("change", (st, changed) => calls.push([st.step, [...changed]]));
  s.set({ step: 2 });
  s.set({ step: 3, node: "n1" });
  assert.deepEqual(calls, [[3, ["step", "node"]]]);
});

test("the collapsed modules are a Set in the store, a comma list in the URL", () => {
  assert.equal(DEFAULTS.collapsed, null); // no choice yet: the viewer's default folding
  assert.deepEqual(readHash("#collapsed=f0,f1.2,fold~3"), { collapsed: new Set(["f0", "f1.2", "fold~3"]) });
  assert.deepEqual(readHash("#collapsed=-"), { collapsed: new Set() }); // everything expanded (links made before the Set)
  assert.deepEqual(readHash("#collapsed="), { collapsed: null }); // an empty value: no choice
  assert.equal(writeHash({ ...DEFAULTS, collapsed: new Set(["f0", "f1"]) }), "#collapsed=f0%2Cf1");
  assert.equal(writeHash({ ...DEFAULTS, collapsed: new Set() }), "#collapsed=-");
  assert.equal(writeHash({ ...DEFAULTS, collapsed: null }), "");
  for (const hash of ["#collapsed=f0%2Cf1", "#collapsed=-"]) assert.equal(writeHash({ ...DEFAULTS, ...readHash(hash) }), hash);
});

test("the store tells a collapsed set's change by its members", () => {
  const s = createStore({ collapsed: new Set(["f0"]) });
  const calls = [];
  s.on("change", (st, changed) => calls.push([...changed]));
  s.set({ collapsed: new Set(["f0"]) }); // the same modules: nothing to lay out again
  assert.deepEqual(calls, []);
  s.set({ collapsed: new Set(["f0", "f1"]) });
  s.set({ collapsed: new Set() });
  s.set({ collapsed: null });
  assert.deepEqual(calls, [["collapsed"], ["collapsed"], ["collapsed"]]);
  assert.equal(s.get().collapsed, null);
});
