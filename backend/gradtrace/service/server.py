"""The single-machine HTTP server: uvicorn with h11, a deadline for reading each request and
one for writing each response.

uvicorn has no header or body read timeout: a client that sends half a request line and then
one byte every few seconds (slowloris) keeps its connection forever (measured: 200 such
connections all still open after a minute), and its default parser (httptools) accepted an
8 MiB header. So: h11 (headers capped at 16 KiB), a keep-alive idle timeout, and
``ReadDeadlineH11Protocol``, which gives each request ``request_read_timeout_s`` from its
connection (or the end of the previous response) to arrive whole, headers and body, then
answers 408 and closes. Time spent in the app (tracing) is not counted. (hypercorn 0.18 was
measured too: it cut slow headers at 5 s but kept 200 slow bodies open, even with
``read_timeout``, which each trickled byte restarts. RELIABILITY.md has the figures.)

Writing has the mirror problem. uvicorn hands a whole body to ``transport.write``, and asyncio's
socket transport copies whatever the socket does not take at once into a buffer of its own: a
client that asks for a 6.3 MB trace and never reads pins a copy of it, for ever (measured: 200
of them took the process from 79 to 762 MB; RELIABILITY.md, `slow_readers`). So the protocol hands
bodies to uvicorn in ``WRITE_CHUNK_BYTES`` pieces (uvicorn's ``send`` waits for the transport's
``resume_writing`` before each one when it is paused): a connection holds at most a chunk plus
the transport's high-water mark of its own, beside the body object the cache shares (a trace
kept on disk is sent from its file a piece at a time: ``api/tracing.py``). And it has a progress
rule, checked every ``response_write_timeout_s`` from the moment a response first waits on its
client until the client has taken it: while the server waits on the client (the transport
paused, or a finished response still unsent), a client that took less than
``WRITE_MIN_PROGRESS_BYTES`` since the last check is not reading, and one that took less than
``WRITE_MIN_BYTES_PER_S`` on average since the response first waited (after one check's grace)
is too slow; either connection is reset. The checks are not restarted when the transport
resumes: before, each resume restarted the deadline, so a client that took 20 KB every 10 s
(the first rule's 16 KiB per 15 s, met by a trickle) held its response for as long as it liked.

In the compose deployment nginx in front applies the same kind of limits.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

import h11
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

from gradtrace.problem import Problem

log = logging.getLogger(__name__)

# Requests that have not arrived whole by then are cut off: ample for 256 KiB on a slow link.
REQUEST_READ_TIMEOUT_S = 10.0
KEEP_ALIVE_TIMEOUT_S = 5
# While the server waits on a client to take a response (see ReadDeadlineH11Protocol), the
# client must take at least WRITE_MIN_PROGRESS_BYTES per RESPONSE_WRITE_TIMEOUT_S, and
# WRITE_MIN_BYTES_PER_S on average over the whole response (after the first such period), or it
# is cut off: 8 KiB/s is 64 kbit/s, below any link a person reads a big trace over (a 20 MB trace
# would take 40 minutes at that rate).
RESPONSE_WRITE_TIMEOUT_S = 15.0
WRITE_MIN_PROGRESS_BYTES = 16 * 1024
WRITE_MIN_BYTES_PER_S = 8 * 1024
# What one connection holds of a response, beyond the kernel's socket buffer: a body is handed
# over in chunks, and uvicorn waits whenever the transport holds more than WRITE_BUFFER_HIGH.
WRITE_CHUNK_BYTES = 64 * 1024
WRITE_BUFFER_HIGH = 64 * 1024
WRITE_BUFFER_LOW = 16 * 1024
# Linux's struct tcp_info: tcpi_bytes_acked, what the peer has acknowledged (since Linux 4.1).
_TCP_INFO_BYTES_ACKED = struct.Struct("=Q")
_TCP_INFO_BYTES_ACKED_OFFSET = 120
_TIMEOUT_BODY = (
    b'{"error":{"code":"request_timeout","message":"the request was not received in time","path":null}}'
)
_TIMEOUT_RESPONSE = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: " + str(len(_TIMEOUT_BODY)).encode() + b"\r\n\r\n" + _TIMEOUT_BODY
)


MALFORMED = Problem(
    "malformed_request",
    "the HTTP request could not be read (request line, headers or chunked body framing)",
    status=400,
)


# h11's cap on an incomplete request head (uvicorn's default: 16 KiB), the app's on a whole one.
MAX_HEADER_BYTES = 16 * 1024
HEADERS_TOO_LARGE = Problem(
    "headers_too_large", f"request headers too large (limit {MAX_HEADER_BYTES} bytes)", status=431
)


def in_chunks(app: ASGIApp) -> ASGIApp:
    """``app`` with every response body over ``WRITE_CHUNK_BYTES`` sent as several messages.

    uvicorn awaits the transport's drain before each message it writes, so a body sent this way
    waits for the client instead of piling up in the transport's buffer.
    """

    async def chunked(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_in_chunks(message: Message) -> None:
            body = message.get("body", b"")
            if message["type"] != "http.response.body" or len(body) <= WRITE_CHUNK_BYTES:
                await send(message)
                return
            more_body = message.get("more_body", False)
            for start in range(0, len(body), WRITE_CHUNK_BYTES):
                end = start + WRITE_CHUNK_BYTES
                await send(
                    {
                        "type": "http.response.body",
                        "body": body[start:end],
                        "more_body": more_body or end < len(body),
                    }
                )

        await app(scope, receive, send_in_chunks)

    return chunked


class ReadDeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, plus a deadline for receiving each whole request, bounded writes
    with a deadline for each response, and malformed requests answered with the JSON error
    envelope.

    h11 refuses what it cannot frame (a broken request line, a bad header, malformed chunked
    encoding, a header block over its 16 KiB cap) before any ASGI app sees the request; uvicorn
    would answer ``400 Invalid HTTP request received.`` as text/plain. Clients of this API read
    ``{"error": {...}}`` for every failure, so this writes that instead (same status, same
    ``Connection: close``).
    """

    request_read_timeout_s = REQUEST_READ_TIMEOUT_S
    response_write_timeout_s = RESPONSE_WRITE_TIMEOUT_S
    write_min_bytes_per_s = WRITE_MIN_BYTES_PER_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.app = in_chunks(self.app)
        self._read_deadline: asyncio.TimerHandle | None = None
        self._write_deadline: asyncio.TimerHandle | None = None
        # The response being checked, and what its client had taken (acknowledged) when it first
        # waited on it and at the last check: (loop time, bytes acked; None without TCP_INFO).
        self._checked_cycle: RequestResponseCycle | None = None
        self._waited_since: tuple[float, int | None] = (0.0, None)
        self._last_check: tuple[float, int | None] = (0.0, None)

    def send_400_response(self, msg: str) -> None:
        # A header block that h11 refused for its size (it arrived in pieces, so h11 saw it
        # incomplete) gets the 431 the app gives one that arrives whole: same answer either way.
        pending, _closed = self.conn.trailing_data
        too_large = len(pending) > MAX_HEADER_BYTES
        problem = HEADERS_TOO_LARGE if too_large else MALFORMED
        body = json.dumps({"error": problem.to_dict()}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            (b"x-content-type-options", b"nosniff"),
        ]
        for event in (
            h11.Response(
                status_code=problem.status,
                headers=headers,
                reason=b"Request Header Fields Too Large" if too_large else b"Bad Request",
            ),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        self.transport.close()

    def _arm_read_deadline(self) -> None:
        self._disarm_read_deadline()
        self._read_deadline = self.loop.call_later(self.request_read_timeout_s, self._read_timed_out)

    def _disarm_read_deadline(self) -> None:
        if self._read_deadline is not None:
            self._read_deadline.cancel()
            self._read_deadline = None

    def _read_timed_out(self) -> None:
        self._read_deadline = None
        if self.transport.is_closing():
            return
        if self.cycle is None or not self.cycle.response_started:  # no response begun: say why
            self.transport.write(_TIMEOUT_RESPONSE)
        self.transport.close()

    def _arm_write_deadline(self) -> None:
        """The response now waits on its client: checks start, unless they already run for it."""
        if self._write_deadline is not None and self._checked_cycle is self.cycle:
            return  # a resume and a pause again since: the same response, the same checks
        self._disarm_write_deadline()
        self._checked_cycle = self.cycle
        self._waited_since = self._last_check = (self.loop.time(), self._bytes_acked())
        self._write_deadline = self.loop.call_later(self.response_write_timeout_s, self._write_timed_out)

    def _disarm_write_deadline(self) -> None:
        if self._write_deadline is not None:
            self._write_deadline.cancel()
            self._write_deadline = None
        self._checked_cycle = None

    def _waiting_on_client(self) -> bool:
        """The server has bytes of this response that its client has not taken: the transport is
        paused, or the response is finished and its end still in the transport's buffer."""
        if self.flow.write_paused:
            return True
        complete = self.cycle is None or self.cycle.response_complete
        return complete and bool(self.transport.get_write_buffer_size())

    def _write_timed_out(self) -> None:
        self._write_deadline = None
        if self.transport.is_closing():
            return
        complete = self.cycle is None or self.cycle.response_complete
        if complete and not self.transport.get_write_buffer_size():
            self._checked_cycle = None  # all handed to the kernel: this response is done
            return
        now, acked = self.loop.time(), self._bytes_acked()
        if self._waiting_on_client() and self._too_slow(now, acked):
            self._reset()
            return
        # Reading, or the app (not the client) is what the response waits on: check again later.
        self._last_check = (now, acked)
        self._write_deadline = self.loop.call_later(self.response_write_timeout_s, self._write_timed_out)

    def _too_slow(self, now: float, acked: int | None) -> bool:
        """Less than ``WRITE_MIN_PROGRESS_BYTES`` since the last check, or less than
        ``write_min_bytes_per_s`` on average since the response first waited (one period of
        grace). Without TCP_INFO (not Linux), any wait for a whole period is too slow."""
        (since, acked_first), (_, acked_last) = self._waited_since, self._last_check
        if acked is None or acked_first is None or acked_last is None:
            return True
        if acked - acked_last < WRITE_MIN_PROGRESS_BYTES:
            return True
        owed = self.write_min_bytes_per_s * (now - since - self.response_write_timeout_s)
        return acked - acked_first < owed

    def _reset(self) -> None:
        log.debug("%s not reading its response fast enough: reset", self.client)
        # close() would wait for the buffer to drain, which this client will not do. abort()
        # drops the buffer, but a plain close of the socket leaves its unsent bytes in the
        # kernel, retried for minutes, and the client's end open (the FIN waits behind them).
        # SO_LINGER 0 makes it a reset: both freed at once, and the client told.
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # uvicorn's connection_lost then marks the request disconnected and wakes its send: the
        # app's remaining sends return at once, without an error.
        self.transport.abort()

    def _bytes_acked(self) -> int | None:
        """What the client has acknowledged so far; None where TCP_INFO does not tell (not Linux).

        The transport stays paused until the kernel's send buffer has room again, and Linux
        grows that buffer up to 4 MB: it can take a slow reader minutes to drain, reading all
        along. So progress is counted in what the client took, not in resumes.
        """
        sock = self.transport.get_extra_info("socket")
        try:
            info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
        except (AttributeError, OSError):  # no socket, or no TCP_INFO on this system
            return None
        if len(info) < _TCP_INFO_BYTES_ACKED_OFFSET + _TCP_INFO_BYTES_ACKED.size:
            return None  # a kernel older than 4.1
        acked: int = _TCP_INFO_BYTES_ACKED.unpack_from(info, _TCP_INFO_BYTES_ACKED_OFFSET)[0]
        return acked

    def pause_writing(self) -> None:
        super().pause_writing()
        self._arm_write_deadline()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH, low=WRITE_BUFFER_LOW)
        self._arm_read_deadline()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED, h11.ERROR):
            self._disarm_read_deadline()  # the request is in: the app's time is not counted

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may already have parsed a pipelined request
        if not self.transport.is_closing() and self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
            self._arm_read_deadline()  # the next request on this keep-alive connection
        if self._write_deadline is None and self.transport.get_write_buffer_size():
            # The end of a response still unsent, under the high-water mark (no pause to time):
            # close() on this connection would otherwise wait for it for ever.
            self._arm_write_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_read_deadline()
        self._disarm_write_deadline()
        super().connection_lost(exc)


# What ReadDeadlineH11Protocol relies on in uvicorn's internal H11Protocol (not a public API):
# the methods it overrides, and the attributes it reads, by the code that sets them.
_UVICORN_METHODS = (
    "connection_made",
    "connection_lost",
    "data_received",
    "on_response_complete",
    "pause_writing",
    "send_400_response",
)
_UVICORN_ATTRIBUTES: tuple[tuple[Callable[..., Any], frozenset[str]], ...] = (
    (H11Protocol.__init__, frozenset({"app", "loop", "conn", "cycle"})),
    (H11Protocol.connection_made, frozenset({"transport", "flow"})),
    (RequestResponseCycle.__init__, frozenset({"response_started", "response_complete"})),
    (FlowControl.__init__, frozenset({"write_paused"})),
)


def check_uvicorn_internals() -> None:
    """Raise at start-up, naming what moved, when the uvicorn installed no longer has the
    internals ``ReadDeadlineH11Protocol`` subclasses and reads (``serve`` calls it first):
    without them the read and write deadlines would silently stop working."""
    # defined by uvicorn itself, not only inherited from asyncio.Protocol
    ours = [vars(cls) for cls in H11Protocol.__mro__ if cls.__module__.startswith("uvicorn.")]
    missing = [f"H11Protocol.{name}" for name in _UVICORN_METHODS if not any(name in d for d in ours)]
    for function, names in _UVICORN_ATTRIBUTES:
        code = getattr(function, "__code__", None)
        found = set(code.co_names) if code is not None else set()
        missing += [f"{function.__qualname__} sets no {name}" for name in sorted(names - found)]
    if missing:
        raise RuntimeError(
            f"uvicorn {uvicorn.__version__} moved what gradtrace's server relies on ({'; '.join(missing)}): "
            "install a uvicorn gradtrace is tested with (backend/pyproject.toml) or update service/server.py"
        )


def serve(
    app: ASGIApp,
    host: str,
    port: int,
    log_level: str = "info",
    *,
    on_ready: Callable[[int], None] | None = None,
    idle_timeout_s: float | None = None,
) -> None:
    """Run the app (``gradtrace.api.app.create_app(settings)``) until SIGINT/SIGTERM; its
    lifespan stops every worker process on the way out.

    ``on_ready(port)`` is called once the server listens (with the port the system chose when
    ``port`` is 0); ``idle_timeout_s`` stops it after that long without a request.
    """
    check_uvicorn_internals()
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        http=ReadDeadlineH11Protocol,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        log_level=log_level,
        timeout_keep_alive=KEEP_ALIVE_TIMEOUT_S,
        proxy_headers=False,
    )
    server = _Server(config, on_ready, idle_timeout_s)
    server.run()
    if not server.started:
        sys.exit(STARTUP_FAILURE)  # what uvicorn.run does: the port was taken, the lifespan failed


STARTUP_FAILURE = 3


class _Server(uvicorn.Server):
    """uvicorn's server, telling when it listens and stopping when idle (see ``serve``)."""

    def __init__(
        self, config: uvicorn.Config, on_ready: Callable[[int], None] | None, idle_timeout_s: float | None
    ) -> None:
        super().__init__(config)
        self._on_ready = on_ready
        self._idle_timeout_s = idle_timeout_s
        self._requests_seen = 0
        self._last_request = time.monotonic()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self._on_ready is not None:
            self._on_ready(self.servers[0].sockets[0].getsockname()[1])

    async def on_tick(self, counter: int) -> bool:
        if await super().on_tick(counter):
            return True
        if self._idle_timeout_s is None or counter % 10:
            return False
        now = time.monotonic()
        if self.server_state.total_requests != self._requests_seen:
            self._requests_seen, self._last_request = self.server_state.total_requests, now
        elif now - self._last_request > self._idle_timeout_s:
            log.warning("no request for %.0f s: stopping", self._idle_timeout_s)
            return True
        return False
