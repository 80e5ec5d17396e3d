"""Security headers, the CSP (``/embed`` may be framed anywhere, the rest nowhere), CORS."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The viewer is self-hosted (no CDN at run time): everything from 'self'; elkjs runs in a Web
# Worker (worker-src blob: for the case it is started from a blob); images may be data: URLs
# (PNG export previews). Inline styles are allowed because SVG styling uses style attributes.
_CSP_BASE = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; worker-src 'self' blob:; connect-src 'self'; "
    "font-src 'self' data:; object-src 'none'; base-uri 'none'; form-action 'self'"
)
CSP_FRAMEABLE = _CSP_BASE + "; frame-ancestors *"
CSP_DEFAULT = _CSP_BASE + "; frame-ancestors 'none'"


def _is_embed(path: str) -> bool:
    # The player page and what it loads: diagrams of permalinks are embeddable too.
    return path.startswith("/embed/") or path.endswith("/diagram.svg")


class SecurityHeadersMiddleware:
    """Pure ASGI (no BaseHTTPMiddleware): adds headers without buffering streamed bodies."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        embed = _is_embed(scope.get("path", ""))

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
                add("content-security-policy", CSP_FRAMEABLE if embed else CSP_DEFAULT)
                if not embed:
                    add("x-frame-options", "DENY")
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


def install_middleware(app: FastAPI, cors_origins: tuple[str, ...]) -> None:
    # CORS for the API: any page may call it (no cookies, no credentials are involved).
    app.add_middleware(
        CORSMiddleware,
        allow_origins=list(cors_origins),
        allow_methods=["GET", "POST", "OPTIONS"],
        allow_headers=["Content-Type", "If-None-Match"],
        expose_headers=["ETag", "Retry-After", "X-Cache", "Location"],
        max_age=600,
    )
    app.add_middleware(SecurityHeadersMiddleware)
