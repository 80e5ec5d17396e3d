// The editor's PyTorch tab: the spec shown as the plain PyTorch program that does the same thing
// (POST /api/v1/translate {spec}), editable; Run, or going back to the JSON tab, reads it back
// into a spec ({python}: parsed by the server, never run). What the server cannot read is
// underlined at the line and column of the code the user wrote.

import { api, ApiError } from "./api.js";
import { h } from "./dom.js";

/** "line 7, column 8: …" — where the translator's message places a problem in the source. */
export function placeInSource(message) {
  const m = /^line (\d+)(?:, column (\d+))?: /.exec(message || "");
  return m ? { line: Number(m[1]), column: m[2] ? Number(m[2]) : null, message: message.slice(m[0].length) } : { line: null, column: null, message };
}

export function attachPytorchTab(editor, textarea) {
  const wrap = textarea.closest(".editor-wrap");
  if (!wrap) return;
  const tab = (label, lang) => h("button", { type: "button", role: "tab", class: "editor-tab", "data-language": lang, text: label });
  const jsonTab = tab("JSON", "json");
  const pyTab = tab("PyTorch", "python");
  const tabs = h("div", { class: "editor-tabs", role: "tablist", "aria-label": "Editor language" }, [jsonTab, pyTab]);
  wrap.before(tabs);
  const mark = (lang) => {
    for (const t of [jsonTab, pyTab]) t.setAttribute("aria-selected", String(t.dataset.language === lang));
  };
  mark("json");
  editor.onLanguage(mark);

  /** The PyTorch text as spec JSON text, or null with its problem shown at its line. */
  async function toSpec(python) {
    try {
      const { spec } = await api.translate({ python });
      return JSON.stringify(spec, null, 2);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      editor.showAtLines([placeInSource(err.message)]);
      return null;
    }
  }

  pyTab.addEventListener("click", async () => {
    if (editor.language === "python") return;
    const text = await editor.checkSyntax();
    if (text === null) return;
    try {
      const { python } = await api.translate({ spec: JSON.parse(text) });
      editor.replaceText(python);
      editor.setLanguage("python", toSpec);
    } catch (err) {
      if (err instanceof ApiError) editor.showApiError(err);
    }
  });
  jsonTab.addEventListener("click", async () => {
    if (editor.language === "json") return;
    const text = await toSpec(editor.value);
    if (text === null) return;
    editor.replaceText(text);
    editor.setLanguage("json", null);
  });
}
