// The one scene renderer: (layout, trace) -> a tree of SVG element descriptions, and
// (scene, frame) -> the look of every element that changes from step to step. The live view
// turns the tree into DOM once and applies looks per step (render.js); every export turns the
// same tree, with a frame's looks applied, into SVG text (export/svg.js). Pure: no DOM, no clock.

import { ancestry } from "./fold.js";
import { CHIP_HEIGHT, chipWidth, textWidth } from "./metrics.js";
import { edgeChipLook, hookActionText, leafChipLook, placeChips, valueChipText } from "./chips.js";

const RANK = { hidden: 0, shown: 1, done: 2, active: 3 };
const BADGE_H = 16;

/** One element description: tag, attributes, children (descriptions or text). */
export function el(t, a = {}, ...c) {
  return { t, a, c: c.flat().filter((x) => x !== null && x !== undefined && x !== false && x !== "") };
}

/** A keyed element: one whose look (data-state, chip text) changes per frame. */
function keyed(key, kind, box, node) {
  return { ...node, key, kind, box };
}

const at = (x, y) => `translate(${round(x)},${round(y)})`;
const round = (x) => Math.round(x * 10) / 10;

export function pathOf(points) {
  return points.map((p, i) => `${i ? "L" : "M"}${round(p.x)},${round(p.y)}`).join(" ");
}

function pathLength(points) {
  let total = 0;
  for (let i = 1; i < points.length; i++) total += Math.hypot(points[i].x - points[i - 1].x, points[i].y - points[i - 1].y);
  return total;
}

function boxOfPoints(points) {
  const xs = points.map((p) => p.x);
  const ys = points.map((p) => p.y);
  const x = Math.min(...xs);
  const y = Math.min(...ys);
  return { x, y, width: Math.max(...xs) - x, height: Math.max(...ys) - y };
}

/** <defs>: arrowheads (gray, coral) and the hatch for instrumentation-inserted nodes. */
export function defs() {
  const arrow = (id, cls) =>
    el("marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 9, markerHeight: 9, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" }, el("path", { d: "M0,0 L10,5 L0,10 z", class: cls }));
  const hatch = el("pattern", { id: "gt-hatch", width: 8, height: 8, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" }, el("rect", { width: 8, height: 8, fill: "var(--gt-op)" }), el("line", { x1: 0, y1: 0, x2: 0, y2: 8, class: "gt-hatch-line" }));
  return el("defs", {}, arrow("gt-arrow", "gt-arrow-head"), arrow("gt-arrow-grad", "gt-arrow-head gt-arrow-head--grad"), hatch);
}

/** Node classes: kind, tensor role, inserted by instrumentation. */
export function nodeClass(n) {
  const cls = ["gt-node", `gt-node--${n.kind}`];
  if (n.role) cls.push(`gt-role-${n.role}`);
  if (n.inserted) cls.push("gt-inserted");
  return cls.join(" ");
}

function nodeTitle(n) {
  return n.inserted ? `${n.label} — inserted by instrumentation (full backward hook)` : `${n.label} ${n.sublabel || ""}`.trim();
}

/** One node: box, label, sublabel (shape), the ✓ of a finished backward step. */
function drawNode(n) {
  const attrs = n.kind === "module" ? { "data-node-id": n.id, "data-module": n.module } : { "data-node-id": n.id };
  const two = Boolean(n.sublabel);
  const cy = n.height / 2;
  return el(
    "g",
    { class: nodeClass(n), ...attrs, "data-state": "hidden", transform: at(n.x, n.y), tabindex: 0, role: "button", "aria-label": nodeTitle(n) },
    el("title", {}, nodeTitle(n)),
    el("rect", { width: n.width, height: n.height, rx: n.kind === "tensor" ? 8 : n.kind === "module" ? 10 : 4 }),
    el("text", { x: n.width / 2, y: two ? cy - 7 : cy + 0.5 }, n.label),
    two ? el("text", { class: "gt-sublabel", x: n.width / 2, y: cy + 8 }, n.sublabel) : null,
    el("text", { class: "gt-done-mark", x: n.width - 7, y: 8 }, "✓"),
  );
}

/** A hook badge: forward hooks at the box's top-left corner (they see a), backward at the right (δ). */
function badgeText(hk) {
  return /backward/.test(hk.type) ? `${hk.type.replace("full_", "")} δ` : `${hk.type} a`;
}

function drawGroup(g, hooks) {
  const key = `g:${g.id}`;
  const box = { x: g.x, y: g.y, width: g.width, height: g.height };
  const group = keyed(key, "state", box, el("g", { class: "gt-group", "data-module": g.path, "data-state": "hidden", transform: at(g.x, g.y) }, el("rect", { width: g.width, height: g.height, rx: 10 }), el("text", { class: "gt-group-title", x: 10, y: 18 }, g.title)));
  const badges = [];
  let left = 8;
  let right = g.width - 8;
  for (const hk of hooks) {
    const backward = /backward/.test(hk.type);
    const text = badgeText(hk);
    const w = Math.ceil(textWidth(text, "badge")) + 12;
    const x = backward ? (right -= w + 4) + 4 : (left += w + 4) - w - 4;
    const title = `${hk.type} hook #${hk.index}${hk.action ? ": " + JSON.stringify(hk.action) : ""}`;
    badges.push(keyed(`b:${g.id}:${hk.index}`, "state", { x: g.x + x, y: g.y - BADGE_H / 2, width: w, height: BADGE_H }, el("g", { class: "gt-badge", "data-hook": hk.index, "data-kind": backward ? "backward" : "forward", "data-state": "hidden", transform: at(g.x + x, g.y - BADGE_H / 2) }, el("title", {}, title), el("rect", { width: w, height: BADGE_H, rx: 8 }), el("text", { x: w / 2, y: BADGE_H / 2 + 0.5 }, text))));
  }
  return { group, badges };
}

/** A chip centred at (x, y); its text, width and title come with each frame's look. */
function drawChip(key, cls, spot, attrs = {}) {
  const w = spot.width || chipWidth("0.0000");
  return keyed(key, "chip", { x: spot.x - w / 2, y: spot.y - CHIP_HEIGHT / 2, width: w, height: CHIP_HEIGHT }, el("g", { class: `${cls} gt-chip`, "data-state": "hidden", transform: at(spot.x, spot.y), ...attrs }, el("rect", { height: CHIP_HEIGHT, y: -CHIP_HEIGHT / 2, rx: 4, width: w, x: -w / 2 }), el("text", { y: 0.5 }, "")));
}

/** Layout node id -> the trace node ids it stands for (a collapsed module stands for many). */
export function membersOf(trace, layout) {
  const members = new Map();
  for (const n of layout.nodes) {
    if (!n.id.startsWith("m:")) members.set(n.id, [n.id]);
    else if (n.members) members.set(n.id, n.members);
    else {
      const path = n.id.slice(2);
      members.set(n.id, trace.graph.nodes.filter((t) => t.module === path || (t.module || "").startsWith(`${path}.`)).map((t) => t.id));
    }
  }
  return members;
}

/** The state of a layout node: its own, or for a module stand-in the liveliest member's. */
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
  return best === "done" && !allDone ? "shown" : best;
}

// Looks with a state alone, one object per state (looks are read, never changed).
const STATE_LOOKS = new Map();
const stateLook = (state) => STATE_LOOKS.get(state) || (STATE_LOOKS.set(state, Object.freeze({ state })), STATE_LOOKS.get(state));
const HIDDEN = stateLook("hidden");

/** A layout edge's trace id ("e3~1" was bridged from "e3"). */
export function traceEdgeId(layoutEdgeId) {
  const k = layoutEdgeId.indexOf("~");
  return k < 0 ? layoutEdgeId : layoutEdgeId.slice(0, k);
}

/**
 * Which trace nodes keep a gradient after backward(): leaves that require grad, tensors with
 * retain_grad(), and any node a .grad write targets. A gradient edge into one of them is drawn
 * solid ("stored"); one that only passes through is dashed.
 */
export function storesGrad(trace) {
  const out = new Set();
  for (const n of trace.graph.nodes) if (n.role === "parameter" || n.retains_grad || n.op === "AccumulateGrad") out.add(n.id);
  for (const ev of trace.events) if (ev.kind === "grad_write" && ev.node) out.add(ev.node);
  return out;
}

/** Which nodes get a .grad chip: every node a .grad write targets (leaves and retained tensors). */
function gradHolders(trace) {
  const out = new Set();
  for (const ev of trace.events) if (ev.kind === "grad_write" && ev.node) out.add(ev.node);
  for (const n of trace.graph.nodes) if (n.kind === "tensor" && n.role === "parameter") out.add(n.id);
  return out;
}

/** The module boxes' time: a box opens when its forward starts (or its first node appears). */
function groupOpenings(trace, layout) {
  const inside = (mod, path) => mod === path || (mod || "").startsWith(path + ".");
  // Per module path, over everything inside it: its first node's creation, its first forward
  // start (one pass over nodes and events, not one per box: 570 boxes x 8,000 events was slow).
  const created = new Map(trace.graph.nodes.map((n) => [n.id, n.created_seq ?? 0]));
  const firstNode = new Map();
  for (const n of trace.graph.nodes) for (const p of ancestry(n.module)) firstNode.set(p, Math.min(firstNode.get(p) ?? Infinity, n.created_seq ?? 0));
  const firstStart = new Map();
  for (const ev of trace.events) if (ev.kind === "module_forward_pre") for (const p of ancestry(ev.module)) if (!firstStart.has(p)) firstStart.set(p, ev.seq);
  const out = new Map();
  for (const g of layout.groups) {
    if (g.collapsed) continue;
    // (a loop, not Math.min(...members): a box of 50,000 members is too many arguments for a call)
    const first = g.members ? g.members.reduce((m, id) => Math.min(m, created.get(id) ?? Infinity), Infinity) : (firstNode.get(g.path) ?? Infinity);
    const start = firstStart.get(g.path);
    out.set(g.id, { path: g.path, opens: start !== undefined && start <= first ? start : first, inside });
  }
  return out;
}

/**
 * The scene of a layout: {width, height, defs, layers: {groups, edges, nodes, chips}, looks(frame),
 * boxOf(traceNodeId)}. Every element that changes per frame is keyed; `looks` gives their looks.
 */
export function buildScene(layout, trace) {
  const steps = sceneSteps(layout, trace);
  let step = steps.next();
  while (!step.done) step = steps.next();
  return step.value;
}

/** buildScene in tasks of about `sliceMs` (`nextTask` between them): a 50,000-node scene is
 * seconds of work, and the page keeps painting and answering meanwhile. `spots`: the chips'
 * spots when placed already (placeChipsInSlices). */
export async function buildSceneInSlices(layout, trace, { nextTask, sliceMs = 100, spots = null }) {
  const steps = sceneSteps(layout, trace, spots);
  for (let until = performance.now() + sliceMs; ; ) {
    const step = steps.next();
    if (step.done) return step.value;
    if (performance.now() < until) continue;
    await nextTask();
    until = performance.now() + sliceMs;
  }
}

/** Yields every this many drawn things (a step of sceneSteps). */
const STEP = 2000;

/** The scene, built a step at a time (a generator: its return value is the scene). */
function* sceneSteps(layout, trace, placed = null) {
  const members = membersOf(trace, layout);
  const spots = placed || placeChips(layout, trace);
  yield;
  const hooksByModule = new Map((trace.graph.modules || []).map((m) => [m.path, m.hooks || []]));
  const stored = storesGrad(trace);
  const holders = gradHolders(trace);
  yield;
  const openings = groupOpenings(trace, layout);
  yield;
  const layers = { groups: [], edges: [], nodes: [], chips: [] };
  const boxes = new Map();
  for (const n of layout.nodes) for (const id of members.get(n.id) || []) boxes.set(id, n);

  for (const g of layout.groups) {
    if (g.collapsed) continue;
    const { group, badges } = drawGroup(g, hooksByModule.get(g.path) || []);
    layers.groups.push(group, ...badges);
  }
  const edgeChips = new Map();
  const fanOut = new Map();
  for (const e of layout.edges) if (e.kind !== "no_grad") fanOut.set(e.source, (fanOut.get(e.source) || 0) + 1);
  let made = 0;
  for (const e of layout.edges) {
    if (++made % STEP === 0) yield;
    if (!e.points || e.points.length < 2) continue;
    const storedHere = stored.has(e.source);
    const flow = e.kind === "no_grad" ? "" : storedHere ? " gt-edge--stored" : " gt-edge--transient";
    const parts = [el("path", { d: pathOf(e.points) })];
    // The pulse: one short dash running from the consumer back to the producer while the
    // gradient travels (graph.css animates it; reduced motion hides it).
    if (e.kind !== "no_grad") parts.push(el("path", { class: "gt-pulse", d: pathOf(e.points), style: `--len:${round(pathLength(e.points))}` }));
    layers.edges.push(keyed(`e:${e.id}`, "state", boxOfPoints(e.points), el("g", { class: `gt-edge gt-edge--${e.kind}${flow}`, "data-edge-id": e.id, "data-source": e.source, "data-target": e.target, "data-state": "hidden" }, parts)));
    const spot = spots.edge.get(e.id);
    if (e.kind !== "no_grad" && spot) {
      layers.chips.push(drawChip(`c:${e.id}`, "gt-grad gt-grad--edge", spot, { "data-edge-id": e.id, "data-beside": spot.beside ? "" : null }));
      edgeChips.set(e.id, spot);
    }
  }
  for (const n of layout.nodes) {
    if (++made % STEP === 0) yield;
    layers.nodes.push(keyed(`n:${n.id}`, "state", n, drawNode(n)));
    if (n.kind === "module") continue;
    const v = spots.value.get(n.id);
    if (v) layers.chips.push(drawChip(`v:${n.id}`, "gt-value", v, { "data-value": n.id }));
    const leaf = spots.leaf.get(n.id);
    if (holders.has(n.id) && leaf) layers.chips.push(drawChip(`l:${n.id}`, "gt-grad gt-grad--leaf", leaf, { "data-leaf": n.id }));
    // The "+=" badge: only where gradients can meet (a node feeding several) or .grad accumulates.
    // It sits on the box's top edge, above it: lower, it covered the label (AccumulateGrad's).
    if ((fanOut.get(n.id) || 0) > 1 || holders.has(n.id) || n.op === "AccumulateGrad") {
      const w = chipWidth("+= ×9");
      layers.chips.push(drawChip(`f:${n.id}`, "gt-grad gt-grad--accumulate", { x: n.x + 4 + w / 2, y: n.y - CHIP_HEIGHT / 2 + 1, width: w }, { "data-fanin": n.id }));
    }
  }
  const hookChip = keyed("h", "chip", null, el("g", { class: "gt-grad gt-grad--hook gt-chip", "data-hook-chip": "", "data-state": "hidden" }, el("rect", { height: CHIP_HEIGHT, y: -CHIP_HEIGHT / 2, rx: 4 }), el("text", { y: 0.5 }, "")));
  layers.chips.push(hookChip);

  // The picture's extent: chips hang beside nodes and must not be clipped.
  let width = layout.width;
  let height = layout.height;
  for (const c of [...layers.chips, ...layers.groups]) {
    if (c.key === "h") continue;
    width = Math.max(width, c.box.x + c.box.width + 8);
    height = Math.max(height, c.box.y + c.box.height + 8);
  }
  yield;
  const valueText = new Map(trace.graph.nodes.map((n) => [n.id, valueChipText(n.value)]));
  yield;
  const tracesEdges = new Map(trace.graph.edges.map((e) => [e.id, e]));
  // What looks() visits on every frame while playing, with its keys and fixed facts made once.
  const nodeLooks = layout.nodes.map((n) => ({
    n,
    ids: members.get(n.id) || [n.id],
    keys: { n: `n:${n.id}`, v: `v:${n.id}`, l: `l:${n.id}`, f: `f:${n.id}` },
    value: valueText.get(n.id) ? { shown: { state: "shown", text: valueText.get(n.id), title: "forward value" }, hidden: { state: "hidden", text: valueText.get(n.id), title: "forward value" } } : null,
    badge: fanOut.get(n.id) > 1 || holders.has(n.id) || n.op === "AccumulateGrad",
  }));
  yield;
  const edgeLooks = layout.edges.map((e) => ({ keys: { e: `e:${e.id}`, c: `c:${e.id}` }, traceId: traceEdgeId(e.id), spot: edgeChips.get(e.id), traced: tracesEdges.has(traceEdgeId(e.id)) }));

  /** key -> {state, text?, title?, at?} for one frame (a look with a state alone is one shared
   * object per state: a 50,000-node frame makes no 200,000 small ones). */
  function looks(frame) {
    const out = new Map();
    const mod = frame?.event ? frame.event.module : null;
    for (const g of layout.groups) {
      const o = openings.get(g.id);
      if (!o) continue;
      const state = !frame || frame.step < o.opens ? "hidden" : mod !== null && mod !== undefined && o.inside(mod, o.path) ? "active" : "shown";
      out.set(`g:${g.id}`, stateLook(state));
      const hooks = hooksByModule.get(g.path) || [];
      for (const hk of hooks) {
        const fired = frame?.event && frame.event.hook !== null && frame.event.hook !== undefined && String(frame.event.hook) === String(hk.index);
        out.set(`b:${g.id}:${hk.index}`, stateLook(state === "hidden" ? "hidden" : fired ? "fired" : "shown"));
      }
    }
    for (const { n, ids, keys, value, badge } of nodeLooks) {
      const state = nodeState(frame, ids);
      out.set(keys.n, stateLook(state));
      if (n.kind === "module") continue;
      if (value) out.set(keys.v, state === "hidden" ? value.hidden : value.shown);
      const g = frame?.leafGrads.get(n.id);
      out.set(keys.l, g && state !== "hidden" ? { state: "shown", ...leafChipLook(g) } : HIDDEN);
      const count = frame?.fanIn.get(n.id);
      const acc = frame?.accumulated && frame.node === n.id;
      if (count || acc || badge) out.set(keys.f, count || acc ? { state: "shown", text: count ? `+= ×${count}` : "+=", title: count ? `${count} gradients summed here` : ".grad accumulated (+=)" } : HIDDEN);
    }
    for (const { keys, traceId, spot, traced } of edgeLooks) {
      const es = frame ? frame.edgeStates.get(traceId) || { state: "shown", grad: null } : { state: "hidden", grad: null };
      out.set(keys.e, stateLook(es.state));
      if (!spot) continue;
      const visible = (es.state === "active" || es.state === "done") && es.grad !== null && traced;
      out.set(keys.c, visible ? { state: es.state, ...edgeChipLook(spot, es.grad) } : HIDDEN);
    }
    out.set("h", hookLook(frame));
    return out;
  }

  /** A user hook's action, shown beside the node it acted at, for that one step. */
  function hookLook(frame) {
    const ev = frame?.event || {};
    const box = ev.kind === "hook_action" ? boxes.get(frame.about) : null;
    if (!box) return { state: "hidden" };
    const text = hookActionText(ev);
    const w = chipWidth(text);
    return { state: "active", text, title: `hook #${ev.hook} ${JSON.stringify(ev.payload?.action || {})}`, at: { x: box.x + box.width + 8 + w / 2, y: box.y + box.height / 2 } };
  }

  return { width: Math.ceil(width), height: Math.ceil(height), defs: defs(), layers, looks, boxOf: (id) => (id && boxes.get(id)) || null };
}

/** A chip's rect geometry for its text (the live view and the exports size chips the same way). */
export function chipRect(text) {
  const w = chipWidth(text);
  return { width: w, x: -w / 2 };
}

/** An element with its look applied (for exports; render.js applies looks to the DOM likewise). */
export function withLook(node, look) {
  if (!look) return node;
  const a = { ...node.a, "data-state": look.state };
  if (look.at) a.transform = at(look.at.x, look.at.y);
  if (node.kind !== "chip" || look.text === undefined) return { ...node, a };
  const [rect, text] = node.c;
  return { ...node, a, c: [{ ...rect, a: { ...rect.a, ...chipRect(look.text) } }, { ...text, c: [look.text] }, el("title", {}, look.title || "")] };
}

