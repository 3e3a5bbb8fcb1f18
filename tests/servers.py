"""Real servers for the tests: an ASGI app under uvicorn on 127.0.0.1, in a thread.

Waiting for a server has no deadline of its own: a loaded 2-core machine may take
seconds to start one, and pytest's own timeout ends a test that truly hangs.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serving(
    app: Any, *, port: int | None = None, what: str = "server", **config: Any
) -> Iterator[str]:
    """``app`` served by uvicorn on 127.0.0.1 (on ``port``, or a free one) in a thread;
    yields its base URL and stops it afterwards."""
    import uvicorn

    port = port if port is not None else free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", **config)
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError(f"the {what} stopped before it started serving")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
