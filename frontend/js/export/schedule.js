// The animated diagram's clock: which events it plays, when each one plays, and how every
// node, edge and leaf .grad changes state along the way. Pure. States come from the viewer's
// own frameAt(), so the animated SVG shows exactly what the player shows at the same step.

import { buildTimeline, frameAt } from "../timeline.js";

// Seconds. Small graphs get a teaching pace; big ones are squeezed into a bounded loop.
export const PACE = {
  lead: 0.5, // blank canvas before the first node appears
  gap: 0.9, // pause between the forward build and the backward flow
  hold: 2.5, // final picture before the loop restarts
  fade: 0.6, // fade-out to the blank canvas
  forward: { min: 0.07, max: 0.35, total: 6 }, // per-event step, and the cap for the whole pass
  backward: { min: 0.1, max: 0.6, total: 9 },
};
// At most this many distinct instants per phase: bounds the number of keyframes.
const MAX_SLOTS = 400;

function phaseOfPass(timeline, passIndex) {
  const p = timeline.passes.get(passIndex);
  return p ? p.phase : "forward";
}

/** Event indices the animation plays for `phase` ("forward" | "backward" | "both"). */
export function selectSteps(timeline, phase) {
  const out = { forward: [], backward: [] };
  timeline.events.forEach((ev, i) => {
    const p = phaseOfPass(timeline, ev.pass_index);
    if (p !== "forward" && p !== "backward") return; // zero_grad / sgd_step are not drawn
    if (phase !== "both" && p !== phase) return;
    // Only events that light something up get screen time (pass_start/end take none).
    if (timeline.eventNode[i] === null && ev.kind !== "grad_write") return;
    out[p].push(i);
  });
  return out;
}

function slotsOf(steps, pace) {
  // Group consecutive steps into at most MAX_SLOTS instants; one dt per instant.
  const per = Math.max(1, Math.ceil(steps.length / MAX_SLOTS));
  const slots = [];
  for (let k = 0; k < steps.length; k += per) slots.push(steps.slice(k, k + per));
  const dt = slots.length ? Math.min(pace.max, Math.max(pace.min, pace.total / slots.length)) : 0;
  return { slots, dt };
}

/**
 * The whole schedule: {duration, times:[{t, step}], phases:{forward:[t0,t1], backward:[t0,t1]},
 * initial: Frame, frames: [{t, frame}]} — frames only at instants where the picture changes.
 */
export function buildSchedule(trace, { phase = "both" } = {}) {
  const timeline = buildTimeline(trace);
  const steps = selectSteps(timeline, phase);
  const fwd = slotsOf(steps.forward, PACE.forward);
  const bwd = slotsOf(steps.backward, PACE.backward);
  const frames = [];
  const phases = {};
  let t = PACE.lead;
  const play = (name, { slots, dt }) => {
    if (!slots.length) return;
    const t0 = t;
    for (const slot of slots) {
      // The last step of an instant stands for it; transient "active" flashes of the steps
      // squeezed before it are lost only on graphs too big to watch event by event.
      frames.push({ t, dt, frame: frameAt(timeline, slot[slot.length - 1]) });
      t += dt;
    }
    phases[name] = [t0, t];
  };
  // Before the first played step: for a backward-only loop the finished forward graph.
  const first = steps.forward[0] ?? steps.backward[0];
  const initial = first === undefined || phase === "backward" ? frameAt(timeline, (first ?? 0) - 1) : null;
  play("forward", fwd);
  if (fwd.slots.length && bwd.slots.length) t += PACE.gap;
  play("backward", bwd);
  // Hold on the still picture (the end of the last pass: nothing is "running" any more).
  if (frames.length) frames.push({ t, dt: 0, frame: finalFrame(trace, phase, timeline).frame });
  const end = t + PACE.hold;
  return { timeline, frames, phases, initial, duration: end + PACE.fade, fadeAt: end };
}

/** The frame the static picture shows: the end of the last pass the phase includes. */
export function finalFrame(trace, phase = "both", timeline = buildTimeline(trace)) {
  const steps = selectSteps(timeline, phase);
  const all = [...steps.forward, ...steps.backward];
  const last = all.length ? all.reduce((a, b) => Math.max(a, b)) : timeline.events.length - 1; // (no spread: 400,000 steps)
  // Stop at the end of that pass (its pass_end lights nothing): a still has no "running" glow.
  const ev = timeline.events[last];
  const pass = ev ? timeline.passes.get(ev.pass_index) : null;
  const step = pass && pass.last_seq >= last ? pass.last_seq : last;
  return { timeline, frame: settle(frameAt(timeline, step)) };
}

/**
 * A still has no "running" glow: when a pass's last event still lights a node (no pass_end
 * after it), that node and edge count as finished (backward) or simply there (forward).
 */
function settle(frame) {
  const backward = frame.pass.phase === "backward";
  const nodeStates = new Map([...frame.nodeStates].map(([id, s]) => [id, s === "active" ? (backward ? "done" : "shown") : s]));
  const edgeStates = new Map([...frame.edgeStates].map(([id, e]) => [id, e.state === "active" ? { ...e, state: "done" } : e]));
  return { ...frame, nodeStates, edgeStates };
}
