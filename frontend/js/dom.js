// Tiny DOM helpers: create SVG/HTML elements with attributes. The only DOM-building vocabulary
// the renderer, inspector and panels share.

export const SVG_NS = "http://www.w3.org/2000/svg";

/** An SVG element with attributes; children may be elements or strings. */
export function svgEl(tag, attrs = {}, children = []) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, String(v));
  for (const c of children) el.append(c);
  return el;
}

/** An HTML element with attributes (class, text, on* handlers) and children. */
export function h(tag, attrs = {}, children = []) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") el.textContent = String(v);
    else if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of [].concat(children)) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

/** A promise that resolves in a later task: long work split by it lets the page paint (a status
 * line, a progress count) and answer input in between. */
export const nextTask = () => (globalThis.scheduler?.yield ? globalThis.scheduler.yield() : new Promise((resolve) => setTimeout(resolve, 0)));
