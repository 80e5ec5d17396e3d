"""POST /run's jail, timed in-process (a script, not a test): how long a template takes to be
ready, and what a run costs beyond the program itself (fork, confinement, seccomp, teardown).

Run: ``PYTHONPATH=backend python tests/perf/bench_runner.py [runs]`` (prints one line per figure).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time

from gradtrace.service.jail_pool import JailPool
from gradtrace.service.settings import Settings

QUICKSTART_STEP = """
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 64), nn.ReLU(), nn.Linear(64, 10))
loss = nn.CrossEntropyLoss()(model(torch.rand(8, 1, 28, 28)), torch.randint(0, 10, (8,)))
loss.backward()
"""


async def main(runs: int) -> None:
    pool = JailPool(Settings())
    started = time.monotonic()
    if not await pool.start():
        sys.exit(f"runner unavailable: {pool.reason}")
    print(f"template ready (bubblewrap, torch imported, probe run): {time.monotonic() - started:.2f} s")
    overhead, trip = [], []
    try:
        for n in range(runs):
            t = time.monotonic()
            answer = await pool.run(f"# {n}\npass\n")
            trip.append(time.monotonic() - t)
            overhead.append(answer.doc["seconds"] - json.loads(answer.doc["result"])["program_seconds"])
        print(
            f"an empty program, {runs} runs: round trip median {statistics.median(trip):.3f} s, "
            f"max {max(trip):.3f} s; beyond the program median {statistics.median(overhead):.3f} s"
        )
        t = time.monotonic()
        answer = await pool.run(QUICKSTART_STEP)
        print(
            f"one recorded Quickstart step (MLP 784-64-10, batch 8): {time.monotonic() - t:.3f} s ({answer.exit})"
        )
    finally:
        await pool.close()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
