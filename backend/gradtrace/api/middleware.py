"""Security headers, the CSP (``/embed`` may be framed anywhere, the rest nowhere), CORS, OPTIONS."""

from __future__ import annotations

import re

from fastapi import FastAPI
from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gradtrace.api.errors import error_response

# The viewer is self-hosted (no CDN at run time): everything from 'self'; elkjs runs in a Web
# Worker (worker-src blob: for the case it is started from a blob); images may be data: URLs
# (PNG export previews). Inline styles are allowed because SVG styling uses style attributes.
_CSP_BASE = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; worker-src 'self' blob:; connect-src 'self'; "
    "font-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'"
)
# "*" matches every http(s) site; "file:" adds pages opened from disk (a downloaded page
# embedding the player), which "*" alone does not match.
CSP_FRAMEABLE = _CSP_BASE + "; frame-ancestors * file:"
CSP_DEFAULT = _CSP_BASE + "; frame-ancestors 'none'"
# /docs is FastAPI's Swagger UI page, served from /vendor/swagger-ui (no CDN), with an inline
# bootstrap script: only that page may run inline script.
CSP_DOCS = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)


# The frameable paths, whole: the player page of a permalink and a permalink's diagram. The
# id's alphabet has no "." or "/", so no dot segment or encoded slash (/embed/..%2findex.html,
# decoded to /embed/../index.html, which the static files resolve to the app page) matches.
_FRAMEABLE = re.compile(r"/embed/[a-z2-7]+|/api/v1/specs/[a-z2-7]+/diagram\.svg")


def _is_embed(path: str) -> bool:
    return _FRAMEABLE.fullmatch(path) is not None


class SecurityHeadersMiddleware:
    """Pure ASGI (no BaseHTTPMiddleware): adds headers without buffering streamed bodies."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        embed = _is_embed(path)
        csp = CSP_FRAMEABLE if embed else CSP_DOCS if path == "/docs" else CSP_DEFAULT

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}

                def add(name: str, value: str) -> None:
                    if name.encode() not in present:
                        headers.append((name.encode(), value.encode()))

                add("x-content-type-options", "nosniff")
                add("referrer-policy", "strict-origin-when-cross-origin")
                add("cross-origin-opener-policy", "same-origin")
                add("content-security-policy", csp)
                if not embed:
                    add("x-frame-options", "DENY")
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


MAX_HEADER_BYTES = 16 * 1024


class RequestSizeMiddleware:
    """Envelopes for oversized requests, answered before reading a byte of the body.

    * Headers over 16 KiB in total: 431. h11 caps only *incomplete* header blocks, so a
      large header block that arrives in one read gets through it.
    * A declared Content-Length over the cap: 413. FastAPI's ``max_body_size`` counts
      streamed bytes (chunked bodies included) and raises into our handlers, but for a
      declared length it answers plain text itself, so this case is answered here first.
    """

    def __init__(self, app: ASGIApp, max_body_size: int) -> None:
        self.app = app
        self.max_body_size = max_body_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = scope.get("headers", [])
            if sum(len(k) + len(v) + 4 for k, v in headers) > MAX_HEADER_BYTES:
                await self._refuse(
                    scope,
                    receive,
                    send,
                    431,
                    "headers_too_large",
                    f"request headers too large (limit {MAX_HEADER_BYTES} bytes)",
                )
                return
            for name, value in headers:
                if name == b"content-length":
                    if not value.isdigit() or int(value) > self.max_body_size:
                        await self._refuse(
                            scope,
                            receive,
                            send,
                            413,
                            "payload_too_large",
                            f"request body too large (limit {self.max_body_size} bytes)",
                        )
                        return
                    break
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(
        scope: Scope, receive: Receive, send: Send, status: int, code: str, message: str
    ) -> None:
        response = error_response(status, code, message, headers={"Connection": "close"})
        await response(scope, receive, send)


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
API_FALLBACK_PATH = "/api/{rest:path}"


def allowed_methods(routes: list[BaseRoute], scope: Scope) -> list[str]:
    """The methods some route answers at this path (the /api catch-all and static files aside)."""
    own = [r for r in routes if not isinstance(r, Mount) and getattr(r, "path", None) != API_FALLBACK_PATH]
    allowed = [m for m in _METHODS if any(r.matches({**scope, "method": m})[0] == Match.FULL for r in own)]
    if not allowed and not scope["path"].startswith("/api/"):
        if any(isinstance(r, Mount) and r.matches(scope)[0] != Match.NONE for r in routes):
            allowed = ["GET", "HEAD"]  # the viewer's static files
    return allowed


class OptionsMiddleware:
    """``OPTIONS`` without a CORS preflight: 204 with the path's real ``Allow``, or the 404 envelope.

    A preflight (``Origin`` plus ``Access-Control-Request-Method``) goes on to the CORS middleware.
    """

    def __init__(self, app: ASGIApp, routes: list[BaseRoute]) -> None:
        self.app = app
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "OPTIONS":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if "origin" in headers and "access-control-request-method" in headers:
            await self.app(scope, receive, send)
            return
        allowed = allowed_methods(self.routes, scope)
        if not allowed:
            response: Response = error_response(404, "not_found", "no such resource")
        else:
            response = Response(status_code=204, headers={"Allow": ", ".join([*allowed, "OPTIONS"])})
        await response(scope, receive, send)


class EnvelopeCORSMiddleware(CORSMiddleware):
    """Starlette's CORS, with a refused preflight answered by the error envelope, not plain text."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        message = bytes(response.body).decode(errors="replace")  # e.g. "Disallowed CORS method"
        keep = {k: v for k, v in response.headers.items() if k.lower().startswith("access-control-")}
        return error_response(response.status_code, "cors_refused", message, headers=keep)


def install_middleware(app: FastAPI, cors_origins: tuple[str, ...], max_body_size: int) -> None:
    # CORS for the API: any page may call it (no cookies, no credentials are involved).
    app.add_middleware(
        EnvelopeCORSMiddleware,
        allow_origins=list(cors_origins),
        allow_methods=["GET", "POST", "OPTIONS"],
        allow_headers=["Content-Type", "If-None-Match"],
        expose_headers=["ETag", "Retry-After", "X-Cache", "Location"],
        max_age=600,
    )
    # These two wrap the whole stack, outside FastAPI's own outermost middleware: its body
    # limiter replaces any response to a too-large declared body with plain text, and the
    # security headers must be on every response, error pages included.
    build_stack = app.build_middleware_stack

    def build_wrapped_stack() -> ASGIApp:
        stack = OptionsMiddleware(build_stack(), app.router.routes)
        return SecurityHeadersMiddleware(RequestSizeMiddleware(stack, max_body_size))

    app.build_middleware_stack = build_wrapped_stack  # type: ignore[method-assign]
