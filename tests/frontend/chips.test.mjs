import { test } from "node:test";
import assert from "node:assert/strict";
import ELK from "../../frontend/node_modules/elkjs/lib/main.js";
import { layoutGraph } from "../../frontend/js/layout.js";
import { placeChips, compactGradText, leafChipText, pointAlong, BESIDE_GAP } from "../../frontend/js/chips.js";
import { CHIP_HEIGHT } from "../../frontend/js/metrics.js";
import { tinyTrace, goldenTraces } from "./fixtures.mjs";

const elk = new ELK();
const box = (c) => ({ x: c.x - c.width / 2, y: c.y - CHIP_HEIGHT / 2, width: c.width, height: CHIP_HEIGHT });
const overlap = (a, b) => a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;

// The tiny trace and every golden trace, each with its ELK layout: read and laid out once for all
// the tests below (which only read the layouts). Awaited per test; a failure fails those tests.
const laidOut = Promise.all([["tiny", tinyTrace()], ...goldenTraces()].map(async ([name, trace]) => ({ name, trace, layout: await layoutGraph(trace, { elk }) })));
laidOut.catch(() => {}); // reported by the tests that await it

test("chip texts", () => {
  const tv = { shape: [2], dtype: "float32", stats: { numel: 2, norm: 2.5, nan: 0, inf: 0 }, values: [1.5, -2] };
  assert.equal(leafChipText(tv), ".grad [1.50, −2.00]");
  assert.equal(compactGradText(tv), "‖g‖ 2.50");
  assert.equal(compactGradText(null), "None");
});

test("placed chips overlap no node and no other chip", async () => {
  for (const { name, trace, layout } of await laidOut) {
    const spots = placeChips(layout, trace);
    const placed = [...spots.leaf.values(), ...spots.value.values(), ...spots.edge.values()].map(box);
    assert.ok(placed.length > 0, name);
    for (const [i, a] of placed.entries()) {
      for (const n of layout.nodes) assert.ok(!overlap(a, n), `${name}: chip ${i} over node ${n.id}`);
      for (const b of placed.slice(i + 1)) assert.ok(!overlap(a, b), `${name}: chips overlap`);
    }
    // Every edge that carries a gradient gets a chip somewhere.
    const withGrads = layout.edges.filter((e) => trace.graph.edges.find((t) => t.id === e.id.split("~")[0])?.grads?.length);
    assert.equal(withGrads.filter((e) => !spots.edge.has(e.id)).length, 0, name);
  }
});

/** Distance from a point to a polyline. */
function distanceToPath(points, c) {
  let best = Infinity;
  for (let i = 1; i < points.length; i++) {
    const [a, b] = [points[i - 1], points[i]];
    const len2 = (b.x - a.x) ** 2 + (b.y - a.y) ** 2;
    const t = len2 ? Math.max(0, Math.min(1, ((c.x - a.x) * (b.x - a.x) + (c.y - a.y) * (b.y - a.y)) / len2)) : 0;
    best = Math.min(best, Math.hypot(a.x + t * (b.x - a.x) - c.x, a.y + t * (b.y - a.y) - c.y));
  }
  return best;
}

/** Distance from a polyline to a box {x, y, width, height} (0 when the line crosses it). */
function pathToBox(points, b) {
  let best = Infinity;
  for (let f = 0; f <= 1; f += 0.001) {
    const p = pointAlong(points, f);
    const dx = Math.max(b.x - p.x, 0, p.x - (b.x + b.width));
    const dy = Math.max(b.y - p.y, 0, p.y - (b.y + b.height));
    best = Math.min(best, Math.hypot(dx, dy));
  }
  return best;
}

test("every gradient chip sits on its own edge, or right beside its line", async () => {
  for (const { name, trace, layout } of await laidOut) {
    const spots = placeChips(layout, trace);
    for (const e of layout.edges) {
      const spot = spots.edge.get(e.id);
      if (!spot) continue;
      if (spot.beside) assert.ok(pathToBox(e.points, box(spot)) <= BESIDE_GAP + 0.5, `${name}: chip of ${e.id} is not beside its edge`);
      else assert.ok(distanceToPath(e.points, spot) <= 1, `${name}: chip of ${e.id} (${spot.form}) is ${distanceToPath(e.points, spot).toFixed(1)} px off its edge`);
    }
  }
});

test("pointAlong walks a polyline by length", () => {
  const pts = [{ x: 0, y: 0 }, { x: 0, y: 10 }, { x: 30, y: 10 }];
  assert.deepEqual(pointAlong(pts, 0.5), { x: 10, y: 10 });
});

// Px a .grad or value chip may be from its node's box (tests/e2e/test_chip_placement.py holds the
// examples in the browser to the same bound): most sit 6 px away, the farthest measured 14 px.
const NODE_CHIP_REACH = 16;

test("every .grad and value chip sits next to its own node, nearer to it than to any other", async () => {
  const gap = (a, b) => Math.hypot(Math.max(b.x - (a.x + a.width), 0, a.x - (b.x + b.width)), Math.max(b.y - (a.y + a.height), 0, a.y - (b.y + b.height)));
  for (const { name, trace, layout } of await laidOut) {
    const spots = placeChips(layout, trace);
    const nodes = new Map(layout.nodes.map((n) => [n.id, n]));
    const writes = new Set(trace.events.filter((ev) => ev.kind === "grad_write").map((ev) => ev.node));
    for (const id of writes) assert.ok(spots.leaf.has(id), `${name}: no .grad chip for ${id}`);
    for (const [kind, placed] of [["leaf", spots.leaf], ["value", spots.value]]) {
      for (const [id, spot] of placed) {
        const chip = box(spot);
        const own = gap(chip, nodes.get(id));
        assert.ok(own <= NODE_CHIP_REACH, `${name}: ${kind} chip of ${id} is ${own.toFixed(1)} px from its node`);
        const other = layout.nodes.find((m) => m.id !== id && gap(chip, m) < own - 0.5);
        assert.ok(!other, `${name}: ${kind} chip of ${id} is nearer to ${other?.id} than to its own node`);
      }
    }
  }
});

/** The trace with every tensor's numbers times `k` (other chip texts, so other chip widths). */
function scaled(trace, k) {
  const walk = (x) => {
    if (Array.isArray(x)) return x.map(walk);
    if (!x || typeof x !== "object") return x;
    const out = Object.fromEntries(Object.entries(x).map(([key, v]) => [key, walk(v)]));
    if (x.shape && x.stats) {
      if (Array.isArray(x.values)) out.values = x.values.map((v) => (typeof v === "number" ? v * k : v));
      out.stats = { ...x.stats, ...Object.fromEntries(["min", "max", "mean", "norm"].filter((s) => typeof x.stats[s] === "number").map((s) => [s, x.stats[s] * k])) };
    }
    return out;
  };
  return walk(trace);
}

test("a layout drawn again with other numbers gets the spots a fresh placement gives", async () => {
  // placeChips keeps the last spots per layout (a warm renderer draws trace after trace of one
  // model): with the same chip widths they are reused, with others placed again.
  for (const { name, trace, layout } of await laidOut) {
    const first = placeChips(layout, trace);
    assert.equal(placeChips(layout, structuredClone(trace)), first, `${name}: same widths, same spots`);
    for (const k of [1000, -0.001]) {
      const other = scaled(trace, k);
      assert.deepEqual(placeChips(layout, other), placeChips(structuredClone(layout), other), `${name} x${k}`);
    }
    assert.deepEqual(placeChips(layout, trace), first, `${name}: back to the first numbers`);
  }
});
