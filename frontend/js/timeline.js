// The trace's event list turned into frames: what is hidden, shown, active or done at step i.
// Pure and cumulative (no clock, no DOM), so seeking to any step is free and Node tests it.
// The node-state rule is the one in backend/gradtrace/trace_schema.py's docstring.

/**
 * @typedef {Object} Frame
 * @property {number} step          index into trace.events (the event with seq == step just fired)
 * @property {Object} event         trace.events[step]
 * @property {Object} pass          trace.passes[event.pass_index] (or a stand-in)
 * @property {Map<string,string>} nodeStates  node id -> "hidden" | "shown" | "active" | "done"
 * @property {Map<string,{state:string, grad:Object|null}>} edgeStates  edge id -> travel state
 *           ("hidden" | "shown" | "active" = the gradient travels now | "done"), grad = the
 *           TensorValue that travelled in the current pass (null before it did)
 * @property {Map<string,Object>} leafGrads   node id -> its .grad TensorValue at this step
 * @property {Map<string,number>} fanIn       node id -> gradients received so far in this pass,
 *           only where more than one has arrived (the "+=" badge)
 */

const BACKWARD = "backward";

function nodeOfEvent(ev, nodeIds) {
  if (ev.node && nodeIds.has(ev.node)) return ev.node;
  if (ev.target && nodeIds.has(ev.target)) return ev.target;
  return null;
}

function pushTo(map, key, value) {
  let list = map.get(key);
  if (!list) map.set(key, (list = []));
  list.push(value);
}

/** Precompute, per node and per edge, the seqs that decide its state. */
export function buildTimeline(trace) {
  const events = trace.events || [];
  const nodes = trace.graph.nodes;
  const nodeIds = new Set(nodes.map((n) => n.id));
  const byTensorName = new Map();
  for (const n of nodes) {
    if (n.kind === "tensor") byTensorName.set(n.label, n.id);
    if (n.tensor) byTensorName.set(n.tensor, n.id);
  }

  const created = new Map(); // node id -> created seq
  const pre = new Map(); // "pass|node" -> [seq...]
  const post = new Map(); // "pass|node" -> [seq...]
  const gradWrites = []; // {seq, pass, node, after, accumulated}
  const zeroGrads = []; // {seq, node|null}
  const eventNode = new Array(events.length).fill(null); // the rule's "node of event i"
  const eventAbout = new Array(events.length).fill(null); // for links and chips: also tensor names

  events.forEach((ev, i) => {
    const node = nodeOfEvent(ev, nodeIds);
    eventNode[i] = node;
    // A tensor hook names its tensor, not a node: link it to the op that produced the tensor.
    eventAbout[i] = node || (ev.target && byTensorName.has(ev.target) ? byTensorName.get(ev.target) : null);
    if (ev.kind === "node_created" && node && !created.has(node)) created.set(node, i);
    if (ev.kind === "node_pre" && node) pushTo(pre, `${ev.pass_index}|${node}`, i);
    if (ev.kind === "node_post" && node) pushTo(post, `${ev.pass_index}|${node}`, i);
    if (ev.kind === "grad_write" && node) {
      const p = ev.payload || {};
      gradWrites.push({ seq: i, pass: ev.pass_index, node, after: p.after ?? null, accumulated: Boolean(p.accumulated) });
    }
    if (ev.kind === "zero_grad") zeroGrads.push({ seq: i, node });
  });
  for (const n of nodes) {
    if (!created.has(n.id)) created.set(n.id, n.created_seq ?? 0);
    else if (n.created_seq != null) created.set(n.id, n.created_seq);
  }

  const passes = new Map((trace.passes || []).map((p) => [p.index, p]));
  return { trace, events, nodes, edges: trace.graph.edges, created, pre, post, gradWrites, zeroGrads, eventNode, eventAbout, passes };
}

/** The number of steps (events) a player can visit. */
export function stepCount(timeline) {
  return timeline.events.length;
}

function anyAtOrBefore(list, i) {
  return Boolean(list && list.some((s) => s <= i));
}

function isRunning(preList, postList, i) {
  // Running: the latest node_pre at or before i has no node_post between it and i.
  if (!preList) return false;
  let lastPre = -1;
  for (const s of preList) if (s <= i && s > lastPre) lastPre = s;
  if (lastPre < 0) return false;
  return !(postList || []).some((s) => s >= lastPre && s <= i);
}

function passOf(timeline, ev) {
  if (!ev) return { index: 0, phase: "forward", label: "", first_seq: 0, last_seq: 0 };
  return timeline.passes.get(ev.pass_index) || { index: ev.pass_index, phase: ev.phase, label: ev.phase, first_seq: 0, last_seq: 0 };
}

/** Node states at step i, exactly the documented rule. */
function computeNodeStates(timeline, i, ev, passIndex, isBackward) {
  const states = new Map();
  const eventNode = i >= 0 ? timeline.eventNode[i] : null;
  const leafDone = new Set();
  if (isBackward) {
    for (const w of timeline.gradWrites) if (w.pass === passIndex && w.seq <= i) leafDone.add(w.node);
  }
  for (const n of timeline.nodes) {
    const key = `${passIndex}|${n.id}`;
    let state;
    if (timeline.created.get(n.id) > i) state = "hidden";
    else if (n.id === eventNode || isRunning(timeline.pre.get(key), timeline.post.get(key), i)) state = "active";
    else if (isBackward && (n.kind === "tensor" ? leafDone.has(n.id) : anyAtOrBefore(timeline.post.get(key), i))) state = "done";
    else state = "shown";
    states.set(n.id, state);
  }
  return states;
}

/** Where each edge's gradient is at step i of a backward pass; also counts fan-in arrivals. */
function computeEdgeStates(timeline, i, passIndex, isBackward, nodeStates) {
  const edgeStates = new Map();
  const arrivals = new Map();
  for (const e of timeline.edges) {
    if (nodeStates.get(e.source) === "hidden" || nodeStates.get(e.target) === "hidden") {
      edgeStates.set(e.id, { state: "hidden", grad: null });
      continue;
    }
    let state = "shown";
    let grad = null;
    if (isBackward) {
      const g = (e.grads || []).find((x) => x.pass_index === passIndex && x.seq <= i);
      if (g) {
        state = g.seq === i ? "active" : "done";
        grad = g.value;
        if (e.kind !== "no_grad") arrivals.set(e.source, (arrivals.get(e.source) || 0) + 1);
      } else if (e.kind === "leaf") {
        // A leaf edge carries no gradient of its own: it lights up when .grad is written.
        const w = timeline.gradWrites.find((x) => x.pass === passIndex && x.node === e.source && x.seq <= i);
        if (w) state = w.seq === i ? "active" : "done";
      }
    }
    edgeStates.set(e.id, { state, grad });
  }
  const fanIn = new Map([...arrivals].filter(([, count]) => count > 1));
  return { edgeStates, fanIn };
}

/** The .grad of every leaf at step i: the last grad_write before it, cleared by zero_grad. */
function computeLeafGrads(timeline, i) {
  const grads = new Map();
  const writes = timeline.gradWrites.filter((w) => w.seq <= i);
  const zeros = timeline.zeroGrads.filter((z) => z.seq <= i);
  let wi = 0;
  let zi = 0;
  // Merge the two seq-ordered lists so a zero_grad clears only what was written before it.
  while (wi < writes.length || zi < zeros.length) {
    if (zi >= zeros.length || (wi < writes.length && writes[wi].seq < zeros[zi].seq)) {
      grads.set(writes[wi].node, writes[wi].after);
      wi++;
    } else {
      if (zeros[zi].node) grads.delete(zeros[zi].node);
      else grads.clear();
      zi++;
    }
  }
  return grads;
}

// The last frame made per timeline: painting a step asks for it more than once (a big trace's
// first paint: its states are worked out in a task of their own first). Frames are read only.
const lastFrame = new WeakMap();

/** What is visible and lit at step i (clamped to the event range). */
export function frameAt(timeline, i) {
  const n = timeline.events.length;
  const step = n === 0 ? -1 : Math.max(0, Math.min(n - 1, Math.floor(Number(i) || 0)));
  const last = lastFrame.get(timeline);
  if (last && last.step === step) return last;
  const frame = makeFrame(timeline, step);
  lastFrame.set(timeline, frame);
  return frame;
}

function makeFrame(timeline, step) {
  const ev = step >= 0 ? timeline.events[step] : null;
  const pass = passOf(timeline, ev);
  const isBackward = pass.phase === BACKWARD;
  const passIndex = ev ? ev.pass_index : 0;
  const nodeStates = computeNodeStates(timeline, step, ev, passIndex, isBackward);
  const { edgeStates, fanIn } = computeEdgeStates(timeline, step, passIndex, isBackward, nodeStates);
  const leafGrads = computeLeafGrads(timeline, step);
  const accumulated = timeline.gradWrites.some((w) => w.seq === step && w.accumulated);
  const node = step >= 0 ? timeline.eventNode[step] : null;
  const about = step >= 0 ? timeline.eventAbout[step] : null;
  return { step, event: ev, pass, nodeStates, edgeStates, leafGrads, fanIn, accumulated, node, about };
}

/** Every event index about node `nodeId`, tensor hooks included (graph -> timeline link). */
export function eventsOfNode(timeline, nodeId) {
  const out = [];
  timeline.eventAbout.forEach((n, i) => {
    if (n === nodeId) out.push(i);
  });
  return out;
}

/** The phase bands of the scrubber: [{index, label, phase, from, to}] in step units. */
export function passBands(timeline) {
  const bands = [];
  for (const p of timeline.passes.values()) bands.push({ index: p.index, label: p.label, phase: p.phase, from: p.first_seq, to: p.last_seq });
  return bands.sort((a, b) => a.from - b.from);
}
