"""How a conversation is written in each provider format.

`callgate.providers` reads calls out of a response (``extract``) and writes
observations back (``render``). A loop also needs the rest of the
conversation in the same format: the user's message, the model's own turn
appended as the provider expects it back, and the token usage. Each
`Format` bundles those with the provider module's three functions; the agent
loop only ever talks to a `Format`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from callgate.calls import Observation
from callgate.errors import DefinitionError
from callgate.llms.base import Usage
from callgate.providers import anthropic, gemini, openai_chat, openai_responses, text
from callgate.providers.base import Extraction, Tools, as_data, as_list, pick

__all__ = ["FORMATS", "Format", "get_format"]

Message = dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Format:
    """One provider format as the agent loop uses it."""

    name: str
    extract: Callable[[Any], Extraction]
    render: Callable[[Sequence[Observation]], list[Message]]
    tool_definitions: Callable[[Tools], list[Message]]
    user: Callable[[str], Message]
    """The user's message."""
    assistant: Callable[[Any], list[Message]]
    """The model's response as the message(s) to append to the conversation."""
    usage: Callable[[Any], Usage | None]
    """The token usage the response reports, if any."""


# Fields the model wrote itself are kept exactly; elsewhere, null fields that SDK
# objects carry (``"refusal": null``, ``"citations": null``) are dropped so that the
# turn can be sent back to any server, including local OpenAI-compatible ones.
_VERBATIM = frozenset({"input", "arguments", "args", "partial_json"})


def _compact(node: Any) -> Any:
    if isinstance(node, Mapping):
        return {k: (v if k in _VERBATIM else _compact(v)) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_compact(v) for v in node]
    return node


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(data: Any, node: str, inp: str, out: str) -> Usage | None:
    found = pick(data, node)
    if not isinstance(found, Mapping):
        return None
    return Usage(input_tokens=_int(found.get(inp)), output_tokens=_int(found.get(out)))


def _plain_user(content: str) -> Message:
    return {"role": "user", "content": content}


# -- OpenAI Chat Completions ------------------------------------------------------


def _chat_message(raw: Any) -> Mapping[str, Any]:
    data = as_data(raw)
    if isinstance(data, Mapping) and "choices" in data:
        choices = as_list(data["choices"])
        data = choices[0] if choices else {}
    message = pick(data, "message")
    return message if isinstance(message, Mapping) else (data if isinstance(data, Mapping) else {})


def _chat_assistant(raw: Any) -> list[Message]:
    message = _chat_message(raw)
    turn: Message = {"role": "assistant", "content": message.get("content")}
    calls = as_list(message.get("tool_calls"))
    if calls:
        turn["tool_calls"] = [_compact(c) for c in calls]
    if isinstance(message.get("function_call"), Mapping):
        turn["function_call"] = _compact(message["function_call"])
    return [turn]


def _chat_usage(raw: Any) -> Usage | None:
    return _usage(as_data(raw), "usage", "prompt_tokens", "completion_tokens")


# -- OpenAI Responses ---------------------------------------------------------------


def _responses_assistant(raw: Any) -> list[Message]:
    data = as_data(raw)
    output = data if isinstance(data, list) else as_list(pick(data, "output"))
    return [_compact(as_data(item)) for item in output if isinstance(as_data(item), Mapping)]


def _responses_usage(raw: Any) -> Usage | None:
    return _usage(as_data(raw), "usage", "input_tokens", "output_tokens")


# -- Anthropic Messages ---------------------------------------------------------------


def _anthropic_assistant(raw: Any) -> list[Message]:
    blocks = as_list(pick(as_data(raw), "content"))
    return [{"role": "assistant", "content": [_compact(as_data(b)) for b in blocks]}]


def _anthropic_usage(raw: Any) -> Usage | None:
    return _usage(as_data(raw), "usage", "input_tokens", "output_tokens")


# -- Gemini ---------------------------------------------------------------------------


def _gemini_user(content: str) -> Message:
    return {"role": "user", "parts": [{"text": content}]}


def _gemini_assistant(raw: Any) -> list[Message]:
    candidates = as_list(pick(as_data(raw), "candidates"))
    content = pick(candidates[0], "content") if candidates else None
    if not isinstance(content, Mapping):
        return [{"role": "model", "parts": []}]
    return [{"role": "model", **_compact(content)}]


def _gemini_usage(raw: Any) -> Usage | None:
    return _usage(as_data(raw), "usageMetadata", "promptTokenCount", "candidatesTokenCount")


# -- plain text (Hermes tags, fenced JSON) ----------------------------------------------


def _text_of(raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    content = _chat_message(raw).get("content")
    return content if isinstance(content, str) else ""


def _text_extract(raw: Any) -> Extraction:
    return text.extract(_text_of(raw))


def _text_assistant(raw: Any) -> list[Message]:
    return [{"role": "assistant", "content": _text_of(raw)}]


def _text_usage(raw: Any) -> Usage | None:
    return None if isinstance(raw, str) else _chat_usage(raw)


FORMATS: Mapping[str, Format] = {
    "openai_chat": Format(
        name="openai_chat",
        extract=openai_chat.extract,
        render=openai_chat.render,
        tool_definitions=openai_chat.tool_definitions,
        user=_plain_user,
        assistant=_chat_assistant,
        usage=_chat_usage,
    ),
    "openai_responses": Format(
        name="openai_responses",
        extract=openai_responses.extract,
        render=openai_responses.render,
        tool_definitions=openai_responses.tool_definitions,
        user=_plain_user,
        assistant=_responses_assistant,
        usage=_responses_usage,
    ),
    "anthropic": Format(
        name="anthropic",
        extract=anthropic.extract,
        render=anthropic.render,
        tool_definitions=anthropic.tool_definitions,
        user=_plain_user,
        assistant=_anthropic_assistant,
        usage=_anthropic_usage,
    ),
    "gemini": Format(
        name="gemini",
        extract=gemini.extract,
        render=gemini.render,
        tool_definitions=gemini.tool_definitions,
        user=_gemini_user,
        assistant=_gemini_assistant,
        usage=_gemini_usage,
    ),
    "text": Format(
        name="text",
        extract=_text_extract,
        render=text.render,
        tool_definitions=text.tool_definitions,
        user=_plain_user,
        assistant=_text_assistant,
        usage=_text_usage,
    ),
}
"""Every provider format a model adapter may speak, by name."""


def get_format(name: str) -> Format:
    """The format called ``name``; a developer error names the known ones."""
    found = FORMATS.get(name)
    if found is None:
        raise DefinitionError(f"unknown provider format {name!r}; use one of {sorted(FORMATS)}")
    return found
