// The run view (watch.html): a run gradtrace.watch wrote, from `gradtrace view RUN_DIR`, a
// program run on the server (the gallery's, or pasted), a file, or a notebook cell
// (watchsource.js). The grad_fn graph coloured by the gradient norm each node passes back (log
// scale) at the chosen step; the Step scrubber with play, the loss curve above it with the flags
// marked; repeated blocks folded into layer × step heatmaps (watchheatmap.js); a node's sparkline
// in the inspector; a saved full trace opened in the player. A run still being written
// (`gradtrace view`) is asked for again while the page is open and grows here.

import { handOff } from "./handoff.js";
import { drawHeatmaps, repeatedBlocks } from "./watchheatmap.js";
import { api } from "./api.js";
import { decodeNumber } from "./format.js";
import { saveBlob } from "./download.js";
import { bindOpenTrace } from "./opentrace.js";
import { fullTraceText, parseRun, sourceOfPage } from "./watchsource.js";

const SVG = "http://www.w3.org/2000/svg";
const NODE_W = 150, NODE_H = 24, GAP_X = 14, GAP_Y = 22, POLL_MS = 3000;
// A sequential ramp from small (dark blue) to large (yellow) gradients, in log10.
const RAMP = [[0.0, [35, 23, 92]], [0.25, [59, 82, 139]], [0.5, [33, 145, 140]], [0.75, [94, 201, 98]], [1.0, [253, 231, 37]]];

const state = { run: null, at: 0, selected: null, playing: null, layout: null, range: [0, 1], source: null, heat: () => {}, name: "run" };

function el(name, attrs = {}, parent = null) {
  const e = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (parent) parent.appendChild(e);
  return e;
}

/** A run's number (format.js's decodeNumber), null kept: the node did not run at that step. */
const num = (v) => (v === null || v === undefined ? null : decodeNumber(v));

export function colour(norm, [lo, hi]) {
  if (norm === null || norm === undefined) return "#e4e4e4"; // did not run at this step
  if (!Number.isFinite(norm)) return "#d12a2a"; // NaN or inf
  if (norm <= 0) return "#9a9a9a"; // no gradient flowed
  const t = hi > lo ? Math.min(1, Math.max(0, (Math.log10(norm) - lo) / (hi - lo))) : 0.5;
  let k = 1;
  while (k < RAMP.length - 1 && RAMP[k][0] < t) k += 1;
  const [t0, c0] = RAMP[k - 1], [t1, c1] = RAMP[k];
  const f = (t - t0) / (t1 - t0 || 1);
  const c = c0.map((a, i) => Math.round(a + f * (c1[i] - a)));
  return `rgb(${c[0]}, ${c[1]}, ${c[2]})`;
}

function logRange(run) {
  let lo = Infinity, hi = -Infinity;
  for (const row of run.grad_out) for (const v of row) {
    const x = num(v);
    if (x > 0 && Number.isFinite(x)) { const l = Math.log10(x); lo = Math.min(lo, l); hi = Math.max(hi, l); }
  }
  return Number.isFinite(lo) ? [lo, hi] : [0, 1];
}

// Layers: a node's depth is its longest path from a root (the loss) along the gradient's way.
function layout(run) {
  const n = run.nodes.length, outs = Array.from({ length: n }, () => []), indeg = new Array(n).fill(0);
  for (const [a, b] of run.edges) { outs[a].push(b); indeg[b] += 1; }
  const depth = new Array(n).fill(0), queue = [];
  for (let i = 0; i < n; i += 1) if (indeg[i] === 0) queue.push(i);
  const left = indeg.slice();
  while (queue.length) {
    const a = queue.shift();
    for (const b of outs[a]) { depth[b] = Math.max(depth[b], depth[a] + 1); left[b] -= 1; if (left[b] === 0) queue.push(b); }
  }
  const rows = [];
  for (let i = 0; i < n; i += 1) (rows[depth[i]] ||= []).push(i);
  const pos = new Array(n);
  let width = 0;
  // Data flows top to bottom (VIEWER.md): the loss, depth 0, at the bottom; gradients climb.
  const last = rows.length - 1;
  rows.forEach((row, d) => row.forEach((i, k) => {
    pos[i] = { x: 10 + k * (NODE_W + GAP_X), y: 10 + (last - d) * (NODE_H + GAP_Y) };
    width = Math.max(width, pos[i].x + NODE_W + 10);
  }));
  return { pos, width, height: 20 + rows.length * (NODE_H + GAP_Y) };
}

function drawGraph() {
  const run = state.run, svg = document.getElementById("graph");
  const { pos, width, height } = state.layout;
  svg.replaceChildren();
  svg.setAttribute("width", width);
  svg.setAttribute("height", height);
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const edges = el("g", {}, svg);
  for (const [a, b] of run.edges) {
    const p = pos[a], q = pos[b];
    el("path", { class: "watch-edge", d: `M${p.x + NODE_W / 2},${p.y} C${p.x + NODE_W / 2},${p.y - GAP_Y / 2} ${q.x + NODE_W / 2},${q.y + NODE_H + GAP_Y / 2} ${q.x + NODE_W / 2},${q.y + NODE_H}` }, edges);
  }
  const flagged = new Set(run.flags.map((f) => f.node));
  run.nodes.forEach((node, i) => {
    const g = el("g", { class: "watch-node" + (flagged.has(node.key) ? " is-flagged" : ""), "data-key": node.key, transform: `translate(${pos[i].x},${pos[i].y})`, tabindex: 0, role: "button", "aria-label": node.key }, svg);
    el("title", {}, g).textContent = node.key;
    el("rect", { width: NODE_W, height: NODE_H, rx: 4 }, g);
    const label = el("text", { x: 6, y: 16 }, g);
    label.textContent = shorten(node.param ? `${node.param}.grad` : `${node.module === "(model)" ? "" : node.module + " "}${node.op.replace(/Backward\d*$/, "")}`, 24);
    g.addEventListener("click", () => select(node.key));
    g.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") select(node.key); });
  });
  paint();
}

function shorten(text, most) { return text.length > most ? "…" + text.slice(text.length - most + 1) : text; }

function paint() {
  const run = state.run, row = run.grad_out[state.at] || [];
  const nodes = document.querySelectorAll("#graph .watch-node");
  nodes.forEach((g, i) => {
    const v = num(row[i]);
    const rect = g.querySelector("rect");
    const fill = colour(v, state.range);
    rect.setAttribute("fill", fill);
    const text = g.querySelector("text");
    const dark = /^rgb\((\d+), (\d+)/.exec(fill);
    text.setAttribute("fill", dark && Number(dark[1]) + Number(dark[2]) < 200 ? "#fff" : "#111");
    g.classList.toggle("is-selected", run.nodes[i].key === state.selected);
  });
  const slider = document.getElementById("step");
  slider.value = String(state.at);
  document.getElementById("step-now").textContent = `${run.steps[state.at] ?? "–"} (${state.at + 1} of ${run.steps.length} logged)`;
  drawLoss();
  drawInspector();
  state.heat(state.at, state.selected);
  const traced = run.traces?.[String(run.steps[state.at])];
  const open = document.getElementById("open-trace");
  open.hidden = !traced || state.source?.kind === "embedded";
  open.textContent = traced ? `Open step ${run.steps[state.at]} in the player (${traced})` : "Open in the player";
  open.title = "The full trace the watch saved of this step, recorded as the training ran it: the model's forward on the step's inputs, the loop's own loss and its backward, event by event (the optimizer's step is not in it).";
}

function sparkline(values, width, height, marker) {
  const svg = el("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "watch-spark", role: "img" });
  const logs = values.map((v) => (v > 0 && Number.isFinite(v) ? Math.log10(v) : null));
  const ok = logs.filter((v) => v !== null);
  if (!ok.length) return svg;
  const lo = Math.min(...ok), hi = Math.max(...ok), n = values.length;
  const pts = logs.map((l, k) => (l === null ? null : `${(k / Math.max(1, n - 1)) * (width - 4) + 2},${height - 2 - (hi > lo ? (l - lo) / (hi - lo) : 0.5) * (height - 4)}`)).filter(Boolean);
  el("polyline", { points: pts.join(" "), fill: "none", stroke: "currentColor", "stroke-width": 1.5 }, svg);
  if (marker !== null) el("line", { x1: (marker / Math.max(1, n - 1)) * (width - 4) + 2, x2: (marker / Math.max(1, n - 1)) * (width - 4) + 2, y1: 0, y2: height, stroke: "#d12a2a" }, svg);
  return svg;
}

function drawLoss() {
  const run = state.run, svg = document.getElementById("loss");
  const width = svg.clientWidth || 800, height = 72;
  svg.replaceChildren();
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const losses = run.loss.map(num), n = run.steps.length;
  const finite = losses.filter((v) => v !== null && Number.isFinite(v));
  const x = (k) => 8 + (k / Math.max(1, n - 1)) * (width - 16);
  if (finite.length) {
    const lo = Math.min(...finite), hi = Math.max(...finite);
    const y = (v) => height - 14 - (hi > lo ? (v - lo) / (hi - lo) : 0.5) * (height - 28);
    const pts = losses.map((v, k) => (v !== null && Number.isFinite(v) ? `${x(k)},${y(v)}` : null)).filter(Boolean);
    el("polyline", { points: pts.join(" "), fill: "none", stroke: "var(--gt-grad)", "stroke-width": 1.5 }, svg);
    el("text", { x: 14, y: 10, "font-size": 10, fill: "currentColor" }, svg).textContent = `loss ${finite[0].toPrecision(4)} → ${finite[finite.length - 1].toPrecision(4)} (this curve spans ${lo.toPrecision(4)} to ${hi.toPrecision(4)})`;
  }
  el("line", { x1: x(state.at), x2: x(state.at), y1: 0, y2: height, stroke: "currentColor", "stroke-dasharray": "2 2" }, svg);
  for (const f of run.flags) {
    const k = run.steps.indexOf(f.step);
    if (k < 0) continue;
    const mark = el("path", { class: "watch-flag-mark", d: `M${x(k) - 5},${height} L${x(k) + 5},${height} L${x(k)},${height - 9} Z` }, svg);
    el("title", {}, mark).textContent = `${f.kind} at step ${f.step}: ${f.message}`;
    mark.addEventListener("click", () => goToFlag(f));
  }
}

function drawInspector() {
  const run = state.run, box = document.getElementById("inspector");
  const i = run.nodes.findIndex((n) => n.key === state.selected);
  if (i < 0) return;
  const node = run.nodes[i], series = run.grad_out.map((row) => num(row[i]));
  const now = series[state.at];
  box.replaceChildren();
  const h = document.createElement("h2");
  h.textContent = node.key;
  const dl = document.createElement("dl");
  for (const [k, v] of [["op", node.op], ["module", node.module], ["parameter", node.param ?? "—"], ["step", run.steps[state.at]], ["gradient norm passed back", now === null || now === undefined ? "did not run" : Number.isFinite(now) ? now.toPrecision(4) : String(now)]]) {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = v;
    dl.append(dt, dd);
  }
  const caption = document.createElement("p");
  caption.className = "watch-hint";
  caption.textContent = "log₁₀ of the norm over the logged steps";
  box.append(h, dl, sparkline(series, 270, 60, state.at), caption);
}

function select(key) { state.selected = key; paint(); }

function goTo(k, key) {
  state.at = k;
  if (key) state.selected = key;
  paint();
  const g = key && document.querySelector(`#graph .watch-node[data-key="${CSS.escape(key)}"]`);
  if (g) g.scrollIntoView({ block: "center", inline: "center" });
}

// A flag names a node (a graph node's key) or, for `stalled`, a parameter: its AccumulateGrad.
function flagNode(f) {
  const nodes = state.run.nodes;
  return (nodes.find((n) => n.key === f.node) || nodes.find((n) => n.param && n.param === f.node))?.key ?? null;
}

function firstBlockNode(run) {
  const cell = repeatedBlocks(run.nodes)[0]?.templates[0].cells.find((i) => i >= 0);
  return cell === undefined ? null : run.nodes[cell].key;
}

function goToFlag(f) {
  const k = state.run.steps.indexOf(f.step);
  goTo(k >= 0 ? k : state.at, flagNode(f));
}

// The flags row fits the page's width: a line per kind, wrapping, with a button per flagged
// step (a step's several nodes of one kind share it: a stalled run flags every layer at once).
// At most FLAGS_SHOWN buttons in all, shared among the kinds; the rest are counted.
const FLAGS_SHOWN = 12;

/** The run's flags as [kind, [[step, flags at that step], …]], each in the order it first fired. */
function flagGroups(flags) {
  const kinds = new Map();
  for (const f of flags) {
    if (!kinds.has(f.kind)) kinds.set(f.kind, new Map());
    const steps = kinds.get(f.kind);
    if (!steps.has(f.step)) steps.set(f.step, []);
    steps.get(f.step).push(f);
  }
  return [...kinds].map(([kind, steps]) => [kind, [...steps]]);
}

function drawFlags() {
  const list = document.getElementById("flags");
  list.replaceChildren();
  const flags = state.run.flags;
  const groups = flagGroups(flags);
  const perKind = Math.max(2, Math.floor(FLAGS_SHOWN / Math.max(1, groups.length)));
  for (const [kind, steps] of groups) {
    const li = document.createElement("li");
    li.className = "watch-flag-kind";
    const count = steps.reduce((n, [, at]) => n + at.length, 0);
    const name = document.createElement("span");
    name.className = "watch-flag-kind-name";
    name.textContent = count > 1 ? `${kind} (${count})` : kind;
    li.append(name);
    for (const [step, at] of steps.slice(0, perKind)) {
      const f = at[0];
      const b = document.createElement("button");
      b.type = "button";
      const others = at.length > 1 ? ` and ${at.length - 1} more` : "";
      b.textContent = `step ${step}${f.node ? " · " + f.node : ""}${others}`;
      b.setAttribute("aria-label", `${kind} · ${b.textContent}`);
      b.title = at.map((g) => g.message).join("\n");
      b.addEventListener("click", () => goToFlag(f));
      li.append(b);
    }
    if (steps.length > perKind) {
      const rest = steps.slice(perKind);
      const more = document.createElement("span");
      more.className = "watch-flags-more";
      more.textContent = `and ${rest.length} more step${rest.length > 1 ? "s" : ""} (to step ${rest[rest.length - 1][0]}), marked on the loss curve`;
      li.append(more);
    }
    list.append(li);
  }
  if (!flags.length) {
    const none = document.createElement("li");
    none.className = "watch-flags-more";
    none.textContent = "No flags: no gradient vanished, exploded, went NaN or inf, died behind a ReLU or stalled.";
    list.append(none);
  }
  const cut = document.getElementById("run-cut");
  cut.hidden = !state.run.cut?.length;
  cut.textContent = (state.run.cut || []).join(" · ");
}

function drawLegend() {
  const [lo, hi] = state.range, legend = document.getElementById("legend");
  const stops = RAMP.map(([t, c]) => `rgb(${c.join(",")}) ${t * 100}%`).join(", ");
  legend.innerHTML = "";
  const a = document.createElement("span"); a.textContent = `1e${lo.toFixed(1)}`;
  const ramp = document.createElement("span"); ramp.className = "ramp"; ramp.style.background = `linear-gradient(to right, ${stops})`;
  const b = document.createElement("span"); b.textContent = `1e${hi.toFixed(1)}  gradient norm passed back (log scale); grey: zero or not run; red: NaN/inf`;
  legend.append(a, ramp, b);
}

function show(run) {
  const atEnd = state.run === null || state.at >= state.run.steps.length - 1;
  const sameGraph = state.run && state.run.nodes.length === run.nodes.length && state.run.edges.length === run.edges.length;
  state.run = run;
  state.range = logRange(run);
  if (!sameGraph) state.layout = layout(run);
  const slider = document.getElementById("step");
  slider.max = String(Math.max(0, run.steps.length - 1));
  state.at = atEnd && state.playing === null ? Math.max(0, run.steps.length - 1) : Math.min(state.at, run.steps.length - 1);
  // Something to inspect from the start: the first flag's node, else the first repeated block's first node.
  if (state.selected === null) state.selected = run.flags.length ? flagNode(run.flags[0]) : firstBlockNode(run);
  document.getElementById("run-title").textContent = `${run.meta.model ?? "model"}: ${run.steps.length} logged steps, every ${run.meta.every}${run.sampled ? " (sampled)" : ""}`;
  document.getElementById("download-run").disabled = false;
  drawLegend();
  drawFlags();
  state.heat = drawHeatmaps(document.getElementById("blocks"), run, { colour: (v) => colour(v, state.range), num, go: goTo });
  if (sameGraph) paint(); else drawGraph();
}

function play() {
  const button = document.getElementById("play");
  if (state.playing !== null) { clearInterval(state.playing); state.playing = null; button.textContent = "▶"; button.setAttribute("aria-label", "Play"); return; }
  if (state.at >= state.run.steps.length - 1) state.at = 0;
  button.textContent = "❚❚"; button.setAttribute("aria-label", "Pause");
  state.playing = setInterval(() => {
    state.at = Math.min(state.at + 1, state.run.steps.length - 1);
    paint();
    if (state.at >= state.run.steps.length - 1) play(); // the last step: stop there
  }, 200);
}

function setStatus(text, error = false) {
  const status = document.getElementById("status");
  status.textContent = text;
  status.classList.toggle("is-error", error);
}

/** The gallery's training runs in the select; choosing one opens it (the URL names it). */
async function fillExamples(source) {
  const select = document.getElementById("example");
  let programs;
  try {
    programs = await api.programExamples();
  } catch {
    return; // a server without the gallery (or none: a notebook)
  }
  select.replaceChildren(...programs.map((p) => new Option(p.title, p.id)));
  if (source.kind !== "example") select.prepend(new Option(source.kind === "opened" ? "the run gradtrace view opened" : source.kind === "file" ? `opened file ${source.name}` : "your program's run", ""));
  select.value = source.kind === "example" ? source.id : "";
  select.addEventListener("change", () => {
    if (select.value) location.assign(`/watch.html?example=${encodeURIComponent(select.value)}`);
  });
  select.closest("label").hidden = false;
}

function showAbout(text) {
  const about = document.getElementById("run-about");
  about.hidden = !text;
  about.textContent = text || "";
}

async function openInPlayer() {
  const step = state.run.steps[state.at];
  try {
    const text = await fullTraceText(state.run, step, state.source);
    handOff("trace", `${state.name} step ${step}.json`, text, "/?handoff=trace");
  } catch (err) {
    setStatus(`the full trace of step ${step} cannot be opened: ${err.message}`, true);
  }
}

function download() {
  saveBlob(new Blob([JSON.stringify(state.run)], { type: "application/json" }), `${state.name}.run.json`);
}

/** Open (and a file dropped on the page): the player's way of opening a file (opentrace.js: read
 * off the page, its size checked first). A run's file is shown here; a trace goes to the player. */
function bindOpen() {
  bindOpenTrace({
    button: document.getElementById("open-run"),
    input: document.getElementById("open-run-file"),
    target: document.body,
    openRun: (text, name) => showOpened(parseRun(text), name),
    open: async (_trace, name, file) => {
      try {
        handOff("trace", name, await file.text(), "/?handoff=trace");
      } catch (err) {
        setStatus(`${name} cannot be opened: ${err.message}`, true);
      }
    },
    refuse: (name, why) => setStatus(`${name} cannot be opened: ${why}`, true),
    progress: (name, text) => setStatus(`opening ${name}: ${text}…`),
  });
}

function showOpened(run, name) {
  state.source = { kind: "file", name, poll: false };
  state.name = name.replace(/(\.run)?\.json$/, "");
  state.run = null; // another run: laid out afresh
  state.selected = null;
  showAbout(`A run opened from the file ${name}, read in this browser.`);
  show(run);
  setStatus("");
}

async function start() {
  document.getElementById("step").addEventListener("input", (e) => { state.at = Number(e.target.value); paint(); });
  document.getElementById("play").addEventListener("click", play);
  document.getElementById("open-trace").addEventListener("click", openInPlayer);
  document.getElementById("download-run").addEventListener("click", download);
  bindOpen();
  const source = (state.source = sourceOfPage(setStatus));
  state.name = source.id || source.name?.replace(/(\.run)?\.json$/, "") || new URLSearchParams(location.search).get("run") || "run";
  if (source.kind === "embedded") document.body.dataset.mode = "embedded";
  else fillExamples(source);
  try {
    const got = await source.load();
    showAbout(got.about || "");
    show(got.run);
    setStatus("");
    document.body.classList.replace("is-loading", "is-ready");
  } catch (err) {
    setStatus(String(err.message || err), true);
    document.body.classList.replace("is-loading", "is-failed");
    return;
  }
  if (!source.poll) return;
  setInterval(async () => {
    if (document.hidden || state.source !== source) return;
    try {
      const run = await source.load();
      if (run.run.steps.length !== state.run.steps.length || run.run.flags.length !== state.run.flags.length) show(run.run);
    } catch { /* the server stopped: keep what is shown */ }
  }, POLL_MS);
}

start();
