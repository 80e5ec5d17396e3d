// SVG only: draw(layout) builds the elements once per layout; paint(frame) only flips
// data-state attributes and chip texts (transitions live in graph.css). No fetch, no clock.

import { svgEl } from "./dom.js";
import { compactGradText, leafChipText, placeChips } from "./chips.js";
import { gradChipText, membersOf, nodeState, traceEdgeId } from "./export/states.js";
import { pointAlong } from "./export/xml.js";
import { chip, cullList, defs, drawGroup, drawNode, hookActionText, pathOf, setChip, tensorTitle } from "./shapes.js";

const CULL_ABOVE = 250; // drawn nodes past which off-screen elements are culled

export function createRenderer(svg) {
  let nodeEls = new Map(); // trace node id -> element
  let moduleEls = new Map(); // "m:<path>" -> element of a collapsed module
  let members = new Map(); // layout node id -> trace node ids it stands for
  let edgeEls = new Map();
  let chipEls = new Map();
  let compactEdges = new Set(); // edges whose chip only had room for the norm
  let leafChips = new Map();
  let fanChips = new Map();
  let valueChips = new Map();
  let badgeEls = [];
  let hookChip = null;
  let groupEls = []; // [{el, path, opens}]: a module box opens when its forward starts
  let lastStates = new Map();
  let layout = null;
  let boxes = new Map(); // trace node id -> the drawn box standing for it
  let cullables = []; // [{el, box, shown}] when the graph is big enough to cull
  const viewport = svgEl("g", { class: "gt-viewport" });
  svg.replaceChildren(defs(), viewport);
  svg.classList.add("gt-graph");

  function draw(newLayout, trace) {
    layout = newLayout;
    [nodeEls, moduleEls, edgeEls, chipEls, leafChips, fanChips, valueChips, lastStates] = [0, 0, 0, 0, 0, 0, 0, 0].map(() => new Map());
    members = membersOf(trace, layout);
    boxes = new Map();
    for (const n of layout.nodes) for (const id of members.get(n.id) || []) boxes.set(id, n);
    const spots = placeChips(layout, trace);
    compactEdges = new Set([...spots.edge].filter(([, s]) => s.compact).map(([id]) => id));
    const hooksByModule = new Map((trace.graph.modules || []).map((m) => [m.path, m.hooks || []]));
    const gGroups = svgEl("g", { class: "gt-groups" });
    const gEdges = svgEl("g", { class: "gt-edges" });
    const gNodes = svgEl("g", { class: "gt-nodes" });
    const gChips = svgEl("g", { class: "gt-chips" });
    for (const g of layout.groups) if (!g.collapsed) gGroups.append(drawGroup(g, hooksByModule));
    badgeEls = [...gGroups.querySelectorAll(".gt-badge")];
    const inside = (mod, path) => mod === path || (mod || "").startsWith(path + ".");
    groupEls = [...gGroups.children].map((el) => {
      const path = el.dataset.module;
      const pre = trace.events.find((ev) => ev.kind === "module_forward_pre" && inside(ev.module, path));
      const firstNode = Math.min(...trace.graph.nodes.filter((n) => inside(n.module, path)).map((n) => n.created_seq ?? 0));
      return { el, path, opens: Math.min(pre ? pre.seq : Infinity, firstNode), inside };
    });
    const at = (p) => `translate(${p.x.toFixed(1)},${p.y.toFixed(1)})`;
    for (const e of layout.edges) {
      const el = svgEl("g", { class: `gt-edge gt-edge--${e.kind}`, "data-edge-id": e.id, "data-source": e.source, "data-target": e.target, "data-state": "hidden" });
      el.append(svgEl("path", { d: pathOf(e.points) }));
      if (e.kind !== "no_grad") {
        // The pulse: one short coral dash that runs from the consumer back to the producer
        // while the gradient travels (graph.css animates it; reduced motion hides it).
        const len = e.points.slice(1).reduce((acc, p, i) => acc + Math.hypot(p.x - e.points[i].x, p.y - e.points[i].y), 0);
        el.append(svgEl("path", { class: "gt-pulse", d: pathOf(e.points), style: `--len:${len.toFixed(1)}` }));
      }
      gEdges.append(el);
      edgeEls.set(e.id, el);
      if (e.kind !== "no_grad") {
        const c = chip("gt-grad--edge", { "data-edge-id": e.id, transform: at(spots.edge.get(e.id) || pointAlong(e.points, 0.5)) });
        gChips.append(c);
        chipEls.set(e.id, c);
      }
    }
    for (const n of layout.nodes) {
      const el = drawNode(n);
      gNodes.append(el);
      if (n.kind === "module") moduleEls.set(n.id, el);
      else nodeEls.set(n.id, el);
      if (n.kind === "module") continue;
      if (n.kind === "tensor" && n.role === "parameter") {
        const c = chip("gt-grad--leaf", { "data-leaf": n.id, transform: at(spots.leaf.get(n.id) || { x: n.x + n.width, y: n.y + n.height + 11 }) });
        gChips.append(c);
        leafChips.set(n.id, c);
      }
      const f = chip("gt-grad--accumulate", { "data-fanin": n.id, transform: at({ x: n.x + 4, y: n.y - 4 }) });
      gChips.append(f);
      fanChips.set(n.id, f);
      const v = spots.value.get(n.id);
      if (v) {
        const c = chip("gt-value", { "data-value": n.id, transform: at(v) });
        c.setAttribute("class", "gt-value");
        setChip(c, v.text, "forward value");
        gChips.append(c);
        valueChips.set(n.id, c);
      }
    }
    hookChip = chip("gt-grad--hook", { "data-hook-chip": "" });
    gChips.append(hookChip);
    viewport.replaceChildren(gGroups, gEdges, gNodes, gChips);
    cullables = layout.nodes.length > CULL_ABOVE ? cullList(viewport) : [];
  }

  /**
   * Big graphs: detach off-screen elements (paint() still updates them while detached). In
   * Chromium any change inside an SVG re-lays out all of it, display:none children included:
   * measured ~170–200 ms per step at 1.3k nodes, ~1 ms once the off-screen ones are detached.
   */
  function cull(view) {
    if (!cullables.length) return;
    const m = Math.max(view.width, view.height) * 0.5;
    const x0 = view.x - m;
    const y0 = view.y - m;
    const x1 = view.x + view.width + m;
    const y1 = view.y + view.height + m;
    for (const c of cullables) {
      const on = c.box.x < x1 && c.box.x + c.box.width > x0 && c.box.y < y1 && c.box.y + c.box.height > y0;
      if (on !== c.shown) {
        c.shown = on;
        if (on) c.layer.append(c.el);
        else c.el.remove();
      }
    }
  }

  /** A copy of the whole drawing in its current frame, culled elements included (exports). */
  function snapshot() {
    const clone = svg.cloneNode(true);
    const layers = [...clone.querySelector(".gt-viewport").children];
    const byLayer = new Map([...viewport.children].map((l, i) => [l, layers[i]]));
    for (const c of cullables) if (!c.shown) byLayer.get(c.layer).append(c.el.cloneNode(true));
    return clone;
  }

  /** A user hook's action, shown beside the node it acted at, for that one step. */
  function paintHookAction(frame) {
    const ev = frame.event || {};
    const box = ev.kind === "hook_action" ? boxes.get(frame.about) : null;
    if (!box) return setState(hookChip, "hook", "hidden");
    const text = hookActionText(ev);
    setChip(hookChip, text, `hook #${ev.hook} ${JSON.stringify(ev.payload?.action || {})}`);
    const w = Number(hookChip.firstChild.getAttribute("width"));
    hookChip.setAttribute("transform", `translate(${box.x + box.width + 8 + w / 2},${box.y + box.height / 2})`);
    setState(hookChip, "hook", "active");
  }

  function setState(el, key, state) {
    if (lastStates.get(key) === state) return;
    lastStates.set(key, state);
    el.setAttribute("data-state", state);
  }

  function paint(frame) {
    if (!layout) return;
    for (const [id, el] of nodeEls) setState(el, id, frame.nodeStates.get(id) || "shown");
    // A collapsed module shows the liveliest state of its members.
    for (const [id, el] of moduleEls) setState(el, id, nodeState(frame, members.get(id) || []));
    for (const [id, c] of valueChips) setState(c, `v:${id}`, frame.nodeStates.get(id) === "hidden" ? "hidden" : "shown");
    for (const [id, el] of edgeEls) {
      const es = frame.edgeStates.get(traceEdgeId(id)) || { state: "shown", grad: null };
      setState(el, `e:${id}`, es.state);
      const c = chipEls.get(id);
      if (!c) continue;
      const visible = (es.state === "active" || es.state === "done") && es.grad !== null;
      if (visible) setChip(c, compactEdges.has(id) ? compactGradText(es.grad) : gradChipText(es.grad), `gradient ${tensorTitle(es.grad)}`);
      setState(c, `c:${id}`, visible ? es.state : "hidden");
    }
    for (const [id, c] of leafChips) {
      const g = frame.leafGrads.get(id);
      if (g) setChip(c, leafChipText(g), `.grad = ${tensorTitle(g)}`);
      setState(c, `l:${id}`, g && frame.nodeStates.get(id) !== "hidden" ? "shown" : "hidden");
    }
    for (const [id, c] of fanChips) {
      const count = frame.fanIn.get(id);
      const acc = frame.accumulated && frame.node === id;
      if (count || acc) setChip(c, count ? `+= ×${count}` : "+=", count ? `${count} gradients summed here` : ".grad accumulated (+=)");
      setState(c, `f:${id}`, count || acc ? "shown" : "hidden");
    }
    paintHookAction(frame);
    const mod = frame.event ? frame.event.module : null;
    for (const g of groupEls) {
      const state = frame.step < g.opens ? "hidden" : mod !== null && mod !== undefined && g.inside(mod, g.path) ? "active" : "shown";
      setState(g.el, `g:${g.path}`, state);
    }
    const ev = frame.event || {};
    for (const b of badgeEls) {
      const fired = ev.hook !== null && ev.hook !== undefined && String(ev.hook) === b.getAttribute("data-hook");
      b.classList.toggle("gt-badge--fired", fired);
    }
  }

  function select(id) {
    for (const el of svg.querySelectorAll(".gt-selected")) el.classList.remove("gt-selected");
    const el = id && (nodeEls.get(id) || moduleEls.get(id));
    if (el) el.classList.add("gt-selected");
  }

  /** The drawn box of a node (or of the collapsed module holding it), for the camera. */
  function boxOf(id) {
    return (id && boxes.get(id)) || null;
  }

  /** The drawn elements by id, culled ones included (compare mode marks them). */
  function elements() {
    return { nodes: nodeEls, edges: edgeEls };
  }

  return { draw, paint, select, boxOf, cull, snapshot, elements, viewport, get layout() { return layout; } };
}
