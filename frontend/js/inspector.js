// The Inspector panel: everything the trace knows about the selected node at the current step —
// op, module, shape, values (heatmap for matrices), stats, gradients in/out, saved tensors,
// hook payloads and the chain-rule step as MathML. Prints trace numbers; recomputes nothing.

import { h, svgEl } from "./dom.js";
import { formatNumber, formatNumberFull, formatShape, tensorNumbers, hasNonFinite, matrixView, decodeNumber } from "./format.js";
import { prettyName } from "./layout.js";
import { nodeMemoryView } from "./memory.js";
import { perSampleSection } from "./persample.js";

const HOOK_KINDS = new Set(["module_forward_pre", "module_forward", "module_backward_pre", "module_backward", "tensor_hook", "post_accumulate_grad", "hook_action"]);

function num(v) {
  const x = decodeNumber(v);
  return h("span", { class: Number.isFinite(x) ? "num" : "num num--flag", title: formatNumberFull(v), text: formatNumber(v) });
}

/** Diverging colour for a heatmap cell: coral for negative, teal for positive (CB-safe pair). */
function cellColor(x, maxAbs) {
  if (!Number.isFinite(x)) return "#c0142b";
  const t = maxAbs ? Math.min(1, Math.abs(x) / maxAbs) : 0;
  const [r, g, b] = x < 0 ? [217, 85, 59] : [15, 125, 115];
  return `rgba(${r},${g},${b},${(0.08 + 0.85 * t).toFixed(3)})`;
}

function heatmap(tv) {
  const m = matrixView(tv);
  if (!m) return null;
  const rows = Math.min(m.rows, 32);
  const cols = Math.min(m.cols, 32);
  const maxAbs = m.nums.reduce((a, x) => (Number.isFinite(x) ? Math.max(a, Math.abs(x)) : a), 0);
  const showText = cols <= 6 && rows <= 12;
  const grid = h("div", { class: "heatmap", style: `grid-template-columns: repeat(${cols}, ${showText ? "minmax(3.6em, auto)" : "12px"})`, role: "img", "aria-label": `heatmap ${m.rows} by ${m.cols}` });
  for (let r = 0; r < rows; r++)
    for (let c = 0; c < cols; c++) {
      const x = m.nums[r * m.cols + c];
      grid.append(h("span", { class: "cell", style: `background:${cellColor(x, maxAbs)}`, title: `[${r}, ${c}] = ${formatNumberFull(x)}`, text: showText ? formatNumber(x) : "" }));
    }
  const note = rows < m.rows || cols < m.cols ? h("p", { class: "muted", text: `showing ${rows}×${cols} of ${m.rows}×${m.cols}` }) : null;
  return h("div", {}, [grid, note]);
}

/** A histogram of a large tensor's finite values (24 bins), with its range written under it. */
function histogram(nums) {
  const finite = nums.filter(Number.isFinite);
  if (finite.length < 2) return null;
  let lo = Infinity;
  let hi = -Infinity;
  for (const x of finite) {
    if (x < lo) lo = x;
    if (x > hi) hi = x;
  }
  const bins = new Array(24).fill(0);
  for (const x of finite) bins[Math.min(23, Math.floor(((x - lo) / (hi - lo || 1)) * 24))]++;
  const top = Math.max(...bins);
  const bars = bins.map((c, i) => svgEl("rect", { x: i * 10, y: 40 - (40 * c) / top, width: 9, height: (40 * c) / top, class: "hist-bar" }, [svgEl("title", {}, [`${c}`])]));
  return h("div", { class: "hist" }, [
    svgEl("svg", { viewBox: "0 0 240 40", width: 240, height: 40, role: "img", "aria-label": `histogram of ${finite.length} values` }, bars),
    h("div", { class: "hist-range" }, [num(lo), num(hi)]),
  ]);
}

/** A tensor: shape, dtype, its numbers (list, or heatmap for matrices) and stats. */
export function tensorView(tv, caption) {
  if (!tv) return h("div", { class: "tensor" }, [caption ? h("span", { class: "caption", text: caption }) : null, h("span", { class: "muted", text: " None (no gradient)" })]);
  const nums = tensorNumbers(tv);
  const s = tv.stats || {};
  const flag = hasNonFinite(tv) ? h("span", { class: "flag", text: ` ⚠ ${s.nan || 0} NaN, ${s.inf || 0} inf` }) : null;
  let body;
  if (nums && nums.length <= 8 && (tv.shape || []).length <= 1) body = h("div", { class: "values" }, ["[", ...nums.flatMap((x, i) => (i ? [", ", num(x)] : [num(x)])), "]"]);
  else if (nums && (tv.shape || []).length <= 1) body = histogram(nums);
  else if (nums) body = h("div", {}, [heatmap(tv), nums.length > 64 ? histogram(nums) : null]);
  else body = h("p", { class: "muted", text: "values truncated (stats only)" });
  const stats = h("dl", { class: "stats" }, ["min", "max", "mean", "std", "norm"].flatMap((k) => [h("dt", { text: k }), h("dd", {}, [num(s[k] ?? "NaN")])]));
  return h("div", { class: "tensor" }, [
    h("div", {}, [caption ? h("span", { class: "caption", text: caption + " " }) : null, h("code", { text: `${formatShape(tv.shape)} ${tv.dtype}` }), flag]),
    body,
    tv.shape && tv.shape.length && (tv.stats?.numel ?? 0) > 1 ? stats : null,
  ]);
}

function mathFrac(top, bottom) {
  return `<mfrac><mrow><mi>∂</mi><mi>${top}</mi></mrow><mrow><mi>∂</mi><mi>${bottom}</mi></mrow></mfrac>`;
}

function esc(s) {
  return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

/** The chain-rule step of an op node as MathML: ∂L/∂src = ∂L/∂out · ∂out/∂src = value. */
function chainRule(node, post, sources) {
  if (!post || !post.payload) return null;
  const outName = esc(prettyName(node.tensor) || node.id);
  const gOut = (post.payload.grad_outputs || [])[0];
  const rows = [];
  (post.payload.grad_inputs || []).forEach((g, k) => {
    const src = sources.find((s) => s.slot === k);
    const srcName = esc(src ? src.name : `input ${k}`);
    const value = g ? (tensorNumbers(g)?.length === 1 ? formatNumber(tensorNumbers(g)[0]) : formatShape(g.shape)) : "None";
    const dOut = gOut ? (tensorNumbers(gOut)?.length === 1 ? formatNumber(tensorNumbers(gOut)[0]) : formatShape(gOut.shape)) : "None";
    const div = h("div", { class: "math" });
    div.innerHTML = `<math display="block"><mrow>${mathFrac("L", srcName)}<mo>=</mo>${mathFrac("L", outName)}<mo>·</mo>${mathFrac(outName, srcName)}<mo>=</mo><mn>${esc(dOut)}</mn><mo>·</mo>${mathFrac(outName, srcName)}<mo>=</mo><mn>${esc(value)}</mn></mrow></math>`;
    div.append(h("span", { class: "math-text", text: `∂L/∂${src ? src.name : "input " + k} = ${value}` }));
    if (src && src.op && src.name !== src.op) div.append(h("span", { class: "caption", text: `${src.name} = output of ${src.op}` }));
    rows.push(div);
  });
  return rows.length ? rows : null;
}

function section(title, children) {
  const kids = [].concat(children).filter(Boolean);
  return kids.length ? h("section", {}, [h("h3", { text: title }), ...kids]) : null;
}

function latest(timeline, map, key, step) {
  const seqs = (map.get(key) || []).filter((s) => s <= step);
  return seqs.length ? timeline.events[seqs[seqs.length - 1]] : null;
}

/** Fill `root` with the inspector for node `id` at `frame`. */
export function renderInspector(root, { trace, timeline, frame, id, onToggleModule = () => {} }) {
  const node = trace.graph.nodes.find((n) => n.id === id);
  if (!node) {
    if (id && id.startsWith("m:")) {
      const path = id.slice(2);
      const info = (trace.graph.modules || []).find((m) => m.path === path);
      const count = trace.graph.nodes.filter((n) => n.module === path || (n.module || "").startsWith(path + ".")).length;
      root.replaceChildren(
        h("header", {}, [h("h2", { text: path }), h("p", { class: "role", text: `module${info ? " · " + info.type : ""} · collapsed · ${count} nodes` })]),
        h("button", { type: "button", class: "module-toggle", text: `Expand ${path}`, onclick: () => onToggleModule(path) }),
        h("p", { class: "muted", text: "Or double-click the box." }),
      );
    } else root.replaceChildren(h("p", { class: "muted", text: "Click a node to inspect it." }));
    return;
  }
  // Short math names: the tensor's name when the program named it, else the node id (n5).
  const names = new Map(trace.graph.nodes.map((n) => [n.id, n.kind === "tensor" ? prettyName(n.label) : prettyName(n.tensor) || n.id]));
  const ops = new Map(trace.graph.nodes.map((n) => [n.id, n.op]));
  const sources = trace.graph.edges.filter((e) => e.target === id).map((e) => ({ slot: e.slot, name: names.get(e.source), op: ops.get(e.source), edge: e }));
  const step = frame.step;
  const pass = frame.event ? frame.event.pass_index : 0;
  const post = latest(timeline, timeline.post, `${pass}|${id}`, step);
  const pre = latest(timeline, timeline.pre, `${pass}|${id}`, step);
  const head = h("header", {}, [
    h("h2", { text: node.kind === "tensor" ? prettyName(node.label) : node.op }),
    h("p", { class: `role role--${node.role || "op"}`, text: [node.kind === "tensor" ? `leaf (${node.role})` : node.role ? `op → ${prettyName(node.tensor) || "tensor"} (intermediate)` : "op", node.inserted ? "inserted by instrumentation" : null].filter(Boolean).join(" · ") }),
    h("dl", { class: "facts" }, [
      h("dt", { text: "id" }), h("dd", { text: node.id }),
      h("dt", { text: "module" }), h("dd", { text: node.module === null || node.module === undefined ? "—" : node.module || "(root)" }),
      h("dt", { text: "shape" }), h("dd", { text: node.shape ? formatShape(node.shape) : "—" }),
      h("dt", { text: "dtype" }), h("dd", { text: node.dtype || node.value?.dtype || "—" }),
      h("dt", { text: "state" }), h("dd", { text: frame.nodeStates.get(id) || "—" }),
      ...(node.variable ? [h("dt", { text: "accumulates into" }), h("dd", { text: `${names.get(node.variable)}.grad` })] : []),
      ...(node.grad_fn ? [h("dt", { text: "grad_fn" }), h("dd", { text: `${node.grad_fn} (AccumulateGrad)` })] : []),
    ]),
  ]);
  const gradIn = pre ? (pre.payload.grad_outputs || []).map((g, k) => tensorView(g, `grad_outputs[${k}]`)) : null;
  const gradOut = post ? (post.payload.grad_inputs || []).map((g, k) => tensorView(g, `grad_inputs[${k}] → ${((s) => (s ? (s.op && s.op !== s.name ? `${s.name} (${s.op})` : s.name) : g ? "?" : "none (next_functions holds None)"))(sources.find((s) => s.slot === k))}`)) : null;
  const leafGrad = node.kind === "tensor" && frame.leafGrads.has(id) ? tensorView(frame.leafGrads.get(id), ".grad") : null;
  const saved = (node.saved || []).map((s) => (s.value ? tensorView(s.value, s.name) : h("div", {}, [h("span", { class: "caption", text: s.name + " " }), h("code", { text: JSON.stringify(s.scalar) })])));
  const hookEvents = timeline.events.filter((e) => e.seq <= step && HOOK_KINDS.has(e.kind) && (e.node === id || (node.module && e.module === node.module && (e.kind.startsWith("module_") || e.kind === "hook_action"))));
  const hooks = hookEvents.slice(-6).map((e, k, shown) =>
    h("details", { open: k === shown.length - 1 }, [
      h("summary", { text: `#${e.seq} ${e.kind}${e.module ? " " + e.module : ""}` }),
      ...Object.entries(e.payload || {}).flatMap(([k, v]) => {
        if (Array.isArray(v) && v.every((x) => x === null || (x && x.shape))) return v.map((x, i) => tensorView(x, `${k}[${i}]`));
        if (v && v.shape) return [tensorView(v, k)];
        return [h("div", {}, [h("span", { class: "caption", text: k + " " }), h("code", { text: JSON.stringify(v) })])];
      }),
    ]),
  );
  const recon = (trace.analyses?.linear || []).filter((r) => r.module === node.module && r.pass_index <= pass).slice(-1).map((r) =>
    h("p", {}, [`${r.weight}.grad = Σ δ ⊗ a rebuilt from the hooks: max error `, num(r.max_error), r.matches ? " ✓ matches" : " ✗ differs"]),
  );
  const toggle = node.module
    ? h("button", { type: "button", class: "module-toggle", text: `Collapse ${node.module.split(".")[0]}`, title: "Draw the whole module as one box", onclick: () => onToggleModule(node.module.split(".")[0]) })
    : null;
  root.replaceChildren(...[
    head,
    toggle,
    section("Value", node.value ? tensorView(node.value) : null),
    section("Gradient in (grad_outputs)", gradIn),
    section("Gradient out (grad_inputs)", gradOut),
    section("Chain rule", node.kind === "op" ? chainRule(node, post, sources) : null),
    section(".grad", leafGrad),
    section("Saved tensors", saved),
    section("Saved-tensor memory", nodeMemoryView(trace, id, step)),
    section("Hook payloads", hooks),
    section("Reconstruction check", recon),
    perSampleSection(trace, node),
  ].filter(Boolean));
}
