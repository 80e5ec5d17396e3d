"""uvicorn's h11 protocol, with malformed requests answered by the JSON error envelope.

h11 refuses what it cannot frame (a broken request line, a bad header, malformed chunked
encoding, a header block over its 16 KiB cap) before any ASGI app sees the request; uvicorn
then answers ``400 Invalid HTTP request received.`` as text/plain. Clients of this API read
``{"error": {...}}`` for every failure, so this protocol writes that instead (same status,
same ``Connection: close``). Use it as ``uvicorn.run(app, http=EnvelopeH11Protocol)``.
"""

from __future__ import annotations

import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from gradtrace.problem import Problem

MALFORMED = Problem(
    "malformed_request",
    "the HTTP request could not be read (request line, headers or chunked body framing)",
    status=400,
)


class EnvelopeH11Protocol(H11Protocol):
    def send_400_response(self, msg: str) -> None:
        body = json.dumps({"error": MALFORMED.to_dict()}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            (b"x-content-type-options", b"nosniff"),
        ]
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
        ):
            self.transport.write(self.conn.send(event))
        self.transport.write(self.conn.send(h11.EndOfMessage()))
        self.transport.close()
