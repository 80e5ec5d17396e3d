"""Service benchmark (not a test): latency of cold and cached traces, and worker kills under load.

Run: .venv/bin/python tests/perf/bench_service.py   (~1 minute; loopback only; bounded counts)
Starts its own server (temp SQLite, default workers), prints one line per measurement.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "api"))
from server_process import ServerProcess  # noqa: E402
from specs import seed_002  # noqa: E402


def ms(values: list[float]) -> str:
    values = sorted(values)
    return f"median {statistics.median(values) * 1000:.0f} ms, p90 {values[int(len(values) * 0.9) - 1] * 1000:.0f} ms"


def main() -> None:
    server = ServerProcess(Path(tempfile.mkdtemp(prefix="bench-")), env={"GRADTRACE_RATE_PER_MINUTE": "0"})
    try:
        t0 = time.monotonic()
        server.wait_ready()
        print(f"server ready (workers warm) in {time.monotonic() - t0:.1f} s")
        client = httpx.Client(base_url=server.url, timeout=float(os.environ.get("BENCH_TIMEOUT", "120")))

        cold, hot = [], []
        for i in range(10):
            spec = seed_002(title=f"bench {i}")
            t = time.monotonic()
            assert client.post("/api/v1/trace", json=spec).status_code == 200
            cold.append(time.monotonic() - t)
            t = time.monotonic()
            r = client.post("/api/v1/trace", json=spec)
            assert r.headers["x-cache"] == "hit"
            hot.append(time.monotonic() - t)
        print(f"seed-002 trace, cold (worker): {ms(cold)}; cached: {ms(hot)}; {len(r.content)} bytes")

        # Throughput: 40 distinct traces, 4 client threads.
        t = time.monotonic()
        with ThreadPoolExecutor(4) as ex:
            codes = list(
                ex.map(
                    lambda i: client.post("/api/v1/trace", json=seed_002(title=f"tp {i}")).status_code,
                    range(40),
                )
            )
        print(
            f"40 distinct traces at concurrency 4: {time.monotonic() - t:.1f} s, statuses {collections.Counter(codes)}"
        )

        # Kills under load: 100 distinct traces at concurrency 4 while up to 8 workers are SIGKILLed.
        stop = threading.Event()
        kills = []

        def killer() -> None:
            while not stop.is_set() and len(kills) < 8:
                time.sleep(0.4)
                pids = server.worker_pids()
                if pids:
                    victim = random.choice(pids)
                    try:
                        os.kill(victim, signal.SIGKILL)
                        kills.append(victim)
                    except ProcessLookupError:
                        pass

        k = threading.Thread(target=killer)
        k.start()
        with ThreadPoolExecutor(4) as ex:
            results = list(
                ex.map(lambda i: client.post("/api/v1/trace", json=seed_002(title=f"kill {i}")), range(100))
            )
        stop.set()
        k.join()
        statuses = collections.Counter(r.status_code for r in results)
        codes = collections.Counter(r.json()["error"]["code"] for r in results if r.status_code != 200)
        after = client.post("/api/v1/trace", json=seed_002(title="after the kills")).status_code
        print(
            f"{len(kills)} worker kills during 100 traces: statuses {dict(statuses)}, errors {dict(codes)}; next trace {after}"
        )
    finally:
        server.stop()
        if os.environ.get("BENCH_LOG"):
            print(
                "\n".join(
                    line for line in server.log_text().splitlines() if "gradtrace." in line or "Error" in line
                )
            )


if __name__ == "__main__":
    main()
