// Lays out a compound ELK graph (module boxes inside module boxes) one box at a time, innermost
// first, instead of ELK's INCLUDE_CHILDREN over the whole hierarchy (whose cost grows with the
// whole graph: ~1 ms a node). An edge that leaves a box goes through a port on its border (out
// of the bottom, into the top), so each box is a small flat graph; boxes with the same contents
// (the blocks of a deep model) are laid out once and reused. A box's insides are laid out with
// its ports free on their side; its parent then sees it as one node with those ports fixed.
//
// Input: the graph layout.js builds (children nested, every edge at the root) and the layout
// options per box; output: what `elk.layout` returns for it with ROOT coordinates (absolute
// x/y on every node, one section per edge from its source to its target).

import { stackChain } from "./chainlayout.js";
import { walkTree } from "./tree.js";

/** Where each node and box sits: id -> parent box id ("" for the root). */
function parents(root) {
  const parentOf = new Map();
  const boxes = new Map([["", root]]);
  walkTree(root, (c, parent) => {
    parentOf.set(c.id, parent === root ? "" : parent.id);
    if (c.children && c.children.length) boxes.set(c.id, c);
  });
  return { parentOf, boxes };
}

/** The boxes from `id`'s own box up to the root, innermost first (the root is ""). */
function chainOf(id, parentOf) {
  const chain = [];
  for (let box = parentOf.get(id); box !== undefined; box = box === "" ? undefined : parentOf.get(box)) chain.push(box);
  return chain;
}

/**
 * Cut every edge into one segment per box it runs in: up through an out-port on the bottom of
 * each box it leaves, across the innermost box holding both ends, down through an in-port on
 * the top of each box it enters. Returns per box its segments and its own ports.
 */
function cutEdges(edges, parentOf, boxes) {
  const segments = new Map([...boxes.keys()].map((b) => [b, []])); // box -> [{id, edge, source, target}]
  const ports = new Map([...boxes.keys()].map((b) => [b, []])); // box -> [{id, side}]
  const route = new Map(); // edge id -> [segment ids in order, with the box each runs in]
  for (const e of edges) {
    const [source, target] = [e.sources[0], e.targets[0]];
    const up = chainOf(source, parentOf);
    const down = chainOf(target, parentOf);
    const shared = up.find((b) => down.includes(b));
    const leaving = up.slice(0, up.indexOf(shared));
    const entering = down.slice(0, down.indexOf(shared)).reverse();
    const steps = [];
    let from = source;
    const add = (box, to) => {
      const id = `${e.id}#${steps.length}`;
      segments.get(box).push({ id, source: from, target: to });
      steps.push({ id, box });
    };
    for (const box of leaving) {
      const port = `${e.id}>${box}`;
      ports.get(box).push({ id: port, side: "SOUTH" });
      add(box, port);
      from = port;
    }
    for (const box of entering) {
      const port = `${e.id}<${box}`;
      ports.get(box).push({ id: port, side: "NORTH" });
      add(parentOf.get(box), port);
      from = port;
    }
    add(entering.length ? entering[entering.length - 1] : shared, target);
    route.set(e.id, steps);
  }
  return { segments, ports, route };
}

/** The boxes grouped by nesting depth, deepest first (the root, depth 0, last). */
function byDepth(boxes, parentOf) {
  const levels = [];
  for (const id of boxes.keys()) {
    let d = 0;
    for (let b = id; b !== ""; b = parentOf.get(b)) d++;
    (levels[d] ||= []).push(id);
  }
  return levels.map((ids, d) => ({ d, ids })).filter(Boolean).reverse();
}

/**
 * Lay out `root` (children nested, every edge in `root.edges`) box by box with `elk`; a box's
 * insides get `options`, then `stacking` if it holds boxes, then its own `layoutOptions`
 * (spacing, padding).
 */
export async function layoutByBoxes(elk, root, { options, stacking = {}, nextTask = null }) {
  const { parentOf, boxes } = parents(root);
  const edges = root.edges;
  const { segments, ports, route } = cutEdges(edges, parentOf, boxes);
  const placed = new Map(); // box id -> {width, height, children: [{x, y}], ports: [{x, y}], sections: [points]}
  const memo = new Map(); // contents signature -> placed

  /** The flat ELK graph of one box: leaves and laid-out inner boxes (ports fixed) + its segments. */
  const flatGraph = (boxId) => {
    const box = boxes.get(boxId);
    const index = new Map(); // id of child / child port / own port -> reference in the signature
    const children = box.children.map((c, i) => {
      index.set(c.id, `${i}`);
      const inner = placed.get(c.id);
      if (!inner) return { id: c.id, width: c.width, height: c.height };
      const ps = ports.get(c.id).map((p, j) => {
        index.set(p.id, `${i}.${j}`);
        return { id: p.id, x: inner.ports[j].x, y: inner.ports[j].y, width: 0, height: 0 };
      });
      return { id: c.id, width: inner.width, height: inner.height, ports: ps, layoutOptions: { "elk.portConstraints": "FIXED_POS" } };
    });
    const own = ports.get(boxId).map((p, j) => {
      index.set(p.id, `p${j}`);
      return { id: p.id, width: 0, height: 0, layoutOptions: { "elk.port.side": p.side } };
    });
    const segs = segments.get(boxId).map((s) => ({ id: s.id, sources: [s.source], targets: [s.target] }));
    const holdsBoxes = children.some((c) => c.ports);
    const boxOptions = { ...options, ...(holdsBoxes ? stacking : null), ...box.layoutOptions };
    const signature = JSON.stringify([
      boxOptions,
      children.map((c) => [c.width, c.height, (c.ports || []).map((p) => [p.x, p.y])]),
      own.map((p) => p.layoutOptions["elk.port.side"]),
      segs.map((s) => [index.get(s.sources[0]), index.get(s.targets[0])]),
    ]);
    const graph = { id: boxId || "root", layoutOptions: boxOptions, children, edges: segs };
    if (boxId) Object.assign(graph, { ports: own, layoutOptions: { ...boxOptions, "elk.portConstraints": "FIXED_SIDE" } });
    return { graph, signature };
  };

  /** ELK's answer for one box, by position in its lists (so equal boxes can share it). */
  const readBack = (result) => ({
    width: result.width,
    height: result.height,
    children: result.children.map((c) => ({ x: c.x, y: c.y })),
    ports: (result.ports || []).map((p) => ({ x: p.x, y: p.y })),
    sections: result.edges.map((e) => {
      const s = e.sections[0];
      return [s.startPoint, ...(s.bendPoints || []), s.endPoint].map((p) => ({ x: p.x, y: p.y }));
    }),
  });

  // Boxes of one depth do not depend on each other: their distinct contents go to ELK together,
  // as separate children of one frame that ELK lays out child by child.
  for (const { d, ids: level } of byDepth(boxes, parentOf)) {
    const todo = new Map(); // signature -> graph
    const graphs = level.map((boxId) => flatGraph(boxId));
    graphs.forEach(({ graph, signature }) => memo.has(signature) || todo.has(signature) || todo.set(signature, graph));
    if (d === 0) {
      if (nextTask) await nextTask("the inner boxes are laid out"); // (the top level of a 50,000-node chain: its own task)
      for (const [signature, graph] of todo) memo.set(signature, readBack(stackChain(graph) ?? (await elk.layout(graph))));
    } else if (todo.size) {
      const frame = await elk.layout({ id: "frame", layoutOptions: { "elk.algorithm": "fixed" }, children: [...todo.values()] });
      [...todo.keys()].forEach((signature, k) => memo.set(signature, readBack(frame.children[k])));
    }
    level.forEach((boxId, k) => placed.set(boxId, memo.get(graphs[k].signature)));
  }

  if (nextTask) await nextTask("the top level is laid out");
  // Absolute positions, outermost first; then each edge's segments joined end to end.
  // (a queue of boxes, not recursion: any nesting depth)
  const origin = new Map([["", { x: 0, y: 0 }]]);
  const children = [];
  for (const pending = [["", children]]; pending.length; ) {
    const [boxId, into] = pending.pop();
    const o = origin.get(boxId);
    boxes.get(boxId).children.forEach((c, i) => {
      const at = placed.get(boxId).children[i];
      const node = { id: c.id, x: o.x + at.x, y: o.y + at.y, width: c.width, height: c.height };
      const inner = placed.get(c.id);
      if (inner) {
        origin.set(c.id, { x: node.x, y: node.y });
        Object.assign(node, { width: inner.width, height: inner.height, children: [] });
        pending.push([c.id, node.children]);
      }
      into.push(node);
    });
  }
  const segmentPoints = new Map();
  for (const [boxId, segs] of segments) {
    const o = origin.get(boxId);
    segs.forEach((s, k) => segmentPoints.set(s.id, placed.get(boxId).sections[k].map((p) => ({ x: o.x + p.x, y: o.y + p.y }))));
  }
  const routed = edges.map((e) => {
    const points = [];
    for (const step of route.get(e.id)) {
      for (const p of segmentPoints.get(step.id)) {
        const last = points[points.length - 1];
        if (!last || Math.abs(last.x - p.x) > 0.01 || Math.abs(last.y - p.y) > 0.01) points.push(p); // drop the joint at a port
      }
    }
    return { id: e.id, sections: [{ startPoint: points[0], bendPoints: points.slice(1, -1), endPoint: points[points.length - 1] }] };
  });
  const top = placed.get("");
  return { id: root.id, width: top.width, height: top.height, children, edges: routed };
}
