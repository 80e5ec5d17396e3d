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
from server_process import ServerProcess, process_group  # noqa: E402

TIMEOUT = 300


def big_spec() -> dict:
    """Elementwise work on a 1000x800 input, inside every spec limit: a 17 MB trace, twice the
    memory cache's 8 MB entry limit."""
    return {
        "spec_version": 1,
        "title": "big",
        "inputs": {"x": {"shape": [1000, 800], "init": "randn", "requires_grad": True}},
        "forward": ["a = tanh(x)", "b = a * a", "loss = b.sum()"],
    }


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def worker_cpu_seconds(api_pid: int) -> float:
    """CPU seconds of the server's other processes: the workers and the forkserver (processes
    that exited, e.g. recycled workers, are not counted: none are in these few requests)."""
    total = 0.0
    for pid in process_group(api_pid):
        if pid != api_pid:
            try:
                total += cpu_seconds(pid)
            except OSError:
                pass
    return total


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
            for label in ("compare (traces cached)", *[f"the same compare again ({i})" for i in (1, 2, 3)]):
                before, workers, started = cpu_seconds(pid), worker_cpu_seconds(pid), time.monotonic()
                r = httpx.post(base + "/api/v1/compare", json={"a": a, "b": b}, timeout=TIMEOUT)
                assert r.status_code == 200, r.text
                print(
                    f"{label}: API CPU {cpu_seconds(pid) - before:.2f} s, "
                    f"worker CPU {worker_cpu_seconds(pid) - workers:.2f} s, "
                    f"wall {time.monotonic() - started:.2f} s, {len(r.content) / 1e3:.0f} KB"
                )
            stored = httpx.post(base + "/api/v1/specs", json=big_spec(), timeout=TIMEOUT)
            assert stored.status_code in (200, 201), stored.text
            sid = stored.json()["id"]
            for i in range(3):
                workers, started = worker_cpu_seconds(pid), time.monotonic()
                r = httpx.get(f"{base}/api/v1/specs/{sid}/trace", timeout=TIMEOUT)
                assert r.status_code == 200, r.text
                print(
                    f"big permalink trace GET {i + 1}: {time.monotonic() - started:.2f} s, "
                    f"worker CPU {worker_cpu_seconds(pid) - workers:.2f} s, "
                    f"{len(r.content) / 1e6:.1f} MB, X-Cache {r.headers.get('x-cache')}"
                )
        finally:
            server.stop()


if __name__ == "__main__":
    main()
