"""OpenAI Responses API: ``function_call`` output items in, ``function_call_output`` items out.

`extract` reads a ``Response`` (or its ``output`` list) as an SDK object or
decoded JSON; each ``function_call`` item is a call keyed by its ``call_id``,
the ``output_text`` of ``message`` items is the prose. `render` answers each
call with a ``function_call_output`` input item for the next request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from callgate.calls import Observation, ToolCall
from callgate.providers.base import (
    Extraction,
    Tools,
    as_data,
    as_list,
    as_text,
    cut_off,
    finish,
    is_complete_json,
    observation_text,
    pick,
    specs_of,
    stopped_early,
    unreadable,
)
from callgate.providers.openai_chat import strict_parameters

__all__ = ["extract", "render", "tool_definitions"]

_UNSUPPORTED_CALLS = frozenset({"custom_tool_call"})


def extract(response: Any) -> Extraction:
    """The function calls and prose of a response, in output order.

    Accepts a ``Response`` or its ``output`` list, as SDK objects or decoded
    JSON. Output items of other kinds (reasoning, built-in tools) are not
    calls for the gate and are skipped.
    """
    data = as_data(response)
    output = data if isinstance(data, list) else as_list(pick(data, "output"))
    status = pick(data, "status")
    reason = pick(pick(data, "incomplete_details"), "reason")
    incomplete = status == "incomplete"
    truncated = isinstance(status, str) and status != "completed"
    stop = reason if incomplete and isinstance(reason, str) else status
    why = stopped_early(stop if isinstance(stop, str) else "incomplete")
    items: list[ToolCall | Observation] = []
    text: list[str] = []
    refusal: list[str] = []
    for item in output:
        item = as_data(item)
        kind = pick(item, "type")
        if kind == "message":
            for part in as_list(pick(item, "content")):
                if pick(part, "type") == "output_text":
                    text.append(as_text(pick(part, "text")))
                elif pick(part, "type") == "refusal":
                    refusal.append(as_text(pick(part, "refusal")))
        elif kind == "function_call":
            items.append(_call(item, why if truncated else None))
        elif isinstance(kind, str) and kind in _UNSUPPORTED_CALLS:
            call_id = as_text(pick(item, "call_id"))
            items.append(
                unreadable(call_id, "", f"output items of type {kind!r} are not supported")
            )
    return finish(
        items,
        text="".join(text),
        refusal="".join(refusal) or None,
        stop_reason=stop if isinstance(stop, str) else None,
        truncated=truncated,
    )


def _call(item: Mapping[str, Any], cut: str | None) -> ToolCall | Observation:
    call_id = as_text(item.get("call_id"))
    name = as_text(item.get("name"))
    arguments = item.get("arguments")
    if arguments is None:
        arguments = ""
    if isinstance(arguments, Mapping):
        return ToolCall(id=call_id, name=name, arguments=dict(arguments))
    if not isinstance(arguments, str):
        return unreadable(call_id, name, "'arguments' must be a string of JSON")
    if item.get("status") == "incomplete" and cut is None:
        cut = stopped_early("incomplete")
    if cut is not None and not is_complete_json(arguments):
        return cut_off(call_id, name, cut)
    return ToolCall(id=call_id, name=name, arguments=arguments)


def render(observations: Sequence[Observation]) -> list[dict[str, Any]]:
    """One ``function_call_output`` input item per observation, answering its ``call_id``."""
    return [
        {"type": "function_call_output", "call_id": obs.call_id, "output": observation_text(obs)}
        for obs in observations
    ]


def tool_definitions(tools: Tools) -> list[dict[str, Any]]:
    """Responses ``tools``: flat ``{"type": "function", "name": ..., "strict": ...}`` entries."""
    definitions = []
    for spec in specs_of(tools):
        parameters, strict = strict_parameters(spec)
        definition: dict[str, Any] = {"type": "function", "name": spec.name}
        if spec.description:
            definition["description"] = spec.description
        definition["parameters"] = parameters
        definition["strict"] = strict
        definitions.append(definition)
    return definitions
