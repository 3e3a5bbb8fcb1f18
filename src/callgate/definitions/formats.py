"""The ``format`` values callgate checks, and the ones it knows carry no constraint.

JSON Schema 2020-12 makes ``format`` an annotation unless a validator opts
in; callgate opts in, because a tool whose schema says ``"format": "date"``
was written for dates and its handler should never see ``"tomorrow"``. Each
checker here is a pure function of the value, linear in its length (regular
expressions run on RE2 through `callgate.regex`), with no network and no
optional dependency.

A format callgate neither checks nor knows to be an annotation is refused
where the tool is defined (`unknown_formats`): accepting it silently would
loosen the schema. The developer names it in ``formats=`` with a checker of
their own, or with ``None`` to declare it an annotation on purpose.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import ipaddress
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from callgate.regex import Unsupported, ecma_regex, ecma_search
from callgate.schema import reachable_schemas

__all__ = ["ANNOTATIONS", "CHECKS", "FormatCheck", "checks_for", "formats_in", "unknown_formats"]

FormatCheck = Callable[[Any], bool]
"""``check(value) -> bool``: whether a value of the format's type is well formed."""

# callgate's own fixed patterns without nested repetition run on Python's `re` (cheaper
# per call than the RE2 binding, and linear for these); the others, and every pattern
# a schema brings, run on RE2.
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}", re.ASCII)
_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})(\.\d+)?([zZ]|[+-]\d{2}:\d{2})", re.ASCII)
_EMAIL = r"^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)+$"  # noqa: E501
_HOSTNAME = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"  # noqa: E501
_URI = r"^[A-Za-z][A-Za-z0-9+.-]*:[^\s<>\"{}|\\^`]*$"
_URI_REFERENCE = r"^[^\s<>\"{}|\\^`]*$"
_DURATION = r"^P(?:\d+W|(?:\d+Y)?(?:\d+M)?(?:\d+D)?(?:T(?:\d+H)?(?:\d+M)?(?:\d+(?:\.\d+)?S)?)?)$"


def _date(value: Any) -> bool:
    if not isinstance(value, str) or not _DATE.fullmatch(value):
        return not isinstance(value, str)
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _time(value: Any) -> bool:
    if not isinstance(value, str):
        return True
    if not _TIME.fullmatch(value):
        return False
    hours, minutes, seconds = int(value[0:2]), int(value[3:5]), int(value[6:8])
    return hours < 24 and minutes < 60 and seconds < 61  # a leap second is 60


def _date_time(value: Any) -> bool:
    if not isinstance(value, str):
        return True
    date, sep, time = value.partition("T") if "T" in value else value.partition("t")
    return bool(sep) and _date(date) and _time(time)


def _duration(value: Any) -> bool:
    if not isinstance(value, str):
        return True
    return value not in ("P", "PT") and not value.endswith("T") and ecma_search(_DURATION, value)


def _pattern(expression: str) -> FormatCheck:
    def check(value: Any) -> bool:
        return not isinstance(value, str) or ecma_search(expression, value)

    return check


def _email(value: Any) -> bool:
    return not isinstance(value, str) or (len(value) <= 254 and ecma_search(_EMAIL, value))


def _hostname(value: Any) -> bool:
    return not isinstance(value, str) or (len(value) <= 253 and ecma_search(_HOSTNAME, value))


def _ip(version: int) -> FormatCheck:
    def check(value: Any) -> bool:
        if not isinstance(value, str):
            return True
        try:
            return ipaddress.ip_address(value).version == version and "%" not in value
        except ValueError:
            return False

    return check


def _uuid(value: Any) -> bool:
    if not isinstance(value, str):
        return True
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        return False
    return len(value) == 36 and str(parsed) == value.lower()


def _byte(value: Any) -> bool:
    if not isinstance(value, str):
        return True
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _regex(value: Any) -> bool:
    if not isinstance(value, str):
        return True
    try:
        ecma_regex(value)
    except Unsupported:
        return False
    return True


def _integer_range(bits: int) -> FormatCheck:
    low: int = -(2 ** (bits - 1))
    high: int = 2 ** (bits - 1) - 1

    def check(value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int):
            return True
        return low <= value <= high

    return check


CHECKS: Mapping[str, FormatCheck] = {
    "date": _date,
    "time": _time,
    "date-time": _date_time,
    "duration": _duration,
    "email": _email,
    "hostname": _hostname,
    "ipv4": _ip(4),
    "ipv6": _ip(6),
    "uuid": _uuid,
    "uri": _pattern(_URI),
    "uri-reference": _pattern(_URI_REFERENCE),
    "byte": _byte,
    "regex": _regex,
    "int32": _integer_range(32),
    "int64": _integer_range(64),
}
"""Formats callgate checks (JSON Schema 2020-12's common ones and OpenAPI's)."""

ANNOTATIONS = frozenset({"password", "binary", "float", "double", "textarea"})
"""Formats that constrain nothing beyond the type (OpenAPI's, mostly): accepted as they are."""


def formats_in(schema: Any) -> Iterator[tuple[str, str]]:
    """Every ``format`` of a schema in ``schema`` with its location (a JSON pointer).

    Every object a validator could read as a schema is read
    (`callgate.schema.reachable_schemas`): under a property named ``default``
    or ``enum`` is a schema whose format counts, and a ``default`` value with a
    ``format`` key is data.
    """
    for where, node in reachable_schemas(schema):
        found = node.get("format")
        if isinstance(found, str):
            yield found, f"{where}/format"


def unknown_formats(
    schema: Any, formats: Mapping[str, FormatCheck | None]
) -> list[tuple[str, str]]:
    """The formats in ``schema`` that are neither checked nor known annotations."""
    return [
        (name, where)
        for name, where in formats_in(schema)
        if name not in CHECKS and name not in ANNOTATIONS and name not in formats
    ]


def checks_for(formats: Mapping[str, FormatCheck | None]) -> dict[str, FormatCheck]:
    """The checkers in force: callgate's, with the developer's added or replaced."""
    merged = dict(CHECKS)
    for name, check in formats.items():
        if check is None:
            merged.pop(name, None)
        else:
            merged[name] = check
    return merged
