"""`AnthropicModel`: Anthropic's Messages API through the official SDK.

The ``anthropic`` package is an optional extra (``pip install
'callgate[anthropic]'``) imported when a model is built, never when callgate
is imported.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any

from callgate.errors import DefinitionError
from callgate.llms.base import ClientPerLoop, Model, ModelRequest, ModelResponse
from callgate.llms.formats import get_format

__all__ = ["AnthropicModel"]


def _sdk() -> Any:
    try:
        import anthropic
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        raise DefinitionError(
            "AnthropicModel needs the anthropic package: pip install 'callgate[anthropic]'"
        ) from exc
    return anthropic


class AnthropicModel(Model):
    """A model behind the Anthropic Messages API.

    Args:
        model: the model name, e.g. ``"claude-sonnet-4-5"``.
        max_tokens: the output limit of each response (the API requires one).
        base_url: default the SDK's (``ANTHROPIC_BASE_URL`` or api.anthropic.com).
        api_key: default ``ANTHROPIC_API_KEY``.
        client: an ``anthropic.AsyncAnthropic`` to use instead of building one.
        options: extra request fields (``temperature``, ``tool_choice``...).
        timeout / max_retries: passed to the SDK client.
    """

    format = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = 4096,
        base_url: str | None = None,
        api_key: str | None = None,
        client: Any = None,
        options: Mapping[str, Any] | None = None,
        timeout: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        self.model = model
        self.name = model
        self.max_tokens = max_tokens
        self.options = dict(options or {})
        self._usage = get_format("anthropic").usage
        make: Callable[[], Any] | None = None
        if client is None:
            sdk = _sdk()  # a missing package is named before a missing key
            key = api_key or os.environ.get("ANTHROPIC_API_KEY")
            if not key:
                raise DefinitionError(
                    "no Anthropic API key: set ANTHROPIC_API_KEY (or pass api_key=...)"
                )
            make = functools.partial(
                sdk.AsyncAnthropic,
                api_key=key,
                base_url=base_url,
                timeout=timeout,
                max_retries=max_retries,
            )
            client = make()
        self.client = client
        self._clients = ClientPerLoop(client, make)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        kwargs: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": list(request.messages),
            **self.options,
        }
        if request.system:
            kwargs["system"] = request.system
        if request.tools:
            kwargs["tools"] = list(request.tools)
        response = await self._clients.current().messages.create(**kwargs)
        return ModelResponse(
            raw=response,
            usage=self._usage(response),
            model=str(getattr(response, "model", "") or self.model),
        )
