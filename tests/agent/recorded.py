"""A local stand-in for the OpenAI and Anthropic HTTP APIs, answering recorded payloads.

It listens on 127.0.0.1 only and speaks HTTP/1.1 with keep-alive, as the real
services do, so an SDK client (``openai.AsyncOpenAI``, ``anthropic.AsyncAnthropic``)
keeps its connection open between requests, and between runs: a client that
outlives the event loop it was first used on is exercised as in production.
"""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PAYLOADS = Path(__file__).parent / "payloads"


def payload(name: str) -> Any:
    """A recorded response body from ``payloads/``."""
    return json.loads((PAYLOADS / name).read_text(encoding="utf-8"))


class RecordedServer:
    """Answers each POST with the next queued (status, body) and records what it got.

    ``requests`` holds (path, body, headers) per request; ``connections`` the
    client address of each request's connection, in the same order, so a test
    can tell a reused connection from a new one.
    """

    def __init__(self) -> None:
        self.queue: list[tuple[int, Any]] = []
        self.requests: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.connections: list[tuple[str, int]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive: the connection stays open

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                outer.requests.append(
                    (self.path, body, {k.lower(): v for k, v in self.headers.items()})
                )
                outer.connections.append(self.client_address)
                status, answer = outer.queue.pop(0) if outer.queue else (500, {"error": "empty"})
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def handle(self) -> None:
                # A client that drops a kept-open connection is not the server's error.
                with contextlib.suppress(ConnectionError):
                    super().handle()

            def log_message(self, *args: Any) -> None:
                pass

        # Its handler threads are daemons: a kept-open connection does not hold the exit.
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
