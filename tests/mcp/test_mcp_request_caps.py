"""The upstream's requests of the client are capped: a number per call, a number held
between calls, a sampling request's size; a sampling request's ``includeContext`` is
rewritten to ``"none"`` (issue 30, MED-3)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import anyio
import mcp_types
import pytest

from callgate.mcp.forward import ClientRequests, _Flight

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


class Model:
    """A client connection with a back-channel and a model, keeping what it was asked."""

    can_send_request = True
    client_capabilities = mcp_types.ClientCapabilities(
        sampling=mcp_types.SamplingCapability(), roots=mcp_types.RootsCapability()
    )

    def __init__(self) -> None:
        self.asked: list[Any] = []

    async def send_request(self, request: Any, result_type: Any, **_: Any) -> Any:
        self.asked.append(request)
        return mcp_types.CreateMessageResult(
            role="assistant", content=mcp_types.TextContent(text="ok"), model="m"
        )


def sampling(text: str = "hi", include_context: Any = None) -> mcp_types.CreateMessageRequest:
    return mcp_types.CreateMessageRequest(
        params=mcp_types.CreateMessageRequestParams(
            messages=[
                mcp_types.SamplingMessage(role="user", content=mcp_types.TextContent(text=text))
            ],
            max_tokens=5,
            include_context=include_context,
        )
    )


def in_call(requests: ClientRequests, model: Model) -> _Flight:
    """A call of ``model``'s client in flight."""
    flight = _Flight(ctx=SimpleNamespace(session=model, request_id=1), owner=("bob", None))
    requests._flights.append(flight)
    return flight


async def test_requests_beyond_the_cap_per_call_are_refused() -> None:
    """With a cap of 3, the 4th and 5th sampling requests of one call are refused, naming
    the cap, and the client's model is asked 3 times."""
    events: list[dict[str, Any]] = []
    requests = ClientRequests(
        server_name="evil", max_requests_per_call=3, record=lambda k, d: events.append(d)
    )
    model = Model()
    in_call(requests, model)
    with anyio.fail_after(5):
        answers = [await requests.ask(sampling()) for _ in range(5)]
    refused = [a for a in answers if isinstance(a, mcp_types.ErrorData)]
    assert len(model.asked) == 3
    assert len(refused) == 2
    assert "3 requests were already forwarded during this call" in refused[0].message
    assert [e["outcome"] for e in events] == ["answered"] * 3 + ["refused"] * 2


async def test_a_sampling_request_over_the_size_cap_is_refused() -> None:
    """A sampling request of 200,000 characters (cap 100,000) is refused, size and cap named."""
    requests = ClientRequests(server_name="evil")
    model = Model()
    in_call(requests, model)
    with anyio.fail_after(5):
        answer = await requests.ask(sampling("X" * 200_000))
    assert isinstance(answer, mcp_types.ErrorData)
    assert "200000 characters, over the cap of 100000" in answer.message
    assert model.asked == []


async def test_include_context_is_rewritten_to_none() -> None:
    """``includeContext: allServers`` reaches the client as ``none``; the audit says what
    was asked."""
    events: list[dict[str, Any]] = []
    requests = ClientRequests(server_name="evil", record=lambda k, d: events.append(d))
    model = Model()
    in_call(requests, model)
    with anyio.fail_after(5):
        await requests.ask(sampling(include_context="allServers"))
    [asked] = model.asked
    assert asked.params.include_context == "none"
    assert events[0]["include_context_asked"] == "allServers"


async def test_held_requests_beyond_the_cap_are_refused() -> None:
    """With no client yet, 2 roots requests wait (cap 2) and a 3rd is refused at once."""
    requests = ClientRequests(server_name="files", max_held=2)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:
            for _ in range(2):
                tasks.start_soon(requests.ask, mcp_types.ListRootsRequest())
            await anyio.wait_all_tasks_blocked()
            third = await requests.ask(mcp_types.ListRootsRequest())
            tasks.cancel_scope.cancel()
    assert isinstance(third, mcp_types.ErrorData)
    assert "2 requests already wait for a client" in third.message
