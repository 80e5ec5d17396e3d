import { test } from "node:test";
import assert from "node:assert/strict";
import { readHash, writeHash, createStore, DEFAULTS } from "../../frontend/js/state.js";

test("the hash round-trips and leaves defaults out", () => {
  const state = { ...DEFAULTS, example: "seed002", step: 41, node: "n8", inserted: false, collapsed: "f0,f1" };
  const hash = writeHash(state);
  assert.equal(hash, "#example=seed002&step=41&node=n8&collapsed=f0%2Cf1&inserted=0");
  assert.deepEqual(readHash(hash), { example: "seed002", step: 41, node: "n8", collapsed: "f0,f1", inserted: false });
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
