"""A real A2A agent for the tests: a2a-sdk's JSON-RPC server under uvicorn on 127.0.0.1.

Its executor answers each message with one text message naming the skill the
message asked for (from its metadata) and the text it received, and records both.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from a2a.helpers.proto_helpers import new_text_message
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette

from servers import free_port, serving


class Clerk(AgentExecutor):
    """Answers ``<skill>: <text>``; keeps what it received."""

    def __init__(self) -> None:
        self.received: list[tuple[str, str]] = []

    async def execute(self, context: Any, event_queue: Any) -> None:
        """One reply per message."""
        metadata = context.message.metadata if context.message is not None else {}
        skill = str(metadata["skill"]) if "skill" in metadata else "?"
        text = context.get_user_input()
        self.received.append((skill, text))
        await event_queue.enqueue_event(new_text_message(f"{skill}: done ({text})"))

    async def cancel(self, context: Any, event_queue: Any) -> None:
        """Nothing to cancel."""


def card_for(url: str) -> AgentCard:
    """The clerk's card, at ``url``."""
    return AgentCard(
        name="Clerk",
        description="Files and looks up records.",
        version="1.0",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id="file", name="File", description="Files a record.", tags=["records"]),
            AgentSkill(id="find", name="Find", description="Finds a record.", tags=["records"]),
        ],
    )


@contextmanager
def serve(clerk: Clerk | None = None) -> Iterator[tuple[AgentCard, Clerk]]:
    """Run the clerk (or ``clerk``, another executor) on 127.0.0.1; yields its card and it."""
    port = free_port()
    card = card_for(f"http://127.0.0.1:{port}/a2a")
    clerk = clerk or Clerk()
    handler = DefaultRequestHandler(
        agent_executor=clerk, task_store=InMemoryTaskStore(), agent_card=card
    )
    app = Starlette(
        routes=[*create_jsonrpc_routes(handler, "/a2a"), *create_agent_card_routes(card)]
    )
    with serving(app, port=port, what="A2A agent"):
        yield card, clerk
