// The per-sample, per-token picture of a Linear weight's gradient (seed 000, analyses.per_sample):
// how much each position (sample b, token t) gave to ∂L/∂W — ‖δ_bt ⊗ a_bt‖ = ‖δ_bt‖·‖a_bt‖ as
// a heatmap over B × T with its axes and colour scale — each sample's share, the check that the shares add up to W.grad, and
// what storing the factors costs next to the gradient. Click a cell: its outer product.

import { h } from "./dom.js";
import { formatNumber, formatShape, tensorNumbers } from "./format.js";

/** analyses.per_sample records of one weight (every backward pass), or []. */
export function perSampleOf(trace, weight) {
  return (trace?.analyses?.per_sample ?? []).filter((r) => r.weight === weight);
}

/** The weight a graph node stands for: a parameter leaf, or its AccumulateGrad. */
export function weightOfNode(trace, node) {
  if (!node) return null;
  const name = node.kind === "tensor" ? node.tensor : node.op === "AccumulateGrad" ? node.tensor : null;
  return name && perSampleOf(trace, name).length ? name : null;
}

/** Rows × cols of a call's position norms: samples down, tokens across. */
export function positionGrid(call) {
  const dims = call.sample_dims;
  const rows = dims.length ? dims[0] : 1;
  const cols = dims.slice(1).reduce((a, b) => a * b, 1);
  return { rows, cols, nums: tensorNumbers(call.position_norms) };
}

/** "210 numbers for the factors vs 12 for the gradient" and which way the saving goes. */
export function storageText(record) {
  const f = record.factor_numbers;
  const g = record.gradient_numbers;
  const ratio = f > g ? `${formatNumber(f / g, 3)}× more` : `${formatNumber(g / f, 3)}× fewer`;
  return `factors (a, δ): ${f.toLocaleString("en")} numbers · W.grad: ${g.toLocaleString("en")} numbers — the factors need ${ratio}`;
}

/** The factor rows a and δ of position `index` in call `k`, from analyses.linear (or null). */
function factorsAt(trace, record, k, index) {
  const linear = (trace.analyses?.linear ?? []).find((r) => r.weight === record.weight && r.pass_index === record.pass_index);
  const a = linear?.a?.[k];
  const d = linear?.delta?.[k];
  const an = a && tensorNumbers(a);
  const dn = d && tensorNumbers(d);
  if (!an || !dn) return null;
  const dIn = a.shape.at(-1);
  const dOut = d.shape.at(-1);
  return { a: an.slice(index * dIn, (index + 1) * dIn), delta: dn.slice(index * dOut, (index + 1) * dOut) };
}

function outerProduct(factors) {
  const table = h("table", { class: "outer" });
  table.append(h("tr", {}, [h("th", { text: "δ \\ a" }), ...Array.from(factors.a, (x) => h("th", { text: formatNumber(x) }))]));
  for (const d of factors.delta) {
    table.append(h("tr", {}, [h("th", { text: formatNumber(d) }), ...Array.from(factors.a, (x) => h("td", { text: formatNumber(d * x) }))]));
  }
  return table;
}

const alphaOf = (t) => (0.06 + 0.9 * t).toFixed(3);

function cellColor(x, max) {
  return `rgba(217,85,59,${alphaOf(max ? Math.min(1, x / max) : 0)})`;
}

/** The grid with its axes: "token →" over numbered columns, "sample ↓" beside numbered rows. */
function framedGrid(grid, shownRows, shownCols, rows, cols) {
  const ticks = (n, cls) => h("div", { class: `persample-ticks ${cls}`, "aria-hidden": "true" }, Array.from({ length: n }, (_, i) => h("span", { text: String(i) })));
  const more = (shown, all, what) => (shown < all ? ` (first ${shown} of ${all})` : "") + (all > 1 ? "" : ` (one ${what})`);
  return h("div", { class: "persample-frame" }, [
    h("span", { class: "persample-axis persample-axis-x", text: cols > 1 ? `token →${more(shownCols, cols, "token")}` : "one position per sample" }),
    h("span", { class: "persample-axis persample-axis-y", text: `sample ↓${more(shownRows, rows, "sample")}` }),
    cols > 1 ? ticks(shownCols, "persample-ticks-x") : h("span"),
    ticks(shownRows, "persample-ticks-y"),
    grid,
  ]);
}

/** The colour scale: 0 to the largest norm, with the quantity it measures. */
function colourScale(max) {
  return h("div", { class: "persample-scale", role: "img", "aria-label": `colour scale: ‖δ ⊗ a‖ from 0 (pale) to ${formatNumber(max)} (dark)` }, [
    h("span", { class: "num", text: "0" }),
    h("span", { class: "persample-scale-bar", style: `background: linear-gradient(to right, ${cellColor(0, max)}, ${cellColor(max, max)})` }),
    h("span", { class: "num", text: formatNumber(max) }),
    h("span", { class: "muted", text: "‖δ ⊗ a‖" }),
  ]);
}

function callView(trace, record, call, k) {
  const { rows, cols, nums } = positionGrid(call);
  if (!nums) return h("p", { class: "muted", text: "position norms were cut by the trace's value budget" });
  const max = nums.reduce((m, x) => (Number.isFinite(x) ? Math.max(m, x) : m), 0);
  const detail = h("div", { class: "persample-detail", "aria-live": "polite" });
  const shownRows = Math.min(rows, 32);
  const shownCols = Math.min(cols, 64);
  const grid = h("div", { class: "heatmap persample-grid", style: `grid-template-columns: repeat(${shownCols}, 14px)`, role: "grid", "aria-label": `contribution norms, ${rows} samples × ${cols} tokens` });
  for (let r = 0; r < shownRows; r++)
    for (let c = 0; c < shownCols; c++) {
      const index = r * cols + c;
      const x = nums[index];
      const label = cols > 1 ? `sample ${r}, token ${c}` : `sample ${r}`;
      grid.append(
        h("button", {
          class: "cell",
          style: `background:${cellColor(x, max)}`,
          title: `${label}: ‖δ ⊗ a‖ = ${formatNumber(x)}`,
          "aria-label": `${label}: ${formatNumber(x)}`,
          onclick: () => {
            const factors = factorsAt(trace, record, k, index);
            detail.replaceChildren(
              h("p", { text: `${label}: δ ⊗ a, norm ${formatNumber(x)}` }),
              factors ? outerProduct(factors) : h("p", { class: "muted", text: "the factors' numbers were cut by the trace's value budget" }),
            );
          },
        }),
      );
    }
  const samples = call.sample_norms ? tensorNumbers(call.sample_norms) : null;
  const sampleList = samples
    ? h("p", { class: "persample-samples" }, [h("span", { text: "per sample ‖Σ_t δ ⊗ a‖: " }), h("span", { class: "num", text: Array.from(samples, (x) => formatNumber(x)).join(", ") })])
    : null;
  return h("div", { class: "persample-call" }, [
    h("p", { class: "muted", text: `a ${formatShape(call.a_shape)}, δ ${formatShape(call.delta_shape)}` }),
    framedGrid(grid, shownRows, shownCols, rows, cols),
    colourScale(max),
    sampleList,
    detail,
  ]);
}

/** The inspector section for a Linear weight (null for any other node). */
export function perSampleSection(trace, node) {
  const weight = weightOfNode(trace, node);
  if (!weight) return null;
  const parts = [];
  for (const record of perSampleOf(trace, weight)) {
    const pass = trace.passes?.[record.pass_index];
    parts.push(h("h4", { text: `${pass ? pass.label : `pass ${record.pass_index}`}: ∂L/∂${weight} = Σ over samples and tokens of δ ⊗ a` }));
    record.calls.forEach((call, k) => parts.push(callView(trace, record, call, k)));
    const check =
      record.matches === null
        ? "the shares were too large to add up here"
        : `Σ of the per-sample shares vs W.grad: max error ${formatNumber(record.sum_max_error)} ${record.matches ? "✓" : "✗"}`;
    parts.push(h("p", { class: record.matches === false ? "persample-check bad" : "persample-check", text: check }));
    parts.push(h("p", { class: "muted", text: storageText(record) }));
  }
  return h("section", { class: "inspector-section persample", "data-section": "per-sample" }, [h("h3", { text: "Per sample, per token" }), ...parts]);
}
