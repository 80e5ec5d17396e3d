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

export function createEventList({ listEl, bandsEl, onPick }) {
  if (typeof ResizeObserver !== "undefined") new ResizeObserver(() => fitBands(bandsEl)).observe(bandsEl);
  let rows = [];
  let current = -1;
  let marked = [];
  let cursor = -1; // the keyboard's row (aria-activedescendant)

  listEl.tabIndex = 0;
  listEl.setAttribute("role", "listbox");
  // No scrolling on focus: a click focuses the list first, and moving the rows under the pointer
  // then would turn the click into one on the list itself.
  listEl.addEventListener("focus", () => moveCursor(cursor >= 0 ? cursor : Math.max(0, current), false));
  listEl.addEventListener("keydown", (e) => {
    if (!rows.length || e.ctrlKey || e.metaKey || e.altKey) return;
    const moves = { ArrowDown: 1, ArrowUp: -1, PageDown: 10, PageUp: -10 };
    if (e.key in moves) moveCursor(cursor + moves[e.key]);
    else if (e.key === "Enter" || e.key === " ") pick(cursor);
    else return;
    // Handled here: the page's own keys (space = play) must not act on it too.
    e.preventDefault();
    e.stopPropagation();
  });

  function moveCursor(i, reveal = true) {
    if (!rows.length) return;
    rows[cursor]?.classList.remove("is-cursor");
    cursor = Math.max(0, Math.min(rows.length - 1, i));
    const row = rows[cursor];
    row.classList.add("is-cursor");
    listEl.setAttribute("aria-activedescendant", row.id);
    if (reveal && (row.offsetTop < listEl.scrollTop || row.offsetTop + row.offsetHeight > listEl.scrollTop + listEl.clientHeight)) listEl.scrollTop = row.offsetTop - listEl.clientHeight / 2;
  }

  function pick(i) {
    const row = rows[i];
    if (row) onPick(Number(row.dataset.seq), row.dataset.node || null);
  }

  function draw(trace, timeline) {
    const names = new Map(trace.graph.nodes.map((n) => [n.id, n.kind === "tensor" ? prettyName(n.tensor || n.label) : prettyName(n.tensor) || n.op]));
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
    const frag = document.createDocumentFragment();
    rows = timeline.events.map((ev, i) => {
      const row = h("li", { id: `ev-${i}`, role: "option", "aria-selected": "false", class: `ev ev--${ev.kind} ev--${ev.phase}`, "data-seq": i, "data-node": timeline.eventAbout[i] || "" }, [
        h("span", { class: "ev-seq", text: String(i) }),
        h("span", { class: "ev-kind", text: ev.kind }),
        h("span", { class: "ev-text", text: summary(ev, names) }),
      ]);
      frag.append(row);
      return row;
    });
    listEl.replaceChildren(frag);
    listEl.onclick = (e) => {
      const row = e.target.closest("li[data-seq]");
      if (!row) return;
      cursor = Number(row.dataset.seq);
      pick(cursor);
    };
    current = -1;
    marked = [];
    cursor = -1;
    listEl.removeAttribute("aria-activedescendant");
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
    if (rows[current]) {
      rows[current].classList.remove("is-current");
      rows[current].setAttribute("aria-selected", "false");
    }
    current = i;
    const row = rows[i];
    if (!row) return;
    row.classList.add("is-current");
    row.setAttribute("aria-selected", "true");
    // Scroll the list itself (not the page) so the current event stays visible. Reading
    // offsetTop right after the graph's attributes changed would force a synchronous layout
    // of the whole page on every step (~190 ms at 1.3k nodes): read once per frame instead.
    if (scrollPending) return;
    scrollPending = true;
    requestAnimationFrame(() => {
      scrollPending = false;
      const r = rows[current];
      if (!r) return;
      const top = r.offsetTop;
      if (top < listEl.scrollTop || top > listEl.scrollTop + listEl.clientHeight - r.offsetHeight) listEl.scrollTop = top - listEl.clientHeight / 2;
    });
  }

  function markEvents(seqs, { reveal = false } = {}) {
    for (const i of marked) rows[i]?.classList.remove("is-marked");
    marked = seqs;
    for (const i of marked) rows[i]?.classList.add("is-marked");
    if (reveal && seqs.length) {
      // Show the node's next event from where we are (or its last one), inside the list only.
      const next = seqs.find((i) => i >= current) ?? seqs[seqs.length - 1];
      const row = rows[next];
      if (row) listEl.scrollTop = row.offsetTop - listEl.clientHeight / 2;
    }
  }

  return { draw, setCurrent, markEvents };
}
