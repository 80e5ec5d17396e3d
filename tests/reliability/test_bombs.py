"""Issue 25: costly specs ("bombs") cannot tie up the workers, and no answer shows internals.

- ``bombs_refused``: each bomb of ``cost_bombs`` is answered 413 ``too_costly`` from its price,
  before a worker is taken (the workers stay idle: no task reaches them).
- ``others_while_bombs``: one client sends bombs back to back (each side of a ``POST /compare``
  and ``POST /trace``) while other clients trace light specs: the others' success rate.
- ``no_internals``: the hostile corpus, the bombs and torch errors that carry a C++ stack trace:
  no body holds a file path, a shared object, an address or a C++ frame.

Short versions by default; ``GRADTRACE_RELIABILITY=full`` (``make reliability``) runs longer.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time

import httpx
import pytest
from cost_bombs import BOMBS, INTERNALS, LEAKY_LINES, torch_error
from hostile_corpus import HTTP_CASES, RAW_CASES
from reliability_helpers import (
    SERVER_ENV,
    finish,
    light_spec,
    readyz,
    record,
    scaled,
    start_under_load,
    stop_gracefully,
    wait_for_workers,
)

pytestmark = pytest.mark.slow

# The bomb client is its own client (X-Real-IP through trust_proxy) under the default limits.
BOMB_ENV = {**SERVER_ENV, "GRADTRACE_RATE_PER_MINUTE": "100000", "GRADTRACE_TRUST_PROXY": "1"}


def _post_bombs(url: str, rounds: int) -> list[tuple[str, int, str, float]]:
    out = []
    with httpx.Client(base_url=url, timeout=60, headers={"x-real-ip": "10.9.9.9"}) as client:
        for _, (name, (doc, _code, _path, _line)) in itertools.product(range(rounds), BOMBS.items()):
            started = time.monotonic()
            r = client.post("/api/v1/trace", json=doc)
            out.append((name, r.status_code, r.json()["error"]["code"], time.monotonic() - started))
    return out


@pytest.mark.untimed  # statuses, codes and bodies: no figure that load would move
def test_bombs_are_refused_before_a_worker_starts(server_factory) -> None:  # noqa: ANN001
    server = server_factory(env=BOMB_ENV)
    wait_for_workers(server, 2)
    pids = set(server.worker_pids())
    answers = _post_bombs(server.url, int(scaled(2, 20)))
    ready = readyz(server)
    figures = record(
        "bombs_refused",
        {
            "bombs": len(BOMBS),
            "requests": len(answers),
            "statuses": sorted({status for _, status, _, _ in answers}),
            "codes": sorted({code for _, _, code, _ in answers}),
            "longest_s": round(max(t for *_, t in answers), 3),
            "median_s": round(sorted(t for *_, t in answers)[len(answers) // 2], 3),
            "workers_replaced": len(pids - set(server.worker_pids())),
            "in_flight_after": ready.get("in_flight"),
        },
    )
    stop_gracefully(server)
    assert figures["statuses"] == [413] and figures["codes"] == ["too_costly"], figures
    assert figures["workers_replaced"] == 0, figures  # no task reached (and hung) a worker


def test_other_clients_succeed_while_one_sends_bombs(server_factory) -> None:  # noqa: ANN001
    # four other users, each its own client (as the bomber is): their shares are their own
    server, load = start_under_load(server_factory, 4, light_spec, env=BOMB_ENV, own_addresses=True)
    stop = threading.Event()
    bombs: list[int] = []

    def bomber() -> None:
        docs = itertools.cycle([doc for doc, *_ in BOMBS.values()])
        with httpx.Client(base_url=server.url, timeout=60, headers={"x-real-ip": "10.9.9.9"}) as client:
            while not stop.is_set():
                r = client.post("/api/v1/compare", json={"a": next(docs), "b": next(docs)})
                bombs.append(r.status_code)
                r = client.post("/api/v1/trace", json=next(docs))
                bombs.append(r.status_code)

    thread = threading.Thread(target=bomber, daemon=True)
    thread.start()
    duration = scaled(10, 60)
    time.sleep(duration)
    stop.set()
    thread.join(timeout=60)
    figures = finish(
        "others_while_bombs",
        server,
        load,
        duration_s=duration,
        bomb_requests=len(bombs),
        bomb_statuses=sorted(set(bombs)),
    )
    summary = figures["load"]
    rate = summary["ok"] / max(1, summary["requests"])
    figures["others_success_rate"] = round(rate, 4)
    record("others_while_bombs", figures)
    assert set(bombs) == {413}, figures
    assert rate >= 0.99, figures
    assert summary["failed"] == 0, figures


def _raw(url: str, request: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return data


@pytest.mark.untimed  # statuses, codes and bodies: no figure that load would move
def test_no_answer_of_the_corpus_shows_internals(server_factory) -> None:  # noqa: ANN001
    server = server_factory(env={**SERVER_ENV, "GRADTRACE_RATE_PER_MINUTE": "0"})
    wait_for_workers(server, 2)
    bodies: list[tuple[str, bytes]] = []
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for case in HTTP_CASES:
            r = client.request(case.method, case.url, content=case.body, headers=case.headers)
            bodies.append((case.id, r.content))
        for name, (doc, *_) in BOMBS.items():
            bodies.append((name, client.post("/api/v1/trace", json=doc).content))
        for line in LEAKY_LINES:
            for path in ("/api/v1/trace", "/api/v1/compare"):
                body = torch_error(line) if path.endswith("trace") else {"a": torch_error(line), "b": "x"}
                bodies.append((f"{path} {line}", client.post(path, json=body).content))
    for case in RAW_CASES:
        bodies.append((case.id, _raw(server.url, case.request)))
    leaks = [
        (name, match.group(0)) for name, body in bodies if (match := INTERNALS.search(body.decode("latin-1")))
    ]
    figures = record(
        "no_internals", {"answers": len(bodies), "with_internals": len(leaks), "leaks": leaks[:10]}
    )
    stop_gracefully(server)
    assert figures["with_internals"] == 0, figures
