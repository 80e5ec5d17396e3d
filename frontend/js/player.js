// The clock, and only the clock: advances a step index at a speed (events per second) and calls
// onStep(i). Step i stays on screen dwell(i) / speed seconds: dwell(i) is 1 for every step
// unless the caller weighs them (a long sentence to read waits longer). No DOM; `now` and
// `requestFrame` are injectable so Node tests drive it by hand.

/** The shortest dwell a step gets, in steps (a weight of 0 would never let the clock move on). */
const MIN_DWELL = 0.05;

export function createPlayer({ count, onStep, onPlayingChange = () => {}, dwell = () => 1, now = () => performance.now(), requestFrame = (f) => requestAnimationFrame(f), cancelFrame = (h) => cancelAnimationFrame(h) }) {
  let index = 0;
  let total = count;
  let speed = 2; // events per second
  let playing = false;
  let due = 0; // when the step on screen gives way to the next one
  let handle = null;
  let generation = 0; // stale-frame guard: a frame from before pause/seek does nothing

  const emit = () => onStep(index);
  const setPlaying = (p) => {
    if (playing === p) return;
    playing = p;
    onPlayingChange(p);
  };

  /** Milliseconds step i stays on screen at the current speed. */
  const stay = (i) => (1000 * Math.max(MIN_DWELL, Number(dwell(i)) || 1)) / speed;

  function tick(gen) {
    if (gen !== generation || !playing) return;
    const t = now();
    let moved = false;
    while (t >= due && index < total - 1) {
      index++;
      due += stay(index);
      moved = true;
    }
    if (moved) {
      emit();
      if (index >= total - 1) {
        pause();
        return;
      }
    }
    handle = requestFrame(() => tick(gen));
  }

  function play() {
    if (playing || total === 0) return;
    if (index >= total - 1) {
      index = 0; // playing from the end restarts
      emit();
    }
    generation++;
    setPlaying(true);
    due = now() + stay(index);
    const gen = generation;
    handle = requestFrame(() => tick(gen));
  }

  function pause() {
    generation++;
    if (handle !== null) cancelFrame(handle);
    handle = null;
    setPlaying(false);
  }

  function seek(i) {
    index = Math.max(0, Math.min(total - 1, Math.floor(i)));
    due = now() + stay(index);
    emit();
  }

  return {
    play,
    pause,
    toggle: () => (playing ? pause() : play()),
    seek,
    step: (delta) => {
      pause();
      seek(index + delta);
    },
    restart: () => {
      pause();
      seek(0);
    },
    setSpeed: (s) => {
      const before = speed;
      speed = Math.max(0.1, Number(s) || 1);
      if (playing) due = now() + ((due - now()) * before) / speed; // what is left of this step, at the new speed
    },
    setCount: (n) => {
      total = n;
      index = Math.min(index, Math.max(0, n - 1));
    },
    get index() {
      return index;
    },
    get playing() {
      return playing;
    },
    get speed() {
      return speed;
    },
  };
}
