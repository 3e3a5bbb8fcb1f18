"""The headers every console response carries: no script, no framing, no caching of data.

`SecurityHeaders` is plain ASGI middleware: it sets the headers on every
response, the application's error pages and Starlette's own included.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["CSP", "SecurityHeaders"]

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
"""No script of any kind, styles only from the console's own stylesheet, no framing."""

_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class SecurityHeaders:
    """Adds the security headers to every response, and ``no-store`` to all but the stylesheet
    (every page shows ledger data, which no cache should keep)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        static = scope.get("path", "").startswith("/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v)
                    for k, v in message.get("headers", [])
                    if k.lower() not in {h for h, _ in _HEADERS} and k.lower() != b"cache-control"
                ]
                headers += _HEADERS
                headers.append(
                    (b"cache-control", b"public, max-age=3600" if static else b"no-store")
                )
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)
