// Where traces come from: an example (spec into the editor, then POST /trace), the editor's
// own text (Run: a spec traced, or in the PyTorch tab the program run as written, POST /run),
// a permalink (?spec=<id> or #spec=<id>; a program's: ?run=<id>), the embed page (/embed/<id>),
// or a trace.json the user opened (Open, a dropped file, or `gradtrace view`: ?opened=<file name>),
// or a full trace the run view handed over (?handoff=trace, handoff.js).
// Errors go to the editor at the line the API names; successful traces go to showTrace.
//
// The URL always names what is on screen: an example by id, anything else by permalink. Running
// an edited spec stores it (POST /specs, content-addressed: the same text gives the same id), so
// the hash becomes #spec=<id>, a reload reopens the edit, and the Example select says "Edited".
//
// Each navigation carries its own request: the view it asked for (a step, a selection) travels
// with it to showTrace, and a navigation overtaken by a newer one (the hash changed again before
// its trace arrived) stops without touching the editor, the select or the graph.

import { api, ApiError } from "./api.js";
import { takeHandoff } from "./handoff.js";
import { parseTrace } from "./tracedoc.js";
import { readHash } from "./state.js";
import { readTraceBlob } from "./traceread.js";

export function createLoaders({ editor, store, showTrace, setStatus, programOutput = null }) {
  const $ = (id) => document.getElementById(id);
  const body = document.body;
  // The text as it was loaded (an example's spec or a permalink's): running it unchanged keeps
  // the URL; running anything else makes a new permalink.
  let loadedText = null;
  // The newest navigation's number: an older one that is still loading is stale.
  let newest = 0;

  /** Start a navigation asking for `view.step` (missing: the trace's opening step). */
  function navigation(view = {}) {
    const mine = ++newest;
    return { step: view.step, live: () => mine === newest };
  }

  /** The Example select shows the truth: the example, or one "Edited spec" entry. */
  function showSource({ example = "", permalink = "", note = "", file = "", program = "" }) {
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
    edited.textContent = program ? `Your program (permalink ${program})` : file ? `Opened file ${file}` : permalink ? `Edited spec (permalink ${permalink})` : `Edited spec${note ? ` (${note})` : ""}`;
    select.value = "";
    const about = program ? "Your PyTorch program, run as written on the server: this page's URL runs it again." : file ? "A trace opened from a file, read in this browser. Its spec (if it has one) is in the editor: Run traces it again here." : permalink ? "Your own spec, stored as a permalink: this page's URL reopens it." : "";
    if ($("example-description")) $("example-description").textContent = about;
  }

  /** Store an edited spec as a permalink and make the URL name it. */
  async function rememberEdit(text, nav) {
    try {
      const saved = await api.share(text);
      if (!nav.live()) return;
      loadedText = text;
      store.set({ spec: saved.id, example: "", run: "" });
      showSource({ permalink: saved.id });
    } catch (err) {
      if (!nav.live()) return;
      store.set({ spec: "", example: "", run: "" });
      showSource({ note: "not saved" });
      setStatus(`the edited spec could not be stored, so a reload will lose it: ${err.message}`, true);
    }
  }

  /** Run the editor's text (the Run button: a new navigation that opens at the opening step). */
  function runSpec() {
    return runText(navigation());
  }

  async function runText(nav) {
    if (!editor) return;
    if (editor.language === "python") return runProgram(editor.value, nav);
    programOutput?.clear();
    const text = await editor.checkSyntax();
    if (!nav.live()) return;
    if (text === null) {
      setStatus("the spec is not valid JSON", true);
      return;
    }
    body.classList.add("is-running");
    setStatus("tracing…");
    try {
      const t = await api.trace(text);
      if (!nav.live()) return;
      editor.clearError();
      setStatus("");
      if (text !== loadedText) await rememberEdit(text, nav);
      if (nav.live()) await showTrace(t, nav);
    } catch (err) {
      if (err.name === "AbortError" || !nav.live()) return;
      if (err instanceof ApiError) editor.showApiError(err);
      setStatus(err.message, true);
    } finally {
      if (nav.live()) body.classList.remove("is-running");
    }
  }

  /** Run a program as written (POST /run): its trace drawn, what it printed under the editor,
   * its exception at its line; the URL becomes the program's permalink. */
  async function runProgram(python, nav) {
    body.classList.add("is-running");
    setStatus("running the program…");
    try {
      const result = await api.run(python);
      if (!nav.live()) return;
      editor.clearError();
      programOutput?.show(result);
      const exc = result.exception;
      if (exc) {
        editor.showAtLines([{ line: exc.line, message: `${exc.type}: ${exc.message}` }]);
        setStatus(`the program raised ${exc.type}${exc.line ? ` at line ${exc.line}` : ""}`, true);
      } else setStatus(result.trace ? "" : "the program ran but built no autograd graph: nothing to draw");
      if (result.id) {
        store.set({ run: result.id, spec: "", example: "" });
        showSource({ program: result.id });
      }
      editor.offerSpec?.(python).catch(() => {});
      if (result.trace && nav.live()) await showTrace(result.trace, nav);
    } catch (err) {
      if (err.name === "AbortError" || !nav.live()) return;
      if (err instanceof ApiError && err.line) editor.showAtLines([{ line: err.line, column: err.column, message: err.message }]);
      setStatus(err.message, true);
    } finally {
      if (nav.live()) body.classList.remove("is-running");
    }
  }

  /** A program's permalink: its source into the PyTorch tab, run again (the server's cache answers). */
  async function loadRun(id, nav) {
    const { python } = await api.savedRun(id);
    if (!nav.live()) return;
    editor.showProgram(python);
    loadedText = null;
    await runProgram(python, nav);
  }

  async function loadExample(id, nav) {
    programOutput?.clear();
    const spec = await api.example(id);
    if (!nav.live()) return;
    editor.value = loadedText = JSON.stringify(spec, null, 2);
    showSource({ example: id });
    await runText(nav);
  }

  async function loadPermalink(id, nav) {
    programOutput?.clear();
    const [saved, t] = await Promise.all([api.savedSpec(id), api.savedTrace(id)]);
    if (!nav.live()) return;
    if (editor) editor.value = loadedText = JSON.stringify(saved.spec ?? saved, null, 2);
    showSource({ permalink: id });
    await showTrace(t, nav);
  }

  /** The view part of a URL: what it says, else a fresh start (nothing selected, nothing collapsed). */
  const freshView = (next) => ({ step: next.step ?? 0, node: next.node ?? "", collapsed: next.collapsed ?? null, compare: next.compare ?? "" });

  /** Open an example from the select or the URL: at the step the URL names, else its opening step. */
  function openExample(id, view = {}) {
    const nav = navigation(view);
    store.set({ example: id, spec: "", run: "", ...freshView(view) });
    return loadExample(id, nav);
  }

  /** Follow a hash the user typed or navigated to: another source reloads, else only the view. */
  function followHash(next) {
    const cur = store.get();
    if (next.run && next.run !== cur.run && editor) {
      const nav = navigation(next);
      store.set({ run: next.run, spec: "", example: "", ...freshView(next) });
      return loadRun(next.run, nav);
    }
    if (next.spec && next.spec !== cur.spec) {
      const nav = navigation(next);
      store.set({ spec: next.spec, example: "", ...freshView(next) });
      return loadPermalink(next.spec, nav);
    }
    // (a permalink in the hash wins over an example named beside it, as at boot)
    if (next.example && !next.spec && (next.example !== cur.example || cur.spec) && editor) return openExample(next.example, next);
    store.set(next);
    return Promise.resolve();
  }

  /** Show a trace read from a file (a new navigation, at its built graph); its spec goes to the
   * editor, unsaved: a Run stores it as a permalink like any edit. `view`: the step, node… to
   * open at (a reload of a `gradtrace view` page keeps its place). */
  function openTrace(t, name, view = {}) {
    const nav = navigation(view);
    store.set({ example: "", spec: "", run: "", ...freshView(view) });
    programOutput?.clear();
    if (editor) {
      editor.value = t.spec ? JSON.stringify(t.spec, null, 2) : "";
      editor.clearError();
      loadedText = null;
    }
    showSource({ file: name });
    setStatus("");
    return showTrace(t, nav);
  }

  async function bootFull() {
    const examples = await api.examples();
    const select = $("example");
    select.replaceChildren(...examples.map((e) => Object.assign(document.createElement("option"), { value: e.id, textContent: e.title || e.id, title: e.description || "" })));
    for (const [k, e] of examples.entries()) select.options[k].dataset.description = e.description || "";
    const { spec, example, run } = store.get();
    // A full trace the run view handed over (its "Open in the player"), unless another source was chosen since.
    const handed = new URLSearchParams(location.search).get("handoff") === "trace" && takeHandoff("trace");
    if (handed && !spec && !readHash(location.hash).example) return openTrace(parseTrace(handed.text), handed.name, readHash(location.hash));
    // `gradtrace view`'s page opens its file, unless the user has since chosen another source.
    const opened = new URLSearchParams(location.search).get("opened");
    if (opened && !spec && !readHash(location.hash).example) return openServedTrace(opened, readHash(location.hash));
    const nav = navigation(readHash(location.hash));
    if (run && !spec) {
      store.set({ example: "" });
      await loadRun(run, nav);
      return;
    }
    if (spec) {
      store.set({ example: "", run: "" });
      await loadPermalink(spec, nav);
      return;
    }
    const id = examples.some((e) => e.id === example) ? example : examples[0]?.id;
    if (!id) return;
    if (store.get().example !== id) store.set({ example: id });
    await loadExample(id, nav);
  }

  /** The trace `gradtrace view FILE` serves, named `name`, at the view the hash asks for. */
  async function openServedTrace(name, view) {
    const blob = await api.openedTraceBlob();
    let read;
    try {
      read = await readTraceBlob(blob, { onProgress: (text) => setStatus(`opening ${name}: ${text}…`) });
      if (!read.trace) throw new Error("it is a training run's file: gradtrace view its run folder");
    } catch (err) {
      throw new Error(`${name} cannot be opened: ${err.message}`); // (as the Open button says it)
    }
    return openTrace(read.trace, name, view);
  }

  async function bootEmbed() {
    const m = /\/embed\/([^/?#]+)/.exec(location.pathname);
    const id = m ? decodeURIComponent(m[1]) : store.get().spec;
    if ($("open-link")) $("open-link").href = `/?spec=${encodeURIComponent(id)}`;
    const nav = navigation(readHash(location.hash));
    await showTrace(await api.savedTrace(id), nav);
  }

  /** The example on screen if the editor still holds its spec as loaded, else "". */
  function untouchedExample() {
    const { example, spec } = store.get();
    return example && !spec && editor && editor.value === loadedText ? example : "";
  }

  return { untouchedExample, runSpec, openExample, openTrace, followHash, bootFull, bootEmbed };
}
