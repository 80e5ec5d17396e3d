import { test } from "node:test";
import assert from "node:assert/strict";
import { liveBytesAt, memoryPath, memoryOf, nodeMemory, nodeMemoryState } from "../../frontend/js/memory.js";
import { formatBytes } from "../../frontend/js/format.js";
import { goldenTrace } from "./fixtures.mjs";


test("live bytes follow the trace's timeline: held after retain_graph, freed by the last backward", () => {
  const trace = goldenTrace("spec_seed001_retain_graph");
  const memory = memoryOf(trace);
  assert.ok(memory.peak_bytes > 0);
  const backwards = trace.passes.filter((p) => p.phase === "backward");
  assert.equal(liveBytesAt(memory, -1), 0);
  assert.equal(liveBytesAt(memory, backwards[0].first_seq - 1), memory.peak_bytes); // after the forward
  assert.equal(liveBytesAt(memory, backwards[0].last_seq), memory.peak_bytes); // retain_graph=True
  assert.equal(liveBytesAt(memory, backwards.at(-1).last_seq), 0); // the last backward freed it
  for (const p of memory.timeline) assert.equal(liveBytesAt(memory, p.seq), p.live_bytes);
});

test("node memory and bytes as a person reads them", () => {
  const trace = goldenTrace("spec_seed001_retain_graph");
  const saved = memoryOf(trace).nodes[0];
  assert.equal(nodeMemory(trace, saved.node).saved_bytes, saved.saved_bytes);
  assert.equal(nodeMemory(trace, "no-such-node"), null);
  assert.equal(formatBytes(4), "4 B");
  assert.equal(formatBytes(1536), "1.50 KiB");
  assert.equal(formatBytes(3 * 1024 * 1024), "3.00 MiB");
  assert.equal(memoryOf({}).peak_bytes, 0); // an older trace without the analysis
});

test("the plot is a closed step path inside its box", () => {
  const trace = goldenTrace("spec_seed001_retain_graph");
  const d = memoryPath(memoryOf(trace), trace.events.length - 1, 1000, 28);
  assert.match(d, /^M0,28 .* H1000 V28 Z$/);
  const ys = [...d.matchAll(/V([\d.]+)/g)].map((m) => Number(m[1]));
  assert.ok(ys.every((y) => y >= 0 && y <= 28));
  assert.ok(ys.some((y) => y <= 2)); // the peak reaches the top
});

test("a node's saved bytes over the timeline: saved, held through retain_graph, freed by a later backward", () => {
  const trace = goldenTrace("spec_seed001_retain_graph");
  const [saved] = memoryOf(trace).nodes;
  const [forward, first, second] = trace.passes;
  const at = (step) => nodeMemoryState(trace, saved.node, step);
  assert.equal(at(saved.created_seq - 1).now, "not saved yet");
  assert.equal(at(forward.last_seq).now, "held");
  assert.equal(at(first.last_seq).now, "held"); // backward #1 ran with retain_graph=True
  assert.equal(at(second.last_seq).now, "freed");
  assert.equal(at(second.last_seq).savedAt, `#${saved.created_seq} (forward #1)`);
  assert.equal(at(0).freedAt, `#${saved.released_seq} (${second.label})`);
  assert.equal(at(0).bytes, saved.saved_bytes);
  assert.equal(nodeMemoryState(trace, "no-such-node", 0), null);
});
