// The one module of text metrics: how wide a piece of graph text is, in the graph's own fonts.
// Node sizes (layout.js), chip boxes and every export use it, so nothing guesses a width.
// Widths are advance widths of DejaVu Sans (regular, bold) measured in Chromium with canvas
// measureText at 100 px (DejaVu Sans Mono is 0.6 em for every glyph); graph.css names the same
// fonts at the sizes in FONTS (tests/frontend/fold.test.mjs, "text metrics", checks that they agree).

const CHARS =
  "0123456789 !\"#$%&'()*+,-./:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~" +
  "₀₁₂₃₄₅₆₇₈₉·×−‖→←∂δ≈⚠✓…ᵀ⊗Σ∑²³⁻¹";
const SANS =
  "64,64,64,64,64,64,64,64,64,64,32,40,46,84,64,95,78,27,39,39,50,84,32,36,32,34,34,34,84,84,84,53,100,68,69,70,77,63,58,77,75,29,29," +
  "66,56,86,75,79,60,79,69,63,61,73,68,99,69,61,69,39,34,39,84,50,50,61,63,55,63,62,35,63,63,28,28,58,28,97,63,61,63,63,41,52,39,63," +
  "59,82,59,59,52,64,34,64,84,40,40,40,40,40,40,40,40,40,40,32,84,84,50,84,84,52,61,84,90,84,100,38,84,63,67,40,40,53,40";
const SANS_BOLD =
  "70,70,70,70,70,70,70,70,70,70,35,46,52,84,70,100,87,31,46,46,52,84,38,42,38,37,40,40,84,84,84,58,100,77,76,73,83,68,68,82,84,37,37," +
  "77,64,100,84,85,73,85,77,72,68,81,77,110,77,72,73,46,37,46,84,50,50,67,72,59,72,68,44,72,71,34,34,67,34,104,71,69,72,72,49,60,48," +
  "71,65,92,65,65,58,71,37,71,84,44,44,44,44,44,44,44,44,44,44,38,84,84,50,84,84,54,69,84,90,84,100,43,84,68,72,44,44,53,44";

function table(csv) {
  const widths = csv.split(",").map(Number);
  return new Map([...CHARS].map((ch, i) => [ch, widths[i] / 100]));
}

const FACES = { sans: table(SANS), sansBold: table(SANS_BOLD), mono: null };
const MONO_EM = 0.6;
const UNKNOWN_EM = 0.8; // a glyph not in the table (CJK, emoji): wide rather than overlapping

/** Each kind of graph text: its face and size in px (graph.css uses the same numbers). */
export const FONTS = {
  label: { face: "sans", size: 13 }, // tensor names: x, W₀, a₁
  opLabel: { face: "sans", size: 12 }, // MmBackward0, AccumulateGrad
  sublabel: { face: "mono", size: 11.5 }, // shapes, (1, 3)
  chip: { face: "mono", size: 11.5 }, // gradient and value chips
  groupTitle: { face: "sansBold", size: 12 }, // module box titles
  badge: { face: "sans", size: 11.5 }, // hook badges
};

/** Width in px of `text` in one of FONTS (or {face, size}). */
export function textWidth(text, font) {
  const { face, size } = typeof font === "string" ? FONTS[font] : font;
  const widths = FACES[face];
  let em = 0;
  for (const ch of String(text ?? "")) em += widths ? (widths.get(ch) ?? UNKNOWN_EM) : MONO_EM;
  return em * size;
}

export const CHIP_HEIGHT = 18;
const CHIP_PAD = 12;

/** The box a chip with this text needs. */
export function chipWidth(text) {
  return Math.ceil(textWidth(text, "chip")) + CHIP_PAD;
}
