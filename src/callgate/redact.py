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
import re
import warnings
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

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

__all__ = ["DEFAULT_SECRET_PATTERNS", "REDACTED", "Redactor", "redactor_for"]

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


def _assignments(name: str) -> dict[str, _Variant]:
    """``name=value``, ``name = value`` and JSON's ``"name": "value"``, any case of name."""
    return {
        rf"(?<=(?i:{name})=)[^\s&;,]+": _Variant(r"[^\s&;,]+", f"{name}=", True),
        rf"(?<=(?i:{name}) = )[^\s&;,]+": _Variant(r"[^\s&;,]+", f"{name} = ", True),
        rf'(?<=(?i:{name})": ")[^"\s]+': _Variant(r'[^"\s]+', f'{name}": "', True),
    }


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
``user:password`` in URLs, ``password=``, ``api_key=``, ``apikey=`` and ``token=``
values (also ``name = value`` and JSON's ``"name": "value"``), ``Authorization:
Token``/``Basic`` credentials, and PEM private-key blocks."""

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
        value as text, and, for a field sent as an array or object, every text, number
        and key inside it (a message may quote any one of them)."""
        found: list[str] = []
        for name in secret_fields:
            value = values.get(name)
            if value is None:
                continue
            found.append(str(value))
            if isinstance(value, Mapping | list | tuple):
                stack: list[Any] = [value]
                while stack and len(found) < 1000:
                    node = stack.pop()
                    if isinstance(node, Mapping):
                        found.extend(str(k) for k in node)
                        stack.extend(node.values())
                    elif isinstance(node, list | tuple):
                        stack.extend(node)
                    elif node is not None and not isinstance(node, bool):
                        found.append(str(node))
        return found

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
    """``text`` with every occurrence of each secret value of 4 characters or more replaced;
    occurrences that overlap (of one value or of several) are replaced as one span, so no
    character of any of them is left showing."""
    spans: list[tuple[int, int]] = []
    for secret in secrets:
        if len(secret) < 4:
            continue
        at = text.find(secret)
        while at >= 0:
            spans.append((at, at + len(secret)))
            at = text.find(secret, at + 1)
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
