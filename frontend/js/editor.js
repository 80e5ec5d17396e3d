// The spec editor: a plain textarea (labelled "Spec") with line numbers, and errors put at the
// line the API's JSON Pointer (or a JSON syntax error) names. No network: main.js runs specs.

import { h } from "./dom.js";
import { locate, syntaxErrorLine } from "./jsonpos.js";

export function createEditor({ textarea, gutter, errorEl }) {
  let errorLine = null;

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
    /** Parse locally first: a syntax error never needs the server. Returns the text or null. */
    checkSyntax() {
      try {
        JSON.parse(textarea.value);
        return textarea.value;
      } catch (err) {
        showAt(syntaxErrorLine(textarea.value, err), `invalid JSON: ${err.message}`, null, null);
        return null;
      }
    },
    /** An ApiError with a JSON Pointer path: put it at that field's line. */
    showApiError(err) {
      const loc = err.path !== null && err.path !== undefined ? locate(textarea.value, err.path) : null;
      showAt(loc ? loc.line : 1, err.message, err.path, loc);
    },
    clearError,
  };
}
