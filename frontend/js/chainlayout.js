// A level of boxes that is one chain (each child feeds only the next: a Sequential, a stack of
// blocks) needs no layout search: the children are stacked top to bottom on one centre line
// and each edge runs down from its source to its target, with one horizontal step in the gap
// when they are not in line. This is what ELK makes of a chain too, but ELK costs about a
// millisecond a node, and a deep model's top level is hundreds of such boxes.
//
// Input and output are ELK's (a flat graph: children with sizes and fixed ports, edges between
// children and their ports; the answer with x/y and one section per edge), so the caller treats
// a stacked level and an ELK-laid one alike.

const PADDING = /^\[top=([\d.]+),left=([\d.]+),bottom=([\d.]+),right=([\d.]+)\]$/;

/** The children in chain order, or null when the edges make anything but one chain. */
function chainOrder(children, ownerOf, edges) {
  const next = new Map();
  const prev = new Map();
  for (const e of edges) {
    const s = ownerOf.get(e.sources[0]);
    const t = ownerOf.get(e.targets[0]);
    if (s === undefined || t === undefined || s === t) return null; // an own port, or a loop
    if ((next.has(s) && next.get(s) !== t) || (prev.has(t) && prev.get(t) !== s)) return null;
    next.set(s, t);
    prev.set(t, s);
  }
  const heads = children.map((_, i) => i).filter((i) => !prev.has(i));
  if (heads.length !== 1) return null;
  const order = [];
  for (let i = heads[0]; i !== undefined && order.length <= children.length; i = next.get(i)) order.push(i);
  return order.length === children.length ? order : null;
}

/** `graph` laid out as a stacked chain (ELK's answer shape), or null if it is not one. */
export function stackChain(graph) {
  const { children, edges, layoutOptions: options } = graph;
  const padding = PADDING.exec(options["elk.padding"] || "");
  if ((graph.ports || []).length || !children.length || !padding) return null;
  const [top, left, bottom, right] = padding.slice(1).map(Number);
  const gap = Number(options["elk.layered.spacing.nodeNodeBetweenLayers"] ?? 20);
  const ownerOf = new Map();
  children.forEach((c, i) => {
    ownerOf.set(c.id, i);
    for (const p of c.ports || []) ownerOf.set(p.id, i);
  });
  const order = chainOrder(children, ownerOf, edges);
  if (!order) return null;

  const widest = children.reduce((w, c) => Math.max(w, c.width), 0); // (no spread: a 50,000-node chain)
  const placed = children.map((c) => ({ ...c, x: left + (widest - c.width) / 2, y: 0 }));
  let y = top;
  for (const i of order) {
    placed[i].y = y;
    y += placed[i].height + gap;
  }

  // Where an edge leaves or enters: its port, or a point spread along a plain node's border.
  const ports = new Map(children.flatMap((c, i) => (c.ports || []).map((p) => [p.id, { i, p }])));
  // (each edge's place among its peers counted once: a node feeding thousands stays linear)
  const places = (keyOf) => {
    const count = new Map();
    const place = new Map();
    for (const e of edges) {
      const key = keyOf(e);
      if (key === undefined) continue;
      place.set(e.id, count.get(key) || 0);
      count.set(key, (count.get(key) || 0) + 1);
    }
    return { count, place };
  };
  const spread = (end, side) => {
    const uses = places((e) => (ports.has(e[end][0]) ? undefined : e[end][0]));
    return (e) => {
      const id = e[end][0];
      if (ports.has(id)) {
        const { i, p } = ports.get(id);
        return { x: placed[i].x + p.x, y: placed[i].y + p.y };
      }
      const n = placed[ownerOf.get(id)];
      return { x: n.x + (n.width * (uses.place.get(e.id) + 1)) / (uses.count.get(id) + 1), y: side === "bottom" ? n.y + n.height : n.y };
    };
  };
  const from = spread("sources", "bottom");
  const to = spread("targets", "top");
  // Edges in one gap cross it at different heights, so their horizontal steps stay apart.
  const inGap = places((e) => ownerOf.get(e.sources[0]));
  const routed = edges.map((e) => {
    const a = from(e);
    const b = to(e);
    const s = placed[ownerOf.get(e.sources[0])];
    const mid = s.y + s.height + (gap * (inGap.place.get(e.id) + 1)) / (inGap.count.get(ownerOf.get(e.sources[0])) + 1);
    const bends = Math.abs(a.x - b.x) < 0.5 ? [] : [{ x: a.x, y: mid }, { x: b.x, y: mid }];
    return { id: e.id, sections: [{ startPoint: a, bendPoints: bends, endPoint: b }] };
  });
  return { id: graph.id, width: left + widest + right, height: y - gap + bottom, children: placed, edges: routed };
}
