// SVG-string pieces of the graph: module boxes, nodes, edges, chips, defs, legend. Pure.
// Class names and defs ids are the ones frontend/css/graph.css styles, so an exported picture
// and the live viewer are drawn by the same rules. `extra` attrs let the animated exporter
// hang its keyframes on any piece without a second drawing code path.

import { attrs, esc, num, polylinePath, tag, text } from "./xml.js";

const CHIP_CHAR = 6.4; // px per character at the 10.5px monospace chip font
const CHIP_H = 16;

/** Attributes with `extra` laid over, classes joined rather than replaced. */
function withExtra(base, extra) {
  const { class: more, ...rest } = extra;
  return { ...base, ...rest, class: more ? `${base.class} ${more}` : base.class };
}

/** <defs>: arrowheads (gray, coral) and the hatch for instrumentation-inserted nodes. */
export function defs() {
  const head = (id, cls) =>
    `<marker id="${id}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse" markerUnits="userSpaceOnUse"><path class="${cls}" d="M0 0L10 5L0 10z"/></marker>`;
  return (
    "<defs>" +
    head("gt-arrow", "gt-arrow-head") +
    head("gt-arrow-grad", "gt-arrow-head gt-arrow-head--grad") +
    '<pattern id="gt-hatch" width="8" height="8" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">' +
    '<rect width="8" height="8" fill="var(--gt-op)"/><line class="gt-hatch-line" x1="0" y1="0" x2="0" y2="8"/></pattern>' +
    "</defs>"
  );
}

/** One hook badge on a module box's border (k-th of its hooks), as the viewer draws it. */
export function drawBadge(g, hk, k, extra = {}) {
  const backward = /backward/.test(hk.type);
  const label = backward ? `${hk.type.replace("full_", "")} δ` : `${hk.type} a`;
  const w = label.length * 6 + 10;
  const x = g.x + (backward ? g.width - w / 2 : -w / 2);
  const y = g.y + 30 + k * 20;
  const title = `${hk.type} hook #${hk.index}${hk.action ? `: ${JSON.stringify(hk.action)}` : ""}`;
  return tag(
    "g",
    withExtra({ class: "gt-badge", "data-hook": hk.index, "data-kind": backward ? "backward" : "forward" }, extra),
    tag("title", {}, esc(title)),
    tag("rect", { x, y, width: w, height: 16, rx: 8 }),
    text({ x: x + w / 2, y: y + 8.5 }, label),
  );
}

/**
 * A module box titled "path · Type", with its hook badges: forward hooks on the left border
 * (they see a), backward hooks on the right border (they see δ).
 */
export function drawGroup(g, hooks = [], extra = {}) {
  return tag(
    "g",
    withExtra({ class: "gt-group", "data-path": g.path }, extra),
    tag("rect", { x: g.x, y: g.y, width: g.width, height: g.height, rx: 10 }),
    text({ class: "gt-group-title", x: g.x + 10, y: g.y + 13 }, g.type ? `${g.label} · ${g.type}` : g.label || g.path),
    hooks.map((hk, k) => drawBadge(g, hk, k)),
  );
}

/** Node classes exactly as the viewer sets them. */
export function nodeClass(n) {
  const cls = ["gt-node", `gt-node--${n.kind}`];
  if (n.role) cls.push(`gt-role-${n.role}`);
  if (n.inserted) cls.push("gt-inserted");
  return cls.join(" ");
}

/** The box and labels of one node, in absolute coordinates, placed as the viewer places them. */
export function nodeBody(n) {
  const rx = n.kind === "tensor" ? 8 : n.kind === "module" ? 10 : 4;
  const cx = n.x + n.width / 2;
  const cy = n.y + n.height / 2;
  const two = Boolean(n.sublabel);
  const parts = [tag("rect", { x: n.x, y: n.y, width: n.width, height: n.height, rx })];
  parts.push(text({ x: cx, y: two ? cy - 7 : cy + 0.5 }, n.label));
  if (two) parts.push(text({ class: "gt-sublabel", x: cx, y: cy + 8 }, n.sublabel));
  parts.push(text({ class: "gt-done-mark", x: n.x + n.width - 7, y: n.y + 8 }, "✓"));
  return parts.join("");
}

/** One node with its state (graph.css reads data-state). */
export function drawNode(n, state, extra = {}) {
  const what = n.inserted ? `${n.label} — inserted by instrumentation (full backward hook)` : `${n.label} ${n.sublabel || ""}`.trim();
  const title = tag("title", {}, esc(what));
  return tag("g", withExtra({ class: nodeClass(n), "data-id": n.id, "data-state": state }, extra), title, nodeBody(n));
}

/** An outline over a node in one state's colour: the animated export's "active"/"done" layer. */
export function drawNodeOverlay(n, state, extra = {}) {
  const rx = n.kind === "tensor" ? 8 : n.kind === "module" ? 10 : 4;
  return tag(
    "g",
    withExtra({ class: `${nodeClass(n)} gt-overlay`, "data-state": state }, extra),
    tag("rect", { x: n.x, y: n.y, width: n.width, height: n.height, rx, style: "fill:none" }),
  );
}

function polylineLength(points) {
  let total = 0;
  for (let i = 1; i < points.length; i++) total += Math.hypot(points[i].x - points[i - 1].x, points[i].y - points[i - 1].y);
  return total;
}

/**
 * One data-flow edge (source above, arrow at the consumer). Like the viewer's, it carries the
 * gradient's pulse path (graph.css shows it, running back to the producer, while "active").
 */
export function drawEdge(e, state, extra = {}) {
  if (!e.points || e.points.length < 2) return "";
  const d = polylinePath(e.points);
  const pulse = state === "active" ? tag("path", { class: "gt-pulse", d, style: `--len:${num(polylineLength(e.points))}` }) : "";
  return tag("g", withExtra({ class: `gt-edge gt-edge--${e.kind}`, "data-id": e.id, "data-state": state }, extra), tag("path", { d }), pulse);
}

export function chipWidth(label) {
  return Math.ceil(String(label).length * CHIP_CHAR) + 10;
}

/**
 * A chip: cls "gt-grad" (coral: a gradient), "gt-grad gt-grad--accumulate" (the += badge) or
 * "gt-value" (a forward value). (x, y) is its left edge, vertically centred.
 */
export function drawChip(cls, x, y, label, extra = {}) {
  const w = chipWidth(label);
  return tag(
    "g",
    withExtra({ class: cls }, extra),
    tag("rect", { x, y: y - CHIP_H / 2, width: w, height: CHIP_H, rx: 4 }),
    text({ x: x + w / 2, y: y + 0.5 }, label),
  );
}

/** The legend strip: the three tensor roles, ops, and the gradient colour, each with a swatch. */
export function drawLegend(x, y, { gradient = true } = {}) {
  const items = [
    ["gt-node gt-node--tensor gt-role-input", "input (no grad)"],
    ["gt-node gt-node--tensor gt-role-parameter", "requires grad"],
    ["gt-node gt-node--op gt-role-intermediate", "made by an op"],
    ["gt-node gt-node--op", "op"],
  ];
  let cx = x;
  const out = [];
  for (const [cls, label] of items) {
    out.push(tag("g", { class: cls }, tag("rect", { x: cx, y: y - 7, width: 18, height: 14, rx: 3 })));
    out.push(text({ class: "gt-legend-text", x: cx + 24, y }, label));
    cx += 30 + label.length * 6.6;
  }
  if (!gradient) return { svg: tag("g", { class: "gt-legend" }, out), width: cx - x };
  out.push(tag("g", { class: "gt-edge", "data-state": "done" }, tag("path", { d: `M${num(cx)} ${num(y)}H${num(cx + 26)}`, style: "marker-end:none" })));
  out.push(text({ class: "gt-legend-text", x: cx + 32, y }, "gradient"));
  cx += 38 + 8 * 6.6;
  return { svg: tag("g", { class: "gt-legend" }, out), width: cx - x };
}

/** `<style>` with CSS text (CDATA keeps the CSS readable and still valid XML). */
export function styleBlock(css) {
  return `<style><![CDATA[\n${String(css).replace(/\]\]>/g, "]]]]><![CDATA[>")}\n]]></style>`;
}

export { attrs };
