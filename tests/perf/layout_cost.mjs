#!/usr/bin/env node
// Layout cost in-process (Node, the same elkjs the viewer's worker runs): layoutGraph with the
// whole hierarchy in one ELK call against box by box (the default above WHOLE_HIERARCHY_UP_TO
// drawn nodes), interleaved round by round, every module expanded. CPU time of this process
// (steadier than wall time on a shared machine), medians; the first round is JIT warm-up, as
// in a fresh browser worker, and is reported apart.
//
//   node tests/perf/layout_cost.mjs [--rounds 5] trace.json ...
// (a trace: `gradtrace.trace(model, x, loss).save("trace.json")`). Not run by the test suite.

import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import ELK from "../../frontend/node_modules/elkjs/lib/main.js";
import { layoutGraph } from "../../frontend/js/layout.js";

const { values, positionals } = parseArgs({ options: { rounds: { type: "string", default: "5" } }, allowPositionals: true });
const rounds = Number(values.rounds);
const elk = new ELK();
const WAYS = { whole: Infinity, "box by box": 0 };

async function cpuMs(fn) {
  const start = process.cpuUsage();
  const out = await fn();
  const used = process.cpuUsage(start);
  return [(used.user + used.system) / 1000, out];
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

for (const file of positionals) {
  const trace = JSON.parse(readFileSync(file, "utf8"));
  const ms = Object.fromEntries(Object.keys(WAYS).map((w) => [w, []]));
  const size = {};
  for (let r = 0; r < rounds; r++) {
    for (const [way, wholeUpTo] of Object.entries(WAYS)) {
      const [t, layout] = await cpuMs(() => layoutGraph(trace, { elk, wholeUpTo }));
      ms[way].push(t);
      size[way] = `${Math.round(layout.width)} x ${Math.round(layout.height)} px`;
    }
  }
  const line = Object.keys(WAYS).map((w) => `${w} ${median(ms[w].slice(1)).toFixed(0)} ms (first ${ms[w][0].toFixed(0)}; ${size[w]})`);
  console.log(`${file} (${trace.graph.nodes.length} nodes): ${line.join(" | ")}`);
}
