// Where things sit in the spec's JSON text, for the editor's errors — read from momoa's syntax
// tree (a maintained JSON parser with source locations; vendor.js loads it, callers pass it in):
// the node a JSON Pointer ("/modules/f0") names, and the place of a syntax error. Pure.

const unescapePointer = (seg) => seg.replace(/~1/g, "/").replace(/~0/g, "~");

/** A location record: 1-based line and column, offsets of the node's text. */
const at = (node) => ({ line: node.loc.start.line, column: node.loc.start.column, start: node.loc.start.offset, end: node.loc.end.offset });

/**
 * The place of each of `queries` ({pointer, message?}) in `text`, parsing it once: an array of
 * {pointer, line, column, start, end}, all null if `text` is not JSON. A JSON Pointer running
 * past the document is placed at its nearest existing parent. A member is placed at its key
 * (`"f0": {` rather than the `{`). When `message` quotes one of the object's own keys (the API's
 * "unknown 'type' 'Lineaar'" about /modules/f0), that member is it.
 */
export function locatePointers(momoa, text, queries) {
  let doc;
  try {
    doc = momoa.parse(text);
  } catch {
    return queries.map(() => null);
  }
  return queries.map(({ pointer, message = "" }) => placeIn(doc, pointer, message));
}

/** The place of `pointer` in momoa document `doc` (see locatePointers). */
function placeIn(doc, pointer, message) {
  let node = doc.body;
  let place = node;
  let found = "";
  for (const seg of String(pointer || "").split("/").slice(1).map(unescapePointer)) {
    let next = null;
    if (node.type === "Object") {
      const member = node.members.find((m) => m.name.value === seg);
      if (member) next = { place: member, node: member.value };
    } else if (node.type === "Array" && /^\d+$/.test(seg)) {
      const el = node.elements[Number(seg)];
      if (el) next = { place: el, node: el.value };
    }
    if (!next) break;
    ({ node, place } = next);
    found += `/${seg.replace(/~/g, "~0").replace(/\//g, "~1")}`;
  }
  if (node.type === "Object" && message) {
    const quoted = [...String(message).matchAll(/'([^']+)'/g)].map((m) => m[1]);
    const member = node.members.find((m) => quoted.includes(m.name.value));
    if (member) return { pointer: `${found}/${member.name.value}`, ...at(member) };
  }
  return { pointer: found, ...at(place) };
}

/**
 * Where `text` stops being JSON: {line, column, offset, trailingComma}, or null if it parses.
 * A trailing comma is placed at the comma itself, not at the bracket after it.
 */
export function syntaxErrorAt(momoa, text) {
  try {
    momoa.parse(text);
    return null;
  } catch (err) {
    if (typeof err.line !== "number") throw err;
    let tokens = [];
    try {
      tokens = momoa.tokenize(text);
    } catch {
      // an invalid character: the parser's own position stands
    }
    const k = tokens.findIndex((t) => t.loc.start.offset === err.offset);
    const prev = k > 0 ? tokens[k - 1] : null;
    if (prev && prev.type === "Comma" && (tokens[k].type === "RBrace" || tokens[k].type === "RBracket")) {
      return { line: prev.loc.start.line, column: prev.loc.start.column, offset: prev.loc.start.offset, trailingComma: true };
    }
    return { line: err.line, column: err.column, offset: err.offset, trailingComma: false };
  }
}
