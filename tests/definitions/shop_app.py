"""A small shop service for the OpenAPI tests: a real Starlette app served by uvicorn.

It checks the bearer token, keeps orders in memory, records every request it
receives (so a test can prove a request was never sent), and has endpoints
that fail the ways real services do: a 409, a 500 on a read and on a write,
a write that answers too late, and a response larger than the client's bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from servers import serving

TOKEN = "tok-7Hq2"
PARTNER_KEY = "pk-19"
SPEC = Path(__file__).with_name("shop") / "openapi.yaml"
PRODUCTS = [
    {"id": f"p-{i}", "name": f"Book {i}", "category": "books", "price": 10.0 + i}
    for i in range(1, 8)
]


@dataclass
class Shop:
    """What the service saw and holds."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    orders: dict[str, dict[str, Any]] = field(default_factory=dict)
    slow_seconds: float = 1.0
    recount_fails: bool = False


def app(shop: Shop) -> Starlette:
    """The Starlette app over ``shop``."""

    async def record(request: Request) -> dict[str, Any]:
        body = await request.body()
        entry = {
            "method": request.method,
            "path": request.url.path,
            "raw_path": request.scope.get("raw_path", b"").decode(),
            "query": list(request.query_params.multi_items()),
            "headers": dict(request.headers),
            "body": body.decode(),
        }
        shop.requests.append(entry)
        return entry

    def authorized(request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {TOKEN}"

    async def products(request: Request) -> Response:
        await record(request)
        limit = int(request.query_params.get("limit", "20"))
        start = int(request.query_params.get("cursor") or 0)
        page = [p for p in PRODUCTS if p["category"] == request.query_params["category"]]
        items = page[start : start + limit]
        more = start + limit < len(page)
        return JSONResponse({"items": items, "next_cursor": str(start + limit) if more else None})

    async def product(request: Request) -> Response:
        await record(request)
        if not authorized(request):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        pid = request.path_params["product_id"]
        found = [p for p in PRODUCTS if p["id"] == pid]
        if not found:
            return JSONResponse({"error": f"no product {pid}"}, status_code=404)
        return JSONResponse(found[0])

    async def orders(request: Request) -> Response:
        entry = await record(request)
        if not authorized(request):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        import json

        order = json.loads(entry["body"])
        order_id = f"o-{len(shop.orders) + 1}"
        shop.orders[order_id] = {**order, "id": order_id, "state": "placed"}
        return JSONResponse(shop.orders[order_id], status_code=201)

    async def order(request: Request) -> Response:
        await record(request)
        if not authorized(request):
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        order_id = request.path_params["order_id"]
        if order_id not in shop.orders:
            return JSONResponse({"error": f"no order {order_id}"}, status_code=404)
        if request.method == "DELETE":
            if shop.orders[order_id]["state"] == "shipped":
                return JSONResponse({"error": "already shipped"}, status_code=409)
            shop.orders[order_id]["state"] = "cancelled"
            return Response(status_code=204)
        return JSONResponse(shop.orders[order_id])

    async def refunds(request: Request) -> Response:
        entry = await record(request)
        return JSONResponse({"refund": "r-1", "received": entry["body"]}, status_code=201)

    async def report(request: Request) -> Response:
        await record(request)
        return PlainTextResponse("reporting backend down", status_code=503)

    async def recount(request: Request) -> Response:
        await record(request)
        if shop.recount_fails:
            return PlainTextResponse("crashed", status_code=500)
        await asyncio.sleep(shop.slow_seconds)
        return JSONResponse({"started": True}, status_code=202)

    async def export(request: Request) -> Response:
        await record(request)
        return JSONResponse({"products": PRODUCTS * 400})

    async def partner_stock(request: Request) -> Response:
        await record(request)
        if request.query_params.get("key") != PARTNER_KEY:
            return JSONResponse({"error": "forbidden"}, status_code=403)
        return JSONResponse({"p-1": 4})

    async def moved(request: Request) -> Response:
        await record(request)
        return Response(status_code=302, headers={"location": "http://attacker.invalid/x"})

    async def elsewhere(request: Request) -> Response:
        await record(request)
        return JSONResponse({"error": "no such route"}, status_code=404)

    async def spec(request: Request) -> Response:
        return PlainTextResponse(SPEC.read_text(), media_type="application/yaml")

    return Starlette(
        routes=[
            Route("/api/products", products),
            Route("/api/products/{product_id}", product),
            Route("/api/orders", orders, methods=["POST"]),
            Route("/api/orders/{order_id}", order, methods=["GET", "DELETE"]),
            Route("/api/orders/{order_id}/refunds", refunds, methods=["POST"]),
            Route("/api/reports/daily", report),
            Route("/api/stock/recount", recount, methods=["POST"]),
            Route("/api/catalogue/export", export),
            Route("/api/partners/stock", partner_stock),
            Route("/api/moved", moved),
            Route("/openapi.yaml", spec),
            Route("/{rest:path}", elsewhere, methods=["GET", "POST", "PUT", "DELETE"]),
        ]
    )


@contextmanager
def serve(shop: Shop) -> Iterator[str]:
    """Run the shop on 127.0.0.1 in a thread; yields its base URL (``http://host:port``)."""
    with serving(app(shop), what="shop server") as base:
        yield base
