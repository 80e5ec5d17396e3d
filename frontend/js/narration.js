// The story of one event, in words: what the engine did at step i, told with the program's names
// and the trace's numbers — "MulBackward0 (L = s · 0.5) receives ∂L/∂L = 1 and sends
// ∂L/∂s = 0.5 to SumBackward0" — and, for a node, the chain-rule step with its local derivative
// as numbers (localgrad.js). Every event kind has its sentence; nothing is shown raw, nothing is
// invented: a number the trace does not hold is said to be missing. Pure: no DOM.

import { tensorNumbers } from "./format.js";
import { operandNames, forwardOpName, inputSources } from "./operands.js";
import { rootName } from "./chainrule.js";
import { localDerivative, numbersText, num } from "./localgrad.js";

/** A TensorValue as the narration prints it: its numbers (a few), else shape and norm. */
export function valueText(tv) {
  if (!tv) return "None";
  const nums = tensorNumbers(tv);
  if (nums) return numbersText(nums, tv.shape);
  return `a ${tv.shape.join("×") || "scalar"} tensor (norm ${num(tv.stats?.norm)}; the trace kept no numbers)`;
}

const listText = (items) => (items.length <= 1 ? items.join("") : `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`);

/** The first `most` items as a list, and how many more there are. */
const someText = (items, most) => (items.length <= most ? listText(items) : `${items.slice(0, most).join(", ")} and ${items.length - most} more`);

/** Per trace: the lookups every sentence needs, built once. */
const contexts = new WeakMap();
function contextOf(trace) {
  if (!contexts.has(trace)) {
    const nodes = new Map(trace.graph.nodes.map((n) => [n.id, n]));
    const firstPost = new Map();
    for (const ev of trace.events || []) if (ev.kind === "node_post" && ev.node && !firstPost.has(ev.node)) firstPost.set(ev.node, ev);
    const firstOp = (trace.events || []).find((ev) => ev.kind === "node_created" && nodes.get(ev.node)?.kind === "op" && !nodes.get(ev.node)?.variable && !nodes.get(ev.node)?.inserted);
    const errorOfPass = new Map();
    for (const ev of trace.events || []) if (ev.kind === "error" && !errorOfPass.has(ev.pass_index)) errorOfPass.set(ev.pass_index, ev.seq);
    contexts.set(trace, { trace, errorOfPass, nodes, names: operandNames(trace), firstPost, firstOpSeq: firstOp ? firstOp.seq : -1 });
  }
  return contexts.get(trace);
}

/** The constant a missing operand stood for, where the node saved it as one number. */
function constantOperand(node, slot) {
  const s = (node.saved || []).find((x) => x.name === (slot === 0 ? "_saved_self" : "_saved_other"));
  if (s && typeof s.scalar === "number") return num(s.scalar);
  const nums = s && s.value ? tensorNumbers(s.value) : null;
  return nums && nums.length === 1 ? num(nums[0]) : "a constant";
}

/** The forward expression an op node computed, over its operands' program names. */
function expression(ctx, node) {
  const post = ctx.firstPost.get(node.id);
  const sources = inputSources(ctx.trace, node.id, post);
  const slots = Math.max(post?.payload?.grad_inputs?.length || 0, ...sources.map((s) => s.slot + 1), 0);
  const args = Array.from({ length: slots }, (_, k) => {
    const src = sources.find((s) => s.slot === k);
    return src ? ctx.names.get(src.id).text : constantOperand(node, k);
  });
  const fn = forwardOpName(node.op);
  const exp = (node.saved || []).find((x) => x.name === "_saved_exponent" && typeof x.scalar === "number");
  const [a, b] = args;
  if (fn === "mul" && args.length === 2) return `${a} · ${b}`;
  if (fn === "add" && args.length === 2) return `${a} + ${b}`;
  if (fn === "sub" && args.length === 2) return `${a} − ${b}`;
  if (fn === "div" && args.length === 2) return `${a} / ${b}`;
  if (fn === "pow" && exp && args.length === 1) return `${a}^${num(exp.scalar)}`;
  if ((fn === "mm" || fn === "bmm") && args.length === 2) return `${a} @ ${b}`;
  if (fn === "addmm" && args.length === 3) return `${a} + ${args[1]} @ ${args[2]}`;
  return `${fn}(${args.join(", ")})`;
}

/** An op node as the story names it: "MulBackward0 (L = s · 0.5)", "AccumulateGrad (W0.weight)". */
function nodeLabel(ctx, id) {
  const node = ctx.nodes.get(id);
  if (!node) return id || "?";
  const name = ctx.names.get(id);
  if (node.kind === "tensor") return name.text;
  if (node.variable) return `AccumulateGrad (${name.text})`;
  if (node.inserted) return `${node.op} (a hook's instrumentation${node.module ? ` around ${node.module}` : ""})`;
  const expr = expression(ctx, node);
  return name.derived ? `${node.op} (${expr})` : `${node.op} (${name.text} = ${expr})`;
}

/** The short name of a node: its op, or a leaf's name. */
const shortName = (ctx, id) => {
  const node = ctx.nodes.get(id);
  if (!node) return id || "?";
  return node.kind === "tensor" ? ctx.names.get(id).text : node.variable ? `AccumulateGrad (${ctx.names.get(id).text})` : node.op;
};

const partial = (root, name) => `∂${root.text}/∂${name}`;

/** The chain-rule step of slot k, with the local derivative as numbers: one line. */
function chainLine(ctx, node, post, src, slot, root) {
  const out = ctx.names.get(node.id).text;
  const inName = ctx.names.get(src.id).text;
  const gOut = post.payload.grad_outputs?.[0] ?? null;
  const gIn = post.payload.grad_inputs[slot];
  const lhs = partial(root, inName);
  if (node.inserted) {
    const same = out === inName ? "" : ` = ${partial(root, out)}`;
    return `${lhs}${same} = ${valueText(gIn)}: the instrumentation passes the gradient through unchanged (local derivative 1).`;
  }
  const local = localDerivative(node, slot, post);
  if (local.notShown) return `${local.notShown}; ${lhs} = ${valueText(gIn)} as the engine computed it.`;
  if (local.missing) return `Local derivative ∂${out}/∂${inName}: ${local.missing}; ${lhs} = ${valueText(gIn)} as the engine computed it.`;
  const from = local.from ? ` (from the saved ${local.from.replaceAll("_saved_", "")})` : "";
  if (local.kind === "rearrange") return `${local.formula}: ${lhs} = ${local.text} = ${valueText(gIn)}.`;
  const note = local.note ? `, ${local.note}` : "";
  const head = `Local derivative ${local.formula} = ${local.text}${from}${note}.`;
  if (local.kind === "scalar" || local.kind === "elementwise") {
    const times = local.kind === "scalar" ? "·" : "⊙";
    const factor = (t) => (t.startsWith("−") ? `(${t})` : t); // 1 · (−1.848), not 1 · −1.848
    return `${head} Chain rule: ${lhs} = ${partial(root, out)} ${times} ∂${out}/∂${inName} = ${factor(valueText(gOut))} ${times} ${factor(local.text)} = ${valueText(gIn)}.`;
  }
  const product = local.product ? ` = ${local.product.replace("δ", valueText(gOut))}` : "";
  return `${head} Chain rule: ${lhs}${product} = ${valueText(gIn)}.`;
}

/** Where the gradient a node received came from: its consumers in the graph. */
function receivedFrom(ctx, id, passIndex, trace) {
  const edges = trace.graph.edges.filter((e) => e.source === id && e.kind === "data" && (e.grads || []).some((g) => g.pass_index === passIndex));
  return edges.map((e) => shortName(ctx, e.target));
}

function nodePre(ctx, trace, ev, root) {
  const out = ctx.names.get(ev.node).text;
  const g = ev.payload?.grad_outputs?.[0] ?? null;
  const from = receivedFrom(ctx, ev.node, ev.pass_index, trace);
  const origin = from.length === 0 ? ` (the seed: backward starts here)` : from.length === 1 ? ` from ${from[0]}` : `, the sum (+=) of what ${listText(from)} sent`;
  const what = `${partial(root, out)} = ${valueText(g)}`;
  return { text: `The engine runs ${nodeLabel(ctx, ev.node)}: it receives ${what}${origin}.`, short: `${shortName(ctx, ev.node)} runs` };
}

function nodePost(ctx, trace, ev, root) {
  const node = ctx.nodes.get(ev.node);
  const out = ctx.names.get(ev.node).text;
  const post = ev;
  const gOut = post.payload?.grad_outputs?.[0] ?? null;
  const label = nodeLabel(ctx, ev.node);
  if (node?.variable) {
    return { text: `${label} is done: ${out}.grad now holds ${partial(root, out)} = ${valueText(gOut)}.`, short: `${out}.grad stored` };
  }
  const sources = inputSources(ctx.trace, ev.node, post);
  const sends = [];
  const nothing = [];
  const details = [];
  (post.payload?.grad_inputs || []).forEach((gIn, slot) => {
    const src = sources.find((s) => s.slot === slot);
    if (!src || src.noGrad || !gIn) {
      if (src) nothing.push(`nothing to ${ctx.names.get(src.id).text} (it does not require grad: next_functions holds None)`);
      else nothing.push(`nothing to the constant${constantOperand(node, slot) === "a constant" ? "" : ` ${constantOperand(node, slot)}`} (next_functions holds None)`);
      return;
    }
    const inName = ctx.names.get(src.id).text;
    sends.push(`${partial(root, inName)} = ${valueText(gIn)} to ${shortName(ctx, src.id)}`);
    details.push(chainLine(ctx, node, post, src, slot, root));
  });
  const text = `${label} receives ${partial(root, out)} = ${valueText(gOut)} and sends ${listText(sends) || "nothing"}${nothing.length ? `; ${nothing.join("; ")}` : ""}.`;
  return { text, details, short: `${shortName(ctx, ev.node)} sends its gradients` };
}

/** The hook's kind as the user registered it: "full backward hook", "tensor hook", … */
function hookKind(trace, ev) {
  const spec = trace.spec?.hooks?.[ev.hook];
  const mod = (trace.graph.modules || []).flatMap((m) => m.hooks || []).find((h) => h.index === ev.hook);
  const type = spec?.type || mod?.type || null;
  if (type) return `${String(type).replaceAll("_", " ")} hook`;
  return { module_forward_pre: "forward pre-hook", module_forward: "forward hook", module_backward_pre: "backward pre-hook", module_backward: "full backward hook", tensor_hook: "tensor hook", post_accumulate_grad: "post-accumulate-grad hook" }[ev.kind] || "hook";
}

const tensorsText = (list) => (list || []).map(valueText).join(", ") || "nothing";

/** What a hook returned and changed: the library's own record, else the spec's action event. */
function hookOutcome(trace, ev) {
  const p = ev.payload || {};
  if ("changed" in p || "returned" in p) {
    const ret = p.returned === null || p.returned === undefined ? "It returns None" : `It returns ${tensorsText(p.returned)}`;
    return `${ret}${p.changed ? " and changes the value: the engine goes on with what it returned." : ": nothing is changed."}`;
  }
  const next = trace.events[ev.seq + 1];
  if (next && next.kind === "hook_action" && next.hook === ev.hook) return "It returns a changed value (the next event shows before → after).";
  return "It returns None: nothing is changed.";
}

function hookEvent(ctx, trace, ev, root) {
  const p = ev.payload || {};
  const kind = hookKind(trace, ev);
  const where = ev.module !== null && ev.module !== undefined ? ev.module || "the root module" : ev.target;
  let saw;
  if (ev.kind === "module_forward_pre") saw = `input ${tensorsText(p.inputs)}`;
  else if (ev.kind === "module_forward") saw = `input ${tensorsText(p.inputs)} and output ${tensorsText(p.outputs)}`;
  else if (ev.kind === "module_backward_pre") saw = `grad_output ${partial(root, `(${where}'s output)`)} = ${tensorsText(p.grad_output)}`;
  else if (ev.kind === "module_backward") saw = `grad_output ${partial(root, `(${where}'s output)`)} = ${tensorsText(p.grad_output)} and grad_input ${partial(root, `(${where}'s input)`)} = ${tensorsText(p.grad_input)}`;
  else if (ev.kind === "tensor_hook") saw = `${partial(root, ev.target)} = ${valueText(p.grad)}`;
  else saw = `${ev.target}.grad = ${valueText(p.grad)}, after accumulation`;
  const name = p.hook_name ? ` ${p.hook_name}` : "";
  return { text: `The ${kind}${name} on ${where} sees ${saw}.`, details: [hookOutcome(trace, ev)], short: `${kind} on ${where}` };
}

/** A module call gradtrace recorded (no user hook): what went in and came out. */
function moduleCall(ctx, trace, ev) {
  const p = ev.payload || {};
  const path = ev.module || "the root module";
  const type = (trace.graph.modules || []).find((m) => m.path === ev.module)?.type;
  const who = type && type !== "Root" ? `${path} (${type})` : path;
  if (ev.kind === "module_forward_pre") return { text: `${who} is called with ${tensorsText(p.inputs)}.`, short: `${path} called` };
  return { text: `${who} returns ${tensorsText(p.outputs)} (from ${tensorsText(p.inputs)}).`, short: `${path} returns` };
}

function hookAction(ctx, trace, ev) {
  const p = ev.payload || {};
  const a = p.action || {};
  const where = ev.module || ev.target;
  const verb = a.op === "scale" ? `scales ${a.target || "the gradient"} by ${num(a.by)}` : a.op === "zero" ? `zeroes ${a.target || "the gradient"}` : `applies ${a.op || "its action"}${a.target ? ` to ${a.target}` : ""}${a.by !== undefined ? ` (${num(a.by)})` : ""}`;
  return { text: `The hook on ${where} ${verb}: ${tensorsText(p.before)} → ${tensorsText(p.after)}.`, details: ["The engine continues with the changed value."], short: `hook on ${where} changes the gradient` };
}

function gradWrite(ctx, trace, ev) {
  const p = ev.payload || {};
  const name = ctx.names.get(ev.node)?.text || ev.target;
  const node = ctx.nodes.get(ev.node);
  const kept = node && node.kind === "op" ? " (kept by retain_grad)" : "";
  if (p.accumulated) return { text: `${name}.grad accumulates (+=)${kept}: ${valueText(p.before)} → ${valueText(p.after)}.`, short: `${name}.grad +=` };
  return { text: `${name}.grad is written${kept}: ${valueText(p.before)} → ${valueText(p.after)}.`, short: `${name}.grad written` };
}

function nodeCreated(ctx, trace, ev) {
  const node = ctx.nodes.get(ev.node);
  if (!node) return { text: "A node is created.", short: "node created" };
  const name = ctx.names.get(node.id).text;
  if (node.kind === "tensor" && node.label === "tensor" && !node.tensor && !node.requires_grad) {
    // A Hugging Face model makes these in its forward (position ids, masks, empty caches)
    const shape = (node.shape || []).join("×") || "scalar";
    return { text: `An unnamed ${shape} tensor enters the graph: the model's own code made it inside forward (an index, a mask, an empty cache), so it is neither an input you passed nor a parameter; it does not require grad, and no gradient flows to it.`, short: "unnamed tensor" };
  }
  if (node.kind === "tensor") {
    const v = node.value ? ` = ${valueText(node.value)}` : "";
    const how = node.requires_grad ? `requires grad: a leaf whose gradient backward stores in ${name}.grad` : "does not require grad: no gradient is kept for it";
    return { text: `Leaf ${name}${v} enters the graph; it ${how}.`, short: `leaf ${name}` };
  }
  if (node.variable) return { text: `AccumulateGrad is created for ${name}: in the backward it adds the gradient into ${name}.grad.`, short: `AccumulateGrad for ${name}` };
  if (node.inserted) return { text: `${node.op} is inserted around ${node.module || "a module"} so its backward hook can see the gradients; it passes them through unchanged.`, short: `${node.op} inserted` };
  const value = node.value ? ` = ${valueText(node.value)}` : "";
  const details = ev.seq === ctx.firstOpSeq
    ? [`Why ${node.op} in the forward pass? Each op records the function that will compute its gradient in the backward (its grad_fn), and PyTorch names the node after that function: the forward builds a graph of …Backward nodes that the backward pass then runs.`]
    : [];
  const what = ctx.names.get(node.id).derived ? expression(ctx, node) : `${name} = ${expression(ctx, node)}`;
  return { text: `${forwardOpName(node.op)} computes ${what}${value} and records ${node.op} for the backward.`, details, short: `${node.op} recorded` };
}

function passEvent(ctx, trace, ev, timeline) {
  const pass = timeline.passes.get(ev.pass_index) || { label: ev.phase, phase: ev.phase, first_seq: 0, last_seq: ev.seq };
  const root = rootName(trace, ev.pass_index);
  const inPass = trace.events.slice(pass.first_seq, pass.last_seq + 1).filter((e) => e.pass_index === ev.pass_index);
  if (ev.kind === "pass_start") {
    if (pass.phase === "forward") return { text: `${pass.label}: the program runs, and every op PyTorch records becomes a node of the graph.`, short: "starts" };
    if (pass.phase === "backward") {
      const first = inPass.find((e) => e.kind === "node_pre");
      const seed = first ? ` with the seed ${partial(root, root.text)} = ${valueText(first.payload?.grad_outputs?.[0])} at ${shortName(ctx, first.node)}` : "";
      return { text: `${pass.label} starts${seed}; the engine walks the graph back toward the leaves.`, short: "starts" };
    }
    return { text: `${pass.label} starts.`, short: "starts" };
  }
  const err = inPass.find((e) => e.kind === "error");
  if (err) return { text: `${pass.label} stopped: ${err.node ? shortName(ctx, err.node) : "PyTorch"} raised ${err.payload?.exception || "an error"}.`, short: `stopped by ${err.payload?.exception || "an error"}` };
  if (pass.phase === "forward") {
    const ops = trace.graph.nodes.filter((n) => n.created_seq !== null && n.created_seq !== undefined && n.created_seq <= ev.seq).length;
    return {
      text: `The forward pass is done: the graph has ${ops} nodes. The story is in the backward pass: press ▶ to watch the engine send the gradients back, or → to go one event at a time.`,
      short: "graph built · press ▶ for the backward",
      cue: true,
    };
  }
  if (pass.phase === "backward") {
    const writes = inPass.filter((e) => e.kind === "grad_write").map((e) => `${ctx.names.get(e.node)?.text || e.target}.grad = ${valueText(e.payload?.after)}`);
    return { text: `${pass.label} is done${writes.length ? `: ${someText(writes, 6)}` : ""}.`, short: "done" };
  }
  return { text: `${pass.label} is done.`, short: "done" };
}

function stepEvent(ctx, trace, ev) {
  const p = ev.payload || {};
  if (ev.kind === "zero_grad") {
    const names = p.tensors || [];
    return { text: names.length ? `zero_grad: ${listText(names.map((n) => `${n}.grad`))} ${p.set_to_none ? "set to None" : "filled with zeros"}.` : "zero_grad: no .grad to clear.", short: "gradients cleared" };
  }
  const after = Object.entries(p.after || {});
  if (ev.kind === "optimizer_step") {
    const rate = p.lr === null || p.lr === undefined ? "" : `, lr = ${num(p.lr)}`;
    const changed = after.length ? `: ${someText(after.map(([n, v]) => `${n} → ${valueText(v)}`), 6)}` : ": no parameter changed";
    return { text: `${p.name || p.optimizer}.step() (${p.optimizer}${rate}) updates the parameters${changed}.`, short: "parameters updated" };
  }
  const lr = num(p.lr);
  return { text: `SGD step, lr = ${lr}: every parameter p ← p − ${lr}·p.grad${after.length ? `: ${someText(after.map(([n, v]) => `${n} → ${valueText(v)}`), 6)}` : ""}.`, short: "parameters updated" };
}

/**
 * The narration of step `step`: {text, details: [string], short, tone: "info"|"cue"|"error",
 * node (the node it is about, or null), error: {exception, message, node, label} | null}.
 * `short` is the compact phrase of the status line.
 */
export function narrate(trace, timeline, step) {
  const ev = timeline.events[step];
  if (!ev) return { text: "", details: [], short: "", tone: "info", node: null, error: null };
  const ctx = contextOf(trace);
  const root = rootName(trace, ev.pass_index);
  let out;
  switch (ev.kind) {
    case "node_pre":
      out = nodePre(ctx, trace, ev, root);
      break;
    case "node_post":
      out = nodePost(ctx, trace, ev, root);
      break;
    case "node_created":
      out = nodeCreated(ctx, trace, ev);
      break;
    case "grad_write":
      out = gradWrite(ctx, trace, ev);
      break;
    case "module_forward_pre":
    case "module_forward":
      out = ev.hook === null || ev.hook === undefined ? moduleCall(ctx, trace, ev) : hookEvent(ctx, trace, ev, root);
      break;
    case "module_backward_pre":
    case "module_backward":
    case "tensor_hook":
    case "post_accumulate_grad":
      out = hookEvent(ctx, trace, ev, root);
      break;
    case "hook_action":
      out = hookAction(ctx, trace, ev);
      break;
    case "pass_start":
    case "pass_end":
      out = passEvent(ctx, trace, ev, timeline);
      break;
    case "zero_grad":
    case "sgd_step":
    case "optimizer_step":
      out = stepEvent(ctx, trace, ev);
      break;
    case "error": {
      const who = ev.node ? nodeLabel(ctx, ev.node) : "PyTorch";
      const exception = ev.payload?.exception || "Error";
      out = { text: `${who} raised ${exception}: ${ev.message || ""}`, short: ev.node ? `${exception} in ${shortName(ctx, ev.node)}` : exception, tone: "error" };
      out.error = { exception, message: ev.message || "", node: ev.node || null, label: ev.node ? shortName(ctx, ev.node) : "PyTorch" };
      break;
    }
    default:
      out = { text: `Something the trace calls “${ev.kind}” happens${ev.message ? `: ${ev.message}` : ""}.`, short: "an event" };
  }
  return { details: [], tone: out.cue ? "cue" : "info", node: timeline.eventAbout?.[step] ?? ev.node ?? null, error: null, ...out };
}

/** The error of the pass step `step` is in, raised at or before it (the banner stays up), or null. */
export function passError(trace, timeline, step) {
  const ev = timeline.events[step];
  const seq = ev ? contextOf(trace).errorOfPass.get(ev.pass_index) : undefined;
  return seq !== undefined && seq <= step ? narrate(trace, timeline, seq).error : null;
}

/** A bracketed list shorter than this stays in the sentence when the numbers fold ("[0]"). */
const FOLDABLE_CHARS = 12;

/**
 * `text` cut into runs: [{text, numbers}], `numbers` true for each bracketed list of numbers
 * ("[−0.9237, 0.1, …]", nested lists whole) that a narrow region may fold to "[…]". Joining the
 * runs' texts gives `text` back.
 */
export function numberRuns(text) {
  const runs = [];
  let plain = "";
  let i = 0;
  while (i < text.length) {
    if (text[i] === "[") {
      let depth = 0;
      let j = i;
      for (; j < text.length; j++) {
        if (text[j] === "[") depth++;
        else if (text[j] === "]" && --depth === 0) break;
      }
      const group = text.slice(i, j + 1);
      if (depth === 0 && group.length >= FOLDABLE_CHARS && /\d/.test(group)) {
        if (plain) runs.push({ text: plain, numbers: false });
        runs.push({ text: group, numbers: true });
        plain = "";
        i = j + 1;
        continue;
      }
    }
    plain += text[i];
    i++;
  }
  if (plain) runs.push({ text: plain, numbers: false });
  return runs;
}

/** A text as it reads with its lists of numbers folded to "[…]". */
export const glanceText = (text) => numberRuns(text).map((r) => (r.numbers ? "[…]" : r.text)).join("");

/** Characters a reader takes in during one step at the speed's nominal rate. */
const CHARS_PER_STEP = 110;

/**
 * How long playback dwells on a story, in steps of the speed control (1: one event's time): in
 * proportion to what it says at a glance — the sentence, and half the weight of its chain-rule
 * lines — from 0.5 (a short "… runs") to 4 (a Jacobian written out).
 */
export function readingWeight(story) {
  const chars = glanceText(story.text || "").length + 0.5 * (story.details || []).reduce((n, d) => n + glanceText(d).length, 0);
  return Math.min(4, Math.max(0.5, chars / CHARS_PER_STEP));
}
