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

Extraction is linear in the length of the text. Text over
`MAX_RESPONSE_CHARS` is not read at all (one ``parse`` rejection answers
it), and the search for bare JSON reads the prose at most a few times over
(`_BARE_SCAN_FACTOR`): in text that would need more (JSON broken again and
again, or nested deeper than can be decoded) the rest is left as prose.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from callgate.calls import Observation, ToolCall
from callgate.parse import decode_object
from callgate.providers.base import (
    MAX_CALLS,
    MAX_RESPONSE_CHARS,
    Extraction,
    Tools,
    checked,
    cut_off,
    finish,
    id_series,
    oversized,
    rejected,
    specs_of,
    synthetic_id,
    too_large,
    too_many_calls,
    unreadable,
)
from callgate.render import Problem

__all__ = ["extract", "render", "tool_definitions"]

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
# Possessive quantifiers: a long run of blanks after ``` is read once, not retried.
_FENCE = re.compile(r"```[ \t]*+[\w-]*+[ \t]*+\n(.*?)```", re.DOTALL)
_BLANK_LINES = re.compile(r"\n{3,}")
_CALL_KEYS = frozenset({"name", "arguments", "parameters", "id", "type"})
_ADVICE = (
    'Write each call as <tool_call>{"name": "tool_name", "arguments": {...}}</tool_call> '
    "with valid JSON; nothing was executed for this call."
)
_decoder = json.JSONDecoder()
_BARE_SCAN_FACTOR = 4
"""How many times over the search for bare JSON may read the text, at most."""
_MIN_CHARGE = 64
"""What a failed try costs at least, in characters: a try that fails at once is not free."""
# Where JSON may start: an object must open with a key or close at once.
_CANDIDATE = re.compile(r'\{[ \t\n\r]*+["}]|\[')

# What a stretch of text holds: call objects (each with whether it was repaired),
# or the rejection to give, once the call's id is known.
_Calls = list[tuple[Any, bool]]
_Failure = Callable[[str], Observation]
_Found = tuple[int, int, _Calls | _Failure]


def extract(text: str, *, repair: bool = True) -> Extraction:
    """The calls written in ``text``, and the prose around them.

    ``text`` must be a ``str`` (else `TypeError`: no model output is of
    another kind); whatever it holds never raises.
    """
    text = checked(text, str, format_name="text.extract")
    if len(text) > MAX_RESPONSE_CHARS:
        sample = synthetic_id("text.too_large", str(len(text)), text[:4096], text[-4096:])
        problem = oversized("the text is", len(text))
        return Extraction(items=(too_large(problem)(sample, ""),))
    tags = text.count(_OPEN)
    if tags > MAX_CALLS:  # too many calls to take: the tags are not even read
        ids, reject = id_series("text", text), too_large(too_many_calls(tags))
        return Extraction(items=tuple(reject(ids(k), "") for k in range(tags)))
    found, cut = _tags(text, repair)
    for start, end in _gaps(text, found):
        found.extend(_fenced(text, start, end))
    found.sort(key=lambda f: f[0])
    budget = [_BARE_SCAN_FACTOR * len(text)]
    for start, end in _gaps(text, found):
        found.extend(_bare(text, start, end, budget))
    found.sort(key=lambda f: f[0])
    ids = id_series("text", text)
    items: list[ToolCall | Observation] = []
    for _, _, payload in found:
        if callable(payload):
            items.append(payload(ids(len(items))))
            continue
        for obj, repaired in payload:
            items.append(_call(obj, ids(len(items)), repaired))
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


def _bare(text: str, start: int, end: int, budget: list[int]) -> list[_Found]:
    """Bare JSON calls in ``text[start:end]``, reading at most ``budget[0]`` characters.

    JSON is tried from each bracket in turn; JSON that is not a call is
    data, skipped whole. A failed try costs the characters the decoder read
    (at least `_MIN_CHARGE`); those are taken from the shared budget, and
    when it runs out the rest is prose. Decoded values do not overlap, so
    the tries that succeed cost one pass in all.
    """
    found: list[_Found] = []
    segment = text[start:end]
    if '"name"' not in segment:
        return found
    pos = 0
    while budget[0] > 0 and (match := _CANDIDATE.search(segment, pos)):
        brace = match.start()
        decoded = _decode_at(segment, brace)
        if isinstance(decoded, int):
            budget[0] -= max(decoded, _MIN_CHARGE)
            pos = brace + 1
            continue
        value, stop = decoded
        calls = _call_objects(value)
        if calls is not None:
            found.append((start + brace, start + stop, calls))
        pos = stop  # JSON that is not a call is data: nothing inside it is a call either
    return found


_WINDOW = 64
_SLACK = 16  # the longest token (a literal, an escape) an error at a window's end may have cut


def _decode_at(text: str, start: int) -> tuple[Any, int] | int:
    """The JSON value at ``text[start]`` and where it stops, or the characters a failure read.

    The decoder is given a window of the text that doubles while a failure
    may have been caused by the window's end: a failure far from the start
    then costs what it read, not the length of the text (a decoding error
    counts the lines of the whole text it was given).
    """
    size = _WINDOW
    while True:
        window = text[start : start + size]
        try:
            value, stop = _decoder.raw_decode(window)
        except json.JSONDecodeError as exc:
            at_end = exc.pos >= len(window) - _SLACK or exc.msg.startswith("Unterminated")
            if at_end and start + size < len(text):
                size *= 2
                continue
            return (len(window) if at_end else exc.pos) + 1
        except RecursionError:  # nested too deep to decode: so is what follows, at this depth
            return len(text) - start
        except ValueError:  # an integer too long to read
            return len(window)
        return value, start + stop


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
