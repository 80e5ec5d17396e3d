// Compare mode (#…&compare=<example or permalink id>): the graph on screen is trace b, the
// other spec is a (the baseline); POST /api/v1/compare says what changed. Every edge and node
// whose gradient changed is marked on the graph with its factor (×2), nodes only this trace has
// are outlined, and a panel lists every final gradient with its numbers, a vs b. The numbers
// are the traces' own (the server compares them); nothing is recomputed here.

import { h, svgEl } from "./dom.js";
import { formatNumber, formatTensorInline } from "./format.js";
import { traceEdgeId } from "./scene.js";
import { pointAlong } from "./chips.js";

/** "×2", "×0.5", "×−1", or "changed" when b is not a scaled copy of a. */
export function ratioText(ratio) {
  if (ratio === null || ratio === undefined) return "changed";
  const text = formatNumber(ratio);
  return `×${text.includes(".") && !text.includes("e") ? text.replace(/\.?0+$/, "") : text}`;
}

/** One factor for several diffs of one thing (its passes): the common ratio, or null. */
function commonRatio(diffs) {
  const ratios = diffs.map((d) => d.ratio);
  return ratios.length && ratios.every((r) => r !== null && r !== undefined && r === ratios[0]) ? ratios[0] : null;
}

/**
 * What to mark on trace b's graph: `edges` and `nodes` (id -> ratio or null) whose gradient
 * changed — an edge when the gradient along it did in some pass, a node when the gradient
 * flowing into its output (an edge leaving it) did, or a leaf whose final .grad did — and
 * `onlyHere`, the nodes trace a does not have.
 */
export function compareMarks(trace, diff) {
  const edges = new Map();
  for (const m of diff.edges.matched) {
    const changed = m.grads.filter((g) => g.status === "changed");
    if (changed.length) edges.set(m.b, commonRatio(changed));
  }
  const byEdge = new Map(trace.graph.edges.map((e) => [e.id, e]));
  const nodes = new Map();
  for (const [id, ratio] of edges) {
    const source = byEdge.get(id)?.source;
    if (source === undefined) continue;
    nodes.set(source, nodes.has(source) && nodes.get(source) !== ratio ? null : ratio);
  }
  const grads = new Map(diff.grads.filter((d) => d.status === "changed").map((d) => [d.name, d.ratio]));
  for (const n of trace.graph.nodes) if (n.kind === "tensor" && grads.has(n.tensor)) nodes.set(n.id, grads.get(n.tensor));
  return { edges, nodes, onlyHere: new Set(diff.nodes.only_b) };
}

/** The link that opens an example compared with its gallery partner. */
export function compareHref(exampleId, compareWith) {
  return `#${new URLSearchParams({ example: exampleId, compare: compareWith })}`;
}

const SHORT_STATUS = { unchanged: "same", no_gradient: "None", only_a: "only a", only_b: "only b" };
const STATUS_TEXT = {
  changed: "changed",
  unchanged: "unchanged",
  only_a: "only in the other",
  only_b: "only in this one",
  no_gradient: "no gradient in either",
  not_comparable: "not comparable (stats only)",
};

function badge(text, x, y, anchor) {
  // text-anchor as a style: graph.css centres every text, and CSS beats a presentation attribute
  const label = svgEl("text", { class: "gt-compare-badge-text", x, y, style: `text-anchor: ${anchor}` }, [text]);
  return svgEl("g", { class: "gt-compare-badge" }, [label]);
}

/**
 * Marks `marks` on what `renderer` drew (culled elements included): classes on the changed edges
 * and nodes, a factor a quarter along each edge from its source (inside the edge, so shown and
 * hidden with it, clear of its gradient chip at the middle), "only here" left of the nodes a lacks.
 */
export function markGraph(renderer, marks) {
  markElements(renderer.elements(), renderer.layout?.edges ?? [], marks);
}

/** The same marks on an exported picture of the scene (its elements carry the same ids). */
export function markSvgText(svgText, layoutEdges, marks) {
  if (!marks) return svgText;
  const doc = new DOMParser().parseFromString(svgText, "image/svg+xml");
  // the node and edge groups (gradient chips carry data-edge-id too)
  const byId = (selector, attr) => new Map([...doc.querySelectorAll(selector)].map((el) => [el.getAttribute(attr), el]));
  markElements({ nodes: byId("g.gt-node[data-node-id]", "data-node-id"), edges: byId("g.gt-edge[data-edge-id]", "data-edge-id") }, layoutEdges, marks);
  return new XMLSerializer().serializeToString(doc);
}

function markElements({ nodes, edges }, layoutEdges, marks) {
  for (const el of [...nodes.values(), ...edges.values()]) {
    el.classList.remove("gt-compare-changed", "gt-compare-only");
    for (const b of el.querySelectorAll(".gt-compare-badge")) b.remove();
  }
  if (!marks) return;
  const points = new Map(layoutEdges.map((e) => [e.id, e.points]));
  for (const [layoutId, el] of edges) {
    const id = traceEdgeId(layoutId);
    if (!marks.edges.has(id)) continue;
    el.classList.add("gt-compare-changed");
    const p = pointAlong(points.get(layoutId), 0.25);
    el.append(badge(ratioText(marks.edges.get(id)), p.x + 6, p.y, "start"));
  }
  for (const [id, el] of nodes) {
    if (marks.onlyHere.has(id)) {
      el.classList.add("gt-compare-only");
      // left of the box, at its middle (a node a lacks has no factor there): above it, the
      // badge covered the title of the module box or the label of the node just above
      const mid = Number(el.querySelector("rect")?.getAttribute("height") || 24) / 2;
      el.append(badge("only here", -6, mid, "end"));
    }
    if (!marks.nodes.has(id)) continue;
    el.classList.add("gt-compare-changed");
    el.append(badge(ratioText(marks.nodes.get(id)), -6, 12, "end"));
  }
}

function gradRow(diff, traceA, traceB) {
  const ratio = diff.status === "changed" ? ratioText(diff.ratio) : "";
  return h("tr", { class: `compare-row is-${diff.status}`, "data-name": diff.name, "data-status": diff.status }, [
    h("th", { scope: "row", text: diff.name }),
    h("td", { class: "num", text: diff.status === "only_b" ? "—" : formatTensorInline(traceA.grads?.[diff.name] ?? null, 4) }),
    h("td", { class: "num", text: diff.status === "only_a" ? "—" : formatTensorInline(traceB.grads?.[diff.name] ?? null, 4) }),
    h("td", { class: "compare-status", title: `${STATUS_TEXT[diff.status]}${diff.max_abs_diff === null ? "" : `, largest difference ${formatNumber(diff.max_abs_diff)}`}`, text: ratio || SHORT_STATUS[diff.status] || STATUS_TEXT[diff.status] }),
  ]);
}

/** One edge's gradient in a and in b (its last pass in each), with what changed. */
function edgeRow(match, traceA, traceB) {
  const edgeA = traceA.graph.edges.find((e) => e.id === match.a);
  const edgeB = traceB.graph.edges.find((e) => e.id === match.b);
  const changed = match.grads.filter((g) => g.status === "changed");
  const status = changed.length ? "changed" : match.grads.every((g) => g.status === "unchanged") ? "unchanged" : match.grads[0].status;
  const gradOf = (edge) => formatTensorInline(edge?.grads?.at(-1)?.value ?? null, 4);
  return h("tr", { class: `compare-row is-${status}`, "data-edge": match.b, "data-status": status }, [
    h("th", { scope: "row", title: `${describeNode(traceB, edgeB?.target)} → ${describeNode(traceB, edgeB?.source)}`, text: `${shortName(traceB, edgeB?.target)} → ${shortName(traceB, edgeB?.source)}` }),
    h("td", { class: "num", text: gradOf(edgeA) }),
    h("td", { class: "num", text: gradOf(edgeB) }),
    h("td", { class: "compare-status", title: STATUS_TEXT[status] ?? status, text: changed.length ? ratioText(commonRatio(changed)) : SHORT_STATUS[status] || STATUS_TEXT[status] }),
  ]);
}

/** A node as an edge row names it: a leaf by its name, an op by its class (and the tensor it made). */
function shortName(trace, id) {
  const n = trace.graph.nodes.find((x) => x.id === id);
  if (!n) return id ?? "?";
  return n.kind === "tensor" ? n.label : n.tensor && n.op !== "AccumulateGrad" ? `${n.op} (${n.tensor})` : n.op;
}

function describeNode(trace, id) {
  const n = trace.graph.nodes.find((x) => x.id === id);
  if (!n) return id;
  return n.kind === "tensor" ? n.label : `${n.op}${n.module ? " in " + n.module : ""}`;
}

const actionText = (action) => (action ? JSON.stringify(action) : "no action");

/** A hook that differs: "full_backward on f1: no action → {…}", "backward on f1: only in a". */
function hookText(hook) {
  const what = `${hook.type} on ${hook.where}`;
  if (hook.status === "only_a") return `${what}: only in a`;
  if (hook.status === "only_b") return `${what}: only in b`;
  return `${what}: ${actionText(hook.action_a)} → ${actionText(hook.action_b)}`;
}

/** Every matched edge that carried a gradient in both, a vs b, folded under a summary line. */
function edgesPanel(diff, traceA, traceB) {
  const withGrads = diff.edges.matched.filter((m) => m.grads.length);
  if (!withGrads.length) return null;
  const changed = withGrads.filter((m) => m.grads.some((g) => g.status === "changed")).length;
  return h("details", { class: "compare-edges" }, [
    h("summary", { text: `gradients along the edges: ${changed} of ${withGrads.length} changed (last backward)` }),
    h("table", { class: "compare-grads" }, [
      h("thead", {}, [h("tr", {}, [h("th", { text: "edge", title: "consumer → producer: the way the gradient flows" }), h("th", { text: "a" }), h("th", { text: "b" }), h("th", { text: "b vs a" })])]),
      h("tbody", {}, withGrads.map((m) => edgeRow(m, traceA, traceB))),
    ]),
  ]);
}

/** The panel's content: what a and b are, the final gradients a vs b, hooks, unmatched nodes. */
export function comparePanel(diff, traceA, traceB, { titleA, onClose }) {
  const changed = diff.grads.filter((d) => d.status === "changed").length;
  const hooks = diff.hooks.filter((x) => x.status !== "same");
  const onlyA = diff.nodes.only_a.map((id) => describeNode(traceA, id));
  const onlyB = diff.nodes.only_b.map((id) => describeNode(traceB, id));
  return [
    h("header", {}, [
      h("h2", { text: "Compare" }),
      h("button", { type: "button", class: "compare-close", "aria-label": "Stop comparing", title: "Stop comparing", text: "×", onclick: onClose }),
    ]),
    h("p", { class: "compare-sides" }, ["a: ", h("strong", { text: titleA }), h("br"), "b (drawn): ", h("strong", { text: diff.b.title })]),
    h("p", { class: "compare-summary", text: `${changed} of ${diff.grads.length} gradients changed · ${diff.summary.changed_edges.length} edges marked on the graph (thick orange, with b's factor over a's)${diff.nodes.only_b.length ? "; nodes only b has are outlined dashed" : ""}` }),
    h("table", { class: "compare-grads" }, [
      h("thead", {}, [h("tr", {}, [h("th", { text: ".grad" }), h("th", { text: "a" }), h("th", { text: "b" }), h("th", { text: "b vs a" })])]),
      h("tbody", {}, diff.grads.map((d) => gradRow(d, traceA, traceB))),
    ]),
    edgesPanel(diff, traceA, traceB),
    hooks.length ? h("p", { class: "muted compare-hooks", text: `hooks: ${hooks.map(hookText).join("; ")}` }) : null,
    diff.summary.changed_values.length ? h("p", { class: "muted", text: `forward values changed: ${diff.summary.changed_values.join(", ")}` }) : null,
    onlyB.length ? h("p", { class: "muted", text: `only in b (outlined): ${onlyB.join(", ")}` }) : null,
    onlyA.length ? h("p", { class: "muted", text: `only in a: ${onlyA.join(", ")}` }) : null,
  ];
}

/**
 * The inspector's section for node `id` of trace b: what it matched in a, and the gradients
 * at it (a leaf's .grad; the gradient along each edge into its output), a vs b.
 */
export function nodeCompareSection(diff, traceA, traceB, id) {
  const node = traceB.graph.nodes.find((n) => n.id === id);
  if (!node) return null;
  const match = diff.nodes.matched.find((m) => m.b === id);
  const rows = [];
  const grad = node.kind === "tensor" ? diff.grads.find((d) => d.name === node.tensor) : null;
  if (grad) rows.push(gradRow(grad, traceA, traceB));
  const sources = new Map(traceB.graph.edges.map((e) => [e.id, e.source]));
  for (const m of diff.edges.matched) if (m.grads.length && sources.get(m.b) === id) rows.push(edgeRow(m, traceA, traceB));
  return h("section", { class: "compare-node", "data-section": "compare" }, [
    h("h3", { text: "Compare with a" }),
    h("p", { class: "muted", text: match ? `matched with ${match.a} in a: ${match.key}` : "only in b: trace a has no such node" }),
    rows.length
      ? h("table", { class: "compare-grads" }, [
          h("thead", {}, [h("tr", {}, [h("th", { text: "gradient" }), h("th", { text: "a" }), h("th", { text: "b" }), h("th", { text: "b vs a" })])]),
          h("tbody", {}, rows),
        ])
      : null,
  ]);
}

/**
 * The controller: `load(trace)` compares the drawn trace with `store.compare` (or clears the
 * mode), `mark()` re-applies the marks after every redraw. The "compare with …" link follows
 * the current example's gallery partner. body[data-compare] says "loading" | "ready" | "error".
 */
export function createCompare({ store, api, panel, link, renderer, inspector }) {
  let marks = null;
  let shown = null; // {diff, traceA, traceB} while comparing
  let marksFor = null; // the trace the marks belong to
  let examples = null;
  let loaded = 0; // the latest load wins
  const body = document.body;

  async function gallery() {
    examples ??= await api.examples();
    return examples;
  }

  async function updateLink() {
    const { example, spec, compare } = store.get();
    const entry = (await gallery()).find((e) => e.id === example);
    const partner = entry?.compare_with;
    const partnerTitle = examples.find((e) => e.id === partner)?.title ?? partner;
    link.hidden = !partner || Boolean(spec) || compare === partner;
    if (partner) {
      link.href = compareHref(example, partner);
      link.textContent = `compare with “${partnerTitle}”`;
    }
  }

  /** Adds the compare section for node `id` to the inspector (after it was rendered). */
  function inspect(id) {
    inspector.querySelector(".compare-node")?.remove();
    const section = shown && id ? nodeCompareSection(shown.diff, shown.traceA, shown.traceB, id) : null;
    if (!section) return;
    const head = inspector.querySelector(":scope > header"); // right under the node's name: it is why we compare
    if (head) head.after(section);
    else inspector.append(section);
  }

  function clear() {
    // (unmarking makes every element of a big graph, culled ones included: only when marked)
    const marked = marks;
    marks = null;
    shown = null;
    inspect(null);
    if (marked) markGraph(renderer, null);
    panel.hidden = true;
    panel.replaceChildren();
    delete body.dataset.compare;
  }

  async function load(trace) {
    const token = ++loaded;
    const target = store.get().compare;
    updateLink().catch(() => (link.hidden = true)); // no gallery, no partner to offer (bootFull reports the outage)
    if (!target) return clear();
    body.dataset.compare = "loading";
    panel.hidden = false;
    panel.replaceChildren(h("p", { class: "muted", text: `comparing with ${target}…` }));
    try {
      const entry = (await gallery()).find((e) => e.id === target);
      const a = entry ? await api.example(target) : target; // an example's spec, or a permalink id
      const [diff, traceA] = await Promise.all([api.compare(a, trace.spec), entry ? api.traceOf(a) : api.savedTrace(target)]);
      if (token !== loaded) return;
      marks = compareMarks(trace, diff);
      marksFor = trace;
      shown = { diff, traceA, traceB: trace };
      inspect(store.get().node);
      markGraph(renderer, marks);
      panel.replaceChildren(...comparePanel(diff, traceA, trace, { titleA: entry?.title ?? traceA.title, onClose: () => store.set({ compare: "" }) }).filter(Boolean));
      body.dataset.compare = "ready";
      // compare mode opens on the finished backward, unless the user is elsewhere than the
      // opening view (step 0, or the end of the forward where an example opens)
      const opening = (trace.passes || []).find((p) => p.phase === "forward")?.last_seq ?? 0;
      if ([0, opening].includes(store.get().step)) store.set({ step: trace.events.length - 1 });
    } catch (err) {
      if (token !== loaded) return;
      marks = null;
      shown = null;
      markGraph(renderer, null);
      panel.replaceChildren(h("p", { class: "error", text: `cannot compare with ${target}: ${err.message}` }));
      body.dataset.compare = "error";
    }
  }

  return {
    load,
    inspect,
    /**
     * After a redraw of `trace`: its marks again (none while another trace's are pending). A
     * redraw's elements are new and unmarked: with no marks there is nothing to clear, and a big
     * graph's culled elements are not all made just to be cleared (2,000 nodes: ~150 ms).
     */
    mark: (trace) => {
      if (trace === marksFor && marks) markGraph(renderer, marks);
    },
    /** An exported picture of `trace` with the same marks. */
    decorate: (svgText, trace) => markSvgText(svgText, renderer.layout?.edges ?? [], trace === marksFor ? marks : null),
  };
}
