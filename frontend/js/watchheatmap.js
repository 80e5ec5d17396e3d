// The run view's repeated blocks (layers.0, layers.1, … of a ModuleList or Sequential; h.0 … h.11
// of a transformer), folded into one layer × step heatmap each: a row per block, a column per
// logged step, each cell the gradient norm one node of that block passed back at that step,
// coloured on the graph's log scale. Which node of the block: a select lists the block's nodes
// (the weight's AccumulateGrad first: the parameter's own gradient). A click on a cell goes to
// that step and selects that node in the graph.
//
// repeatedBlocks is pure (tests/frontend/watchheatmap.test.mjs); drawHeatmaps writes the DOM.

/** "layers.3.attn" -> {prefix: "layers.", index: 3, rest: ".attn"}; null for a path with no number. */
export function blockOf(module) {
  const m = /^(.*?)(?:^|\.)(\d+)((?:\.[^.]*)*)$/.exec(module);
  if (!m) return null;
  const prefix = module.slice(0, module.length - m[2].length - m[3].length);
  return { prefix, index: Number(m[2]), rest: m[3] };
}

/**
 * The run's repeated blocks: [{prefix, indices: [0, 1, …], templates: [{key, label, cells: [node index
 * or -1 per block]}]}], each with at least two blocks sharing a node. A template is one node of the
 * block ("AccumulateGrad#weight", ".attn/MmBackward0#0"); the first is the one drawn by default.
 */
export function repeatedBlocks(nodes) {
  const groups = new Map(); // prefix -> {indices: Set, byTemplate: Map(key -> Map(index -> node))}
  nodes.forEach((node, i) => {
    const b = blockOf(node.module);
    if (!b) return;
    const g = groups.get(b.prefix) || { indices: new Set(), byTemplate: new Map() };
    groups.set(b.prefix, g);
    g.indices.add(b.index);
    const ordinal = node.key.slice(node.key.lastIndexOf("#") + 1);
    const key = `${b.rest ? b.rest.slice(1) + "/" : ""}${node.op}#${ordinal}`;
    if (!g.byTemplate.has(key)) g.byTemplate.set(key, new Map());
    g.byTemplate.get(key).set(b.index, i);
  });
  const out = [];
  for (const [prefix, g] of groups) {
    const indices = [...g.indices].sort((a, b) => a - b);
    const templates = [...g.byTemplate]
      .filter(([, at]) => at.size >= 2)
      .map(([key, at]) => ({ key, label: key.replace(/Backward\d*#/, "#"), cells: indices.map((k) => (at.has(k) ? at.get(k) : -1)) }));
    if (indices.length < 2 || !templates.length) continue;
    const rank = (t) => (t.key === "AccumulateGrad#weight" ? 0 : t.key.endsWith("AccumulateGrad#weight") ? 1 : t.key.includes("AccumulateGrad#") ? 2 : 3);
    templates.sort((a, b) => rank(a) - rank(b));
    out.push({ prefix, indices, templates });
  }
  return out;
}

const CELL_H = 12, LABEL_W = 64;

/** A row's name that fits its column: "layers.3", and "…h.3" for "transformer.h.3". */
export function rowLabel(prefix, index) {
  const parts = prefix.split(".").filter(Boolean);
  return `${parts.length > 1 ? "…" : ""}${parts.length ? parts[parts.length - 1] + "." : ""}${index}`;
}

/**
 * Draw every repeated block of `run` into `box` (replacing what was there). `colour(norm)` is the
 * graph's colour of a norm; `at` the chosen step's index; `go(stepIndex, nodeKey)` the click.
 * Returns a function that redraws the step marker and the selection (called on every repaint).
 */
export function drawHeatmaps(box, run, { colour, num, go }) {
  const blocks = repeatedBlocks(run.nodes);
  box.replaceChildren();
  box.hidden = !blocks.length;
  const painters = [];
  for (const block of blocks) {
    let template = block.templates[0];
    const section = document.createElement("section");
    section.className = "watch-heatmap";
    const title = document.createElement("h3");
    title.textContent = `${block.prefix}${block.indices[0]}…${block.indices[block.indices.length - 1]} × step`;
    const select = document.createElement("select");
    select.setAttribute("aria-label", `Node of each ${block.prefix}N block`);
    for (const t of block.templates) select.append(new Option(t.label, t.key));
    const canvas = document.createElement("canvas");
    const cols = run.steps.length, rows = block.indices.length;
    const room = (box.clientWidth || 300) - 24; // the panel's width less its padding
    const cellW = Math.max(1, Math.min(12, Math.floor((room - LABEL_W) / Math.max(1, cols))));
    canvas.width = LABEL_W + cols * cellW;
    canvas.height = rows * CELL_H + 14;
    canvas.setAttribute("role", "img");
    canvas.dataset.rows = String(rows);
    canvas.dataset.cols = String(cols);
    canvas.dataset.prefix = block.prefix;
    const label = () => canvas.setAttribute("aria-label", `Heatmap of ${block.prefix}N blocks (rows ${block.indices[0]} to ${block.indices[rows - 1]}) by logged step: the gradient norm ${template.label} passed back`);
    label();
    const ctx = canvas.getContext("2d");
    const paint = (at, selected) => {
      ctx.clearRect(0, 0, canvas.width, canvas.height);
      ctx.font = "10px system-ui, sans-serif";
      ctx.textBaseline = "middle";
      block.indices.forEach((index, r) => {
        const node = template.cells[r];
        ctx.fillStyle = getComputedStyle(box).color;
        ctx.fillText(rowLabel(block.prefix, index), 2, r * CELL_H + CELL_H / 2);
        for (let c = 0; c < cols; c += 1) {
          ctx.fillStyle = colour(node < 0 ? null : num(run.grad_out[c][node]));
          ctx.fillRect(LABEL_W + c * cellW, r * CELL_H, cellW, CELL_H - 1);
        }
        if (node >= 0 && run.nodes[node].key === selected) {
          ctx.strokeStyle = "#d12a2a";
          ctx.lineWidth = 2;
          ctx.strokeRect(LABEL_W - 1, r * CELL_H, cols * cellW + 2, CELL_H - 1);
        }
      });
      const x = LABEL_W + at * cellW;
      ctx.fillStyle = getComputedStyle(box).color;
      ctx.beginPath();
      ctx.moveTo(x + cellW / 2, rows * CELL_H + 2);
      ctx.lineTo(x + cellW / 2 - 5, rows * CELL_H + 12);
      ctx.lineTo(x + cellW / 2 + 5, rows * CELL_H + 12);
      ctx.fill();
      ctx.strokeStyle = getComputedStyle(box).color;
      ctx.lineWidth = 1;
      ctx.strokeRect(x + 0.5, 0.5, cellW - 1, rows * CELL_H - 1);
    };
    let last = [0, null];
    select.addEventListener("change", () => {
      template = block.templates.find((t) => t.key === select.value) || template;
      label();
      paint(...last);
    });
    canvas.addEventListener("click", (e) => {
      const rect = canvas.getBoundingClientRect();
      const x = ((e.clientX - rect.left) * canvas.width) / rect.width, y = ((e.clientY - rect.top) * canvas.height) / rect.height;
      const c = Math.floor((x - LABEL_W) / cellW), r = Math.floor(y / CELL_H);
      if (c < 0 || c >= cols || r < 0 || r >= rows) return;
      const node = template.cells[r];
      go(c, node < 0 ? null : run.nodes[node].key);
    });
    const head = document.createElement("div");
    head.className = "watch-heatmap-head";
    head.append(title, select);
    section.append(head, canvas);
    box.append(section);
    painters.push((at, selected) => {
      last = [at, selected];
      paint(at, selected);
    });
  }
  return (at, selected) => painters.forEach((p) => p(at, selected));
}
