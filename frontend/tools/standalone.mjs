// One HTML file that is the whole player: the embed page (frontend/embed.html) with its CSS,
// the bundled viewer JS, the trace and its precomputed layout inlined, and (optionally) ELK
// for re-layout when a module is collapsed. No network request, works from file:// and
// inside a notebook's iframe. main.js boots from <script id="gradtrace-data">.

import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { bundle } from "./bundle.mjs";

const FRONTEND = join(dirname(fileURLToPath(import.meta.url)), "..");

/** Text that can sit inside <script>…</script> without ending it early. */
export function scriptSafe(js) {
  return js.replace(/<\/(script)/gi, "\\x3C/$1").replace(/<!--/g, "\\x3C!--");
}

/** JSON that can sit inside a <script type="application/json"> (still valid JSON). */
export function jsonScriptSafe(value) {
  return JSON.stringify(value).replace(/</g, "\\u003c").replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
}

function escapeHtml(text) {
  return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function inlineStyles(html) {
  return html.replace(/<link\s+rel="stylesheet"\s+href="\/?(css\/[\w.-]+\.css)"\s*\/?>/g, (_, href) => `<style>\n${readFileSync(join(FRONTEND, href), "utf8").replace(/<\/style/gi, "<\\/style")}\n</style>`);
}

/**
 * The standalone page. opts: {mode: "embed"|"full", theme: "light"|"dark"|null, elk: true}.
 * `elk: false` leaves the layout engine out (1.6 MB): the precomputed layout is drawn, but
 * collapsing a module then cannot re-lay the graph out.
 */
export async function buildStandaloneHtml(trace, layout, { mode = "embed", theme = null, elk = true, collapsed = [] } = {}) {
  let html = readFileSync(join(FRONTEND, "embed.html"), "utf8");
  const entry = /<script\s+type="module"\s+src="\/?(js\/[\w.-]+\.js)"\s*><\/script>/.exec(html);
  if (!entry) throw new Error("embed.html has no <script type=\"module\" src=\"/js/…\"> entry to inline");
  html = html.replace(entry[0], () => "");
  html = inlineStyles(html);
  html = html.replace(/<title>[\s\S]*?<\/title>/, () => `<title>${escapeHtml(trace.title || "gradtrace")} · gradtrace</title>`);
  if (theme) html = html.replace(/<html([^>]*)>/, (_, a) => `<html${a} class="gt-theme-${theme}">`);
  // No server behind a file: the "open in gradtrace" link would lead nowhere.
  html = html.replace(/<a\b[^>]*class="open-link"[^>]*>[\s\S]*?<\/a>/, () => "");
  const data = { trace, layout, mode, theme };
  // main.js takes the theme from the data block; the precomputed layout's collapsed modules
  // still reach the player's state through the URL hash (state.js), set before main.js reads it.
  const initial = new URLSearchParams();
  if (collapsed.length) initial.set("collapsed", collapsed.join(","));
  const boot = initial.size
    ? `<script>try{if(!location.hash)history.replaceState(null,"","#"+${jsonScriptSafe(initial.toString())})}catch(e){}</script>`
    : "";
  const scripts = [
    boot,
    elk ? `<script>${scriptSafe(readFileSync(join(FRONTEND, "node_modules/elkjs/lib/elk.bundled.js"), "utf8"))}</script>` : "",
    `<script type="application/json" id="gradtrace-data">${jsonScriptSafe(data)}</script>`,
    `<script type="module">\n${scriptSafe(bundle(join(FRONTEND, entry[1])))}</script>`,
  ].join("\n");
  if (!html.includes("</body>")) throw new Error("embed.html has no </body>");
  // Function replacements: a "$&" in the bundle or the trace must stay literal.
  return html.replace("</body>", () => `${scripts}\n</body>`);
}
