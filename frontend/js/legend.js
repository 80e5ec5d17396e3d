// The legend (VIEWER.md's three tensor colours, the op kinds, the gradient lines), written once
// for every page that shows a graph: the full viewer puts it under the inspector, the embed and
// the standalone file over the graph. Pages hold an empty <ul class="legend">.

import { h } from "./dom.js";

/** [swatch classes, text, hover title] */
const ENTRIES = [
  ["sw sw-input", "input (no grad)"],
  ["sw sw-param", "parameter (requires grad)"],
  ["sw sw-inter", "op → intermediate"],
  ["sw sw-op", "op, no tensor"],
  ["sw sw-inserted", "inserted by a full backward hook", "BackwardHookFunctionBackward: inserted by register_full_backward_hook to see grad_input/grad_output"],
  ["ln ln-grad", "gradient stored in .grad", "lands in a .grad that survives backward(): a leaf that requires grad, or a tensor with retain_grad()"],
  ["ln ln-grad-dashed", "gradient passing through", "an intermediate without retain_grad: used, then freed"],
  ["ln ln-dashed", "no gradient"],
];

const swatch = (cls) => h("span", { class: cls });

const entry = (cls, text, title) => h("li", { title }, [swatch(cls), text]);

/** Fill every legend list of the page. */
export function drawLegends(root = document) {
  for (const ul of root.querySelectorAll("ul.legend")) {
    const states = h("li", {}, [swatch("sw sw-active"), "running · ", h("span", { class: "tick", text: "✓" }), " done"]);
    ul.replaceChildren(...ENTRIES.map((e) => entry(...e)), states);
  }
}
