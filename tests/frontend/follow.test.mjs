import { test } from "node:test";
import assert from "node:assert/strict";
import { createFollow, lastNodeAt } from "../../frontend/js/follow.js";

const timeline = { eventAbout: ["n1", "", "n2", "", ""] };

test("the inspector follows the running node from Play until stopped; a pinned node wins", () => {
  const follow = createFollow();
  follow.at(timeline, 3);
  assert.equal(follow.shown(""), ""); // not following before the first Play
  follow.setFollowing(true);
  assert.equal(follow.shown(""), "n2"); // step 3 has no node: the latest before it
  assert.equal(follow.shown("n9"), "n9");
  follow.at(timeline, 0);
  assert.equal(follow.shown(""), "n1");
  follow.setFollowing(false);
  assert.equal(follow.shown(""), "");
  follow.setFollowing(true);
  follow.reset(); // another trace
  assert.equal(follow.following, false);
  follow.setFollowing(true);
  assert.equal(follow.shown(""), "");
});

test("lastNodeAt looks back to the latest event with a node", () => {
  assert.equal(lastNodeAt(timeline, 4), "n2");
  assert.equal(lastNodeAt(timeline, 1), "n1");
  assert.equal(lastNodeAt({ eventAbout: ["", ""] }, 1), "");
});

test("fast playback catches up once per delay, and a cancel drops what was due", () => {
  const due = [];
  const follow = createFollow({ delayMs: 150, setTimer: (fn, ms) => due.push({ fn, ms }) && due.length, clearTimer: (h) => (due[h - 1].fn = null) });
  let calls = 0;
  follow.later(() => calls++);
  follow.later(() => calls++); // already due: not a second call
  assert.equal(due.length, 1);
  assert.equal(due[0].ms, 150);
  due[0].fn();
  assert.equal(calls, 1);
  follow.later(() => calls++);
  follow.cancel();
  assert.equal(due[1].fn, null);
  follow.later(() => calls++); // nothing due after the cancel: a new timer
  assert.equal(due.length, 3);
});
