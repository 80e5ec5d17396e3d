// Wavy underlines over a plain textarea: a mirror of its text laid exactly over it (same font,
// padding and scroll), transparent except for the marked ranges' underline. The textarea stays
// the one editable, accessible control; the mirror is decoration (aria-hidden, no pointer events).

import { h } from "./dom.js";

/** The first line of each range, [start, end) offsets into `text`, sorted and not overlapping. */
function firstLines(text, ranges) {
  const out = [];
  for (const r of [...ranges].sort((a, b) => a.start - b.start)) {
    const eol = text.indexOf("\n", r.start);
    let end = Math.min(r.end, eol === -1 ? text.length : eol);
    const start = Math.max(r.start, out.length ? out[out.length - 1].end : 0);
    if (end <= start) end = Math.min(start + 1, text.length); // at least one character to mark
    if (end > start) out.push({ start, end });
  }
  return out;
}

export function createUnderlines(textarea) {
  const mirror = h("div", { class: "editor-marks", "aria-hidden": "true" });
  textarea.parentElement.classList.add("has-marks");
  mirror.hidden = true; // nothing underlined yet (an empty mirror shows nothing either way)
  textarea.after(mirror);

  /**
   * Put the mirror on the textarea's text box (not its scrollbars), scrolled as it is. Only while
   * something is underlined: show() places it again when it appears, so a hidden mirror needs no
   * measuring on every scroll and resize.
   */
  function place() {
    if (mirror.hidden) return;
    Object.assign(mirror.style, {
      left: `${textarea.offsetLeft}px`,
      top: `${textarea.offsetTop}px`,
      width: `${textarea.clientWidth}px`,
      height: `${textarea.clientHeight}px`,
    });
    mirror.scrollTop = textarea.scrollTop;
    mirror.scrollLeft = textarea.scrollLeft;
  }
  textarea.addEventListener("scroll", place);
  new ResizeObserver(place).observe(textarea);

  return {
    /** Underline the first line of each {start, end} range of the textarea's current text. */
    show(ranges) {
      const text = textarea.value;
      const parts = [];
      let at = 0;
      for (const r of firstLines(text, ranges)) {
        parts.push(text.slice(at, r.start), h("mark", { class: "editor-mark", text: text.slice(r.start, r.end) }));
        at = r.end;
      }
      // The trailing newline keeps a last empty line as tall as the textarea's.
      parts.push(`${text.slice(at)}\n`);
      mirror.replaceChildren(...parts);
      mirror.hidden = false;
      place();
    },
    clear() {
      mirror.replaceChildren();
      mirror.hidden = true;
    },
  };
}
