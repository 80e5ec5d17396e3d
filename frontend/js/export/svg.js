// The diagram as one self-contained SVG string: static (one frame) or animated (CSS keyframes
// replaying the forward build and the backward flow, looping). No scripts, no external
// references: it works in an <img> tag, on GitHub too. Pure: the caller supplies the trace,
// the layout (layout.js) and graph.css's text.

import { drawBadge, drawChip, chipWidth, defs, drawEdge, drawGroup, drawLegend, drawNode, drawNodeOverlay, styleBlock } from "./draw.js";
import { createKeyframes } from "./keyframes.js";
import { buildSchedule, finalFrame } from "./schedule.js";
import { frameReader, gradChipText, traceEdgeId, valueChipText } from "./states.js";
import { alongEdge, besideNode, createPlacer } from "./place.js";
import { esc, num, pointAlong, tag, text } from "./xml.js";

const PAD = 16;
const SHOWN = { state: "shown", grad: null };
const HIDDEN = { state: "hidden", grad: null };
const HEADER = 58; // title line + legend line
const CHIP_GAP = 6;

// Export-only rules, on top of graph.css: the header, and the animation's shared timing.
const EXPORT_CSS = `
.gt-graph .gt-title { font-size: 14px; font-weight: 600; text-anchor: start; }
.gt-graph .gt-legend-text { fill: var(--gt-muted); font-size: 11px; text-anchor: start; }
.gt-graph .gt-caption { fill: var(--gt-muted); font-size: 11px; text-anchor: end; }
.gt-graph .gt-overlay rect { fill: none; }
.gt-value rect { fill: var(--gt-bg); stroke: var(--gt-edge); stroke-width: 1; }
.gt-grow { transform-box: fill-box; transform-origin: center; }
`;

/** Drawable items: each knows how to read its value from a frame and how to draw a value. */
function sceneItems(trace, layout, { values, phase }) {
  const reader = frameReader(trace, layout);
  const members = reader.members;
  const nodesById = new Map(trace.graph.nodes.map((n) => [n.id, n]));
  const placer = createPlacer(layout);
  const showValues = values && phase !== "backward";
  const showGrads = values && phase !== "forward";
  const structure = [];
  const nodeChips = [];
  const edgeChips = [];
  // A chip is drawn where the placer finds room (decided once per label, in item order).
  const chip = (cls, spots, { avoidEdges = true, force = false } = {}) => (label, x) => {
    const at = placer.place(spots(chipWidth(label)), chipWidth(label), { avoidEdges, force });
    return at ? drawChip(cls, at.x, at.y, label, x) : "";
  };

  const hooksOf = new Map((trace.graph.modules || []).map((m) => [m.path, m.hooks || []]));
  for (const g of layout.groups.filter((g) => !g.collapsed)) {
    const inside = trace.graph.nodes.filter((n) => n.module === g.path || (n.module || "").startsWith(`${g.path}.`)).map((n) => n.id);
    structure.push({ layer: 0, look: "fade", read: (f) => (f && inside.some((id) => f.nodeStates.get(id) !== "hidden") ? "shown" : null), draw: (_, x) => drawGroup(g, hooksOf.get(g.path) || [], x) });
    // A hook's badge flashes while the hook fires (its event is the current step).
    (hooksOf.get(g.path) || []).forEach((hk, k) => {
      const read = (f) => (f && f.event && f.event.hook === hk.index ? "fired" : null);
      structure.push({ layer: 6, only: "animated", look: "fade", minOn: 0.8, read, draw: (_, x) => drawBadge(g, hk, k, { ...x, class: `gt-badge--fired ${x.class || ""}`.trim() }) });
    });
  }
  for (const e of layout.edges) {
    const tid = traceEdgeId(e.id);
    const edgeState = (f) => (f ? f.edgeStates.get(tid) || SHOWN : HIDDEN);
    structure.push({ layer: 1, look: "fade", read: (f) => nullIfHidden(edgeState(f).state), animRead: (f) => (edgeState(f).state === "hidden" ? null : "shown"), draw: (s, x) => drawEdge(e, s, x) });
    if (phase !== "forward") {
      structure.push({ layer: 2, only: "animated", look: "fade", read: (f) => (edgeState(f).state === "done" ? "done" : null), draw: (s, x) => drawEdge(e, s, x) });
      structure.push({ layer: 2, only: "animated", look: "fade", minOn: 0.6, read: (f) => (edgeState(f).state === "active" ? "active" : null), draw: (s, x) => drawEdge(e, s, x) });
    }
    if (showGrads) {
      const read = (f) => {
        const s = edgeState(f);
        return s.state === "done" || s.state === "active" ? gradChipText(s.grad) : null;
      };
      edgeChips.push({ layer: 5, look: "fade", read, draw: chip("gt-grad", (w) => alongEdge(e.points, w, pointAlong), { avoidEdges: false, force: true }) });
    }
  }
  for (const n of layout.nodes) {
    const ids = members.get(n.id) || [n.id];
    structure.push({ layer: 3, look: "grow", read: (f) => nullIfHidden(reader.node(f, n.id)), animRead: (f) => (reader.node(f, n.id) === "hidden" ? null : "shown"), draw: (s, x) => drawNode(n, s, x.class ? { ...x, class: `${x.class} gt-grow` } : x) });
    structure.push({ layer: 4, only: "animated", look: "fade", read: (f) => (reader.node(f, n.id) === "done" ? "done" : null), draw: (s, x) => drawNodeOverlay(n, s, x) });
    structure.push({ layer: 4, only: "animated", look: "fade", minOn: 0.3, read: (f) => (reader.node(f, n.id) === "active" ? "active" : null), draw: (s, x) => drawNodeOverlay(n, s, x) });
    const tn = nodesById.get(n.id);
    const valueLabel = showValues && tn ? valueChipText(tn.value) : null;
    const isParam = tn && tn.kind === "tensor" && tn.requires_grad;
    const twoChips = Boolean(valueLabel && isParam && showGrads);
    if (valueLabel) {
      nodeChips.push({ layer: 5, look: "fade", read: (f) => (reader.node(f, n.id) !== "hidden" ? valueLabel : null), draw: chip("gt-value", (w) => besideNode(n, w, twoChips ? -9 : 0)) });
    }
    if (tn && tn.kind === "tensor" && showGrads) {
      const read = (f) => (f && f.leafGrads.has(n.id) ? `.grad ${gradChipText(f.leafGrads.get(n.id))}` : null);
      nodeChips.push({ layer: 5, look: "fade", read, draw: chip("gt-grad", (w) => besideNode(n, w, twoChips ? 9 : 0), { force: true }) });
    }
    if (phase !== "forward") {
      // The "+=" badge where more than one gradient has arrived in this pass (fan-in).
      // Same text as the viewer: "+= ×k" (k gradients summed), or "+=" when .grad accumulates.
      const read = (f) => {
        if (!f) return null;
        const count = Math.max(0, ...ids.map((id) => f.fanIn.get(id) || 0));
        if (count) return `+= ×${count}`;
        return f.accumulated && ids.includes(f.node) ? "+=" : null;
      };
      nodeChips.push({ layer: 6, look: "fade", read, draw: (label, x) => drawChip("gt-grad gt-grad--accumulate", n.x + 4 - chipWidth(label) / 2, n.y - 4, label, x) });
    }
  }
  return [...structure, ...nodeChips, ...edgeChips];
}

function nullIfHidden(state) {
  return state === "hidden" ? null : state;
}

/** Extent of everything drawn, chips included (they hang right of their nodes). */
function extent(layout, items) {
  let w = layout.width;
  for (const n of layout.nodes) w = Math.max(w, n.x + n.width + CHIP_GAP + chipWidth(".grad [−0.000, −0.000, −0.000]"));
  return { width: w, height: layout.height, count: items.length };
}

function header(trace, theme, phase, animated, width) {
  const legend = drawLegend(PAD, 40, { gradient: phase !== "forward" });
  const caption = `${animated ? "animated · " : ""}${phase === "both" ? "forward + backward" : phase}`;
  // Title left, caption right: the picture is at least wide enough for both (estimated widths).
  const title = trace.title || "gradtrace";
  const need = Math.max(legend.width + PAD * 2, PAD * 2 + title.length * 8.2 + 24 + caption.length * 6.4);
  const w = Math.max(width, need);
  return {
    svg: text({ class: "gt-title", x: PAD, y: 16 }, title) + legend.svg + text({ class: "gt-caption", x: w - PAD, y: 16 }, caption),
    width: need,
  };
}

function shell({ width, height, theme, css, body, title }) {
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" class="gt-graph gt-theme-${theme}" width="${num(width)}" height="${num(height)}" viewBox="0 0 ${num(width)} ${num(height)}" role="img" aria-label="${esc(title)}">` +
    `<title>${esc(title)}</title>` +
    body +
    "</svg>\n"
  );
}

/**
 * Build the SVG. opts: {animated=false, phase="both"|"forward"|"backward", theme="light"|"dark",
 * values=true, css=<graph.css text>}.
 */
export function buildDiagramSvg(trace, layout, opts = {}) {
  const { animated = false, phase = "both", theme = "light", values = true, css = "" } = opts;
  const items = sceneItems(trace, layout, { values, phase });
  const ext = extent(layout, items);
  const head = header(trace, theme, phase, animated, ext.width);
  const width = Math.ceil(Math.max(ext.width, head.width));
  const height = Math.ceil(ext.height + HEADER);
  const layers = [[], [], [], [], [], [], []];
  let animCss = "";
  let sceneAttrs = {};
  if (!animated) {
    const { frame } = finalFrame(trace, phase);
    for (const it of items) {
      if (it.only === "animated") continue;
      const v = it.read(frame);
      if (v !== null && v !== undefined) layers[it.layer].push(it.draw(v, {}));
    }
  } else {
    const schedule = buildSchedule(trace, { phase });
    const kf = createKeyframes(schedule.duration);
    const phaseAt = (t) => (schedule.phases.backward && t >= schedule.phases.backward[0] - 0.01 ? "bwd" : "fwd");
    const last = schedule.frames.length ? schedule.frames[schedule.frames.length - 1].frame : schedule.initial;
    for (const it of items) {
      const read = it.animRead || it.read;
      const start = read(schedule.initial);
      const seen = new Set([start, ...schedule.frames.map((f) => read(f.frame))]);
      seen.delete(null);
      seen.delete(undefined);
      for (const value of seen) {
        const changes = [{ t: 0, value: start === value }];
        for (const { t, frame } of schedule.frames) {
          const on = read(frame) === value;
          if (on !== changes[changes.length - 1].value) changes.push({ t, value: on });
        }
        if (changes.length === 1) {
          // On for the whole loop (a backward-only loop's forward graph): nothing to animate.
          layers[it.layer].push(it.draw(value, {}));
          continue;
        }
        const finalOn = read(last) === value;
        // Draw first: a chip the placer finds no room for draws nothing and needs no rule.
        const drawn = it.draw(value, { class: "gt-a", style: `animation-name:@KF@${finalOn ? "" : ";opacity:0"}` });
        if (!drawn) continue;
        const name = kf.life(changes, { look: it.look, minOn: it.minOn, phase: phaseAt(changes.length > 1 ? changes[1].t : 0) });
        layers[it.layer].push(drawn.replace("@KF@", name));
      }
    }
    const scene = kf.stops([[0, "opacity:0"], [0.3, "opacity:1"], [schedule.fadeAt, "opacity:1"], [schedule.duration, "opacity:0"]]);
    sceneAttrs = { class: "gt-a", style: `animation-name:${scene}` };
    animCss =
      `.gt-a{animation-duration:${num(schedule.duration)}s;animation-iteration-count:infinite;animation-timing-function:linear;animation-fill-mode:both}\n` +
      "@media (prefers-reduced-motion: reduce){.gt-a{animation:none!important}}\n" +
      kf.css();
  }
  const body =
    styleBlock(css + EXPORT_CSS + animCss) +
    defs() +
    tag("rect", { class: "gt-bg", x: 0, y: 0, width, height, style: "fill:var(--gt-bg)" }) +
    head.svg +
    tag("g", { transform: `translate(0 ${HEADER})`, ...sceneAttrs }, layers.flat());
  return shell({ width, height, theme, css, body, title: trace.title || "gradtrace diagram" });
}
