"""What a spec costs on its way from the API to a worker, per request (not collected by pytest).

Two figures per example spec, medians over interleaved rounds:

- ``handoff``: the spec handling of one trace task outside the API's own checks, in this
  process: what crosses the pipe is pickled and unpickled, then the worker parses it again
  if it was sent as a document (before) or takes the ModelSpec as it is (after).
- ``task``: one ``WorkerPool.run_trace`` round trip with a real worker (send, dry run,
  trace, answer), the request's whole worker time.

Run it on a tree before and after the change, with that tree first on PYTHONPATH:
``PYTHONPATH=backend:tests .venv/bin/python tests/perf/bench_spec_handoff.py [--rounds 15]``.
The tree's ``WorkerPool.run_trace`` says which way it hands a spec over (a document or a
ModelSpec); the script sends what it takes.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import pickle
import statistics
import time
from typing import Any

from gradtrace.examples import example_ids, get_example
from gradtrace.service.settings import Settings
from gradtrace.service.workers import WorkerPool
from gradtrace.spec import parse_spec

TAKES_DOCUMENT = "spec_doc" in inspect.signature(WorkerPool.run_trace).parameters


def task_input(doc: dict[str, Any]) -> Any:
    return doc if TAKES_DOCUMENT else parse_spec(doc)  # the API parsed it either way


def handoff(doc: dict[str, Any]) -> float:
    sent = task_input(doc)
    start = time.perf_counter()
    received = pickle.loads(pickle.dumps(sent, protocol=pickle.HIGHEST_PROTOCOL))
    if TAKES_DOCUMENT:
        parse_spec(received)
    return time.perf_counter() - start


async def main(rounds: int) -> None:
    pool = WorkerPool(Settings(workers=1, rate_per_minute=0))
    await pool.start()
    try:
        docs = {eid: get_example(eid) for eid in example_ids()}
        inputs = {eid: task_input(doc) for eid, doc in docs.items()}
        cost: dict[str, list[float]] = {eid: [] for eid in docs}
        task: dict[str, list[float]] = {eid: [] for eid in docs}
        for _ in range(rounds):
            for eid, doc in docs.items():
                cost[eid].append(handoff(doc))
                start = time.perf_counter()
                outcome = await pool.run_trace(inputs[eid])
                task[eid].append(time.perf_counter() - start)
                assert outcome.kind in ("ok", "spec_error"), (eid, outcome.payload)
        print(f"spec sent as {'a document, parsed again' if TAKES_DOCUMENT else 'a ModelSpec'}")
        print(f"{'example':34} {'handoff ms':>10} {'task ms':>8}")
        for eid in docs:
            print(
                f"{eid:34} {1e3 * statistics.median(cost[eid]):10.3f} {1e3 * statistics.median(task[eid]):8.1f}"
            )
        all_cost = [1e3 * statistics.median(c) for c in cost.values()]
        all_task = [1e3 * statistics.median(t) for t in task.values()]
        print(f"{'mean over examples':34} {statistics.mean(all_cost):10.3f} {statistics.mean(all_task):8.1f}")
    finally:
        await pool.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    asyncio.run(main(parser.parse_args().rounds))
