// The spec editor: a plain textarea (labelled "Spec") with line numbers, and errors put at the
// exact line the API's JSON Pointer (or a JSON syntax error) names, found with momoa's source
// locations (jsonpos.js). No network besides loading momoa: loaders.js runs specs.

import { h } from "./dom.js";
import { locatePointer, syntaxErrorAt } from "./jsonpos.js";
import { loadMomoa } from "./vendor.js";

/** Without momoa (it failed to load): the line V8's JSON.parse message states, else line 1. */
function lineFromMessage(message) {
  const m = /line (\d+)/.exec(message || "");
  return m ? Number(m[1]) : 1;
}

export function createEditor({ textarea, gutter, errorEl }) {
  let errorLine = null;
  const momoa = loadMomoa().catch(() => null);

  function renderGutter() {
    const lines = textarea.value.split("\n").length;
    const frag = document.createDocumentFragment();
    for (let k = 1; k <= lines; k++) frag.append(h("span", { class: k === errorLine ? "gutter-line has-error" : "gutter-line", text: String(k) }));
    gutter.replaceChildren(frag);
    gutter.scrollTop = textarea.scrollTop;
  }
  textarea.addEventListener("input", () => {
    clearError();
    renderGutter();
  });
  textarea.addEventListener("scroll", () => (gutter.scrollTop = textarea.scrollTop));

  function clearError() {
    errorLine = null;
    errorEl.hidden = true;
    errorEl.replaceChildren();
    textarea.removeAttribute("aria-invalid");
    delete errorEl.dataset.line;
    delete errorEl.dataset.path;
  }

  /** Show a message at a line; select the offending text so the caret lands there. */
  function showAt(line, message, path, range) {
    errorLine = line;
    errorEl.hidden = false;
    errorEl.dataset.line = String(line);
    if (path !== null && path !== undefined) errorEl.dataset.path = path;
    errorEl.replaceChildren(h("strong", { text: `Line ${line}${path ? ` (${path})` : ""}: ` }), message);
    textarea.setAttribute("aria-invalid", "true");
    renderGutter();
    if (range) {
      textarea.setSelectionRange(range.start, range.end);
      // Bring the line into view inside the textarea.
      const lineHeight = parseFloat(getComputedStyle(textarea).lineHeight) || 18;
      textarea.scrollTop = Math.max(0, (line - 3) * lineHeight);
    }
  }

  return {
    get value() {
      return textarea.value;
    },
    set value(text) {
      textarea.value = text;
      clearError();
      renderGutter();
    },
    /** Parse locally first: a syntax error never needs the server. Resolves to the text or null. */
    async checkSyntax() {
      const text = textarea.value;
      try {
        JSON.parse(text);
        return text;
      } catch (err) {
        const m = await momoa;
        const loc = m ? syntaxErrorAt(m, text) : null;
        const line = loc ? loc.line : lineFromMessage(err.message);
        const range = loc ? { start: loc.offset, end: loc.offset + 1 } : null;
        showAt(line, loc?.trailingComma ? "invalid JSON: a trailing comma (JSON allows none after the last item)" : `invalid JSON: ${err.message}`, null, range);
        return null;
      }
    },
    /** An ApiError with a JSON Pointer path: put it at that field's line (or the key it quotes). */
    async showApiError(err) {
      const m = err.path !== null && err.path !== undefined ? await momoa : null;
      const loc = m ? locatePointer(m, textarea.value, err.path, err.message) : null;
      showAt(loc ? loc.line : 1, err.message, loc ? loc.pointer : err.path, loc);
    },
    clearError,
  };
}
