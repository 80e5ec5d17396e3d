// The memory strip under the timeline: the bytes the autograd graph's saved tensors hold after
// every event (analyses.memory) — rising while the forward saves them, falling node by node as
// a backward frees them, flat where retain_graph keeps them. Prints the trace's numbers.

import { h, svgEl } from "./dom.js";
import { formatBytes } from "./format.js";

const EMPTY = { nodes: [], timeline: [], peak_bytes: 0, final_bytes: 0 };

/** The trace's memory analysis (an empty one for traces made before it existed). */
export function memoryOf(trace) {
  return trace?.analyses?.memory ?? EMPTY;
}

/** Saved bytes alive after event `seq` (the timeline lists only the changes). */
export function liveBytesAt(memory, seq) {
  const points = memory.timeline;
  let lo = 0;
  let hi = points.length - 1;
  let found = 0;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (points[mid].seq <= seq) {
      found = points[mid].live_bytes;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

/** A step-shaped SVG path of live bytes over events 0..lastSeq in a width × height box. */
export function memoryPath(memory, lastSeq, width, height) {
  const peak = memory.peak_bytes || 1;
  const x = (seq) => (Math.max(0, Math.min(seq, lastSeq)) / Math.max(1, lastSeq)) * width;
  const y = (bytes) => height - (bytes / peak) * (height - 2);
  let d = `M0,${height}`;
  for (const p of memory.timeline) d += ` H${x(p.seq).toFixed(2)} V${y(p.live_bytes).toFixed(2)}`;
  return `${d} H${width} V${height} Z`;
}

/** Saved bytes of one node (null when it saved nothing), with when it was freed. */
export function nodeMemory(trace, nodeId) {
  return memoryOf(trace).nodes.find((n) => n.node === nodeId) ?? null;
}

/**
 * The strip: `load(trace)` draws the curve, `show(step)` moves the cursor and the label.
 * Hidden for traces whose graph saved nothing.
 */
export function createMemoryStrip(container) {
  const width = 1000;
  const height = 28;
  const area = svgEl("path", { class: "memory-area" });
  const cursor = svgEl("line", { class: "memory-cursor", y1: 0, y2: height });
  const svg = svgEl("svg", { class: "memory-plot", viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", "aria-hidden": "true" }, [area, cursor]);
  const label = h("span", { class: "memory-label" });
  // The axes, written on the plot: bytes up (0 to the peak), events across (0 to the last).
  const axis = {
    peak: h("span", { class: "memory-axis memory-axis-peak" }),
    zero: h("span", { class: "memory-axis memory-axis-zero", text: "0 B" }),
    events: h("span", { class: "memory-axis memory-axis-events" }),
  };
  const root = h("div", { class: "memory-strip", role: "group", "aria-label": "saved-tensor memory of the autograd graph", hidden: true }, [
    h("span", { class: "memory-title", title: "Bytes of the tensors autograd nodes saved for backward, alive after each event: backward() frees them unless retain_graph=True", text: "saved tensors" }),
    h("div", { class: "memory-plotbox" }, [svg, axis.peak, axis.zero, axis.events]),
    label,
  ]);
  container.append(root);
  let memory = EMPTY;
  let lastSeq = 0;
  return {
    element: root,
    load(trace) {
      memory = memoryOf(trace);
      lastSeq = Math.max(0, (trace?.events?.length ?? 1) - 1);
      root.hidden = !memory.peak_bytes;
      area.setAttribute("d", memoryPath(memory, lastSeq, width, height));
      axis.peak.textContent = formatBytes(memory.peak_bytes);
      axis.events.textContent = `events 0 → ${lastSeq}`;
    },
    show(step) {
      if (root.hidden) return;
      const live = liveBytesAt(memory, step);
      const x = (Math.max(0, Math.min(step, lastSeq)) / Math.max(1, lastSeq)) * width;
      cursor.setAttribute("x1", x.toFixed(2));
      cursor.setAttribute("x2", x.toFixed(2));
      label.textContent = `${formatBytes(live)} held · peak ${formatBytes(memory.peak_bytes)}`;
      root.dataset.liveBytes = String(live);
    },
  };
}

/** When a seq happened, as a person reads it: "#14 (backward #2 of y)". */
function whenText(trace, seq) {
  const pass = (trace.passes ?? []).find((p) => p.first_seq <= seq && seq <= p.last_seq);
  return pass ? `#${seq} (${pass.label})` : `#${seq}`;
}

/**
 * One node's saved tensors at `step`: {bytes, savedAt, freedAt (null: never freed), now:
 * "not saved yet" | "held" | "freed"}, or null for a node that saved nothing.
 */
export function nodeMemoryState(trace, nodeId, step) {
  const m = nodeMemory(trace, nodeId);
  if (!m) return null;
  const freed = m.released_seq !== null && m.released_seq !== undefined;
  const now = step < m.created_seq ? "not saved yet" : freed && step >= m.released_seq ? "freed" : "held";
  return { bytes: m.saved_bytes, savedAt: whenText(trace, m.created_seq), freedAt: freed ? whenText(trace, m.released_seq) : null, now };
}

/** The inspector's lines for one node's saved tensors at `step` (null: it saved nothing). */
export function nodeMemoryView(trace, nodeId, step) {
  const s = nodeMemoryState(trace, nodeId, step);
  if (!s) return null;
  return h("div", { class: "node-memory", "data-saved-bytes": String(s.bytes), "data-now": s.now }, [
    h("p", {}, [h("strong", { text: formatBytes(s.bytes) }), ` saved for backward at ${s.savedAt}`]),
    h("p", { class: "muted", text: s.freedAt ? `freed at ${s.freedAt}` : "never freed: the graph still holds it at the end (retain_graph=True, or no backward ran through it)" }),
    h("p", { class: `node-memory-now is-${s.now.replaceAll(" ", "-")}`, text: `${s.now} at step ${step}` }),
  ]);
}
