// The SVG pieces the live renderer draws: arrow/hatch defs, nodes, module boxes with hook
// badges, chips, and the element boxes used for culling. DOM only; no state, no frames.

import { svgEl } from "./dom.js";
import { formatNumber, formatTensorChip, hasNonFinite, tensorNumbers } from "./format.js";

const CHIP_CHAR = 6.6;

export function defs() {
  const arrow = (id, cls) =>
    svgEl("marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 10, markerHeight: 10, markerUnits: "userSpaceOnUse", orient: "auto-start-reverse" }, [
      svgEl("path", { d: "M0,0 L10,5 L0,10 z", class: cls }),
    ]);
  const hatch = svgEl("pattern", { id: "gt-hatch", width: 8, height: 8, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" }, [
    svgEl("rect", { width: 8, height: 8, fill: "var(--gt-op)" }),
    svgEl("line", { x1: 0, y1: 0, x2: 0, y2: 8, class: "gt-hatch-line" }),
  ]);
  return svgEl("defs", {}, [arrow("gt-arrow", "gt-arrow-head"), arrow("gt-arrow-grad", "gt-arrow-head gt-arrow-head--grad"), hatch]);
}

export function pathOf(points) {
  return points.map((p, i) => `${i ? "L" : "M"}${p.x.toFixed(1)},${p.y.toFixed(1)}`).join(" ");
}

export function chip(cls, attrs) {
  const g = svgEl("g", { class: `gt-grad ${cls}`, "data-state": "hidden", ...attrs });
  g.append(svgEl("rect", { height: 16, y: -8, rx: 4 }), svgEl("text", { y: 0.5 }));
  return g;
}

export function setChip(g, text, title) {
  const t = g.querySelector("text"); // not lastChild: a <title> is appended after the first call
  if (t.textContent !== text) {
    t.textContent = text;
    const w = Math.ceil(text.length * CHIP_CHAR) + 10;
    const rect = g.querySelector("rect");
    rect.setAttribute("width", w);
    rect.setAttribute("x", -w / 2);
  }
  let tt = g.querySelector("title");
  if (!tt) g.append((tt = svgEl("title")));
  tt.textContent = title;
}

export function tensorTitle(tv) {
  if (!tv) return "no gradient (None)";
  const nums = tensorNumbers(tv);
  const flag = hasNonFinite(tv) ? " ⚠ contains NaN/inf" : "";
  if (nums && nums.length <= 8) return `[${nums.join(", ")}]${flag}`;
  return `shape (${tv.shape.join(", ")}) norm ${formatNumber(tv.stats?.norm)}${flag}`;
}

/** "grad_input ×2: −0.4080 → −0.8159": what a user hook's action changed. */
export function hookActionText(ev) {
  const p = ev.payload || {};
  const a = p.action || {};
  const how = { scale: `×${a.by}`, add: `+${a.by ?? a.value}`, zero: "→ 0", clamp: `clamp(${a.min ?? ""}, ${a.max ?? ""})` }[a.op] || a.op || "hook";
  const first = (v) => (Array.isArray(v) ? v[0] : v);
  return `${a.target ? a.target + " " : ""}${how}: ${formatTensorChip(first(p.before))} → ${formatTensorChip(first(p.after))}`;
}

export function drawGroup(g, hooksByModule) {
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

export function drawNode(n) {
  const classes = ["gt-node", `gt-node--${n.kind}`];
  if (n.role) classes.push(`gt-role-${n.role}`);
  if (n.inserted) classes.push("gt-inserted");
  const attrs = n.kind === "module" ? { "data-module": n.module } : { "data-node-id": n.id };
  const el = svgEl("g", { class: classes.join(" "), ...attrs, "data-state": "hidden", transform: `translate(${n.x},${n.y})`, tabindex: 0, role: "button", "aria-label": `${n.label} ${n.sublabel || ""}`.trim() });
  el.append(svgEl("rect", { width: n.width, height: n.height, rx: n.kind === "tensor" ? 8 : 4 }));
  const two = Boolean(n.sublabel);
  el.append(svgEl("text", { x: n.width / 2, y: two ? n.height / 2 - 7 : n.height / 2 + 0.5 }, [n.label]));
  if (two) el.append(svgEl("text", { class: "gt-sublabel", x: n.width / 2, y: n.height / 2 + 8 }, [n.sublabel]));
  el.append(svgEl("text", { class: "gt-done-mark", x: n.width - 7, y: 8 }, ["✓"]));
  el.append(svgEl("title", {}, [n.inserted ? `${n.label} — inserted by instrumentation (full backward hook)` : `${n.label} ${n.sublabel || ""}`]));
  return el;
}

/** Every top-level drawn element with its box in graph coordinates (for culling). */
export function cullList(viewport) {
  const out = [];
  for (const layer of viewport.children) {
    for (const el of layer.children) {
      const b = el.getBBox ? el.getBBox() : null;
      const m = /translate\(([-\d.]+),([-\d.]+)\)/.exec(el.getAttribute("transform") || "");
      if (!b) continue;
      const dx = m ? Number(m[1]) : 0;
      const dy = m ? Number(m[2]) : 0;
      out.push({ el, layer, box: { x: b.x + dx - 20, y: b.y + dy - 20, width: b.width + 40, height: b.height + 40 }, shown: true });
    }
  }
  return out;
}

