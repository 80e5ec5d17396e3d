// The clock, and only the clock: advances a step index at a speed (events per second) and calls
// onStep(i). No DOM; `now` and `requestFrame` are injectable so Node tests drive it by hand.

export function createPlayer({ count, onStep, onPlayingChange = () => {}, now = () => performance.now(), requestFrame = (f) => requestAnimationFrame(f), cancelFrame = (h) => cancelAnimationFrame(h) }) {
  let index = 0;
  let total = count;
  let speed = 2; // events per second
  let playing = false;
  let lastTime = 0;
  let carry = 0;
  let handle = null;
  let generation = 0; // stale-frame guard: a frame from before pause/seek does nothing

  const emit = () => onStep(index);
  const setPlaying = (p) => {
    if (playing === p) return;
    playing = p;
    onPlayingChange(p);
  };

  function tick(gen) {
    if (gen !== generation || !playing) return;
    const t = now();
    carry += ((t - lastTime) / 1000) * speed;
    lastTime = t;
    const advance = Math.floor(carry);
    if (advance > 0) {
      carry -= advance;
      index = Math.min(total - 1, index + advance);
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
    lastTime = now();
    carry = 0;
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
    carry = 0;
    lastTime = now();
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
      speed = Math.max(0.1, Number(s) || 1);
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
