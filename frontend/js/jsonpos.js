// Where a JSON Pointer ("/forward/2") sits in a JSON text: its start/end offsets and line, so the
// editor can put the API's error at the line it names. Pure; a small tolerant scanner.

/** Map every JSON Pointer in `text` to {start, end, line} (1-based line); {} if unparsable. */
export function pointerLocations(text) {
  return scan(text).out;
}

function scan(text) {
  const out = {};
  let i = 0;
  const ws = () => {
    while (i < text.length && /\s/.test(text[i])) i++;
  };
  const str = () => {
    const start = i++;
    while (i < text.length && text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++;
    return JSON.parse(text.slice(start, i));
  };
  const esc = (k) => String(k).replace(/~/g, "~0").replace(/\//g, "~1");
  function value(path) {
    ws();
    const start = i;
    const c = text[i];
    if (c === "{") {
      i++;
      ws();
      while (text[i] !== "}") {
        ws();
        const key = str();
        ws();
        i++; // :
        value(`${path}/${esc(key)}`);
        ws();
        if (text[i] === ",") i++;
        ws();
        if (i >= text.length) throw new Error("eof");
      }
      i++;
    } else if (c === "[") {
      i++;
      ws();
      let k = 0;
      while (text[i] !== "]") {
        value(`${path}/${k++}`);
        ws();
        if (text[i] === ",") i++;
        ws();
        if (i >= text.length) throw new Error("eof");
      }
      i++;
    } else if (c === '"') str();
    else {
      while (i < text.length && /[^\s,\]}]/.test(text[i])) i++;
      if (i === start) throw new Error("bad token");
    }
    out[path] = { start, end: i, line: lineOf(text, start) };
  }
  try {
    value("");
  } catch {
    return { out, failedAt: Math.min(i, text.length) };
  }
  return { out, failedAt: null };
}

/** 1-based line of an offset. */
export function lineOf(text, offset) {
  let line = 1;
  for (let k = 0; k < offset && k < text.length; k++) if (text[k] === "\n") line++;
  return line;
}

/** The location of `pointer`, or of its nearest existing parent ("/a/b/9" -> "/a/b"). */
export function locate(text, pointer) {
  const locs = pointerLocations(text);
  let p = pointer || "";
  while (true) {
    if (locs[p]) return { pointer: p, ...locs[p] };
    if (!p) return null;
    p = p.slice(0, p.lastIndexOf("/"));
  }
}

/** Line of a JSON syntax error: from the engine's message when it says, else from our scan. */
export function syntaxErrorLine(text, err) {
  const m = /line (\d+)/.exec(err?.message || "");
  if (m) return Number(m[1]);
  const p = /position (\d+)/.exec(err?.message || "");
  if (p) return lineOf(text, Number(p[1]));
  const { failedAt } = scan(text);
  return failedAt === null ? 1 : lineOf(text, failedAt);
}
