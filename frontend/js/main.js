// Composition root: create the store, renderer, camera, player and panels, and wire them.
// Data comes from the API, or — for standalone HTML and notebooks — from an embedded
// <script type="application/json" id="gradtrace-data"> with no network request at all.

import { createStore, mirrorToHash, readHash } from "./state.js";
import { createRenderer } from "./render.js";
import { createCamera } from "./camera.js";
import { createPlayer } from "./player.js";
import { createFollow } from "./follow.js";
import { bindControls } from "./controls.js";
import { buildTimeline, frameAt, stepCount, eventsOfNode } from "./timeline.js";
import { layoutGraph, defaultCollapsed } from "./layout.js";
import { placeChipsInSlices } from "./chips.js";
import { buildSceneInSlices } from "./scene.js";
import { renderInspector } from "./inspector.js";
import { createEventList } from "./eventlist.js";
import { createEditor } from "./editor.js";
import { createProgramOutput } from "./program_output.js";
import { bindShareAndExport } from "./share.js";
import { api } from "./api.js";
import { createLoaders } from "./loaders.js";
import { loadElk } from "./elk.js";
import { createMemoryStrip } from "./memory.js";
import { createCompare } from "./compare.js";
import { buildDiagram } from "./export/svg.js";
import { FONTS } from "./metrics.js";
import { drawIcons } from "./icons.js";
import { drawLegends } from "./legend.js";
import { graphCssText } from "./download.js";
import { resolveTensorData } from "./tensordata.js";
import { narrate, passError, readingWeight } from "./narration.js";
import { createNarrationView } from "./narrationview.js";
import { h, nextTask } from "./dom.js";
import { bindOpenTrace } from "./opentrace.js";
import { bindShortcutsHelp } from "./shortcuts.js";

const $ = (id) => document.getElementById(id);
const body = document.body;
const embedded = readEmbeddedData();
/** Playback at this many events/s or more is "fast": no travelling pulse, a throttled event list. */
const FAST_SPEED = 15;
const isFast = (speed) => speed >= FAST_SPEED;
const mode = embedded?.mode || body.dataset.mode || "full";
body.dataset.mode = mode;

// Permalinks arrive as /?spec=<id>; the hash (this viewer's own state) wins over the query.
const store = createStore({ ...(embedded?.theme ? { theme: embedded.theme } : {}), ...readHash(location.search), ...readHash(location.hash) });
const renderer = createRenderer($("graph"));
// Readable: the smallest graph text at least 11 px on screen, in every player (the full page,
// an embed, a standalone file, a notebook cell, a docs page). A graph that fits at that zoom
// opens whole; a bigger one opens on the loss, and the camera follows the backward from there.
const readableZoom = 11 / Math.min(...Object.values(FONTS).map((f) => f.size));
const camera = createCamera($("graph"), renderer.viewport, $("minimap"), { onView: (view) => renderer.cull(view), readableZoom, insetTop: mode === "embed" ? 30 : 0 });
const editor = $("spec") ? createEditor({ textarea: $("spec"), gutter: $("gutter"), errorEl: $("spec-error") }) : null;
const events = $("events") ? createEventList({ listEl: $("events"), bandsEl: $("bands"), onPick: pickEvent }) : createEventList({ listEl: document.createElement("ol"), bandsEl: $("bands"), onPick: pickEvent });
let trace = null;
let timeline = null;
let frame = null;
let layoutCache = null;
/** A trace being shown: the change listener leaves painting and laying out to showTrace, which does each once. */
let showing = 0;
/** The inspector follows the node the engine runs (from the first Play until Esc); a click pins one. */
const follow = createFollow();
const memoryStrip = $("memory-strip") ? createMemoryStrip($("memory-strip")) : null;
const compare = $("compare-panel") ? createCompare({ store, api, panel: $("compare-panel"), link: $("compare-link"), renderer, inspector: $("inspector") }) : null;

// The viewer's side column grows for a sentence too long to fold; a player's caption clamps.
const narrationView = $("narration") ? createNarrationView($("narration"), { fallback: mode === "full" ? "grow" : "clamp" }) : null;
if (narrationView) addEventListener("resize", () => narrationView.refit());

const player = createPlayer({
  count: 0,
  // Slow playback dwells on each step as long as its story takes to read; fast playback is even.
  dwell: (i) => (timeline && !isFast(store.get().speed) ? readingWeight(narrate(trace, timeline, i)) : 1),
  onStep: (i) => store.set({ step: i }),
  onPlayingChange: (p) => {
    controls.setPlayLabel(p);
    // Play starts the inspector following the running node, unless a click pinned one.
    if (p) {
      body.classList.remove("is-fresh");
      follow.setFollowing(true);
    }
    follow.cancel(); // a pause shows the step where it stopped, not a throttled one
    if (timeline && frame) tellStory(narrate(trace, timeline, frame.step));
    renderSelection();
  },
});
const controls = bindControls({
  el: { play: $("play"), back: $("step-back"), forward: $("step-forward"), restart: $("restart"), slider: $("timeline"), speed: $("speed"), counter: $("counter") },
  player,
  store,
  getCount: () => (timeline ? stepCount(timeline) : 0),
  // Esc unpins a node (the inspector follows the engine again); with nothing pinned it stops following.
  onEscape: () => {
    if (store.get().node) store.set({ node: "" });
    else if (follow.following) {
      follow.setFollowing(false);
      renderSelection();
    }
  },
});

/** The trace (and its settings) a standalone page or notebook cell carries, resolved. */
function readEmbeddedData() {
  const el = document.getElementById("gradtrace-data");
  if (!el) return null;
  let data;
  try {
    data = JSON.parse(el.textContent);
  } catch (err) {
    setStatus(`embedded data is not valid JSON: ${err.message}`, true);
    return null;
  }
  resolveTensorData(data?.trace);
  return data;
}

function setStatus(text, isError = false) {
  const el = $("status");
  if (!el) return;
  el.textContent = text || "";
  el.classList.toggle("is-error", isError);
  body.classList.toggle("has-error", isError);
}

function applyTheme() {
  const t = store.get().theme || (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light");
  document.documentElement.classList.toggle("gt-theme-dark", t === "dark");
  document.documentElement.classList.toggle("gt-theme-light", t !== "dark");
}

// ---- painting one step ---------------------------------------------------------------------

function paint() {
  if (!timeline) return;
  const count = stepCount(timeline);
  const step = Math.min(store.get().step, Math.max(0, count - 1));
  frame = frameAt(timeline, step);
  // (counted by the browser tests: a first load paints once; not while playing: a mark stays in
  // the page's performance timeline, which user timing never trims, one per frame of a backward)
  if (!player.playing) performance.mark("gt-paint");
  renderer.paint(frame);
  const story = narrate(trace, timeline, step);
  const label = story.short ? `${frame.pass.label} · ${story.short}` : frame.pass.label;
  controls.showStep(step, count, label);
  const cur = $("current-event");
  if (cur) cur.textContent = label;
  showError(passError(trace, timeline, step));
  follow.at(timeline, step);
  events.setCurrent(step, { throttle: player.playing && isFast(store.get().speed) });
  memoryStrip?.show(step);
  body.dataset.step = String(step);
  body.dataset.phase = frame.pass.phase;
  if (frame.node && (player.playing || !camera.userMoved)) camera.follow(renderer.boxOf(frame.node));
  // Fast playback: the narration and the following inspector catch up a few times a second.
  if (player.playing && isFast(store.get().speed)) follow.later(catchUp);
  else {
    follow.cancel();
    tellStory(story);
    renderSelection();
  }
}

/** Fast playback: the narration and the following inspector, at the step on screen now. */
function catchUp() {
  if (!timeline || !frame) return;
  tellStory(narrate(trace, timeline, frame.step));
  renderSelection();
}

/** The narration panel: the event's sentence, its chain-rule lines, its tone (cue, error). */
function tellStory(story) {
  narrationView?.tell(story);
}

/** PyTorch's error over the graph while its pass lasts, and the node that raised it marked. */
function showError(error) {
  const banner = $("event-banner");
  if (banner) {
    banner.hidden = !error;
    if (error) banner.textContent = `${error.label} raised ${error.exception}: ${error.message}`;
  }
  for (const el of $("graph").querySelectorAll(".gt-raised")) el.classList.remove("gt-raised");
  if (error?.node) $("graph").querySelector(`.gt-node[data-node-id="${CSS.escape(error.node)}"]`)?.classList.add("gt-raised");
}

function renderSelection() {
  const pinned = store.get().node;
  const id = follow.shown(pinned);
  renderer.select(pinned);
  body.classList.toggle("has-selection", Boolean(pinned));
  if (timeline && frame) renderInspector($("inspector"), { trace, timeline, frame, id, onToggleModule: toggleModule });
  compare?.inspect(id);
  showFollowNote(pinned);
}

/** Say whether the inspector follows the engine or holds a pinned node, and how to change it. */
function showFollowNote(pinned) {
  const note = $("follow-note");
  if (!note) return;
  note.hidden = false;
  if (pinned) {
    const unpin = h("button", { type: "button", class: "follow-button", text: "Follow the engine", onclick: () => { follow.setFollowing(true); store.set({ node: "" }); } });
    note.replaceChildren("Pinned: this node stays in the inspector. Press Esc or ", unpin, " to follow the running node again.");
  } else if (follow.following) note.replaceChildren("Following the engine: the inspector shows the node that runs now. Click a node to pin it.");
  else note.replaceChildren("Press ▶ and the inspector follows the node the engine runs; click a node to pin it.");
}

// ---- loading traces ------------------------------------------------------------------------

/** The drawn box of a module: its open box, or its collapsed stand-in (a fold: its first module's). */
function moduleBox(layout, path) {
  if (!layout) return null;
  const find = (p) => layout.groups.find((g) => g.path === p) || layout.nodes.find((n) => n.id === `m:${p}`);
  return find(path) || (path.includes("~") ? find(path.split("~")[0]) : null);
}

/** Lay out again; `anchor` (a module path) stays where it was on screen (expand / collapse). */
async function relayout(precomputed, anchor = null) {
  const { inserted } = store.get();
  setStatus("laying out…");
  const before = anchor ? moduleBox(layoutCache, anchor) : null;
  const onScreen = before ? camera.toScreen(before) : null;
  let layout = precomputed;
  const laying = trace;
  performance.mark("gt-layout");
  if (!layout) {
    const elk = await loadElk();
    const told = (done) => (setStatus(`laying out: ${done}…`), nextTask()); // (a big graph's stages said)
    layout = await layoutGraph(laying, { elk, collapsed: store.get().collapsed ?? new Set(), showInserted: inserted, nextTask: told });
    if (laying !== trace) return; // another trace arrived meanwhile: its own layout draws it
  }
  let scene = null;
  if (layout.nodes.length > 1000) {
    // A big graph's chips are placed in slices first (the draw below finds them placed), and
    // the drawing is a task of its own: the status line says how far it is meanwhile.
    const count = (n) => n.toLocaleString("en");
    const spots = await placeChipsInSlices(layout, laying, { nextTask, onProgress: (done, total) => setStatus(`placing the numbers: ${Math.round((100 * done) / total)}%…`) });
    if (laying !== trace) return;
    setStatus(`drawing ${count(layout.nodes.length)} boxes…`);
    scene = await buildSceneInSlices(layout, laying, { nextTask, spots });
    if (laying !== trace) return;
  }
  layoutCache = layout;
  performance.mark("gt-draw");
  renderer.draw(layout, trace, scene);
  compare?.mark(trace);
  const after = anchor ? moduleBox(layout, anchor) : null;
  const boxes = Object.values(renderer.scene.layers).flatMap((layer) => layer.map((d) => d.box)); // what a fit frames
  camera.setContent({ nodes: layout.nodes, width: renderer.scene.width, height: renderer.scene.height, boxes }, { reset: !after });
  if (after && onScreen) camera.keep(after, onScreen);
  setStatus("");
  // Timings for tests/perf/bench_viewer.py (layout by ELK; drawing the scene).
  performance.measure("gt-layout", "gt-layout", "gt-draw");
  performance.measure("gt-draw", "gt-draw");
}

/**
 * Show a trace that a navigation asked for: at its `step`, or — none asked — on its built graph
 * (the end of the forward pass, not a blank step 0; Play continues into the backward, Restart
 * goes back to the first event). A navigation overtaken while this one was laid out (`live()`
 * false) leaves the view to the newer one.
 */
async function showTrace(t, options = {}) {
  showing++;
  try {
    await show(t, options);
  } finally {
    showing--;
  }
}

async function show(t, { layout: precomputedLayout = null, step, live = () => true }) {
  trace = t;
  follow.reset();
  // the layout engine (1.6 MB) loads and compiles while the timeline and event list are built
  if (!precomputedLayout) loadElk().catch(() => {});
  // A big trace is shown in stages, each its own task, the status line saying which: the page
  // paints and answers input in between (a 400,000-event trace, 50,000 nodes, none over ~1 s).
  const stage = async (text) => {
    setStatus(`${text}…`);
    await nextTask();
    return live() && trace === t;
  };
  const size = `${t.graph.nodes.length.toLocaleString("en")} nodes, ${t.events.length.toLocaleString("en")} events`;
  if (!(await stage(`building the timeline (${size})`))) return;
  timeline = buildTimeline(trace);
  player.pause();
  player.setCount(stepCount(timeline));
  if (!(await stage("listing the events"))) return;
  events.draw(trace, timeline);
  memoryStrip?.load(trace);
  // A standalone file's layout was computed at export time with this same default folding.
  if (store.get().collapsed === null && (!precomputedLayout || embedded)) {
    if (!(await stage("choosing what to fold"))) return;
    const def = defaultCollapsed(trace);
    if (def.size) store.set({ collapsed: def });
  }
  await relayout(precomputedLayout);
  if (!live() || trace !== t) return;
  // The first paint's work in tasks of its own: every node's name (made once a trace) and the
  // opening step's states (frameAt keeps its last frame); then the paint draws them.
  if (!(await stage("reading the graph's names"))) return;
  narrate(trace, timeline, 0);
  const fwd = (trace.passes || []).find((p) => p.phase === "forward");
  const opening = step ?? (fwd ? fwd.last_seq : 0);
  if (!(await stage("working out the first step"))) return;
  frameAt(timeline, Math.min(opening, stepCount(timeline) - 1));
  if (!(await stage("painting the first step"))) return;
  setStatus("");
  store.set({ step: opening });
  player.seek(Math.min(store.get().step, stepCount(timeline) - 1));
  paint();
  body.classList.remove("is-loading");
  body.classList.add("is-ready");
  body.dataset.nodes = String(trace.graph.nodes.length);
  compare?.load(trace);
}

const programOutput = $("program-output") ? createProgramOutput($("program-output")) : null;
const { untouchedExample, runSpec, openExample, openTrace, followHash, bootFull, bootEmbed } = createLoaders({ editor, store, showTrace, setStatus, programOutput });

// ---- user actions --------------------------------------------------------------------------

function pickEvent(i, nodeId) {
  player.pause();
  player.seek(i);
  if (nodeId) store.set({ node: nodeId });
}

function selectNode(id) {
  store.set({ node: id });
  if (!timeline || !id) return;
  events.markEvents(eventsOfNode(timeline, id), { reveal: true });
}

$("graph").addEventListener("click", (e) => {
  const el = e.target.closest(".gt-node");
  if (!el) return;
  selectNode(el.dataset.nodeId || `m:${el.dataset.module}`);
});
$("graph").addEventListener("keydown", (e) => {
  // Keyboard users select a focused node with Enter (Tab moves between nodes).
  const el = e.target.closest && e.target.closest(".gt-node");
  if (el && e.key === "Enter") selectNode(el.dataset.nodeId || `m:${el.dataset.module}`);
});
$("graph").addEventListener("dblclick", (e) => {
  // Double-click a module box (or a collapsed module) to collapse / expand it.
  const el = e.target.closest(".gt-node--module, .gt-group");
  if (!el || !trace) return;
  toggleModule(el.dataset.module);
});

/** Collapse a module into one box, or expand it back (the layout reruns). */
function toggleModule(path) {
  const set = new Set(store.get().collapsed ?? []);
  if (set.has(path)) {
    set.delete(path);
    if (store.get().node === `m:${path}`) store.set({ node: "" });
  } else set.add(path);
  anchorPath = path;
  store.set({ collapsed: set });
}
let anchorPath = null;

store.on("change", (state, changed) => {
  if (changed.has("step")) {
    if (player.index !== state.step && timeline) player.seek(state.step);
    if (!showing) paint();
  }
  if (changed.has("node")) {
    renderSelection();
    if (timeline) events.markEvents(state.node ? eventsOfNode(timeline, state.node) : []);
  }
  if (changed.has("speed")) setSpeed(state.speed);
  if (changed.has("theme")) applyTheme();
  if (changed.has("compare") && trace) compare?.load(trace);
  if ((changed.has("collapsed") || changed.has("inserted")) && trace && layoutCache && !showing) {
    relayout(null, anchorPath).then(paint, (err) => setStatus(err.message, true));
    anchorPath = null;
  }
});
if (!embedded) mirrorToHash(store); // (a standalone file has no server to reopen a link against)

// Another example or permalink in the hash loads it from a fresh view; otherwise only the view moves.
window.addEventListener("hashchange", () => followHash(readHash(location.hash)).catch((err) => setStatus(err.message, true)));

if (editor) {
  $("run").addEventListener("click", runSpec);
  $("spec").addEventListener("keydown", (e) => {
    if ((e.ctrlKey || e.metaKey) && e.key === "Enter") runSpec();
  });
  $("example").addEventListener("change", (e) => {
    if (e.target.value) openExample(e.target.value).catch((err) => setStatus(err.message, true));
  });
  $("toggle-editor").addEventListener("click", (e) => {
    const open = body.classList.toggle("editor-hidden");
    e.currentTarget.setAttribute("aria-expanded", String(!open));
  });
}
if ($("open-trace")) {
  bindOpenTrace({
    button: $("open-trace"),
    input: $("open-trace-file"),
    target: body,
    open: (t, name) => openTrace(t, name).catch((err) => setStatus(`${name} could not be shown: ${err.message}`, true)),
    refuse: (name, why) => setStatus(`${name} cannot be opened: ${why}`, true),
    progress: (name, text) => setStatus(`opening ${name}: ${text}…`),
  });
}
if ($("shortcuts-dialog")) bindShortcutsHelp({ dialog: $("shortcuts-dialog"), button: $("shortcuts") });
$("show-inserted")?.addEventListener("change", (e) => store.set({ inserted: e.target.checked }));
$("theme")?.addEventListener("click", () => store.set({ theme: document.documentElement.classList.contains("gt-theme-dark") ? "light" : "dark" }));
$("fit").addEventListener("click", () => camera.fit());
$("zoom-in").addEventListener("click", () => camera.zoomIn());
$("zoom-out").addEventListener("click", () => camera.zoomOut());
bindShareAndExport({ store, api, getTrace: () => trace, getLayout: () => layoutCache, getSpecText: () => editor?.value ?? "", untouchedExample, stepSvg, setStatus });

/** "SVG (this step)" and PNG: the scene in the current frame, drawn by the exporters' builder. */
function stepSvg() {
  if (!trace || !layoutCache || !frame) return null;
  const theme = document.documentElement.classList.contains("gt-theme-dark") ? "dark" : "light";
  const still = buildDiagram(trace, layoutCache, { frame, theme, css: graphCssText() });
  return compare ? { ...still, text: compare.decorate(still.text, trace) } : still;
}

/** Fast playback (≥ FAST_SPEED events/s) skips the travelling pulse: it could not be followed
 * anyway, and repainting the whole SVG for it every frame costs frames on big graphs. */
function setSpeed(speed) {
  player.setSpeed(speed);
  body.classList.toggle("is-fast", isFast(speed));
}

applyTheme();
if (mode === "full") body.classList.add("is-fresh"); // until the first Play: the ▶ calls for a click
drawIcons();
drawLegends();
setSpeed(store.get().speed);
controls.setSpeed(store.get().speed);
if ($("show-inserted")) $("show-inserted").checked = store.get().inserted;

const boot = embedded ? showTrace(embedded.trace, { layout: embedded.layout || null, step: readHash(location.hash).step }) : mode === "embed" ? bootEmbed() : bootFull();
boot.catch((err) => {
  body.classList.remove("is-loading");
  setStatus(err.message || String(err), true);
});
