"""Google Gemini: ``functionCall`` parts in, ``functionResponse`` parts out.

`extract` reads a ``GenerateContentResponse`` (first candidate) or a
``Content``, as decoded REST JSON (camelCase) or as the snake_case dump of
an SDK object. Gemini's calls often have no ids: each gets a stable one
built from the response and the part's position, so the same response
always gives the same ids and the answers pair up by id. `render` answers
in one ``user`` content of ``functionResponse`` parts, in call order, with
the model's own id echoed only when it sent one. `StreamAssembler` reads the
chunks of ``streamGenerateContent`` (``generate_content_stream`` in the SDK)
and gives what `extract` gives for their parts joined into one response.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from callgate.calls import Observation, Status, ToolCall
from callgate.providers.base import (
    MAX_RESPONSE_CHARS,
    Extraction,
    Tools,
    as_data,
    as_list,
    as_text,
    checked,
    cut_off,
    fingerprint,
    finish,
    id_series,
    json_size,
    observation_text,
    oversized,
    pick,
    specs_of,
    stopped_early,
    too_large,
    unreadable,
)
from callgate.schema import inline_refs

__all__ = ["StreamAssembler", "extract", "render", "tool_definitions"]

SYNTHETIC_PREFIX = "call_"
"""Prefix of the ids callgate assigns; Gemini's own ids are echoed, these are not."""

_NORMAL_STOPS = frozenset({"STOP"})


def extract(response: Any) -> Extraction:
    """The function calls and text of the first candidate, in part order.

    Accepts a ``GenerateContentResponse`` (or one candidate) or a ``Content``,
    as an SDK object or decoded JSON (anything else raises `TypeError`).
    Unless the candidate's ``finishReason`` is ``STOP`` (a missing or empty
    one is not), the call that ends the response may have been cut and is
    rejected. A ``Content`` passed on its own carries no finish reason and
    is read as it stands.
    """
    data = checked(response, Mapping, format_name="gemini.extract")
    candidate, parts = _candidate(data)
    stop = pick(candidate, "finishReason", "finish_reason")
    stop = stop if isinstance(stop, str) else None
    judged = "candidates" in data or "content" in data
    return _extraction(parts, _response_id(data), stop, *_ending(stop, judged))


def _ending(stop: str | None, judged: bool = True) -> tuple[bool, str | None]:
    """Whether a response that stopped for ``stop`` is truncated; why a call ending it was cut."""
    truncated = judged and stop not in _NORMAL_STOPS
    return truncated, (stopped_early(stop or "") if truncated else None)


def _candidate(data: Any) -> tuple[Any, list[Any]]:
    """The first candidate of a response (or the ``Content`` itself) and its parts."""
    candidate = data
    if isinstance(data, Mapping) and "candidates" in data:
        candidates = as_list(data["candidates"])
        candidate = candidates[0] if candidates else {}
    content = pick(candidate, "content")
    if content is None:
        content = candidate
    return candidate, as_list(pick(content, "parts"))


def _response_id(data: Any) -> str:
    return as_text(pick(data, "responseId", "response_id"))


def _extraction(
    parts: list[Any], response_id: str, stop: str | None, truncated: bool, cut: str | None
) -> Extraction:
    """The extraction of ``parts``; with ``cut``, a call that ends them is rejected for it."""
    size = json_size(parts)
    if size > MAX_RESPONSE_CHARS:
        return _too_large(parts, response_id, stop, truncated)
    ids = id_series("gemini", response_id or fingerprint(parts))
    items: list[ToolCall | Observation] = []
    text: list[str] = []
    last = _last_content(parts)
    for position, part in enumerate(parts):
        call = pick(part, "functionCall", "function_call")
        if call is not None:
            own_id = as_text(pick(call, "id"))
            call_id = own_id or ids(position)
            name = as_text(pick(call, "name"))
            if cut is not None and position == last:
                items.append(cut_off(call_id, name, cut))
            else:
                items.append(_call(call_id, name, pick(call, "args")))
        elif not pick(part, "thought"):
            text.append(as_text(pick(part, "text")))
    return finish(items, text="".join(text), stop_reason=stop, truncated=truncated)


def _too_large(parts: list[Any], response_id: str, stop: str | None, truncated: bool) -> Extraction:
    """A response over `MAX_RESPONSE_CHARS`: each call rejected, nothing else read."""
    ids = id_series("gemini.too_large", response_id or str(len(parts)))
    reject = too_large(oversized("the parts of this response are"))
    items: list[ToolCall | Observation] = []
    for position, part in enumerate(parts):
        call = pick(part, "functionCall", "function_call")
        if call is not None:
            own_id = as_text(pick(call, "id"))
            items.append(reject(own_id or ids(position), as_text(pick(call, "name"))))
    return Extraction(items=tuple(items), stop_reason=stop, truncated=truncated)


def _last_content(parts: list[Any]) -> int:
    """The position of the last part with content: a trailing empty text part (Gemini
    2.5 ends some streams with one that only carries a thought signature) does not
    hide that the call before it was the one the limit cut."""
    for position in range(len(parts) - 1, -1, -1):
        part = parts[position]
        if pick(part, "functionCall", "function_call") is not None or as_text(pick(part, "text")):
            return position
    return len(parts) - 1


def _call(call_id: str, name: str, arguments: Any) -> ToolCall | Observation:
    if arguments is None:
        return ToolCall(id=call_id, name=name, arguments={})
    if isinstance(arguments, Mapping):
        return ToolCall(id=call_id, name=name, arguments=dict(arguments))
    return unreadable(call_id, name, "the functionCall 'args' must be an object")


def render(observations: Sequence[Observation]) -> list[dict[str, Any]]:
    """One ``user`` content with a ``functionResponse`` part per observation, in order.

    The response is ``{"output": text}`` for ``ok`` and ``{"error": text}``
    otherwise, the keys Gemini reads as success and failure.
    """
    if not observations:
        return []
    parts = []
    for obs in observations:
        key = "output" if obs.status is Status.OK else "error"
        response: dict[str, Any] = {"name": obs.tool, "response": {key: observation_text(obs)}}
        if not _is_assigned(obs.call_id):
            response["id"] = obs.call_id
        parts.append({"functionResponse": response})
    return [{"role": "user", "parts": parts}]


def _is_assigned(call_id: str) -> bool:
    return call_id.startswith(SYNTHETIC_PREFIX) and len(call_id) == len(SYNTHETIC_PREFIX) + 24


# -- streaming -----------------------------------------------------------------

_STREAM_CUT = "the stream ended before the response was complete"


class StreamAssembler:
    """Assembles ``GenerateContentResponse`` stream chunks into an `Extraction`.

    Feed every chunk (an SDK object, its snake_case dump, or the decoded JSON
    of each ``alt=sse`` event) to `feed`, then call `extraction`. A
    ``functionCall`` arrives whole in one part; the parts of the first
    candidate are joined in arrival order, the last ``finishReason`` is the
    stop reason, and the result is `extract` of that one response, ids
    included. A stream that ends with no ``finishReason`` did not end
    normally: it is truncated and, as when the token limit cuts a response, a
    call that ends it is rejected, never run.
    """

    def __init__(self) -> None:
        self._parts: list[Any] = []
        self._response_id = ""
        self._stop: str | None = None

    def feed(self, chunk: Any) -> None:
        """Take one chunk; what is not part of the first candidate is ignored."""
        data = as_data(chunk)
        candidate, parts = _candidate(data)
        self._parts += parts
        self._response_id = self._response_id or _response_id(data)
        stop = pick(candidate, "finishReason", "finish_reason")
        if isinstance(stop, str):
            self._stop = stop

    def extraction(self) -> Extraction:
        """The calls and text assembled so far; a call a cut stream ends with is rejected."""
        ending = _ending(self._stop) if self._stop is not None else (True, _STREAM_CUT)
        return _extraction(self._parts, self._response_id, self._stop, *ending)


# -- schema export ---------------------------------------------------------------

# The OpenAPI 3.0 subset Gemini's function declarations accept. Constraints
# outside it are dropped from what the model is told; the gate enforces them.
_KEEP = frozenset(
    {
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "items",
        "properties",
        "required",
        "anyOf",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
    }
)
_FORMATS = frozenset({"date-time", "int32", "int64", "float", "double", "enum"})
_OWN_KEYWORDS = {
    "string": ("enum", "format", "minLength", "maxLength", "pattern"),
    "integer": ("enum", "format", "minimum", "maximum"),
    "number": ("enum", "format", "minimum", "maximum"),
    "array": ("items", "minItems", "maxItems"),
    "object": ("properties", "required"),
}


def _one_type_each(node: dict[str, Any]) -> dict[str, Any]:
    """A node with several types as ``anyOf`` of one type each (Gemini's ``type`` is one
    value): each branch takes the keywords of its own type, the rest stay on the node."""
    kinds = [k for k in node["type"] if isinstance(k, str)]
    own = {key for kind in kinds for key in _OWN_KEYWORDS.get(kind, ())}
    shared = {k: v for k, v in node.items() if k != "type" and k not in own}
    branches = [
        {"type": kind, **{k: node[k] for k in _OWN_KEYWORDS.get(kind, ()) if k in node}}
        for kind in kinds
    ]
    return {**shared, "anyOf": branches}


def tool_definitions(tools: Tools) -> list[dict[str, Any]]:
    """Gemini ``functionDeclarations``: ``{"name", "description", "parameters"}`` per tool.

    Put them in a request as ``tools=[{"functionDeclarations": [...]}]``. A
    tool without parameters has no ``parameters`` (Gemini rejects an object
    schema with no properties).
    """
    declarations = []
    for spec in specs_of(tools):
        declaration: dict[str, Any] = {"name": spec.name}
        if spec.description:
            declaration["description"] = spec.description
        if spec.input_schema.get("properties"):
            declaration["parameters"] = openapi_schema(spec.input_schema)
        declarations.append(declaration)
    return declarations


def openapi_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A JSON Schema rewritten into Gemini's OpenAPI subset.

    References are inlined, ``anyOf`` with ``null`` becomes ``nullable``,
    ``oneOf`` is told as ``anyOf`` (the gate still enforces "exactly one"),
    ``const`` becomes a one-value ``enum``, and keywords outside the subset
    (``additionalProperties``, ``default``, exclusive bounds, ...) are dropped.
    """
    converted: dict[str, Any] = _convert(inline_refs(schema))
    return converted


def _convert(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    node = dict(node)
    if isinstance(node.get("oneOf"), list) and "anyOf" not in node:
        # The subset has no oneOf: "any of" tells the model the shapes; the gate keeps "one".
        node["anyOf"] = node.pop("oneOf")
    nullable = False
    alternatives = node.get("anyOf")
    if isinstance(alternatives, list):
        others = [a for a in alternatives if not (isinstance(a, dict) and a.get("type") == "null")]
        nullable = len(others) < len(alternatives)
        del node["anyOf"]
        if len(others) == 1 and isinstance(others[0], dict):
            node = {**others[0], **node}
        else:
            node["anyOf"] = others
    kind = node.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        nullable = nullable or len(others) < len(kind)
        node["type"] = others[0] if len(others) == 1 else others
    if kind == "null":
        nullable = True
    if isinstance(node.get("type"), list) and "anyOf" not in node:
        node = _one_type_each(node)
    if "const" in node:
        node["enum"] = [node.pop("const")]
    enum = node.get("enum")
    if isinstance(enum, list) and not all(isinstance(v, str) for v in enum):
        del node["enum"]  # Gemini enums are strings only
    if node.get("format") not in _FORMATS:
        node.pop("format", None)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in _KEEP:
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: _convert(sub) for name, sub in value.items()}
        elif key == "items":
            out[key] = _convert(value)
        elif key == "anyOf" and isinstance(value, list):
            out[key] = [_convert(sub) for sub in value]
        else:
            out[key] = value
    if nullable:
        out["nullable"] = True
    return out
