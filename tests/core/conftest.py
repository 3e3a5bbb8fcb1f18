"""``CALLGATE_DRIVER=async`` runs the whole core suite with `Run.submit` carried out by
`Run.asubmit` (on an event loop of its own thread), so every core test also checks the
async driver; `make test` runs the suite both ways."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import Any

import anyio
import pytest

from callgate.calls import Observation, ToolCall
from callgate.gate import Run

_submit = Run.submit


def _through_asubmit(
    self: Run, calls: Iterable[ToolCall], *, deadline: float | None = None
) -> list[Observation]:
    """`Run.submit`'s contract, carried out by `Run.asubmit` (in a thread of its own, so a
    test that already runs an event loop can still call it)."""
    box: dict[str, Any] = {}

    def main() -> None:
        try:
            box["result"] = anyio.run(lambda: self.asubmit(calls, deadline=deadline))
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=main)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    result: list[Observation] = box["result"]
    return result


@pytest.fixture(autouse=True)
def _driver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.environ.get("CALLGATE_DRIVER") == "async":
        if request.node.get_closest_marker("sync_driver") is not None:
            pytest.skip("tests the sync driver itself")
        monkeypatch.setattr(Run, "submit", _through_asubmit)
