// The spec editor: a plain textarea (labelled "Spec") with line numbers, and every error the API
// lists (or a JSON syntax error) underlined at the exact line its JSON Pointer names — found with
// momoa's source locations (jsonpos.js) — and listed under the editor: each entry a button that
// puts the caret on its line. No network besides loading momoa: loaders.js runs specs.

import { h } from "./dom.js";
import { locatePointers, syntaxErrorAt } from "./jsonpos.js";
import { createUnderlines } from "./underline.js";
import { attachPytorchTab } from "./pytorch_tab.js";
import { loadMomoa } from "./vendor.js";

/** Without momoa (it failed to load): the line V8's JSON.parse message states, else line 1. */
function lineFromMessage(message) {
  const m = /line (\d+)/.exec(message || "");
  return m ? Number(m[1]) : 1;
}

/** The offset where 1-based `line` starts in `text`. */
function lineStart(text, line) {
  let at = 0;
  for (let k = 1; k < line && at !== -1; k++) at = text.indexOf("\n", at) + 1 || -1;
  return at === -1 ? text.length : at;
}

/** "Line 12 (/modules/f0/type): " — where a problem sits, as its list entry starts. */
const placeOf = (p) => `${p.line ? `Line ${p.line}` : "Spec"}${p.path ? ` (${p.path})` : ""}: `;

export function createEditor({ textarea, gutter, errorEl }) {
  let errorLines = new Set();
  // "json", or "python" while the PyTorch tab shows the spec as PyTorch (pytorch_tab.js)
  let language = "json";
  let toSpecText = null;
  const languageListeners = [];
  const momoa = loadMomoa().catch(() => null);
  const underlines = createUnderlines(textarea);

  function renderGutter() {
    const lines = textarea.value.split("\n").length;
    const frag = document.createDocumentFragment();
    for (let k = 1; k <= lines; k++) frag.append(h("span", { class: errorLines.has(k) ? "gutter-line has-error" : "gutter-line", text: String(k) }));
    gutter.replaceChildren(frag);
    gutter.scrollTop = textarea.scrollTop;
  }
  textarea.addEventListener("input", () => {
    clearError();
    renderGutter();
  });
  textarea.addEventListener("scroll", () => (gutter.scrollTop = textarea.scrollTop));

  function clearError() {
    errorLines = new Set();
    errorEl.hidden = true;
    errorEl.replaceChildren();
    underlines.clear();
    textarea.removeAttribute("aria-invalid");
    delete errorEl.dataset.line;
    delete errorEl.dataset.path;
  }

  /** Select a placed problem's text (or put the caret at the start of its line) and scroll its line into view. */
  function reveal(p) {
    textarea.setSelectionRange(p.start, p.selectEnd);
    const lineHeight = parseFloat(getComputedStyle(textarea).lineHeight) || 18;
    textarea.scrollTop = Math.max(0, (p.line - 3) * lineHeight);
  }

  /** The list's buttons: the caret goes to the problem, in the editor, ready to fix it. */
  function jumpTo(p) {
    textarea.focus();
    reveal(p);
  }

  /**
   * Show problems, each {line, message, path?, start?, end?} (line null: no place in the text):
   * the gutter and an underline mark their lines, a list under the editor names them all.
   */
  function show(shown, what = "in the spec") {
    // Each placed problem's offsets, worked out once: its text (else its whole line) to underline,
    // and what to select on a jump to it (its text, else just a caret at its line's start).
    const text = textarea.value;
    const problems = shown.map((p) => {
      if (!p.line) return p;
      const start = p.start ?? lineStart(text, p.line);
      return { ...p, start, end: p.end ?? lineStart(text, p.line + 1), selectEnd: p.end ?? start };
    });
    const placed = problems.filter((p) => p.line);
    errorLines = new Set(placed.map((p) => p.line));
    const first = problems[0];
    errorEl.hidden = false;
    if (first.line) errorEl.dataset.line = String(first.line);
    if (first.path) errorEl.dataset.path = first.path;
    const items = problems.map((p) =>
      h("li", {}, [p.line ? h("button", { type: "button", class: "spec-error-place", "data-line": p.line, onclick: () => jumpTo(p), text: placeOf(p) }) : h("strong", { text: placeOf(p) }), p.message]),
    );
    const heading = problems.length > 1 ? h("p", { class: "spec-error-count", text: `${problems.length} problems ${what}:` }) : null;
    errorEl.replaceChildren(...[heading, h("ol", { class: "spec-errors" }, items)].filter(Boolean));
    textarea.setAttribute("aria-invalid", "true");
    renderGutter();
    underlines.show(placed.map((p) => ({ start: p.start, end: p.end })));
    if (placed.length) reveal(placed[0]);
  }

  const editor = {
    get value() {
      return textarea.value;
    },
    /** New spec JSON (an example, a permalink): the JSON tab shows it. */
    set value(text) {
      textarea.value = text;
      clearError();
      renderGutter();
      editor.setLanguage("json", null);
    },
    get language() {
      return language;
    },
    /** Switch what the text is: "json", or "python" with `toSpec(text)` resolving to spec JSON text or null. */
    setLanguage(next, toSpec) {
      language = next;
      toSpecText = toSpec;
      textarea.setAttribute("aria-label", next === "python" ? "PyTorch" : "Spec");
      languageListeners.forEach((fn) => fn(next));
    },
    onLanguage(fn) {
      languageListeners.push(fn);
    },
    /** Replace the text keeping the language (the PyTorch tab's translations). */
    replaceText(text) {
      textarea.value = text;
      clearError();
      renderGutter();
    },
    /** Problems at 1-based lines of the text as shown, [{line, column?, message}]; `what` ends the
     * count's heading ("3 problems the spec editor cannot read"). */
    showAtLines(problems, { what = language === "python" ? "in the program" : "in the spec" } = {}) {
      const text = textarea.value;
      show(
        problems.map((p) => {
          if (!p.line) return { line: null, message: p.message };
          const start = lineStart(text, p.line);
          return p.column ? { line: p.line, message: p.message, start: start + p.column - 1, end: lineStart(text, p.line + 1) } : { line: p.line, message: p.message };
        }),
        what,
      );
    },
    /** Parse locally first: a syntax error never needs the server. Resolves to the text or null. */
    async checkSyntax() {
      if (language === "python" && toSpecText) return toSpecText(textarea.value);
      const text = textarea.value;
      try {
        JSON.parse(text);
        return text;
      } catch (err) {
        const m = await momoa;
        const loc = m ? syntaxErrorAt(m, text) : null;
        const message = loc?.trailingComma ? "invalid JSON: a trailing comma (JSON allows none after the last item)" : `invalid JSON: ${err.message}`;
        show([loc ? { line: loc.line, message, start: loc.offset, end: loc.offset + 1 } : { line: lineFromMessage(err.message), message }]);
        return null;
      }
    },
    /** An ApiError: every problem it lists, each at the line of its JSON Pointer (or the key it quotes). */
    async showApiError(err) {
      const listed = err.errors?.length ? err.errors : [{ path: err.path, message: err.message }];
      const hasPath = (p) => p.path !== null && p.path !== undefined;
      const m = listed.some(hasPath) ? await momoa : null;
      // one parse of the spec for the whole list, not one per problem
      const locs = m ? locatePointers(m, textarea.value, listed.map((p) => ({ pointer: p.path, message: p.message }))) : [];
      show(
        listed.map((p, k) => {
          const loc = m && hasPath(p) ? locs[k] : null;
          return loc ? { line: loc.line, path: loc.pointer, message: p.message, start: loc.start, end: loc.end } : { line: p.path ? 1 : null, path: p.path, message: p.message };
        }),
      );
    },
    clearError,
  };
  // showProgram(python), offerSpec(python): the PyTorch tab's, for the loaders
  return Object.assign(editor, attachPytorchTab(editor, textarea));
}
