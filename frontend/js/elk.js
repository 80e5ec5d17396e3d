// Lazy, worker-backed ELK for the browser: the ~1.6 MB layout engine loads only when a graph
// needs laying out (precomputed layouts skip it) and runs off the main thread.

const BASE = "/vendor/elkjs/";
let pending = null;

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const s = document.createElement("script");
    s.src = src;
    s.onload = resolve;
    s.onerror = () => reject(new Error(`could not load the layout engine (${src})`));
    document.head.append(s);
  });
}

/** One shared ELK instance whose layouts run in a Web Worker. */
export function loadElk() {
  // A standalone file inlines elk.bundled.js (window.ELK, no worker file to fetch): use it as is.
  if (!pending && window.ELK) pending = Promise.resolve(new window.ELK());
  // A standalone file laid out at export time carries no layout engine, and file:// has no server.
  if (!pending && document.getElementById("gradtrace-data") && !/^https?:$/.test(location.protocol)) {
    return Promise.reject(new Error("this file carries its layout, not the layout engine: open the trace in gradtrace (gradtrace serve) to expand or fold modules"));
  }
  if (!pending) {
    pending = loadScript(`${BASE}elk-api.js`).then(() => new window.ELK({ workerUrl: `${BASE}elk-worker.min.js` }));
    pending.catch(() => (pending = null));
  }
  return pending;
}
