"""Stage ``parse``: a call's argument text becomes a JSON object, or a rejection.

The message quotes the offending position so that the model can fix it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from callgate.calls import Stage
from callgate.messages import Problem, Rejection, describe_value

__all__ = ["ParsedArguments", "parse_arguments"]

_ADVICE = (
    "Send the call again with the arguments as one JSON object, "
    'e.g. {"field": "value"}, with double-quoted keys and strings.'
)


@dataclass(frozen=True, slots=True)
class ParsedArguments:
    """The decoded arguments, the exact text they came from, and whether they were repaired."""

    value: dict[str, Any]
    text: str | None
    repaired: bool = False


def parse_arguments(arguments: str | Mapping[str, Any]) -> ParsedArguments | Rejection:
    """Decode argument text (or accept a decoded mapping) into a JSON object."""
    if isinstance(arguments, Mapping):
        return ParsedArguments(dict(arguments), None)
    if not isinstance(arguments, str):
        return _reject(
            Problem(
                rule="arguments_type",
                message=f"arguments must be a JSON object, got {describe_value(arguments)}",
                expected="object",
                actual=describe_value(arguments),
            )
        )
    text = arguments
    if not text.strip():
        # Several providers send "" for a call without arguments.
        return ParsedArguments({}, text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return _reject(_syntax_problem(text, exc))
    except RecursionError:
        return _reject(
            Problem(rule="json_syntax", message="arguments are nested too deeply to decode")
        )
    if not isinstance(value, dict):
        return _reject(
            Problem(
                rule="arguments_type",
                message=f"arguments must be a JSON object, got {describe_value(value)}",
                expected="object",
                actual=describe_value(value),
            )
        )
    return ParsedArguments(value, text)


def _syntax_problem(text: str, exc: json.JSONDecodeError) -> Problem:
    start = max(0, exc.pos - 20)
    snippet = text[start : exc.pos + 20].replace("\n", "\\n")
    return Problem(
        rule="json_syntax",
        message=(
            f"arguments are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} "
            f"(char {exc.pos}), near «{snippet}»"
        ),
        actual=snippet,
    )


def _reject(problem: Problem) -> Rejection:
    return Rejection(stage=Stage.PARSE, problems=(problem,), advice=_ADVICE)
