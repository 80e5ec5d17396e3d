// Where the viewer's chips sit: forward values beside their node, .grad beside its leaf,
// gradients along their edge. Uses the exporters' collision-free placer (js/export/place.js)
// so chips never print across a neighbour's label, and the live view matches the exports.
// Pure: positions only; render.js draws them and paint() fills in the text per frame.

import { alongEdge, besideNode, createPlacer } from "./export/place.js";
import { chipWidth } from "./export/draw.js";
import { pointAlong } from "./export/xml.js";
import { gradChipText, valueChipText } from "./export/states.js";
import { formatNumber, formatTensorChip, hasNonFinite } from "./format.js";

/** The short form of a gradient chip, for tight spots: its norm (the full value is on hover). */
export function compactGradText(tv) {
  if (!tv) return "None";
  const norm = tv.stats?.norm;
  return (norm === null || norm === undefined ? "‖g‖ ?" : `‖g‖ ${formatNumber(norm, 3)}`) + (hasNonFinite(tv) ? " ⚠" : "");
}

/** The text a leaf's .grad chip shows. */
export function leafChipText(tv) {
  return `.grad ${formatTensorChip(tv)}`;
}

/** More spots for a short chip in a crowded place: along the edge, on it and to either side. */
function aroundEdge(points, w) {
  const out = [];
  for (const f of [0.5, 0.35, 0.65, 0.2, 0.8, 0.1, 0.9]) {
    const p = pointAlong(points, f);
    out.push({ x: p.x - w / 2, y: p.y }, { x: p.x + 4, y: p.y }, { x: p.x - 4 - w, y: p.y });
  }
  return out;
}

function widest(texts) {
  return texts.reduce((w, t) => Math.max(w, chipWidth(t)), chipWidth("0.0000"));
}

/**
 * Chip centres {x, y} keyed by id. Each chip is placed at its widest text over the whole trace,
 * so a later, longer number never grows into a neighbour. Missing entries: no room found (the
 * renderer falls back to a fixed spot) or nothing to show.
 */
export function placeChips(layout, trace) {
  // The viewer titles boxes "path · Type": reserve that whole title, not just the path.
  const titled = layout.groups.map((g) => ({ ...g, label: g.type ? `${g.label} · ${g.type}` : g.label }));
  const placer = createPlacer({ ...layout, groups: titled });
  const nodes = new Map(trace.graph.nodes.map((n) => [n.id, n]));
  const edges = new Map(trace.graph.edges.map((e) => [e.id, e]));
  const centre = (spot, w) => (spot ? { x: spot.x + w / 2, y: spot.y, width: w } : null);
  const out = { leaf: new Map(), edge: new Map(), value: new Map() };

  const writes = new Map();
  for (const ev of trace.events) {
    if (ev.kind !== "grad_write" || !ev.node) continue;
    if (!writes.has(ev.node)) writes.set(ev.node, []);
    writes.get(ev.node).push(leafChipText(ev.payload?.after));
  }
  for (const n of layout.nodes) {
    const texts = writes.get(n.id);
    if (!texts) continue;
    const w = widest(texts);
    const spot = centre(placer.place(besideNode(n, w), w), w);
    if (spot) out.leaf.set(n.id, spot);
  }
  // Narrow chips first: a wide one should not take the only spot a short edge has.
  const withGrads = layout.edges
    .map((e) => ({ e, traceEdge: edges.get(e.id.split("~")[0]) }))
    .filter(({ e, traceEdge }) => traceEdge && traceEdge.grads?.length && (e.points || []).length >= 2)
    .map((x) => ({ ...x, w: widest(x.traceEdge.grads.map((g) => gradChipText(g.value) || "None")) }))
    .sort((a, b) => a.w - b.w);
  for (const { e, traceEdge, w } of withGrads) {
    const spot = centre(placer.place(alongEdge(e.points, w, pointAlong), w, { avoidEdges: false }), w);
    if (spot) {
      out.edge.set(e.id, spot);
      continue;
    }
    // No room for the numbers: try the norm alone, which is much narrower.
    const cw = widest(traceEdge.grads.map((g) => compactGradText(g.value)));
    const small = centre(placer.place(aroundEdge(e.points, cw), cw, { avoidEdges: false }), cw);
    // Still no room: the norm at the edge's middle, where it overlaps least.
    const mid = pointAlong(e.points, 0.5);
    out.edge.set(e.id, small ? { ...small, compact: true } : { x: mid.x, y: mid.y, width: cw, compact: true });
  }
  for (const n of layout.nodes) {
    const text = nodes.get(n.id) && valueChipText(nodes.get(n.id).value);
    if (!text) continue;
    const w = chipWidth(text);
    const spot = centre(placer.place(besideNode(n, w), w), w);
    if (spot) out.value.set(n.id, { ...spot, text });
  }
  return out;
}
