// Which modules a still picture collapses. By default the viewer's own rule (fold.js): a big
// graph folds its repeated blocks (a 100-layer chain: its first and last block, and one box
// "×98" between), then collapses modules as deep as fits the budget. With a `depth`, as
// torchview's: every module at that depth is one box (its insides hidden: its type, output
// shape and size on the box), the modules above it are open boxes, and repeated blocks fold.

import { ancestry, defaultCollapsed, repeatedBlocks } from "../fold.js";

/** Paths at `depth` that hold nodes (a node in "a.b.c" is inside "a.b" at depth 2). */
function pathsAt(nodes, depth) {
  const out = new Set();
  for (const n of nodes) {
    const chain = ancestry(n.module);
    if (chain.length >= depth) out.add(chain[depth - 1]);
  }
  return out;
}

/** The collapsed set (module paths and fold ids) for an exported picture. `depth`: null (the
 * viewer's default) or a whole number ≥ 1. */
export function exportCollapsed(trace, { depth = null, budget = 400 } = {}) {
  if (depth === null || depth === undefined) return defaultCollapsed(trace, budget);
  if (!Number.isInteger(depth) || depth < 1) throw new RangeError(`depth must be a whole number from 1 (got ${depth})`);
  return new Set([...repeatedBlocks(trace).map((f) => f.id), ...pathsAt(trace.graph.nodes, depth)]);
}
