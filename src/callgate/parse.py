"""Stage ``parse``: a call's argument text becomes a JSON object, or a rejection.

Text that is not JSON gets one conservative repair attempt (`repair_json`),
recorded as ``repaired=True``; what cannot be repaired is rejected with a
message that quotes the offending position, so that the model can fix it.

This stage is also the boundary where model text is held to what the rest
of callgate can store and hash (`screen_call`, `check_decoded`): every id,
tool name, key and string must be valid Unicode (no lone UTF-16 surrogate,
which JSON's ``\\ud800`` escape can carry), argument text is at most
`MAX_ARGUMENT_CHARS` long, nested at most `MAX_DEPTH` levels, and numbers
have at most `MAX_INT_DIGITS` digits. Whatever breaks one of these rules is
rejected here, with a bounded message, and never decoded further.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from callgate.calls import Stage
from callgate.redact import Redactor
from callgate.render import Problem, Rejection, bounded, describe_value

__all__ = [
    "MAX_ARGUMENT_CHARS",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "ParsedArguments",
    "bad_call_id",
    "check_decoded",
    "decode_object",
    "may_be_deep",
    "parse_arguments",
    "repair_json",
    "screen_call",
    "visible",
]

MAX_ARGUMENT_CHARS = 1_000_000
"""The longest argument text decoded (characters). Real calls are a few KB; a
megabyte leaves room for a document passed whole, and bounds the work one
call can cause."""
MAX_DEPTH = 128
"""The deepest nesting of arrays and objects inside the arguments object. Below
the limit of Pydantic's JSON parser (about 200, counted its own way), which
validates the arguments after this stage, so that whatever passes here is read
there; text nested deeper skips the validator's fast path (`may_be_deep`), so
the same arguments are accepted whichever way they arrive."""
MAX_INT_DIGITS = 4300
"""The most digits an integer may have: Python's own limit for converting
integers to and from text (``sys.get_int_max_str_digits``)."""

_MAX_INT_BITS = 14_284  # 10**4300 has 14,285 bits: every integer of <= 4,300 digits fits
_secrets = Redactor()

_ADVICE = (
    "Send the call again with the arguments as one JSON object, "
    'e.g. {"field": "value"}, with double-quoted keys and strings.'
)
_ADVICE_BOUNDS = (
    "Nothing was executed. Send the call again within these bounds: valid Unicode text, "
    f"at most {MAX_ARGUMENT_CHARS:,} characters of arguments, nesting at most {MAX_DEPTH} "
    f"levels deep, integers of at most {MAX_INT_DIGITS:,} digits."
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
    repairs: tuple[str, ...] = ()
    """The names of the repairs applied, in `repair_json`'s vocabulary."""


def parse_arguments(
    arguments: str | Mapping[str, Any], *, repair: bool = True
) -> ParsedArguments | Rejection:
    """Decode argument text (or accept a decoded mapping) into a JSON object.

    With ``repair``, text that is not JSON gets the conservative repairs of
    `repair_json`; the result is marked ``repaired``.
    """
    if isinstance(arguments, str):
        decoded = decode_object(arguments, repair=repair)
        return decoded if isinstance(decoded, ParsedArguments) else _reject(decoded)
    if isinstance(arguments, Mapping):
        value = dict(arguments)
        problem = check_decoded(value, "arguments")
        return ParsedArguments(value, None) if problem is None else _reject(problem)
    return _reject(_not_object(arguments, "arguments"))


def decode_object(
    text: str, *, repair: bool = True, subject: str = "arguments"
) -> ParsedArguments | Problem:
    """Decode ``text`` into a JSON object, or say what is wrong with it.

    ``subject`` names the text in the problem's message (``"arguments"``, or
    ``"the tool call"`` for a call written in plain text). Text over
    `MAX_ARGUMENT_CHARS` is refused without being read, and the decoded value
    must pass `check_decoded`.
    """
    if len(text) > MAX_ARGUMENT_CHARS:
        return _too_long(text, subject)
    repairs: tuple[str, ...] = ()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if not text or text.isspace():
            # Several providers send "" for a call without arguments.
            return ParsedArguments({}, text)
        repaired = repair_json(text) if repair else None
        if repaired is None:
            return _syntax_problem(text, exc, subject)
        text, repairs = repaired
        value = json.loads(text)
    except RecursionError:
        return _too_deep(subject)
    except ValueError:  # an integer with more digits than Python converts
        return _too_many_digits(subject)
    if type(value) is not dict:
        return _not_object(value, subject)
    problem = check_decoded(value, subject)
    if problem is not None:
        return problem
    return ParsedArguments(value, text, bool(repairs), repairs)


# -- repair ------------------------------------------------------------------
#
# Each rule fixes one mistake models are known to make, and only where the
# intended JSON is not in doubt. Anything else is left to the rejection: a
# wrong guess would run a call the model did not propose.

_CLOSER = {"{": "}", "[": "]"}
_OPERATORS = frozenset("*+-/%^=<>|&~0123456789")
"""Characters that, right next to the object, make the prose an expression."""


def repair_json(text: str) -> tuple[str, tuple[str, ...]] | None:
    """Repair almost-JSON object text where the meaning is not in doubt.

    Returns the repaired JSON and the names of the repairs applied, or None.
    The repairs, and nothing else:

    * ``prose_removed``: a JSON object wrapped in prose (or a code fence)
      is kept, if the prose around it holds no other bracket;
    * ``single_quotes``: single-quoted strings become double-quoted;
    * ``trailing_comma``: a comma right before ``}`` or ``]`` is dropped.

    Text that ends before its braces and brackets are closed is never
    repaired: it may have been cut off (by a token limit, a broken stream),
    and closing it would run a shorter call than the one the model meant.
    One pass over the text: linear in its length. The result must decode to
    a JSON object, or None is returned.
    """
    start = text.find("{")
    if start < 0 or _has_bracket(text[:start]):
        return None
    out: list[str] = []
    depth = 0
    stack: list[str] = []
    quote = ""  # the quote that opened the current string, "" outside strings
    repairs: set[str] = set()
    i, n = start, len(text)
    end = -1
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
            if ch == "'":
                repairs.add("single_quotes")
            out.append('"')
        elif ch in "{[":
            depth += 1
            if depth > MAX_DEPTH + 1:  # the object itself and MAX_DEPTH levels in it
                return None
            stack.append(ch)
            out.append(ch)
        elif ch in "}]":
            if not stack or _CLOSER[stack.pop()] != ch:
                return None
            depth -= 1
            out.append(ch)
            if not stack:
                end = i + 1
                break
        elif ch == ",":
            j = i + 1
            while j < n and text[j].isspace():
                j += 1
            if j < n and text[j] in "}]":
                repairs.add("trailing_comma")
            else:
                out.append(ch)
        else:
            out.append(ch)
        i += 1
    if end < 0:
        return None  # the object never closed: the text may have been cut off
    if start > 0 or end < n:
        if _has_bracket(text[end:]):
            return None  # another object or stray bracket after the first: ambiguous
        after = text[end:].lstrip()
        if after[:1] in _OPERATORS or text[:start].rstrip()[-1:] in _OPERATORS:
            return None  # an expression around the object (`{...} * 100`): its meaning
        if text[:start].strip() or after:
            repairs.add("prose_removed")
    if not repairs:
        return None  # nothing this function knows how to fix
    fixed = "".join(out)
    try:
        value = json.loads(fixed)
    except (ValueError, RecursionError):
        return None
    return (fixed, tuple(sorted(repairs))) if isinstance(value, dict) else None


def _has_bracket(prose: str) -> bool:
    return any(c in prose for c in "{}[]")


# -- problems ------------------------------------------------------------------


def _be(subject: str) -> str:
    return "are" if subject == "arguments" else "is"


def _the(subject: str) -> str:
    """``subject`` with its article: "the arguments", "the tool call"."""
    return subject if subject.startswith("the ") else f"the {subject}"


def _not_object(value: Any, subject: str) -> Problem:
    return Problem(
        rule="arguments_type",
        message=f"{subject} must be a JSON object, got {describe_value(value)}",
        expected="object",
        actual=describe_value(value),
    )


def _syntax_problem(text: str, exc: json.JSONDecodeError, subject: str) -> Problem:
    # The text around the error, from the text with credential-shaped strings redacted,
    # so a rejection never echoes a key the model wrote.
    shown = _secrets.text(text)
    pos = exc.pos if shown is text else len(_secrets.text(text[: exc.pos]))
    snippet = visible(shown[max(0, pos - 20) : pos + 20], 60)
    what = exc.msg.removesuffix(" starting at")  # "Unterminated string starting at" + "at line"
    return Problem(
        rule="json_syntax",
        message=(
            f"{subject} {_be(subject)} not valid JSON: {what} at line {exc.lineno}, "
            f"column {exc.colno} (character {exc.pos}), near «{snippet}»"
        ),
        actual=snippet,
    )


def _too_long(text: str, subject: str) -> Problem:
    return Problem(
        rule="arguments_size",
        message=f"{subject} {_be(subject)} {len(text):,} characters long, over the limit of "
        f"{MAX_ARGUMENT_CHARS:,}; they were not read",
        expected=f"at most {MAX_ARGUMENT_CHARS:,} characters",
        actual=f"{len(text):,} characters",
    )


def _beyond(
    rule: str, subject: str, field: str | None, *, holds: bool, what: str, expected: str
) -> Problem:
    """A bound of the parse stage broken by the arguments, or by one of their fields."""
    where = f"field '{field}' of {_the(subject)}" if field else subject
    singular = field is not None or subject != "arguments"
    verb = {(True, True): "holds", (True, False): "hold", (False, True): "is"}.get(
        (holds, singular), "are"
    )
    return Problem(rule=rule, message=f"{where} {verb} {what}", field=field, expected=expected)


def _too_deep(subject: str, field: str | None = None) -> Problem:
    return _beyond(
        "json_depth",
        subject,
        field,
        holds=False,
        what=f"nested more than {MAX_DEPTH} levels deep (arrays and objects inside each other)",
        expected=f"at most {MAX_DEPTH} levels of nesting",
    )


def _too_many_digits(subject: str, field: str | None = None) -> Problem:
    return _beyond(
        "json_number",
        subject,
        field,
        holds=True,
        what=f"an integer with more than {MAX_INT_DIGITS:,} digits",
        expected=f"integers of at most {MAX_INT_DIGITS:,} digits",
    )


def _not_finite(subject: str, field: str | None = None) -> Problem:
    return _beyond(
        "json_number",
        subject,
        field,
        holds=True,
        what="a number that is not finite (NaN, Infinity, or beyond about 1.8e308)",
        expected="a finite number",
    )


def _invalid_text(where: str, text: str, field: str | None = None) -> Problem:
    index = next(i for i, c in enumerate(text) if "\ud800" <= c <= "\udfff")
    code = f"\\u{ord(text[index]):04x}"
    return Problem(
        rule="invalid_text",
        message=f"{where} holds a lone UTF-16 surrogate ({code}) at character {index}, which is "
        "not a character and cannot be stored; a surrogate escape must be one of a pair "
        "(such as \\ud83d\\ude00), or write the character itself",
        field=field,
        expected="valid Unicode text",
        actual=f"{code} at character {index}",
    )


# -- the boundary ------------------------------------------------------------------


def visible(text: str, limit: int = 80) -> str:
    """Model text as it may be shown or stored: lone surrogates written as ``\\udXXX``
    escapes, control characters as ``\\xNN``, cut to ``limit`` characters."""
    if not text.isascii() or not text.isprintable():
        text = "".join(
            c
            if c.isprintable() or c == " "
            else (f"\\u{ord(c):04x}" if "\ud800" <= c <= "\udfff" else f"\\x{ord(c):02x}")
            if ord(c) < 0x10000
            else c
            for c in text
        )
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _encodable(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def screen_call(call_id: str, name: str, arguments: object) -> Rejection | None:
    """The checks a call passes before anything of it is decoded: its id and tool name
    are valid Unicode, and its argument text is valid Unicode and within
    `MAX_ARGUMENT_CHARS`. None when it passes; a ``parse`` rejection otherwise."""
    problem = None
    if not _encodable(call_id):
        problem = _invalid_text("the call id", call_id, "id")
    elif not _encodable(name):
        problem = _invalid_text("the tool name", name, "name")
    elif type(arguments) is str:
        if len(arguments) > MAX_ARGUMENT_CHARS:
            problem = _too_long(arguments, "arguments")
        elif not _encodable(arguments):
            problem = _invalid_text("the argument text", arguments)
    return None if problem is None else _reject(problem)


def bad_call_id(call_id: str) -> Rejection:
    """The rejection of a call whose id is missing, or repeated in its batch: the id names
    no one call, so the model cannot tell which answer is whose."""
    text = (
        "the call has no id"
        if not call_id
        else f"the call id '{bounded(call_id, 80)}' appears twice in this batch"
    )
    return Rejection(
        stage=Stage.PARSE,
        problems=(Problem(rule="call_id", message=text),),
        advice="Give every call in a batch its own id; nothing was executed for this call.",
    )


def may_be_deep(text: str) -> bool:
    """Whether argument text could break a bound the validator's own JSON parser lets
    through: nesting deeper than `MAX_DEPTH` (it holds more brackets than that), or the
    words NaN and Infinity. Such text is checked by the parse stage before validation."""
    return text.count("[") + text.count("{") > MAX_DEPTH or "NaN" in text or "Infinity" in text


def check_decoded(value: Any, subject: str = "arguments") -> Problem | None:
    """Whether decoded arguments keep the boundary's rules; the first problem, or None.

    Every key and string must be valid Unicode, nesting at most `MAX_DEPTH`
    levels deep, integers at most `MAX_INT_DIGITS` digits long, and every other
    number finite (no NaN or Infinity, which JSON has no words for, and nothing
    beyond about ±1.8e308). The walk is iterative (no recursion to exhaust) and
    linear in the value's size.
    """
    stack: list[tuple[Any, int, str]] = [(value, 0, "")]
    while stack:
        node, depth, path = stack.pop()
        kind = type(node)
        if kind is str:
            if not _encodable(node):
                shown = visible(path, 60)
                return _invalid_text(f"field '{shown}' of {_the(subject)}", node, shown)
        elif kind is dict or isinstance(node, Mapping):
            if depth > MAX_DEPTH:
                return _too_deep(subject, visible(path, 60) or None)
            for key, item in node.items():
                text = key if type(key) is str else str(key)
                here = f"{path}.{text}" if path else text
                if not _encodable(text):
                    return _invalid_text(f"a key of {_the(subject)}", text, visible(here))
                stack.append((item, depth + 1, here))
        elif kind is list or kind is tuple:
            if depth > MAX_DEPTH:
                return _too_deep(subject, visible(path, 60) or None)
            stack.extend((item, depth + 1, f"{path}[{i}]") for i, item in enumerate(node))
        elif kind is int and node.bit_length() > _MAX_INT_BITS:
            return _too_many_digits(subject, visible(path, 60) or None)
        elif kind is float and not math.isfinite(node):
            return _not_finite(subject, visible(path, 60) or None)
    return None


def _reject(problem: Problem) -> Rejection:
    advice = _ADVICE if problem.rule in ("json_syntax", "arguments_type") else _ADVICE_BOUNDS
    return Rejection(stage=Stage.PARSE, problems=(problem,), advice=advice)
