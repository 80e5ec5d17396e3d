// Where traces come from: an example (spec into the editor, then POST /trace), the editor's
// own text (Run), a permalink (?spec=<id> or #spec=<id>), or the embed page (/embed/<id>).
// Errors go to the editor at the line the API names; successful traces go to showTrace.
//
// The URL always names what is on screen: an example by id, anything else by permalink. Running
// an edited spec stores it (POST /specs, content-addressed: the same text gives the same id), so
// the hash becomes #spec=<id>, a reload reopens the edit, and the Example select says "Edited".

import { api, ApiError } from "./api.js";

export function createLoaders({ editor, store, showTrace, setStatus }) {
  const $ = (id) => document.getElementById(id);
  const body = document.body;
  // The text as it was loaded (an example's spec or a permalink's): running it unchanged keeps
  // the URL; running anything else makes a new permalink.
  let loadedText = null;

  /** The Example select shows the truth: the example, or one "Edited spec" entry. */
  function showSource({ example = "", permalink = "", note = "" }) {
    const select = $("example");
    if (!select) return;
    let edited = select.querySelector("option[data-edited]");
    if (example) {
      edited?.remove();
      select.value = example;
      const opt = [...select.options].find((o) => o.value === example);
      if ($("example-description")) $("example-description").textContent = opt?.dataset.description || "";
      return;
    }
    if (!edited) {
      edited = Object.assign(document.createElement("option"), { value: "" });
      edited.dataset.edited = "1";
      select.prepend(edited);
    }
    edited.textContent = permalink ? `Edited spec (permalink ${permalink})` : `Edited spec${note ? ` (${note})` : ""}`;
    select.value = "";
    if ($("example-description")) $("example-description").textContent = permalink ? "Your own spec, stored as a permalink: this page's URL reopens it." : "";
  }

  /** Store an edited spec as a permalink and make the URL name it. */
  async function rememberEdit(text) {
    try {
      const saved = await api.share(text);
      loadedText = text;
      store.set({ spec: saved.id, example: "" });
      showSource({ permalink: saved.id });
    } catch (err) {
      store.set({ spec: "", example: "" });
      showSource({ note: "not saved" });
      setStatus(`the edited spec could not be stored, so a reload will lose it: ${err.message}`, true);
    }
  }

  async function runSpec() {
    if (!editor) return;
    const text = await editor.checkSyntax();
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
      if (text !== loadedText) await rememberEdit(text);
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
    editor.value = loadedText = JSON.stringify(spec, null, 2);
    showSource({ example: id });
    await runSpec();
  }

  async function loadPermalink(id) {
    const [saved, t] = await Promise.all([api.savedSpec(id), api.savedTrace(id)]);
    if (editor) editor.value = loadedText = JSON.stringify(saved.spec ?? saved, null, 2);
    showSource({ permalink: id });
    await showTrace(t);
  }

  /** The view part of a URL: what it says, else a fresh start (step 0, nothing selected). */
  const freshView = (next) => ({ step: next.step ?? 0, node: next.node ?? "", collapsed: next.collapsed ?? "", compare: next.compare ?? "" });

  /** Open an example from the select or the URL: a new trace starts at step 0, unselected. */
  function openExample(id, view = {}) {
    store.set({ example: id, spec: "", ...freshView(view) });
    return loadExample(id);
  }

  /** Follow a hash the user typed or navigated to: another source reloads, else only the view. */
  function followHash(next) {
    const cur = store.get();
    if (next.spec && next.spec !== cur.spec) {
      store.set({ spec: next.spec, example: "", ...freshView(next) });
      return loadPermalink(next.spec);
    }
    // (a permalink in the hash wins over an example named beside it, as at boot)
    if (next.example && !next.spec && (next.example !== cur.example || cur.spec) && editor) return openExample(next.example, next);
    store.set(next);
    return Promise.resolve();
  }

  async function bootFull() {
    const examples = await api.examples();
    const select = $("example");
    select.replaceChildren(...examples.map((e) => Object.assign(document.createElement("option"), { value: e.id, textContent: e.title || e.id, title: e.description || "" })));
    for (const [k, e] of examples.entries()) select.options[k].dataset.description = e.description || "";
    const { spec, example } = store.get();
    if (spec) {
      store.set({ example: "" });
      await loadPermalink(spec);
      return;
    }
    const id = examples.some((e) => e.id === example) ? example : examples[0]?.id;
    if (!id) return;
    if (store.get().example !== id) store.set({ example: id });
    await loadExample(id);
  }

  async function bootEmbed() {
    const m = /\/embed\/([^/?#]+)/.exec(location.pathname);
    const id = m ? decodeURIComponent(m[1]) : store.get().spec;
    if ($("open-link")) $("open-link").href = `/?spec=${encodeURIComponent(id)}`;
    await showTrace(await api.savedTrace(id));
  }

  return { runSpec, openExample, followHash, bootFull, bootEmbed };
}
