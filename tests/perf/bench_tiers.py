"""Issue 25, items 4 and 5, measured over a real server (a script, not a test):

- the API process's CPU seconds for ``POST /compare`` of two ~5 MB traces that are already
  cached (first compare, then the same compare again);
- the time of each of three GETs of a big permalink's trace (larger than the memory cache's
  per-entry limit).

Run: ``PYTHONPATH=backend python tests/perf/bench_tiers.py`` (prints one line per figure).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reliability"))

from reliability_helpers import heavy_spec  # noqa: E402
from server_process import ServerProcess  # noqa: E402

TIMEOUT = 300


def big_spec() -> dict:
    """Three wide layers on a 96x384 batch: a trace above the 8 MB memory-cache entry limit."""
    return {
        "spec_version": 1,
        "title": "big",
        "modules": {
            "l1": {"type": "Linear", "in_features": 384, "out_features": 768},
            "l2": {"type": "Linear", "in_features": 768, "out_features": 768},
            "l3": {"type": "Linear", "in_features": 768, "out_features": 384},
        },
        "inputs": {"x": {"shape": [96, 384], "init": "randn", "requires_grad": True}},
        "forward": ["h = tanh(l1(x))", "g = tanh(l2(h))", "y = l3(g)", "loss = (y * y).mean()"],
    }


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(Path(tmp), env={"GRADTRACE_RATE_PER_MINUTE": "0", "GRADTRACE_WORKERS": "2"})
        try:
            server.wait_ready()
            base, pid = server.url, server.proc.pid
            a, b = heavy_spec(1), heavy_spec(2)
            for spec in (a, b):
                r = httpx.post(base + "/api/v1/trace", json=spec, timeout=TIMEOUT)
                print(f"heavy trace: {len(r.content) / 1e6:.1f} MB")
            for label in ("compare (traces cached)", "the same compare again"):
                before, started = cpu_seconds(pid), time.monotonic()
                r = httpx.post(base + "/api/v1/compare", json={"a": a, "b": b}, timeout=TIMEOUT)
                assert r.status_code == 200, r.text
                print(
                    f"{label}: API CPU {cpu_seconds(pid) - before:.2f} s, "
                    f"wall {time.monotonic() - started:.2f} s, {len(r.content) / 1e3:.0f} KB"
                )
            sid = httpx.post(base + "/api/v1/specs", json=big_spec(), timeout=TIMEOUT).json()["id"]
            for i in range(3):
                started = time.monotonic()
                r = httpx.get(f"{base}/api/v1/specs/{sid}/trace", timeout=TIMEOUT)
                assert r.status_code == 200, r.text
                print(
                    f"big permalink trace GET {i + 1}: {time.monotonic() - started:.2f} s, "
                    f"{len(r.content) / 1e6:.1f} MB, X-Cache {r.headers.get('x-cache')}"
                )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
