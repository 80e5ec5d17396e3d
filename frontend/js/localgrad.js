// The local derivative of an op, as numbers: ∂out/∂in for one input slot of an autograd node,
// computed only from numbers the trace holds — the node's saved tensors (_saved_self,
// _saved_result, …), the gradients that entered and left it — never from a guess. Where the trace
// lacks what the formula needs, the answer says which saved tensor is missing. Ops outside the
// list below answer "not shown". Pure: no DOM.

import { formatNumber, formatShape, tensorNumbers, numel, decodeNumber } from "./format.js";

/** At most this many numbers are written out; longer vectors show their first ones and a shape. */
const MAX_SHOWN = 6;

/** A number as the narration writes it: 4 significant digits without trailing zeros ("0.5", "−1.18"). */
export function num(x) {
  return formatNumber(x).replace(/(\.\d*?)0+(?=$|e)/, "$1").replace(/\.(?=$|e)/, "");
}

/** "[0.5, −0.7]" (≤ MAX_SHOWN numbers), "0.5" (one), else the first ones, "…" and the shape. */
export function numbersText(nums, shape = null) {
  if (!nums) return "?";
  if (nums.length === 1 && (!shape || shape.length === 0 || numel(shape) === 1)) return num(nums[0]);
  const shown = nums.slice(0, MAX_SHOWN).map((x) => num(x));
  if (nums.length <= MAX_SHOWN) return `[${shown.join(", ")}]`;
  return `[${shown.join(", ")}, …] ${formatShape(shape || [nums.length])}`;
}

function saved(node, name) {
  return (node.saved || []).find((s) => s.name === name) || null;
}

/** A saved tensor's numbers and shape, or null (not saved, or kept without its numbers). */
function savedTensor(node, name) {
  const s = saved(node, name);
  if (!s || !s.value) return null;
  const nums = tensorNumbers(s.value);
  return nums ? { nums, shape: s.value.shape || [] } : null;
}

/** A saved non-tensor value (an int, a float, a list of sizes), or undefined. */
function savedScalar(node, name) {
  const s = saved(node, name);
  return s && s.scalar !== null && s.scalar !== undefined ? s.scalar : undefined;
}

/** A saved scalar, or a saved one-element tensor (a Python number wrapped by PyTorch), as a number. */
function savedNumber(node, name) {
  const sc = savedScalar(node, name);
  if (typeof sc === "number") return sc;
  const t = savedTensor(node, name);
  return t && t.nums.length === 1 ? t.nums[0] : null;
}

const lacks = (what) => ({ missing: `the trace does not hold ${what}, so the local derivative's numbers cannot be shown` });
const constant = (value, formula, note = "") => ({ formula, text: num(value), kind: "scalar", scalar: value, note });
const elementwise = (formula, nums, shape, from) => ({ formula, text: numbersText(nums, shape), kind: nums.length === 1 ? "scalar" : "elementwise", scalar: nums.length === 1 ? nums[0] : null, nums, from });

/** The transpose of a saved matrix (last two dims), as the numbers multiplied by δ. */
function transposed(t) {
  const shape = t.shape;
  if (shape.length < 2) return { nums: t.nums, shape };
  const r = shape[shape.length - 2];
  const c = shape[shape.length - 1];
  const batch = t.nums.length / (r * c);
  const out = [];
  for (let b = 0; b < batch; b++) for (let j = 0; j < c; j++) for (let i = 0; i < r; i++) out.push(t.nums[b * r * c + i * c + j]);
  return { nums: out, shape: [...shape.slice(0, -2), c, r] };
}

/** A matrix's numbers row by row ("[[1], [2]]") when small, else numbersText's summary. */
function matrixText(t) {
  if (t.shape.length !== 2 || t.nums.length > MAX_SHOWN) return numbersText(t.nums, t.shape);
  const [r, c] = t.shape;
  return rowsText(Array.from({ length: r }, (_, i) => t.nums.slice(i * c, (i + 1) * c)));
}

const matrix = (formula, t, from, product) => ({ formula, text: matrixText(t), kind: "matrix", from, product });

// Abramowitz–Stegun 7.1.26 is too coarse for 4 significant digits; this series/continued form is
// accurate to ~1e-12 over the range GELU needs.
function erf(x) {
  const s = Math.sign(x);
  const a = Math.abs(x);
  if (a < 3) {
    let sum = a;
    let term = a;
    for (let n = 1; n < 60; n++) {
      term *= (-a * a) / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17) break;
    }
    return (s * 2 * sum) / Math.sqrt(Math.PI);
  }
  // erfc continued fraction (Lentz) for the tail
  let f = a;
  for (let n = 60; n >= 1; n--) f = a + n / 2 / f;
  return s * (1 - Math.exp(-a * a) / (f * Math.sqrt(Math.PI)));
}

function geluGrad(x, approximate) {
  if (approximate === "tanh") {
    const k = Math.sqrt(2 / Math.PI);
    const inner = k * (x + 0.044715 * x ** 3);
    const t = Math.tanh(inner);
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
  }
  return 0.5 * (1 + erf(x / Math.SQRT2)) + (x * Math.exp(-0.5 * x * x)) / Math.sqrt(2 * Math.PI);
}

/** A dim as saved: negative dims arrive as 2^64 − k (too big for a double to keep exact). */
function savedDim(node, rank) {
  const d = savedScalar(node, "_saved_dim");
  if (typeof d !== "number") return null;
  if (d >= 0 && d < rank) return d;
  if (d < 0 && d >= -rank) return rank + d;
  return null;
}

/** The first slice along `dim` of a tensor: its flat indices. */
function firstSlice(shape, dim) {
  const inner = numel(shape.slice(dim + 1));
  return Array.from({ length: shape[dim] }, (_, i) => i * inner);
}

/**
 * The softmax dim: the saved one when it is a small int, else the one along which the result's
 * first slice sums to 1 (for log_softmax: its exp) — the trace's own numbers decide it.
 */
function softmaxDim(node, t, toProb) {
  const rank = t.shape.length;
  const d = savedDim(node, rank);
  if (d !== null) return d;
  for (let k = rank - 1; k >= 0; k--) {
    const sum = firstSlice(t.shape, k).reduce((acc, i) => acc + toProb(t.nums[i]), 0);
    if (Math.abs(sum - 1) < 1e-4) return k;
  }
  return null;
}

function rowsText(rows) {
  return `[${rows.map((r) => `[${r.map((x) => num(x)).join(", ")}]`).join(", ")}]`;
}

/** The Jacobian of the first slice of a (log-)softmax, written out when it is small. */
function softmaxJacobian(node, log) {
  const t = savedTensor(node, "_saved_result");
  if (!t) return lacks("the saved result");
  const toProb = log ? Math.exp : (x) => x;
  const dim = t.shape.length ? softmaxDim(node, t, toProb) : null;
  if (dim === null) return lacks("the softmax dim");
  const y = firstSlice(t.shape, dim).map((i) => toProb(t.nums[i]));
  const n = y.length;
  const formula = log ? "∂log_softmax_i/∂x_j = δ_ij − softmax_j" : "∂y_i/∂x_j = y_i(δ_ij − y_j)";
  if (n > 4) return { formula, text: `softmax of the first slice ${numbersText(y, [n])}`, kind: "matrix", from: "_saved_result" };
  const rows = y.map((yi, i) => y.map((yj, j) => (log ? (i === j ? 1 : 0) - yj : yi * ((i === j ? 1 : 0) - yj))));
  return { formula, text: `${rowsText(rows)} (first slice along dim ${dim})`, kind: "matrix", from: "_saved_result" };
}

function layerNorm(node, slot) {
  const x = savedTensor(node, "_saved_input");
  const mean = savedTensor(node, "_saved_result1");
  const rstd = savedTensor(node, "_saved_result2");
  const shape = savedScalar(node, "_saved_normalized_shape");
  if (slot === 2) return constant(1, "∂y/∂β");
  if (!x || !mean || !rstd || !Array.isArray(shape)) return lacks("the saved input, mean and 1/σ");
  const n = numel(shape);
  const xhat = x.nums.slice(0, n).map((v) => (v - mean.nums[0]) * rstd.nums[0]);
  if (slot === 1) {
    const rows = x.nums.length / n;
    const all = x.nums.map((v, i) => (v - mean.nums[Math.floor(i / n)]) * rstd.nums[Math.floor(i / n)]);
    return { formula: "∂y/∂γ = x̂ = (x − μ)/σ", text: numbersText(all, [rows, n]), kind: "elementwise", from: "_saved_input, _saved_result1, _saved_result2" };
  }
  const gamma = savedTensor(node, "_saved_weight");
  const g = gamma ? gamma.nums : new Array(n).fill(1);
  const r = rstd.nums[0];
  const jac = xhat.map((xi, i) => xhat.map((xj, j) => (g[i] * r * ((i === j ? n : 0) - 1 - xi * xj)) / n));
  const formula = "∂y_i/∂x_j = γ_i/σ · (δ_ij − 1/N − x̂_i x̂_j/N)";
  if (n > 4) return { formula, text: `x̂ = ${numbersText(xhat, [n])}, 1/σ = ${num(r)} (first row)`, kind: "matrix", from: "_saved_input" };
  return { formula, text: `${rowsText(jac)} (first row of x)`, kind: "matrix", from: "_saved_input" };
}

const VIEWS = new Set(["view", "reshapealias", "unsafeview", "t", "transpose", "permute", "squeeze", "unsqueeze", "clone", "expand", "select", "slice", "alias", "backwardhookfunction"]);

/**
 * The local derivative ∂out/∂in of op node `node` for input `slot`, given the node's node_post
 * event `post`: {formula, text, kind: "scalar"|"elementwise"|"matrix"|"rearrange", scalar?} with
 * the numbers, or {missing} (the trace lacks a number the formula needs), or {notShown}.
 */
export function localDerivative(node, slot, post) {
  const op = String(node.op || "");
  const base = op.replace(/Backward\d*$/, "").toLowerCase();
  const variant = Number((/Backward(\d+)$/.exec(op) || [])[1] || 0);
  const gIn = post?.payload?.grad_inputs?.[slot] || null;
  const gOut = post?.payload?.grad_outputs?.[0] || null;
  switch (base) {
    case "add": {
      if (slot === 0 || variant === 1) return constant(1, "∂(a + b)/∂a");
      const alpha = savedNumber(node, "_saved_alpha");
      return alpha === null ? constant(1, "∂(a + b)/∂b") : constant(alpha, "∂(a + α·b)/∂b = α");
    }
    case "sub": {
      if (slot === 0 || variant === 1) return constant(1, "∂(a − b)/∂a");
      const alpha = savedNumber(node, "_saved_alpha") ?? 1;
      return constant(-alpha, "∂(a − α·b)/∂b = −α");
    }
    case "rsub": {
      const alpha = savedNumber(node, "_saved_alpha") ?? 1;
      return slot === 0 ? constant(-alpha, "∂(b − α·a)/∂a = −α") : constant(1, "∂(b − α·a)/∂b");
    }
    case "mul": {
      const name = slot === 0 ? "_saved_other" : "_saved_self";
      const formula = slot === 0 ? "∂(a·b)/∂a = b" : "∂(a·b)/∂b = a";
      const num = variant === 1 ? savedNumber(node, name) : null;
      if (num !== null) return constant(num, formula);
      const t = savedTensor(node, name);
      return t ? elementwise(formula, t.nums, t.shape, name) : lacks(`the saved ${slot === 0 ? "other" : "self"} (${name})`);
    }
    case "div": {
      const other = variant === 1 ? savedNumber(node, "_saved_other") : null;
      if (other !== null) return constant(1 / other, "∂(a/b)/∂a = 1/b");
      const b = savedTensor(node, "_saved_other");
      if (!b) return lacks("the saved divisor (_saved_other)");
      if (slot === 0) return elementwise("∂(a/b)/∂a = 1/b", b.nums.map((v) => 1 / v), b.shape, "_saved_other");
      const a = savedTensor(node, "_saved_self");
      if (!a || a.nums.length !== b.nums.length) return lacks("the saved dividend (_saved_self) in b's shape");
      return elementwise("∂(a/b)/∂b = −a/b²", a.nums.map((v, i) => -v / b.nums[i] ** 2), b.shape, "_saved_self, _saved_other");
    }
    case "pow": {
      const x = savedTensor(node, "_saved_self");
      if (variant === 0 || slot === 0) {
        const p = variant === 0 ? savedNumber(node, "_saved_exponent") : null;
        if (variant === 0) {
          if (p === null || !x) return lacks("the saved base and exponent");
          return elementwise(`∂xᵖ/∂x = p·xᵖ⁻¹ = ${num(p)}·x${p === 2 ? "" : `^${num(p - 1)}`}`, x.nums.map((v) => p * v ** (p - 1)), x.shape, "_saved_self");
        }
        const e = savedTensor(node, "_saved_exponent");
        if (!x || !e || e.nums.length !== x.nums.length) return lacks("the saved base and exponent");
        return elementwise("∂xᵉ/∂x = e·xᵉ⁻¹", x.nums.map((v, i) => e.nums[i] * v ** (e.nums[i] - 1)), x.shape, "_saved_self, _saved_exponent");
      }
      const r = savedTensor(node, "_saved_result");
      if (!x || !r) return lacks("the saved base and result");
      return elementwise("∂xᵉ/∂e = xᵉ·ln x", r.nums.map((v, i) => v * Math.log(x.nums[i])), r.shape, "_saved_result, _saved_self");
    }
    case "mm":
    case "bmm":
    case "mv":
    case "dot": {
      // δ_in(self) = δ · mat2ᵀ, δ_in(mat2) = selfᵀ · δ: the other operand is the local derivative.
      const names = base === "mv" ? ["_saved_vec", "_saved_self"] : base === "dot" ? ["_saved_tensor", "_saved_self"] : ["_saved_mat2", "_saved_self"];
      const t = savedTensor(node, names[slot]);
      if (!t) return lacks(`the saved ${names[slot].replace("_saved_", "")}`);
      if (base === "dot" || base === "mv") return elementwise(slot === 0 ? "∂(A·v)/∂A: δ ⊗ v" : "∂(A·v)/∂v = A", t.nums, t.shape, names[slot]);
      return slot === 0 ? matrix("∂(A·B)/∂A: multiply δ by Bᵀ", transposed(t), names[0], "δ · Bᵀ") : matrix("∂(A·B)/∂B: multiply δ by Aᵀ", transposed(t), names[1], "Aᵀ · δ");
    }
    case "addmm": {
      if (slot === 0) return constant(savedNumber(node, "_saved_beta") ?? 1, "∂(β·bias + α·A·B)/∂bias = β");
      const t = savedTensor(node, slot === 1 ? "_saved_mat2" : "_saved_mat1");
      if (!t) return lacks(`the saved ${slot === 1 ? "mat2" : "mat1"}`);
      return slot === 1 ? matrix("∂(A·B)/∂A: multiply δ by Bᵀ", transposed(t), "_saved_mat2", "δ · Bᵀ") : matrix("∂(A·B)/∂B: multiply δ by Aᵀ", transposed(t), "_saved_mat1", "Aᵀ · δ");
    }
    case "relu": {
      const r = savedTensor(node, "_saved_result");
      return r ? elementwise("∂relu(x)/∂x = 1 where relu(x) > 0, else 0", r.nums.map((v) => (v > 0 ? 1 : 0)), r.shape, "_saved_result") : lacks("the saved result");
    }
    case "gelu": {
      const x = savedTensor(node, "_saved_self");
      const approx = savedScalar(node, "_saved_approximate");
      return x ? elementwise(approx === "tanh" ? "∂gelu_tanh(x)/∂x" : "∂gelu(x)/∂x = Φ(x) + x·φ(x)", x.nums.map((v) => geluGrad(v, approx)), x.shape, "_saved_self") : lacks("the saved input");
    }
    case "tanh": {
      const r = savedTensor(node, "_saved_result");
      return r ? elementwise("∂tanh(x)/∂x = 1 − tanh²(x)", r.nums.map((v) => 1 - v * v), r.shape, "_saved_result") : lacks("the saved result");
    }
    case "sigmoid": {
      const r = savedTensor(node, "_saved_result");
      return r ? elementwise("∂σ(x)/∂x = σ(x)(1 − σ(x))", r.nums.map((v) => v * (1 - v)), r.shape, "_saved_result") : lacks("the saved result");
    }
    case "sum":
      return constant(1, "∂sum(x)/∂xᵢ", "δ is copied to every element");
    case "mean": {
      // n = elements averaged per output: the shapes of the gradients that left and entered.
      if (!gIn || !gOut) return lacks("the gradients' shapes");
      const n = numel(gIn.shape) / numel(gOut.shape);
      return constant(1 / n, `∂mean(x)/∂xᵢ = 1/n`, `n = ${n} elements averaged`);
    }
    case "softmax":
      return softmaxJacobian(node, false);
    case "logsoftmax":
      return softmaxJacobian(node, true);
    case "nativelayernorm":
      return layerNorm(node, slot);
    case "embedding": {
      const idx = savedTensor(node, "_saved_indices");
      if (!idx) return lacks("the saved indices");
      return { formula: "∂emb/∂weight[k] = 1 for each looked-up row k", text: `rows ${numbersText(idx.nums.map((v) => decodeNumber(v)), idx.shape)}`, kind: "rows", from: "_saved_indices" };
    }
    default:
      if (VIEWS.has(base)) {
        const to = gIn ? formatShape(gIn.shape) : "the input's shape";
        return { formula: `${base} only moves elements (local derivative 1 for each)`, text: `δ rearranged to ${to}`, kind: "rearrange" };
      }
      return { notShown: `local Jacobian not shown for ${op}` };
  }
}
