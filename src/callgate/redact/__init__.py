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

import functools
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from callgate.canonical import canonical_json
from callgate.errors import DefinitionError
from callgate.redact._patterns import (
    _DEFAULT_TRIGGERS,
    _DEFAULTS,
    _PAD,
    DEFAULT_SECRET_PATTERNS,
    _checked,
    _PrivateKeys,
    _Variant,
)
from callgate.redact._values import (
    CONTEXT_SECRET_CHARS,
    REDACTED,
    _leaf_text,
    _walk,
    _without_values,
    context_secrets,
    hide_secret_problems,
    secret_forms,
)
from callgate.regex import RE2Error, compile_re2, python_regex, re2_reason, safe_text
from callgate.render import bounded

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
        if isinstance(node, list):
            return [self.value(v, secrets) for v in node]
        if isinstance(node, tuple):  # a plain tuple (a named one's fields are kept as a tuple)
            return tuple(self.value(v, secrets) for v in node)
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


@functools.lru_cache(maxsize=32)
def redactor_for(patterns: tuple[str, ...] = DEFAULT_SECRET_PATTERNS) -> Redactor:
    """The `Redactor` of ``patterns``, built once: translating and compiling the
    patterns costs about half a millisecond, and a redactor never changes after it
    is built, so gates (an agent makes one per instance) share it."""
    return Redactor(patterns)
