"""Stage ``parse``: a call's argument text becomes a JSON object, or a rejection.

Text that is not JSON gets one conservative repair attempt (`repair_json`),
recorded as ``repaired=True``; what cannot be repaired is rejected with a
message that quotes the offending position, so that the model can fix it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from callgate.calls import Stage
from callgate.messages import Problem, Rejection, describe_value

__all__ = ["ParsedArguments", "decode_object", "parse_arguments", "repair_json"]

_ADVICE = (
    "Send the call again with the arguments as one JSON object, "
    'e.g. {"field": "value"}, with double-quoted keys and strings.'
)


@dataclass(slots=True)
class ParsedArguments:
    """The decoded arguments, the JSON text they were decoded from, and whether it was repaired.

    ``text`` is exact JSON for ``value`` (the repaired text when ``repaired``),
    or None when the arguments arrived already decoded. (Not frozen only
    because frozen dataclasses cost 3x to build on this hot path; treat it
    as read-only.)
    """

    value: dict[str, Any]
    text: str | None
    repaired: bool = False


def parse_arguments(
    arguments: str | Mapping[str, Any], *, repair: bool = True
) -> ParsedArguments | Rejection:
    """Decode argument text (or accept a decoded mapping) into a JSON object.

    With ``repair``, text that is not JSON gets the conservative repairs of
    `repair_json`; the result is marked ``repaired``.
    """
    if isinstance(arguments, str):
        try:  # the common case first: valid JSON of an object
            value = json.loads(arguments)
        except (ValueError, RecursionError):
            pass
        else:
            if type(value) is dict:
                return ParsedArguments(value, arguments)
        decoded = decode_object(arguments, repair=repair)
        return decoded if isinstance(decoded, ParsedArguments) else _reject(decoded)
    if isinstance(arguments, Mapping):
        return ParsedArguments(dict(arguments), None)
    return _reject(_not_object(arguments, "arguments"))


def decode_object(
    text: str, *, repair: bool = True, subject: str = "arguments"
) -> ParsedArguments | Problem:
    """Decode ``text`` into a JSON object, or say what is wrong with it.

    ``subject`` names the text in the problem's message (``"arguments"``, or
    ``"the tool call"`` for a call written in plain text).
    """
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if not text or text.isspace():
            # Several providers send "" for a call without arguments.
            return ParsedArguments({}, text)
        fixed = repair_json(text) if repair else None
        if fixed is None:
            return _syntax_problem(text, exc, subject)
        return ParsedArguments(json.loads(fixed), fixed, repaired=True)
    except RecursionError:
        return Problem(
            rule="json_syntax", message=f"{subject} {_be(subject)} nested too deeply to decode"
        )
    if type(value) is not dict:
        return _not_object(value, subject)
    return ParsedArguments(value, text)


# -- repair ------------------------------------------------------------------
#
# Each rule fixes one mistake models are known to make, and only where the
# intended JSON is not in doubt. Anything else is left to the rejection: a
# wrong guess would run a call the model did not propose.

_CLOSER = {"{": "}", "[": "]"}
# A value that ends with one of these is complete: a string, a container, true,
# false or null. A number is not: "12" may be the start of "125".
_VALUE_END = frozenset('"}]el')


def repair_json(text: str) -> str | None:
    """Conservatively repair almost-JSON object text; the repaired JSON, or None.

    The rules, and nothing else:

    * a JSON object wrapped in prose (or a code fence): the one ``{...}`` in
      the text is kept, if the prose around it holds no other bracket;
    * single-quoted strings become double-quoted;
    * a comma right before ``}`` or ``]`` is dropped;
    * braces and brackets left open at the very end are closed, if the text
      stops right after a complete string, object, array, true, false or null
      (not after ``,``, ``:``, a number, or inside a string: the text may
      have been cut off there).

    The result must decode to a JSON object, or None is returned.
    """
    start = text.find("{")
    if start < 0 or _has_bracket(text[:start]):
        return None
    out: list[str] = []
    stack: list[str] = []
    quote = ""  # the quote that opened the current string, "" outside strings
    i, n = start, len(text)
    end = n
    while i < n:
        ch = text[i]
        if quote:
            if ch == "\\":
                nxt = text[i + 1 : i + 2]
                if quote == "'" and nxt == "'":
                    out.append("'")
                else:
                    out.append(ch + nxt)
                i += 2
                continue
            if ch == quote:
                out.append('"')
                quote = ""
            elif ch == '"':  # a double quote inside a single-quoted string
                out.append('\\"')
            else:
                out.append(ch)
            i += 1
            continue
        if ch in "\"'":
            quote = ch
            out.append('"')
        elif ch in "{[":
            stack.append(ch)
            out.append(ch)
        elif ch in "}]":
            if not stack or _CLOSER[stack.pop()] != ch:
                return None
            out.append(ch)
            if not stack:
                end = i + 1
                break
        elif ch == ",":
            j = i + 1
            while j < n and text[j].isspace():
                j += 1
            if j == n:
                return None  # "...," at the end: more was coming, the text was cut
            if text[j] not in "}]":
                out.append(ch)
        else:
            out.append(ch)
        i += 1
    if quote:
        return None  # cut inside a string
    if stack:
        tail = "".join(out).rstrip()
        if not tail or tail[-1] not in _VALUE_END:
            return None
        out.append("".join(_CLOSER[b] for b in reversed(stack)))
    elif _has_bracket(text[end:]):
        return None  # another object or stray bracket after the first: ambiguous
    fixed = "".join(out)
    try:
        value = json.loads(fixed)
    except (json.JSONDecodeError, RecursionError):
        return None
    return fixed if isinstance(value, dict) else None


def _has_bracket(prose: str) -> bool:
    return any(c in prose for c in "{}[]")


# -- problems ------------------------------------------------------------------


def _be(subject: str) -> str:
    return "are" if subject == "arguments" else "is"


def _not_object(value: Any, subject: str) -> Problem:
    return Problem(
        rule="arguments_type",
        message=f"{subject} must be a JSON object, got {describe_value(value)}",
        expected="object",
        actual=describe_value(value),
    )


def _syntax_problem(text: str, exc: json.JSONDecodeError, subject: str) -> Problem:
    start = max(0, exc.pos - 20)
    snippet = text[start : exc.pos + 20].replace("\n", "\\n")
    return Problem(
        rule="json_syntax",
        message=(
            f"{subject} {_be(subject)} not valid JSON: {exc.msg} at line {exc.lineno} "
            f"column {exc.colno} (char {exc.pos}), near «{snippet}»"
        ),
        actual=snippet,
    )


def _reject(problem: Problem) -> Rejection:
    return Rejection(stage=Stage.PARSE, problems=(problem,), advice=_ADVICE)
