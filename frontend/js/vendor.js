// The third-party packages the page loads on demand, from this server (never a CDN): KaTeX for
// the inspector's math, momoa (a JSON parser with source locations) for the editor's errors.
// Loaded by URL at run time, not imported, so the standalone player's bundle stays our code only;
// where a package cannot load (a standalone file, offline) callers fall back to plain text.

const cache = new Map();

/** A standalone file or notebook carries its data inline and has no server to load from. */
function serverless() {
  return Boolean(document.getElementById("gradtrace-data"));
}

/** Run a script (or an ES module, `type: "module"`) once; resolves when it has run. */
export function loadScript(src, type = "") {
  if (serverless()) return Promise.reject(new Error(`no server to load ${src} from`));
  if (!cache.has(src)) {
    const done = new Promise((resolve, reject) => {
      const s = document.createElement("script");
      if (type) s.type = type;
      s.src = src;
      s.onload = resolve;
      s.onerror = () => reject(new Error(`could not load ${src}`));
      document.head.append(s);
    });
    done.catch(() => cache.delete(src));
    cache.set(src, done);
  }
  return cache.get(src);
}

function loadStylesheet(href) {
  if (document.querySelector(`link[href="${href}"]`)) return;
  document.head.append(Object.assign(document.createElement("link"), { rel: "stylesheet", href }));
}

/** KaTeX (window.katex) with its stylesheet and fonts, from /vendor/katex/. */
export async function loadKatex() {
  if (window.katex) return window.katex;
  loadStylesheet("/vendor/katex/katex.min.css");
  await loadScript("/vendor/katex/katex.min.js");
  return window.katex;
}

/** momoa's {parse, tokenize}: an ES module, exposed by js/vendor/momoa.js as a global. */
export async function loadMomoa() {
  if (!window.gradtraceMomoa) await loadScript("/js/vendor/momoa.js", "module");
  return window.gradtraceMomoa;
}
