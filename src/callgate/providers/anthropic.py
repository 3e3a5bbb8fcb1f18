"""Anthropic Messages: ``tool_use`` content blocks in, one ``user`` message of ``tool_result`` out.

`extract` reads a ``Message`` as an SDK object or decoded JSON: each
``tool_use`` block is a call (its ``input`` is already an object), the
``text`` blocks are the prose. `StreamAssembler` does the same from the
raw stream events (``content_block_start`` / ``input_json_delta`` /
``content_block_stop``). `render` answers all calls in one ``user``
message of ``tool_result`` blocks, in call order, with ``is_error`` set for
every status but ``ok``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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

__all__ = ["StreamAssembler", "extract", "render", "tool_definitions"]

_NORMAL_STOPS = frozenset({"end_turn", "tool_use", "stop_sequence", "pause_turn"})
_STREAM_CUT = "the stream ended before this tool_use block was complete"
_MESSAGE_CUT = "the stream ended before the message was complete"


def extract(response: Any) -> Extraction:
    """The ``tool_use`` calls and the text of a message, in content order.

    Accepts a ``Message`` as an SDK object or decoded JSON (anything else
    raises `TypeError`). Server-side tool blocks (``server_tool_use``, web
    search results) and thinking blocks are not calls for the gate and are
    skipped. Unless the message stopped normally (``end_turn``,
    ``tool_use``, ``stop_sequence``, ``pause_turn``; a missing or empty
    ``stop_reason`` is not normal), a ``tool_use`` block that ends the
    message may hold incomplete input and is rejected.
    """
    data = checked(response, Mapping, format_name="anthropic.extract")
    stop = pick(data, "stop_reason")
    stop = stop if isinstance(stop, str) else None
    truncated = stop not in _NORMAL_STOPS
    blocks = as_list(pick(data, "content"))
    items: list[ToolCall | Observation] = []
    text: list[str] = []
    for position, block in enumerate(blocks):
        kind = pick(block, "type")
        if kind == "text":
            text.append(as_text(pick(block, "text")))
        elif kind == "tool_use":
            call_id = as_text(pick(block, "id"))
            name = as_text(pick(block, "name"))
            arguments = pick(block, "input")
            # Under an abnormal stop, the last block may be cut, and so may any block whose
            # input is not an object but text that is empty or not complete JSON.
            maybe_cut = (
                position == len(blocks) - 1
                or arguments is None
                or (isinstance(arguments, str) and not is_complete_json(arguments))
            )
            if truncated and maybe_cut:
                items.append(cut_off(call_id, name, stopped_early(stop or "")))
            else:
                items.append(_call(call_id, name, arguments))
    prose = "\n".join(t for t in text if t)
    return finish(
        items,
        text=prose,
        refusal=prose if stop == "refusal" else None,
        stop_reason=stop,
        truncated=truncated,
    )


def _call(call_id: str, name: str, arguments: Any) -> ToolCall | Observation:
    if arguments is None:
        return ToolCall(id=call_id, name=name, arguments={})
    if isinstance(arguments, Mapping):
        return ToolCall(id=call_id, name=name, arguments=dict(arguments))
    if isinstance(arguments, str):
        return ToolCall(id=call_id, name=name, arguments=arguments)
    return unreadable(call_id, name, "the tool_use 'input' must be an object")


def render(observations: Sequence[Observation]) -> list[dict[str, Any]]:
    """One ``user`` message holding a ``tool_result`` block per observation, in order.

    Anthropic wants every result of a turn in a single message; an empty
    list of observations renders as no message at all.
    """
    if not observations:
        return []
    blocks = [
        {
            "type": "tool_result",
            "tool_use_id": obs.call_id,
            "content": observation_text(obs),
            "is_error": obs.is_error,
        }
        for obs in observations
    ]
    return [{"role": "user", "content": blocks}]


# -- streaming -----------------------------------------------------------------


@dataclass(slots=True)
class _Block:
    kind: str
    id: str = ""
    name: str = ""
    text: list[str] = field(default_factory=list)
    initial_input: Any = None
    stopped: bool = False


class StreamAssembler:
    """Assembles raw Messages stream events into an `Extraction`.

    Feed every event (SDK ``RawMessageStreamEvent`` or decoded JSON) to
    `feed`, then call `extraction`. A ``tool_use`` block's input is the
    concatenation of its ``input_json_delta`` fragments; a block that never
    got its ``content_block_stop`` was cut off and is rejected.
    """

    def __init__(self) -> None:
        self._blocks: dict[int, _Block] = {}
        self._stop: str | None = None
        self._ended = False

    def feed(self, event: Any) -> None:
        """Take one stream event; events that carry nothing for the gate are ignored."""
        data = as_data(event)
        kind = pick(data, "type")
        index = pick(data, "index")
        if kind == "content_block_start" and isinstance(index, int):
            block = pick(data, "content_block")
            self._blocks[index] = _Block(
                kind=as_text(pick(block, "type")),
                id=as_text(pick(block, "id")),
                name=as_text(pick(block, "name")),
                text=[as_text(pick(block, "text"))],
                initial_input=pick(block, "input"),
            )
        elif kind == "content_block_delta" and isinstance(index, int) and index in self._blocks:
            delta = pick(data, "delta")
            delta_kind = pick(delta, "type")
            if delta_kind == "input_json_delta":
                self._blocks[index].text.append(as_text(pick(delta, "partial_json")))
            elif delta_kind == "text_delta":
                self._blocks[index].text.append(as_text(pick(delta, "text")))
        elif kind == "content_block_stop" and isinstance(index, int) and index in self._blocks:
            self._blocks[index].stopped = True
        elif kind == "message_delta":
            stop = pick(pick(data, "delta"), "stop_reason")
            if isinstance(stop, str):
                self._stop = stop
        elif kind == "message_stop":
            self._ended = True

    def extraction(self) -> Extraction:
        """The calls and prose assembled so far; unfinished ``tool_use`` blocks are rejected."""
        stop = self._stop
        truncated = stop not in _NORMAL_STOPS
        why = stopped_early(stop or "") if stop is not None or self._ended else _MESSAGE_CUT
        items: list[ToolCall | Observation] = []
        text: list[str] = []
        for index in sorted(self._blocks):
            block = self._blocks[index]
            if block.kind == "text":
                text.append("".join(block.text))
            elif block.kind == "tool_use":
                items.append(self._call(block, why if truncated else None))
        prose = "\n".join(t for t in text if t)
        return finish(
            items,
            text=prose,
            refusal=prose if self._stop == "refusal" else None,
            stop_reason=self._stop,
            truncated=truncated,
        )

    @staticmethod
    def _call(block: _Block, cut: str | None) -> ToolCall | Observation:
        if not block.stopped:
            return cut_off(block.id, block.name, _STREAM_CUT)
        arguments = "".join(block.text)
        if not arguments.strip():
            initial = block.initial_input
            if cut is not None and not (isinstance(initial, Mapping) and initial):
                return cut_off(block.id, block.name, cut)  # no input at all: it may have been cut
            return _call(block.id, block.name, initial)
        if cut is not None and not is_complete_json(arguments):
            return cut_off(block.id, block.name, cut)
        return ToolCall(id=block.id, name=block.name, arguments=arguments)


# -- schema export ---------------------------------------------------------------


def tool_definitions(tools: Tools) -> list[dict[str, Any]]:
    """Messages ``tools``: ``{"name", "description", "input_schema"}`` per tool."""
    definitions = []
    for spec in specs_of(tools):
        definition: dict[str, Any] = {"name": spec.name}
        if spec.description:
            definition["description"] = spec.description
        definition["input_schema"] = spec.input_schema
        definitions.append(definition)
    return definitions
