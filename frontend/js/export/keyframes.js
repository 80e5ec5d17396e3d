// CSS @keyframes for the animated SVG. Every animated element shares one loop length; an
// element's life (on/off over time) becomes one keyframes rule, deduplicated by its body, so
// nodes that appear together share a rule and the file stays small. Pure.

const LOOKS = {
  // Forward build: a short fade-and-grow (transform-origin is the node's own centre).
  grow: { off: "opacity:0;transform:scale(.6)", on: "opacity:1;transform:scale(1)", ramp: 0.25 },
  fade: { off: "opacity:0", on: "opacity:1", ramp: 0.15 },
};

const pct = (t, duration) => Math.round((Math.min(Math.max(t, 0), duration) / duration) * 100000) / 1000;

/** Stretch each "on" window to at least `minOn` seconds (a 0.1 s gradient pulse is invisible). */
export function stretchOn(changes, minOn) {
  if (!minOn) return changes;
  const out = [];
  for (let i = 0; i < changes.length; i++) {
    const c = changes[i];
    if (!c.value && i > 0 && changes[i - 1].value) {
      const onAt = out[out.length - 1].t;
      const next = changes[i + 1];
      const t = Math.max(c.t, onAt + minOn);
      out.push({ t: next ? Math.min(t, next.t - 0.01) : t, value: false });
    } else out.push(c);
  }
  return out;
}

/** A registry of keyframes rules for one loop of `duration` seconds. */
export function createKeyframes(duration) {
  const byBody = new Map();
  const counts = new Map();

  /**
   * The rule name for an on/off life [{t, value}] (first entry at t = 0) in look "grow"|"fade";
   * `phase` ("fwd" | "bwd" | "scene") names the rule, so a reader sees which pass it plays.
   */
  function life(changes, { look = "fade", minOn = 0, phase = "fwd" } = {}) {
    const L = LOOKS[look];
    const steps = stretchOn(changes, minOn);
    const frames = [[0, steps[0].value]];
    for (let i = 1; i < steps.length; i++) {
      const { t, value } = steps[i];
      const next = steps[i + 1];
      const end = Math.min(t + L.ramp, next ? next.t : duration);
      frames.push([pct(t, duration), !value], [pct(end, duration), value]);
    }
    frames.push([100, steps[steps.length - 1].value]);
    // Keyframe offsets must not go backwards; equal ones are fine (a jump).
    let last = 0;
    const body = frames
      .map(([p, v]) => {
        last = Math.max(last, p);
        return `${last}%{${v ? L.on : L.off}}`;
      })
      .join("");
    return named(body, phase);
  }

  /** A rule from explicit [[seconds, "css"]] stops (the scene's fade in / fade out). */
  function stops(list, phase = "scene") {
    return named(list.map(([t, css]) => `${pct(t, duration)}%{${css}}`).join(""), phase);
  }

  function named(body, phase) {
    const key = `${phase}|${body}`;
    if (!byBody.has(key)) {
      const k = counts.get(phase) || 0;
      counts.set(phase, k + 1);
      byBody.set(key, { name: `gt-${phase}-${k}`, body });
    }
    return byBody.get(key).name;
  }

  function css() {
    let out = "";
    for (const { name, body } of byBody.values()) out += `@keyframes ${name}{${body}}\n`;
    return out;
  }

  return { life, stops, css, count: () => byBody.size };
}
