// The live view of the scene (scene.js): draw(layout, trace) turns the scene's element tree
// into DOM once per layout; paint(frame) applies the frame's looks (data-state, chip texts),
// touching only what changed (transitions live in graph.css). No fetch, no clock.

import { svgEl } from "./dom.js";
import { buildScene, chipRect } from "./scene.js";

const CULL_ABOVE = 250; // drawn nodes past which off-screen elements are detached

/** An element description (scene.js) as DOM. */
function toDom(node) {
  if (typeof node === "string") return node;
  return svgEl(node.t, node.a, node.c.map(toDom));
}

export function createRenderer(svg) {
  let scene = null;
  let layout = null;
  let items = []; // [{key, kind, el, box, layer, shown, look}]
  let byKey = new Map();
  let selected = null; // the selected node id (applied to its element when it is created)
  const viewport = svgEl("g", { class: "gt-viewport" });
  svg.replaceChildren(viewport);
  svg.classList.add("gt-graph");

  /** Draw `newLayout` of `trace`; `built`: its scene, when built already (buildSceneInSlices). */
  function draw(newLayout, trace, built = null) {
    layout = newLayout;
    scene = built || buildScene(layout, trace);
    const layerEls = [];
    items = [];
    // Big graphs create an element only once it comes near the screen (cull), small ones all now.
    const lazy = layout.nodes.length > CULL_ABOVE;
    for (const [name, list] of Object.entries(scene.layers)) {
      const layer = svgEl("g", { class: `gt-${name}` });
      for (const node of list) {
        const later = lazy && node.key && node.box;
        const element = later ? null : toDom(node);
        if (element) layer.append(element);
        if (node.key) items.push({ key: node.key, kind: node.kind, node, el: element, box: lazy ? node.box : null, layer, shown: !later, look: null });
      }
      layerEls.push(layer);
    }
    byKey = new Map(items.map((it) => [it.key, it]));
    svg.replaceChildren(toDom(scene.defs), viewport);
    viewport.replaceChildren(...layerEls);
  }

  /** Apply one element's look to its DOM (the exports apply the same looks with scene.withLook). */
  function apply(it, look) {
    if (!it.el) {
      it.look = look; // applied when the element is created
      return;
    }
    const last = it.look;
    if (last && last.state === look.state && last.text === look.text && last.at === look.at) return;
    it.look = look;
    if (!last || last.state !== look.state) it.el.setAttribute("data-state", look.state);
    if (look.at) it.el.setAttribute("transform", `translate(${look.at.x.toFixed(1)},${look.at.y.toFixed(1)})`);
    if (it.kind !== "chip" || look.text === undefined || (last && last.text === look.text)) return;
    const [rect, text] = it.el.children;
    text.textContent = look.text;
    const r = chipRect(look.text);
    rect.setAttribute("width", r.width);
    rect.setAttribute("x", r.x);
    let title = it.el.querySelector("title");
    if (!title) it.el.append((title = svgEl("title")));
    title.textContent = look.title || "";
  }

  function paint(frame) {
    if (!scene) return;
    for (const [key, look] of scene.looks(frame)) {
      const it = byKey.get(key);
      if (it) apply(it, look);
    }
  }

  /**
   * Big graphs: detach off-screen elements (paint() still updates them while detached). In
   * Chromium any change inside an SVG re-lays out all of it, display:none children included:
   * measured ~170–200 ms per step at 1.3k nodes, ~1 ms once the off-screen ones are detached.
   */
  function cull(view) {
    const m = Math.max(view.width, view.height) * 0.5;
    const x0 = view.x - m;
    const y0 = view.y - m;
    const x1 = view.x + view.width + m;
    const y1 = view.y + view.height + m;
    for (const it of items) {
      if (!it.box) continue;
      const on = it.box.x < x1 && it.box.x + it.box.width > x0 && it.box.y < y1 && it.box.y + it.box.height > y0;
      if (on !== it.shown) {
        it.shown = on;
        if (on && !it.el) {
          it.el = toDom(it.node);
          const look = it.look;
          it.look = null;
          if (look) apply(it, look);
          if (selected && it.key === `n:${selected}`) it.el.classList.add("gt-selected");
        }
        if (on) it.layer.append(it.el);
        else it.el.remove();
      }
    }
  }

  function select(id) {
    for (const e of svg.querySelectorAll(".gt-selected")) e.classList.remove("gt-selected");
    selected = id;
    const it = id && byKey.get(`n:${id}`);
    if (it && it.el) it.el.classList.add("gt-selected");
  }

  /** The drawn box of a node (or of the collapsed module holding it), for the camera. */
  function boxOf(id) {
    return scene ? scene.boxOf(id) : null;
  }

  /**
   * The elements by trace id ({nodes, edges}: id -> element), every one of them: those a big graph
   * has not created yet are made now (and attached when they come on screen). Compare mode marks them.
   */
  function elements() {
    const nodes = new Map();
    const edges = new Map();
    for (const it of items) {
      if (!it.el) {
        it.el = toDom(it.node);
        const look = it.look;
        it.look = null;
        if (look) apply(it, look);
      }
      if (it.key.startsWith("n:")) nodes.set(it.key.slice(2), it.el);
      else if (it.key.startsWith("e:")) edges.set(it.key.slice(2), it.el);
    }
    return { nodes, edges };
  }

  return {
    draw,
    paint,
    select,
    boxOf,
    cull,
    elements,
    viewport,
    get layout() {
      return layout;
    },
    get scene() {
      return scene;
    },
  };
}
