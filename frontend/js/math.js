// Math in the page: TeX typeset by KaTeX (vendored, loaded on first use). Until KaTeX has
// loaded — or where it cannot (a standalone file, offline) — the same formula shows as plain
// text; every block still on the page is typeset once KaTeX arrives.

import { h } from "./dom.js";
import { loadKatex } from "./vendor.js";

let katex = null;
let loading = null;

function typeset(el) {
  katex.render(el.dataset.tex, el, { throwOnError: false, displayMode: false, output: "htmlAndMathml" });
  el.classList.add("is-typeset");
}

function ensureKatex() {
  if (katex || loading) return;
  loading = loadKatex()
    .then((k) => {
      katex = k;
      for (const el of document.querySelectorAll(".math[data-tex]:not(.is-typeset)")) typeset(el);
    })
    .catch(() => {
      loading = null; // stays plain text; the next block tries again
    });
}

/** A formula: typeset when KaTeX is there, its plain-text twin (`text`) until then. */
export function mathBlock(tex, text) {
  const el = h("div", { class: "math", "data-tex": tex, "data-text": text, text });
  if (katex) typeset(el);
  else ensureKatex();
  return el;
}
