// The names a learner knows the graph's tensors by: the program's own (x, a0, loss, f0.weight),
// never node ids. A leaf is its label; an AccumulateGrad stands for its leaf; an op node for the
// tensor it produced. An op whose output the program never named is written as the op applied to
// its inputs ("view(x)", "f0.weightᵀ"), so every operand still reads as program text. Pure.

const MAX_DEPTH = 2;

/** "ViewBackward0" -> "view", "TBackward0" -> "t", "AddmmBackward0" -> "addmm". */
export function forwardOpName(op) {
  return String(op || "op")
    .replace(/Backward\d*$/, "")
    .toLowerCase();
}

/** TeX for one program name: "a0" -> "a_{0}", "f1.f.bias" -> "\mathrm{f}_{1}.\mathrm{f}.\mathrm{bias}". */
export function texName(name) {
  const word = (w) => (w.length === 1 ? w : `\\mathrm{${w.replace(/_/g, "\\_")}}`);
  return String(name)
    .split(".")
    .map((seg) => {
      const m = /^([A-Za-z]+)_?([0-9]+)$/.exec(seg);
      return m ? `${word(m[1])}_{${m[2]}}` : word(seg.replace(/[{}\\^$&#%~]/g, ""));
    })
    .join(".");
}

/**
 * Map node id -> {text, tex, derived, leaf}: `derived` when the program did not name the tensor
 * (the name is an expression over its inputs), `leaf` for tensors and their AccumulateGrad.
 */
export function operandNames(trace) {
  if (!namesOfTrace.has(trace)) namesOfTrace.set(trace, computeNames(trace));
  return namesOfTrace.get(trace);
}

// The inspector asks on every painted step; a trace's names never change.
const namesOfTrace = new WeakMap();

function computeNames(trace) {
  const nodes = new Map(trace.graph.nodes.map((n) => [n.id, n]));
  const inputsOf = new Map();
  for (const e of trace.graph.edges) {
    if (e.kind === "leaf") continue;
    if (!inputsOf.has(e.target)) inputsOf.set(e.target, []);
    inputsOf.get(e.target).push(e);
  }
  for (const list of inputsOf.values()) list.sort((a, b) => (a.slot ?? 0) - (b.slot ?? 0));
  const memo = new Map();

  function named(node) {
    if (node.kind === "tensor") return node.tensor || node.label;
    if (node.variable && nodes.has(node.variable)) return named(nodes.get(node.variable));
    return node.tensor || null;
  }

  function nameOf(id, depth) {
    if (depth === 0 && memo.has(id)) return memo.get(id);
    const node = nodes.get(id);
    let out;
    if (!node) out = { text: "?", tex: "?", derived: true, leaf: false };
    else if (named(node)) {
      const text = named(node);
      out = { text, tex: texName(text), derived: false, leaf: node.kind === "tensor" || Boolean(node.variable) };
    } else {
      const args = depth >= MAX_DEPTH ? [] : (inputsOf.get(id) || []).map((e) => nameOf(e.source, depth + 1));
      const fn = forwardOpName(node.op);
      // Instrumentation (BackwardHookFunctionBackward) passes its input through unchanged.
      if (node.inserted && args.length === 1) out = { ...args[0] };
      else if (fn === "t" && args.length === 1) out = { text: `${args[0].text}ᵀ`, tex: `{${args[0].tex}}^{\\top}` };
      else if (!args.length) out = { text: depth >= MAX_DEPTH ? "…" : `${fn}()`, tex: depth >= MAX_DEPTH ? "\\ldots" : `\\operatorname{${fn}}()` };
      else out = { text: `${fn}(${args.map((a) => a.text).join(", ")})`, tex: `\\operatorname{${fn}}(${args.map((a) => a.tex).join(", ")})` };
      out.derived = true;
      out.leaf = false;
    }
    if (depth === 0) memo.set(id, out);
    return out;
  }

  const all = new Map();
  for (const id of nodes.keys()) all.set(id, nameOf(id, 0));
  return all;
}

/**
 * A module's type as the spec declares it ("Linear", "Sequential", "Module"), walking the
 * spec's tree (`modules` of composites, `layers` of a Sequential); the trace's class name
 * (ModuleInfo.type) where there is no spec — a traced nn.Module — or the path is not in it.
 */
export function moduleType(trace, path) {
  if (!path && trace.spec) return ""; // a spec's root is its forward program, not a module it declares
  let children = trace.spec?.modules || null;
  let spec = null;
  for (const seg of String(path || "").split(".").filter(Boolean)) {
    spec = children ? (Array.isArray(children) ? children[Number(seg)] : children[seg]) : null;
    if (!spec) break;
    children = spec.modules || spec.layers || null;
  }
  if (spec && typeof spec.type === "string") return spec.type;
  return (trace.graph.modules || []).find((m) => m.path === path)?.type || "";
}

/**
 * The operands feeding node `id` by grad_inputs slot: [{slot, id, noGrad}]. An input that needs
 * no grad has an edge without a slot; where exactly one slot got None, that input is the one.
 */
export function inputSources(trace, id, post) {
  const into = trace.graph.edges.filter((e) => e.target === id && e.kind !== "leaf");
  const sources = into.filter((e) => e.slot !== null && e.slot !== undefined).map((e) => ({ slot: e.slot, id: e.source, noGrad: false }));
  const noGrad = into.filter((e) => e.kind === "no_grad" && (e.slot === null || e.slot === undefined));
  const open = (post?.payload?.grad_inputs || []).map((g, k) => k).filter((k) => !sources.some((s) => s.slot === k));
  if (noGrad.length === 1 && open.length === 1) sources.push({ slot: open[0], id: noGrad[0].source, noGrad: true });
  return sources;
}
