// Chips: the texts they show (forward values, gradients, .grad, hook actions) and where they
// sit. A chip goes to the first candidate spot that overlaps no node, no module title, no hook
// badge and no chip placed before it, so numbers never print across a neighbour's label; each
// is placed at its widest text over the whole trace, so a later, longer number never grows into
// a neighbour. Pure: positions and texts only; scene.js draws them.

import { CHIP_HEIGHT, chipWidth, textWidth } from "./metrics.js";
import { formatChipNumbers, formatNumber, formatTensorChip, hasNonFinite, smallTensorNumbers } from "./format.js";

const H = CHIP_HEIGHT;
const MARGIN = 3;
/** The smallest gradient chip: "a gradient passed here", its value on hover and in the inspector. */
const GRAD_MARK = "∇";
/** Px between an edge's line and the side of a chip placed beside it. */
export const BESIDE_GAP = 3;

/** Chip text for a gradient: the numbers when there are ≤3, else its norm (the shape is on the node). */
export function gradChipText(tv) {
  if (!tv) return null;
  const flag = hasNonFinite(tv) ? " ⚠" : "";
  const nums = smallTensorNumbers(tv, 3);
  if (nums) return formatChipNumbers(nums, tv.shape, tv.dtype) + flag;
  const norm = tv.stats && tv.stats.norm;
  return (norm === null || norm === undefined ? formatTensorChip(tv) : `‖g‖ ${formatNumber(norm)}`) + flag;
}

/** The short form of a gradient chip, for tight spots: its norm (the full value is on hover). */
export function compactGradText(tv) {
  if (!tv) return "None";
  const norm = tv.stats?.norm;
  return (norm === null || norm === undefined ? "‖g‖ ?" : `‖g‖ ${formatNumber(norm, 3)}`) + (hasNonFinite(tv) ? " ⚠" : "");
}

/** Chip text for a forward value: only small tensors (the shape is already the node's sublabel). */
export function valueChipText(tv) {
  const nums = smallTensorNumbers(tv, 3);
  return nums ? formatChipNumbers(nums, tv.shape, tv.dtype) : null;
}

/** The text a .grad chip shows (a leaf's, or a retained intermediate's). */
export function leafChipText(tv) {
  return `.grad ${formatTensorChip(tv)}`;
}

export function tensorTitle(tv) {
  if (!tv) return "no gradient (None)";
  const nums = smallTensorNumbers(tv, 8);
  const flag = hasNonFinite(tv) ? " ⚠ contains NaN/inf" : "";
  if (nums) return `[${nums.join(", ")}]${flag}`;
  return `shape (${tv.shape.join(", ")}) norm ${formatNumber(tv.stats?.norm)}${flag}`;
}

/** "grad_input ×2: −0.4080 → −0.8159": what a user hook's action changed. */
export function hookActionText(ev) {
  const p = ev.payload || {};
  const a = p.action || {};
  const how = { scale: `×${a.by}`, add: `+${a.by ?? a.value}`, zero: "→ 0", clamp: `clamp(${a.min ?? ""}, ${a.max ?? ""})` }[a.op] || a.op || "hook";
  const first = (v) => (Array.isArray(v) ? v[0] : v);
  return `${a.target ? a.target + " " : ""}${how}: ${formatTensorChip(first(p.before))} → ${formatTensorChip(first(p.after))}`;
}

/** The point a fraction `f` of the way along a polyline, by length. */
export function pointAlong(points, f) {
  return walkAlong(points)(f);
}

/** pointAlong on one polyline, its segments measured once (onEdge asks for hundreds of points). */
function walkAlong(points) {
  if (!points || points.length === 0) return () => ({ x: 0, y: 0 });
  const seg = [];
  let total = 0;
  for (let i = 1; i < points.length; i++) {
    const d = Math.hypot(points[i].x - points[i - 1].x, points[i].y - points[i - 1].y);
    seg.push(d);
    total += d;
  }
  return (f) => {
    let left = total * f;
    for (let i = 1; i < points.length; i++) {
      if (left <= seg[i - 1] && seg[i - 1] > 0) {
        const t = left / seg[i - 1];
        return { x: points[i - 1].x + t * (points[i].x - points[i - 1].x), y: points[i - 1].y + t * (points[i].y - points[i - 1].y) };
      }
      left -= seg[i - 1];
    }
    return points[points.length - 1];
  };
}

function overlaps(a, b) {
  return a.x < b.x + b.width + MARGIN && b.x < a.x + a.width + MARGIN && a.y < b.y + b.height + MARGIN && b.y < a.y + a.height + MARGIN;
}

/** What chips must keep clear of: nodes, module titles and hook badges (`hooked`: the paths of
 * modules with hooks); and, where they can, lines: edge segments and module boxes' top borders. */
function obstacles(layout, hooked) {
  const taken = layout.nodes.map((n) => ({ x: n.x, y: n.y, width: n.width, height: n.height }));
  const lines = [];
  for (const g of layout.groups) {
    if (g.collapsed) continue;
    taken.push({ x: g.x, y: g.y, width: Math.min(g.width, 16 + textWidth(g.title || g.label, "groupTitle")), height: 28 });
    const border = { x: g.x, y: g.y - 10, width: g.width, height: 20 }; // where hook badges sit
    (hooked.has(g.path) ? taken : lines).push(border);
  }
  for (const e of layout.edges) {
    const p = e.points || [];
    for (let i = 1; i < p.length; i++) {
      const x = Math.min(p[i - 1].x, p[i].x);
      const y = Math.min(p[i - 1].y, p[i].y);
      lines.push({ x: x - 1, y: y - 1, width: Math.abs(p[i].x - p[i - 1].x) + 2, height: Math.abs(p[i].y - p[i - 1].y) + 2 });
    }
  }
  return { taken, lines };
}

const CELL = 64;
/** A grid cell's key: a number (string keys cost an allocation per look-up; rows up to 2^20). */
const cellKey = (i, j) => i * 1048576 + j;

/** Boxes bucketed on a grid: "does this box overlap any?" looks only at nearby ones. */
function createGrid() {
  const cells = new Map();
  const span = (a, len) => [Math.floor((a - MARGIN) / CELL), Math.floor((a + len + MARGIN) / CELL)];
  function add(box) {
    const [x0, x1] = span(box.x, box.width);
    const [y0, y1] = span(box.y, box.height);
    for (let i = x0; i <= x1; i++)
      for (let j = y0; j <= y1; j++) {
        const key = cellKey(i, j);
        if (!cells.has(key)) cells.set(key, []);
        cells.get(key).push(box);
      }
  }
  function remove(box) {
    const [x0, x1] = span(box.x, box.width);
    const [y0, y1] = span(box.y, box.height);
    for (let i = x0; i <= x1; i++)
      for (let j = y0; j <= y1; j++) {
        const list = cells.get(cellKey(i, j));
        const k = list ? list.findIndex((t) => t.x === box.x && t.y === box.y && t.width === box.width && t.height === box.height) : -1;
        if (k >= 0) list.splice(k, 1);
      }
  }
  function hits(box) {
    const [x0, x1] = span(box.x, box.width);
    const [y0, y1] = span(box.y, box.height);
    for (let i = x0; i <= x1; i++) for (let j = y0; j <= y1; j++) for (const t of cells.get(cellKey(i, j)) || []) if (overlaps(box, t)) return true;
    return false;
  }
  /** Whether `test` holds for a box within `pad` px of `box` (some further ones are tested too). */
  function someNear(box, pad, test) {
    const [x0, x1] = span(box.x - pad, box.width + 2 * pad);
    const [y0, y1] = span(box.y - pad, box.height + 2 * pad);
    for (let i = x0; i <= x1; i++) for (let j = y0; j <= y1; j++) for (const t of cells.get(cellKey(i, j)) || []) if (test(t)) return true;
    return false;
  }
  /** Every box in the cells under `region` (each once): all that can overlap a box inside it. */
  function around(region) {
    const [x0, x1] = span(region.x, region.width);
    const [y0, y1] = span(region.y, region.height);
    const found = new Set();
    for (let i = x0; i <= x1; i++) for (let j = y0; j <= y1; j++) for (const t of cells.get(cellKey(i, j)) || []) found.add(t);
    return [...found];
  }
  return { add, remove, hits, someNear, around };
}

/** The gap between two boxes {x, y, width, height}: 0 when they touch or overlap. */
function boxGap(a, b) {
  return gapTo(a.x, a.y, a.width, a.height, b);
}

/** boxGap of the box at `x`, `y`, `width` × `height` and box `b`, without making the box. */
function gapTo(x, y, width, height, b) {
  const dx = Math.max(b.x - (x + width), 0, x - (b.x + b.width));
  const dy = Math.max(b.y - (y + height), 0, y - (b.y + b.height));
  // (side by side, one of them is 0: Math.hypot would give the other, only slower)
  return dy === 0 ? dx : dx === 0 ? dy : Math.hypot(dx, dy);
}

/** Whether box `inner` lies wholly inside box `outer`. */
function contains(outer, inner) {
  return inner.x >= outer.x && inner.y >= outer.y && inner.x + inner.width <= outer.x + outer.width && inner.y + inner.height <= outer.y + outer.height;
}

/** The innermost open module box around a node, if any. */
function moduleBoxOf(layout, n) {
  let best = null;
  for (const g of layout.groups) if (!g.collapsed && contains(g, n) && (!best || g.width * g.height < best.width * best.height)) best = g;
  return best;
}

/** Px between a node and the chips beside it, where there is room. */
const NODE_GAP = 6;
/** The nearest a chip may come to its node (it keeps MARGIN from every box): where two ranks
 * are only a chip and two margins apart, this is the one gap at which it fits between them. */
const NODE_GAP_MIN = MARGIN;
/** How much further a chip beside a node may go to keep clear of edge lines: beyond that, a
 * chip across a line right by its node reads better than one far away (whose is it?). */
const LINE_COST = 12;
/** How much further a chip may go to stay inside its node's module box. */
const OUTSIDE_MODULE_COST = 8;
/** How much further a chip may go not to sit nearer another node than its own (whose is it?),
 * and not to take the spot that other node's chips need. */
const NEIGHBOUR_COST = 24;

/** Gaps from a node to try, nearest first: the usual gap, the tightest one, then outwards in
 * steps that widen with the distance (far spots are a last resort; the search stays cheap). */
function* ringGaps(limit) {
  yield NODE_GAP;
  yield NODE_GAP_MIN;
  for (let d = NODE_GAP + 2; d <= limit; d += d < 40 ? 2 : d < 120 ? 4 : 12) yield d;
}

/**
 * The ring of chip spots {x: left edge, y: vertical centre} whose box is `d` px from the node's
 * box on the nearest axis. `visit(x, y, side)` sees them in order until it returns true: first
 * the middles of the node's sides (right, left, below, above), then outwards from them on each
 * side in both directions — stacked beside another chip of the same node, then the corners.
 * The spots on one side share their box's x (right, left) or y (below, above), and every box of
 * a side lies in its `region` (`sides[side]`).
 */
function ringAround(n, width, d) {
  const right = n.x + n.width + d;
  const left = n.x - d - width;
  const above = n.y - d - H / 2;
  const below = n.y + n.height + d + H / 2;
  const cy = n.y + n.height / 2;
  const cx = n.x + n.width / 2 - width / 2;
  const vertical = (below - above) / 2;
  const horizontal = (right - left) / 2;
  // (1 px wider than the spots reach: a region holds their boxes whatever the rounding)
  // `from`..`to`: where the boxes' other axis (top or left edge) goes along the side.
  const column = (x) => ({ axis: "x", at: x, from: cy - vertical - H / 2, to: cy + vertical - H / 2, region: { x: x - 1, y: cy - vertical - H / 2 - 1, width: width + 2, height: 2 * vertical + H + 2 } });
  const row = (y) => ({ axis: "y", at: y - H / 2, from: cx - horizontal, to: cx + horizontal, region: { x: cx - horizontal - 1, y: y - H / 2 - 1, width: 2 * horizontal + width + 2, height: H + 2 } });
  function each(visit) {
    if (visit(right, cy, 0) || visit(left, cy, 1) || visit(cx, below, 2) || visit(cx, above, 3)) return;
    for (let k = 2; k <= Math.max(vertical, horizontal); k += 2) {
      if (k <= vertical && (visit(right, cy + k, 0) || visit(left, cy + k, 1) || visit(right, cy - k, 0) || visit(left, cy - k, 1))) return;
      if (k <= horizontal && (visit(cx + k, below, 2) || visit(cx + k, above, 3) || visit(cx - k, below, 2) || visit(cx - k, above, 3))) return;
    }
  }
  return { sides: [column(right), column(left), row(below), row(above)], each };
}

/**
 * What a side's chip boxes may overlap, for overlap tests along the side alone: the boxes of
 * `grid` near its region that overlap a chip box `width` wide on the side's fixed axis (as
 * `overlaps` tests that axis: the other one is all that is left to test per spot).
 */
function sideObstacles(grid, side, width) {
  const a = side.at;
  return side.axis === "x"
    ? grid.around(side.region).filter((t) => a < t.x + t.width + MARGIN && t.x < a + width + MARGIN)
    : grid.around(side.region).filter((t) => a < t.y + t.height + MARGIN && t.y < a + H + MARGIN);
}

/** Whether the chip box at left `x`, top `y`, `width` wide overlaps one of a side's obstacles
 * (sideObstacles: the side's fixed axis is tested already). */
function hitsAlong(obstacles, axis, x, y, width) {
  if (axis === "x") {
    for (const t of obstacles) if (y < t.y + t.height + MARGIN && t.y < y + H + MARGIN) return true;
  } else {
    for (const t of obstacles) if (x < t.x + t.width + MARGIN && t.x < x + width + MARGIN) return true;
  }
  return false;
}

/** Far inside the rounding of a coordinate (a few thousand px: about 1e-12 px). */
const SURELY = 1e-6;

/**
 * Whether every spot of a side is surely over one of `obstacles` (sideObstacles of it) or
 * off the picture (left or above 0): each obstacle rules out an open interval of the side's
 * other axis, and those intervals, each SURELY narrower, cover all of `from`..`to`.
 */
function sideCovered(obstacles, side, width) {
  if (side.at < 0) return true;
  const length = side.axis === "x" ? H : width;
  const start = (t) => (side.axis === "x" ? t.y : t.x);
  const size = (t) => (side.axis === "x" ? t.height : t.width);
  const spans = obstacles.map((t) => [start(t) - length - MARGIN + SURELY, start(t) + size(t) + MARGIN - SURELY]);
  spans.push([-Infinity, -SURELY]);
  spans.sort((a, b) => a[0] - b[0]);
  let reach = side.from - SURELY;
  for (const [lo, hi] of spans) {
    if (reach > side.to + SURELY) break;
    if (lo >= reach) return false;
    reach = Math.max(reach, hi);
  }
  return reach > side.to + SURELY;
}

/** A placer over the layout (`hooked`: the paths of modules with hook badges). Candidates are
 * {x: left edge, y: vertical centre}, best first. */
export function createPlacer(layout, hooked = new Set()) {
  const { taken: obstacleBoxes, lines: lineBoxes } = obstacles(layout, hooked);
  const taken = createGrid();
  const lines = createGrid();
  const nodes = createGrid();
  obstacleBoxes.forEach(taken.add);
  lineBoxes.forEach(lines.add);
  layout.nodes.forEach(nodes.add);
  const boxAt = (c, width) => ({ x: c.x, y: c.y - H / 2, width, height: H });
  /** The chip's box at `c` if it overlaps no node, module title, hook badge or chip; else null. */
  function fits(c, width) {
    const box = boxAt(c, width);
    if (box.x < 0 || box.y < 0) return null;
    return taken.hits(box) ? null : box;
  }
  /** The first free spot among the candidates, then outwards from the first on its row, right
   * and left alternately, nearest first: never overlapping. */
  function place(candidates, width, { scan = true } = {}) {
    let from = null;
    for (const c of candidates) {
      from ??= c;
      const box = fits(c, width);
      if (box) return taken.add(box) || c;
    }
    if (!scan || !from) return null;
    for (let k = 1; k < 400; k++) {
      for (const c of [{ x: from.x + k * 12, y: from.y }, { x: from.x - k * 12, y: from.y }]) {
        const box = fits(c, width);
        if (box) return taken.add(box) || c;
      }
    }
    return null;
  }
  /** Whether a chip at `box` reads as another node's than `n`'s: another node is nearer to it,
   * or as near and nearer to its middle (a chip between two ranks, under one and over the other). */
  function nearerNode(box, n) {
    const gap = boxGap(box, n);
    const middle = { x: box.x + box.width / 2, y: box.y + box.height / 2, width: 0, height: 0 };
    return nodes.someNear(box, gap + 1, (m) => {
      if (m === n) return false;
      const other = boxGap(box, m);
      return other < gap - 0.5 || (other < gap + 0.5 && boxGap(middle, m) < boxGap(middle, n));
    });
  }
  const reach = Math.max(layout.width, layout.height) + 200;
  /**
   * The spot for a chip `width` wide beside node box `n`: nearest first, all around it. A
   * spot's cost is its gap to the node, plus LINE_COST when it lies across an edge line,
   * OUTSIDE_MODULE_COST when it leaves the node's module box `module` and NEIGHBOUR_COST when it
   * reads as another node's; the cheapest wins (the first found among equals). Never over a
   * node, a module title or another chip; null only when nothing is free within the layout's reach.
   */
  function placeNear(n, width, module = null) {
    let best = null;
    for (const d of ringGaps(reach)) {
      if (best && d >= best.cost) break;
      const { sides, each } = ringAround(n, width, d);
      // Per side, what its spots can overlap (found once, not per spot): chips and nodes, lines.
      const near = [null, null, null, null];
      const nearOf = (side) => (near[side] ??= { taken: sideObstacles(taken, sides[side], width), lines: sideObstacles(lines, sides[side], width) });
      // A spot on this ring costs at least `least`, and a spot across a line LINE_COST more:
      // once that is no cheaper than the best, a side whose every spot is over a chip, a node
      // or a line has nothing better (found once per side, not spot by spot).
      const least = Math.max(d - SURELY, NODE_GAP);
      const covered = [null, null, null, null];
      const coveredOf = (side) => (covered[side] ??= sideCovered([...nearOf(side).taken, ...nearOf(side).lines], sides[side], width));
      if (best && least + LINE_COST >= best.cost && [0, 1, 2, 3].every(coveredOf)) continue;
      each((x, y, side) => {
        if (best && least + LINE_COST >= best.cost && coveredOf(side)) return false;
        const top = y - H / 2;
        let cost = Math.max(gapTo(x, top, width, H, n), NODE_GAP);
        if (best && cost >= best.cost) return false;
        const { axis } = sides[side];
        if (x < 0 || top < 0 || hitsAlong(nearOf(side).taken, axis, x, top, width)) return false;
        if ((!best || cost < best.cost) && hitsAlong(nearOf(side).lines, axis, x, top, width)) cost += LINE_COST;
        const box = { x, y: top, width, height: H };
        if ((!best || cost < best.cost) && module && !contains(module, box)) cost += OUTSIDE_MODULE_COST;
        if ((!best || cost < best.cost) && nearerNode(box, n)) cost += NEIGHBOUR_COST;
        if (!best || cost < best.cost) best = { c: { x, y }, box, cost };
        return cost <= Math.max(d, NODE_GAP); // nothing on this ring is nearer
      });
    }
    if (!best) return null;
    taken.add(best.box);
    return best.c;
  }
  /** Give back a spot `place` returned for a chip `width` wide (the chip moves or grows). */
  function release(spot, width) {
    taken.remove(boxAt(spot, width));
  }
  return { place, placeNear, release };
}

function pathLength(points) {
  let length = 0;
  for (let i = 1; i < points.length; i++) length += Math.hypot(points[i].x - points[i - 1].x, points[i].y - points[i - 1].y);
  return length;
}

/** Fractions of an edge's length to try a chip at: the middle, thirds, then every px or so outwards
 * (between two ranks a chip often fits in a window of a few px only). Lazy: most chips fit at once. */
function* fractionsAlong(points) {
  yield* [0.5, 0.35, 0.65, 0.2, 0.8];
  const length = pathLength(points);
  const step = Math.max(1, length / 240) / Math.max(length, 1);
  for (let k = 1; k * step < 0.5; k++) yield* [0.5 - k * step, 0.5 + k * step];
}

/** Spots centred on an edge's path (a chip sits on its edge): the middle first, then outwards. */
export function* onEdge(points, width) {
  const at = walkAlong(points);
  for (const f of fractionsAlong(points)) {
    const p = at(f);
    yield { x: p.x - width / 2, y: p.y };
  }
  // Between two ranks a chip may fit at one height only (the gap is a chip and its margins):
  // every half px of the vertical runs, where a length fraction can step over that height.
  for (let i = 1; i < points.length; i++) {
    const [a, b] = [points[i - 1], points[i]];
    if (Math.abs(a.x - b.x) > 0.01) continue;
    for (let y = Math.ceil(Math.min(a.y, b.y) * 2) / 2; y <= Math.max(a.y, b.y); y += 0.5) yield { x: a.x - width / 2, y };
  }
}

/** Spots right beside an edge's path (its line touching the chip's side), for an edge with no room on it. */
export function* besideEdge(points, width, gap = BESIDE_GAP) {
  const at = walkAlong(points);
  for (const f of fractionsAlong(points)) {
    const p = at(f);
    yield { x: p.x + gap, y: p.y };
    yield { x: p.x - gap - width, y: p.y };
  }
}

/** The text of a gradient chip in the form its spot has room for (placeChips: numbers, norm, mark). */
export function edgeChipText(spot, tv) {
  if (spot.form === "mark") return GRAD_MARK;
  return spot.form === "norm" ? compactGradText(tv) : gradChipText(tv);
}

// Chip looks are formatted numbers, asked for on every frame while playing: each is made once
// per tensor (a trace's tensors never change) and form.
const looksOf = new WeakMap();
function once(tv, key, make) {
  if (!tv || typeof tv !== "object") return make();
  let made = looksOf.get(tv);
  if (!made) looksOf.set(tv, (made = new Map()));
  if (!made.has(key)) made.set(key, make());
  return made.get(key);
}

/** {text, title} of an edge's gradient chip at its spot. */
export function edgeChipLook(spot, tv) {
  return once(tv, spot.form, () => ({ text: edgeChipText(spot, tv), title: `gradient ${tensorTitle(tv)}` }));
}

/** {text, title} of a .grad chip. */
export function leafChipLook(tv) {
  return once(tv, "leaf", () => ({ text: leafChipText(tv), title: `.grad = ${tensorTitle(tv)}` }));
}

function widest(texts) {
  return texts.reduce((w, t) => Math.max(w, chipWidth(t)), chipWidth("0.0000"));
}

/**
 * What placeChips places, read from the trace; the layout says the rest. `edges`: the gradient
 * chips, narrow ones (then short edges) first — a wide chip should not take the only spot a
 * short edge has — each `w` wide with its numbers, `nw` with its norm. `nodes`: .grad chips
 * before value chips (what backward() leaves is the lesson), the widest of each first — a wide
 * chip has few spots near its node, a narrow one fits in many. `hooked`: modules with hook badges.
 */
function chipsWanted(layout, trace) {
  const nodes = new Map(trace.graph.nodes.map((n) => [n.id, n]));
  const edges = new Map(trace.graph.edges.map((e) => [e.id.split("~")[0], e]));
  const edgeChips = layout.edges
    .map((e) => ({ e, traceEdge: edges.get(e.id.split("~")[0]) }))
    .filter(({ e, traceEdge }) => e.kind !== "no_grad" && traceEdge && traceEdge.grads?.length && (e.points || []).length >= 2)
    .map(({ e, traceEdge }) => ({
      e,
      w: widest(traceEdge.grads.map((g) => gradChipText(g.value) || "None")),
      nw: widest(traceEdge.grads.map((g) => compactGradText(g.value))),
      length: pathLength(e.points),
    }))
    .sort((a, b) => a.w - b.w || a.length - b.length);
  const writes = new Map();
  for (const n of trace.graph.nodes) if (n.kind === "tensor" && n.role === "parameter") writes.set(n.id, []);
  for (const ev of trace.events) {
    if (ev.kind !== "grad_write" || !ev.node) continue;
    if (!writes.has(ev.node)) writes.set(ev.node, []);
    writes.get(ev.node).push(leafChipText(ev.payload?.after));
  }
  const widestFirst = (kind, textsOf) =>
    layout.nodes
      .filter((n) => textsOf(n))
      .map((n) => ({ kind, n, w: widest(textsOf(n)) }))
      .sort((a, b) => b.w - a.w);
  const leafTexts = (n) => writes.get(n.id) && (writes.get(n.id).length ? writes.get(n.id) : [".grad [0.0000, 0.0000]"]);
  const valueTexts = (n) => {
    const text = nodes.get(n.id) && valueChipText(nodes.get(n.id).value);
    return text && [text];
  };
  const hooked = (trace.graph.modules || []).filter((m) => m.hooks?.length).map((m) => m.path);
  return { hooked, edges: edgeChips, nodes: [...widestFirst("leaf", leafTexts), ...widestFirst("value", valueTexts)] };
}

// The last chip spots placed on each layout, with what they were placed for. A warm renderer
// (frontend/tools/render.mjs) keeps a model's layout and draws trace after trace of it: the
// spots depend on the layout and on the chips' widths only, so when those are the same the
// search is not run again. (Spots are read, never changed.)
const placedOn = new WeakMap();

/**
 * Chip centres {x, y, width} keyed by layout node / edge id: `value` (forward values), `leaf`
 * (.grad of leaves and retained tensors) and `edge` (gradients, with the `form` that fit there —
 * "numbers", "norm" or "mark", see edgeChipText — and `beside` when the chip sits right beside
 * its edge's line instead of on it).
 */
export function placeChips(layout, trace) {
  const { key, wanted, spots } = placedBefore(layout, trace);
  if (spots) return spots;
  const steps = placeWanted(layout, wanted);
  let step = steps.next();
  while (!step.done) step = steps.next();
  placedOn.set(layout, { key, spots: step.value });
  return step.value;
}

/** What placeChips would look for on `layout`, and the spots already placed for it (or null). */
function placedBefore(layout, trace) {
  const wanted = chipsWanted(layout, trace);
  const key = JSON.stringify([wanted.hooked, wanted.edges.map((c) => [c.e.id, c.w, c.nw]), wanted.nodes.map((c) => [c.kind, c.n.id, c.w])]);
  const placed = placedOn.get(layout);
  return { key, wanted, spots: placed?.key === key ? placed.spots : null };
}

/**
 * placeChips in slices of about `sliceMs` of work, each its own task (`nextTask` between them):
 * the same search and the same spots, kept for `placeChips` on this layout, without holding the
 * page for seconds on a graph of 50,000 nodes. `onProgress(done, total)` hears the steps done.
 */
export async function placeChipsInSlices(layout, trace, { nextTask, sliceMs = 100, onProgress = () => {} }) {
  const { key, wanted, spots } = placedBefore(layout, trace);
  if (spots) return spots;
  const total = 1 + 2 * wanted.edges.length + wanted.nodes.length; // (placeWanted's steps)
  onProgress(0, total);
  await nextTask(); // (what to place is read: a task of its own)
  const steps = placeWanted(layout, wanted);
  let done = 0;
  for (let until = performance.now() + sliceMs; ; ) {
    const step = steps.next();
    if (step.done) {
      placedOn.set(layout, { key, spots: step.value });
      return step.value;
    }
    done += 1;
    if (performance.now() < until) continue;
    onProgress(done, total);
    await nextTask();
    until = performance.now() + sliceMs;
  }
}

/** The search, one chip a step (a generator: placeChips runs it through, placeChipsInSlices in
 * slices); its return value is the spots. */
function* placeWanted(layout, wanted) {
  const placer = createPlacer(layout, new Set(wanted.hooked));
  yield;
  const centre = (spot, w) => (spot ? { x: spot.x + w / 2, y: spot.y, width: w } : null);
  const out = { leaf: new Map(), edge: new Map(), value: new Map() };
  // Gradient chips first, as they must sit on their edge.
  // A chip sits on its edge. First every edge reserves room on it for the smallest chip, the
  // mark ∇ (its value on hover and in the inspector); then each, in turn, trades the mark for its
  // numbers, else its norm, on its path around the others' reservations — or right beside the
  // path (numbers a learner reads beat a mark on the line). Only an edge with no room even for
  // the mark gets a chip as near as it fits.
  const mw = chipWidth(GRAD_MARK);
  const marks = new Map();
  for (const { e } of wanted.edges) {
    const at = placer.place(onEdge(e.points, mw), mw, { scan: false });
    if (at) marks.set(e.id, at);
    yield;
  }
  for (const { e, w, nw } of wanted.edges) {
    const mark = marks.get(e.id);
    if (mark) placer.release(mark, mw);
    const tries = [
      () => [onEdge(e.points, w), w, "numbers", false],
      () => [onEdge(e.points, nw), nw, "norm", false],
      () => [besideEdge(e.points, w), w, "numbers", true],
      () => [besideEdge(e.points, nw), nw, "norm", true],
      () => [mark ? [mark] : [], mw, "mark", false],
    ];
    let spot = null;
    for (const tier of tries) {
      const [candidates, width, form, beside] = tier();
      const at = placer.place(candidates, width, { scan: false });
      if (at) {
        spot = { ...centre(at, width), form, ...(beside ? { beside } : {}) };
        break;
      }
    }
    if (!spot) {
      const at = placer.place(onEdge(e.points, mw), mw);
      spot = at && { ...centre(at, mw), form: "mark", beside: true };
    }
    if (spot) out.edge.set(e.id, spot);
    yield;
  }
  // Then the chips beside nodes (.grad, forward values): the nearest free spot all around the node.
  for (const { kind, n, w } of wanted.nodes) {
    const spot = centre(placer.placeNear(n, w, moduleBoxOf(layout, n)), w);
    if (spot) out[kind].set(n.id, spot);
    yield;
  }
  return out;
}
