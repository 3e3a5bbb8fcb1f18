"""Redaction: secrets never reach the ledger, the audit trail, logs or the model.

Two sources of secrets: argument fields a tool marks secret, and values that
look like credentials (API keys, bearer tokens, passwords in URLs).

Credential-shaped text is found in time linear in the length of the text,
whoever wrote it (a model, a tool, a web page): every pattern runs on RE2
(`callgate.regex`), and private-key blocks are found with `str.find`.

* `DEFAULT_SECRET_PATTERNS` are written in Python's syntax, some with a
  lookbehind or lookahead to say which text around a secret stays visible
  (``https://[redacted]@host``, ``password=[redacted]``). They run as RE2
  patterns whose surrounding text is matched but kept, and the private-key
  pattern as plain code: exactly the text Python's `re.sub` over these patterns
  replaces is replaced.
* Patterns given to ``Redactor(...)`` or ``Gate(secret_patterns=...)`` are
  written in Python's syntax and mean what they mean there (``\\d``, ``\\w``,
  ``\\s`` in every script); the whole match is replaced. Constructs RE2 cannot
  run, or would run with another meaning, raise `DefinitionError` naming the
  pattern: backreferences, lookahead and lookbehind, atomic groups, possessive
  quantifiers, conditionals, ``\\b``, the ``(?x)`` and ``(?a)`` flags, counts
  above 1000, and anchors at the start or end of the text (``\\A``, ``^`` and
  ``$`` without ``(?m)``). A match of the empty text replaces nothing.

Where several patterns match, the leftmost match wins and, at the same place,
the pattern listed first (as in Python's ``re.sub`` over ``a|b|...``). One
exception keeps the time linear: a match of a pattern of yours that would start
before a private-key block and end after it is not looked for (the block is
redacted, and the text on either side is searched on its own); no default
pattern can match across a block.
"""

from __future__ import annotations

import base64
import dataclasses
import decimal
import enum
import functools
import html
import json
import re
import urllib.parse
import uuid
import warnings
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, SecretBytes, SecretStr

from callgate.canonical import canonical_json
from callgate.errors import DefinitionError
from callgate.regex import (
    ADVICE,
    RE2Error,
    Unsupported,
    compile_re2,
    python_regex,
    re2_reason,
    safe_text,
)
from callgate.render import Problem, Rejection, bounded

__all__ = [
    "CONTEXT_SECRET_CHARS",
    "DEFAULT_SECRET_PATTERNS",
    "REDACTED",
    "Redactor",
    "context_secrets",
    "hide_secret_problems",
    "redactor_for",
    "secret_forms",
]

REDACTED = "[redacted]"

_PRIVATE_KEY = r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"
_TOKEN = r"[A-Za-z0-9._~+/=\-]"


@dataclass(frozen=True, slots=True)
class _Variant:
    """A secret (Python syntax) with the text before and after it that is matched but kept.

    ``before`` is ``\\W`` (a word boundary before a secret starting with a word
    character: a non-word character, or the start of the text) or literal text,
    ``ignore_case`` for its letters; its width is what the scan looks back.
    """

    secret: str
    before: str = ""
    ignore_case: bool = False
    after: str = ""

    @property
    def width(self) -> int:
        return 1 if self.before == r"\W" else len(self.before)


def _assignments(name: str, *, plain: bool = True) -> dict[str, _Variant]:
    """``name=value``, ``name = value`` and JSON's ``"name": "value"`` (or ``"name":"value"``),
    any case of name; ``plain=False`` leaves out ``name=value`` (listed on its own)."""
    found = {
        rf"(?<=(?i:{name}) = )[^\s&;,]+": _Variant(r"[^\s&;,]+", f"{name} = ", True),
        rf'(?<=(?i:{name})": ")[^"\s]+': _Variant(r'[^"\s]+', f'{name}": "', True),
        rf'(?<=(?i:{name})":")[^"\s]+': _Variant(r'[^"\s]+', f'{name}":"', True),
    }
    if plain:
        found = {rf"(?<=(?i:{name})=)[^\s&;,]+": _Variant(r"[^\s&;,]+", f"{name}=", True), **found}
    return found


_JWT = r"eyJ[A-Za-z0-9_\-]{5,}\.eyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"


_AUTHORIZATION = rf"(?i:token|basic)\s+{_TOKEN}{{8,}}"

_DEFAULTS: dict[str, _Variant | None] = {
    r"\bsk-[A-Za-z0-9_\-]{16,}": _Variant(r"sk-[A-Za-z0-9_\-]{16,}", r"\W"),  # OpenAI-style
    r"\bsk-ant-[A-Za-z0-9_\-]{16,}": _Variant(r"sk-ant-[A-Za-z0-9_\-]{16,}", r"\W"),
    r"\b(?:ghp|gho|ghs|github_pat)_[A-Za-z0-9_]{20,}": _Variant(
        r"(?:ghp|gho|ghs|github_pat)_[A-Za-z0-9_]{20,}", r"\W"
    ),
    r"\bAKIA[0-9A-Z]{16}\b": _Variant(r"AKIA[0-9A-Z]{16}", r"\W", after=r"(?:\W|\Z)"),  # AWS
    r"\bxox[abprs]-[A-Za-z0-9-]{10,}": _Variant(r"xox[abprs]-[A-Za-z0-9-]{10,}", r"\W"),  # Slack
    rf"(?i:\bbearer\s+){_TOKEN}{{12,}}": _Variant(rf"(?i:bearer)\s+{_TOKEN}{{12,}}", r"\W"),
    r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)": _Variant(r"[^/\s:@]+:[^/\s@]+", "://", after="@"),
    r"(?<=(?i:password)=)[^\s&;,]+": _Variant(r"[^\s&;,]+", "password=", True),
    _PRIVATE_KEY: None,  # found with str.find: see `_private_keys`
    r"\bAIza[0-9A-Za-z_\-]{35}": _Variant(r"AIza[0-9A-Za-z_\-]{35}", r"\W"),  # Google API keys
    **_assignments("api_key"),
    **_assignments("apikey"),
    **_assignments("token"),
    # Stripe secret and restricted keys (live and test), JSON Web Tokens
    r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}": _Variant(
        r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", r"\W"
    ),
    rf"\b{_JWT}": _Variant(_JWT, r"\W"),
    **_assignments("password", plain=False),
    **_assignments("secret"),
    rf"(?<=(?i:authorization): ){_AUTHORIZATION}": _Variant(
        _AUTHORIZATION, "authorization: ", True
    ),
    rf'(?<=(?i:authorization)": "){_AUTHORIZATION}': _Variant(
        _AUTHORIZATION, 'authorization": "', True
    ),
}

DEFAULT_SECRET_PATTERNS: tuple[str, ...] = tuple(_DEFAULTS)
"""Credential shapes redacted everywhere, in Python's syntax: API keys (OpenAI-style
``sk-``, GitHub, AWS ``AKIA``, Slack ``xox``, Google ``AIza``), ``Bearer`` tokens,
``user:password`` in URLs, ``password=``, ``api_key=``, ``apikey=``, ``token=`` and
``secret=`` values (so ``client_secret=``; also ``name = value`` and JSON's ``"name":
"value"``), ``Authorization: Token``/``Basic`` credentials, Stripe secret and restricted
keys (``sk_live_``, ``sk_test_``, ``rk_live_``, ``rk_test_``), JSON Web Tokens
(``eyJ….eyJ….``) and PEM private-key blocks."""

# Lower-case literals one of which appears in any text a default pattern matches:
# a cheap test that lets most texts skip the scan entirely.
_DEFAULT_TRIGGERS = (
    "sk-",
    "ghp_",
    "gho_",
    "ghs_",
    "github_pat_",
    "akia",
    "xox",
    "bearer",
    "://",
    "password",
    "private key",
    "aiza",
    "api_key",
    "apikey",
    "token",
    "authorization",
    "sk_",
    "rk_",
    "eyj",
    "secret",
)
_PAD = b"\n"
"""Put before the text, so that a boundary before a secret at the start is a non-word
character like any other (``\\n`` is no word character and no pattern's literal)."""
_RUN = re.compile(rb"[A-Z ]*")


class Redactor:
    """Replaces secret values and credential-shaped text with ``[redacted]``."""

    __slots__ = ("_groups", "_key_rank", "_pattern", "_reach", "_triggers")

    def __init__(self, patterns: Iterable[str] = DEFAULT_SECRET_PATTERNS) -> None:
        patterns = tuple(patterns)
        variants: list[tuple[int, _Variant]] = []
        self._key_rank: int | None = None
        for rank, pattern in enumerate(patterns):
            if pattern in _DEFAULTS:
                known = _DEFAULTS[pattern]
                if known is None:
                    if self._key_rank is None:
                        self._key_rank = rank
                    continue
                variants.append((rank, known))
            else:
                variants.append((rank, _Variant(_checked(pattern))))
        self._reach = max((v.width for _, v in variants), default=0)
        alternatives = []
        for _, variant in variants:
            pad = self._reach - variant.width
            before = python_regex(variant.before, search=True) if variant.before else ""
            if variant.ignore_case:
                before = f"(?i:{before})"
            secret = python_regex(variant.secret, search=True)
            after = python_regex(variant.after, search=True) if variant.after else ""
            padding = f"[\\s\\S]{{{pad}}}" if pad else ""
            alternatives.append(f"{padding}{before}({secret}){after}")
        self._groups = tuple(rank for rank, _ in variants)
        self._pattern: Any = None
        if alternatives:
            try:
                self._pattern = compile_re2("|".join(alternatives), capture=True)
            except RE2Error as exc:  # a user pattern too large for RE2's memory budget
                raise DefinitionError(
                    f"secret_patterns: RE2 cannot compile these patterns together "
                    f"({re2_reason(exc)}); use fewer or smaller counted repetitions"
                ) from None
        self._triggers = _DEFAULT_TRIGGERS if patterns == DEFAULT_SECRET_PATTERNS else None

    def text(self, text: str, secrets: Collection[str] = ()) -> str:
        """``text`` with the given secret values and credential-shaped strings redacted.

        Values shorter than 4 characters are left in free text (replacing "12" everywhere
        would garble it); longer ones are replaced longest first, so that one value
        contained in another ("acme" in "acme_live_9f8e…") cannot leave the rest showing.
        """
        if secrets:
            text = _without_values(text, secrets)
        if self._pattern is None and self._key_rank is None:
            return text
        if self._triggers is not None:
            lowered = text.lower()
            for trigger in self._triggers:  # a plain loop: several times faster than any()
                if trigger in lowered:
                    break
            else:
                return text
        return self._scan(text)

    def arguments(self, values: Mapping[str, Any], secret_fields: Iterable[str]) -> dict[str, Any]:
        """A copy of ``values`` with the secret fields replaced."""
        secret = set(secret_fields)
        return {k: (REDACTED if k in secret else v) for k, v in values.items()}

    @staticmethod
    def secret_values(values: Mapping[str, Any], secret_fields: Iterable[str]) -> list[str]:
        """The values of the secret fields, to scrub from any other text: each field's
        value as text, and, for a field sent as an array, an object or a nested model,
        every text, number and key inside it (a message may quote any one of them; a
        model's field names are its schema, not its value, and are left out). A
        `SecretStr` or `SecretBytes` counts by its secret value."""
        found: list[str] = []
        for name in secret_fields:
            value = values.get(name)
            if value is None:
                continue
            leaf = _leaf_text(value)
            found.append(leaf if leaf is not None else str(value))
            if leaf is None:
                _walk(value, found, keys=True, limit=1000)
        return found[:1000]

    def value(self, node: Any, secrets: Collection[str] = ()) -> Any:
        """A copy of a record's plain data (mappings, lists, text; what the ledger and
        `Observation.details` hold) with every text in it, keys too, redacted."""
        if isinstance(node, str):
            return self.text(node, secrets)
        if isinstance(node, Mapping):
            return {
                (self.text(k, secrets) if isinstance(k, str) else k): self.value(v, secrets)
                for k, v in node.items()
            }
        if isinstance(node, list | tuple):
            return type(node)(self.value(v, secrets) for v in node)
        return node

    def withheld_rejection(
        self,
        message: str,
        details: tuple[Mapping[str, Any], ...],
        values: Any,
        secret_fields: Collection[str],
        secrets: Collection[str] = (),
    ) -> tuple[str, tuple[Mapping[str, Any], ...]]:
        """A rejection's message and details for a tool with secret fields, without those
        fields' values (taken from ``values``, the arguments as far as they were read) nor
        ``secrets``; for arguments that could not be read as an object at all, the details
        are withheld."""
        if not isinstance(values, Mapping):
            head = message.split("\n", 1)[0]
            withheld = ({"rule": "withheld", "message": "details withheld: secret fields"},)
            return f"{head}\n(details withheld: this tool has secret fields)", withheld
        found = [*self.secret_values(values, secret_fields), *secrets]
        scrubbed = tuple(
            {k: self.text(v, found) if isinstance(v, str) else v for k, v in d.items()}
            for d in details
        )
        return self.text(message, found), scrubbed

    def withheld_arguments(
        self, values: Any, secret_fields: Collection[str], secrets: Collection[str] = ()
    ) -> str:
        """Arguments the ledger may hold for a tool with secret fields, as far as they were
        read: those fields replaced, their values and ``secrets`` scrubbed from the rest,
        bounded; arguments that are not an object are withheld whole."""
        if not isinstance(values, Mapping):
            return REDACTED
        found = [*self.secret_values(values, secret_fields), *secrets]
        try:
            text = canonical_json(self.arguments(values, secret_fields))
        except (TypeError, ValueError, RecursionError):
            return REDACTED
        return self.text(bounded(text, 4000), found)

    def error(self, exc: BaseException, secrets: Collection[str] = (), limit: int = 500) -> str:
        """An exception as the ledger and the logs may hold it: its type and text, redacted,
        at most ``limit`` characters."""
        return self.text(f"{type(exc).__name__}: {exc}", secrets)[:limit]

    def _scan(self, text: str) -> str:
        """``text`` with every match replaced, leftmost first, in one pass.

        The text is searched with a padding of ``_reach`` characters before it, and
        every alternative starts exactly ``_reach`` characters before its secret, so
        the leftmost match RE2 finds is the one whose secret starts leftmost, and a
        search from ``pos`` sees the text before ``pos`` as a lookbehind would. The
        search runs on the UTF-8 bytes, encoded once (RE2 reads UTF-8; the binding
        would encode a `str` again on every call).
        """
        data = safe_text(text).encode("utf-8")  # a lone surrogate is searched as U+FFFD
        reach = self._reach
        padded = _PAD * reach + data
        keys = _PrivateKeys(data) if self._key_rank is not None else None
        spans: list[tuple[int, int]] = []
        pos = 0
        while True:
            key = keys.next(pos) if keys is not None else None
            found = self._next(padded, pos, key[1] + reach if key else len(padded))
            if found is not None and key is not None:
                start, _, rank = found
                if start > key[0] or (start == key[0] and rank > (self._key_rank or 0)):
                    found = None  # the private key is leftmost (or listed first)
                else:
                    found = self._next(padded, pos, len(padded))  # its whole extent
            if found is not None:
                start, end = found[0], found[1]
            elif key is not None:
                start, end = key
            else:
                break
            if end <= pos:  # an empty match (or one inside what is replaced) replaces nothing
                pos = max(pos, start) + 1
                while pos < len(data) and data[pos] & 0xC0 == 0x80:
                    pos += 1  # to the next character
                if pos > len(data):
                    break
                continue
            spans.append((max(start, pos), end))
            pos = end
        if not spans:
            return text
        out: list[str] = []
        kept = byte = char = 0  # where the text is copied from; a byte offset and its character
        for start, end in spans:
            char += len(data[byte:start].decode("utf-8"))
            out.append(text[kept:char])
            out.append(REDACTED)
            char += len(data[start:end].decode("utf-8"))
            byte = end
            kept = char
        out.append(text[kept:])
        return "".join(out)

    def _next(self, padded: bytes, pos: int, endpos: int) -> tuple[int, int, int] | None:
        """The leftmost match whose secret starts at byte ``pos`` or later: start, end, rank."""
        if self._pattern is None:
            return None
        # Every alternative starts `_reach` characters (not bytes) before its secret.
        at = pos + self._reach
        for _ in range(self._reach):
            at -= 1
            while padded[at] & 0xC0 == 0x80:
                at -= 1
        match = self._pattern.search(padded, at, endpos)
        if match is None:
            return None
        for group, rank in enumerate(self._groups, 1):
            start, end = match.span(group)
            if start >= 0:
                return start - len(_PAD) * self._reach, end - len(_PAD) * self._reach, rank
        raise AssertionError("a match without its secret group")  # pragma: no cover


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
        html.escape(secret),
    ]
    encoded = [
        urllib.parse.quote(secret, safe=""),
        urllib.parse.quote(secret),
        urllib.parse.quote_plus(secret),
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


class _PrivateKeys:
    """PEM private-key blocks of one (UTF-8) text, found with `bytes.find` in linear time.

    As Python reads ``-----BEGIN [A-Z ]*PRIVATE KEY-----[\\s\\S]*?-----END [A-Z
    ]*PRIVATE KEY-----``: a header, then the first footer after it. Positions are
    asked for in increasing order, so each part of the text is read once.
    """

    __slots__ = ("_begin", "_end", "_no_end_from", "_text")

    def __init__(self, text: bytes) -> None:
        self._text = text
        self._begin: tuple[int, int] | None = None  # the next header: start, end
        self._end: tuple[int, int] | None = None  # the next footer: start, end
        self._no_end_from: int | None = None

    def next(self, pos: int) -> tuple[int, int] | None:
        """The first block starting at ``pos`` or later: start, end."""
        if self._no_end_from is not None:
            return None
        if self._begin is None or self._begin[0] < pos:
            self._begin = self._marker(b"-----BEGIN ", pos)
        if self._begin is None:
            self._no_end_from = pos
            return None
        start, header_end = self._begin
        if self._end is None or self._end[0] < header_end:
            self._end = self._marker(b"-----END ", header_end)
        if self._end is None:
            self._no_end_from = header_end  # no footer after this header, nor a later one
            return None
        return start, self._end[1]

    def _marker(self, opening: bytes, pos: int) -> tuple[int, int] | None:
        """The first ``opening`` + ``[A-Z ]*PRIVATE KEY-----`` at ``pos`` or later."""
        text = self._text
        while True:
            at = text.find(opening, pos)
            if at < 0:
                return None
            label = at + len(opening)
            run = _RUN.match(text, label)
            assert run is not None
            stop = run.end()
            if stop - label >= 11 and text.startswith(b"PRIVATE KEY-----", stop - 11):
                return at, stop + 5
            pos = at + 1


def _checked(pattern: Any) -> str:
    """A user's secret pattern, checked; `DefinitionError` naming it and why if refused."""
    if not isinstance(pattern, str):
        raise DefinitionError(
            f"secret_patterns needs patterns as text (str), got {type(pattern).__name__}"
        )
    shown = pattern if len(pattern) <= 120 else pattern[:117] + "..."
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise DefinitionError(
                f"secret pattern '{shown}' is not a valid regular expression: {exc}"
            ) from None
        except (RecursionError, OverflowError):
            raise DefinitionError(
                f"secret pattern '{shown}' is too deeply nested or too large"
            ) from None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        empty = re.fullmatch(pattern, "") is not None
    if empty:
        raise DefinitionError(
            f"secret pattern '{shown}' matches the empty text: it would redact nothing there "
            "and keep the patterns listed after it from being looked for; make it match at "
            "least one character (e.g. '+' instead of '*', or no '?' around the whole)"
        )
    try:
        python_regex(pattern, search=True)
    except Unsupported as exc:
        at = f" at position {exc.position}" if exc.position is not None else ""
        advice = _ADVICE.get(exc.construct) or ADVICE.get(exc.construct, "simplify the pattern")
        raise DefinitionError(
            f"secret pattern '{shown}' uses {exc.construct}{at}, which callgate cannot run: "
            f"{exc.why}. Secret patterns run on RE2, in time linear in the length of the "
            f"text. Instead, {advice}."
        ) from None
    return pattern


_ADVICE = {
    "a lookahead or lookbehind": (
        "put the text around the secret in the pattern itself (it is redacted with the secret)"
    ),
    "a word boundary": (
        "write the neighbouring characters, e.g. (?:^|\\W) with (?m), or drop the \\b"
    ),
}
"""Advice for secret patterns where the policy wording does not fit."""


@functools.lru_cache(maxsize=32)
def redactor_for(patterns: tuple[str, ...] = DEFAULT_SECRET_PATTERNS) -> Redactor:
    """The `Redactor` of ``patterns``, built once: translating and compiling the
    patterns costs about half a millisecond, and a redactor never changes after it
    is built, so gates (an agent makes one per instance) share it."""
    return Redactor(patterns)
