// The editor's PyTorch tab. Run runs the program as written (POST /api/v1/run, loaders.js): the
// graph, the narration and what it printed, its exception at its line. The tab also shows a
// spec as the plain PyTorch program that does the same thing (POST /api/v1/translate {spec});
// going back to JSON, or "Edit as spec" (offered once the translator has read the program),
// reads the program into a spec ({python}: parsed by the server, never run). What the
// translator cannot read is listed, every line of it, each underlined where the user wrote it.

import { api, ApiError } from "./api.js";
import { h } from "./dom.js";

/** "line 7, column 8: …" — where the translator's message places a problem in the source. */
export function placeInSource(message) {
  const m = /^line (\d+)(?:, column (\d+))?: /.exec(message || "");
  return m ? { line: Number(m[1]), column: m[2] ? Number(m[2]) : null, message: message.slice(m[0].length) } : { line: null, column: null, message };
}

/** Every problem an ApiError about a program lists, [{line, column, message}] in its order. */
export function sourceProblems(err) {
  const listed = err.errors?.length ? err.errors : [{ line: err.line, column: err.column, message: err.message }];
  return listed.map((p) => {
    const placed = placeInSource(p.message);
    return { line: p.line ?? placed.line, column: p.column ?? placed.column, message: placed.message };
  });
}

export function attachPytorchTab(editor, textarea) {
  const wrap = textarea.closest(".editor-wrap");
  if (!wrap) return {};
  const tab = (label, lang) => h("button", { type: "button", role: "tab", class: "editor-tab", "data-language": lang, text: label });
  const jsonTab = tab("JSON", "json");
  const pyTab = tab("PyTorch", "python");
  const editAsSpec = h("button", { type: "button", class: "edit-as-spec", hidden: true, title: "The translator reads this program as a spec: edit its layers, hooks and steps as JSON", text: "Edit as spec" });
  const tabs = h("div", { class: "editor-tabs" }, [h("div", { class: "editor-tablist", role: "tablist", "aria-label": "Editor language" }, [jsonTab, pyTab]), editAsSpec]);
  wrap.before(tabs);
  const mark = (lang) => {
    for (const t of [jsonTab, pyTab]) t.setAttribute("aria-selected", String(t.dataset.language === lang));
    if (lang !== "python") editAsSpec.hidden = true;
  };
  mark("json");
  editor.onLanguage(mark);
  textarea.addEventListener("input", () => (editAsSpec.hidden = true)); // an edit: offered for older text

  /** The PyTorch text as spec JSON text, or null with every problem listed at its line. */
  async function toSpec(python) {
    try {
      const { spec } = await api.translate({ python });
      return JSON.stringify(spec, null, 2);
    } catch (err) {
      if (!(err instanceof ApiError)) throw err;
      editor.showAtLines(sourceProblems(err), { what: "the spec editor cannot read (Run runs the program as it is)" });
      return null;
    }
  }

  /** Show the spec JSON `text` in the JSON tab. */
  function showSpec(text) {
    editor.replaceText(text);
    editor.setLanguage("json", null);
  }

  let offered = null; // {python, text}: the program the translator read, and its spec
  editAsSpec.addEventListener("click", async () => {
    const text = offered && offered.python === editor.value ? offered.text : await toSpec(editor.value);
    if (text !== null) showSpec(text);
  });

  pyTab.addEventListener("click", async () => {
    if (editor.language === "python") return;
    const text = await editor.checkSyntax();
    if (text === null) return;
    try {
      const { python } = await api.translate({ spec: JSON.parse(text) });
      showProgram(python);
    } catch (err) {
      if (err instanceof ApiError) editor.showApiError(err);
    }
  });
  jsonTab.addEventListener("click", async () => {
    if (editor.language === "json") return;
    const text = await toSpec(editor.value);
    if (text !== null) showSpec(text);
  });

  /** The PyTorch tab with `python` in it (a program's permalink, a spec shown as PyTorch). */
  function showProgram(python) {
    editor.replaceText(python);
    editor.setLanguage("python", toSpec);
  }

  /** After a run: "Edit as spec" appears if the translator reads `python` (quietly: a program
   * outside its subset still ran; the JSON tab lists why when asked). */
  async function offerSpec(python) {
    editAsSpec.hidden = true;
    let spec;
    try {
      ({ spec } = await api.translate({ python }));
    } catch (err) {
      if (err instanceof ApiError) return;
      throw err;
    }
    offered = { python, text: JSON.stringify(spec, null, 2) };
    editAsSpec.hidden = !(editor.language === "python" && editor.value === python);
  }

  return { showProgram, offerSpec };
}
