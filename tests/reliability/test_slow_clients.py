"""Slow clients against ``gradtrace serve`` alone (no nginx): they cannot hold connections or memory.

Slowloris: 200 connections each send a request line and then one header line every 2 s, never
finishing (or complete headers and then one body byte every 2 s). uvicorn alone kept all of them
open (the attack run: the whole minute); the server's request read deadline
(``service/server.py``, 10 s) answers 408 and closes them, and other clients are served meanwhile.

Slow readers: 200 connections ask for a ~5 MB trace and never read the answer. uvicorn alone kept
a copy of the body per connection (the API process went from 158 to 842 MB) and /healthz took
7 s; the server writes bodies in bounded chunks and resets a connection whose client takes
nothing for its write deadline (15 s).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from reliability_helpers import (
    FULL,
    SERVER_ENV,
    heavy_spec,
    light_spec,
    record,
    rss_mb,
    scaled,
    stop_gracefully,
    wait_for_workers,
)
from server_process import get_without_reading

from gradtrace.service.server import REQUEST_READ_TIMEOUT_S, RESPONSE_WRITE_TIMEOUT_S

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


# The slow readers' promise (RELIABILITY.md): the API process stays under this while they wait.
MAX_API_RSS_MB = 300
MAX_HEALTHZ_S = 1.0
TCP_ESTABLISHED = 1


def _answered(sock: socket.socket) -> bool:
    """The response has begun (looked at, not read)."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return False


def _open(sock: socket.socket) -> bool:
    """Still connected, asked without reading: the TCP state from TCP_INFO."""
    return struct.unpack("B", sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1))[0] == TCP_ESTABLISHED


def _kernel_send_queue_mb(port: int) -> float:
    """Bytes the kernel holds unsent on the server's established connections (/proc/net/tcp)."""
    total = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(f":{port:04X}") and fields[3] == "01":
            total += int(fields[4].split(":")[0], 16)
    return round(total / 1e6, 1)


def _healthz_s(server) -> float:  # noqa: ANN001
    started = time.monotonic()
    assert httpx.get(server.url + "/healthz", timeout=30).status_code == 200
    return time.monotonic() - started


def test_slow_readers_are_cut_off_and_memory_stays_bounded(server_factory) -> None:  # noqa: ANN001
    server = server_factory(env=SERVER_ENV)
    wait_for_workers(server, int(SERVER_ENV["GRADTRACE_WORKERS"]))
    stored = httpx.post(server.url + "/api/v1/specs", json=heavy_spec(0), timeout=30).json()
    path = f"/api/v1/specs/{stored['id']}/trace"
    trace = httpx.get(server.url + path, timeout=90)  # computed once: the readers get the cached bytes
    assert trace.status_code == 200
    connections = int(scaled(30, CONNECTIONS))
    rss_before = rss_mb(server.proc.pid)
    started = time.monotonic()
    readers = [get_without_reading(server.port, path) for _ in range(connections)]
    rss = [rss_before]
    healthz_arriving = [0.0]
    healthz_held = [0.0]
    closed_after: dict[int, float] = {}
    answered_after = kernel_mb = 0.0
    during: httpx.Response | None = None
    try:
        # While the requests are answered: /healthz waits its turn among them.
        while not all(_answered(sock) for sock in readers) and time.monotonic() - started < 60:
            healthz_arriving.append(_healthz_s(server))
            rss.append(rss_mb(server.proc.pid))
        answered_after = time.monotonic() - started
        kernel_mb = _kernel_send_queue_mb(server.port)
        # Then all of them wait on their readers until the write deadline.
        limit = RESPONSE_WRITE_TIMEOUT_S + 15
        while len(closed_after) < connections and time.monotonic() - started < limit:
            healthz_held.append(_healthz_s(server))
            rss.append(rss_mb(server.proc.pid))
            if during is None:  # a normal reader, served meanwhile
                during = httpx.get(server.url + path, timeout=60)
            for i, sock in enumerate(readers):
                if i not in closed_after and not _open(sock):
                    closed_after[i] = time.monotonic() - started
            time.sleep(0.25)
        kernel_mb_after = _kernel_send_queue_mb(server.port)
    finally:
        for sock in readers:
            sock.close()
    time.sleep(1)
    log = server.log_path.read_text(errors="replace")
    figures = record(
        "slow_readers",
        {
            "connections": connections,
            "trace_mb": round(len(trace.content) / 1e6, 1),
            "all_answered_after_s": round(answered_after, 1),
            "still_open_at_end": connections - len(closed_after),
            "closed_after_s_min": round(min(closed_after.values(), default=0.0), 1),
            "closed_after_s_max": round(max(closed_after.values(), default=0.0), 1),
            "api_rss_mb_before": rss_before,
            "api_rss_mb_max": max(rss),
            "api_rss_mb_after": rss_mb(server.proc.pid),
            "kernel_send_queue_mb": kernel_mb,
            "kernel_send_queue_mb_after": kernel_mb_after,
            "healthz_s_max_while_answering": round(max(healthz_arriving), 3),
            "healthz_s_max_while_held": round(max(healthz_held), 3),
            "normal_request_meanwhile": during.status_code if during is not None else None,
            "normal_request_whole": during is not None and during.content == trace.content,
            "errors_logged": sum(1 for line in log.splitlines() if "ERROR" in line or "Traceback" in line),
            "processes_left_after_stop": len(stop_gracefully(server)),
        },
    )
    assert figures["still_open_at_end"] == 0
    assert figures["closed_after_s_max"] <= answered_after + RESPONSE_WRITE_TIMEOUT_S + 3
    assert figures["api_rss_mb_max"] <= MAX_API_RSS_MB
    assert figures["kernel_send_queue_mb_after"] == 0  # the resets freed the kernel's copies too
    assert figures["healthz_s_max_while_held"] <= MAX_HEALTHZ_S
    assert figures["normal_request_meanwhile"] == 200 and figures["normal_request_whole"]
    assert figures["errors_logged"] == 0
    assert figures["processes_left_after_stop"] == 0


# Disk-tier slow readers (issue 38): a trace over the memory tier's entry limit is served from
# its file a piece at a time. Before, each reader held its own copy of it and a slice more: 100
# readers that never read took the API process from 259 to 2,335 MB, and 100 trickling 20 KB
# every 10 s held 2,375 MB for the whole minute (the write deadline restarted at each resume).
# Each reader its own client (X-Real-IP through a trusted proxy), as many people reading one
# big permalink are: one client's requests take turns in the API's CPU lane (api/cpu.py).
DISK_ENV = {
    **SERVER_ENV,
    "GRADTRACE_CACHE_ENTRY_MAX_BYTES": str(1024 * 1024),  # the ~6 MB trace goes to the disk tier
    "GRADTRACE_TRUST_PROXY": "1",
}
TRICKLE_BYTES, TRICKLE_EVERY_S = 20_000, 10.0
# The full run measures each kind alone, for a minute; the short one both at once, until the
# trickle's mean rate has fallen behind (from 15 s on, cut at the check at 30 s).
DISK_READERS = ["never_read", "trickle"] if FULL else ["both"]


def _get_as(port: int, path: str, address: str) -> socket.socket:
    """``get_without_reading`` from a client address of its own."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nX-Real-IP: {address}\r\n\r\n".encode())
    return sock


def _trickle(sock: socket.socket) -> int:
    """Take up to TRICKLE_BYTES of what has arrived, without waiting; -1 once the server reset it."""
    taken = 0
    try:
        while taken < TRICKLE_BYTES:
            chunk = sock.recv(TRICKLE_BYTES - taken, socket.MSG_DONTWAIT)
            if not chunk:
                return -1
            taken += len(chunk)
    except BlockingIOError:
        pass
    except ConnectionResetError:
        return -1
    return taken


@pytest.mark.parametrize("how", DISK_READERS)
def test_slow_readers_of_a_trace_on_disk_hold_a_piece_each(server_factory, how: str) -> None:  # noqa: ANN001
    server = server_factory(env=DISK_ENV)
    wait_for_workers(server, int(DISK_ENV["GRADTRACE_WORKERS"]))
    stored = httpx.post(server.url + "/api/v1/specs", json=heavy_spec(1), timeout=30).json()
    path = f"/api/v1/specs/{stored['id']}/trace"
    assert httpx.get(server.url + path, timeout=90).status_code == 200  # computed, kept on disk
    trace = httpx.get(server.url + path, timeout=90)
    assert trace.headers["x-cache"] == "hit" and int(trace.headers["content-length"]) > 1024 * 1024
    connections = int(scaled(30, 100))
    duration = scaled(40.0, 60.0)
    rss_before = rss_mb(server.proc.pid)
    started = time.monotonic()
    readers: list[socket.socket] = []
    asked_at: list[float] = []  # closed_after below counts from each reader's own request
    for i in range(connections):
        # in groups of 20, each group answered before the next asks (people arriving, not a
        # burst the API's CPU lane would shed: 64 checks wait at most)
        readers.append(_get_as(server.port, path, f"10.38.{i // 250}.{i % 250 + 1}"))
        asked_at.append(time.monotonic())
        group_asked = len(readers) % 20 == 0 or len(readers) == connections
        while group_asked and not all(map(_answered, readers)):
            assert time.monotonic() - started < 60, "the readers were not answered"
            time.sleep(0.05)
    statuses = Counter(sock.recv(12, socket.MSG_PEEK).decode() for sock in readers if _answered(sock))
    trickles = {i for i in range(connections) if how == "trickle" or (how == "both" and i % 2)}
    taken = [0] * connections
    answered: set[int] = set()
    closed_after: dict[int, float] = {}
    rss, healthz = [rss_before], [0.0]
    next_trickle = started
    try:
        while time.monotonic() - started < duration and len(closed_after) < connections:
            now = time.monotonic()
            answered |= {i for i, sock in enumerate(readers) if i in closed_after or _answered(sock)}
            if now >= next_trickle:
                next_trickle = now + TRICKLE_EVERY_S
                for i in trickles - closed_after.keys():
                    got = _trickle(readers[i])
                    if got < 0:
                        closed_after[i] = now - asked_at[i]
                    taken[i] += max(got, 0)
            for i, sock in enumerate(readers):
                if i not in closed_after and not _open(sock):
                    closed_after[i] = now - asked_at[i]
            rss.append(rss_mb(server.proc.pid))
            healthz.append(_healthz_s(server))
            time.sleep(0.25)
        during = httpx.get(server.url + path, timeout=60)
    finally:
        for sock in readers:
            sock.close()
    time.sleep(1)
    log = server.log_path.read_text(errors="replace")
    never = [t for i, t in closed_after.items() if i not in trickles]
    trickled = [t for i, t in closed_after.items() if i in trickles]
    figures = record(
        f"disk_slow_readers_{how}",
        {
            "connections": connections,
            "trickling": len(trickles),
            "trace_mb": round(len(trace.content) / 1e6, 1),
            "ran_s": round(time.monotonic() - started, 1),
            "answered": len(answered),
            "statuses": dict(statuses),
            "cut_off": len(closed_after),
            "never_read_cut_after_s": [round(min(never, default=0), 1), round(max(never, default=0), 1)],
            "trickle_cut_after_s": [round(min(trickled, default=0), 1), round(max(trickled, default=0), 1)],
            "trickle_taken_kb_max": round(max(taken) / 1e3, 1),
            "api_rss_mb_before": rss_before,
            "api_rss_mb_max": max(rss),
            "api_rss_mb_after": rss_mb(server.proc.pid),
            "healthz_s_max": round(max(healthz), 3),
            "normal_request_meanwhile": during.status_code,
            "normal_request_whole": during.content == trace.content,
            "errors_logged": sum(1 for line in log.splitlines() if "ERROR" in line or "Traceback" in line),
            "processes_left_after_stop": len(stop_gracefully(server)),
        },
    )
    assert figures["answered"] == connections
    assert figures["statuses"] == {"HTTP/1.1 200": connections}  # every reader was sent its trace
    assert figures["api_rss_mb_max"] <= MAX_API_RSS_MB
    assert figures["api_rss_mb_max"] - rss_before <= 60  # a piece per reader, not a copy
    assert figures["healthz_s_max"] <= MAX_HEALTHZ_S
    assert figures["cut_off"] == connections  # the trickles too: their mean rate fell behind
    assert max(never, default=0) <= RESPONSE_WRITE_TIMEOUT_S + 5
    assert max(trickled, default=0) <= 2 * RESPONSE_WRITE_TIMEOUT_S + 5
    assert figures["normal_request_meanwhile"] == 200 and figures["normal_request_whole"]
    assert figures["errors_logged"] == 0
    assert figures["processes_left_after_stop"] == 0
