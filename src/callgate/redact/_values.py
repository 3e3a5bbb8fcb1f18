"""Secret values: what is scrubbed of a call besides credential-shaped text, and the forms
each value is looked for in (`callgate.redact`)."""

from __future__ import annotations

import base64
import dataclasses
import decimal
import enum
import functools
import json
import re
import urllib.parse
import uuid
from collections.abc import Collection, Mapping
from typing import Any

from pydantic import BaseModel, SecretBytes, SecretStr

from callgate.render import Problem, Rejection

REDACTED = "[redacted]"


def _without_values(text: str, secrets: Collection[str]) -> str:
    """``text`` with every occurrence of each secret value of 4 characters or more replaced,
    in any of its forms (`secret_forms`: case, ``repr``, JSON and percent escapes, base64);
    occurrences that overlap (of one value or of several) are replaced as one span, so no
    character of any of them is left showing."""
    spans: list[tuple[int, int]] = []
    folded = text.lower()
    if len(folded) != len(text):  # a character whose lower case is longer: search as is
        folded = ""
    for secret in secrets:
        if len(secret) < 4:
            continue
        if folded:
            lowered, exact = _needles(secret)
            for needle in lowered:
                at = folded.find(needle)
                while at >= 0:
                    spans.append((at, at + len(needle)))
                    at = folded.find(needle, at + 1)
        else:
            exact = secret_forms(secret)
        for needle in exact:
            at = text.find(needle)
            while at >= 0:
                spans.append((at, at + len(needle)))
                at = text.find(needle, at + 1)
    if not spans:
        return text
    spans.sort()
    out: list[str] = []
    kept = 0
    start, end = spans[0]
    for s, e in spans[1:]:
        if s < end:  # overlaps the span being built
            end = max(end, e)
            continue
        out.append(text[kept:start])
        out.append(REDACTED)
        kept = end
        start, end = s, e
    out.append(text[kept:start])
    out.append(REDACTED)
    out.append(text[end:])
    return "".join(out)


_FIELD_ROOT = re.compile(r"[.\[]")


def hide_secret_problems(rejection: Rejection, secret_fields: Collection[str]) -> Rejection:
    """``rejection`` with every problem about a secret field told without its value: the
    value is never quoted back, however short (a CVV is three digits)."""
    problems = []
    changed = False
    for p in rejection.problems:
        root = _FIELD_ROOT.split(p.field, maxsplit=1)[0] if p.field else None
        if root is not None and root in secret_fields:
            expected = f": expected {p.expected}" if p.expected else ""
            p = Problem(
                rule=p.rule,
                field=p.field,
                expected=p.expected,
                actual=REDACTED,
                message=f"field '{p.field}' is not valid{expected} (its value is secret and "
                "not shown)",
            )
            changed = True
        problems.append(p)
    return dataclasses.replace(rejection, problems=tuple(problems)) if changed else rejection


_MIN_ENCODED = 8
"""An encoded form (base64, percent-encoding) shorter than this is not looked for: a short
run of base64 letters appears by chance in ordinary words."""


@functools.lru_cache(maxsize=4096)
def secret_forms(secret: str) -> tuple[str, ...]:
    """The forms a secret value takes when a handler or a library prints it, each looked
    for (case-insensitively where the case folds one to one) wherever the value is: the
    value itself (so its upper and lower case), its ``repr`` and JSON escapes, its
    percent-encodings (``quote``, ``quote_plus``) and its base64 (standard and URL-safe,
    with or without padding, and at each of the three byte alignments it can have inside
    a longer base64 text). Transformations beyond these (hashing, encryption, splitting)
    are the handler's to avoid."""
    forms = dict.fromkeys([secret, secret.upper(), secret.lower()])
    escaped = [
        repr(secret)[1:-1],
        ascii(secret)[1:-1],
        json.dumps(secret)[1:-1],
        json.dumps(secret, ensure_ascii=False)[1:-1],
        _html_escaped(secret),
    ]
    # A lone surrogate (a legal JSON escape a model may send) is encoded as it is, as
    # `callgate.canonical.digest` does: percent-encoding it must not raise.
    encoded = [
        urllib.parse.quote(secret, safe="", errors="surrogatepass"),
        urllib.parse.quote(secret, errors="surrogatepass"),
        urllib.parse.quote_plus(secret, errors="surrogatepass"),
    ]
    raw = secret.encode("utf-8", "surrogatepass")
    for offset in range(3):
        padded = b"\0" * offset + raw
        first = -(-8 * offset // 6)  # the first character that encodes only the secret's bits
        last = 8 * len(padded) // 6  # the end of those whose bits are all the secret's
        for encoder in (base64.b64encode, base64.urlsafe_b64encode):
            text = encoder(padded).decode("ascii")
            encoded.append(text[first:last])
            if not offset:
                encoded.append(text.rstrip("="))  # the secret encoded alone
    forms.update(dict.fromkeys(escaped))
    forms.update(dict.fromkeys(e for e in encoded if len(e) >= _MIN_ENCODED))
    return tuple(f for f in forms if len(f) >= 4)


@functools.lru_cache(maxsize=4096)
def _needles(secret: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The forms of ``secret`` to look for in a lower-cased text (each form lower-cased,
    once), and those whose lower case has another length, to look for as they are."""
    lowered: dict[str, None] = {}
    exact: list[str] = []
    for form in secret_forms(secret):
        low = form.lower()
        if len(low) == len(form):
            lowered[low] = None
        else:
            exact.append(form)
    return tuple(lowered), tuple(exact)


def _html_escaped(text: str) -> str:
    """``html.escape(text)`` (without importing `html`, whose entity table costs import
    time)."""
    for char, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;")):
        text = text.replace(char, entity)
    return text.replace("'", "&#x27;")


CONTEXT_SECRET_CHARS = 8
"""Trusted-context values whose text is this long or longer are scrubbed like secret fields."""


def context_secrets(context: Mapping[str, Any], limit: int = 1000) -> tuple[str, ...]:
    """Every value of at least `CONTEXT_SECRET_CHARS` characters inside a trusted context
    (tokens, keys, account ids; not labels such as a plan or a role, which are no secret
    and whose scrubbing would garble ordinary words), as text, iteratively, at most
    ``limit``. Values of any type count by their text: `SecretStr` and `SecretBytes` by
    their secret value, `bytes` decoded (and by their ``repr`` and base64 when they are
    not UTF-8), numbers and UUIDs by ``str``, and the fields of a Pydantic model or a
    dataclass inside the context one by one."""
    found: list[str] = []
    _walk(context, found, keys=False, limit=limit)
    return tuple(dict.fromkeys(t for t in found if len(t) >= CONTEXT_SECRET_CHARS))


def _leaf_text(value: Any) -> str | None:
    """The text of a value that holds no other values, or None for a container."""
    if isinstance(value, str):
        return value
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, SecretBytes):
        value = value.get_secret_value()
    if isinstance(value, bytes | bytearray):
        data = bytes(value)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return repr(data)[2:-1]
    if isinstance(value, enum.Enum):
        return _leaf_text(value.value)
    if isinstance(value, int | float | decimal.Decimal | uuid.UUID) and not isinstance(value, bool):
        return str(value)
    return None


def _walk(value: Any, found: list[str], *, keys: bool, limit: int) -> None:
    """Append the text of every value inside ``value`` (mapping keys too if ``keys``), at
    most ``limit`` in all; booleans and ``None`` are no secret text."""
    stack: list[Any] = [value]
    while stack and len(found) < limit:
        node = stack.pop()
        if node is None or isinstance(node, bool):
            continue
        leaf = _leaf_text(node)
        if leaf is not None:
            found.append(leaf)
            if isinstance(node, bytes | bytearray | SecretBytes):  # not UTF-8: as base64 too
                raw = node.get_secret_value() if isinstance(node, SecretBytes) else node
                found.append(base64.b64encode(bytes(raw)).decode("ascii").rstrip("="))
        elif isinstance(node, Mapping):
            if keys:
                found.extend(str(k) for k in node)
            stack.extend(node.values())
        elif isinstance(node, list | tuple | set | frozenset):
            stack.extend(node)
        elif isinstance(node, BaseModel):
            stack.extend(node.__dict__.values())
            stack.extend((node.__pydantic_extra__ or {}).values())
        elif dataclasses.is_dataclass(node) and not isinstance(node, type):
            stack.extend(getattr(node, f.name, None) for f in dataclasses.fields(node))
