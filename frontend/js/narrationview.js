// The narration region on the page: the story of the current step (narration.js) drawn so that
// its sentence is always whole. When the region cannot hold everything, the lists of numbers
// fold to "[…]" behind a "show the numbers" toggle, then the chain-rule lines fold too; a sentence
// still too long makes the region taller (`fallback: "grow"`, the viewer's side column) or clamps
// it to its caption lines with a "more" toggle (`fallback: "clamp"`, a player's caption under the
// graph). A list of numbers is folded or shown whole, never cut inside.

import { h } from "./dom.js";
import { numberRuns } from "./narration.js";

/** The fold levels, tried in order until the story fits. */
const LEVELS = ["", "is-folded", "is-folded is-brief"];
const ALL = ["is-folded", "is-brief", "is-tall", "is-clamped", "is-open"];

export function createNarrationView(el, { fallback = "grow" } = {}) {
  const text = el.querySelector(".narration-text");
  const detail = el.querySelector(".narration-detail");
  const toggle = h("button", { type: "button", class: "narration-toggle", "aria-expanded": "false", hidden: true, onclick: () => {
    open = !open;
    fit();
  } });
  el.prepend(toggle); // floated at the top right: it stays in view when the region scrolls
  let open = false; // the reader asked for everything: it stays so from step to step
  let hasMore = false;

  const fits = () => el.scrollHeight <= el.clientHeight + 1;
  const runs = (s) => numberRuns(s).map((r) => (r.numbers ? h("span", { class: "gt-nums", "data-fold": "[…]" }, [h("span", { text: r.text })]) : r.text));

  function fit() {
    el.classList.remove(...ALL);
    toggle.hidden = true;
    toggle.setAttribute("aria-expanded", String(open));
    if (fits()) return; // everything fits: no toggle
    toggle.hidden = false;
    if (open) {
      el.classList.add("is-open");
      toggle.textContent = "hide the numbers";
      return;
    }
    toggle.textContent = el.querySelector(".gt-nums") ? "show the numbers" : "more"; // (only the chain-rule lines fold)
    for (const level of LEVELS.slice(1)) {
      el.classList.add(...level.split(" "));
      if (fits()) return;
    }
    if (fallback === "grow") el.classList.add("is-tall");
    else {
      el.classList.add("is-clamped");
      toggle.textContent = "more";
    }
  }

  return {
    /** Show a story ({text, details, tone}); an empty one clears the region. */
    tell(story) {
      text.replaceChildren(...runs(story.text || ""));
      detail.replaceChildren(...(story.details || []).map((d) => h("span", { class: "narration-line" }, runs(d))));
      el.dataset.tone = story.tone || "info";
      hasMore = Boolean(story.text);
      if (hasMore) fit();
    },
    /** Fold again for a new size of the region (a resized window or frame). */
    refit: () => hasMore && fit(),
  };
}
