// The trace worker (traceread.js starts it): reads a Blob's text, parses and checks it
// (tracedoc.js), and posts it back in slices (its tensor numbers still indices: the page resolves
// them, tensordata.js remembers where each came from): first the document without its three long arrays,
// then graph.nodes, graph.edges and events SLICE items at a time, then "done"; or one "error"
// with the sentence the page shows; or, for a training run's file, one "run" with its text.
// Progress messages say how far it is.

import { isRunDoc, parseJson, traceOf } from "./tracedoc.js";
import { formatBytes } from "./format.js";

/** Items per message: a few MB of JSON, received by the page in tens of milliseconds. */
const SLICE = 4000;
const LONG = ["nodes", "edges", "events"];

const progress = (text) => postMessage({ type: "progress", text });

/** The Blob's text, decoded as it streams in, with the bytes read told every ~5%. */
async function readText(blob) {
  const reader = blob.stream().pipeThrough(new TextDecoderStream()).getReader();
  const parts = [];
  let read = 0;
  let told = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    read += value.length; // (characters: close enough to bytes for a progress line)
    if (read - told > blob.size / 20) {
      told = read;
      progress(`reading ${formatBytes(Math.min(read, blob.size))} of ${formatBytes(blob.size)}`);
    }
  }
  return parts.join("");
}

self.onmessage = async ({ data }) => {
  try {
    const text = await readText(data.blob);
    progress(`parsing ${formatBytes(data.blob.size)} and checking its references`);
    const parsed = parseJson(text);
    if (isRunDoc(parsed)) {
      postMessage({ type: "run", text }); // (the run view's, as the page hands it on)
      return;
    }
    const doc = traceOf(parsed);
    const long = { nodes: doc.graph.nodes, edges: doc.graph.edges, events: doc.events };
    postMessage({ type: "head", doc: { ...doc, graph: { ...doc.graph, nodes: [], edges: [] }, events: [] } });
    for (const field of LONG) {
      const list = long[field];
      for (let i = 0; i < list.length; i += SLICE) {
        const items = list.slice(i, i + SLICE);
        postMessage({ type: "slice", field, items, done: i + items.length, total: list.length });
      }
    }
    postMessage({ type: "done" });
  } catch (err) {
    postMessage({ type: "error", message: err.message || String(err) });
  }
};
