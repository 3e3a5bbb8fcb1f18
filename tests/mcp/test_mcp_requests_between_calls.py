"""An upstream's request made while no call is in flight serves no client's call: sampling
and elicitation are refused at once, and roots wait for a client only while a single
principal is known to the proxy (issue 30, HIGH-1)."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types
import pytest

from callgate.mcp.forward import ClientRequests

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


class FakeSession:
    """A client connection with a back-channel that answers everything, counting requests."""

    can_send_request = True

    def __init__(self) -> None:
        self.client_capabilities = mcp_types.ClientCapabilities(
            sampling=mcp_types.SamplingCapability(),
            roots=mcp_types.RootsCapability(),
            elicitation=mcp_types.ElicitationCapability(form=mcp_types.FormElicitationCapability()),
        )
        self.asked: list[str] = []

    async def send_request(self, request: Any, result_type: Any, **_: Any) -> Any:
        self.asked.append(type(request).__name__)
        if isinstance(request, mcp_types.ListRootsRequest):
            return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri="file:///home/bob")])
        if isinstance(request, mcp_types.ElicitRequest):
            return mcp_types.ElicitResult(action="accept", content={"name": "Bob"})
        return mcp_types.CreateMessageResult(
            role="assistant", content=mcp_types.TextContent(text="bob's model"), model="m"
        )


class NoBackChannel(FakeSession):
    """A 2026-07-28 client: no back-channel, requests reach it only with its calls."""

    can_send_request = False


SAMPLING = mcp_types.CreateMessageRequest(
    params=mcp_types.CreateMessageRequestParams(
        messages=[mcp_types.SamplingMessage(role="user", content=mcp_types.TextContent(text="hi"))],
        max_tokens=10,
    )
)
ELICITATION = mcp_types.ElicitRequest(
    params=mcp_types.ElicitRequestFormParams(
        message="name?", requested_schema={"type": "object", "properties": {}}
    )
)


@pytest.mark.parametrize("request_", [SAMPLING, ELICITATION], ids=["sampling", "elicitation"])
async def test_sampling_or_elicitation_between_calls_is_refused(request_: Any) -> None:
    """With no call in flight, a sampling or elicitation request is refused naming why, and
    the client seen last (perhaps another principal's) is never asked."""
    events: list[tuple[str, Any]] = []
    requests = ClientRequests(server_name="evil", record=lambda k, d: events.append((k, d)))
    bob = FakeSession()
    requests.client_seen(bob, "bob")
    with anyio.fail_after(5):
        answer = await requests.ask(request_)
    assert isinstance(answer, mcp_types.ErrorData)
    assert "no call is in flight" in answer.message
    assert bob.asked == []
    [(_, data)] = events
    assert data["outcome"] == "refused"


async def test_roots_between_calls_go_to_the_only_principal() -> None:
    """With one principal known, a roots request between calls is answered by its client."""
    requests = ClientRequests(server_name="files")
    alice = FakeSession()
    requests.client_seen(alice, "alice")
    with anyio.fail_after(5):
        answer = await requests.ask(mcp_types.ListRootsRequest())
    assert isinstance(answer, mcp_types.ListRootsResult)
    assert alice.asked == ["ListRootsRequest"]


async def test_roots_between_calls_are_refused_with_two_principals() -> None:
    """With clients of two principals known, a roots request between calls is refused: one
    principal's folders are never given for the other's."""
    requests = ClientRequests(server_name="files")
    alice, bob = FakeSession(), FakeSession()
    requests.client_seen(alice, "alice")
    requests.client_seen(bob, "bob")
    with anyio.fail_after(5):
        answer = await requests.ask(mcp_types.ListRootsRequest())
    assert isinstance(answer, mcp_types.ErrorData)
    assert "several principals" in answer.message
    assert alice.asked == bob.asked == []


async def test_held_roots_are_refused_when_a_second_principal_arrives() -> None:
    """A roots request held for a client (none known yet) is refused, not handed over, once
    clients of two principals are known."""
    requests = ClientRequests(server_name="files")
    alice, bob = FakeSession(), FakeSession()
    answers: list[Any] = []
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tasks:

            async def asking() -> None:
                answers.append(await requests.ask(mcp_types.ListRootsRequest()))

            tasks.start_soon(asking)
            await anyio.wait_all_tasks_blocked()
            requests.client_seen(NoBackChannel(), "alice")
            requests.client_seen(bob, "bob")
    [answer] = answers
    assert isinstance(answer, mcp_types.ErrorData)
    assert alice.asked == bob.asked == []


async def test_roots_between_calls_are_refused_with_two_principals_without_back_channel() -> None:
    """Clients without a back-channel (2026-07-28) count as principals too: with Alice and
    Bob seen, a roots request between calls is refused rather than put before Bob's call."""
    requests = ClientRequests(server_name="files")
    requests.client_seen(NoBackChannel(), "alice")
    requests.client_seen(NoBackChannel(), "bob")
    with anyio.fail_after(5):
        answer = await requests.ask(mcp_types.ListRootsRequest())
    assert isinstance(answer, mcp_types.ErrorData)
    assert "several principals" in answer.message
