// Where the viewer's chips sit: forward values beside their node, .grad beside its leaf,
// gradients along their edge. Uses the exporters' collision-free placer (js/export/place.js)
// so chips never print across a neighbour's label, and the live view matches the exports.
// Pure: positions only; render.js draws them and paint() fills in the text per frame.

import { alongEdge, besideNode, createPlacer } from "./export/place.js";
import { chipWidth } from "./export/draw.js";
import { pointAlong } from "./export/xml.js";
import { gradChipText, valueChipText } from "./export/states.js";
import { formatTensorChip } from "./format.js";

/** The text a leaf's .grad chip shows. */
export function leafChipText(tv) {
  return `.grad ${formatTensorChip(tv)}`;
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
  for (const e of layout.edges) {
    const traceEdge = edges.get(e.id.split("~")[0]);
    if (!traceEdge || !traceEdge.grads?.length || (e.points || []).length < 2) continue;
    const w = widest(traceEdge.grads.map((g) => gradChipText(g.value) || "None"));
    const spot = centre(placer.place(alongEdge(e.points, w, pointAlong), w, { avoidEdges: false }), w);
    if (spot) out.edge.set(e.id, spot);
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
