// SVG only: draw(layout) builds the elements once per layout; paint(frame) only flips
// data-state attributes and chip texts (transitions live in graph.css). No fetch, no clock.

import { svgEl } from "./dom.js";
import { formatTensorChip, formatNumber, hasNonFinite, tensorNumbers } from "./format.js";

const CHIP_CHAR = 6.6;

function defs() {
  const arrow = (id, cls) =>
    svgEl("marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, [
      svgEl("path", { d: "M0,0 L10,5 L0,10 z", class: cls }),
    ]);
  const hatch = svgEl("pattern", { id: "gt-hatch", width: 8, height: 8, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" }, [
    svgEl("rect", { width: 8, height: 8, fill: "var(--gt-op)" }),
    svgEl("line", { x1: 0, y1: 0, x2: 0, y2: 8, class: "gt-hatch-line" }),
  ]);
  return svgEl("defs", {}, [arrow("gt-arrow", "gt-arrow-head"), arrow("gt-arrow-grad", "gt-arrow-head gt-arrow-head--grad"), hatch]);
}

function pathOf(points) {
  return points.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");
}

/** The point halfway along a polyline (where the gradient chip lands). */
export function midpoint(points) {
  if (points.length < 2) return points[0] || { x: 0, y: 0 };
  const seg = [];
  let total = 0;
  for (let i = 1; i < points.length; i++) {
    const d = Math.hypot(points[i].x - points[i - 1].x, points[i].y - points[i - 1].y);
    seg.push(d);
    total += d;
  }
  let left = total / 2;
  for (let i = 1; i < points.length; i++) {
    if (left <= seg[i - 1]) {
      const t = seg[i - 1] ? left / seg[i - 1] : 0;
      return { x: points[i - 1].x + t * (points[i].x - points[i - 1].x), y: points[i - 1].y + t * (points[i].y - points[i - 1].y) };
    }
    left -= seg[i - 1];
  }
  return points[points.length - 1];
}

/** Where an edge's gradient chip sits: on the source-side leg (edges merging into one target
 *  share their last legs, so midpoints would pile up there), else halfway along. */
export function chipPoint(points) {
  if (points.length >= 3) {
    const [a, b] = points;
    const len = Math.hypot(b.x - a.x, b.y - a.y);
    if (len >= 18) return { x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 };
    // A short first leg: use the longest leg, whose middle differs between merging edges.
    let best = 1;
    for (let i = 2; i < points.length; i++) {
      const d = (k) => Math.hypot(points[k].x - points[k - 1].x, points[k].y - points[k - 1].y);
      if (d(i) > d(best)) best = i;
    }
    const p = points[best - 1];
    const q = points[best];
    return { x: (p.x + q.x) / 2, y: (p.y + q.y) / 2 };
  }
  return midpoint(points);
}

function chip(cls, attrs) {
  const g = svgEl("g", { class: `gt-grad ${cls}`, "data-state": "hidden", ...attrs });
  g.append(svgEl("rect", { height: 16, y: -8, rx: 4 }), svgEl("text", { y: 0.5 }));
  return g;
}

function setChip(g, text, title) {
  const t = g.lastChild;
  if (t.textContent !== text) {
    t.textContent = text;
    const w = Math.ceil(text.length * CHIP_CHAR) + 10;
    const rect = g.firstChild;
    rect.setAttribute("width", w);
    rect.setAttribute("x", -w / 2);
  }
  let tt = g.querySelector("title");
  if (!tt) g.append((tt = svgEl("title")));
  tt.textContent = title;
}

function tensorTitle(tv) {
  if (!tv) return "no gradient (None)";
  const nums = tensorNumbers(tv);
  const flag = hasNonFinite(tv) ? " ⚠ contains NaN/inf" : "";
  if (nums && nums.length <= 8) return `[${nums.join(", ")}]${flag}`;
  return `shape (${tv.shape.join(", ")}) norm ${formatNumber(tv.stats?.norm)}${flag}`;
}

function drawGroup(g, hooksByModule) {
  const el = svgEl("g", { class: "gt-group", "data-module": g.path, transform: `translate(${g.x},${g.y})` });
  el.append(svgEl("rect", { width: g.width, height: g.height, rx: 10 }));
  el.append(svgEl("text", { class: "gt-group-title", x: 10, y: 16 }, [g.type ? `${g.label} · ${g.type}` : g.label]));
  // Hook badges sit on the top border, clear of the nodes inside: forward hooks at the left
  // corner (they see a, the input), backward hooks at the right corner (they see δ).
  const hooks = hooksByModule.get(g.path) || [];
  let left = 8;
  let right = g.width - 8;
  hooks.forEach((hk) => {
    const backward = /backward/.test(hk.type);
    const text = backward ? `${hk.type.replace("full_", "")} δ` : `${hk.type} a`;
    const w = text.length * 6 + 10;
    const x = backward ? (right -= w + 4) + 4 : ((left += w + 4) - w - 4);
    const badge = svgEl("g", { class: "gt-badge", "data-hook": hk.index, "data-kind": backward ? "backward" : "forward", transform: `translate(${x},-8)` });
    badge.append(svgEl("rect", { width: w, height: 16, rx: 8 }), svgEl("text", { x: w / 2, y: 8.5 }, [text]), svgEl("title", {}, [`${hk.type} hook #${hk.index}${hk.action ? ": " + JSON.stringify(hk.action) : ""}`]));
    el.append(badge);
  });
  return el;
}

function drawNode(n) {
  const classes = ["gt-node", `gt-node--${n.kind}`];
  if (n.role) classes.push(`gt-role-${n.role}`);
  if (n.inserted) classes.push("gt-inserted");
  const attrs = n.kind === "module" ? { "data-module": n.module } : { "data-node-id": n.id };
  const el = svgEl("g", { class: classes.join(" "), ...attrs, "data-state": "hidden", transform: `translate(${n.x},${n.y})`, tabindex: -1, role: "button", "aria-label": `${n.label} ${n.sublabel || ""}`.trim() });
  el.append(svgEl("rect", { width: n.width, height: n.height, rx: n.kind === "tensor" ? 8 : 4 }));
  const two = Boolean(n.sublabel);
  el.append(svgEl("text", { x: n.width / 2, y: two ? n.height / 2 - 7 : n.height / 2 + 0.5 }, [n.label]));
  if (two) el.append(svgEl("text", { class: "gt-sublabel", x: n.width / 2, y: n.height / 2 + 8 }, [n.sublabel]));
  el.append(svgEl("text", { class: "gt-done-mark", x: n.width - 7, y: 8 }, ["✓"]));
  el.append(svgEl("title", {}, [n.inserted ? `${n.label} — inserted by instrumentation (full backward hook)` : `${n.label} ${n.sublabel || ""}`]));
  return el;
}

export function createRenderer(svg) {
  let nodeEls = new Map();
  let moduleEls = new Map();
  let edgeEls = new Map();
  let chipEls = new Map();
  let leafChips = new Map();
  let fanChips = new Map();
  let badgeEls = [];
  let lastStates = new Map();
  let layout = null;
  let nodeModule = new Map();
  const viewport = svgEl("g", { class: "gt-viewport" });
  svg.replaceChildren(defs(), viewport);
  svg.classList.add("gt-graph");

  function draw(newLayout, trace) {
    layout = newLayout;
    nodeEls = new Map();
    moduleEls = new Map();
    edgeEls = new Map();
    chipEls = new Map();
    leafChips = new Map();
    fanChips = new Map();
    lastStates = new Map();
    const hooksByModule = new Map((trace.graph.modules || []).map((m) => [m.path, m.hooks || []]));
    nodeModule = new Map(trace.graph.nodes.map((n) => [n.id, n.module || ""]));
    const gGroups = svgEl("g", { class: "gt-groups" });
    const gEdges = svgEl("g", { class: "gt-edges" });
    const gNodes = svgEl("g", { class: "gt-nodes" });
    const gChips = svgEl("g", { class: "gt-chips" });
    for (const g of layout.groups) if (!g.collapsed) gGroups.append(drawGroup(g, hooksByModule));
    badgeEls = [...gGroups.querySelectorAll(".gt-badge")];
    for (const e of layout.edges) {
      const el = svgEl("g", { class: `gt-edge gt-edge--${e.kind}`, "data-edge-id": e.id, "data-source": e.source, "data-target": e.target, "data-state": "hidden" });
      el.append(svgEl("path", { d: pathOf(e.points) }));
      gEdges.append(el);
      edgeEls.set(e.id, el);
      if (e.kind !== "no_grad") {
        const m = chipPoint(e.points);
        const c = chip("gt-grad--edge", { "data-edge-id": e.id, transform: `translate(${m.x},${m.y})` });
        gChips.append(c);
        chipEls.set(e.id, c);
      }
    }
    for (const n of layout.nodes) {
      const el = drawNode(n);
      gNodes.append(el);
      if (n.kind === "module") moduleEls.set(n.module, el);
      else nodeEls.set(n.id, el);
      if (n.kind === "tensor" && n.role === "parameter") {
        const c = chip("gt-grad--leaf", { "data-leaf": n.id, transform: `translate(${n.x + n.width},${n.y + n.height + 11})` });
        gChips.append(c);
        leafChips.set(n.id, c);
      }
      if (n.kind !== "module") {
        const c = chip("gt-grad--accumulate", { "data-fanin": n.id, transform: `translate(${n.x + 4},${n.y - 4})` });
        gChips.append(c);
        fanChips.set(n.id, c);
      }
    }
    viewport.replaceChildren(gGroups, gEdges, gNodes, gChips);
  }

  function setState(el, key, state) {
    if (lastStates.get(key) === state) return;
    lastStates.set(key, state);
    el.setAttribute("data-state", state);
  }

  function paint(frame) {
    if (!layout) return;
    for (const [id, el] of nodeEls) setState(el, id, frame.nodeStates.get(id) || "shown");
    // A collapsed module shows the liveliest state of its members.
    const rank = { hidden: 0, shown: 1, done: 2, active: 3 };
    const agg = new Map();
    for (const [id, state] of frame.nodeStates) {
      const mod = nodeModule.get(id);
      for (const path of moduleEls.keys()) {
        if (mod === path || mod.startsWith(path + ".")) {
          const cur = agg.get(path);
          if (cur === undefined || rank[state] > rank[cur]) agg.set(path, state);
        }
      }
    }
    for (const [path, el] of moduleEls) setState(el, `m:${path}`, agg.get(path) || "shown");
    for (const [id, el] of edgeEls) {
      const es = frame.edgeStates.get(id.split("~")[0]) || { state: "shown", grad: null };
      setState(el, `e:${id}`, es.state);
      const c = chipEls.get(id);
      if (!c) continue;
      const visible = (es.state === "active" || es.state === "done") && es.grad !== null;
      if (visible) setChip(c, formatTensorChip(es.grad) + (hasNonFinite(es.grad) ? " ⚠" : ""), `gradient ${tensorTitle(es.grad)}`);
      setState(c, `c:${id}`, visible ? es.state : "hidden");
    }
    for (const [id, c] of leafChips) {
      const g = frame.leafGrads.get(id);
      if (g) setChip(c, `.grad ${formatTensorChip(g)}`, `.grad = ${tensorTitle(g)}`);
      setState(c, `l:${id}`, g && frame.nodeStates.get(id) !== "hidden" ? "shown" : "hidden");
    }
    for (const [id, c] of fanChips) {
      const count = frame.fanIn.get(id);
      const acc = frame.accumulated && frame.node === id;
      if (count || acc) setChip(c, count ? `+= ×${count}` : "+=", count ? `${count} gradients summed here` : ".grad accumulated (+=)");
      setState(c, `f:${id}`, count || acc ? "shown" : "hidden");
    }
    const ev = frame.event || {};
    for (const b of badgeEls) {
      const fired = ev.hook !== null && ev.hook !== undefined && String(ev.hook) === b.getAttribute("data-hook");
      b.classList.toggle("gt-badge--fired", fired);
    }
  }

  function select(id) {
    for (const el of svg.querySelectorAll(".gt-selected")) el.classList.remove("gt-selected");
    const el = id && (nodeEls.get(id) || moduleEls.get(id.replace(/^m:/, "")));
    if (el) el.classList.add("gt-selected");
  }

  /** The drawn box of a node (or the collapsed module holding it), for the camera. */
  function boxOf(id) {
    if (!layout || !id) return null;
    const direct = layout.nodes.find((n) => n.id === id);
    if (direct) return direct;
    const mod = nodeModule.get(id);
    return layout.nodes.find((n) => n.kind === "module" && (mod === n.module || (mod || "").startsWith(n.module + "."))) || null;
  }

  return { draw, paint, select, boxOf, viewport, get layout() { return layout; } };
}
