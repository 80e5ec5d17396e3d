// One page of the viewer handing a document to another in the same tab: the run view's "Open in
// the player" (a full trace the watch saved) and the player's Open given a run's file (to the run
// view). The text waits in sessionStorage under one key; the page it goes to reads it, and reads
// it again on a reload, until another hand-off replaces it.

import { formatBytes } from "./format.js";

const KEY = "gradtrace:handoff";

/** Keep `text` (a document of `kind`, named `name`) for the page at `url`, then go there. */
export function handOff(kind, name, text, url) {
  try {
    sessionStorage.setItem(KEY, JSON.stringify({ kind, name, text }));
  } catch (err) {
    throw new Error(`${name} (${formatBytes(text.length)}) is more than this browser lets one page hand to another (${err.name}): download it and open the file there`);
  }
  location.assign(url);
}

/** The document of `kind` handed to this page ({name, text}), or null. */
export function takeHandoff(kind) {
  let doc = null;
  try {
    doc = JSON.parse(sessionStorage.getItem(KEY) || "null");
  } catch {
    return null;
  }
  return doc && doc.kind === kind && typeof doc.text === "string" ? { name: String(doc.name || kind), text: doc.text } : null;
}
