// Reading one frame (timeline.frameAt) for the things a layout draws: layout nodes may be
// collapsed modules ("m:<path>") and layout edges may be bridged through hidden nodes
// ("e3~1"), so states are mapped from the trace's ids here, once. Pure.

import { formatNumber, formatTensorChip, hasNonFinite, tensorNumbers } from "../format.js";

const RANK = { hidden: 0, shown: 1, done: 2, active: 3 };

/** Layout node id -> the trace node ids it stands for. */
export function membersOf(trace, layout) {
  const members = new Map();
  for (const n of layout.nodes) {
    if (!n.id.startsWith("m:")) members.set(n.id, [n.id]);
    else {
      const path = n.id.slice(2);
      members.set(n.id, trace.graph.nodes.filter((t) => t.module === path || (t.module || "").startsWith(`${path}.`)).map((t) => t.id));
    }
  }
  return members;
}

/** The state of a layout node: its own, or for a module stand-in the "liveliest" member's. */
export function nodeState(frame, ids) {
  if (!frame) return "hidden";
  if (ids.length === 1) return frame.nodeStates.get(ids[0]) || "shown";
  let best = "hidden";
  let allDone = true;
  for (const id of ids) {
    const s = frame.nodeStates.get(id) || "shown";
    if (RANK[s] > RANK[best]) best = s;
    if (s !== "done" && s !== "hidden") allDone = false;
  }
  // A module counts as done only when every visible member is.
  return best === "done" && !allDone ? "shown" : best;
}

/** A layout edge's trace id ("e3~1" was bridged from "e3"). */
export function traceEdgeId(layoutEdgeId) {
  const k = layoutEdgeId.indexOf("~");
  return k < 0 ? layoutEdgeId : layoutEdgeId.slice(0, k);
}


/** Chip text for a gradient: the numbers when there are ≤3, else its norm (the shape is on the node). */
export function gradChipText(tv) {
  if (!tv) return null;
  const flag = hasNonFinite(tv) ? " ⚠" : "";
  const nums = tensorNumbers(tv);
  if (nums && nums.length <= 3) return formatTensorChip(tv) + flag;
  // A still picture cannot be hovered: the norm says more than the shape the node already shows.
  const norm = tv.stats && tv.stats.norm;
  return (norm === null || norm === undefined ? formatTensorChip(tv) : `‖g‖ ${formatNumber(norm)}`) + flag;
}

/** Chip text for a forward value: only small tensors (the shape is already the node's sublabel). */
export function valueChipText(tv) {
  const nums = tensorNumbers(tv);
  return nums && nums.length <= 3 ? formatTensorChip(tv) : null;
}

/**
 * Per-frame lookups for a layout, memoised: the animated exporter reads every element's state
 * in every frame, and a module box aggregates hundreds of members (computed once per frame).
 */
export function frameReader(trace, layout) {
  const members = membersOf(trace, layout);
  const nodeCache = new WeakMap();
  const nodes = (frame) => {
    let m = nodeCache.get(frame);
    if (!m) {
      m = new Map();
      for (const n of layout.nodes) m.set(n.id, nodeState(frame, members.get(n.id) || [n.id]));
      nodeCache.set(frame, m);
    }
    return m;
  };
  return {
    members,
    node: (frame, id) => (frame ? nodes(frame).get(id) : "hidden"),
  };
}
