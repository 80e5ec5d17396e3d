// Binds the transport (buttons, slider, speed, keys) to the player and store; draws nothing.
// Keys: space play/pause, ← → step, Home restart, End, Escape (onEscape: clear the selection).

import { icon } from "./icons.js";

export function bindControls({ el, player, store, getCount, onEscape = () => {} }) {
  const playBtn = el.play;
  const setPlayLabel = (playing) => {
    // The accessible name is the action the button performs now: "Play" or "Pause".
    playBtn.replaceChildren(icon(playing ? "pause" : "play"));
    playBtn.setAttribute("aria-label", playing ? "Pause" : "Play");
    playBtn.title = playing ? "Pause (space)" : "Play (space)";
    document.body.classList.toggle("is-playing", playing);
  };
  setPlayLabel(false);
  playBtn.addEventListener("click", () => player.toggle());
  el.back.addEventListener("click", () => player.step(-1));
  el.forward.addEventListener("click", () => player.step(1));
  el.restart.addEventListener("click", () => player.restart());
  el.slider.addEventListener("input", () => {
    player.pause();
    player.seek(Number(el.slider.value));
  });
  el.speed.addEventListener("change", () => store.set({ speed: Number(el.speed.value) }));

  document.addEventListener("keydown", (e) => {
    const t = e.target;
    if (t && (t.tagName === "TEXTAREA" || t.tagName === "INPUT" || t.tagName === "SELECT" || t.isContentEditable)) return;
    if (e.key === "Escape" && !document.querySelector("dialog[open]")) {
      onEscape(); // clears the selection (an open dialog takes Escape for itself)
      return;
    }
    if (e.ctrlKey || e.metaKey || e.altKey || !getCount()) return;
    if (e.key === " ") {
      if (t && t.tagName === "BUTTON") return; // space on a focused button clicks it already
      e.preventDefault();
      player.toggle();
    } else if (e.key === "ArrowRight") {
      e.preventDefault();
      player.step(1);
    } else if (e.key === "ArrowLeft") {
      e.preventDefault();
      player.step(-1);
    } else if (e.key === "Home") {
      e.preventDefault();
      player.restart();
    } else if (e.key === "End") {
      e.preventDefault();
      player.pause();
      player.seek(getCount() - 1);
    }
  });

  return {
    setPlayLabel,
    /** Reflect the step in the slider and the counter. */
    showStep(i, count, label) {
      el.slider.max = String(Math.max(0, count - 1));
      el.slider.value = String(i);
      el.slider.setAttribute("aria-valuetext", `step ${i} of ${count - 1}: ${label}`);
      el.counter.textContent = `${i} / ${Math.max(0, count - 1)}`;
    },
    setSpeed(s) {
      // A link's speed the list does not offer (one typed into the hash) is offered in its place,
      // not shown as an empty select while the player plays at it.
      const options = [...el.speed.options];
      if (!options.some((o) => o.value === String(s))) {
        const option = Object.assign(document.createElement("option"), { value: String(s), textContent: options.at(-1).textContent.replace(/^\d+/, String(s)) }); // (worded as the list words one)
        el.speed.insertBefore(option, options.find((o) => Number(o.value) > s) || null);
      }
      el.speed.value = String(s);
    },
  };
}
