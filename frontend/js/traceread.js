// A document read from a Blob (an opened file, the file `gradtrace view` serves) without blocking
// the page: a Web Worker (traceworker.js) reads the text, parses it and checks it (tracedoc.js),
// then hands a trace over in slices, each a short task here (one message of a 400,000-event
// trace's events would cost the page seconds to receive). Where no worker can start (a
// standalone file opened from disk), the text is parsed here, as before.

import { parseJson, isRunDoc, traceOf } from "./tracedoc.js";
import { resolveTensorData } from "./tensordata.js";

const WORKER_URL = "/js/traceworker.js";

/** Whether this page can start the trace worker (a module worker from its own server). */
function canUseWorker() {
  return typeof Worker !== "undefined" && /^https?:$/.test(globalThis.location?.protocol || "") && !document.getElementById("gradtrace-data");
}

/** {trace} or {run} from a document's text, on this thread. */
async function readHere(blob) {
  const text = await blob.text();
  const doc = parseJson(text);
  return isRunDoc(doc) ? { run: text } : { trace: resolveTensorData(traceOf(doc)) };
}

/**
 * The document in `blob`: {trace} (parsed, checked, its tensor numbers resolved) or {run} (a
 * training run's text: the run view shows it). `onProgress(text)` hears what is happening
 * ("reading 120 MB of 314 MB", "receiving events 40,000 of 400,014"). Rejects with an Error
 * saying why the document is neither.
 */
export function readTraceBlob(blob, { onProgress = () => {} } = {}) {
  if (!canUseWorker()) return readHere(blob);
  return new Promise((resolve, reject) => {
    let worker;
    try {
      worker = new Worker(WORKER_URL, { type: "module" });
    } catch {
      readHere(blob).then(resolve, reject);
      return;
    }
    let doc = null;
    let heard = false;
    const finish = (fn, value) => {
      worker.terminate();
      fn(value);
    };
    worker.onerror = (e) => {
      worker.terminate();
      // A worker that never started (its script not served: the server went away) reads here.
      if (!heard) readHere(blob).then(resolve, reject);
      else reject(new Error(`the trace reader failed: ${e.message || "it stopped"}`));
    };
    worker.onmessage = ({ data: m }) => {
      heard = true;
      if (m.type === "progress") onProgress(m.text);
      else if (m.type === "head") doc = resolveTensorData(m.doc);
      else if (m.type === "slice") {
        // (the slice's numbers resolved against the document's blocks, as a whole one would be)
        resolveTensorData({ schema_version: doc.schema_version, tensor_data: doc.tensor_data, slice: m.items });
        const into = m.field === "events" ? doc.events : doc.graph[m.field];
        for (const item of m.items) into.push(item);
        onProgress(`receiving ${m.field} ${m.done.toLocaleString("en")} of ${m.total.toLocaleString("en")}`);
      } else if (m.type === "done") finish(resolve, { trace: doc });
      else if (m.type === "run") finish(resolve, { run: m.text });
      else if (m.type === "error") finish(reject, new Error(m.message));
    };
    worker.postMessage({ blob });
  });
}
