import { test } from "node:test";
import assert from "node:assert/strict";
import { createPlayer } from "../../frontend/js/player.js";

/** A hand-driven clock: frames run only when the test calls tick(ms). */
function fakeClock() {
  let t = 0;
  let queue = [];
  return {
    now: () => t,
    requestFrame: (f) => (queue.push(f), queue.length),
    cancelFrame: () => (queue = []),
    tick(ms) {
      t += ms;
      const q = queue;
      queue = [];
      q.forEach((f) => f());
    },
  };
}

test("plays at the set speed and stops at the end", () => {
  const c = fakeClock();
  const seen = [];
  const playing = [];
  const p = createPlayer({ count: 5, onStep: (i) => seen.push(i), onPlayingChange: (x) => playing.push(x), ...c });
  p.setSpeed(2); // 2 events per second
  p.play();
  c.tick(499);
  assert.deepEqual(seen, []);
  c.tick(2);
  assert.deepEqual(seen, [1]);
  c.tick(1000);
  assert.deepEqual(seen, [1, 3]);
  c.tick(5000);
  assert.equal(p.index, 4);
  assert.equal(p.playing, false);
  assert.deepEqual(playing, [true, false]);
});

test("pause, step, seek and restart; a stale frame after pause does nothing", () => {
  const c = fakeClock();
  const seen = [];
  const p = createPlayer({ count: 10, onStep: (i) => seen.push(i), ...c });
  p.setSpeed(10);
  p.play();
  p.pause();
  c.tick(1000);
  assert.deepEqual(seen, []);
  p.step(1);
  p.step(1);
  p.step(-1);
  assert.deepEqual(seen, [1, 2, 1]);
  p.seek(99);
  assert.equal(p.index, 9);
  p.restart();
  assert.equal(p.index, 0);
});

test("play at the end starts over", () => {
  const c = fakeClock();
  const p = createPlayer({ count: 3, onStep: () => {}, ...c });
  p.seek(2);
  p.play();
  assert.equal(p.index, 0);
  assert.equal(p.playing, true);
});

test("each step dwells in proportion to its weight, and the speed scales it", () => {
  const c = fakeClock();
  const seen = [];
  const weights = [1, 0.5, 4, 1, 1];
  const p = createPlayer({ count: 5, onStep: (i) => seen.push(i), dwell: (i) => weights[i], ...c });
  p.setSpeed(2); // one weight unit: 500 ms
  p.play();
  c.tick(501); // step 0 (weight 1) gave way after 500 ms
  assert.deepEqual(seen, [1]);
  c.tick(250); // step 1 (weight 0.5): 250 ms
  assert.deepEqual(seen, [1, 2]);
  c.tick(1900); // step 2 (weight 4) waits 2 s
  assert.deepEqual(seen, [1, 2]);
  p.setSpeed(4); // twice as fast: what was left of step 2 (100 ms) halves
  c.tick(51);
  assert.deepEqual(seen, [1, 2, 3]);
  c.tick(250); // step 3 at weight 1 and 4 events/s
  assert.deepEqual(seen, [1, 2, 3, 4]);
  assert.equal(p.playing, false);
});
