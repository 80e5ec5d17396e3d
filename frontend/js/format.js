// Numbers, shapes and tensor values as the viewer prints them. Pure: no DOM, no fetch.
// Rules for numbers: 4 significant digits, a real minus sign (U+2212), shapes as
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

// Dtypes whose elements are whole numbers: printed as they are, never with a decimal point.
const INTEGER_DTYPES = new Set(["int64", "int32", "int16", "int8", "uint64", "uint32", "uint16", "uint8", "bool"]);

/** Does a tensor of this dtype hold whole numbers (integers, bools)? */
export function isIntegerDtype(dtype) {
  return INTEGER_DTYPES.has(dtype);
}

/**
 * One element of a tensor of `dtype`: an integer tensor's as the integer it is ("2", "−3",
 * "True"), a float tensor's as formatNumber with `digits` significant digits ("2.000"). The
 * dtype decides, not the number: a float 2.0 stays "2.000", which says it is a float.
 */
export function formatElement(value, dtype, digits = 4) {
  if (!isIntegerDtype(dtype)) return formatNumber(value, digits);
  const x = decodeNumber(value);
  if (!Number.isFinite(x)) return formatNumber(x);
  if (dtype === "bool") return x ? "True" : "False";
  const text = BigInt(Math.round(Math.abs(x))).toString(); // no exponent, however large
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

// Bytes per number of each dtype a trace's `data` can hold (the tensor's own dtype). A complex
// element is its real and imaginary parts in turn (complex64: two float32s).
const DTYPE_BYTES = {
  float64: 8, float32: 4, float16: 2, bfloat16: 2,
  int64: 8, int32: 4, int16: 2, int8: 1, uint64: 8, uint32: 4, uint16: 2, uint8: 1, bool: 1,
  complex64: 8, complex128: 16,
};

/** Complex dtypes: the viewer shows their elements' magnitudes |z| (what their stats are of). */
export const isComplex = (dtype) => dtype === "complex64" || dtype === "complex128";

function base64Bytes(b64) {
  if (typeof Buffer !== "undefined") {
    const buf = Buffer.from(b64, "base64");
    return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  }
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
}

/** An IEEE half (its 16 bits) as a number: subnormals, infinities and NaN included. */
function halfToNumber(bits) {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >> 10) & 0x1f;
  const frac = bits & 0x3ff;
  if (exp === 0) return sign * frac * 2 ** -24;
  if (exp === 31) return frac ? NaN : sign * Infinity;
  return sign * (1 + frac / 1024) * 2 ** (exp - 15);
}

const scratch = new DataView(new ArrayBuffer(4));

/** A bfloat16 (its 16 bits) is the top half of a float32. */
function bfloat16ToNumber(bits) {
  scratch.setUint32(0, bits * 65536);
  return scratch.getFloat32(0);
}

const READERS = {
  float64: (v, o) => v.getFloat64(o, true),
  float32: (v, o) => v.getFloat32(o, true),
  float16: (v, o) => halfToNumber(v.getUint16(o, true)),
  bfloat16: (v, o) => bfloat16ToNumber(v.getUint16(o, true)),
  int64: (v, o) => Number(v.getBigInt64(o, true)), // past 2^53: the nearest double
  int32: (v, o) => v.getInt32(o, true),
  int16: (v, o) => v.getInt16(o, true),
  int8: (v, o) => v.getInt8(o),
  uint64: (v, o) => Number(v.getBigUint64(o, true)),
  uint32: (v, o) => v.getUint32(o, true),
  uint16: (v, o) => v.getUint16(o, true),
  uint8: (v, o) => v.getUint8(o),
  bool: (v, o) => v.getUint8(o), // 0 or 1
  complex64: (v, o) => Math.hypot(v.getFloat32(o, true), v.getFloat32(o + 4, true)),
  complex128: (v, o) => Math.hypot(v.getFloat64(o, true), v.getFloat64(o + 8, true)),
};

/**
 * Decode a TensorValue's `data`: base64 of little-endian numbers in `dtype` (float64 stays
 * float64, float16/bfloat16 widened exactly, ints and bools as numbers, complex as each
 * element's magnitude |z|) into a Float64Array; null for a dtype the trace cannot carry as
 * numbers (browser atob or Node Buffer).
 */
export function decodeBase64Numbers(b64, dtype = "float32") {
  const size = DTYPE_BYTES[dtype];
  if (!size) return null;
  const bytes = base64Bytes(b64);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const read = READERS[dtype];
  const out = new Float64Array(Math.floor(bytes.byteLength / size));
  for (let i = 0; i < out.length; i++) out[i] = read(view, i * size);
  return out;
}

/** A complex tensor's `values` (real and imaginary parts in turn) as magnitudes |z|. */
function magnitudes(values) {
  const out = [];
  for (let i = 0; i + 1 < values.length; i += 2) out.push(Math.hypot(decodeNumber(values[i]), decodeNumber(values[i + 1])));
  return out;
}

/**
 * The numbers of a TensorValue as a flat array (one per element: a complex tensor's are its
 * magnitudes |z|), or null when the trace kept stats only. A
 * schema 3 index in `data` is a trace that skipped resolveTensorData (tensordata.js) where it
 * entered the viewer: an error, not a tensor shown without its numbers.
 */
export function tensorNumbers(tv) {
  if (!tv) return null;
  if (Array.isArray(tv.values)) return isComplex(tv.dtype) ? magnitudes(tv.values) : tv.values.map(decodeNumber);
  if (typeof tv.data === "number") throw new Error(`tensor data ${tv.data} is an index into tensor_data: the trace was not resolved where it was loaded`);
  if (typeof tv.data === "string") {
    const nums = decodeBase64Numbers(tv.data, tv.dtype || "float32");
    return nums ? Array.from(nums) : null;
  }
  return null;
}

/** numel of a shape (1 for a scalar). */
export function numel(shape) {
  return (shape || []).reduce((a, b) => a * b, 1);
}

/**
 * The numbers of a TensorValue that has at most `most` elements (by its shape), else null:
 * what a chip prints, without decoding every big tensor to learn that it is big.
 */
export function smallTensorNumbers(tv, most) {
  return tv && numel(tv.shape) <= most ? tensorNumbers(tv) : null;
}

/** A short chip text for a tensor: the number itself for one element, else the shape (a
 * complex tensor's numbers are magnitudes, marked |z|). */
export function formatTensorChip(tv) {
  if (!tv) return "None";
  const text = formatChipNumbers(smallTensorNumbers(tv, 3), tv.shape, tv.dtype);
  return isComplex(tv.dtype) ? `|z| ${text}` : text;
}

/** formatTensorChip of numbers already decoded (`nums`: smallTensorNumbers(tv, 3), null when
 * there are none to print), the tensor's shape and its dtype (integers print as integers). */
export function formatChipNumbers(nums, shape, dtype) {
  if (nums && nums.length === 1) return formatElement(nums[0], dtype);
  if (nums && nums.length <= 3) return `[${nums.map((n) => formatElement(n, dtype, 3)).join(", ")}]`;
  return formatShape(shape);
}

/** A compact one-line rendering of small tensors ("[0.1, −0.2]"), shape + stats otherwise. */
export function formatTensorInline(tv, maxItems = 8) {
  if (!tv) return "None";
  const nums = tensorNumbers(tv);
  const of = isComplex(tv.dtype) ? "|z| " : "";
  if (nums && nums.length <= maxItems) {
    const body = nums.map((n) => formatElement(n, tv.dtype)).join(", ");
    return of + (nums.length === 1 && (tv.shape || []).length === 0 ? body : `[${body}]`);
  }
  const s = tv.stats || {};
  return `${formatShape(tv.shape)} ${of}mean ${formatNumber(s.mean)} norm ${formatNumber(s.norm)}`;
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

/** Bytes as a person reads them: 4 B, 1.5 KiB, 2.25 MiB. */
export function formatBytes(n) {
  const units = ["B", "KiB", "MiB", "GiB"];
  let value = n;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const text = unit === 0 ? String(value) : value.toFixed(value >= 100 ? 0 : value >= 10 ? 1 : 2);
  return `${text} ${units[unit]}`;
}
