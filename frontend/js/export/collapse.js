// Which modules a still picture collapses. The viewer collapses every top-level module past
// 400 nodes and lets the reader expand them; a picture cannot be expanded, so it collapses as
// deep as it can while staying under the same budget (8 encoder layers as 8 boxes, not one).

function depthOf(path) {
  return path ? path.split(".").length : 0;
}

/** Paths at `depth` that hold nodes (a node in "a.b.c" is inside "a.b" at depth 2). */
function pathsAt(nodes, depth) {
  const out = new Set();
  for (const n of nodes) if (n.module && depthOf(n.module) >= depth) out.add(n.module.split(".").slice(0, depth).join("."));
  return out;
}

/** Nodes drawn when every module at `depth` is collapsed into one box. */
function drawnCount(nodes, depth) {
  const outside = nodes.filter((n) => !n.module || depthOf(n.module) < depth).length;
  return outside + pathsAt(nodes, depth).size;
}

/** The collapsed set for an exported picture: none under `budget` nodes, else the deepest fit. */
export function exportCollapsed(trace, budget = 400) {
  const nodes = trace.graph.nodes;
  if (nodes.length <= budget) return new Set();
  const maxDepth = Math.max(0, ...nodes.map((n) => depthOf(n.module)));
  for (let d = maxDepth; d >= 1; d--) if (drawnCount(nodes, d) <= budget) return pathsAt(nodes, d);
  return pathsAt(nodes, 1);
}
