"""A fake payment service: its own process, its own durable record, idempotency keys honoured.

Run: ``python payment_service.py DB_PATH``; it prints ``port N`` once it listens
on 127.0.0.1. Endpoints (JSON):

* ``POST /charges`` ``{"key", "operation_id", "amount", "source"}``: make the
  charge, once per key. The same key again returns the first charge (200);
  the same key with another operation or amount is refused (409).
* ``GET /charges/KEY``: the charge made under KEY, or 404.
* ``GET /charges``: every charge. ``GET /requests``: every POST received, with
  its ``source`` (``handler`` or ``reconcile``), to count executions.

Every write is committed with ``synchronous=FULL`` before the answer is sent.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Store:
    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS charges (key TEXT PRIMARY KEY, charge_id TEXT NOT NULL, "
            "operation_id TEXT NOT NULL, amount INTEGER NOT NULL)"
        )
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS requests (n INTEGER PRIMARY KEY, key TEXT, source TEXT)"
        )
        self.lock = threading.Lock()

    def charge(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute(
                "INSERT INTO requests (key, source) VALUES (?, ?)",
                (body["key"], body.get("source", "")),
            )
            row = self.conn.execute(
                "SELECT charge_id, operation_id, amount FROM charges WHERE key = ?",
                (body["key"],),
            ).fetchone()
            if row is None:
                charge = {
                    "charge_id": "ch_" + uuid.uuid4().hex[:16],
                    "operation_id": body["operation_id"],
                    "amount": body["amount"],
                }
                self.conn.execute(
                    "INSERT INTO charges VALUES (?, ?, ?, ?)",
                    (body["key"], charge["charge_id"], charge["operation_id"], charge["amount"]),
                )
                status = 201
            else:
                charge = {"charge_id": row[0], "operation_id": row[1], "amount": row[2]}
                same = (row[1], row[2]) == (body["operation_id"], body["amount"])
                status = 200 if same else 409
            self.conn.execute("COMMIT")
        return status, charge

    def rows(self, sql: str, *params: Any) -> list[Any]:
        with self.lock:
            return self.conn.execute(sql, params).fetchall()


def make_handler(store: Store) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, value: Any) -> None:
            data = json.dumps(value).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client was killed after its request: the charge stands, as at a bank

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            try:
                body = json.loads(self.rfile.read(length))
            except ValueError:  # cut short: the client was killed while sending
                self._send(400, {"error": "the request body is not complete JSON"})
                return
            status, charge = store.charge(body)
            self._send(status, charge)

        def do_GET(self) -> None:
            if self.path == "/charges":
                rows = store.rows("SELECT key, charge_id, operation_id, amount FROM charges")
                self._send(
                    200,
                    [
                        dict(zip(("key", "charge_id", "operation_id", "amount"), r, strict=True))
                        for r in rows
                    ],
                )
            elif self.path == "/requests":
                rows = store.rows("SELECT key, source FROM requests ORDER BY n")
                self._send(200, [{"key": k, "source": s} for k, s in rows])
            elif self.path.startswith("/charges/"):
                key = self.path.removeprefix("/charges/")
                rows = store.rows(
                    "SELECT charge_id, operation_id, amount FROM charges WHERE key = ?", key
                )
                if rows:
                    r = rows[0]
                    self._send(200, {"charge_id": r[0], "operation_id": r[1], "amount": r[2]})
                else:
                    self._send(404, {"error": "no charge under this key"})
            else:
                self._send(404, {"error": "not found"})

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


def main() -> None:
    store = Store(sys.argv[1])
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(store))
    server.daemon_threads = True
    print(f"port {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
