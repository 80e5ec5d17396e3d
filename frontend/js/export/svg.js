// The diagram as one self-contained SVG string: static (one frame) or animated (CSS keyframes
// replaying the forward build and the backward flow, looping). No scripts, no external
// references: it works in an <img> tag, on GitHub too. The picture is the scene (../scene.js),
// the same one the live view draws; this module only adds the header and assembles the file.

import { buildScene, el, withLook } from "../scene.js";
import { textWidth } from "../metrics.js";
import { createKeyframes } from "./keyframes.js";
import { buildSchedule, finalFrame } from "./schedule.js";
import { esc, num, tag, text, toXml } from "./xml.js";

const PAD = 16;
const HEADER = 58; // title line + legend line

// Export-only rules, on top of graph.css: the header, and the animation's shared timing.
const EXPORT_CSS = `
.gt-graph .gt-title { font-size: 14px; font-weight: 600; text-anchor: start; }
.gt-graph .gt-legend-text { fill: var(--gt-muted); font-size: 11px; text-anchor: start; }
.gt-graph .gt-caption { fill: var(--gt-muted); font-size: 11px; text-anchor: end; }
.gt-node, .gt-edge path, .gt-group { transition: none !important; }
.gt-grow { transform-box: fill-box; transform-origin: center; }
`;

const LEGEND_FONT = { face: "sans", size: 11 };

/** The legend strip: tensor roles, ops, and (with gradients) stored vs passing-through. */
function drawLegend(x, y, { gradient = true } = {}) {
  const items = [
    ["gt-node gt-node--tensor gt-role-input", "input (no grad)"],
    ["gt-node gt-node--tensor gt-role-parameter", "requires grad"],
    ["gt-node gt-node--op gt-role-intermediate", "made by an op"],
    ["gt-node gt-node--op", "op"],
  ];
  let cx = x;
  const out = [];
  for (const [cls, label] of items) {
    out.push(tag("g", { class: cls }, tag("rect", { x: cx, y: y - 7, width: 18, height: 14, rx: 3 })));
    out.push(text({ class: "gt-legend-text", x: cx + 24, y }, label));
    cx += 36 + textWidth(label, LEGEND_FONT);
  }
  if (gradient) {
    for (const [cls, label] of [["gt-edge--stored", "gradient stored in .grad"], ["gt-edge--transient", "gradient passing through"]]) {
      out.push(tag("g", { class: `gt-edge ${cls}`, "data-state": "done" }, tag("path", { d: `M${num(cx)} ${num(y)}H${num(cx + 26)}`, style: "marker-end:none" })));
      out.push(text({ class: "gt-legend-text", x: cx + 32, y }, label));
      cx += 44 + textWidth(label, LEGEND_FONT);
    }
  }
  return { svg: tag("g", { class: "gt-legend" }, out), width: cx - x };
}

function header(trace, phase, animated, width) {
  const legend = drawLegend(PAD, 40, { gradient: phase !== "forward" });
  const caption = `${animated ? "animated · " : ""}${phase === "both" ? "forward + backward" : phase}`;
  const title = trace.title || "gradtrace";
  const need = Math.max(legend.width + PAD * 2, PAD * 2 + textWidth(title, { face: "sansBold", size: 14 }) + 24 + textWidth(caption, LEGEND_FONT));
  const w = Math.max(width, need);
  return {
    svg: text({ class: "gt-title", x: PAD, y: 16 }, title) + legend.svg + text({ class: "gt-caption", x: w - PAD, y: 16 }, caption),
    width: need,
  };
}

/** `<style>` with CSS text (CDATA keeps the CSS readable and still valid XML). */
function styleBlock(css) {
  return `<style><![CDATA[\n${String(css).replace(/\]\]>/g, "]]]]><![CDATA[>")}\n]]></style>`;
}

function shell({ width, height, theme, body, title }) {
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" class="gt-graph gt-theme-${theme}" width="${num(width)}" height="${num(height)}" viewBox="0 0 ${num(width)} ${num(height)}" role="img" aria-label="${esc(title)}">` +
    `<title>${esc(title)}</title>` +
    body +
    "</svg>\n"
  );
}

/** The scene's layers a picture draws: without values, no chips (numbers) at all. */
const layersFor = (values) => (values ? ["groups", "edges", "nodes", "chips"] : ["groups", "edges", "nodes"]);

/** The scene in one frame: every element with that frame's look; hidden ones left out. */
function stillLayers(scene, frame, names) {
  const looks = scene.looks(frame);
  return names.map((name) =>
    el(
      "g",
      { class: `gt-${name}` },
      scene.layers[name].map((node) => (node.key ? withLook(node, looks.get(node.key)) : node)).filter((node) => !node.key || node.a["data-state"] !== "hidden"),
    ),
  ).map(toXml);
}

/**
 * The scene over the schedule: each keyed element once per distinct look it takes, shown by a
 * keyframes rule while it has that look. Nodes fade-and-grow in; everything else fades.
 */
function animatedLayers(scene, schedule, kf, names) {
  const phaseAt = (t) => (schedule.phases.backward && t >= schedule.phases.backward[0] - 0.01 ? "bwd" : "fwd");
  const looksAt = [scene.looks(schedule.initial), ...schedule.frames.map((f) => scene.looks(f.frame))];
  const times = [0, ...schedule.frames.map((f) => f.t)];
  const lastLooks = looksAt[looksAt.length - 1];
  const id = (look) => (!look || look.state === "hidden" ? null : JSON.stringify(look));
  return names.map((name) => {
    const out = [];
    for (const node of scene.layers[name]) {
      if (!node.key) {
        out.push(node);
        continue;
      }
      const seen = new Map();
      looksAt.forEach((m) => {
        const k = id(m.get(node.key));
        if (k && !seen.has(k)) seen.set(k, m.get(node.key));
      });
      for (const [k, look] of seen) {
        const changes = [{ t: 0, value: id(looksAt[0].get(node.key)) === k }];
        looksAt.forEach((m, i) => {
          const on = id(m.get(node.key)) === k;
          if (i > 0 && on !== changes[changes.length - 1].value) changes.push({ t: times[i], value: on });
        });
        const drawn = withLook(node, look);
        if (changes.length === 1) {
          out.push(drawn);
          continue;
        }
        const grow = name === "nodes" && look.state === "shown";
        const rule = kf.life(changes, { look: grow ? "grow" : "fade", minOn: look.state === "active" ? 0.5 : 0, phase: phaseAt(changes[1].t) });
        const finalOn = id(lastLooks.get(node.key)) === k;
        const life = { class: `gt-a${grow ? " gt-grow" : ""}`, style: `animation-name:${rule}${finalOn ? "" : ";opacity:0"}` };
        // The keyframes animate CSS transform (grow) and opacity: on a wrapper, so the element's
        // own transform attribute (its position) is not overridden.
        out.push(el("g", life, drawn));
      }
    }
    return toXml(el("g", { class: `gt-${name}` }, out));
  });
}

/**
 * Build the SVG: {text, width, height}. opts: {animated=false, phase="both"|"forward"|"backward", theme="light"|"dark",
 * values=true (chips with numbers), css=<graph.css text>, frame=<a timeline frame for a still; default the end of the phase>}.
 */
export function buildDiagram(trace, layout, opts = {}) {
  const { animated = false, phase = "both", theme = "light", values = true, css = "" } = opts;
  const scene = buildScene(layout, trace);
  const head = header(trace, phase, animated, scene.width);
  const width = Math.ceil(Math.max(scene.width, head.width));
  const height = Math.ceil(scene.height + HEADER);
  let layers;
  let animCss = "";
  let sceneAttrs = {};
  if (!animated) layers = stillLayers(scene, opts.frame || finalFrame(trace, phase).frame, layersFor(values));
  else {
    const schedule = buildSchedule(trace, { phase });
    const kf = createKeyframes(schedule.duration);
    layers = animatedLayers(scene, schedule, kf, layersFor(values));
    const fade = kf.stops([[0, "opacity:0"], [0.3, "opacity:1"], [schedule.fadeAt, "opacity:1"], [schedule.duration, "opacity:0"]]);
    sceneAttrs = { class: "gt-a", style: `animation-name:${fade}` };
    animCss =
      `.gt-a{animation-duration:${num(schedule.duration)}s;animation-iteration-count:infinite;animation-timing-function:linear;animation-fill-mode:both}\n` +
      "@media (prefers-reduced-motion: reduce){.gt-a{animation:none!important}}\n" +
      kf.css();
  }
  const body =
    styleBlock(css + EXPORT_CSS + animCss) +
    toXml(scene.defs) +
    tag("rect", { class: "gt-bg", x: 0, y: 0, width, height, style: "fill:var(--gt-bg)" }) +
    head.svg +
    tag("g", { transform: `translate(0 ${HEADER})`, ...sceneAttrs }, layers);
  return { text: shell({ width, height, theme, body, title: trace.title || "gradtrace diagram" }), width, height };
}

/** The SVG text alone (frontend/tools/render.mjs, the notebook and the Export menu use it). */
export function buildDiagramSvg(trace, layout, opts = {}) {
  return buildDiagram(trace, layout, opts).text;
}
