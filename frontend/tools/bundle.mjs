// A small ES-module bundler for the viewer's own code (plain relative imports, no packages),
// so standalone HTML files and notebook outputs carry the player inline and work offline and
// from file:// (browsers refuse to load module files from file://). Each module becomes a
// function scope returning its exports, in dependency order. It understands exactly the
// import/export forms listed below and refuses anything else by name, rather than guessing.
//
//   import { a, b as c } from "./x.js";   import * as ns from "./x.js";   import d from "./x.js";
//   export function f / async function / class / const|let|var name = …;
//   export { a, b as c };   export default <expr>;   import("./x.js") (a literal relative path:
//   bundled eagerly, the call becomes a resolved promise of the module's exports)

import { readFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";

const IMPORT = /^import\s+([\s\S]*?)\s+from\s+["']([^"']+)["'];?[ \t]*$/gm;
const BARE_IMPORT = /^import\s+["'][^"']+["'];?/m;
const EXPORT_DECL = /^export\s+(async\s+function\*?|function\*?|class|const|let|var)\s+([A-Za-z_$][\w$]*)/gm;
const EXPORT_LIST = /^export\s*\{([^}]*)\}\s*;?[ \t]*$/gm;
const EXPORT_DEFAULT = /^export\s+default\s+/m;
const DYNAMIC_IMPORT = /\bimport\(\s*["'](\.[^"']+)["']\s*\)/g;

export class BundleError extends Error {}

function parseBindings(clause, file, moduleVar) {
  // "d", "* as ns", "{ a, b as c }", "d, { a }"
  const out = [];
  let rest = clause.trim();
  const ns = /^\*\s+as\s+([\w$]+)$/.exec(rest);
  if (ns) return [`const ${ns[1]} = ${moduleVar};`];
  const def = /^([\w$]+)\s*(,\s*([\s\S]*))?$/.exec(rest);
  if (def) {
    out.push(`const ${def[1]} = ${moduleVar}.default;`);
    rest = (def[3] || "").trim();
    if (!rest) return out;
  }
  const named = /^\{([\s\S]*)\}$/.exec(rest);
  if (!named) throw new BundleError(`${file}: unsupported import form "import ${clause} from …"`);
  const parts = named[1].split(",").map((s) => s.trim()).filter(Boolean).map((s) => {
    const m = /^([\w$]+)(?:\s+as\s+([\w$]+))?$/.exec(s);
    if (!m) throw new BundleError(`${file}: unsupported import specifier "${s}"`);
    return m[2] ? `${m[1]}: ${m[2]}` : m[1];
  });
  out.push(`const { ${parts.join(", ")} } = ${moduleVar};`);
  return out;
}

function transform(file, source, varOf) {
  if (BARE_IMPORT.test(source)) throw new BundleError(`${file}: side-effect imports are not supported`);
  const rest = source.replace(DYNAMIC_IMPORT, "");
  if (/\bimport\s*\(/.test(rest)) throw new BundleError(`${file}: dynamic import() needs a literal relative path to be bundled`);
  if (/\bimport\.meta\b/.test(source)) throw new BundleError(`${file}: import.meta is not supported`);
  if (/^export\s*\*/m.test(source) || /^export\s*\{[^}]*\}\s*from/m.test(source)) throw new BundleError(`${file}: re-exports are not supported`);
  const header = [];
  let code = source.replace(IMPORT, (_, clause, spec) => {
    header.push(...parseBindings(clause, file, varOf(spec)));
    return "";
  });
  code = code.replace(DYNAMIC_IMPORT, (_, spec) => `Promise.resolve(${varOf(spec)})`);
  const exported = [];
  code = code.replace(EXPORT_DECL, (_, kind, name) => {
    exported.push([name, name]);
    return `${kind} ${name}`;
  });
  code = code.replace(EXPORT_LIST, (_, list) => {
    for (const s of list.split(",").map((x) => x.trim()).filter(Boolean)) {
      const m = /^([\w$]+)(?:\s+as\s+([\w$]+))?$/.exec(s);
      if (!m) throw new BundleError(`${file}: unsupported export specifier "${s}"`);
      exported.push([m[2] || m[1], m[1]]);
    }
    return "";
  });
  if (EXPORT_DEFAULT.test(code)) {
    code = code.replace(EXPORT_DEFAULT, "const __default = ");
    exported.push(["default", "__default"]);
  }
  if (/^export\b/m.test(code)) throw new BundleError(`${file}: unsupported export form at "${/^export.*$/m.exec(code)[0]}"`);
  const ret = `return { ${exported.map(([as, local]) => (as === local ? as : `${as}: ${local}`)).join(", ")} };`;
  return `${header.join("\n")}\n${code}\n${ret}`;
}

/** Bundle `entry` and its relative imports into one script (a string) that runs the entry. */
export function bundle(entry) {
  const root = dirname(resolve(entry));
  const order = [];
  const ids = new Map(); // absolute path -> module variable
  const state = new Map(); // path -> "visiting" | "done"
  const visit = (file, from) => {
    if (state.get(file) === "done") return;
    if (state.get(file) === "visiting") throw new BundleError(`import cycle through ${relative(root, file)} (from ${relative(root, from)})`);
    state.set(file, "visiting");
    let source;
    try {
      source = readFileSync(file, "utf8");
    } catch {
      throw new BundleError(`cannot read ${relative(root, file)}${from ? ` (imported by ${relative(root, from)})` : ""}`);
    }
    const deps = [...source.matchAll(IMPORT), ...source.matchAll(DYNAMIC_IMPORT)].map((m) => m[2] ?? m[1]);
    for (const spec of deps) {
      if (!spec.startsWith(".")) throw new BundleError(`${relative(root, file)}: only relative imports can be bundled (got "${spec}")`);
      visit(resolve(dirname(file), spec), file);
    }
    ids.set(file, `__m${ids.size}`);
    order.push({ file, source });
    state.set(file, "done");
  };
  visit(resolve(entry), null);
  const parts = order.map(({ file, source }) => {
    const varOf = (spec) => ids.get(resolve(dirname(file), spec));
    return `// ---- ${relative(root, file)}\nconst ${ids.get(file)} = (() => {\n${transform(relative(root, file), source, varOf)}\n})();`;
  });
  return `"use strict";\n${parts.join("\n")}\n`;
}
