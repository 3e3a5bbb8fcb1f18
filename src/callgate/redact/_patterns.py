"""The default credential patterns (Python's syntax, run on RE2), private-key blocks found
with `bytes.find`, and the check of a user's own secret patterns (`callgate.redact`)."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any

from callgate.errors import DefinitionError
from callgate.regex import ADVICE, Unsupported, python_regex

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
