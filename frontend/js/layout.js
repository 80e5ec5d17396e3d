// The one place graph geometry is computed: trace -> ELK (layered, top to bottom) -> Layout.
// Pure apart from the ELK instance it is handed (worker-backed in the browser, in-process in
// Node), so the viewer, the static SVG export and the notebooks all draw the same picture.

import { formatShape, subscript } from "./format.js";
import { textWidth } from "./metrics.js";
import { ancestry, collapseKeys, defaultCollapsed, repeatedBlocks } from "./fold.js";
import { layoutByBoxes } from "./boxlayout.js";
import { walkTree } from "./tree.js";

// Room for the module path on top of its box (a 12 px title at y = 18), and the box's other sides.
const GROUP_TITLE = 26;
const GROUP_PADDING = `[top=${GROUP_TITLE},left=10,bottom=6,right=10]`;

/** Pretty tensor names the way the seeds print them: "W0" -> "W₀", "a_1" -> "a₁". */
export function prettyName(name) {
  if (!name) return "";
  const m = /^([A-Za-z]+)_?([0-9]+)$/.exec(name);
  return m ? m[1] + subscript(m[2]) : name;
}

/** The label / sublabel a node is drawn with. */
export function nodeLabels(node) {
  if (node.kind === "tensor") {
    return { label: prettyName(node.label), sublabel: formatShape(node.shape || []) };
  }
  const tensor = node.tensor ? prettyName(node.tensor) : "";
  const shape = node.shape ? formatShape(node.shape) : "";
  return { label: node.op || node.label, sublabel: [tensor, shape].filter(Boolean).join(" ") };
}

function nodeSize(kind, label, sublabel, op) {
  const font = kind === "op" ? "opLabel" : "label";
  const w = Math.ceil(Math.max(textWidth(label, font), textWidth(sublabel, "sublabel"))) + 30; // room for the ✓ in the corner
  if (kind === "tensor") return { width: Math.max(56, w), height: sublabel ? 32 : 26 };
  if (kind === "module") return { width: Math.max(110, w), height: 36 };
  return { width: Math.max(64, w), height: sublabel ? 30 : 24 };
}

export { defaultCollapsed };

/** Map each visible trace node to what is drawn for it: itself or its collapsed box `m:<key>`. */
function representatives(nodes, keyOf) {
  const rep = new Map();
  for (const n of nodes) {
    const key = keyOf(n.module);
    rep.set(n.id, key ? `m:${key}` : n.id);
  }
  return rep;
}

/** Data-flow edges between drawn things; edges through hidden inserted nodes are bridged. */
function visibleEdges(trace, hiddenIds, rep) {
  const out = new Map();
  for (const e of trace.graph.edges) {
    if (!out.has(e.source)) out.set(e.source, []);
    out.get(e.source).push(e);
  }
  const result = [];
  const seen = new Set();
  for (const e of trace.graph.edges) {
    if (hiddenIds.has(e.source)) continue;
    // Follow the edge through hidden (inserted) nodes to the real consumers.
    const targets = hiddenIds.has(e.target) ? [] : [e.target];
    const stack = targets.length ? [] : [e.target];
    const visited = new Set();
    while (stack.length) {
      const t = stack.pop();
      if (visited.has(t)) continue;
      visited.add(t);
      if (hiddenIds.has(t)) for (const next of out.get(t) || []) stack.push(next.target);
      else targets.push(t);
    }
    targets.forEach((t, k) => {
      const source = rep.get(e.source);
      const target = rep.get(t);
      if (!source || !target || source === target) return;
      const key = `${source}>${target}`;
      if (seen.has(key)) return;
      seen.add(key);
      result.push({ id: k === 0 ? e.id : `${e.id}~${k}`, source, target, kind: e.kind || "data" });
    });
  }
  return result;
}

/**
 * The module box each node sits in, per ancestor path: a module called more than once (shared
 * weights) gets one box per call, "f#0", "f#1", so data between the calls flows downwards.
 */
function boxesOfCalls(trace) {
  const starts = new Map(); // path -> seqs of its module_forward_pre events
  for (const ev of trace.events) {
    if (ev.kind !== "module_forward_pre" || ev.module === null || ev.module === undefined) continue;
    if (!starts.has(ev.module)) starts.set(ev.module, []);
    starts.get(ev.module).push(ev.seq);
  }
  const calls = (path) => (starts.get(path) || []).length;
  /** [{id, path, call}] from outermost to innermost for one node. */
  return (node) =>
    ancestry(node.module).map((path) => {
      const seqs = starts.get(path) || [];
      if (seqs.length < 2) return { id: path, path, call: 0, calls: 1 };
      const created = node.created_seq ?? 0;
      const call = Math.max(0, seqs.filter((s) => s <= created).length - 1);
      return { id: `${path}#${call}`, path, call, calls: calls(path) };
    });
}

function groupTitle(path, type, call, calls) {
  const base = type ? `${path} · ${type}` : path;
  return calls > 1 ? `${base} (call ${call + 1} of ${calls})` : base;
}

/** The shape of what a collapsed box hands on: its last-made node with an edge leaving the box. */
function outputShape(trace, byId, members) {
  const inside = new Set(members);
  let last = null;
  for (const e of trace.graph.edges) {
    if (!inside.has(e.source) || inside.has(e.target)) continue;
    const n = byId.get(e.source);
    if (n && Array.isArray(n.shape) && (!last || (n.created_seq ?? 0) > (last.created_seq ?? 0))) last = n;
  }
  return last ? last.shape : null;
}

/** Build the ELK graph (compound nodes for module boxes) and a lookup of what each id is. */
function buildElkGraph(trace, { collapsed, showInserted }) {
  const hiddenIds = new Set(showInserted ? [] : trace.graph.nodes.filter((n) => n.inserted).map((n) => n.id));
  const nodes = trace.graph.nodes.filter((n) => !hiddenIds.has(n.id));
  const folds = collapsed.size ? repeatedBlocks(trace) : []; // finding the folds is not free (2,000 nodes: ~40 ms)
  const foldById = new Map(folds.map((f) => [f.id, f]));
  const keyOf = collapseKeys(collapsed, folds);
  const rep = representatives(nodes, keyOf);
  const modules = new Map((trace.graph.modules || []).map((m) => [m.path, m]));
  const chainOf = boxesOfCalls(trace);

  // Which module boxes are drawn: every non-root ancestor of a drawn node, down to a collapsed one.
  const groups = new Map(); // box id -> {path, call, calls, parent}
  const collapsedCounts = new Map();
  const boxOfNode = new Map(); // node id -> innermost drawn box id
  for (const n of nodes) {
    let parent = null;
    const key = keyOf(n.module);
    if (key) collapsedCounts.set(key, (collapsedCounts.get(key) || []).concat(n.id));
    for (const box of chainOf(n)) {
      if (key && (box.path === key || foldById.get(key)?.paths.includes(box.path))) break;
      if (!groups.has(box.id)) groups.set(box.id, { ...box, parent });
      parent = box.id;
    }
    boxOfNode.set(n.id, parent);
  }

  const elkNodes = new Map(); // id -> elk node
  const info = new Map(); // id -> layout node / group fields
  const root = { id: "root", children: [], edges: [] };
  const container = (boxId) => (boxId ? elkNodes.get(`g:${boxId}`) : root);
  const depths = new Map(); // box id -> boxes around it (counted up the parents: no recursion)
  for (const id of groups.keys()) {
    let d = 0;
    for (let p = groups.get(id).parent; p; p = groups.get(p).parent) d++;
    depths.set(id, d);
  }
  const depth = (id) => depths.get(id);
  const sortedGroups = [...groups.keys()].sort((a, b) => depth(a) - depth(b) || a.localeCompare(b));
  for (const id of sortedGroups) {
    const g = groups.get(id);
    // Spacing is per compound node in ELK: a box's insides get the same room as the root
    // (a gradient chip needs the gap between two layers).
    const elk = { id: `g:${id}`, children: [], layoutOptions: { ...SPACING, "elk.padding": GROUP_PADDING } };
    elkNodes.set(elk.id, elk);
    container(g.parent).children.push(elk);
    const type = modules.get(g.path)?.type || "";
    info.set(elk.id, { id, path: g.path, label: g.path, type, title: groupTitle(g.path, type, g.call, g.calls), depth: depth(id) });
  }
  const byId = new Map(trace.graph.nodes.map((n) => [n.id, n]));
  for (const [key, members] of collapsedCounts) {
    const id = `m:${key}`;
    const fold = foldById.get(key);
    const label = fold ? `${fold.paths[0]} … ${fold.paths[fold.paths.length - 1]}` : key;
    const what = fold ? `${fold.period > 1 ? `(${fold.types.join(", ")})` : fold.types[0]} ×${fold.count}` : modules.get(key)?.type || "module";
    const out = outputShape(trace, byId, members);
    const sublabel = `${what}${out ? ` → ${formatShape(out)}` : ""} · ${members.length} node${members.length === 1 ? "" : "s"}`;
    const elk = { id, ...nodeSize("module", label, sublabel) };
    elkNodes.set(id, elk);
    // Inside the box of the collapsed module's parent (its first call's, when the parent repeats).
    const parentPath = fold ? fold.parent : key.includes(".") ? key.slice(0, key.lastIndexOf(".")) : "";
    const first = nodes.find((n) => n.id === members[0]);
    const parentBox = first ? chainOf(first).find((b) => b.path === parentPath) : null;
    container(parentBox && groups.has(parentBox.id) ? parentBox.id : null).children.push(elk);
    info.set(id, { id, kind: "module", role: null, op: null, label, sublabel, inserted: false, module: key, members, fold: fold ? fold.count : 0 });
  }
  for (const n of nodes) {
    if (rep.get(n.id) !== n.id) continue;
    const { label, sublabel } = nodeLabels(n);
    const elk = { id: n.id, ...nodeSize(n.kind, label, sublabel, n.op) };
    elkNodes.set(n.id, elk);
    container(boxOfNode.get(n.id)).children.push(elk);
    info.set(n.id, { id: n.id, kind: n.kind, role: n.role ?? null, op: n.op ?? null, label, sublabel, inserted: Boolean(n.inserted), module: n.module ?? null });
  }
  const edges = visibleEdges(trace, hiddenIds, rep);
  root.edges = edges.map((e) => ({ id: e.id, sources: [e.source], targets: [e.target] }));
  return { root, info, edges };
}

// The vertical budget of a first sight: a layer gap is exactly a gradient chip (CHIP_HEIGHT 18)
// and its 3 px margins, so an edge's chip sits between two layers without touching either.
const SPACING = {
  "elk.spacing.nodeNode": "24",
  "elk.layered.spacing.nodeNodeBetweenLayers": "24",
  "elk.spacing.edgeNode": "12",
  "elk.layered.spacing.edgeNodeBetweenLayers": "10",
};

/** The picture and every module box's insides: layered, top to bottom, orthogonally routed edges. */
const LAYERED = {
  "elk.algorithm": "layered",
  "elk.direction": "DOWN",
  "elk.edgeRouting": "ORTHOGONAL",
  "elk.layered.thoroughness": "1",
};
const ROOT_BOX = { ...SPACING, "elk.padding": "[top=16,left=16,bottom=16,right=16]" };

/** Small graphs: ELK lays out the whole hierarchy at once (an edge leaves a box where it is shortest). */
export const LAYOUT_OPTIONS = {
  ...LAYERED,
  "elk.hierarchyHandling": "INCLUDE_CHILDREN",
  ...ROOT_BOX,
  "elk.json.shapeCoords": "ROOT",
  "elk.json.edgeCoords": "ROOT",
};
// Above this many drawn nodes, box by box (boxlayout.js): the whole hierarchy costs ELK about a
// millisecond a node; box by box, equal boxes are laid out once and a top level that is one
// chain is stacked without ELK (a 2,000-node stack of blocks: ~1 s of CPU -> under 0.1 s).
export const WHOLE_HIERARCHY_UP_TO = 120;
/** Which way data flows in the picture: top to bottom (the viewer's) or left to right. */
export const DIRECTIONS = ["DOWN", "RIGHT"];
// Where boxes sit in a box (or the root), each is placed under the one it reads from: ELK's
// default placement keeps the edge between two boxes straight, and as a box's exit and entry
// are rarely in line, a deep model became a staircase running off to the right.
const STACKING = { "elk.layered.nodePlacement.strategy": "LINEAR_SEGMENTS" };

/** Every box and node under `root`, depth first in ELK's order (walkTree: a model nested
 * thousands deep does not run out of call stack). */
function collect(root, info, out) {
  walkTree(root, (c, _, depth) => {
    const base = info.get(c.id);
    const box = { x: c.x, y: c.y, width: c.width, height: c.height };
    if (c.id.startsWith("g:")) out.groups.push({ id: base.id, path: base.path, label: base.label, type: base.type, title: base.title, ...box, depth, collapsed: false });
    else {
      out.nodes.push({ ...base, ...box });
      if (base.kind === "module") out.groups.push({ id: base.id, path: base.module, label: base.label, title: base.label, ...box, depth, collapsed: true });
    }
  });
}

/**
 * Lay the trace's graph out: module boxes, nodes, routed edges, in absolute coordinates.
 * `wholeUpTo`: the most drawn nodes laid out as one hierarchy (more: box by box). `nextTask(done)`
 * (the page's): awaited between the stages, told what is done, so a graph of 50,000 nodes is laid
 * out in several tasks, not one of seconds.
 */
export async function layoutGraph(trace, { elk, collapsed = new Set(), showInserted = true, wholeUpTo = WHOLE_HIERARCHY_UP_TO, direction = "DOWN", nextTask = null } = {}) {
  if (!DIRECTIONS.includes(direction)) throw new RangeError(`direction must be one of ${DIRECTIONS.join(", ")} (got ${direction})`);
  const { root, info, edges } = buildElkGraph(trace, { collapsed, showInserted });
  if (nextTask) await nextTask("the graph to draw is built");
  let drawn = 0;
  for (const id of info.keys()) drawn += id.startsWith("g:") ? 0 : 1;
  // Box by box is top to bottom only (ports on the boxes' bottoms and tops, stacked chains):
  // left to right, ELK lays out the whole hierarchy (a static picture's few hundred boxes).
  const result =
    drawn <= wholeUpTo || direction !== "DOWN"
      ? await elk.layout({ ...root, layoutOptions: { ...LAYOUT_OPTIONS, "elk.direction": direction } })
      : await layoutByBoxes(elk, { ...root, layoutOptions: ROOT_BOX }, { options: LAYERED, stacking: STACKING, nextTask });
  if (nextTask) await nextTask("every box is placed");
  const out = { width: result.width, height: result.height, nodes: [], edges: [], groups: [] };
  collect(result, info, out);
  if (nextTask) await nextTask("the boxes are collected");
  const routed = new Map();
  const gather = (n) => {
    for (const e of n.edges || []) routed.set(e.id, e);
  };
  gather(result);
  walkTree(result, gather);
  for (const e of edges) {
    const r = routed.get(e.id);
    const s = r && r.sections && r.sections[0];
    const points = s ? [s.startPoint, ...(s.bendPoints || []), s.endPoint].map((p) => ({ x: p.x, y: p.y })) : [];
    out.edges.push({ ...e, points });
  }
  return out;
}
