// SVG/XML as strings: escaping and element helpers. Pure; shared by every exporter.
// Everything user-controlled (labels, titles, module paths) goes through esc(), so a tensor
// named "<script>" stays text and the document stays well-formed XML.

const NEEDS_ESCAPE = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff&<>"]/;

/** Escape text or an attribute value for XML (also drops characters XML 1.0 forbids). */
export function esc(value) {
  const s = String(value ?? "");
  if (!NEEDS_ESCAPE.test(s)) return s; // most labels and numbers: nothing to replace
  return s
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g, "")
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;");
}

/** Round a coordinate so the file stays small and diffs stay stable. */
export function num(x) {
  const r = Math.round(Number(x) * 10) / 10;
  return Object.is(r, -0) ? "0" : String(r);
}

/** ` a="1" b="2"` from an object; null/undefined/false values are left out. */
export function attrs(obj) {
  let out = "";
  for (const k in obj) {
    const v = obj[k];
    if (v === null || v === undefined || v === false) continue;
    out += ` ${k}="${esc(typeof v === "number" ? num(v) : v)}"`;
  }
  return out;
}

/** One element: tag(name, {attrs}, children...) with children already serialised. */
export function tag(name, attributes = {}, ...children) {
  let body = "";
  for (const c of children.flat()) if (c !== null && c !== undefined) body += c;
  return element(name, attributes, body);
}

function element(name, attributes, body) {
  return body ? `<${name}${attrs(attributes)}>${body}</${name}>` : `<${name}${attrs(attributes)}/>`;
}

/** Text content element (escaped). */
export function text(attributes, content) {
  return `<text${attrs(attributes)}>${esc(content)}</text>`;
}

/** An element description (scene.js: {t, a, c}) as SVG text. */
export function toXml(node) {
  if (typeof node === "string") return esc(node);
  let body = "";
  for (const child of node.c) body += toXml(child);
  return element(node.t, node.a, body);
}
