// What a program run printed, as the panel under the editor shows it (program_output.js), and
// the translator's refusals of a program as the editor lists them (pytorch_tab.js).
import test from "node:test";
import assert from "node:assert/strict";
import { outputParts, outputSummary } from "../../frontend/js/program_output.js";
import { sourceProblems } from "../../frontend/js/pytorch_tab.js";

const RAN = { trace: null, stdout: "Using cpu device\nloss 2.3\n", stderr: "", stdout_truncated: false, stderr_truncated: false, exception: null, seconds: 0.41, id: "x" };

test("stdout comes as printed, the summary counts its lines and the run's seconds", () => {
  assert.deepEqual(outputParts(RAN), [{ kind: "stdout", text: "Using cpu device\nloss 2.3" }]);
  assert.equal(outputSummary(RAN), "Output: 2 printed lines in 0.41 s");
  assert.equal(outputSummary({ ...RAN, stdout: "one" }), "Output: 1 printed line in 0.41 s");
  assert.equal(outputSummary({ ...RAN, stdout: "" }), "Output: nothing printed in 0.41 s");
});

test("stderr, a cut stream and the exception each get their part, the exception with its line", () => {
  const raised = { ...RAN, stderr: "UserWarning: x\n", stdout_truncated: true, exception: { type: "RuntimeError", message: "mat1 and mat2 shapes cannot be multiplied (4x3 and 4x2)", line: 12 } };
  assert.deepEqual(
    outputParts(raised).map((p) => p.kind),
    ["stdout", "note", "stderr", "exception"],
  );
  assert.equal(outputParts(raised).at(-1).text, "Line 12: RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x3 and 4x2)");
  assert.match(outputSummary(raised), /, raised RuntimeError$/);
  assert.equal(outputParts({ ...RAN, stdout: "", exception: { type: "KeyboardInterrupt", message: "", line: null } })[0].text, "KeyboardInterrupt: ");
});

test("every refusal the translator lists comes out at its line and column, its place cut from the message", () => {
  const err = {
    message: "line 7, column 14: tensor method .softplus() is not supported",
    errors: [
      { line: 7, column: 14, message: "line 7, column 14: tensor method .softplus() is not supported", path: "/python" },
      { line: 8, column: 10, message: "line 8, column 10: tensor method .cumsum() is not supported", path: "/python" },
      { line: null, column: null, message: "nothing runs backward", path: "/python" },
    ],
  };
  assert.deepEqual(sourceProblems(err), [
    { line: 7, column: 14, message: "tensor method .softplus() is not supported" },
    { line: 8, column: 10, message: "tensor method .cumsum() is not supported" },
    { line: null, column: null, message: "nothing runs backward" },
  ]);
  assert.deepEqual(sourceProblems({ message: "line 2, column 1: import of 'os'", errors: [], line: 2, column: 1 }), [{ line: 2, column: 1, message: "import of 'os'" }]);
});
