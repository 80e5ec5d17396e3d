// Where a chip goes: the first candidate spot that overlaps no node box and no chip placed
// before it. Value and gradient chips hang next to nodes and on edges, and ELK packs nodes
// tightly, so a fixed offset would print numbers across a neighbour's label. Pure.

const H = 16; // chip height (draw.js CHIP_H)
const MARGIN = 2;

function overlaps(a, b) {
  return a.x < b.x + b.width + MARGIN && b.x < a.x + a.width + MARGIN && a.y < b.y + b.height + MARGIN && b.y < a.y + a.height + MARGIN;
}

/** A placer over the layout's node boxes. Chips are boxes {x, y (top), width, height}. */
export function createPlacer(layout) {
  const taken = layout.nodes.map((n) => ({ x: n.x, y: n.y, width: n.width, height: n.height }));
  for (const g of layout.groups) if (!g.collapsed) taken.push({ x: g.x, y: g.y, width: Math.min(g.width, 10 + String(g.label || g.path).length * 7), height: 20 });
  // Edge segments as thin boxes (routing is orthogonal, so a segment's box is the segment).
  const lines = [];
  for (const e of layout.edges) {
    const p = e.points || [];
    for (let i = 1; i < p.length; i++) {
      const x = Math.min(p[i - 1].x, p[i].x);
      const y = Math.min(p[i - 1].y, p[i].y);
      lines.push({ x: x - 1, y: y - 1, width: Math.abs(p[i].x - p[i - 1].x) + 2, height: Math.abs(p[i].y - p[i - 1].y) + 2 });
    }
  }

  /**
   * candidates: [{x, y}] with x the chip's left edge and y its vertical centre, best first.
   * Returns the chosen {x, y} (same convention) or null when every spot collides. A chip that
   * belongs on an edge sets avoidEdges false (it sits on its own edge on purpose).
   */
  function place(candidates, width, { avoidEdges = true, force = false } = {}) {
    for (const c of candidates) {
      const box = { x: c.x, y: c.y - H / 2, width, height: H };
      if (box.x < 0 || box.y < 0) continue;
      if (avoidEdges && lines.some((t) => overlaps(box, t))) continue;
      if (!taken.some((t) => overlaps(box, t))) {
        taken.push(box);
        return c;
      }
    }
    // Some chips matter more than a clean picture (a leaf's .grad, a gradient): drawn anyway.
    if (force && candidates.length) {
      const c = candidates.find((k) => k.x >= 0 && k.y >= H / 2) || candidates[0];
      taken.push({ x: c.x, y: c.y - H / 2, width, height: H });
      return c;
    }
    return null;
  }
  return { place };
}

/**
 * Spots beside a node: right, left, below, above (vertical offset `dy` from its centre), then
 * astride its top-right corner (where the viewer puts a leaf's .grad).
 */
export function besideNode(n, width, dy = 0, gap = 6) {
  const cy = n.y + n.height / 2 + dy;
  const cx = Math.max(0, n.x + n.width / 2 - width / 2);
  return [
    { x: n.x + n.width + gap, y: cy },
    { x: n.x - gap - width, y: cy },
    { x: cx, y: n.y + n.height + gap + H / 2 + Math.max(0, dy) },
    { x: cx, y: n.y - gap - H / 2 + Math.min(0, dy) },
    { x: Math.max(0, n.x + n.width - 10 - width / 2), y: n.y - 4 },
  ];
}

/** Spots along an edge: its middle, then a third and two thirds along, then beside the middle. */
export function alongEdge(points, width, at) {
  const spots = [0.5, 0.35, 0.65, 0.2, 0.8].map((f) => at(points, f));
  const out = spots.map((p) => ({ x: p.x - width / 2, y: p.y }));
  out.push({ x: spots[0].x + 6, y: spots[0].y }, { x: spots[0].x - 6 - width, y: spots[0].y });
  return out;
}
