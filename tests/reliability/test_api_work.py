"""Issue 38: work the API process does itself (translation, checks, pricing) is bounded.

- ``translate_bomb``: PyTorch sources of nested class instances (16 per class 6 deep, a 64-wide
  fan) are refused with 413 from the count of what they would build, fast and without memory.
- ``big_literals``: hex, octal and binary literals of 16,000 bits are a 413 naming the line and
  column; the server logs no traceback for them.

Short versions by default; ``GRADTRACE_RELIABILITY=full`` (``make reliability``) runs longer.
"""

from __future__ import annotations

import time

import httpx
import pytest
from cost_bombs import big_literals, translate_bomb
from reliability_helpers import SERVER_ENV, record, rss_mb, scaled, stop_gracefully

pytestmark = pytest.mark.slow

BOMBS = {"16x6": translate_bomb(16, 6), "fan64": translate_bomb(64, 2), "4x8": translate_bomb(4, 8)}


def test_translate_bombs_are_refused_from_their_count(server_factory) -> None:  # noqa: ANN001
    server = server_factory(env=SERVER_ENV)
    rounds = int(scaled(3, 30))
    with httpx.Client(base_url=server.url, timeout=60) as client:
        client.post("/api/v1/translate", json={"python": translate_bomb(2, 1)})  # warm the route
        before = rss_mb(server.proc.pid)
        answers = []
        for _ in range(rounds):
            for name, source in BOMBS.items():
                started = time.monotonic()
                r = client.post("/api/v1/translate", json={"python": source})
                answers.append((name, r.status_code, r.json()["error"], time.monotonic() - started))
    figures = record(
        "translate_bomb",
        {
            "bombs": {name: len(source) for name, source in BOMBS.items()},
            "requests": len(answers),
            "statuses": sorted({status for _, status, _, _ in answers}),
            "codes": sorted({error["code"] for _, _, error, _ in answers}),
            "longest_s": round(max(t for *_, t in answers), 3),
            "median_s": round(sorted(t for *_, t in answers)[len(answers) // 2], 3),
            "api_rss_mb_before": before,
            "api_rss_growth_mb": round(rss_mb(server.proc.pid) - before, 1),
        },
    )
    stop_gracefully(server)
    assert figures["statuses"] == [413] and figures["codes"] == ["limit_exceeded"], figures
    assert all(error["line"] for _, _, error, _ in answers), answers[:3]
    assert figures["longest_s"] < 0.5, figures  # ~0.01 s each on an idle machine
    assert figures["api_rss_growth_mb"] < 10, figures


def test_huge_literals_are_refused_at_their_place_without_a_traceback(server_factory) -> None:  # noqa: ANN001
    server = server_factory(env=SERVER_ENV)
    answers = []
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for source, line, column in big_literals():
            r = client.post("/api/v1/translate", json={"python": source})
            error = r.json()["error"]
            answers.append((r.status_code, error["code"], (error["line"], error["column"]), (line, column)))
    log = server.log_text()
    figures = record(
        "big_literals",
        {
            "requests": len(answers),
            "statuses": sorted({a[0] for a in answers}),
            "at_their_place": sum(a[2] == a[3] for a in answers),
            "tracebacks_logged": log.count("Traceback"),
        },
    )
    stop_gracefully(server)
    assert figures["statuses"] == [413] and figures["at_their_place"] == len(answers), answers
    assert figures["tracebacks_logged"] == 0, log[-2000:]
