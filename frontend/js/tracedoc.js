// What a trace document must be before the viewer draws it, in one sentence when it is not: JSON,
// a trace rather than a spec, a schema_version this viewer reads, the four arrays it draws from,
// and every node it names present (refs.js). Pure (no DOM): the page and the trace worker
// (traceworker.js, which parses big files off the main thread) both use it.

import { resolveTensorData } from "./tensordata.js";
import { referenceProblem } from "./refs.js";

/** The trace document versions this viewer draws (tensordata.js reads both number layouts). */
export const SCHEMA_VERSIONS = [2, 3];

/** Why a parsed document is not a trace this viewer can draw, or "" when it is one. */
export function checkTrace(doc) {
  if (!doc || typeof doc !== "object" || Array.isArray(doc)) return "it is not a gradtrace trace (the JSON is not an object)";
  if (doc.schema_version === undefined) {
    if (doc.spec_version !== undefined) return "it is a model spec, not a trace: paste it into the editor and press Run";
    return "it is not a gradtrace trace (it has no schema_version)";
  }
  if (!SCHEMA_VERSIONS.includes(doc.schema_version)) {
    const known = SCHEMA_VERSIONS.join(" or ");
    return `it is a trace of schema_version ${JSON.stringify(doc.schema_version)}; this viewer reads ${known} (trace the spec again with this gradtrace)`;
  }
  const missing = [
    ["graph.nodes", Array.isArray(doc.graph?.nodes)],
    ["graph.edges", Array.isArray(doc.graph?.edges)],
    ["events", Array.isArray(doc.events)],
    ["passes", Array.isArray(doc.passes)],
  ].filter(([, ok]) => !ok);
  if (missing.length) return `it is not a complete gradtrace trace (no ${missing.map(([name]) => name).join(", ")})`;
  return referenceProblem(doc);
}

/** The JSON of a file's text; throws an Error saying it is not JSON. */
export function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new Error(`it is not JSON (${err.message})`);
  }
}

/** The run view document's format (runs/view_data.py), this view's version of it. */
const RUN_FAMILY = "gradtrace-run-view/";
export const RUN_FORMAT = `${RUN_FAMILY}1`;

/** A training run's file (the run view's Download: gradtrace.watch's run), the run view's to show
 * (any version of it: the run view names one it does not read). */
export const isRunDoc = (doc) => typeof doc?.format === "string" && doc.format.startsWith(RUN_FAMILY);

/** A parsed document known to be a trace (its tensor numbers still indices); throws an Error
 * whose message says what is wrong. */
export function traceOf(doc) {
  const why = checkTrace(doc);
  if (why) throw new Error(why);
  return doc;
}

/** Parse and check a trace's text (its tensor numbers still indices). */
const parseDoc = (text) => traceOf(parseJson(text));

/** Parse and check a trace's text, its tensor numbers resolved (tensordata.js). */
export const parseTrace = (text) => resolveTensorData(parseDoc(text));
