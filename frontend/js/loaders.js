// Where traces come from: an example (spec into the editor, then POST /trace), the editor's
// own text (Run), a permalink (?spec=<id>), or the embed page (/embed/<id>). Errors go to the
// editor at the line the API names; successful traces go to showTrace.

import { api, ApiError } from "./api.js";

export function createLoaders({ editor, store, showTrace, setStatus }) {
  const $ = (id) => document.getElementById(id);
  const body = document.body;

  async function runSpec() {
    if (!editor) return;
    const text = editor.checkSyntax();
    if (text === null) {
      setStatus("the spec is not valid JSON", true);
      return;
    }
    body.classList.add("is-running");
    setStatus("tracing…");
    try {
      const t = await api.trace(text);
      editor.clearError();
      setStatus("");
      await showTrace(t);
    } catch (err) {
      if (err.name === "AbortError") return;
      if (err instanceof ApiError) editor.showApiError(err);
      setStatus(err.message, true);
    } finally {
      body.classList.remove("is-running");
    }
  }

  async function loadExample(id) {
    const spec = await api.example(id);
    editor.value = JSON.stringify(spec, null, 2);
    const opt = [...$("example").options].find((o) => o.value === id);
    if ($("example-description")) $("example-description").textContent = opt?.dataset.description || "";
    await runSpec();
  }

  async function bootFull() {
    const examples = await api.examples();
    const select = $("example");
    select.replaceChildren(...examples.map((e) => Object.assign(document.createElement("option"), { value: e.id, textContent: e.title || e.id, title: e.description || "" })));
    for (const [k, e] of examples.entries()) select.options[k].dataset.description = e.description || "";
    const { spec, example } = store.get();
    if (spec) {
      const [saved, t] = await Promise.all([api.savedSpec(spec), api.savedTrace(spec)]);
      editor.value = JSON.stringify(saved.spec ?? saved, null, 2);
      select.value = "";
      await showTrace(t);
      return;
    }
    const id = examples.some((e) => e.id === example) ? example : examples[0]?.id;
    if (!id) return;
    select.value = id;
    if (store.get().example !== id) store.set({ example: id });
    await loadExample(id);
  }

  async function bootEmbed() {
    const m = /\/embed\/([^/?#]+)/.exec(location.pathname);
    const id = m ? decodeURIComponent(m[1]) : store.get().spec;
    if ($("open-link")) $("open-link").href = `/?spec=${encodeURIComponent(id)}`;
    await showTrace(await api.savedTrace(id));
  }

  return { runSpec, loadExample, bootFull, bootEmbed };
}
