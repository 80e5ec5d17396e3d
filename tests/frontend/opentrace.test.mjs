// Opening a trace.json from disk: every golden trace is accepted as is; what is not a trace the
// viewer can draw is refused with one sentence saying why, before anything on screen changes.
import { test } from "node:test";
import assert from "node:assert/strict";
import { checkTrace, parseTrace } from "../../frontend/js/tracedoc.js";
import { readTraceFile, MAX_FILE_BYTES } from "../../frontend/js/opentrace.js";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const GOLDEN_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "engine", "golden");
/** The golden traces as the files on disk hold them: what a user would open. */
const goldenFiles = () => readdirSync(GOLDEN_DIR).filter((f) => f.endsWith(".json")).map((f) => [f, readFileSync(join(GOLDEN_DIR, f), "utf8")]);

test("every golden trace opens, its tensor numbers resolved", () => {
  const files = goldenFiles();
  assert.ok(files.length >= 3);
  for (const [name, text] of files) {
    assert.equal(checkTrace(JSON.parse(text)), "", name);
    const opened = parseTrace(text);
    assert.equal(opened.graph.nodes.length, JSON.parse(text).graph.nodes.length, name);
    for (const n of opened.graph.nodes) if (n.value && n.value.data != null) assert.equal(typeof n.value.data, "string", name);
  }
});

test("what is not a drawable trace is refused with the reason", () => {
  const doc = JSON.parse(goldenFiles()[0][1]);
  const cases = [
    ["{not json", /^it is not JSON \(/],
    ["[1, 2]", /not an object/],
    [JSON.stringify({ spec_version: 1, forward: ["y = x"] }), /a model spec, not a trace: paste it into the editor/],
    [JSON.stringify({ title: "x" }), /no schema_version/],
    [JSON.stringify({ ...doc, schema_version: 9 }), /schema_version 9; this viewer reads 2 or 3/],
    [JSON.stringify({ ...doc, events: null, passes: undefined }), /not a complete gradtrace trace \(no events, passes\)/],
  ];
  for (const [text, why] of cases) assert.throws(() => parseTrace(text), { message: why }, text.slice(0, 40));
});

test("a file too big to hold is refused before it is read", async () => {
  const huge = { size: MAX_FILE_BYTES + 1, name: "big.json", text: () => assert.fail("read") };
  await assert.rejects(readTraceFile(huge), /more than this viewer opens/);
});

test("the one way to open a file: a run's to openRun, a trace's to open, a bad one refused, by the picker or a drop", async () => {
  const { bindOpenTrace } = await import("../../frontend/js/opentrace.js");
  const { RUN_FORMAT } = await import("../../frontend/js/tracedoc.js");
  const button = new EventTarget();
  const input = new EventTarget();
  const target = new EventTarget();
  target.classList = { toggle() {} };
  const seen = [];
  bindOpenTrace({
    button, input, target,
    open: (trace, name, file) => seen.push(["trace", name, trace.graph.nodes.length, file.name]),
    openRun: (text, name) => seen.push(["run", name, JSON.parse(text).format]),
    refuse: (name, why) => seen.push(["refused", name, why]),
  });
  const settled = () => new Promise((resolve) => setTimeout(resolve, 20));
  const choose = async (file) => {
    input.files = [file];
    input.dispatchEvent(new Event("change"));
    await settled();
  };
  const drop = async (file) => {
    const e = new Event("drop", { cancelable: true });
    e.dataTransfer = { files: [file] };
    target.dispatchEvent(e);
    await settled();
  };
  const [goldenName, goldenText] = goldenFiles()[0];
  await choose(new File([JSON.stringify({ format: RUN_FORMAT, steps: [] })], "mlp.run.json"));
  await drop(new File([goldenText], goldenName));
  await drop(new File(["{not json"], "bad.json"));
  const huge = new File(["{}"], "huge.json");
  Object.defineProperty(huge, "size", { value: MAX_FILE_BYTES + 1 });
  await choose(huge);
  assert.deepEqual(seen.slice(0, 2), [
    ["run", "mlp.run.json", RUN_FORMAT],
    ["trace", goldenName, JSON.parse(goldenText).graph.nodes.length, goldenName],
  ]);
  assert.equal(seen[2][0], "refused");
  assert.match(seen[2][2], /^it is not JSON/);
  assert.deepEqual(seen[3].slice(0, 2), ["refused", "huge.json"]);
  assert.match(seen[3][2], /more than this viewer opens/);
});
