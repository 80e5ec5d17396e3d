// Test traces for the pure frontend modules: a hand-written tiny trace whose expected states are
// worked out by hand below, plus the engine's golden traces (tests/engine/golden/*.json) when
// they exist, so both sides of the contract are exercised by the same files.
import { readdirSync, readFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { resolveTensorData } from "../../frontend/js/tensordata.js";

const here = dirname(fileURLToPath(import.meta.url));
const GOLDEN_DIR = join(here, "..", "engine", "golden");

/** The golden trace `name` (its file name without ".json") as the viewer holds it: resolved. */
export function goldenTrace(name) {
  return resolveTensorData(JSON.parse(readFileSync(join(GOLDEN_DIR, `${name}.json`), "utf8")));
}

/** All golden traces as [file name, trace] pairs (empty until the engine writes them). */
export function goldenTraces() {
  if (!existsSync(GOLDEN_DIR)) return [];
  return readdirSync(GOLDEN_DIR)
    .filter((f) => f.endsWith(".json"))
    .sort()
    .map((f) => [f, goldenTrace(f.slice(0, -".json".length))])
    .filter(([, t]) => t && t.graph && Array.isArray(t.events));
}

const tv = (values, shape = []) => ({
  shape,
  dtype: "float32",
  stats: { numel: values.length, min: Math.min(...values), max: Math.max(...values), mean: values[0], std: 0, norm: Math.abs(values[0]) },
  values,
});

/**
 * loss = (w * x).sum() inside module "lin", backward twice (retain_graph):
 *   n0 SumBackward0 (loss)   n1 MulBackward0 (y, in "lin")   n2 AccumulateGrad   n3 w   n4 x
 *   e0 n1->n0 data, e1 n2->n1 data, e2 n3->n2 leaf, e3 n4->n1 no_grad.
 * w = 2, x = 1... so w.grad = 1.0 after the first backward and 2.0 after the second.
 */
export function tinyTrace() {
  const ev = [];
  const add = (pass_index, phase, kind, extra = {}) => ev.push({ seq: ev.length, pass_index, phase, kind, payload: {}, ...extra });
  add(0, "forward", "pass_start");
  add(0, "forward", "node_created", { target: "n3", node: "n3" }); // 1
  add(0, "forward", "node_created", { target: "n4", node: "n4" }); // 2
  add(0, "forward", "module_forward_pre", { target: "lin", module: "lin" }); // 3
  add(0, "forward", "node_created", { target: "n2", node: "n2" }); // 4
  add(0, "forward", "node_created", { target: "n1", node: "n1" }); // 5
  add(0, "forward", "module_forward", { target: "lin", module: "lin" }); // 6
  add(0, "forward", "node_created", { target: "n0", node: "n0" }); // 7
  add(0, "forward", "pass_end"); // 8
  for (const [pass, before] of [[1, null], [2, tv([1])]]) {
    add(pass, "backward", "pass_start");
    add(pass, "backward", "node_pre", { target: "n0", node: "n0" });
    add(pass, "backward", "node_post", { target: "n0", node: "n0" });
    add(pass, "backward", "node_pre", { target: "n1", node: "n1" });
    add(pass, "backward", "node_post", { target: "n1", node: "n1" });
    add(pass, "backward", "node_pre", { target: "n2", node: "n2" });
    add(pass, "backward", "grad_write", { target: "w", node: "n3", payload: { before, after: tv([pass]), accumulated: before !== null } });
    add(pass, "backward", "node_post", { target: "n2", node: "n2" });
    add(pass, "backward", "pass_end");
  }
  // pass 1 = seq 9..17, pass 2 = seq 18..26
  const node = (id, kind, label, extra = {}) => ({ id, kind, label, saved: [], inserted: false, pass_index: 0, requires_grad: false, retains_grad: false, ...extra });
  return {
    schema_version: 2,
    torch_version: "test",
    source: "spec",
    title: "tiny",
    spec: null,
    graph: {
      nodes: [
        node("n0", "op", "loss", { op: "SumBackward0", role: "intermediate", tensor: "loss", shape: [], created_seq: 7, value: tv([2]) }),
        node("n1", "op", "y", { op: "MulBackward0", role: "intermediate", tensor: "y", shape: [1], module: "lin", created_seq: 5 }),
        node("n2", "op", "AccumulateGrad", { op: "AccumulateGrad", variable: "n3", created_seq: 4, module: "lin" }),
        node("n3", "tensor", "w", { role: "parameter", shape: [1], grad_fn: "n2", requires_grad: true, created_seq: 1, value: tv([2], [1]) }),
        node("n4", "tensor", "x", { role: "input", shape: [1], created_seq: 2, value: tv([1], [1]) }),
      ],
      edges: [
        { id: "e0", source: "n1", target: "n0", kind: "data", slot: 0, output_nr: 0, requires_grad: true,
          grads: [{ pass_index: 1, seq: 11, value: tv([1], [1]) }, { pass_index: 2, seq: 20, value: tv([1], [1]) }] },
        { id: "e1", source: "n2", target: "n1", kind: "data", slot: 0, output_nr: 0, requires_grad: true,
          grads: [{ pass_index: 1, seq: 13, value: tv([1], [1]) }, { pass_index: 2, seq: 22, value: tv([1], [1]) }] },
        { id: "e2", source: "n3", target: "n2", kind: "leaf", output_nr: 0, requires_grad: true, grads: [] },
        { id: "e3", source: "n4", target: "n1", kind: "no_grad", output_nr: 0, requires_grad: false, grads: [] },
      ],
      modules: [
        { path: "", type: "Module", parent: null, hooks: [], parameters: [] },
        { path: "lin", type: "Mul", parent: "", hooks: [], parameters: ["lin.w"] },
      ],
    },
    events: ev,
    passes: [
      { index: 0, phase: "forward", label: "forward #1", step: null, first_seq: 0, last_seq: 8 },
      { index: 1, phase: "backward", label: "backward #1 of loss", step: 0, first_seq: 9, last_seq: 17 },
      { index: 2, phase: "backward", label: "backward #2 of loss", step: 1, first_seq: 18, last_seq: 26 },
    ],
    values: {},
    grads: {},
    analyses: { linear: [], grad_norms: [], diagnostics: [] },
    limits: { max_nodes: 4096, value_budget: 1000000, values_truncated: 0 },
  };
}

/** The documented node-state rule, written out naively (an independent oracle for frameAt). */
export function expectedStates(trace, i) {
  const events = trace.events;
  const cur = events[i].pass_index;
  const phase = trace.passes.find((p) => p.index === cur)?.phase ?? events[i].phase;
  const out = {};
  const ids = new Set(trace.graph.nodes.map((n) => n.id));
  const nodeOf = (e) => (e.node && ids.has(e.node) ? e.node : e.target && ids.has(e.target) ? e.target : null);
  for (const n of trace.graph.nodes) {
    const created = n.created_seq ?? events.findIndex((e) => e.kind === "node_created" && nodeOf(e) === n.id);
    if (created > i) { out[n.id] = "hidden"; continue; }
    let running = false;
    let finished = false;
    for (let s = 0; s <= i; s++) {
      const e = events[s];
      if (e.pass_index !== cur || nodeOf(e) !== n.id) continue;
      if (e.kind === "node_pre") running = true;
      if (e.kind === "node_post") { running = false; finished = true; }
      if (e.kind === "grad_write" && n.kind === "tensor") finished = true;
    }
    if (nodeOf(events[i]) === n.id || running) out[n.id] = "active";
    else if (phase === "backward" && finished) out[n.id] = "done";
    else out[n.id] = "shown";
  }
  return out;
}
