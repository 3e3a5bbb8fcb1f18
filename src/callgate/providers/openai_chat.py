"""OpenAI Chat Completions: ``message.tool_calls`` in, ``role: "tool"`` messages out.

`extract` reads a ``ChatCompletion`` (or one of its choices, or its
message) as an SDK object or as decoded JSON: the ``tool_calls`` (and the
legacy ``function_call``), the prose, the refusal and the finish reason.
`StreamAssembler` does the same from streamed ``chat.completion.chunk``s.
`render` answers each call with a ``tool`` message carrying its
``tool_call_id``. `tool_definitions` exports tools valid under ``strict: true``.
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
    fingerprint,
    finish,
    is_complete_json,
    observation_text,
    pick,
    specs_of,
    stopped_early,
    synthetic_id,
    unreadable,
)
from callgate.render import bounded
from callgate.schema import map_subschemas, strict_obstacle, strict_schema
from callgate.tools import ToolSpec

__all__ = ["StreamAssembler", "extract", "render", "strict_parameters", "tool_definitions"]

LEGACY_PREFIX = "function_call-"
"""Id prefix of a call read from the legacy ``function_call`` field, which has no id."""

_NORMAL_STOPS = frozenset({"stop", "tool_calls", "function_call"})
_STREAM_CUT = "the stream ended before the response was complete"


def extract(response: Any) -> Extraction:
    """The calls, prose and refusal of a chat completion (first choice).

    Accepts a ``ChatCompletion``, a ``Choice`` or a ``ChatCompletionMessage``,
    as SDK objects or decoded JSON (anything else raises `TypeError`). Unless
    the choice's ``finish_reason`` is a normal end (``stop``, ``tool_calls``,
    ``function_call``), a call whose arguments are empty or not complete JSON
    may have been cut and is rejected, never repaired; a missing, empty or
    unknown finish reason is not a normal end. A message passed on its own
    carries no finish reason and is read as it stands.
    """
    data = checked(response, Mapping, format_name="openai_chat.extract")
    choice = data
    if "choices" in data:
        choices = as_list(data["choices"])
        choice = choices[0] if choices else {}
    message = pick(choice, "message") if isinstance(choice, Mapping) else None
    judged = message is not None or choice is not data
    if message is None:
        message = choice
    finish_reason = pick(choice, "finish_reason")
    stop = finish_reason if isinstance(finish_reason, str) else None
    truncated = judged and stop not in _NORMAL_STOPS
    cut = stopped_early(stop or "") if truncated else None
    items: list[ToolCall | Observation] = [
        _tool_call(entry, cut) for entry in as_list(pick(message, "tool_calls"))
    ]
    legacy = pick(message, "function_call")
    if legacy is not None:
        items.append(_legacy_call(legacy, as_text(pick(data, "id")), cut))
    refusal = pick(message, "refusal")
    return finish(
        items,
        text=_content_text(pick(message, "content")),
        refusal=refusal if isinstance(refusal, str) else None,
        stop_reason=stop,
        truncated=truncated,
    )


def _tool_call(entry: Any, cut: str | None) -> ToolCall | Observation:
    # Decoded JSON and SDK dumps are plain dicts: `dict` checks keep this hot path cheap.
    if not isinstance(entry, dict):
        return unreadable("", "", "each entry of tool_calls must be an object")
    call_id = entry.get("id")
    if not isinstance(call_id, str):
        call_id = ""
    if entry.get("type", "function") != "function":
        kind = bounded(as_text(entry.get("type")), 40) or "?"
        return unreadable(call_id, "", f"tool calls of type '{kind}' are not supported")
    function = entry.get("function")
    if not isinstance(function, dict):
        return unreadable(call_id, "", "the tool call has no 'function' object")
    return _call(call_id, function, cut)


def _legacy_call(function: Any, completion_id: str, cut: str | None) -> ToolCall | Observation:
    if not isinstance(function, Mapping):
        return unreadable("", "", "function_call must be an object")
    arguments = function.get("arguments")
    seed = completion_id or synthetic_id(
        "openai_chat.function_call",
        as_text(function.get("name")),
        arguments if isinstance(arguments, str) else fingerprint(arguments),
    )
    return _call(LEGACY_PREFIX + seed, function, cut)


def _call(call_id: str, function: Mapping[str, Any], cut: str | None) -> ToolCall | Observation:
    name = function.get("name")
    if not isinstance(name, str):
        name = ""
    arguments = function.get("arguments")
    if arguments is None:
        arguments = ""
    if isinstance(arguments, str):
        if cut is not None and not is_complete_json(arguments):
            return cut_off(call_id, name, cut)
        return ToolCall(id=call_id, name=name, arguments=arguments)
    if isinstance(arguments, Mapping):
        return ToolCall(id=call_id, name=name, arguments=dict(arguments))
    return unreadable(call_id, name, "'arguments' must be a string of JSON")


def _content_text(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    return "".join(
        as_text(part.get("text"))
        for part in as_list(content)
        if isinstance(part, Mapping) and part.get("type") == "text"
    )


def render(observations: Sequence[Observation]) -> list[dict[str, Any]]:
    """One ``tool`` message per observation, answering its ``tool_call_id``, in order.

    A call read from the legacy ``function_call`` is answered by a
    ``function`` message instead, as that API expects.
    """
    messages: list[dict[str, Any]] = []
    for obs in observations:
        if obs.call_id.startswith(LEGACY_PREFIX):
            messages.append(
                {"role": "function", "name": obs.tool, "content": observation_text(obs)}
            )
        else:
            messages.append(
                {"role": "tool", "tool_call_id": obs.call_id, "content": observation_text(obs)}
            )
    return messages


# -- streaming -----------------------------------------------------------------


@dataclass(slots=True)
class _Partial:
    id: str = ""
    name: list[str] = field(default_factory=list)
    arguments: list[str] = field(default_factory=list)
    kind: str = "function"


class StreamAssembler:
    """Assembles streamed chat-completion chunks into an `Extraction`.

    Feed every chunk (SDK ``ChatCompletionChunk`` or decoded JSON) to
    `feed`, then call `extraction`. Tool calls are keyed by their ``index``;
    their ``arguments`` fragments are joined in arrival order. A stream that
    ends without a ``finish_reason`` is incomplete: each call whose arguments
    are not complete JSON is rejected, never repaired into a shorter call.
    """

    def __init__(self) -> None:
        self._calls: dict[int, _Partial] = {}
        self._last_index = 0  # the highest index seen: where an index-less fragment belongs
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._finish: str | None = None
        self._completion_id = ""

    def feed(self, chunk: Any) -> None:
        """Take one chunk; anything that is not part of the first choice is ignored."""
        data = as_data(chunk)
        if not self._completion_id:
            self._completion_id = as_text(pick(data, "id"))
        for choice in as_list(pick(data, "choices")):
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                self._delta(delta)
            reason = choice.get("finish_reason")
            if isinstance(reason, str):
                self._finish = reason

    def _delta(self, delta: Mapping[str, Any]) -> None:
        self._text.append(as_text(delta.get("content")))
        self._refusal.append(as_text(delta.get("refusal")))
        fragments = as_list(delta.get("tool_calls"))
        legacy = delta.get("function_call")
        if isinstance(legacy, Mapping):
            fragments = [*fragments, {"index": -1, "function": legacy}]
        for fragment in fragments:
            if not isinstance(fragment, Mapping):
                continue
            index = fragment.get("index")
            if not isinstance(index, int):
                index = len(self._calls) if fragment.get("id") else self._last_index
            self._last_index = max(self._last_index, index)
            partial = self._calls.setdefault(index, _Partial())
            if not partial.id:
                partial.id = as_text(fragment.get("id"))
            kind = fragment.get("type")
            if isinstance(kind, str):
                partial.kind = kind
            function = fragment.get("function")
            if isinstance(function, Mapping):
                partial.name.append(as_text(function.get("name")))
                partial.arguments.append(as_text(function.get("arguments")))

    def extraction(self) -> Extraction:
        """The calls and prose assembled so far; incomplete calls become rejections."""
        truncated = self._finish not in _NORMAL_STOPS
        why = _STREAM_CUT if self._finish is None else stopped_early(self._finish)
        items: list[ToolCall | Observation] = []
        for index in sorted(self._calls):
            partial = self._calls[index]
            name = "".join(partial.name)
            function = {"name": name, "arguments": "".join(partial.arguments)}
            if index == -1:
                seed = self._completion_id or synthetic_id(
                    "openai_chat.function_call", name, function["arguments"]
                )
                items.append(_call(LEGACY_PREFIX + seed, function, why if truncated else None))
            elif partial.kind != "function":
                kind = bounded(partial.kind, 40)
                items.append(
                    unreadable(partial.id, "", f"tool calls of type '{kind}' are not supported")
                )
            else:
                items.append(_call(partial.id, function, why if truncated else None))
        refusal = "".join(self._refusal)
        return finish(
            items,
            text="".join(self._text),
            refusal=refusal or None,
            stop_reason=self._finish,
            truncated=truncated,
        )


# -- schema export ---------------------------------------------------------------

# Keywords that OpenAI's strict mode does not accept. Dropping one only
# loosens what the model is told; the gate still enforces it.
_NOT_IN_STRICT = frozenset(
    {
        "minLength",
        "maxLength",
        "uniqueItems",
        "patternProperties",
        "propertyNames",
        "minProperties",
        "maxProperties",
        "unevaluatedProperties",
        "unevaluatedItems",
        "contains",
        "minContains",
        "maxContains",
        "dependentRequired",
        "dependentSchemas",
        "not",
        "if",
        "then",
        "else",
    }
)
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)


def strict_parameters(spec: ToolSpec) -> tuple[dict[str, Any], bool]:
    """The tool's parameters schema for OpenAI, and whether it can be ``strict``.

    Strict mode needs every object closed and has no ``oneOf``; a tool taking a
    free-form object (``dict[str, X]``) or one of several exclusive shapes is
    exported with its own schema and ``strict: false``; `ToolSpec.strict_obstacle`
    says why.
    """
    if strict_obstacle(spec.input_schema) is not None:
        return spec.input_schema, False
    strict = strict_schema(spec.input_schema)
    return _drop_unsupported(strict, strict.get("$defs", {})), True


def _drop_unsupported(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` without the keywords strict mode rejects.

    A ``$ref`` with sibling keywords (Pydantic puts a field's description
    there) is rejected too; that one reference is replaced by its definition,
    siblings merged in.
    """
    if isinstance(node, list):
        return [_drop_unsupported(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1 and ref.removeprefix("#/$defs/") in defs:
        node = {**defs[ref.removeprefix("#/$defs/")], **node}
        del node["$ref"]
    kept = {
        key: value
        for key, value in node.items()
        if key not in _NOT_IN_STRICT
        and not (key == "format" and (not isinstance(value, str) or value not in _STRICT_FORMATS))
    }
    # Only the places that hold schemas are entered: the keys of "properties" or
    # "definitions" are names (a definition named "format" is not the keyword), and data
    # ("default", "enum", "const", "examples") is kept as it is.
    return map_subschemas(kept, lambda sub: _drop_unsupported(sub, defs))


def tool_definitions(tools: Tools) -> list[dict[str, Any]]:
    """Chat Completions ``tools``: ``{"type": "function", "function": {...}}`` per tool."""
    definitions = []
    for spec in specs_of(tools):
        parameters, strict = strict_parameters(spec)
        function: dict[str, Any] = {"name": spec.name}
        if spec.description:
            function["description"] = spec.description
        function["parameters"] = parameters
        function["strict"] = strict
        definitions.append({"type": "function", "function": function})
    return definitions
