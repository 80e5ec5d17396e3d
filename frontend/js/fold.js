// What a big graph collapses into: runs of identical sibling modules (layers.0…11 of a
// transformer, the repeated (Linear, Tanh) children of a deep Sequential) fold into one
// expandable box with a count; what is still too big collapses module by module, as deep as
// fits the budget — never the root alone. Pure: the layout draws what this decides.

const MAX_PERIOD = 4; // a repeated block of up to 4 siblings: (Linear, Tanh), (conv, bn, relu)
const MIN_REPEATS = 3;

/** Module paths from outermost to innermost: "a.b.c" -> ["a", "a.b", "a.b.c"]. */
export function ancestry(path) {
  if (!path) return [];
  const parts = path.split(".");
  return parts.map((_, i) => parts.slice(0, i + 1).join("."));
}

const parentOf = (path) => (path.includes(".") ? path.slice(0, path.lastIndexOf(".")) : "");
const nameOf = (path) => path.slice(path.lastIndexOf(".") + 1);

/** Per module path: its type and what it computes (ops at relative sub-paths), as one string. */
function signatures(trace) {
  const types = new Map((trace.graph.modules || []).map((m) => [m.path, m.type || ""]));
  const parts = new Map();
  for (const n of trace.graph.nodes) {
    for (const p of ancestry(n.module)) {
      if (!parts.has(p)) parts.set(p, []);
      parts.get(p).push(`${n.module.slice(p.length)}:${n.op || n.kind}:${n.inserted ? 1 : 0}`);
    }
  }
  const out = new Map();
  for (const [p, list] of parts) out.set(p, `${types.get(p) || ""}|${list.sort().join(",")}`);
  return out;
}

/** True when data leaves the run and comes back into it (the box would need an upward edge). */
function leavesAndReturns(trace, inRun) {
  const next = new Map();
  for (const e of trace.graph.edges) {
    if (!next.has(e.source)) next.set(e.source, []);
    next.get(e.source).push(e.target);
  }
  const stack = [];
  for (const e of trace.graph.edges) if (inRun(e.source) && !inRun(e.target)) stack.push(e.target);
  const seen = new Set();
  while (stack.length) {
    const id = stack.pop();
    if (seen.has(id)) continue;
    seen.add(id);
    for (const t of next.get(id) || []) {
      if (inRun(t)) return true;
      stack.push(t);
    }
  }
  return false;
}

/**
 * Folds: [{id, parent, paths, count, period, types}] — each a maximal run of ≥ 3 repeats of a
 * block of 1–4 identical siblings (from 5 repeats on, all but the first and last block).
 * id is "<first path>~<last name>", e.g. "net.2~195".
 */
export function repeatedBlocks(trace) {
  const sig = signatures(trace);
  const types = new Map((trace.graph.modules || []).map((m) => [m.path, m.type || "module"]));
  const children = new Map();
  for (const m of trace.graph.modules || []) {
    if (!m.path || !sig.has(m.path)) continue;
    const parent = parentOf(m.path);
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(m.path);
  }
  const moduleOf = new Map(trace.graph.nodes.map((n) => [n.id, n.module || ""]));
  const folds = [];
  const folded = (path) => folds.some((f) => f.paths.some((p) => path === p || path.startsWith(p + ".")));
  const parents = [...children.keys()].sort((a, b) => ancestry(a).length - ancestry(b).length);
  for (const parent of parents) {
    if (parent && folded(parent)) continue;
    const kids = children.get(parent);
    for (let i = 0; i < kids.length; ) {
      let best = null;
      for (let k = 1; k <= MAX_PERIOD; k++) {
        let reps = 1;
        while (i + (reps + 1) * k <= kids.length && [...Array(k).keys()].every((t) => sig.get(kids[i + t]) === sig.get(kids[i + reps * k + t]))) reps++;
        if (reps >= MIN_REPEATS && (!best || reps * k > best.reps * best.k)) best = { k, reps };
      }
      if (!best) {
        i++;
        continue;
      }
      // Long runs keep their first and last block open: the reader sees what repeats, and
      // the animation enters and leaves through real nodes; the middle folds.
      const keep = best.reps >= MIN_REPEATS + 2 ? 1 : 0;
      const count = best.reps - 2 * keep;
      const paths = kids.slice(i + keep * best.k, i + (best.reps - keep) * best.k);
      const inside = (id) => paths.some((p) => moduleOf.get(id) === p || moduleOf.get(id).startsWith(p + "."));
      if (leavesAndReturns(trace, inside)) {
        i++;
        continue;
      }
      const blockTypes = paths.slice(0, best.k).map((p) => types.get(p));
      folds.push({ id: `${paths[0]}~${nameOf(paths[paths.length - 1])}`, parent, paths, count, period: best.k, types: blockTypes });
      i += best.reps * best.k;
    }
  }
  return folds;
}

/** Nodes drawn when `collapsed` (module paths and fold ids) is applied. */
function drawnCount(trace, keyOf) {
  const boxes = new Set();
  let loose = 0;
  for (const n of trace.graph.nodes) {
    const key = keyOf(n.module);
    if (key) boxes.add(key);
    else loose++;
  }
  return loose + boxes.size;
}

/** For a collapsed set: module path -> the collapsed key (outermost) that hides it, or null. */
export function collapseKeys(collapsed, folds) {
  const foldOf = new Map();
  for (const f of folds) if (collapsed.has(f.id)) for (const p of f.paths) foldOf.set(p, f.id);
  const cache = new Map();
  return (modulePath) => {
    if (!modulePath) return null;
    if (!cache.has(modulePath)) {
      let key = null;
      for (const p of ancestry(modulePath)) {
        if (foldOf.has(p)) key = foldOf.get(p);
        else if (collapsed.has(p)) key = p;
        if (key) break;
      }
      cache.set(modulePath, key);
    }
    return cache.get(modulePath);
  };
}

/** Rows the drawing of `keyOf`'s graph takes: its longest chain of drawn things (a collapsed
 * box is one), which sets a top-to-bottom picture's height (~80 px a row with its chips). */
function drawnRows(trace, keyOf) {
  const rep = new Map(trace.graph.nodes.map((n) => [n.id, keyOf(n.module) ? `m:${keyOf(n.module)}` : n.id]));
  const next = new Map([...new Set(rep.values())].map((r) => [r, new Set()]));
  const into = new Map([...next.keys()].map((r) => [r, 0]));
  for (const e of trace.graph.edges) {
    const a = rep.get(e.source);
    const b = rep.get(e.target);
    if (!a || !b || a === b || next.get(a).has(b)) continue;
    next.get(a).add(b);
    into.set(b, into.get(b) + 1);
  }
  const row = new Map([...next.keys()].map((r) => [r, 1]));
  const ready = [...into].filter(([, n]) => n === 0).map(([r]) => r);
  while (ready.length) {
    const a = ready.pop();
    for (const b of next.get(a)) {
      row.set(b, Math.max(row.get(b), row.get(a) + 1));
      into.set(b, into.get(b) - 1);
      if (into.get(b) === 0) ready.push(b);
    }
  }
  let most = 0;
  for (const r of row.values()) most = Math.max(most, r); // (no spread: 50,000 rows are too many arguments)
  return most;
}

/** A graph this small opens whole however tall it is (every gallery example does). */
const SMALL_GRAPH = 120;
/** Rows a bigger graph's default drawing may take: ~1,600 px, a picture that fits a docs page. */
export const ROW_BUDGET = 20;

/**
 * The default for big graphs (past `budget` nodes, or past SMALL_GRAPH nodes and `rows` rows):
 * fold repeated blocks, then collapse modules at the deepest depth that brings the drawing
 * under both budgets (GPT-2's blocks, each one box with the gradient's norm between them).
 * Small graphs: nothing.
 */
export function defaultCollapsed(trace, budget = 400, rows = ROW_BUDGET) {
  const nodes = trace.graph.nodes;
  // Folding and collapsing go by module: with no node in a module there is nothing to collapse
  // (a 50,000-op chain of loose tensor code is drawn whole, not searched for folds first).
  if (!nodes.some((n) => n.module)) return new Set();
  const none = collapseKeys(new Set(), []);
  if (nodes.length <= budget && (nodes.length <= SMALL_GRAPH || drawnRows(trace, none) <= rows)) return new Set();
  const folds = repeatedBlocks(trace);
  const collapsed = new Set(folds.map((f) => f.id));
  const over = (set) => {
    const keys = collapseKeys(set, folds);
    return Math.max(drawnCount(trace, keys) / budget, drawnRows(trace, keys) / rows);
  };
  if (over(collapsed) <= 1) return collapsed;
  const depthOf = (p) => ancestry(p).length;
  const maxDepth = nodes.reduce((d, n) => Math.max(d, depthOf(n.module)), 0);
  const atDepth = (d) => {
    const out = new Set(collapsed);
    for (const n of nodes) if (n.module && depthOf(n.module) >= d) out.add(ancestry(n.module)[d - 1]);
    return out;
  };
  // One box holding (nearly) everything teaches nothing: a depth that leaves a single box
  // only counts when nothing else is possible; past the budgets, the smallest drawing wins.
  let best = null;
  for (let d = maxDepth; d >= 1; d--) {
    const set = atDepth(d);
    const size = over(set);
    const boxes = set.size;
    if (boxes > 1 && size <= 1) return set;
    if (boxes > 1 && (!best || size < best.size)) best = { set, size };
  }
  return best ? best.set : atDepth(1);
}
