"""Writes frontend/tools/snapshot-warmup.json: the graphs the renderer's startup snapshot lays out
while it is built (frontend/tools/snapshot.cjs), so the snapshot holds ELK's code compiled for
the kinds of graph a first drawing meets, not only for a three-box toy.

Each entry is an ELK input graph exactly as the viewer's layout.js hands it to elkjs for a
still picture (render.mjs's rule: collapsed as the export collapses, top to bottom), recorded
from real traces: gallery examples (module boxes, a module called twice, attention) and a
chain of 16 blocks (more than layout.js's WHOLE_HIERARCHY_UP_TO drawn nodes: laid out box by
box). They only warm the engine up: a stale file makes the first drawing slower, never
different. Run again after a change to layout.js's ELK options:

    PYTHONPATH=backend python scripts/snapshot_warmup.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch
from torch import nn

import gradtrace
from gradtrace.examples import get_example
from gradtrace.render import node_tool
from gradtrace.render.source import drawing_json

OUT = Path(__file__).resolve().parents[1] / "frontend" / "tools" / "snapshot-warmup.json"
EXAMPLES = ("two-layer-linear", "conv-net", "tiny-attention", "shared-weights-fan-in")

# Lays each trace (JSON lines on stdin) out with layout.js and an ELK that records its inputs.
_RECORD = """
import { readFileSync } from "node:fs";
import { join } from "node:path";
const frontend = process.argv[1];
const { resolveTensorData } = await import(join(frontend, "js/tensordata.js"));
const { layoutGraph } = await import(join(frontend, "js/layout.js"));
const { exportCollapsed } = await import(join(frontend, "js/export/collapse.js"));
const ELK = (await import(join(frontend, "node_modules/elkjs/lib/main.js"))).default;
const real = new ELK();
const graphs = [];
const elk = { layout: (graph) => { graphs.push(structuredClone(graph)); return real.layout(graph); } };
for (const line of readFileSync(0, "utf8").split("\\n").filter(Boolean)) {
  const trace = resolveTensorData(JSON.parse(line));
  await layoutGraph(trace, { elk, collapsed: exportCollapsed(trace, { depth: null }), showInserted: true });
}
process.stdout.write(JSON.stringify(graphs));
"""


class _Decoder(nn.Module):
    """A one-layer transformer decoder over its own memory: nested boxes, no repeats to fold."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(8, 32)
        self.layer = nn.TransformerDecoderLayer(32, 2, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        return self.head(self.layer(h, h))


def _decoder() -> gradtrace.Trace:
    torch.manual_seed(0)
    return gradtrace.trace(_Decoder(), torch.randn(2, 6, 8), loss_fn=lambda y: y.pow(2).mean())


def main() -> None:
    traces = [gradtrace.trace_spec(get_example(name)) for name in EXAMPLES] + [_decoder()]
    lines = b"\n".join(drawing_json(trace) for trace in traces)
    frontend = node_tool.frontend_dir()
    done = subprocess.run(
        [node_tool.node_binary(), "--input-type=module", "-e", _RECORD, str(frontend)],
        input=lines,
        capture_output=True,
        check=True,
    )
    graphs = json.loads(done.stdout)
    OUT.write_text(json.dumps(graphs, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(graphs)} graphs", file=sys.stderr)


if __name__ == "__main__":
    main()
