"""Slowloris against ``gradtrace serve`` alone (no nginx): slow clients cannot hold connections.

200 connections each send a request line and then one header line every 2 s, never finishing
(or complete headers and then one body byte every 2 s). uvicorn alone kept all of them open
(the attack run: the whole minute); the server's request read deadline (``service/server.py``,
10 s) answers 408 and closes them, and other clients are served meanwhile.
"""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest
from reliability_helpers import SERVER_ENV, light_spec, record, scaled, stop_gracefully

from gradtrace.service.server import REQUEST_READ_TIMEOUT_S

pytestmark = pytest.mark.slow

CONNECTIONS = 200
# What a slow client sends first, then what it trickles every 2 s.
SLOW_HEADERS = (b"POST /api/v1/trace HTTP/1.1\r\nHost: x\r\n", b"X-Slow: 1\r\n")
SLOW_BODY = (
    b"POST /api/v1/trace HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100000\r\n\r\n{",
    b" ",
)


async def _slow_client(port: int, duration: float, how: tuple[bytes, bytes]) -> tuple[float | None, bytes]:
    """Seconds until the server closed the connection (None: still open), and what it answered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.monotonic()
    first, trickle = how
    writer.write(first)
    answer = b""
    try:
        while time.monotonic() - started < duration:
            writer.write(trickle)
            await writer.drain()
            try:
                chunk = await asyncio.wait_for(reader.read(4096), 2.0)
            except TimeoutError:
                continue
            answer += chunk
            if not chunk:
                return time.monotonic() - started, answer
    except (ConnectionError, OSError):
        return time.monotonic() - started, answer
    finally:
        writer.close()
    return None, answer


async def _slowloris(
    port: int, duration: float, how: tuple[bytes, bytes]
) -> list[tuple[float | None, bytes]]:
    return await asyncio.gather(*(_slow_client(port, duration, how) for _ in range(CONNECTIONS)))


@pytest.mark.parametrize("part", ["headers", "body"])
def test_slow_clients_are_cut_off(server_factory, part: str) -> None:  # noqa: ANN001
    server = server_factory(env=SERVER_ENV)
    duration = scaled(20, 60)
    how = SLOW_HEADERS if part == "headers" else SLOW_BODY
    results: list[tuple[float | None, bytes]] = []
    slow = threading.Thread(
        target=lambda: results.extend(asyncio.run(_slowloris(server.port, duration, how)))
    )
    slow.start()
    time.sleep(3)
    # Meanwhile, a normal client is served.
    during = httpx.post(server.url + "/api/v1/trace", json=light_spec(-1), timeout=30)
    slow.join(timeout=duration + 30)
    closed = [t for t, _ in results if t is not None]
    figures = record(
        f"slow_{part}",
        {
            "connections": CONNECTIONS,
            "duration_s": duration,
            "still_open_at_end": CONNECTIONS - len(closed),
            "closed_after_s_max": round(max(closed, default=0.0), 1),
            "answered_408": sum(1 for _, answer in results if answer.startswith(b"HTTP/1.1 408")),
            "normal_request_meanwhile": during.status_code,
            "processes_left_after_stop": len(stop_gracefully(server)),
        },
    )
    assert figures["still_open_at_end"] == 0
    assert figures["closed_after_s_max"] <= REQUEST_READ_TIMEOUT_S + 3
    assert figures["answered_408"] == CONNECTIONS
    assert during.status_code == 200
