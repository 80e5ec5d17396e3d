"""Load without faults: 4 and 32 clients, heavy (~5 MB traces) and light specs.

Promises: no 5xx but load shedding (503 ``overloaded`` with Retry-After, which the clients
honour; the clients are one address, so 32 of them at once are also refused 429
``too_many_in_flight`` past their share of the API's CPU lane), no request longer than 30 s, and the API process's memory bounded: traces are cached
in a byte budget (64 MB by default), so RSS levels off however many distinct traces pass.
"""

from __future__ import annotations

import threading
import time

import pytest
from reliability_helpers import (
    FULL,
    MAX_REQUEST_S,
    finish,
    heavy_spec,
    light_spec,
    rss_mb,
    scaled,
    start_under_load,
)

pytestmark = pytest.mark.slow

CACHE_MB = 64  # the default GRADTRACE_CACHE_BYTES
# What the API process may hold beyond its start and the cache: responses in flight (up to
# workers + queue_limit traces of ~5 MB, each read from a pipe and written to a socket) and the
# allocator's slack.
TRANSIENT_MB = 200

SPECS = {"heavy": heavy_spec, "light": light_spec}
CASES = [(4, "heavy"), (4, "light"), (32, "heavy"), (32, "light")] if FULL else [(4, "heavy"), (32, "light")]


@pytest.mark.parametrize(("clients", "weight"), CASES)
def test_load(server_factory, clients: int, weight: str) -> None:  # noqa: ANN001
    server, load = start_under_load(server_factory, clients, SPECS[weight])
    samples: list[float] = []
    done = threading.Event()

    def sample_rss() -> None:
        while not done.wait(1.0):
            samples.append(rss_mb(server.proc.pid))

    sampler = threading.Thread(target=sample_rss, daemon=True)
    sampler.start()
    duration = scaled(10, 40)
    time.sleep(duration)
    load.stop()
    done.set()
    sampler.join()
    figures = finish(
        f"load_{clients}_{weight}",
        server,
        load,
        spec=weight,
        duration_s=duration,
        api_rss_mb_max=max(samples, default=load.api_rss_mb_before),
        api_rss_mb_samples=samples,
    )
    load_ = figures["load"]
    assert load_["ok"] > 0
    assert load_["failed"] == 0, load_  # only shedding (503 overloaded), nothing else
    assert set(load_["statuses"]) <= {"200", "429", "503"}, load_
    assert load_["longest_s"] <= MAX_REQUEST_S, load_
    assert figures["api_rss_mb_max"] <= load.api_rss_mb_before + CACHE_MB + TRANSIENT_MB, figures
    assert figures["processes_left_after_stop"] == 0
