"""OpenAI Responses API: ``function_call`` output items in, ``function_call_output`` items out.

`extract` reads a ``Response`` (or its ``output`` list) as an SDK object or
decoded JSON; each ``function_call`` item is a call keyed by its ``call_id``,
the ``output_text`` of ``message`` items is the prose. `StreamAssembler` does
the same from the streamed events (``response.output_item.added``,
``response.function_call_arguments.delta``, ``response.output_item.done``,
``response.completed``, ...). `render` answers each call with a
``function_call_output`` input item for the next request.
"""

from __future__ import annotations

from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from callgate.calls import Observation, ToolCall
from callgate.providers.base import (
    Extraction,
    Tools,
    as_data,
    as_list,
    as_text,
    checked,
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

__all__ = ["StreamAssembler", "extract", "render", "tool_definitions"]

_UNSUPPORTED_CALLS = frozenset({"custom_tool_call"})
_STREAM_CUT = "the stream ended before the response was complete"
_CALL_CUT = "the stream ended before this function_call was complete"


def extract(response: Any) -> Extraction:
    """The function calls and prose of a response, in output order.

    Accepts a ``Response`` or its ``output`` list, as SDK objects or decoded
    JSON (anything else raises `TypeError`). Output items of other kinds
    (reasoning, built-in tools) are not calls for the gate and are skipped.
    Unless the response's ``status`` is ``completed`` (a missing or empty
    status is not), and for any ``function_call`` item whose own ``status``
    is there and is not ``completed``, a call whose arguments are empty or
    not complete JSON may have been cut and is rejected. An ``output`` list
    passed on its own carries no status and is read as it stands.
    """
    data = checked(response, Mapping, list, format_name="openai_responses.extract")
    if isinstance(data, list):
        return _extraction(data, None, False, "")
    return _extraction(as_list(data.get("output")), *_ending(data))


def _ending(data: Mapping[str, Any]) -> tuple[str | None, bool, str]:
    """The stop reason, whether the response is truncated, and why its calls may be cut."""
    status = data.get("status")
    reason = pick(pick(data, "incomplete_details"), "reason")
    stop = reason if status == "incomplete" and isinstance(reason, str) else status
    stop = stop if isinstance(stop, str) else None
    return stop, status != "completed", stopped_early(stop or "")


def _extraction(
    output: list[Any],
    stop: str | None,
    truncated: bool,
    why: str,
    unfinished: Container[int] = (),
    unfinished_why: str = "",
) -> Extraction:
    """The extraction of ``output`` items; calls at ``unfinished`` positions were cut off."""
    items: list[ToolCall | Observation] = []
    text: list[str] = []
    refusal: list[str] = []
    for position, item in enumerate(output):
        item = as_data(item)
        kind = pick(item, "type")
        if kind == "message":
            for part in as_list(pick(item, "content")):
                if pick(part, "type") == "output_text":
                    text.append(as_text(pick(part, "text")))
                elif pick(part, "type") == "refusal":
                    refusal.append(as_text(pick(part, "refusal")))
        elif kind == "function_call" and position in unfinished:
            call_id = as_text(pick(item, "call_id"))
            items.append(cut_off(call_id, as_text(pick(item, "name")), unfinished_why))
        elif kind == "function_call":
            items.append(_call(item, why if truncated else None))
        elif isinstance(kind, str) and kind in _UNSUPPORTED_CALLS:
            call_id = as_text(pick(item, "call_id"))
            items.append(
                unreadable(call_id, "", f"output items of type '{kind}' are not supported")
            )
    return finish(
        items,
        text="".join(text),
        refusal="".join(refusal) or None,
        stop_reason=stop,
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
    status = item.get("status")
    if status is not None and status != "completed" and cut is None:
        cut = stopped_early(status if isinstance(status, str) else "")
    if cut is not None and not is_complete_json(arguments):
        return cut_off(call_id, name, cut)
    return ToolCall(id=call_id, name=name, arguments=arguments)


def render(observations: Sequence[Observation]) -> list[dict[str, Any]]:
    """One ``function_call_output`` input item per observation, answering its ``call_id``."""
    return [
        {"type": "function_call_output", "call_id": obs.call_id, "output": observation_text(obs)}
        for obs in observations
    ]


# -- streaming -----------------------------------------------------------------

_TERMINAL = frozenset({"response.completed", "response.incomplete", "response.failed"})
_TEXT_EVENTS = {
    "response.output_text.delta": "output_text",
    "response.output_text.done": "output_text",
    "response.refusal.delta": "refusal",
    "response.refusal.done": "refusal",
}


@dataclass(slots=True)
class _Item:
    added: Mapping[str, Any]
    done: Mapping[str, Any] | None = None
    deltas: list[str] = field(default_factory=list)
    arguments: str | None = None
    """The final argument text of ``response.function_call_arguments.done``."""
    parts: dict[int, tuple[str, list[str], str | None]] = field(default_factory=dict)
    """A message's content parts by ``content_index``: kind, deltas, final text."""

    def finished(self) -> bool:
        return self.done is not None or self.arguments is not None

    def final(self) -> Mapping[str, Any]:
        """The item as the final response would hold it, as far as the stream told."""
        done = self.done or {}
        item = {**self.added, **done}
        kind = item.get("type")
        if kind == "function_call" and not isinstance(done.get("arguments"), str):
            if self.deltas or self.arguments is not None:
                item["arguments"] = _joined(self.deltas, self.arguments)
            if self.done is None and self.arguments is not None:
                item["status"] = "completed"  # its arguments' done event says they are whole
        elif kind == "message" and self.parts and not isinstance(done.get("content"), list):
            item["content"] = [
                {"type": part, ("text" if part == "output_text" else part): _joined(d, f)}
                for part, d, f in (self.parts[i] for i in sorted(self.parts))
            ]
        return item


def _joined(deltas: list[str], final: str | None) -> str:
    return final if final is not None else "".join(deltas)


class StreamAssembler:
    """Assembles Responses stream events into an `Extraction`.

    Feed every event (SDK ``ResponseStreamEvent`` or decoded JSON) to `feed`,
    then call `extraction`. Output items are keyed by ``output_index`` (or
    their ``item_id``); a call's arguments are the final text of its
    ``response.function_call_arguments.done`` or ``response.output_item.done``
    event, else the join of its ``delta`` fragments. A ``function_call`` that
    got neither ``done`` event was cut off and is rejected, never run with
    part of its arguments; so is one whose arguments the token limit cut
    (``response.incomplete``), exactly as `extract` rejects it.
    """

    def __init__(self) -> None:
        self._items: dict[int, _Item] = {}
        self._ids: dict[str, int] = {}
        self._response: dict[str, Any] | None = None

    def feed(self, event: Any) -> None:
        """Take one stream event; events that carry nothing for the gate are ignored."""
        data = as_data(event)
        kind = pick(data, "type")
        if not isinstance(kind, str):
            return
        if kind in _TERMINAL:
            response = as_data(pick(data, "response"))
            response = dict(response) if isinstance(response, Mapping) else {}
            if not isinstance(response.get("status"), str):
                response["status"] = kind.removeprefix("response.")
            self._response = response
            # The final output completes any item whose own done event was not seen.
            for index, item in enumerate(as_list(response.get("output"))):
                entry = self._items.get(index)
                if entry is None or not entry.finished():
                    self._add(index, as_data(item), done=True, replace=False)
        elif kind in ("response.output_item.added", "response.output_item.done"):
            index = pick(data, "output_index")
            if isinstance(index, int):
                done = kind.endswith("done")
                self._add(index, as_data(pick(data, "item")), done=done, replace=not done)
        elif (entry := self._item(data)) is not None:
            self._content(kind, data, entry)

    def _add(self, index: int, item: Any, *, done: bool, replace: bool) -> None:
        if not isinstance(item, Mapping):
            return
        if replace or index not in self._items:
            self._items[index] = _Item(added=item)
        if done:
            self._items[index].done = item
        item_id = item.get("id")
        if isinstance(item_id, str):
            self._ids[item_id] = index

    def _item(self, data: Any) -> _Item | None:
        index = pick(data, "output_index")
        if not isinstance(index, int) or index not in self._items:
            index = self._ids.get(as_text(pick(data, "item_id")))
        return self._items.get(index) if isinstance(index, int) else None

    @staticmethod
    def _content(kind: str, data: Mapping[str, Any], entry: _Item) -> None:
        if kind == "response.function_call_arguments.delta":
            entry.deltas.append(as_text(data.get("delta")))
        elif kind == "response.function_call_arguments.done":
            arguments = data.get("arguments")
            if isinstance(arguments, str):
                entry.arguments = arguments
        elif kind in _TEXT_EVENTS:
            index = data.get("content_index", 0)
            if not isinstance(index, int):
                return
            part_kind, deltas, final = entry.parts.get(index, (_TEXT_EVENTS[kind], [], None))
            if kind.endswith("delta"):
                deltas.append(as_text(data.get("delta")))
            else:
                final = pick(data, "text", "refusal")
                final = final if isinstance(final, str) else None
            entry.parts[index] = (part_kind, deltas, final)

    def extraction(self) -> Extraction:
        """The calls and prose assembled so far; unfinished calls become rejections."""
        entries = [self._items[index] for index in sorted(self._items)]
        unfinished = {n for n, entry in enumerate(entries) if not entry.finished()}
        output = [entry.final() for entry in entries]
        if self._response is None:
            return _extraction(output, None, True, _STREAM_CUT, unfinished, _CALL_CUT)
        stop, truncated, why = _ending(self._response)
        cut = why if truncated else _CALL_CUT
        return _extraction(output, stop, truncated, why, unfinished, cut)


# -- schema export ---------------------------------------------------------------


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
