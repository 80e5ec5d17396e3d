// Transport and tool icons as inline SVG: font glyphs like ⏸ are missing (tofu) in common
// system fonts, an SVG path draws the same everywhere. Buttons keep their aria-label / title.

import { svgEl } from "./dom.js";

const PATHS = {
  play: "M5 3.5v13l11-6.5z",
  pause: "M5 3.5h3.5v13H5zM11.5 3.5H15v13h-3.5z",
  restart: "M4 3.5h2.5v13H4zM16 3.5v13L7.5 10z",
  back: "M15 3.5v13L5 10z",
  forward: "M5 3.5v13L15 10z",
  stepForward: "M4 3.5v13L12.5 10zM13.5 3.5H16v13h-2.5z",
  zoomIn: "M9 4h2v5h5v2h-5v5H9v-5H4V9h5z",
  zoomOut: "M4 9h12v2H4z",
  fit: "M3 3h5v2H5v3H3zM12 3h5v5h-2V5h-3zM3 12h2v3h3v2H3zM15 12h2v5h-5v-2h3z",
};

/** An icon as an <svg> element (20×20 box, currentColor). */
export function icon(name) {
  return svgEl("svg", { class: "gt-icon", viewBox: "0 0 20 20", width: 16, height: 16, "aria-hidden": "true", focusable: "false" }, [svgEl("path", { d: PATHS[name], fill: "currentColor" })]);
}

/** Put its icon into every element with data-icon="name" (its text is only a fallback). */
export function drawIcons(root = document) {
  for (const el of root.querySelectorAll("[data-icon]")) if (PATHS[el.dataset.icon]) el.replaceChildren(icon(el.dataset.icon));
}
