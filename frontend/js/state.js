// One store for what the user chose, mirrored to the URL hash through one PROPS table, so every
// view (example, step, selection, toggles) is a link. No DOM beyond reading/writing the hash
// (mirrorToHash).

// `collapsed`: the module paths (and fold ids) the user collapsed, a Set; null until a choice is
// made (the viewer's default folding applies). An empty Set: everything expanded.
export const DEFAULTS = { example: "", spec: "", run: "", step: 0, speed: 2, node: "", collapsed: null, inserted: true, theme: "", compare: "" };

const bool = { parse: (s) => s !== "0" && s !== "false", format: (b) => (b ? "1" : "0") };
// In a URL: comma-separated, "-" for the empty set (links made before the Set read the same).
const pathSet = {
  parse: (s) => (s === "-" ? new Set() : s ? new Set(s.split(",").filter(Boolean)) : null),
  format: (set) => (set.size ? [...set].join(",") : "-"),
};
export const PROPS = [
  { name: "example", parse: String, format: String },
  { name: "spec", parse: String, format: String }, // a permalink id
  { name: "run", parse: String, format: String }, // a program's permalink id (its source, run again)
  { name: "step", parse: (s) => Math.max(0, parseInt(s, 10) || 0), format: String },
  { name: "speed", parse: (s) => Number(s) || DEFAULTS.speed, format: String },
  { name: "node", parse: String, format: String },
  { name: "collapsed", ...pathSet },
  { name: "inserted", ...bool },
  { name: "theme", parse: String, format: String },
  { name: "compare", parse: String, format: String }, // an example id or permalink id to compare with
];

/** Parse "#example=x&step=3" (or a "?spec=id" query, the service's permalink form). */
export function readHash(hash) {
  const params = new URLSearchParams(String(hash || "").replace(/^[#?]/, ""));
  const out = {};
  for (const p of PROPS) if (params.has(p.name)) out[p.name] = p.parse(params.get(p.name));
  return out;
}

/** Format the state as a hash, leaving out values equal to the defaults. */
export function writeHash(state) {
  const params = new URLSearchParams();
  for (const p of PROPS) {
    const v = state[p.name];
    if (v === undefined || v === null || v === DEFAULTS[p.name]) continue;
    params.set(p.name, p.format(v));
  }
  const s = params.toString();
  return s ? `#${s}` : "";
}

/** Whether two values of the state are the same (Sets by their members). */
function same(a, b) {
  if (a instanceof Set && b instanceof Set) return a.size === b.size && [...a].every((x) => b.has(x));
  return a === b;
}

/** get/set/on("change") over one plain object; listeners receive (state, changedKeys). A Set in
 * the state is replaced, never changed in place: set a new one. */
export function createStore(initial = {}) {
  let state = { ...DEFAULTS, ...initial };
  const listeners = [];
  return {
    get: () => state,
    set(patch) {
      const changed = Object.keys(patch).filter((k) => !same(patch[k], state[k]));
      if (!changed.length) return;
      state = { ...state, ...patch };
      for (const fn of listeners) fn(state, new Set(changed));
    },
    on(event, fn) {
      if (event !== "change") throw new Error(`unknown store event ${event}`);
      listeners.push(fn);
    },
  };
}

/** Keep the page's URL hash the store's view, `delayMs` after the last change (no history entry). */
export function mirrorToHash(store, { delayMs = 120 } = {}) {
  let timer = null;
  store.on("change", () => {
    clearTimeout(timer);
    // A hash the user (or a link) set meanwhile wins: its hashchange is still on its way to
    // the viewer, and writing the old view over it now would lose that navigation.
    const seen = location.hash;
    timer = setTimeout(() => {
      if (location.hash === seen) history.replaceState(null, "", writeHash(store.get()) || location.pathname);
    }, delayMs);
  });
}
