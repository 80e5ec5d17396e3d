// A trace's tensor numbers on their way in and out of the viewer. Schema 3 writes each block of
// base64 numbers once, in the document's last field `tensor_data`, and a TensorValue's `data` is
// an index into it; the viewer reads `data` as the base64 string itself (schema 2's form), so
// every trace is resolved once where it enters the JS, and nothing downstream needs the document
// to read a tensor's numbers (compare mode holds two traces). Pure: no DOM, no fetch.

/** A TensorValue, recognised by its keys wherever the document holds one. */
const isTensorValue = (obj) => "shape" in obj && "dtype" in obj && "stats" in obj;

/** Schema 3 (or any document carrying `tensor_data`): its `data` fields are indices. */
const indexesTensorData = (doc) => Array.isArray(doc.tensor_data) || doc.schema_version >= 3;

// The index each resolved TensorValue had: two blocks may hold the same numbers, and the
// document is written back with the indices it came with.
const blockIndex = new WeakMap();

/** One TensorValue's `data` index replaced by its base64 block; an index with no entry (a
 * drawing-only copy sends `tensor_data: []`) is a truncated value: stats only, no numbers. */
function resolveOne(tv, blocks) {
  if (typeof tv.data !== "number") return; // a string already (resolved, or schema 2), or null
  const block = blocks[tv.data];
  if (typeof block === "string") {
    blockIndex.set(tv, tv.data);
    tv.data = block; // the same string for every record sharing the index: no copy
    return;
  }
  tv.data = null;
  tv.truncated = true;
}

/**
 * Resolve every TensorValue's integer `data` in a parsed trace `doc` into its base64 string from
 * `doc.tensor_data`, in place, and return `doc`. TensorValues are found at any depth (graph
 * nodes, saved tensors, edge gradients, event payloads, values, grads, analyses). Schema 2
 * documents (data already strings) are returned untouched; resolving twice changes nothing.
 * `tensor_data` itself stays: its strings are the ones the records now hold, and
 * `tensorDataJson` writes the document back from it.
 */
export function resolveTensorData(doc) {
  if (!doc || typeof doc !== "object" || !indexesTensorData(doc)) return doc;
  const blocks = Array.isArray(doc.tensor_data) ? doc.tensor_data : [];
  const pending = [doc];
  while (pending.length) {
    const item = pending.pop();
    if (Array.isArray(item)) {
      for (const x of item) if (x !== null && typeof x === "object") pending.push(x);
    } else if (isTensorValue(item)) {
      resolveOne(item, blocks);
    } else {
      for (const key in item) {
        const x = item[key];
        if (x !== null && typeof x === "object" && x !== blocks) pending.push(x);
      }
    }
  }
  return doc;
}

/**
 * The JSON text of a trace the viewer holds, as the document it came from: a schema 3 trace
 * writes each base64 block once again (`data` back to its index in `tensor_data`), a schema 2
 * trace is written as it is. `indent` as JSON.stringify's.
 */
export function tensorDataJson(doc, indent) {
  if (!doc || !Array.isArray(doc.tensor_data)) return JSON.stringify(doc, null, indent);
  const blocks = doc.tensor_data;
  const asIndex = function (key, value) {
    if (key !== "data" || typeof value !== "string" || !isTensorValue(this)) return value;
    const index = blockIndex.get(this);
    if (blocks[index] !== value) throw new Error("a tensor's numbers are not the trace's tensor_data block they were read from: the trace was changed after it was loaded");
    return index;
  };
  return JSON.stringify(doc, asIndex, indent);
}
