// The export modules in Node: schedule (against the viewer's frameAt), keyframes, escaping,
// and the SVG of the hand-checked tiny trace (two backwards: .grad 1 -> 2).
import { test } from "node:test";
import assert from "node:assert/strict";
import ELK from "../../../frontend/node_modules/elkjs/lib/main.js";
import { layoutGraph } from "../../../frontend/js/layout.js";
import { buildTimeline, frameAt } from "../../../frontend/js/timeline.js";
import { buildSchedule, finalFrame, selectSteps } from "../../../frontend/js/export/schedule.js";
import { createKeyframes, stretchOn } from "../../../frontend/js/export/keyframes.js";
import { buildDiagramSvg } from "../../../frontend/js/export/svg.js";
import { esc } from "../../../frontend/js/export/xml.js";
import { tinyTrace, goldenTraces } from "../../frontend/fixtures.mjs";

const elk = new ELK();

test("the schedule plays forward then backward, and its frames are the viewer's frames", () => {
  for (const trace of [tinyTrace(), ...goldenTraces().map(([, t]) => t)]) {
    const timeline = buildTimeline(trace);
    const steps = selectSteps(timeline, "both");
    for (const i of steps.forward) assert.equal(timeline.passes.get(trace.events[i].pass_index).phase, "forward");
    for (const i of steps.backward) assert.equal(timeline.passes.get(trace.events[i].pass_index).phase, "backward");
    const s = buildSchedule(trace, { phase: "both" });
    assert.ok(s.phases.forward[1] <= s.phases.backward[0]);
    assert.ok(s.fadeAt < s.duration);
    for (let k = 1; k < s.frames.length; k++) assert.ok(s.frames[k].t >= s.frames[k - 1].t);
    for (const { frame } of s.frames.slice(0, -1)) {
      assert.deepEqual([...frame.nodeStates], [...frameAt(timeline, frame.step).nodeStates]);
    }
    // The held picture is the end of the last pass: nothing is running any more.
    const last = s.frames[s.frames.length - 1].frame;
    assert.ok(![...last.nodeStates.values()].includes("active"));
  }
});

test("the tiny trace: backward-only starts from the whole forward graph", () => {
  const s = buildSchedule(tinyTrace(), { phase: "backward" });
  assert.ok([...s.initial.nodeStates.values()].every((v) => v === "shown"));
  assert.equal(s.phases.forward, undefined);
  const { frame } = finalFrame(tinyTrace(), "forward");
  assert.equal(frame.step, 8); // the forward pass_end
});

test("keyframes: on/off lives become deduplicated rules named by phase", () => {
  const kf = createKeyframes(10);
  const a = kf.life([{ t: 0, value: false }, { t: 2, value: true }], { look: "fade", phase: "fwd" });
  const b = kf.life([{ t: 0, value: false }, { t: 2, value: true }], { look: "fade", phase: "fwd" });
  const c = kf.life([{ t: 0, value: false }, { t: 5, value: true }, { t: 5.1, value: false }], { look: "fade", minOn: 0.6, phase: "bwd" });
  assert.equal(a, b);
  assert.equal(a, "gt-fwd-0");
  assert.equal(c, "gt-bwd-0");
  const css = kf.css();
  assert.match(css, /@keyframes gt-fwd-0\{0%\{opacity:0\}20%\{opacity:0\}21\.5%\{opacity:1\}100%\{opacity:1\}\}/);
  // The 0.1 s pulse was stretched to 0.6 s: it switches off at 56%, not 51%.
  assert.match(css, /56%\{opacity:1\}57\.5%\{opacity:0\}/);
  assert.deepEqual(stretchOn([{ t: 0, value: false }, { t: 1, value: true }, { t: 1.1, value: false }, { t: 1.3, value: true }], 0.6).map((c) => c.t), [0, 1, 1.29, 1.3]);
});

test("escaping keeps user text as text", () => {
  assert.equal(esc('<a href="x">&\u0001'), "&lt;a href=&quot;x&quot;&gt;&amp;");
});

test("the tiny trace's animated SVG shows .grad accumulating 1 -> 2 and the += badge", async () => {
  const trace = tinyTrace();
  const layout = await layoutGraph(trace, { elk });
  const svg = buildDiagramSvg(trace, layout, { animated: true, css: "" });
  assert.match(svg, />\.grad 1\.000</);
  assert.match(svg, />\.grad 2\.000</);
  assert.match(svg, />\+=</);
  assert.ok(!svg.includes("<script"));
  const still = buildDiagramSvg(trace, layout, { css: "" });
  assert.match(still, />\.grad 2\.000</);
  assert.ok(!still.includes(">.grad 1.000<"));
  for (const n of trace.graph.nodes) assert.ok(still.includes(`data-node-id="${n.id}"`), n.id);
});
