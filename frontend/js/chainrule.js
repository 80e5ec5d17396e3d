// The chain-rule step of a node as TeX (typeset by KaTeX) and as plain text (tests, fallback):
//   ∂L/∂in = ∂L/∂out · ∂out/∂in = δ_out · ∂out/∂in = δ_in
// with the numbers the trace holds — δ_out from the node's grad_outputs, δ_in from its
// grad_inputs — full vectors for tensors of a few elements, shape and norm beyond. And a Linear
// layer's outer-product reconstruction ∂L/∂W = Σ δ ⊗ a from analyses.linear. Pure: no DOM.

import { formatNumber, formatShape, formatTensorInline, tensorNumbers, matrixView, numel, decodeNumber } from "./format.js";
import { texName, forwardOpName } from "./operands.js";

/** Tensors with at most this many elements are written out in full. */
export const SMALL = 6;

/** One number in TeX: 4 significant digits, "-" (TeX's minus), NaN/inf spelled out. */
export function texNumber(value, { paren = false } = {}) {
  const x = decodeNumber(value);
  if (Number.isNaN(x)) return "\\text{NaN}";
  if (!Number.isFinite(x)) return x < 0 ? "-\\infty" : "\\infty";
  const text = formatNumber(x).replaceAll("\u2212", "-");
  const m = /^(-?[0-9.]+)e(-?)([0-9]+)$/.exec(text);
  const tex = m ? `${m[1]}\\times 10^{${m[2] ? "-" : ""}${m[3]}}` : text;
  return paren && x < 0 ? `(${tex})` : tex;
}

function isSmall(tv) {
  const nums = tensorNumbers(tv);
  return Boolean(nums) && nums.length <= SMALL;
}

/** A tensor in TeX: a number, a bracketed vector/matrix (small), or its shape and norm. */
export function texTensor(tv, { paren = false } = {}) {
  if (!tv) return "\\text{None}";
  const nums = tensorNumbers(tv);
  if (!isSmall(tv)) {
    const norm = tv.stats ? texNumber(tv.stats.norm) : "?";
    const shape = formatShape(tv.shape).replace(/, /g, ",\\,");
    return `\\underbrace{\\lVert\\cdot\\rVert = ${norm}}_{${shape}}`;
  }
  if (nums.length === 1) return texNumber(nums[0], { paren });
  const m = matrixView(tv);
  const rows = [];
  for (let r = 0; r < m.rows; r++) rows.push(m.nums.slice(r * m.cols, (r + 1) * m.cols).map((x) => texNumber(x)).join(" & "));
  return `\\begin{bmatrix}${rows.join(" \\\\ ")}\\end{bmatrix}`;
}

/** The same tensor as one line of text ("[0.1, −0.2]", or "(5, 6, 2) mean … norm …"). */
export function textTensor(tv) {
  return tv ? formatTensorInline(tv, SMALL) : "None";
}

const frac = (top, bottom) => `\\dfrac{\\partial ${top}}{\\partial ${bottom}}`;

/** The tensor a pass differentiates: the step's `of` ("loss"), else L. */
export function rootName(trace, passIndex) {
  const pass = (trace.passes || []).find((p) => p.index === passIndex);
  const step = pass && pass.step !== null && pass.step !== undefined ? trace.spec?.steps?.[pass.step] : null;
  // A default step (no spec steps) still names its root in the pass label: "backward #1 of loss".
  const of = step && typeof step.of === "string" ? step.of : (/ of (\S+)$/.exec(pass?.label || "") || [])[1] || null;
  return of ? { text: of, tex: texName(of) } : { text: "L", tex: "L" };
}

/** δ_in / δ_out when both are one number: the local derivative the two trace values imply. */
function impliedLocal(gOut, gIn) {
  const o = tensorNumbers(gOut);
  const i = tensorNumbers(gIn);
  if (!o || !i || o.length !== 1 || i.length !== 1 || !Number.isFinite(o[0]) || o[0] === 0) return null;
  return i[0] / o[0];
}

/**
 * One row per input slot of op node `node` after it ran (its node_post event `post`):
 * [{slot, source, tex, text, local, none}] — `source` the operand's name {text, tex}, or null;
 * `none` where next_functions holds None (sources[k].noGrad: an input that needs no grad).
 * An AccumulateGrad node gets one row: leaf.grad += δ.
 */
export function chainRuleSteps({ node, names, post, sources, root }) {
  if (!post || !post.payload) return [];
  // An output the program did not name is called by its op ("addmm"); the rows say what it is.
  const named = names.get(node.id);
  const out = named.derived && !node.variable ? { text: forwardOpName(node.op), tex: `\\operatorname{${forwardOpName(node.op)}}` } : named;
  const gOuts = post.payload.grad_outputs || [];
  const gOut = gOuts[0] ?? null;
  const dOutTex = gOuts.length > 1 ? `\\left(${gOuts.map((g) => texTensor(g)).join(",\\ ")}\\right)` : texTensor(gOut, { paren: true });
  const dOutText = gOuts.length > 1 ? `(${gOuts.map(textTensor).join(", ")})` : textTensor(gOut);
  if (node.variable) {
    return [{
      slot: 0,
      source: out,
      tex: `${texName(out.text)}.\\mathrm{grad} \\mathrel{+}= ${frac(root.tex, texName(out.text))} = ${texTensor(gOut)}`,
      text: `${out.text}.grad += ∂${root.text}/∂${out.text} = ${textTensor(gOut)}`,
      local: null,
      none: false,
    }];
  }
  return (post.payload.grad_inputs || []).map((gIn, slot) => {
    const src = sources.find((s) => s.slot === slot);
    const source = src ? names.get(src.id) : null;
    if (!source || src.noGrad) {
      // next_functions holds None: this input (a constant, a tensor without grad) gets nothing.
      const who = source || { text: `input ${slot}`, tex: `\\text{input ${slot}}` };
      const none = gIn ? texTensor(gIn) : "\\text{None}";
      return { slot, source, tex: `${frac(root.tex, who.tex)} = ${none}`, text: `∂${root.text}/∂${who.text} = ${gIn ? textTensor(gIn) : "None"}`, local: null, none: true };
    }
    const srcTex = source.tex;
    const srcText = source.text;
    const local = impliedLocal(gOut, gIn);
    const localTex = local === null ? frac(out.tex, srcTex) : texNumber(local, { paren: true });
    const tex = [
      frac(root.tex, srcTex),
      `${frac(root.tex, out.tex)} \\cdot ${frac(out.tex, srcTex)}`,
      `${dOutTex} \\cdot ${localTex}`,
      texTensor(gIn),
    ].join(" = ");
    const text = `∂${root.text}/∂${srcText} = ∂${root.text}/∂${out.text} · ∂${out.text}/∂${srcText} = ${dOutText} · ${local === null ? `∂${out.text}/∂${srcText}` : formatNumber(local)} = ${textTensor(gIn)}`;
    return { slot, source, tex, text, local, none: false };
  });
}

/** Leading dims of a factor: how many (a, δ) pairs the sum runs over. */
function pairCount(shape) {
  return numel((shape || []).slice(0, -1));
}

/** δᵀ a of one call in TeX: δ written as the column(s) it is (transposed), a as its rows. */
function texOuterTerm(delta, a) {
  const d = matrixView(delta);
  const cols = [];
  for (let c = 0; c < d.cols; c++) {
    const row = [];
    for (let r = 0; r < d.rows; r++) row.push(texNumber(d.nums[r * d.cols + c]));
    cols.push(row.join(" & "));
  }
  return `\\begin{bmatrix}${cols.join(" \\\\ ")}\\end{bmatrix} ${texTensor(a)}`;
}

/** Calls of one Linear whose factors are written out in full (a shared weight: a few calls). */
const MAX_CALLS_IN_FULL = 3;

/**
 * analyses.linear record `rec` as math: ∂L/∂W = Σ δ ⊗ a = Δᵀ A = rebuilt; W.grad = …; max error.
 * The factors' numbers when they are small (one term per call: a shared weight's gradient is the
 * sum of its calls'), shapes and norms otherwise. {tex, text, matches}.
 */
export function outerProduct(rec, root) {
  const w = texName(rec.weight);
  const calls = Math.min(rec.a.length, rec.delta.length);
  const perCall = pairCount(rec.a_shape); // the (a, δ) pairs of one call: batch × token positions
  const pairs = calls * perCall;
  const many = pairs > 1;
  const inner = perCall > 1 ? `\\sum_{i=1}^{${perCall}} \\delta_i \\otimes a_i` : "\\delta \\otimes a";
  const sum = calls > 1 ? `\\sum_{\\text{${calls} calls}} ${inner}` : inner;
  const factors = many ? "\\Delta^{\\top} A" : "\\delta^{\\top} a";
  const small = calls <= MAX_CALLS_IN_FULL && rec.a.slice(0, calls).every(isSmall) && rec.delta.slice(0, calls).every(isSmall);
  const numbers = small ? ` = ${rec.delta.slice(0, calls).map((d, c) => texOuterTerm(d, rec.a[c])).join(" + ")}` : "";
  const tex = [
    `${frac(root.tex, w)} = ${sum} = ${factors}${numbers} = ${texTensor(rec.reconstructed)}`,
    `${w}.\\mathrm{grad} = ${texTensor(rec.grad)}`,
    `\\max\\lvert\\text{rebuilt} - ${w}.\\mathrm{grad}\\rvert = ${texNumber(rec.max_error)}`,
  ];
  const text = [
    `∂${root.text}/∂${rec.weight} = Σ δ ⊗ a = ${textTensor(rec.reconstructed)}`,
    `${rec.weight}.grad = ${textTensor(rec.grad)}`,
    `max error ${formatNumber(rec.max_error)} ${rec.matches ? "✓ matches" : "✗ differs"}`,
  ];
  return { tex, text, matches: rec.matches };
}
