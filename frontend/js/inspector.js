// The Inspector panel: everything the trace knows about the selected node at the current step —
// op, module, shape, values (heatmap for matrices), stats, gradients in/out, saved tensors,
// hook payloads, the chain-rule step as math (KaTeX) with operands named as the program names
// them, and a Linear weight's Σ δ ⊗ a reconstruction. Prints trace numbers; recomputes nothing.

import { h } from "./dom.js";
import { formatShape, tensorNumbers } from "./format.js";
import { tensorView } from "./tensorview.js";
import { prettyName } from "./layout.js";
import { operandNames, forwardOpName, moduleType, inputSources } from "./operands.js";
import { chainRuleSteps, outerProduct, rootName, SMALL } from "./chainrule.js";
import { mathBlock } from "./math.js";
import { nodeMemoryView } from "./memory.js";
import { perSampleSection } from "./persample.js";

const HOOK_KINDS = new Set(["module_forward_pre", "module_forward", "module_backward_pre", "module_backward", "tensor_hook", "post_accumulate_grad", "node_pre_hook", "node_post_hook", "hook_action"]);

/** The chain-rule step of an op node: one formula per input slot, with the trace's numbers. */
function chainRule(node, post, sources, names, root) {
  const out = names.get(node.id);
  const defined = out.derived && !node.variable && post ? h("p", { class: "caption", text: `${forwardOpName(node.op)} = ${out.text}: the op's output, not named in the program` }) : null;
  const rows = chainRuleSteps({ node, names, post, sources, root }).map((row) => {
    const notes = [];
    if (row.local !== null) notes.push("local derivative = δ_in ÷ δ_out, both from the trace");
    if (!node.variable && !row.none && row.source?.leaf) notes.push(`${row.source.text} is a leaf: AccumulateGrad adds this into ${row.source.text}.grad`);
    if (!row.none && row.source?.derived) notes.push(`${row.source.text}: a tensor the program did not name`);
    if (row.none) notes.push(`next_functions holds None here: ${row.source ? `${row.source.text} does not require grad, so ` : ""}PyTorch computes no gradient for this input`);
    return h("div", { class: "math-row" }, [mathBlock(row.tex, row.text), ...notes.map((t) => h("p", { class: "caption", text: t }))]);
  });
  return rows.length ? [defined, ...rows] : null;
}

function section(title, children) {
  const kids = [].concat(children).filter(Boolean);
  return kids.length ? h("section", {}, [h("h3", { text: title }), ...kids]) : null;
}

/** Before a node has run: when the engine will run it (its chain-rule step appears then). */
function whenItRuns(timeline, id, step) {
  const next = timeline.events.find((e) => e.seq > step && e.kind === "node_post" && e.node === id);
  if (!next) return h("p", { class: "muted", text: "The engine does not run this node in any later pass." });
  return h("p", { class: "muted", text: `The engine runs this node at event #${next.seq} (${timeline.passes.get(next.pass_index)?.label || "backward"}); its chain-rule step appears then.` });
}

function roleText(node, names) {
  if (node.kind === "tensor") return `leaf (${node.role})`;
  if (node.variable) return `accumulates the gradient of leaf ${names.get(node.id).text}`;
  return node.role ? `op → ${names.get(node.id).text} (intermediate)` : "op";
}

/** Where grad_inputs[k] goes: the operand's program name, or why there is none. */
function gradTarget(src, names) {
  if (!src) return "none (next_functions holds None)";
  const n = names.get(src.id);
  if (src.noGrad) return `${n.text} (requires no grad: next_functions holds None)`;
  return n.leaf ? `${n.text} (leaf, via AccumulateGrad)` : n.text;
}

/** Σ δ ⊗ a rebuilt from the hook factors, as math, with its error against W.grad. */
function reconstruction(rec, root) {
  const { tex, text, matches } = outerProduct(rec, root);
  return h("div", { class: "recon" }, [
    ...tex.map((t, k) => mathBlock(t, text[k])),
    tensorNumbers(rec.reconstructed)?.length > SMALL ? tensorView(rec.reconstructed, "rebuilt Σ δ ⊗ a") : null,
    h("p", { class: matches ? "caption ok" : "caption flag", text: `${matches ? "✓ matches" : "✗ differs from"} what autograd accumulated into ${rec.weight}.grad (factors a, δ captured by hooks, summed with einsum)` }),
  ]);
}

/**
 * .grad of a leaf, or of an intermediate kept with retain_grad: its value at this step (the
 * last grad_write), else when it will be written; a plain intermediate keeps none.
 */
function gradSection(node, frame, timeline, names) {
  const name = names.get(node.id).text;
  const writes = timeline.gradWrites.filter((w) => w.node === node.id);
  const retained = node.kind === "op" && !node.variable && (node.retains_grad || writes.length > 0);
  if (frame.leafGrads.has(node.id)) {
    const w = writes.filter((x) => x.seq <= frame.step).pop();
    const how = retained ? `${name}.grad (kept by retain_grad)` : `${name}.grad`;
    return [tensorView(frame.leafGrads.get(node.id), how), w ? h("p", { class: "caption", text: `written at event #${w.seq}${w.accumulated ? " (+= accumulated)" : ""}` }) : null];
  }
  const next = writes.find((x) => x.seq > frame.step);
  if (next) return h("p", { class: "muted", text: `${name}.grad is None until event #${next.seq}, where backward writes it${retained ? " (retain_grad)" : ""}.` });
  if (node.kind === "tensor") return node.requires_grad ? h("p", { class: "muted", text: `${name}.grad is None.` }) : h("p", { class: "muted", text: `${name} does not require grad: no .grad.` });
  if (node.tensor && !node.variable) return h("p", { class: "muted", text: `${name} is an intermediate: its gradient passes through and is not kept (.grad is None without retain_grad).` });
  return null;
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
      const type = moduleType(trace, path);
      const count = trace.graph.nodes.filter((n) => n.module === path || (n.module || "").startsWith(path + ".")).length;
      root.replaceChildren(
        h("header", {}, [h("h2", { text: path }), h("p", { class: "role", text: `module${type ? " · " + type : ""} · collapsed · ${count} nodes` })]),
        h("button", { type: "button", class: "module-toggle", text: `Expand ${path}`, onclick: () => onToggleModule(path) }),
        h("p", { class: "muted", text: "Or double-click the box." }),
      );
    } else root.replaceChildren(h("p", { class: "muted", text: "Click a node to inspect it." }));
    return;
  }
  // Operands as the program names them (x, a0, f0.weight, view(x)), never node ids.
  const names = operandNames(trace);
  const step = frame.step;
  const pass = frame.event ? frame.event.pass_index : 0;
  const post = latest(timeline, timeline.post, `${pass}|${id}`, step);
  const pre = latest(timeline, timeline.pre, `${pass}|${id}`, step);
  const wrt = rootName(trace, pass);
  const sources = inputSources(trace, id, post);
  const head = h("header", {}, [
    h("h2", { text: node.kind === "tensor" ? prettyName(names.get(node.id).text) : node.op }),
    h("p", { class: `role role--${node.role || "op"}`, text: [roleText(node, names), node.inserted ? "inserted by instrumentation" : null].filter(Boolean).join(" · ") }),
    h("dl", { class: "facts" }, [
      h("dt", { text: "id" }), h("dd", { text: node.id }),
      h("dt", { text: "module" }), h("dd", { text: node.module === null || node.module === undefined ? "—" : `${node.module || "(root)"}${moduleType(trace, node.module) ? ` · ${moduleType(trace, node.module)}` : ""}` }),
      h("dt", { text: "shape" }), h("dd", { text: node.shape ? formatShape(node.shape) : "—" }),
      h("dt", { text: "dtype" }), h("dd", { text: node.dtype || node.value?.dtype || "—" }),
      h("dt", { text: "state" }), h("dd", { text: frame.nodeStates.get(id) || "—" }),
      ...(node.variable ? [h("dt", { text: "accumulates into" }), h("dd", { text: `${names.get(node.variable).text}.grad` })] : []),
      ...(node.grad_fn ? [h("dt", { text: "grad_fn" }), h("dd", { text: `${node.grad_fn} (AccumulateGrad)` })] : []),
    ]),
  ]);
  const gradIn = pre ? (pre.payload.grad_outputs || []).map((g, k) => tensorView(g, `grad_outputs[${k}]`)) : null;
  const gradOut = post ? (post.payload.grad_inputs || []).map((g, k) => tensorView(g, `grad_inputs[${k}] → ${gradTarget(sources.find((s) => s.slot === k), names)}`)) : null;
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
  const recon = (trace.analyses?.linear || []).filter((r) => r.module === node.module && r.pass_index <= pass).slice(-1).map((r) => reconstruction(r, wrt));
  const toggle = node.module
    ? h("button", { type: "button", class: "module-toggle", text: `Collapse ${node.module.split(".")[0]}`, title: "Draw the whole module as one box", onclick: () => onToggleModule(node.module.split(".")[0]) })
    : null;
  root.replaceChildren(...[
    head,
    toggle,
    section("Value", node.value ? tensorView(node.value) : null),
    section("Gradient in (grad_outputs)", gradIn),
    section("Gradient out (grad_inputs)", gradOut),
    section("Chain rule", node.kind === "op" ? chainRule(node, post, sources, names, wrt) || whenItRuns(timeline, id, step) : null),
    section(".grad", gradSection(node, frame, timeline, names)),
    section("Saved tensors", saved),
    section("Saved-tensor memory", nodeMemoryView(trace, id, step)),
    section("Hook payloads", hooks),
    section("Outer-product reconstruction", recon),
    perSampleSection(trace, node),
  ].filter(Boolean));
}
