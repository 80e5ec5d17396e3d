// The timeline panel: phase bands over the scrubber and the list of every event, colour-coded by
// kind. Linked both ways: clicking an event seeks to it; markEvents(ids) highlights a node's events.
// The list is a keyboard listbox too: Tab to it, ↑/↓ (PageUp/PageDown) move, Enter picks.

import { h } from "./dom.js";
import { formatTensorChip } from "./format.js";
import { passBands } from "./timeline.js";
import { prettyName } from "./layout.js";

/** While playing fast, the list follows the current event at most this often (ms). */
const THROTTLE_MS = 150;

function summary(ev, names) {
  const p = ev.payload || {};
  const who = ev.node ? names.get(ev.node) || ev.node : ev.module !== null && ev.module !== undefined ? ev.module || "(root)" : ev.target || "";
  switch (ev.kind) {
    case "node_post":
      return `${who} → grad_inputs ${(p.grad_inputs || []).map(formatTensorChip).join(", ")}`;
    case "node_pre":
      return `${who} ← grad_outputs ${(p.grad_outputs || []).map(formatTensorChip).join(", ")}`;
    case "node_pre_hook":
    case "node_post_hook": {
      const pre = ev.kind === "node_pre_hook";
      const seen = (pre ? p.grad_outputs : p.grad_inputs) || [];
      return `${who} ${p.hook_name || "hook"} saw ${pre ? "grad_outputs" : "grad_inputs"} ${seen.map(formatTensorChip).join(", ")}${p.changed ? " (changed)" : ""}`;
    }
    case "grad_write":
      return `${who}.grad ${p.accumulated ? "+=" : "="} ${formatTensorChip(p.after)}`;
    case "tensor_hook":
    case "post_accumulate_grad":
      return `${who} grad ${formatTensorChip(p.grad)}`;
    case "hook_action":
      return `${who} ${JSON.stringify(p.action || {})}`;
    case "error":
      return `${p.exception || "Error"}: ${ev.message || ""}`;
    default:
      return [who, ev.message].filter(Boolean).join(" ");
  }
}

/** What a phase band may show, longest first: its pass's label, a short form, its number, nothing.
 * A band shows the longest that fits whole, never a word cut by an ellipsis ("forwar…"); the
 * full label stays its tooltip and accessible name. */
export function bandLabels(label) {
  const short = label.replace(/ of .*$/, "").replace(/ lr=.*$/, "").replace(/^forward /, "fwd ").replace(/^backward /, "bwd ");
  const number = /#\d+$/.exec(short)?.[0] ?? "";
  return [...new Set([label, short, number, ""])];
}

/** Each band's text: the longest of bandLabels that fits its width. */
function fitBands(bandsEl) {
  for (const el of bandsEl.children) {
    for (const text of bandLabels(el.title)) {
      el.textContent = text;
      if (el.scrollWidth <= el.clientWidth) break;
    }
  }
}

/** Lists up to this long are built whole; longer ones keep only the rows near the view in the
 * DOM (a 400,000-event trace's list was 1.6 million elements and froze the page). */
const WHOLE_UP_TO = 3000;
/** Rows kept beyond each edge of the view, and the row height before one is measured (px). */
const OVERSCAN = 40;
const ROW_PX = 17;

export function createEventList({ listEl, bandsEl, onPick }) {
  if (typeof ResizeObserver !== "undefined") new ResizeObserver(() => fitBands(bandsEl)).observe(bandsEl);
  let events = [];
  let about = [];
  let names = new Map();
  let rows = new Map(); // event index -> its <li>, for the rows in the DOM
  let shown = { from: 0, to: 0 }; // the rows in the DOM: [from, to)
  let rowPx = 0; // one row's height, measured on the first row drawn (all rows are one line)
  let current = -1;
  let marked = new Set();
  let cursor = -1; // the keyboard's row (aria-activedescendant)
  const spacer = (which) => h("li", { class: `ev-spacer ev-spacer--${which}`, role: "presentation", "aria-hidden": "true" });
  const before = spacer("before");
  const after = spacer("after");

  listEl.tabIndex = 0;
  listEl.setAttribute("role", "listbox");
  // No scrolling on focus: a click focuses the list first, and moving the rows under the pointer
  // then would turn the click into one on the list itself.
  listEl.addEventListener("focus", () => moveCursor(cursor >= 0 ? cursor : Math.max(0, current), false));
  listEl.addEventListener("keydown", (e) => {
    if (!events.length || e.ctrlKey || e.metaKey || e.altKey) return;
    const moves = { ArrowDown: 1, ArrowUp: -1, PageDown: 10, PageUp: -10 };
    if (e.key in moves) moveCursor(cursor + moves[e.key]);
    else if (e.key === "Enter" || e.key === " ") pick(cursor);
    else return;
    // Handled here: the page's own keys (space = play) must not act on it too.
    e.preventDefault();
    e.stopPropagation();
  });
  let scrolled = false;
  listEl.addEventListener(
    "scroll",
    () => {
      if (scrolled || events.length <= WHOLE_UP_TO) return;
      scrolled = true;
      requestAnimationFrame(() => {
        scrolled = false;
        showRowsAround();
      });
    },
    { passive: true },
  );

  /** The <li> of event i, made with its marks (current, marked, cursor). */
  function makeRow(i) {
    const ev = events[i];
    const row = h("li", { id: `ev-${i}`, role: "option", "aria-selected": String(i === current), class: `ev ev--${ev.kind} ev--${ev.phase}`, "data-seq": i, "data-node": about[i] || "" }, [
      h("span", { class: "ev-seq", text: String(i) }),
      h("span", { class: "ev-kind", text: ev.kind }),
      h("span", { class: "ev-text", text: summary(ev, names) }),
    ]);
    if (i === current) row.classList.add("is-current");
    if (marked.has(i)) row.classList.add("is-marked");
    if (i === cursor) row.classList.add("is-cursor");
    return row;
  }

  /** One row's height: measured once on a row in the DOM (one line each), else the CSS's. */
  const rowHeight = () => rowPx || (rowPx = rows.values().next().value?.offsetHeight || 0) || ROW_PX;
  /** Where row i's top is in the list's scroll space. */
  const rowTop = (i) => rows.get(i)?.offsetTop ?? i * rowHeight();

  /** Put rows [from, to) in the DOM (a long list: spacers stand for the rest). */
  function showRows(from, to) {
    from = Math.max(0, from);
    to = Math.min(events.length, to);
    if (from === shown.from && to === shown.to) return;
    const next = new Map();
    const frag = document.createDocumentFragment();
    for (let i = from; i < to; i++) {
      const row = rows.get(i) || makeRow(i);
      next.set(i, row);
      frag.append(row);
    }
    rows = next;
    shown = { from, to };
    if (events.length <= WHOLE_UP_TO) {
      listEl.replaceChildren(frag);
      return;
    }
    before.style.height = `${from * rowHeight()}px`;
    after.style.height = `${(events.length - to) * rowHeight()}px`;
    listEl.replaceChildren(before, frag, after);
  }

  /** A long list: the rows around the scroll position (or around `top`, a scrollTop about to be
   * set: the rows must be there first, or the browser scrolls to the nearest one it has). */
  function showRowsAround(top = listEl.scrollTop) {
    if (events.length <= WHOLE_UP_TO) return;
    const px = rowHeight();
    const first = Math.floor(top / px);
    const count = Math.ceil((listEl.clientHeight || 10 * px) / px);
    if (first - OVERSCAN >= shown.from && first + count + OVERSCAN <= shown.to) return;
    showRows(first - 2 * OVERSCAN, first + count + 2 * OVERSCAN); // (a margin: a short scroll redraws nothing)
  }

  /** Scroll the list (not the page) so row i is in view, half-way down when it has to move. */
  function reveal(i) {
    const top = rowTop(i);
    if (top < listEl.scrollTop || top > listEl.scrollTop + listEl.clientHeight - rowHeight()) scrollListTo(top - listEl.clientHeight / 2);
  }

  function scrollListTo(top) {
    // a long list does not snap to rows: its scroll lands on a row's top itself (no half row)
    if (events.length > WHOLE_UP_TO) top = Math.round(top / rowHeight()) * rowHeight();
    showRowsAround(Math.max(0, top));
    listEl.scrollTop = top;
  }

  function moveCursor(i, scroll = true) {
    if (!events.length) return;
    rows.get(cursor)?.classList.remove("is-cursor");
    cursor = Math.max(0, Math.min(events.length - 1, i));
    if (scroll) reveal(cursor);
    rows.get(cursor)?.classList.add("is-cursor");
    listEl.setAttribute("aria-activedescendant", `ev-${cursor}`);
  }

  function pick(i) {
    if (i >= 0 && i < events.length) onPick(i, about[i] || null);
  }

  function draw(trace, timeline) {
    names = new Map(trace.graph.nodes.map((n) => [n.id, n.kind === "tensor" ? prettyName(n.tensor || n.label) : prettyName(n.tensor) || n.op]));
    const total = Math.max(1, timeline.events.length);
    bandsEl.replaceChildren(
      ...passBands(timeline).map((b) =>
        h("button", {
          class: `band band--${b.phase}`,
          style: `left:${(100 * b.from) / total}%;width:${(100 * (b.to - b.from + 1)) / total}%`,
          title: b.label,
          "aria-label": b.label,
          text: b.label,
          type: "button",
          onclick: () => onPick(b.from),
        }),
      ),
    );
    fitBands(bandsEl);
    events = timeline.events;
    about = timeline.eventAbout;
    current = -1;
    marked = new Set();
    cursor = -1;
    rows = new Map();
    shown = { from: 0, to: 0 };
    listEl.scrollTop = 0;
    listEl.removeAttribute("aria-activedescendant");
    // (a long list's rows come and go: snapping to rows would pull a far scroll back to them)
    listEl.classList.toggle("is-windowed", events.length > WHOLE_UP_TO);
    if (events.length <= WHOLE_UP_TO) showRows(0, events.length);
    else showRowsAround();
    listEl.onclick = (e) => {
      const row = e.target.closest("li[data-seq]");
      if (!row) return;
      cursor = Number(row.dataset.seq);
      pick(cursor);
    };
  }

  let scrollPending = false;
  let settle = null; // a deferred setCurrent while playing fast
  let pendingStep = -1;
  /**
   * Mark event i as the current one. `throttle` (fast playback): at most every THROTTLE_MS, the
   * latest step — a list nobody can read at 60 events/s need not repaint on every frame (its
   * paint was most of the page's per-frame paint). Otherwise at once, dropping any deferred one.
   */
  function setCurrent(i, { throttle = false } = {}) {
    if (throttle) {
      pendingStep = i;
      settle ??= setTimeout(() => {
        settle = null;
        showCurrent(pendingStep);
      }, THROTTLE_MS);
      return;
    }
    clearTimeout(settle);
    settle = null;
    showCurrent(i);
  }

  function showCurrent(i) {
    const last = rows.get(current);
    if (last) {
      last.classList.remove("is-current");
      last.setAttribute("aria-selected", "false");
    }
    current = i;
    if (i < 0 || i >= events.length) return;
    const row = rows.get(i);
    if (row) {
      row.classList.add("is-current");
      row.setAttribute("aria-selected", "true");
    }
    // Scroll the list itself (not the page) so the current event stays visible. Reading
    // offsetTop right after the graph's attributes changed would force a synchronous layout
    // of the whole page on every step (~190 ms at 1.3k nodes): read once per frame instead.
    if (scrollPending) return;
    scrollPending = true;
    requestAnimationFrame(() => {
      scrollPending = false;
      if (current >= 0 && current < events.length) reveal(current);
    });
  }

  function markEvents(seqs, { reveal: show = false } = {}) {
    for (const i of marked) rows.get(i)?.classList.remove("is-marked");
    marked = new Set(seqs);
    for (const i of marked) rows.get(i)?.classList.add("is-marked");
    if (show && seqs.length) {
      // Show the node's next event from where we are (or its last one), inside the list only.
      const next = seqs.find((i) => i >= current) ?? seqs[seqs.length - 1];
      scrollListTo(rowTop(next) - listEl.clientHeight / 2);
    }
  }

  return { draw, setCurrent, markEvents };
}
