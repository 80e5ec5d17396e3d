// Following the engine: which node the inspector shows while a trace plays. From the first Play
// until Esc it follows the node the engine runs; a click pins one instead (the store's `node`,
// which wins). Fast playback repaints what follows at most every `delayMs`, with the latest step
// (nobody reads it at 60 events/s, and relaying out the side column on every frame would take
// the frames the graph needs). No DOM; the timer is injectable so Node tests drive it by hand.

/** The node of the latest event at or before `step` that has one (fast playback skips steps). */
export function lastNodeAt(timeline, step) {
  for (let i = step; i >= 0; i--) if (timeline.eventAbout[i]) return timeline.eventAbout[i];
  return "";
}

export function createFollow({ delayMs = 150, setTimer = setTimeout, clearTimer = clearTimeout } = {}) {
  let following = false;
  let running = ""; // the node the engine ran last, on screen
  let timer = null;

  const cancel = () => {
    if (timer !== null) clearTimer(timer);
    timer = null;
  };
  return {
    get following() {
      return following;
    },
    /** Follow the engine (Play, "Follow the engine"), or stop (Esc with nothing pinned). */
    setFollowing(on) {
      following = Boolean(on);
    },
    /** Another trace: not following, no node yet, nothing due. */
    reset() {
      following = false;
      running = "";
      cancel();
    },
    /** Step `step` of `timeline` is on screen. */
    at(timeline, step) {
      running = lastNodeAt(timeline, step) || running;
    },
    /** The node the inspector shows: the pinned one, else the running one while following. */
    shown(pinned) {
      return pinned || (following ? running : "");
    },
    /** Call `fn` in `delayMs`, unless a call is already due (it will see the latest step). */
    later(fn) {
      timer ??= setTimer(() => {
        timer = null;
        fn();
      }, delayMs);
    },
    /** Nothing due: the caller repaints now. */
    cancel,
  };
}
