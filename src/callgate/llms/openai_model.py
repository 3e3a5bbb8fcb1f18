"""`OpenAIModel`: OpenAI's Chat Completions or Responses API through the official SDK.

The ``openai`` package is an optional extra (``pip install 'callgate[openai]'``)
imported when a model is built, never when callgate is imported. Any
OpenAI-compatible server (vLLM, llama.cpp server, Ollama, LM Studio) works
through ``base_url``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any, Literal

from callgate.errors import DefinitionError
from callgate.llms.base import ClientPerLoop, Model, ModelRequest, ModelResponse
from callgate.llms.formats import get_format

__all__ = ["OpenAIModel"]

LOCAL_KEY = "not-needed"
"""The API key sent to an OpenAI-compatible server when none is configured."""


def _sdk() -> Any:
    try:
        import openai
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        raise DefinitionError(
            "OpenAIModel needs the openai package: pip install 'callgate[openai]'"
        ) from exc
    return openai


class OpenAIModel(Model):
    """A model behind the OpenAI API (or an OpenAI-compatible server).

    Args:
        model: the model name, e.g. ``"gpt-4.1"``.
        api: ``"chat"`` (Chat Completions, default; what compatible servers
            speak) or ``"responses"`` (the Responses API).
        base_url: the server, e.g. ``"http://localhost:8000/v1"`` (default:
            the SDK's, i.e. ``OPENAI_BASE_URL`` or api.openai.com).
        api_key: default ``OPENAI_API_KEY``; a server given by ``base_url``
            needs none.
        client: an ``openai.AsyncOpenAI`` to use instead of building one.
        options: extra request fields (``temperature``, ``max_completion_tokens``...).
        timeout / max_retries: passed to the SDK client.
    """

    def __init__(
        self,
        model: str,
        *,
        api: Literal["chat", "responses"] = "chat",
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        options: Mapping[str, Any] | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        if api not in ("chat", "responses"):
            raise DefinitionError(f"OpenAIModel api must be 'chat' or 'responses', got {api!r}")
        self.model = model
        self.name = model
        self.api = api
        self.format = "openai_chat" if api == "chat" else "openai_responses"
        self._usage = get_format(self.format).usage
        self.options = dict(options or {})
        make: Callable[[], Any] | None = None
        if client is None:
            sdk = _sdk()  # a missing package is named before a missing key
            key = api_key or os.environ.get("OPENAI_API_KEY")
            if not key:
                if base_url is None:
                    raise DefinitionError(
                        "no OpenAI API key: set OPENAI_API_KEY (or pass api_key=...)"
                    )
                key = LOCAL_KEY
            make = functools.partial(
                sdk.AsyncOpenAI,
                api_key=key,
                base_url=base_url,
                timeout=timeout,
                max_retries=max_retries,
            )
            client = make()
        self.client = client
        self._clients = ClientPerLoop(client, make)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        kwargs: dict[str, Any] = {"model": self.model, **self.options}
        if self.api == "chat":
            system = [{"role": "system", "content": request.system}] if request.system else []
            kwargs["messages"] = [*system, *request.messages]
            if request.tools:
                kwargs["tools"] = list(request.tools)
            response = await self._clients.current().chat.completions.create(**kwargs)
        else:
            kwargs["input"] = list(request.messages)
            if request.system:
                kwargs["instructions"] = request.system
            if request.tools:
                kwargs["tools"] = list(request.tools)
            response = await self._clients.current().responses.create(**kwargs)
        return ModelResponse(
            raw=response,
            usage=self._usage(response),
            model=str(getattr(response, "model", "") or self.model),
        )
