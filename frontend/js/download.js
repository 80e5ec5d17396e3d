// Downloads: graph.css's text (inlined into exported SVGs so they render anywhere), a PNG
// rasterised from an SVG on a canvas, and saving a blob under a file name.

// The sheets an exported picture carries: the graph's, and the compare marks drawn on it.
const GRAPH_SHEETS = ["graph.css", "views13.css"];

/** The text of graph.css (and views13.css) as loaded by this page (linked or inline <style>). */
export function graphCssText() {
  const parts = [];
  for (const sheet of document.styleSheets) {
    const owner = sheet.ownerNode;
    const isGraph = (sheet.href && GRAPH_SHEETS.some((name) => sheet.href.endsWith(name))) || (owner && owner.id === "gt-graph-css");
    if (!isGraph) continue;
    try {
      parts.push([...sheet.cssRules].map((r) => r.cssText).join("\n"));
    } catch {
      // a sheet the page may not read: the picture goes without it
    }
  }
  return parts.join("\n");
}

export function saveBlob(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

/** Rasterise an SVG string to a PNG blob (scale 2 for crisp text, capped for huge graphs). */
export function svgToPngBlob(svgText, width, height) {
  return new Promise((resolve, reject) => {
    const scale = Math.min(2, 16000 / Math.max(width, height));
    const img = new Image();
    const url = URL.createObjectURL(new Blob([svgText], { type: "image/svg+xml" }));
    img.onload = () => {
      const canvas = document.createElement("canvas");
      canvas.width = Math.max(1, Math.round(width * scale));
      canvas.height = Math.max(1, Math.round(height * scale));
      const ctx = canvas.getContext("2d");
      ctx.scale(scale, scale);
      ctx.drawImage(img, 0, 0, width, height);
      URL.revokeObjectURL(url);
      canvas.toBlob((b) => (b ? resolve(b) : reject(new Error("PNG encoding failed"))), "image/png");
    };
    img.onerror = () => reject(new Error("the SVG could not be rasterised"));
    img.src = url;
  });
}

export function slug(text) {
  return String(text || "gradtrace").toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "") || "gradtrace";
}
