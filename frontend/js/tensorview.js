// A tensor in the inspector: shape and dtype, its numbers (a list, a heatmap for matrices, a
// histogram for large tensors) and its stats, NaN/inf flagged. Prints trace numbers only.

import { h, svgEl } from "./dom.js";
import { formatElement, formatNumber, formatNumberFull, formatShape, tensorNumbers, hasNonFinite, matrixView, decodeNumber, isComplex } from "./format.js";

/** A number as the inspector prints it: `dtype`'s elements as that dtype is written (integers
 * as integers), statistics (no dtype: a mean of integers is not one) with 4 significant digits. */
function num(v, dtype) {
  const x = decodeNumber(v);
  return h("span", { class: Number.isFinite(x) ? "num" : "num num--flag", title: formatNumberFull(v), text: dtype ? formatElement(v, dtype) : formatNumber(v) });
}

/** Diverging colour for a heatmap cell: coral for negative, teal for positive (CB-safe pair). */
function cellColor(x, maxAbs) {
  if (!Number.isFinite(x)) return "#c0142b";
  const t = maxAbs ? Math.min(1, Math.abs(x) / maxAbs) : 0;
  const [r, g, b] = x < 0 ? [217, 85, 59] : [15, 125, 115];
  return `rgba(${r},${g},${b},${(0.08 + 0.85 * t).toFixed(3)})`;
}

function heatmap(tv) {
  const m = matrixView(tv);
  if (!m) return null;
  const rows = Math.min(m.rows, 32);
  const cols = Math.min(m.cols, 32);
  const maxAbs = m.nums.reduce((a, x) => (Number.isFinite(x) ? Math.max(a, Math.abs(x)) : a), 0);
  const showText = cols <= 6 && rows <= 12;
  const grid = h("div", { class: "heatmap", style: `grid-template-columns: repeat(${cols}, ${showText ? "minmax(3.6em, auto)" : "12px"})`, role: "img", "aria-label": `heatmap ${m.rows} by ${m.cols}` });
  for (let r = 0; r < rows; r++)
    for (let c = 0; c < cols; c++) {
      const x = m.nums[r * m.cols + c];
      grid.append(h("span", { class: "cell", style: `background:${cellColor(x, maxAbs)}`, title: `[${r}, ${c}] = ${formatNumberFull(x)}`, text: showText ? formatElement(x, tv.dtype) : "" }));
    }
  const note = rows < m.rows || cols < m.cols ? h("p", { class: "muted", text: `showing ${rows}×${cols} of ${m.rows}×${m.cols}` }) : null;
  return h("div", {}, [grid, note]);
}

/** A histogram of a large tensor's finite values (24 bins), with its range written under it. */
function histogram(nums, dtype) {
  const finite = nums.filter(Number.isFinite);
  if (finite.length < 2) return null;
  let lo = Infinity;
  let hi = -Infinity;
  for (const x of finite) {
    if (x < lo) lo = x;
    if (x > hi) hi = x;
  }
  const bins = new Array(24).fill(0);
  for (const x of finite) bins[Math.min(23, Math.floor(((x - lo) / (hi - lo || 1)) * 24))]++;
  const top = Math.max(...bins);
  const bars = bins.map((c, i) => svgEl("rect", { x: i * 10, y: 40 - (40 * c) / top, width: 9, height: (40 * c) / top, class: "hist-bar" }, [svgEl("title", {}, [`${c}`])]));
  return h("div", { class: "hist" }, [
    svgEl("svg", { viewBox: "0 0 240 40", width: 240, height: 40, role: "img", "aria-label": `histogram of ${finite.length} values` }, bars),
    h("div", { class: "hist-range" }, [num(lo, dtype), num(hi, dtype)]),
  ]);
}

/** A tensor: shape, dtype, its numbers (list, or heatmap for matrices) and stats. */
export function tensorView(tv, caption) {
  if (!tv) return h("div", { class: "tensor" }, [caption ? h("span", { class: "caption", text: caption }) : null, h("span", { class: "muted", text: " None (no gradient)" })]);
  const nums = tensorNumbers(tv);
  const s = tv.stats || {};
  const flag = hasNonFinite(tv) ? h("span", { class: "flag", text: ` ⚠ ${s.nan || 0} NaN, ${s.inf || 0} inf` }) : null;
  let body;
  if (nums && nums.length <= 8 && (tv.shape || []).length <= 1) body = h("div", { class: "values" }, ["[", ...nums.flatMap((x, i) => (i ? [", ", num(x, tv.dtype)] : [num(x, tv.dtype)])), "]"]);
  else if (nums && (tv.shape || []).length <= 1) body = histogram(nums, tv.dtype);
  else if (nums) body = h("div", {}, [heatmap(tv), nums.length > 64 ? histogram(nums, tv.dtype) : null]);
  else body = h("p", { class: "muted", text: "values truncated (stats only)" });
  const stats = h("dl", { class: "stats" }, ["min", "max", "mean", "std", "norm"].flatMap((k) => [h("dt", { text: k }), h("dd", {}, [num(s[k] ?? "NaN", k === "min" || k === "max" ? tv.dtype : undefined)])]));
  return h("div", { class: "tensor" }, [
    h("div", {}, [
      caption ? h("span", { class: "caption", text: caption + " " }) : null,
      h("code", { text: `${formatShape(tv.shape)} ${tv.dtype}` }),
      isComplex(tv.dtype) ? h("span", { class: "muted", text: " numbers and stats: magnitudes |z|" }) : null,
      flag,
    ]),
    body,
    tv.shape && tv.shape.length && (tv.stats?.numel ?? 0) > 1 ? stats : null,
  ]);
}
