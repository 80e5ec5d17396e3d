// Numbers, shapes and tensor values as the viewer prints them. Pure: no DOM, no fetch.
// Rules (VIEWER.md "Numbers"): 4 significant digits, a real minus sign (U+2212), shapes as
// tuples "(5, 6, 4)", NaN/inf spelled out and flagged — never recomputed, only formatted.

export const MINUS = "\u2212";

/** Decode one trace number: a JS number, or the strings "NaN", "Infinity", "-Infinity". */
export function decodeNumber(v) {
  if (typeof v === "number") return v;
  if (v === "NaN") return NaN;
  if (v === "Infinity") return Infinity;
  if (v === "-Infinity") return -Infinity;
  if (typeof v === "string" && v.trim() !== "" && !Number.isNaN(Number(v))) return Number(v);
  return NaN;
}

/** True for NaN and ±inf: the values the viewer flags. */
export function isNonFinite(x) {
  return typeof x === "number" && !Number.isFinite(x);
}

/** Format a number with `digits` significant digits, a real minus, no trailing zeros noise. */
export function formatNumber(value, digits = 4) {
  const x = decodeNumber(value);
  if (Number.isNaN(x)) return "NaN";
  if (x === Infinity) return "inf";
  if (x === -Infinity) return `${MINUS}inf`;
  if (x === 0) return "0";
  const abs = Math.abs(x);
  // toPrecision keeps trailing zeros on purpose: "−0.4080" says 4 significant digits.
  let text = abs.toPrecision(digits);
  if (abs < 1e-4 || text.includes("e")) {
    const [mant, exp] = abs.toExponential(digits - 1).split("e");
    const e = Number(exp);
    text = `${mant}e${e < 0 ? MINUS : ""}${Math.abs(e)}`;
  }
  return x < 0 ? `${MINUS}${text}` : text;
}

/** Full precision for hover titles (still with the real minus). */
export function formatNumberFull(value) {
  const x = decodeNumber(value);
  if (!Number.isFinite(x)) return formatNumber(x);
  return String(x).replace("-", MINUS).replace("e" + MINUS, "e" + MINUS);
}

/** Shapes as tuples: [5, 6, 4] -> "(5, 6, 4)", [3] -> "(3,)", [] -> "()" (a scalar). */
export function formatShape(shape) {
  if (!Array.isArray(shape)) return "";
  if (shape.length === 1) return `(${shape[0]},)`;
  return `(${shape.join(", ")})`;
}

/** Decode base64 little-endian float32 into a Float32Array (browser atob or Node Buffer). */
export function decodeBase64Float32(b64) {
  let bytes;
  if (typeof Buffer !== "undefined") {
    const buf = Buffer.from(b64, "base64");
    bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  } else {
    const bin = atob(b64);
    bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Float32Array(Math.floor(bytes.byteLength / 4));
  for (let i = 0; i < out.length; i++) out[i] = view.getFloat32(i * 4, true);
  return out;
}

/** The numbers of a TensorValue as a flat array, or null when the trace kept stats only. */
export function tensorNumbers(tv) {
  if (!tv) return null;
  if (Array.isArray(tv.values)) return tv.values.map(decodeNumber);
  if (typeof tv.data === "string") return Array.from(decodeBase64Float32(tv.data));
  return null;
}

/** numel of a shape (1 for a scalar). */
export function numel(shape) {
  return (shape || []).reduce((a, b) => a * b, 1);
}

/** A short chip text for a tensor: the number itself for one element, else the shape. */
export function formatTensorChip(tv) {
  if (!tv) return "None";
  const nums = tensorNumbers(tv);
  if (nums && nums.length === 1) return formatNumber(nums[0]);
  if (nums && nums.length <= 3) return `[${nums.map((n) => formatNumber(n, 3)).join(", ")}]`;
  return formatShape(tv.shape);
}

/** A compact one-line rendering of small tensors ("[0.1, −0.2]"), shape + stats otherwise. */
export function formatTensorInline(tv, maxItems = 8) {
  if (!tv) return "None";
  const nums = tensorNumbers(tv);
  if (nums && nums.length <= maxItems) {
    const body = nums.map((n) => formatNumber(n)).join(", ");
    return nums.length === 1 && (tv.shape || []).length === 0 ? body : `[${body}]`;
  }
  const s = tv.stats || {};
  return `${formatShape(tv.shape)} mean ${formatNumber(s.mean)} norm ${formatNumber(s.norm)}`;
}

/** Does this tensor hold NaN or inf (from the stats the engine counted)? */
export function hasNonFinite(tv) {
  return Boolean(tv && tv.stats && ((tv.stats.nan || 0) > 0 || (tv.stats.inf || 0) > 0));
}

/** Subscript digits for labels: "W0" -> "W₀" is left to callers; this maps a digit string. */
export function subscript(text) {
  const map = "₀₁₂₃₄₅₆₇₈₉";
  return String(text).replace(/[0-9]/g, (d) => map[Number(d)]);
}

/** Rows x cols view of a tensor for the heatmap: 2-D as is, higher dims folded into rows. */
export function matrixView(tv) {
  const nums = tensorNumbers(tv);
  if (!nums) return null;
  const shape = tv.shape || [];
  if (shape.length === 0) return { rows: 1, cols: 1, nums };
  const cols = shape[shape.length - 1] || 1;
  return { rows: Math.max(1, Math.round(nums.length / cols)), cols, nums };
}
