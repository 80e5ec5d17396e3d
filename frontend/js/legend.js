// The legend (the tensor colours: input, parameter, intermediate; the op kinds; the gradient lines), written once
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

/**
 * A frame this small (a docs page's or a notebook's player, an embed) folds the legend over the
 * graph into one "Legend" button: the graph keeps the rows the key would take.
 */
export const SMALL_FRAME = "(max-height: 760px), (max-width: 720px)";

/** Fill every legend list of the page; the one over the graph folds away in small frames. */
export function drawLegends(root = document) {
  for (const ul of root.querySelectorAll("ul.legend")) {
    const states = h("li", {}, [swatch("sw sw-active"), "running · ", h("span", { class: "tick", text: "✓" }), " done"]);
    const items = [...ENTRIES.map((e) => entry(...e)), states];
    if (ul.closest(".side-panel") || typeof matchMedia === "undefined") {
      ul.replaceChildren(...items);
      continue;
    }
    const button = h("button", { type: "button", class: "legend-toggle", "aria-expanded": "false", text: "Legend" });
    const fold = (folded) => {
      ul.classList.toggle("is-folded", folded);
      button.setAttribute("aria-expanded", String(!folded));
      button.textContent = folded ? "Legend ▸" : "Legend ▾";
    };
    button.addEventListener("click", () => fold(!ul.classList.contains("is-folded")));
    ul.replaceChildren(h("li", { class: "legend-fold" }, [button]), ...items);
    const small = matchMedia(SMALL_FRAME);
    fold(small.matches);
    small.addEventListener?.("change", (e) => fold(e.matches));
  }
}
