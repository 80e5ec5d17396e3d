import { test } from "node:test";
import assert from "node:assert/strict";
import { buildTimeline, frameAt, stepCount, eventsOfNode, passBands } from "../../frontend/js/timeline.js";
import { tinyTrace, goldenTraces, expectedStates } from "./fixtures.mjs";

const states = (frame) => Object.fromEntries(frame.nodeStates);

test("forward: nodes appear in creation order and the created node is active", () => {
  const tl = buildTimeline(tinyTrace());
  assert.equal(stepCount(tl), 27);
  assert.deepEqual(states(frameAt(tl, 0)), { n0: "hidden", n1: "hidden", n2: "hidden", n3: "hidden", n4: "hidden" });
  assert.deepEqual(states(frameAt(tl, 5)), { n0: "hidden", n1: "active", n2: "shown", n3: "shown", n4: "shown" });
  assert.deepEqual(states(frameAt(tl, 8)), { n0: "shown", n1: "shown", n2: "shown", n3: "shown", n4: "shown" });
});

test("backward: running node active, finished nodes done, leaf done after its grad_write", () => {
  const tl = buildTimeline(tinyTrace());
  assert.deepEqual(states(frameAt(tl, 12)), { n0: "done", n1: "active", n2: "shown", n3: "shown", n4: "shown" });
  const f15 = frameAt(tl, 15); // grad_write of w in pass 1
  assert.deepEqual(states(f15), { n0: "done", n1: "done", n2: "active", n3: "active", n4: "shown" });
  assert.deepEqual(states(frameAt(tl, 16)), { n0: "done", n1: "done", n2: "active", n3: "done", n4: "shown" });
  assert.deepEqual(states(frameAt(tl, 17)), { n0: "done", n1: "done", n2: "done", n3: "done", n4: "shown" });
  // A new backward pass starts from scratch: nothing is done at its pass_start.
  assert.deepEqual(states(frameAt(tl, 18)), { n0: "shown", n1: "shown", n2: "shown", n3: "shown", n4: "shown" });
});

test("edges: gradient travels (active) at the emitting node_post, then done; no_grad never carries one", () => {
  const tl = buildTimeline(tinyTrace());
  assert.equal(frameAt(tl, 4).edgeStates.get("e0").state, "hidden");
  assert.equal(frameAt(tl, 10).edgeStates.get("e0").state, "shown");
  const f11 = frameAt(tl, 11);
  assert.equal(f11.edgeStates.get("e0").state, "active");
  assert.deepEqual(f11.edgeStates.get("e0").grad.values, [1]);
  assert.equal(frameAt(tl, 14).edgeStates.get("e0").state, "done");
  assert.equal(frameAt(tl, 16).edgeStates.get("e3").state, "shown");
  assert.equal(frameAt(tl, 16).edgeStates.get("e2").state, "done");
  assert.equal(frameAt(tl, 19).edgeStates.get("e0").grad, null);
});

test(".grad accumulates over two backwards (1 -> 2) and is flagged as +=", () => {
  const tl = buildTimeline(tinyTrace());
  assert.equal(frameAt(tl, 14).leafGrads.has("n3"), false);
  assert.deepEqual(frameAt(tl, 15).leafGrads.get("n3").values, [1]);
  assert.equal(frameAt(tl, 15).accumulated, false);
  assert.deepEqual(frameAt(tl, 23).leafGrads.get("n3").values, [1]);
  const f24 = frameAt(tl, 24);
  assert.deepEqual(f24.leafGrads.get("n3").values, [2]);
  assert.equal(f24.accumulated, true);
});

test("frameAt clamps, and seeking is pure (back then forth gives equal frames)", () => {
  const tl = buildTimeline(tinyTrace());
  assert.equal(frameAt(tl, -5).step, 0);
  assert.equal(frameAt(tl, 999).step, 26);
  assert.deepEqual(states(frameAt(tl, 12)), states((frameAt(tl, 20), frameAt(tl, 12))));
});

test("links: events of a node, and pass bands", () => {
  const tl = buildTimeline(tinyTrace());
  assert.deepEqual(eventsOfNode(tl, "n3"), [1, 15, 24]);
  assert.deepEqual(passBands(tl).map((b) => [b.label, b.from, b.to]), [["forward #1", 0, 8], ["backward #1 of loss", 9, 17], ["backward #2 of loss", 18, 26]]);
});

test("the tiny trace and every golden trace agree with the naive rule at every step", () => {
  for (const [name, trace] of [["tiny", tinyTrace()], ...goldenTraces()]) {
    const tl = buildTimeline(trace);
    const n = trace.events.length;
    const stride = Math.max(1, Math.floor(n / 60));
    for (let i = 0; i < n; i += stride) assert.deepEqual(states(frameAt(tl, i)), expectedStates(trace, i), `${name} step ${i}`);
  }
});

test("a tensor hook (node null) links to its tensor's op but does not light it up", () => {
  const t = tinyTrace();
  t.events.push({ seq: 27, pass_index: 2, phase: "backward", kind: "tensor_hook", target: "y", node: null, payload: {} });
  const tl = buildTimeline(t);
  const f = frameAt(tl, 27);
  assert.equal(f.node, null);
  assert.equal(f.about, "n1");
  assert.equal(f.nodeStates.get("n1"), "done");
  assert.deepEqual(eventsOfNode(tl, "n1").slice(-1), [27]);
  assert.deepEqual(states(f), expectedStates(t, 27));
});
