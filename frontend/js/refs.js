// The references inside a trace document, checked before anything draws it: an edge's ends, an
// event's node, a leaf's AccumulateGrad and back must name nodes the graph has. A file edited by
// hand (or cut short and patched) can name a node that is not there; the viewer then says which
// reference is wrong instead of failing somewhere in the layout or the timeline. Pure, one pass.

/** How many dangling references a message names before it counts the rest. */
const NAMED = 3;

/**
 * The dangling references of a parsed trace `doc` (its graph.nodes, graph.edges and events
 * already known to be arrays): [{where, field, id}] in document order, at most `limit` of them,
 * and `total`, how many there are.
 */
export function danglingReferences(doc, limit = NAMED) {
  const ids = new Set();
  for (const n of doc.graph.nodes) if (n && typeof n.id === "string") ids.add(n.id);
  const found = [];
  let total = 0;
  const check = (where, field, id) => {
    if (id === null || id === undefined || ids.has(id)) return;
    total += 1;
    if (found.length < limit) found.push({ where, field, id });
  };
  doc.graph.nodes.forEach((n, i) => {
    if (!n || typeof n.id !== "string") {
      total += 1;
      if (found.length < limit) found.push({ where: `graph.nodes[${i}]`, field: "id", id: n?.id ?? null });
      return;
    }
    check(`node ${n.id}`, "variable", n.variable);
    check(`node ${n.id}`, "grad_fn", n.grad_fn);
  });
  doc.graph.edges.forEach((e, i) => {
    const name = typeof e?.id === "string" ? `edge ${e.id}` : `graph.edges[${i}]`;
    check(name, "source", e?.source ?? "");
    check(name, "target", e?.target ?? "");
  });
  doc.events.forEach((ev, i) => check(`event ${i}${ev?.kind ? ` (${ev.kind})` : ""}`, "node", ev?.node));
  return { found, total };
}

/** One sentence naming the dangling references of `doc`, or "" when every reference resolves. */
export function referenceProblem(doc) {
  const { found, total } = danglingReferences(doc);
  if (!total) return "";
  const named = found.map((r) => (r.field === "id" ? `${r.where} has no string id` : `${r.where}'s ${r.field} ${JSON.stringify(r.id)}`));
  const more = total > found.length ? ` and ${total - found.length} more` : "";
  return `it names nodes its graph does not have: ${named.join("; ")}${more} (the file was changed or cut short; trace the model again)`;
}
