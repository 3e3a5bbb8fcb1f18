"""A recording service for the OpenAPI encoding and server tests: a real Starlette app
under uvicorn that records each request's method, path, raw query string, content type
and body (multipart parts decoded), and helpers to import, call and read what it saw.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from callgate import Authority, Gate, MemoryLedger, Registry, ToolCall
from callgate.openapi import OpenAPIImport
from servers import serving

SEEN: list[dict[str, Any]] = []


async def _record(request: Request) -> Response:
    body = await request.body()
    entry: dict[str, Any] = {
        "method": request.method,
        "path": request.url.path,
        "query": request.scope.get("query_string", b"").decode(),
        "content_type": request.headers.get("content-type", ""),
        "body": body,
    }
    if entry["content_type"].startswith("multipart/form-data"):
        form = await request.form()
        parts: dict[str, Any] = {}
        for key, value in form.multi_items():
            if hasattr(value, "read"):
                parts.setdefault(key, []).append(
                    {"filename": value.filename, "data": await value.read()}
                )
            else:
                parts.setdefault(key, []).append(value)
        entry["parts"] = parts
    SEEN.append(entry)
    return JSONResponse({"ok": True})


async def _relative(request: Request) -> Response:
    """A document whose only server is relative (``/v9``): it lives where the document is."""
    document = {
        "openapi": "3.1.0",
        "info": {"title": "rel", "version": "1"},
        "servers": [{"url": "/v9"}],
        "paths": {"/ping": {"get": {"operationId": "ping"}}},
    }
    return JSONResponse(document)


@contextmanager
def recording() -> Iterator[str]:
    """A service that records every request it receives and answers ``{"ok": true}``;
    yields its base URL."""
    app = Starlette(
        routes=[
            Route("/docs/relative.json", _relative),
            Route("/{rest:path}", _record, methods=["GET", "POST", "PUT"]),
        ]
    )
    with serving(app, what="recording service") as url:
        yield url


def run_of(api: OpenAPIImport) -> Any:
    registry = api.register(Registry())
    return Gate(registry, ledger=MemoryLedger()).run(
        authority=Authority(principal="ana", grants=["read:*", "write:*", "network:*"])
    )


def call(api: OpenAPIImport, tool: str, arguments: dict[str, Any]) -> Any:
    (obs,) = run_of(api).submit([ToolCall(id="c1", name=tool, arguments=arguments)])
    return obs


def pairs(text: str | bytes) -> list[tuple[str, str]]:
    """The decoded ``key=value`` pairs of a query string or form body, in order."""
    if isinstance(text, bytes):
        text = text.decode()
    return urllib.parse.parse_qsl(text, keep_blank_values=True)


def with_servers(servers: Any) -> dict[str, Any]:
    """A one-operation document (``GET /ping``) with these ``servers`` (None: none)."""
    document: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {"title": "v", "version": "1"},
        "paths": {"/ping": {"get": {"operationId": "ping"}}},
    }
    if servers is not None:
        document["servers"] = servers
    return document
