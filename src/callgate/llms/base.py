"""What every model adapter shares: the request, the response, token usage, the interface.

A model adapter is one method, ``await model.complete(request) -> ModelResponse``,
plus the name of the provider format its responses are in (``model.format``,
one of `callgate.llms.formats.FORMATS`). The agent loop builds the request in
that format (messages and tool definitions) and reads the response with that
format's ``extract``; an adapter never interprets tool calls itself.
"""

from __future__ import annotations

import abc
import asyncio
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Model", "ModelRequest", "ModelResponse", "Usage"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens one model call (or a whole run) consumed, as the provider reported them."""

    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRequest:
    """One call to a model: the system prompt, the conversation and the tools, in its format.

    ``messages`` is the conversation so far in the model's provider format
    (chat messages, Responses input items, Anthropic messages, Gemini
    contents); ``tools`` are the tool definitions of the tools this run may
    use, in the same format. ``step`` counts model calls in the run, from 1.
    """

    system: str | None
    messages: Sequence[Mapping[str, Any]]
    tools: Sequence[Mapping[str, Any]]
    format: str = "openai_chat"
    """The provider format ``messages`` and ``tools`` are written in."""
    step: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """A model's answer: the provider's response object (SDK object or decoded JSON, or
    text for the ``text`` format) and the token usage when the provider reports it."""

    raw: Any
    usage: Usage | None = None
    model: str = ""
    """The model that answered, as the provider named it."""
    metadata: Mapping[str, Any] = field(default_factory=dict)


class Model(abc.ABC):
    """A language model behind one provider format.

    Subclasses set ``format`` (the provider format of their responses) and
    ``name`` (shown in transcripts) and implement `complete`.
    """

    format: str = "openai_chat"
    name: str = "model"

    @abc.abstractmethod
    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request`` to the model and return its response.

        Raise for transport failures (network, rate limit, authentication):
        the agent ends the run with reason ``model_error`` and records why.
        """

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r}, format={self.format!r})"


class ClientPerLoop:
    """The SDK client a model built, one per event loop it runs on.

    An ``openai.AsyncOpenAI`` or ``anthropic.AsyncAnthropic`` client keeps its
    connections on the loop it first ran on; on another loop (a run resumed on
    another thread, ``asyncio.run`` called twice) its next request fails with
    'Event loop is closed' or '... bound to a different event loop'. So the model
    keeps the client it built for the first loop it meets and builds one more, with
    the same settings, for each other loop, dropped with that loop. A client the
    caller passed in is the caller's to manage and is used as it is, on every loop.
    """

    def __init__(self, first: Any, make: Callable[[], Any] | None) -> None:
        self.first = first
        self._make = make
        self._first_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._others: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def current(self) -> Any:
        """The client for the running event loop (built on first use there)."""
        if self._make is None:
            return self.first
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._first_loop is None:
                self._first_loop = weakref.ref(loop)
            if self._first_loop() is loop:
                return self.first
            client = self._others.get(loop)
            if client is None:
                client = self._others[loop] = self._make()
            return client
