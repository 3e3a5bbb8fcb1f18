"""How an operation's argument values are written into its HTTP request (OpenAPI 3 styles).

| where | style | a list ``[a, b]`` | an object ``{k: v}`` |
|---|---|---|---|
| query, form body | ``form``, explode (default) | ``n=a&n=b`` | ``k=v`` (one key per property) |
| query, form body | ``form``, no explode | ``n=a,b`` | ``n=k,v`` |
| query, form body | ``spaceDelimited``, ``pipeDelimited`` | ``n=a b``, ``n=a\\|b`` | not written |
| query, form body | ``deepObject`` | ``n[0]=a&n[1]=b`` | ``n[k]=v`` |
| path, header | ``simple`` | ``a,b`` | ``k,v`` (explode: ``k=v``) |
| multipart part | | one part each (files), else JSON | JSON |

A value nested deeper than its style defines is written with brackets below its
key (``items[0][price]=p_1``): the convention Stripe, Rails and PHP read, and
what ``deepObject`` means at every depth. Booleans are ``true``/``false``;
``null`` inside a value is the empty string (Stripe's way to unset a field).

The model chooses keys inside object values, so `request_check` refuses, at the
``semantic`` stage before anything is sent, a key holding ``[`` or ``]`` (it
would forge another nested field) and a spread object's key that is another
field or parameter of the request (it would write a credential's query
parameter or another argument).
"""

from __future__ import annotations

import base64
import json
import secrets
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from callgate.errors import ArgumentError
from callgate.openapi.document import Argument, Operation

__all__ = ["form_pairs", "multipart", "path_text", "query_pairs", "request_check", "text"]

FORM = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"
_SEPARATOR = {"form": ",", "spaceDelimited": " ", "pipeDelimited": "|"}


def text(value: Any) -> str:
    """One scalar as request text (an object or list left over becomes compact JSON)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def _nested(value: Any) -> bool:
    return isinstance(value, dict | list)


def _deep(name: str, value: Any) -> list[tuple[str, str]]:
    """``name[k][0]=v`` pairs for every leaf of ``value`` (an empty object or list: none)."""
    if isinstance(value, dict):
        return [pair for k, v in value.items() for pair in _deep(f"{name}[{k}]", v)]
    if isinstance(value, list):
        return [pair for i, v in enumerate(value) for pair in _deep(f"{name}[{i}]", v)]
    return [(name, text(value))]


def _pairs(name: str, value: Any, style: str, explode: bool) -> list[tuple[str, str]]:
    if value is None:
        return []
    if style == "json":
        return [(name, text(value))]
    if style == "deepObject":
        return _deep(name, value)
    if isinstance(value, list):
        if explode:
            return [
                pair
                for i, v in enumerate(value)
                for pair in (_deep(f"{name}[{i}]", v) if _nested(v) else [(name, text(v))])
            ]
        return [(name, _SEPARATOR.get(style, ",").join(text(v) for v in value))]
    if isinstance(value, dict):
        if explode:
            return [
                pair
                for k, v in value.items()
                for pair in (_deep(k, v) if _nested(v) else [(k, text(v))])
            ]
        return [(name, ",".join(text(part) for k, v in value.items() for part in (k, v)))]
    return [(name, text(value))]


def query_pairs(argument: Argument, value: Any) -> list[tuple[str, str]]:
    """The ``key=value`` pairs one query (or cookie) argument adds."""
    return _pairs(argument.source, value, argument.style, argument.explode)


def form_pairs(operation: Operation, values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The pairs of a form body from the body arguments' values (by argument name)."""
    by_name = {a.name: a for a in operation.arguments if a.location == "body"}
    return [
        pair
        for name, value in values.items()
        for pair in _pairs(by_name[name].source, value, by_name[name].style, by_name[name].explode)
    ]


def path_text(argument: Argument, value: Any, *, quote: bool) -> str:
    """A ``simple``-style value for a path segment (each part percent-encoded, ``/`` too,
    when ``quote``) or a header."""

    def one(part: Any) -> str:
        written = text(part)
        return urllib.parse.quote(written, safe="") if quote else written

    if isinstance(value, list):
        return ",".join(one(v) for v in value)
    if isinstance(value, dict):
        if argument.explode:
            return ",".join(f"{one(k)}={one(v)}" for k, v in value.items())
        return ",".join(one(part) for k, v in value.items() for part in (k, v))
    return one(value)


def multipart(operation: Operation, values: Mapping[str, Any]) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body and its content type from the body arguments' values:
    a file argument's base64 text becomes a file part of its bytes."""
    by_name = {a.name: a for a in operation.arguments if a.location == "body"}
    parts: list[tuple[str, str | None, bytes]] = []
    for name, value in values.items():
        arg = by_name[name]
        if value is None:
            continue
        if arg.file:
            for item in value if isinstance(value, list) else [value]:
                parts.append((arg.source, arg.source, base64.b64decode(item, validate=True)))
        elif arg.style == "json" or (_nested(value) and not isinstance(value, list)):
            parts.append((arg.source, None, text(value).encode()))
        elif isinstance(value, list):
            parts.extend((arg.source, None, text(v).encode()) for v in value)
        else:
            parts.append((arg.source, None, text(value).encode()))
    boundary = secrets.token_hex(16)
    while any(boundary.encode() in data for _, _, data in parts):
        boundary = secrets.token_hex(16)
    out = bytearray()
    for field, filename, data in parts:
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{_quoted(field)}"'
        if filename is not None:
            head += f'; filename="{_quoted(filename)}"\r\nContent-Type: application/octet-stream'
        out += head.encode()
        out += b"\r\n\r\n" + data + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out), f"{MULTIPART}; boundary={boundary}"


def _quoted(name: str) -> str:
    """A field or file name inside a quoted header parameter (as browsers write it)."""
    return name.replace("\r", "%0D").replace("\n", "%0A").replace('"', "%22")


def _texts(value: Any) -> Iterable[str]:
    """Every key and scalar inside ``value`` as it is written (the raw text, not JSON's
    escaped form: a line break in a nested value is still a line break in a header)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield from (str(k) for k in node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        else:
            yield text(node)


def _keys(value: Any) -> Iterable[str]:
    """Every object key inside ``value``, at any depth."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            yield from (str(k) for k in node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def request_check(
    operation: Operation, credential_query: Iterable[str] = ()
) -> Callable[[BaseModel], None] | None:
    """The semantic check of values that go into the request line, headers and form keys
    (None when the operation has none). Refused here, nothing is ever sent:

    - a path value ``""``, ``.`` or ``..`` (it would change the path);
    - a header or cookie value with anything but visible ASCII (a line break adds a header);
    - an object key with ``[`` or ``]`` in a value written as ``a[b]`` pairs;
    - a spread object's key that names another parameter or field of the request.
    """
    args = operation.arguments
    paths = [a for a in args if a.location == "path"]
    headers = [a for a in args if a.location in ("header", "cookie")]
    keyed = [
        a
        for a in args
        if a.location == "query" or (a.location == "body" and operation.media == FORM)
    ]
    taken_query = set(operation.query_names) | set(credential_query)
    taken_form = {a.source for a in args if a.location == "body"}
    if not (paths or headers or keyed):
        return None

    def check(values: BaseModel) -> None:
        dumped = values.model_dump(by_alias=True)
        for arg in paths:
            written = path_text(arg, dumped.get(arg.name, ""), quote=True)
            if written in ("", ".", ".."):
                raise ArgumentError(
                    arg.name, f"a path segment cannot be {written!r}: give the identifier itself"
                )
        for arg in headers:
            value = dumped.get(arg.name)
            if value is not None and not all(set(t) <= _HEADER_TEXT for t in _texts(value)):
                raise ArgumentError(
                    arg.name,
                    "this value goes into an HTTP header, which holds visible ASCII "
                    "characters only (no line breaks, no accents)",
                )
        for arg in keyed:
            value = dumped.get(arg.name)
            if value is None or arg.style == "json":
                continue
            bad = next((k for k in _keys(value) if "[" in k or "]" in k), None)
            if bad is not None:
                raise ArgumentError(
                    arg.name,
                    f"the key {bad[:80]!r} holds '[' or ']', which this request writes "
                    "around keys (a[b]=…): use a key without brackets",
                )
            if arg.style == "form" and arg.explode and isinstance(value, dict):
                taken = (taken_query if arg.location == "query" else taken_form) - {arg.source}
                clash = next((k for k in value if str(k) in taken), None)
                if clash is not None:
                    raise ArgumentError(
                        arg.name,
                        f"the key {str(clash)[:80]!r} is another field of this request: "
                        "each key of this object is sent as a field of its own, so it "
                        "cannot name another one",
                    )

    return check


_HEADER_TEXT = frozenset(chr(c) for c in range(0x20, 0x7F)) | {"\t"}
