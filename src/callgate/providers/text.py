"""Tool calls written in plain text by open models, and answers written back as text.

`extract` finds, in this order of precedence:

* Hermes-style tags: ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
  (a last tag left open at the very end counts, if its JSON is complete);
* fenced code blocks (```` ```json ````) holding a call object or a list of them;
* bare JSON call objects (or lists of them) in the prose:
  ``{"name": ..., "arguments"|"parameters": {...}}``.

Several calls in one text are all found; the text around them is kept as the
prose. Calls without an ``id`` get a stable one from the text and their
position. Inside tags, where the intent to call is explicit, broken JSON gets
the conservative repair of `callgate.parse.repair_json` (unless
``repair=False``) or a ``parse`` rejection; fenced and bare JSON must be
valid as it stands, since prose may show JSON that is not meant as a call.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from callgate.calls import Observation, ToolCall
from callgate.messages import Problem
from callgate.parse import decode_object
from callgate.providers.base import (
    Extraction,
    Tools,
    cut_off,
    finish,
    rejected,
    specs_of,
    synthetic_id,
    unreadable,
)

__all__ = ["extract", "render", "tool_definitions"]

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_FENCE = re.compile(r"```[ \t]*[\w-]*[ \t]*\n(.*?)```", re.DOTALL)
_BLANK_LINES = re.compile(r"\n{3,}")
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "id", "type"})
_ADVICE = (
    'Write each call as <tool_call>{"name": "tool_name", "arguments": {...}}</tool_call> '
    "with valid JSON; nothing was executed for this call."
)
_decoder = json.JSONDecoder()

# What a stretch of text holds: call objects (each with whether it was repaired),
# or the rejection to give, once the call's id is known.
_Calls = list[tuple[Any, bool]]
_Failure = Callable[[str], Observation]
_Found = tuple[int, int, _Calls | _Failure]


def extract(text: str, *, repair: bool = True) -> Extraction:
    """The calls written in ``text``, and the prose around them."""
    if not isinstance(text, str):
        raise TypeError(
            f"text.extract() takes the model's text, got {type(text).__name__}; "
            "for a provider response object use that provider's module"
        )
    found, cut = _tags(text, repair)
    for start, end in _gaps(text, found):
        found.extend(_fenced(text, start, end))
    found.sort(key=lambda f: f[0])
    for start, end in _gaps(text, found):
        found.extend(_bare(text, start, end))
    found.sort(key=lambda f: f[0])
    items: list[ToolCall | Observation] = []
    for _, _, payload in found:
        if callable(payload):
            items.append(payload(synthetic_id("text", text, str(len(items)))))
            continue
        for obj, repaired in payload:
            items.append(_call(obj, synthetic_id("text", text, str(len(items))), repaired))
    prose = "".join(text[start:end] for start, end in _gaps(text, found)).strip()
    return finish(items, text=_BLANK_LINES.sub("\n\n", prose), truncated=cut)


def _gaps(text: str, found: Sequence[_Found]) -> list[tuple[int, int]]:
    """The stretches of ``text`` not covered by a found call."""
    gaps, pos = [], 0
    for start, end, _ in sorted(found, key=lambda f: f[0]):
        if start > pos:
            gaps.append((pos, start))
        pos = max(pos, end)
    if pos < len(text):
        gaps.append((pos, len(text)))
    return gaps


def _tags(text: str, repair: bool) -> tuple[list[_Found], bool]:
    """The tagged calls, and whether the text ends inside a tag whose call was cut off."""
    found: list[_Found] = []
    pos = 0
    while (start := text.find(_OPEN, pos)) >= 0:
        body_start = start + len(_OPEN)
        close = text.find(_CLOSE, body_start)
        if close < 0:
            payload = _open_tag(text[body_start:])
            found.append((start, len(text), payload))
            return found, callable(payload)
        end = close + len(_CLOSE)
        found.append((start, end, _tag_body(text[body_start:close], repair)))
        pos = end
    return found, False


def _tag_body(body: str, repair: bool) -> _Calls | _Failure:
    """The call objects of a closed tag, or the rejection that quotes what was wrong."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [(v, False) for v in value]
    decoded = decode_object(body, repair=repair, subject="the tool call")
    if isinstance(decoded, Problem):
        return functools.partial(_rejected, name=_name_hint(body), problem=decoded)
    return [(decoded.value, decoded.repaired)]


def _open_tag(body: str) -> _Calls | _Failure:
    """A tag left open at the end: a call only if its JSON is complete as it stands."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict):
        return [(value, False)]
    return functools.partial(
        cut_off, tool=_name_hint(body), why="the text ended before </tool_call> was written"
    )


def _rejected(call_id: str, *, name: str, problem: Problem) -> Observation:
    return rejected(call_id, name, problem, _ADVICE)


def _name_hint(body: str) -> str:
    """The tool name in broken call text, when it can be seen, for the rejection's record."""
    match = re.search(r"""["']name["']\s*:\s*["']([\w.-]{1,64})["']""", body)
    return match.group(1) if match else ""


def _fenced(text: str, start: int, end: int) -> list[_Found]:
    found: list[_Found] = []
    for match in _FENCE.finditer(text, start, end):
        calls = _as_calls(match.group(1).strip())
        if calls is not None:
            found.append((match.start(), match.end(), calls))
    return found


def _as_calls(body: str) -> _Calls | None:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return _call_objects(value)


def _call_objects(value: Any) -> _Calls | None:
    """``value`` as a list of (call object, repaired) if it is a call or a list of calls."""
    if _looks_like_call(value):
        return [(value, False)]
    if isinstance(value, list) and value and all(_looks_like_call(v) for v in value):
        return [(v, False) for v in value]
    return None


def _looks_like_call(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and ("arguments" in value or "parameters" in value)
        and value.keys() <= _CALL_KEYS
    )


def _bare(text: str, start: int, end: int) -> list[_Found]:
    found: list[_Found] = []
    if '"name"' not in text[start:end]:
        return found
    segment = text[:end]
    pos = start
    while pos < end:
        brace = _next_bracket(text, pos, end)
        if brace < 0:
            break
        try:
            value, stop = _decoder.raw_decode(segment, brace)
        except (ValueError, RecursionError):
            pos = brace + 1
            continue
        calls = _call_objects(value)
        if calls is not None:
            found.append((brace, stop, calls))
        pos = stop  # JSON that is not a call is data: nothing inside it is a call either
    return found


def _next_bracket(text: str, pos: int, end: int) -> int:
    candidates = [i for i in (text.find("{", pos, end), text.find("[", pos, end)) if i >= 0]
    return min(candidates) if candidates else -1


def _call(obj: Mapping[str, Any], assigned_id: str, repaired: bool) -> ToolCall | Observation:
    """A call object as a `ToolCall` (its own id if it has one), or why it cannot be one."""
    function = obj.get("function")
    if "name" not in obj and isinstance(function, Mapping):
        obj = function
    own_id = obj.get("id")
    call_id = own_id if isinstance(own_id, str) and own_id else assigned_id
    name = obj.get("name")
    name = name if isinstance(name, str) else ""
    if "arguments" in obj and "parameters" in obj:
        return rejected(
            call_id,
            name,
            Problem(
                rule="ambiguous_arguments",
                message="the call has both 'arguments' and 'parameters'; it is unclear which holds "
                "the arguments",
            ),
            _ADVICE,
        )
    arguments = obj.get("arguments", obj.get("parameters"))
    if arguments is None:
        arguments = {}
    if isinstance(arguments, Mapping):
        return ToolCall(id=call_id, name=name, arguments=dict(arguments), repaired=repaired)
    if isinstance(arguments, str):
        return ToolCall(id=call_id, name=name, arguments=arguments, repaired=repaired)
    return unreadable(call_id, name, "'arguments' must be a JSON object")


def render(observations: Sequence[Observation]) -> list[dict[str, Any]]:
    """One ``user`` message with a ``<tool_response>`` block per observation, in order.

    Each block holds ``{"id", "name", "status", "content"}`` as JSON: the
    shape Hermes-style chat templates show tool results in.
    """
    if not observations:
        return []
    blocks = []
    for obs in observations:
        body = {
            "id": obs.call_id,
            "name": obs.tool,
            "status": obs.status.value,
            "content": obs.content,
        }
        blocks.append(f"<tool_response>\n{json.dumps(body, ensure_ascii=False)}\n</tool_response>")
    return [{"role": "user", "content": "\n".join(blocks)}]


def tool_definitions(tools: Tools) -> list[dict[str, Any]]:
    """Tools as chat templates take them (``tools=`` of ``apply_chat_template``).

    ``{"type": "function", "function": {"name", "description", "parameters"}}``
    with the tool's own JSON Schema: open models read it in the prompt.
    """
    definitions = []
    for spec in specs_of(tools):
        function: dict[str, Any] = {"name": spec.name}
        if spec.description:
            function["description"] = spec.description
        function["parameters"] = spec.input_schema
        definitions.append({"type": "function", "function": function})
    return definitions
