"""What the reliability scenarios share: load generators, fault timing, what users saw.

Every scenario runs a real ``gradtrace serve`` (``server_factory``), puts load on it from client
threads, injects one kind of fault, and records what the clients saw: statuses, the longest
request, seconds until the pool was back to full capacity, the API process's RSS, and the
processes left after a graceful stop. ``GRADTRACE_RELIABILITY=full`` (``make reliability``)
runs the durations of RELIABILITY.md; by default each scenario runs a short, bounded version
(it is part of ``make test``). Figures go to ``var/reliability/<scenario>.json``.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from server_process import REPO, ServerProcess, process_group

FULL = os.environ.get("GRADTRACE_RELIABILITY", "") == "full"
RESULTS_DIR = REPO / "var" / "reliability"
# The promises of issue 10, checked by every scenario.
MAX_REQUEST_S = 30.0
MAX_HEAL_S = 3.0
# 503s that ask the client to come back (load shedding, a restarting store): a client honours
# Retry-After; they are counted apart from failures.
SHED_CODES = {"overloaded"}

# A server for load: two workers (the machine's cores), no rate limit (one client address).
SERVER_ENV = {"GRADTRACE_WORKERS": "2", "GRADTRACE_RATE_PER_MINUTE": "0"}


def scaled(short: float, full: float) -> float:
    return full if FULL else short


def light_spec(n: int) -> dict[str, Any]:
    """A tiny trace (~2 KB, a few ms); ``n`` makes each one a cache miss."""
    return {
        "spec_version": 1,
        "title": f"light {n}",
        "inputs": {"x": {"value": [1.5, 2.0], "requires_grad": True}},
        "forward": ["y = tanh(x) * x", "loss = y.sum()"],
    }


def heavy_spec(n: int) -> dict[str, Any]:
    """A two-layer MLP on a 64x256 batch: a ~5 MB trace, ~1.5 s of worker time."""
    return {
        "spec_version": 1,
        "title": f"heavy {n}",
        "seed": n,
        "modules": {
            "l1": {"type": "Linear", "in_features": 256, "out_features": 512},
            "l2": {"type": "Linear", "in_features": 512, "out_features": 256},
        },
        "inputs": {"x": {"shape": [64, 256], "init": "randn", "requires_grad": True}},
        "forward": ["h = tanh(l1(x))", "y = l2(h)", "loss = (y * y).mean()"],
    }


@dataclass
class Outcome:
    started: float  # monotonic
    elapsed: float
    status: int  # 0: the connection failed
    code: str | None  # the envelope's error code


@dataclass
class Load:
    """``clients`` threads posting ``spec_of(n)`` to ``path`` back to back until ``stop()``."""

    url: str
    clients: int
    spec_of: Callable[[int], dict[str, Any]]
    path: str = "/api/v1/trace"
    api_rss_mb_before: float = 0.0  # the API process before the clients started
    # each client its own address (X-Real-IP, for a server that trusts its proxy): distinct users,
    # each with its own share of the rate and of worker time; else they are one client
    own_addresses: bool = False
    outcomes: list[Outcome] = field(default_factory=list)
    accepted: list[tuple[dict[str, Any], httpx.Response]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _counter: Any = field(default_factory=lambda: iter(range(10**9)))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Load:
        for index in range(self.clients):
            thread = threading.Thread(target=self._client, args=(index,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> list[Outcome]:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=90)
        return self.outcomes

    def _client(self, index: int) -> None:
        headers = {"x-real-ip": f"10.0.0.{index + 1}"} if self.own_addresses else {}
        with httpx.Client(base_url=self.url, timeout=90, headers=headers) as client:
            while not self._stop.is_set():
                with self._lock:
                    spec = self.spec_of(next(self._counter))
                started = time.monotonic()
                try:
                    r = client.post(self.path, json=spec)
                    code = r.json().get("error", {}).get("code") if r.status_code >= 400 else None
                    outcome = Outcome(started, time.monotonic() - started, r.status_code, code)
                except (httpx.HTTPError, ValueError) as exc:
                    r = None
                    outcome = Outcome(started, time.monotonic() - started, 0, type(exc).__name__)
                with self._lock:
                    self.outcomes.append(outcome)
                    if r is not None and r.status_code < 300:
                        self.accepted.append((spec, r))
                if r is not None and r.status_code in (429, 503):
                    # A well-behaved client: back off as told (capped to keep scenarios short).
                    self._stop.wait(min(float(r.headers.get("retry-after", "1")), 2.0))


def summary(outcomes: list[Outcome]) -> dict[str, Any]:
    statuses = Counter(o.status for o in outcomes)
    failures = Counter(o.code for o in outcomes if o.status >= 500 and o.code not in SHED_CODES)
    failures.update(f"connection:{o.code}" for o in outcomes if o.status == 0)
    times = sorted(o.elapsed for o in outcomes) or [0.0]
    span = (
        (max(o.started + o.elapsed for o in outcomes) - min(o.started for o in outcomes)) if outcomes else 0
    )
    return {
        "requests": len(outcomes),
        "ok": sum(n for s, n in statuses.items() if 200 <= s < 300),
        "statuses": {str(s): n for s, n in sorted(statuses.items())},
        "shed_503": sum(1 for o in outcomes if o.code in SHED_CODES),
        "failed": sum(failures.values()),
        "failed_by_code": dict(failures),
        "longest_s": round(times[-1], 2),
        "median_s": round(statistics.median(times), 3),
        "p95_s": round(times[int(0.95 * (len(times) - 1))], 2),
        "requests_per_s": round(len(outcomes) / span, 1) if span else 0.0,
    }


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def readyz(server: ServerProcess) -> dict[str, Any]:
    try:
        return httpx.get(server.url + "/readyz", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return {}


def seconds_until_full_capacity(server: ServerProcess, gone: set[int], timeout: float = 60.0) -> float:
    """After killing ``gone``: seconds until as many live workers as configured, none of them in ``gone``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        pids = set(server.worker_pids())
        ready = readyz(server)
        if (
            not pids & gone
            and ready.get("workers_alive") == ready.get("workers")
            and len(pids) >= ready.get("workers", 1)
        ):
            return round(time.monotonic() - started, 2)
        time.sleep(0.02)
    return float("inf")


def wait_for_workers(server: ServerProcess, count: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while readyz(server).get("workers_alive") != count:
        assert time.monotonic() < deadline, "the workers never all started"
        time.sleep(0.1)


def stop_gracefully(server: ServerProcess) -> list[int]:
    """SIGTERM to the API process alone (as docker or systemd do); the processes of its group left."""
    os.kill(server.proc.pid, signal.SIGTERM)
    server.proc.wait(timeout=60)
    deadline = time.monotonic() + 5
    while process_group(server.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return process_group(server.proc.pid)


def record(scenario: str, figures: dict[str, Any]) -> dict[str, Any]:
    figures = {"scenario": scenario, "full": FULL, **figures}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{scenario}.json").write_text(json.dumps(figures, indent=2) + "\n")
    print(json.dumps(figures))
    return figures


def start_under_load(
    server_factory: Callable[..., ServerProcess],
    clients: int,
    spec_of: Callable[[int], dict[str, Any]],
    env: dict[str, str] | None = None,
    path: str = "/api/v1/trace",
    own_addresses: bool = False,
) -> tuple[ServerProcess, Load]:
    """A server with its workers all up, and ``clients`` clients posting to it (each from an
    address of its own with ``own_addresses``: see Load)."""
    server = server_factory(env=env or SERVER_ENV)
    wait_for_workers(server, int((env or SERVER_ENV)["GRADTRACE_WORKERS"]))
    load = Load(
        server.url,
        clients,
        spec_of,
        path,
        api_rss_mb_before=rss_mb(server.proc.pid),
        own_addresses=own_addresses,
    )
    return server, load.start()


def finish(scenario: str, server: ServerProcess, load: Load, **figures: Any) -> dict[str, Any]:
    """Stop the clients and the server; record what the users saw, with the scenario's figures."""
    outcomes = load.stop()
    figures = {"clients": load.clients, "api_rss_mb_before": load.api_rss_mb_before, **figures}
    figures["load"] = summary(outcomes)
    figures["api_rss_mb_after"] = rss_mb(server.proc.pid)
    figures["processes_left_after_stop"] = len(stop_gracefully(server))
    return record(scenario, figures)


def assert_users_saw_only_their_own_faults(figures: dict[str, Any], faults: int) -> None:
    """The promises: at most one failed request per fault, each a 503 with a reason; none too long."""
    summary_ = figures["load"]
    assert summary_["failed"] <= faults, summary_
    assert set(summary_["statuses"]) <= {"200", "503"}, summary_
    assert summary_["longest_s"] <= MAX_REQUEST_S, summary_
    assert figures["processes_left_after_stop"] == 0, figures
