// Share (the link to this view, iframe and Markdown snippets, each with a Copy button) and the Export menu (SVG, animated SVG, PNG,
// HTML — the server's one-file offline player of the permalink — and JSON).

import { graphCssText, saveBlob, svgToPngBlob, slug } from "./download.js";
import { tensorDataJson } from "./tensordata.js";
import { bindCopyButtons } from "./copy.js";
import { writeHash } from "./state.js";

const $ = (id) => document.getElementById(id);

// What a shared link keeps of the view besides its source.
const VIEW_KEYS = ["step", "node", "collapsed", "compare"];

export function bindShareAndExport({ store, api, getTrace, getLayout, getSpecText, untouchedExample = () => "", stepSvg, setStatus = () => {} }) {
  const theme = () => (document.documentElement.classList.contains("gt-theme-dark") ? "gt-theme-dark" : "gt-theme-light");
  const name = () => slug(getTrace()?.title);

  /** Share and Export → HTML both store the spec being edited as a permalink. An example run
   * as it came keeps its name in the URL (the page does not turn into an "Edited spec"). */
  async function savePermalink() {
    const { run } = store.get();
    if (run) return { id: run, url: `/?run=${encodeURIComponent(run)}`, program: true }; // stored when it ran
    const saved = await api.share(getSpecText());
    if (!untouchedExample()) store.set({ spec: saved.id });
    return saved;
  }

  /** The link to this view: the example (untouched) or the permalink, plus the view's hash. */
  function viewLink(saved) {
    const origin = location.origin;
    const example = untouchedExample();
    const view = new URLSearchParams(example ? { example } : {});
    const state = store.get();
    const shown = writeHash(Object.fromEntries(VIEW_KEYS.map((key) => [key, state[key]]))); // (as the URL writes them)
    for (const [key, value] of new URLSearchParams(shown.slice(1))) view.set(key, value);
    const base = example ? `${origin}/` : saved.url ? new URL(saved.url, origin).href : `${origin}/?spec=${saved.id}`;
    return { link: view.toString() ? `${base}#${view}` : base, base };
  }

  bindCopyButtons($("share-dialog"), $("share-copied"));
  $("share")?.addEventListener("click", async () => {
    const dialog = $("share-dialog");
    const errEl = $("share-error");
    errEl.hidden = true;
    if ($("share-copied")) $("share-copied").textContent = "";
    try {
      const saved = await savePermalink();
      const origin = location.origin;
      const { link, base } = viewLink(saved);
      $("share-url").value = link;
      if (saved.program) {
        // a program's permalink reruns its source; the embed and the diagram are drawn from specs
        $("share-iframe").value = $("share-markdown").value = "";
        errEl.hidden = false;
        errEl.textContent = "This link runs your program again. Embeds and diagram images are made from specs: use Edit as spec (when offered) for those.";
        if (!dialog.open) dialog.showModal();
        $("share-url").select();
        return;
      }
      const embed = saved.embed_url ? new URL(saved.embed_url, origin).href : `${origin}/embed/${saved.id}`;
      $("share-iframe").value = `<iframe src="${embed}" width="100%" height="520" style="border:0" title="gradtrace: ${(getTrace()?.title || "").replace(/"/g, "&quot;")}"></iframe>`;
      const diagram = saved.diagram_url ? new URL(saved.diagram_url, origin).href : `${origin}/api/v1/specs/${saved.id}/diagram.svg`;
      $("share-markdown").value = `[![${getTrace()?.title || "gradtrace diagram"}](${diagram})](${base})`;
    } catch (err) {
      errEl.hidden = false;
      errEl.textContent = `could not save the spec: ${err.message}`;
    }
    if (!dialog.open) dialog.showModal();
    $("share-url").select();
  });

  const closeMenu = () => $("export-menu")?.removeAttribute("open");
  $("export-svg")?.addEventListener("click", () => {
    const still = stepSvg();
    if (!still) return;
    saveBlob(new Blob([still.text], { type: "image/svg+xml" }), `${name()}-step${store.get().step}.svg`);
    closeMenu();
  });
  $("export-animated")?.addEventListener("click", async () => {
    const layout = getLayout();
    if (!layout) return;
    // The exporters' builder (the same one behind diagram.svg and the CLI), loaded on demand.
    const { buildDiagramSvg } = await import("./export/svg.js");
    const text = buildDiagramSvg(getTrace(), layout, { animated: true, theme: theme().replace("gt-theme-", ""), css: graphCssText() });
    saveBlob(new Blob([text], { type: "image/svg+xml" }), `${name()}-animated.svg`);
    closeMenu();
  });
  $("export-png")?.addEventListener("click", async () => {
    const still = stepSvg();
    if (!still) return;
    const blob = await svgToPngBlob(still.text, still.width, still.height);
    saveBlob(blob, `${name()}-step${store.get().step}.png`);
    closeMenu();
  });
  $("export-html")?.addEventListener("click", async () => {
    if (!getTrace()) return;
    closeMenu();
    // The server draws the player (layout by ELK in Node) from the stored spec: it takes a moment.
    setStatus("preparing the HTML player…");
    try {
      const saved = await savePermalink();
      const { blob, filename } = await api.playerHtml(saved.id, store.get().theme);
      saveBlob(blob, filename || `${name()}.html`);
      setStatus("");
    } catch (err) {
      setStatus(`could not export HTML: ${err.message}`, true);
    }
  });
  $("export-json")?.addEventListener("click", () => {
    const trace = getTrace();
    if (!trace) return;
    closeMenu();
    try {
      // written as the server wrote it (schema 3: each tensor's numbers once)
      saveBlob(new Blob([tensorDataJson(trace, 1)], { type: "application/json" }), `${name()}.trace.json`);
    } catch (err) {
      setStatus(`could not export JSON: ${err.message}`, true);
    }
  });
}
