// Pan, zoom, fit, follow-the-active-node and the minimap. Owns one transform on the viewport
// group; knows nothing about traces or frames.

import { svgEl } from "./dom.js";

// A fit frames what is drawn (nodes, module boxes and their badges, edges, chips) with this
// margin, not the scene's empty padding: on a 1440×900 screen those pixels decide whether a
// 12-layer graph fits with readable text.
const FIT_PAD = 2;
const EXTENT_MARGIN = 4; // graph px around the drawn boxes: strokes of a running or selected node
const MINIMAP_CLEAR = 4; // screen px kept free around the minimap (a node's stroke, its glow)

/**
 * insetTop: screen px at the top that tools float over (a player's folded legend, Fit, zoom):
 * a fitted graph starts below them, so its first node is never hidden.
 * readableZoom: the zoom at which the graph's smallest text is readable (the caller derives it
 * from the text metrics); the opening view never goes below it for graphs that do not fit.
 */
export function createCamera(svg, viewport, minimapSvg, { onView = () => {}, readableZoom: minZoom = 1, insetTop = 0 } = {}) {
  // The transform is written with 4 decimals: round up, or 11/11.5 would print as 10.9998 px.
  const readableZoom = Math.ceil(minZoom * 1e4) / 1e4;
  let k = 1;
  let tx = 0;
  let ty = 0;
  let content = { width: 1, height: 1 };
  let extent = { x: 0, y: 0, width: 1, height: 1 }; // the drawn part of the content
  let nodes = []; // the nodes' boxes
  let bottom = null; // the lowest node's box (the loss, just built): what the opening view shows
  let miniView = null;
  let userMoved = false;

  // The panel's size, cached: measuring on every step would force a page layout each time.
  let cached = null;
  const size = () => {
    if (!cached) {
      const r = svg.getBoundingClientRect();
      cached = { w: r.width || 800, h: r.height || 600 };
    }
    return cached;
  };
  let followed = null; // the box follow() last kept in view
  let framed = false; // a view has been set: a resize re-frames it unless the reader moved it
  if (typeof ResizeObserver !== "undefined") {
    new ResizeObserver(() => {
      cached = null;
      if (!framed || userMoved) return;
      home();
      if (followed) follow(followed); // the node the camera follows stays in view (a page opened on a step)
    }).observe(svg);
  }

  function apply() {
    viewport.setAttribute("transform", `translate(${tx.toFixed(1)},${ty.toFixed(1)}) scale(${k.toFixed(4)})`);
    if (miniView) {
      const { w, h } = size();
      miniView.setAttribute("x", -tx / k);
      miniView.setAttribute("y", -ty / k);
      miniView.setAttribute("width", w / k);
      miniView.setAttribute("height", h / k);
    }
    const { w, h } = size();
    const view = { x: -tx / k, y: -ty / k, width: w / k, height: h / k };
    // The minimap is for finding your way; with the whole graph on screen it would only cover part of it.
    const whole = view.x <= extent.x + 0.5 && view.y <= extent.y + 0.5 && view.x + view.width >= extent.x + extent.width - 0.5 && view.y + view.height >= extent.y + extent.height - 0.5;
    minimapSvg?.classList.toggle("is-whole", whole);
    onView(view);
  }

  /** The zoom that fits the whole drawing in the panel (never zooming in past 1.25). */
  function fitZoom() {
    const { w, h } = size();
    return Math.min((w - 2 * FIT_PAD) / extent.width, (h - insetTop - 2 * FIT_PAD) / extent.height, 1.25);
  }

  /** Fit the whole graph in the panel, centred. */
  function fit() {
    const { w, h } = size();
    k = fitZoom();
    tx = (w - extent.width * k) / 2 - extent.x * k;
    ty = insetTop + (h - insetTop - extent.height * k) / 2 - extent.y * k;
    userMoved = false;
    apply();
  }

  /**
   * The opening view: the whole graph when it fits with its text readable (≥ READABLE_PX on
   * screen); otherwise readable text, the graph's bottom (the loss, just built) in view, and
   * the camera following the animation from there.
   */
  function home() {
    if (fitZoom() >= readableZoom) return fit();
    const { w, h } = size();
    k = readableZoom;
    // centred on the lowest node, not on the picture: a deep graph may slant, and its middle
    // column at the bottom can be empty
    const cx = bottom ? bottom.x + bottom.width / 2 : content.width / 2;
    tx = clampAxis(w / 2 - cx * k, w, content.width * k);
    ty = clampAxis(h - FIT_PAD - content.height * k, h, content.height * k);
    uncutTop();
    userMoved = false;
    apply();
    clearMinimap();
  }

  /** No node cut in half by the top edge: move the picture up past it (the loss stays in view). */
  function uncutTop() {
    for (let i = 0; i < 16; i++) {
      const cut = nodes.find((n) => n !== bottom && n.y * k + ty < -0.5 && (n.y + n.height) * k + ty > 0.5);
      if (!cut) break;
      ty = -(cut.y + cut.height) * k - 2;
    }
  }

  /**
   * The opening view keeps every node clear of the minimap: the graph's bottom corner, where the
   * loss and the last layer's ops sit, is where the minimap stands. It takes the other bottom
   * corner when no node is there, else the picture moves up above it (the loss stays in view,
   * the strip beside the minimap is left empty).
   */
  function clearMinimap() {
    if (!minimapSvg) return;
    minimapSvg.classList.remove("is-dodging");
    if (!nodes.some((n) => covers(minimapRect(), n))) return;
    minimapSvg.classList.add("is-dodging");
    if (!nodes.some((n) => covers(minimapRect(), n))) return;
    minimapSvg.classList.remove("is-dodging");
    const m = minimapRect();
    if (!m) return;
    for (let i = 0; i < 16; i++) {
      const under = nodes.filter((n) => covers(m, n));
      if (!under.length) break;
      const rise = Math.max(...under.map((n) => (n.y + n.height) * k + ty)) - m.top + 1;
      // (a panel too small for both: the loss stays on screen, under the minimap if it must)
      if (bottom && (bottom.y + bottom.height) * k + ty - rise < bottom.height * k + FIT_PAD) break;
      ty -= rise;
      uncutTop();
    }
    apply();
  }

  /** The minimap's box in the panel's px, where it stands now; null when it is not shown. */
  function minimapRect() {
    if (!minimapSvg || minimapSvg.classList.contains("is-whole")) return null;
    const m = minimapSvg.getBoundingClientRect();
    if (!m.width) return null; // hidden (a narrow screen)
    const s = svg.getBoundingClientRect();
    const c = MINIMAP_CLEAR;
    return { left: m.left - s.left - c, top: m.top - s.top - c, right: m.right - s.left + c, bottom: m.bottom - s.top + c };
  }

  /** Whether a panel rect (minimapRect) covers the box (in graph coordinates) in the view now. */
  function covers(m, box) {
    if (!m) return false;
    const left = box.x * k + tx;
    const top = box.y * k + ty;
    return left < m.right && left + box.width * k > m.left && top < m.bottom && top + box.height * k > m.top;
  }

  /** Keep the box in view: pan only when it is (nearly) off-screen, so the picture stays calm. */
  function follow(box) {
    if (!box) return;
    followed = box;
    const { w, h } = size();
    const left = box.x * k + tx;
    const top = box.y * k + ty;
    const right = left + box.width * k;
    const bottom = top + box.height * k;
    // Recentre once the node leaves the middle 70%: it never hugs an edge, yet small steps
    // don't shake the picture.
    const mx = Math.max(24, w * 0.15);
    const my = Math.max(24, h * 0.15);
    if (left >= mx && top >= my && right <= w - mx && bottom <= h - my && !underMinimap(box)) return;
    tx = clampAxis(w / 2 - (box.x + box.width / 2) * k, w, content.width * k);
    ty = clampAxis(h / 2 - (box.y + box.height / 2) * k, h, content.height * k);
    apply();
    dodgeMinimap(box);
  }

  /** Whether the minimap, where it stands now, covers the box (in graph coordinates). */
  function underMinimap(box) {
    return covers(minimapRect(), box);
  }

  /** The active node at the graph's edge can sit where the minimap stands: it moves to the other corner. */
  function dodgeMinimap(box) {
    if (!minimapSvg) return;
    if (underMinimap(box)) minimapSvg.classList.toggle("is-dodging");
  }

  /** Never scroll past the graph's edges: no empty half-screen above the first node. */
  function clampAxis(t, view, extent) {
    const pad = 12;
    if (extent + 2 * pad <= view) return (view - extent) / 2;
    return Math.min(pad, Math.max(view - extent - pad, t));
  }

  function zoomAt(factor, cx, cy) {
    const nk = Math.max(0.05, Math.min(4, k * factor));
    tx = cx - ((cx - tx) * nk) / k;
    ty = cy - ((cy - ty) * nk) / k;
    k = nk;
    userMoved = true;
    apply();
  }

  svg.addEventListener("wheel", (e) => {
    e.preventDefault();
    const r = svg.getBoundingClientRect();
    zoomAt(Math.exp(-e.deltaY * 0.0015), e.clientX - r.left, e.clientY - r.top);
  }, { passive: false });

  let drag = null;
  svg.addEventListener("pointerdown", (e) => {
    if (e.button !== 0 || e.target.closest(".gt-node")) return;
    drag = { x: e.clientX, y: e.clientY, tx, ty, moved: false, id: e.pointerId };
  });
  svg.addEventListener("pointermove", (e) => {
    if (!drag) return;
    if (!drag.moved) {
      // Capture only once it is a real drag: capturing on pointerdown would retarget the
      // click/dblclick that module boxes and nodes listen for.
      if (Math.hypot(e.clientX - drag.x, e.clientY - drag.y) < 3) return;
      drag.moved = true;
      svg.setPointerCapture(drag.id);
    }
    tx = drag.tx + e.clientX - drag.x;
    ty = drag.ty + e.clientY - drag.y;
    userMoved = true;
    apply();
  });
  const end = () => (drag = null);
  svg.addEventListener("pointerup", end);
  svg.addEventListener("pointercancel", end);

  /**
   * The minimap: every node in one path (cheap at thousands of nodes), stretched to the
   * minimap's box so a tall, narrow graph is a usable strip and not a hairline; click to jump.
   */
  function drawMinimap(layout) {
    if (!minimapSvg) return;
    minimapSvg.setAttribute("viewBox", `0 0 ${content.width} ${content.height}`);
    minimapSvg.setAttribute("preserveAspectRatio", "none");
    const byRole = new Map();
    const minW = content.width / 140;
    const minH = content.height / 110;
    for (const n of layout.nodes) {
      const role = n.role || n.kind;
      const d = `M${n.x.toFixed(0)} ${n.y.toFixed(0)}h${Math.max(n.width, minW).toFixed(0)}v${Math.max(n.height, minH).toFixed(0)}h${(-Math.max(n.width, minW)).toFixed(0)}z`;
      byRole.set(role, (byRole.get(role) || "") + d);
    }
    const dots = [...byRole].map(([role, d]) => svgEl("path", { d, class: `gt-mini-node gt-role-${role}` }));
    miniView = svgEl("rect", { class: "gt-mini-view" });
    minimapSvg.replaceChildren(...dots, miniView);
    minimapSvg.onclick = (e) => {
      const r = minimapSvg.getBoundingClientRect();
      const x = ((e.clientX - r.left) / r.width) * content.width;
      const y = ((e.clientY - r.top) / r.height) * content.height;
      const { w, h } = size();
      tx = w / 2 - x * k;
      ty = h / 2 - y * k;
      userMoved = true;
      apply();
    };
  }

  /** Keep a graph point where it is on screen across a re-layout (expanding a module). */
  function keep(point, screen) {
    tx = screen.x - point.x * k;
    ty = screen.y - point.y * k;
    userMoved = true;
    apply();
  }

  /** Where a graph point is on screen now. */
  function toScreen(point) {
    return { x: point.x * k + tx, y: point.y * k + ty };
  }

  /** The union of the drawn boxes, with a margin, inside the content (a loop: thousands of boxes). */
  function extentOf(boxes) {
    let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    for (const b of boxes || []) {
      if (!b || !Number.isFinite(b.x) || !Number.isFinite(b.y)) continue;
      x0 = Math.min(x0, b.x);
      y0 = Math.min(y0, b.y);
      x1 = Math.max(x1, b.x + b.width);
      y1 = Math.max(y1, b.y + b.height);
    }
    if (x0 === Infinity) return { x: 0, y: 0, width: content.width, height: content.height };
    x0 = Math.max(0, x0 - EXTENT_MARGIN);
    y0 = Math.max(0, y0 - EXTENT_MARGIN);
    x1 = Math.min(content.width, x1 + EXTENT_MARGIN);
    y1 = Math.min(content.height, y1 + EXTENT_MARGIN);
    return { x: x0, y: y0, width: Math.max(1, x1 - x0), height: Math.max(1, y1 - y0) };
  }

  return {
    /**
     * New content ({width, height, nodes, boxes}: `boxes` every drawn element's box, for the fit;
     * without them the whole width × height is fitted); `reset` false keeps the zoom (re-layouts).
     */
    setContent(layout, { reset = true } = {}) {
      content = { width: Math.max(1, layout.width), height: Math.max(1, layout.height) };
      extent = extentOf(layout.boxes);
      nodes = layout.nodes || [];
      bottom = nodes.reduce((low, n) => (low && low.y + low.height >= n.y + n.height ? low : n), null);
      drawMinimap(layout);
      followed = null; // a box of the last layout
      if (reset) home();
      else apply();
      framed = true;
    },
    fit,
    home,
    keep,
    toScreen,
    follow,
    zoomIn: () => { const { w, h } = size(); zoomAt(1.25, w / 2, h / 2); },
    zoomOut: () => { const { w, h } = size(); zoomAt(0.8, w / 2, h / 2); },
    get userMoved() { return userMoved; },
    get transform() { return { k, tx, ty }; },
  };
}
