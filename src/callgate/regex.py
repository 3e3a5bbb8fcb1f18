"""Regular expressions on RE2: time linear in the text, whoever chose the text.

Two dialects are read here and run on RE2 (the `google-re2` binding), which
never backtracks:

* **Python's** (`python_regex`): policy ``regex`` predicates and
  ``Gate(secret_patterns=...)``. A pattern is checked by Python's `re` (so its
  syntax and errors are Python's), then translated token by token into RE2
  syntax with Python's meaning: ``\\d``, ``\\w`` and ``\\s`` become the exact
  code points Python's `re` gives them, ``{,n}`` becomes ``{0,n}``, ``\\Z``
  becomes ``\\z``, escapes become ``\\x{...}``.
* **ECMA-262's** (`ecma_regex`), the dialect of JSON Schema's ``pattern`` and
  ``patternProperties``, as far as RE2 allows: ``\\d``, ``\\w``, ``\\b`` are
  ASCII, ``\\s`` and ``.`` know ECMA's spaces and line terminators, ``\\uXXXX``
  and ``\\cX`` escapes are read; characters are code points, not UTF-16 units.

What RE2 cannot run, or would run with another meaning, raises `Unsupported`
naming the construct, why, and (in `ADVICE`) what to write instead.
"""

from __future__ import annotations

import array
import functools
import re
import unicodedata
from typing import Any

import re2

__all__ = [
    "ADVICE",
    "RE2Error",
    "Unsupported",
    "compile_re2",
    "ecma_regex",
    "ecma_search",
    "python_regex",
    "re2_reason",
    "safe_text",
]

RE2Error = re2.error
"""What RE2 raises for a pattern it refuses (see `re2_reason`)."""
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False
_OPTIONS.never_capture = True
_CAPTURING = re2.Options()
_CAPTURING.log_errors = False
_SURROGATES = dict.fromkeys(range(0xD800, 0xE000), 0xFFFD)
_REPEAT = re.compile(r"\{(\d*)(?:(,)(\d*))?\}")
_FLAGS = re.compile(r"\(\?([aiLmsux]*)(?:-([imsx]*))?([:)])")
_OCTAL = "01234567"
_CONDITIONAL = ("a conditional group", "RE2 has no conditional groups")
_NO_BACKTRACKING = "RE2 never backtracks, so nothing is lost"
_BACKREFERENCE = ("a backreference", "matching one can take time exponential in the value's length")
_LOOKAROUND = ("a lookahead or lookbehind", "RE2 does not look ahead or behind")
_DOLLAR = (
    "a $ with more pattern after it",
    "Python's $ also matches before a final newline, RE2's only at the end of the value",
)
_TEXT_ANCHOR = (
    "an anchor at the start or end of the text (\\A, or ^ or $ without (?m))",
    "a secret pattern is looked for anywhere in a text, and Python's $ also matches "
    "before a final newline",
)
_WORD_BOUNDARY = (
    "a word boundary",
    "RE2's \\b knows only ASCII letters, so the pattern would match other values than in Python",
)
ADVICE = {
    _BACKREFERENCE[0]: "write the repeated text out, or list the allowed values with 'in'",
    _LOOKAROUND[0]: (
        "match the whole value with a plain pattern, and put what must not match in a "
        "separate deny rule"
    ),
    "an atomic group": f"write (?:...) for (?>...): {_NO_BACKTRACKING}",
    "a possessive quantifier": (
        f"write the plain quantifier (*, +, ?, {{m,n}}) without the extra +: {_NO_BACKTRACKING}"
    ),
    _CONDITIONAL[0]: "write the alternatives out with |",
    _WORD_BOUNDARY[0]: (
        "write the neighbouring characters: a pattern matches the whole value, so "
        "(?s)(.*\\W)?word(\\W.*)? finds the word anywhere in it"
    ),
    _DOLLAR[0]: (
        "end the pattern (or a top-level alternative) with $, write \\n?\\Z for an "
        "optional final newline, or use (?m)"
    ),
    _TEXT_ANCHOR[0]: "use (?m)^ and (?m)$ for the start and end of a line, or \\Z for the end",
    "the flag (?x)": "remove the flag, the spaces and the comments",
    "the flag (?a)": "write the ASCII classes out: [0-9], [A-Za-z0-9_], [ \\t\\n\\r\\f\\v]",
    "more than 1000 repetitions": (
        "use + or * and bound the argument's length in the tool's schema (max_length)"
    ),
}
"""What to write instead of each refused construct (policy patterns' wording)."""


class Unsupported(Exception):
    """A construct of a valid pattern that RE2 cannot run (or would run with another meaning)."""

    def __init__(self, construct: str, why: str, position: int | None = None) -> None:
        super().__init__(construct)
        self.construct = construct
        self.why = why
        self.position = position


def python_regex(pattern: str, *, search: bool = False) -> str:
    """A valid Python pattern (``re.compile`` accepts it) in RE2 syntax, same meaning.

    Raises `Unsupported` for what RE2 cannot run; with ``search`` (a pattern looked
    for anywhere in a text) anchors at the start or end of the text are refused too.
    """
    return _translate(pattern, search=search)


def compile_re2(translated: str, *, capture: bool = False) -> Any:
    """An RE2 pattern; `re2.error` (see `re2_reason`) if RE2 refuses it."""
    return re2.compile(translated, _CAPTURING if capture else _OPTIONS)


def re2_reason(exc: Exception) -> str:
    """RE2's own reason for refusing a pattern, as text."""
    reason = exc.args[0] if exc.args else ""
    if isinstance(reason, bytes):
        reason = reason.decode("utf-8", "replace")
    return str(reason).split(":", 1)[0]


def safe_text(text: str) -> str:
    """``text`` with every lone surrogate (which RE2 cannot read) replaced by U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.translate(_SURROGATES)
    return text


@functools.cache
def _python_classes() -> dict[str, str]:
    """RE2 class ranges of exactly the code points Python's ``\\d``, ``\\w``, ... match.

    Built on first use, not at import: from the ranges stored in
    `callgate._unicode_classes` when they were measured on this interpreter's Unicode
    database, else measured now (`_measured_ranges`, 0.1-0.5 s).
    """
    found = _stored_ranges() or _measured_ranges()
    classes = {}
    for letter, ranges in found.items():
        classes[letter] = _spell(ranges)
        classes[letter.upper()] = _spell(_complement(ranges))
    return classes


def _measured_ranges() -> dict[str, list[tuple[int, int]]]:
    """The code point ranges of ``\\d``, ``\\s``, ``\\w``, measured by Python's `re` itself
    over every code point but the surrogates (a lone surrogate in a value is matched as
    U+FFFD)."""
    found: dict[str, list[tuple[int, int]]] = {letter: [] for letter in "dsw"}
    for start, stop in _CODE_POINTS:
        text = array.array("I", range(start, stop)).tobytes().decode("utf-32-le")
        for letter, ranges in found.items():
            for match in re.finditer(f"\\{letter}+", text):
                ranges.append((start + match.start(), start + match.end() - 1))
    return found


def _stored_ranges() -> dict[str, list[tuple[int, int]]] | None:
    """The ranges `_write_stored_ranges` measured, if measured on this Unicode database."""
    from callgate import _unicode_classes as stored

    if unicodedata.unidata_version != stored.UNIDATA_VERSION:
        return None
    found = {}
    for letter, numbers in stored.RANGES.items():
        flat = [int(n) for n in numbers.split()]
        found[letter] = list(zip(flat[::2], flat[1::2], strict=True))
    return found


def _write_stored_ranges(path: str) -> None:
    """Measure the ranges on this interpreter and write them as the module at ``path``
    (``python -m callgate.regex`` rewrites `callgate._unicode_classes`)."""
    lines = [
        '"""The code point ranges of Python\'s ``\\\\d``, ``\\\\s``, ``\\\\w``, measured by re.',
        "",
        "Each is first and last code point of one range, then the next range's; generated",
        '(``python -m callgate.regex``), do not edit. Read by `callgate.regex`."""',
        "",
        f'UNIDATA_VERSION = "{unicodedata.unidata_version}"',
        "RANGES: dict[str, str] = {",
    ]
    for letter, ranges in _measured_ranges().items():
        flat = [str(code) for pair in ranges for code in pair]
        lines.append(f'    "{letter}": (')
        for i in range(0, len(flat), 12):
            lines.append(f'        "{" ".join(flat[i : i + 12])} "')
        lines.append("    ),")
    lines.append("}")
    with open(path, "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")


_CODE_POINTS = ((0, 0xD800), (0xE000, 0x110000))


def _complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The code points (surrogates aside) outside sorted, disjoint ``ranges``."""
    gaps = []
    for start, stop in _CODE_POINTS:
        low = start
        for first, last in ranges:
            if first >= stop or last < start:
                continue
            if first > low:
                gaps.append((low, first - 1))
            low = last + 1
        if low < stop:
            gaps.append((low, stop - 1))
    return gaps


def _spell(ranges: list[tuple[int, int]]) -> str:
    return "".join(_char(a) if a == b else f"{_char(a)}-{_char(b)}" for a, b in ranges)


def _char(code: int) -> str:
    return f"\\x{{{code:x}}}"


def _translate(pattern: str, *, search: bool = False) -> str:
    """A valid Python pattern in RE2 syntax with the same meaning, or `Unsupported`.

    With ``search``, the pattern is searched for anywhere in a text rather than
    matched against a whole value, so anchors at the start or end of the text
    (``\\A``, ``^`` and ``$`` without ``(?m)``) are refused: Python's ``$`` also
    matches before a final newline, and a secret is looked for everywhere.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    last = "start"  # what the previous token was: "atom", "quantifier" or anything else
    multiline = [False]  # per open group: whether the m flag holds there
    folding = [False]  # per open group: whether the i flag holds there
    while i < n:
        c = pattern[i]
        if c == "\\":
            if search and pattern.startswith("\\A", i):
                raise Unsupported(*_TEXT_ANCHOR, i)
            token, i = _escape(pattern, i, in_class=False)
            out.append(_dotted_i(token) if folding[-1] else token)
            last = "atom"
        elif c == "[":
            token, i = _class(pattern, i, folding=folding[-1])
            out.append(token)
            last = "atom"
        elif c == "(":
            token, i = _group(pattern, i)
            if token:  # a comment leaves the previous token in place
                out.append(token)
                last = "open"
                flags = _FLAGS.match(token)
                added, removed = (flags[1], flags[2] or "") if flags else ("", "")
                inside = "m" in added or (multiline[-1] and "m" not in removed)
                folds = "i" in added or (folding[-1] and "i" not in removed)
                if token.endswith(")"):
                    multiline[0] = inside  # global flags, at the start of the pattern
                    folding[0] = folds
                else:
                    multiline.append(inside)
                    folding.append(folds)
        elif c in "*+?" or (c == "{" and _is_repeat(pattern, i)):
            if last == "quantifier" and c in "+{":
                raise Unsupported("a possessive quantifier", "RE2 has no possessive quantifiers", i)
            if last == "quantifier" and c == "?":
                out.append("?")  # lazy: the same values match
                last = "lazy"
                i += 1
                continue
            if c == "{":
                match = _REPEAT.match(pattern, i)
                assert match is not None
                low, comma, high = match[1] or "0", match[2] or "", match[3] or ""
                out.append("{" + low + comma + high + "}")
                i = match.end()
            else:
                out.append(c)
                i += 1
            last = "quantifier"
        elif c in "{}]":
            out.append(_char(ord(c)))
            last = "atom"
            i += 1
        elif c in "^$" and search and not multiline[-1]:
            raise Unsupported(*_TEXT_ANCHOR, i)
        elif c == "$" and not multiline[-1] and not _ends_a_branch(pattern, i + 1, len(multiline)):
            raise Unsupported(*_DOLLAR, i)
        else:
            if c == ")" and len(multiline) > 1:
                multiline.pop()
                folding.pop()
            if folding[-1] and c in _DOTTED_I:
                out.append(_DOTTED_I_CLASS)
            else:
                out.append(c)  # . ^ $ | ) and literal characters mean the same in RE2
            last = "atom" if c not in "|^" else "open"
            i += 1
    return "".join(out)


_DOTTED_I = "iI\u0131\u0130"
"""i, I, dotless ı and dotted İ: one class under Python's IGNORECASE (its `re` lower-cases
İ to i and folds ı with i), four under RE2's case folding (Unicode's, without the
Turkic mappings), which would let ``(?i).*admin.*`` miss ``admın`` and ``ADMİN``. They
are the only characters on which the two disagree (every code point checked)."""
_DOTTED_I_CLASS = "[" + "".join(_char(ord(c)) for c in _DOTTED_I) + "]"


def _dotted_i(token: str) -> str:
    """A translated single-character token, as the four i's if it is one of them."""
    for c in _DOTTED_I:
        if token == _char(ord(c)):
            return _DOTTED_I_CLASS
    return token


def _holds_an_i(members: str) -> bool:
    """Whether a class's members (RE2 syntax, without ``[``, ``^`` and ``]``) hold one of
    the four i's, read case-sensitively."""
    return any(re2.fullmatch(f"[{members}]", c) is not None for c in _DOTTED_I)


def _ends_a_branch(pattern: str, i: int, depth: int) -> bool:
    """Whether nothing after a ``$`` ending at ``i`` can match a character.

    Python's ``$`` also holds before a final newline, RE2's only at the end; the
    two agree on a whole-value match unless something after the ``$`` matches
    that newline. Allowed after it: ``)``, ``$``, ``\\Z``, then the end of the
    pattern or a ``|`` between top-level alternatives.
    """
    while i < len(pattern):
        if pattern[i] == ")":
            depth -= 1
            i += 1
        elif pattern[i] == "$":
            i += 1
        elif pattern.startswith("\\Z", i):
            i += 2
        else:
            return pattern[i] == "|" and depth == 1
    return True


def _is_repeat(pattern: str, i: int) -> bool:
    match = _REPEAT.match(pattern, i)
    return match is not None and bool(match[1] or match[2])


def _group(pattern: str, i: int) -> tuple[str, int]:
    """A group opening at ``i``; an empty token for a comment."""
    if not pattern.startswith("(?", i):
        return "(?:", i + 1  # no captures: only whether and where a pattern matches is asked
    rest = pattern[i + 2 : i + 4]
    if rest.startswith(("=", "!", "<=", "<!")):
        raise Unsupported(*_LOOKAROUND, i)
    if rest.startswith(">"):
        raise Unsupported("an atomic group", "RE2 has no atomic groups", i)
    if rest.startswith("P="):
        raise Unsupported(*_BACKREFERENCE, i)
    if rest.startswith("("):
        raise Unsupported(*_CONDITIONAL, i)
    if rest.startswith("#"):
        return "", pattern.index(")", i) + 1
    if rest.startswith(":"):
        return "(?:", i + 3
    if rest.startswith("P<"):
        return "(?:", pattern.index(">", i) + 1  # names do not change what matches
    flags = _FLAGS.match(pattern, i)
    assert flags is not None  # Python accepted the pattern: nothing else starts with "(?"
    added, removed, end = flags[1], flags[2] or "", flags[3]
    for letter, why in (("x", "RE2 has no verbose mode"), ("a", "RE2 has no ASCII mode")):
        if letter in added:
            raise Unsupported(f"the flag (?{letter})", why, i)
    added = added.replace("u", "").replace("L", "")
    removed = removed.replace("x", "")
    spelled = added + ("-" + removed if removed else "")
    if not spelled:
        return ("(?:" if end == ":" else ""), flags.end()
    return f"(?{spelled}{end}", flags.end()


def _class(pattern: str, i: int, *, folding: bool = False) -> tuple[str, int]:
    """A character class opening at ``i``, every member spelled out for RE2; with
    ``folding`` (the i flag holds), a class holding one of the four i's holds all four,
    as Python's `re` reads it (negated, it then refuses all four)."""
    out = ["["]
    i += 1
    if pattern[i] == "^":
        out.append("^")
        i += 1
    first = True
    while True:
        c = pattern[i]
        if c == "]" and not first:
            start = 2 if out[1:2] == ["^"] else 1
            members = out[start:]
            if folding and _holds_an_i("".join(members)):
                if members and members[0] == "-":  # a leading literal '-' would make a range
                    members[0] = _char(ord("-"))
                out[start:] = [_DOTTED_I_CLASS[1:-1], *members]
            out.append("]")
            return "".join(out), i + 1
        first = False
        if c == "\\":
            token, i = _escape(pattern, i, in_class=True)
            out.append(token)
        elif c == "-":
            out.append("-")
            i += 1
        else:
            out.append(_char(ord(c)))
            i += 1


def _escape(pattern: str, i: int, *, in_class: bool) -> tuple[str, int]:
    """The escape at ``i`` in RE2 syntax, and the index after it."""
    c = pattern[i + 1]
    if c in "dDsSwW":
        ranges = _python_classes()[c]
        # Case does not change which characters are digits, letters or spaces.
        return (ranges if in_class else f"(?-i:[{ranges}])"), i + 2
    if c in "bB":
        if in_class and c == "b":
            return _char(8), i + 2  # backspace, as in Python
        raise Unsupported(*_WORD_BOUNDARY, i)
    if c == "A" and not in_class:
        return "\\A", i + 2
    if c == "Z" and not in_class:
        return "\\z", i + 2
    if c in "0123456789":
        return _number_escape(pattern, i, in_class=in_class)
    if c == "x":
        return _char(int(pattern[i + 2 : i + 4], 16)), i + 4
    if c == "u":
        return _char(int(pattern[i + 2 : i + 6], 16)), i + 6
    if c == "U":
        return _char(int(pattern[i + 2 : i + 10], 16)), i + 10
    if c == "N":
        end = pattern.index("}", i)
        return _char(ord(unicodedata.lookup(pattern[i + 3 : end]))), end + 1
    controls = {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
    return _char(controls.get(c, ord(c))), i + 2


def _number_escape(pattern: str, i: int, *, in_class: bool) -> tuple[str, int]:
    """An octal escape, or (outside a class) a backreference, read as Python reads them."""
    digits = pattern[i + 1 : i + 4]
    if digits[0] == "0" or in_class:
        count = 1
        while count < 3 and count < len(digits) and digits[count] in _OCTAL:
            count += 1
        return _char(int(digits[:count], 8)), i + 1 + count
    if len(digits) == 3 and all(d in _OCTAL for d in digits):
        return _char(int(digits, 8)), i + 4
    raise Unsupported(*_BACKREFERENCE, i)


# -- ECMA-262 (JSON Schema) ------------------------------------------------------------

_ECMA_SPACES = [
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
]
"""ECMA-262's ``\\s``: WhiteSpace and LineTerminator."""
_ECMA_CLASSES = {
    "d": [(0x30, 0x39)],
    "w": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
    "s": _ECMA_SPACES,
}
_ECMA_DOT = "[^\\x{a}\\x{d}\\x{2028}\\x{2029}]"
_ECMA_CONTROLS = {"f": 12, "n": 10, "r": 13, "t": 9, "v": 11}
_ECMA_REPEAT = re.compile(r"\{(\d+)(,)?(\d*)\}")
_HEX = re.compile(r"[0-9A-Fa-f]+")
_LONE_SURROGATE = ("a lone surrogate escape", "RE2 reads text as Unicode code points")
_NAMED_BACKREFERENCE = ("a backreference", "matching one can take time exponential in the length")


@functools.lru_cache(maxsize=4096)
def ecma_regex(pattern: str) -> Any:
    """A JSON Schema ``pattern`` (ECMA-262) compiled for RE2, cached.

    Raises `Unsupported` for a construct RE2 cannot run (backreferences,
    lookahead and lookbehind), and for a pattern that is not valid or too large.
    """
    translated = _ecma_translate(pattern)
    try:
        return re2.compile(translated, _OPTIONS)
    except re2.error as exc:
        reason = re2_reason(exc)
        if reason.startswith("invalid repetition size"):
            raise Unsupported(
                "more than 1000 repetitions", "RE2 counts repetitions up to 1000"
            ) from None
        if reason.startswith("pattern too large"):
            raise Unsupported(
                "too much", "RE2 compiles a pattern within a fixed memory budget"
            ) from None
        raise Unsupported("invalid syntax", f"RE2 says: {reason}") from None
    except UnicodeEncodeError:
        raise Unsupported(*_LONE_SURROGATE) from None


def ecma_search(pattern: str, text: str) -> bool:
    """Whether JSON Schema's ``pattern`` matches somewhere in ``text`` (False if refused)."""
    try:
        regex = ecma_regex(pattern)
    except Unsupported:
        return False
    return regex.search(safe_text(text)) is not None


def _ecma_translate(pattern: str) -> str:
    """An ECMA-262 pattern (no flags) in RE2 syntax with the same meaning, or `Unsupported`."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise Unsupported("invalid syntax", "the pattern ends with a lone backslash", i)
            token, i = _ecma_escape(pattern, i, in_class=False)
            out.append(token)
        elif c == "[":
            token, i = _ecma_class(pattern, i)
            out.append(token)
        elif c == "(":
            token, i = _ecma_group(pattern, i)
            out.append(token)
        elif c == "{":
            match = _ECMA_REPEAT.match(pattern, i)
            if match is not None and out:
                out.append(match.group(0))
                i = match.end()
            else:
                out.append(_char(ord(c)))  # Annex B: a brace that is no count is literal
                i += 1
        elif c in "}]":
            out.append(_char(ord(c)))
            i += 1
        elif c == ".":
            out.append(_ECMA_DOT)
            i += 1
        else:
            out.append(c)  # ^ $ | ) * + ? and literals mean the same in RE2 (no flags)
            i += 1
    return "".join(out)


def _ecma_group(pattern: str, i: int) -> tuple[str, int]:
    if not pattern.startswith("(?", i):
        return "(?:", i + 1
    rest = pattern[i + 2 : i + 4]
    if rest.startswith(("=", "!", "<=", "<!")):
        raise Unsupported(*_LOOKAROUND, i)
    if rest.startswith(":"):
        return "(?:", i + 3
    if rest.startswith("<"):
        end = pattern.find(">", i)
        if end < 0:
            raise Unsupported("invalid syntax", "a group name is not closed with >", i)
        return "(?:", end + 1  # a named group: the name does not change what matches
    raise Unsupported("invalid syntax", "(? starts no group ECMA-262 knows", i)


def _ecma_class(pattern: str, i: int) -> tuple[str, int]:
    """A class opening at ``i``, every member spelled out for RE2."""
    negated = pattern.startswith("[^", i)
    i += 2 if negated else 1
    ranges: list[str] = []
    while True:
        if i >= len(pattern):
            raise Unsupported("invalid syntax", "a [ class is not closed with ]")
        c = pattern[i]
        if c == "]":
            i += 1
            break
        if c == "\\":
            if i + 1 >= len(pattern):
                raise Unsupported("invalid syntax", "the pattern ends with a lone backslash", i)
            token, i = _ecma_escape(pattern, i, in_class=True)
            ranges.append(token)
        elif c == "-":
            ranges.append("-")
            i += 1
        else:
            ranges.append(_char(ord(c)))
            i += 1
    if not ranges:
        # [] matches nothing, [^] any character (a line terminator too)
        return ("(?s:.)" if negated else "[^\\x{0}-\\x{10ffff}]"), i
    members = "".join(ranges)
    if members.startswith("-") or members.endswith("-"):
        members = members.strip("-") + "\\x{2d}"  # a hyphen at either end is literal
    return ("[^" if negated else "[") + members + "]", i


def _ecma_escape(pattern: str, i: int, *, in_class: bool) -> tuple[str, int]:
    """The escape at ``i`` in RE2 syntax (class members without brackets inside a class)."""
    c = pattern[i + 1]
    if c in "dDwWsS":
        ranges = _ECMA_CLASSES[c.lower()]
        spelled = _spell(ranges if c.islower() else _complement(ranges))
        return (spelled if in_class else f"[{spelled}]"), i + 2
    if c in "bB":
        if in_class and c == "b":
            return _char(8), i + 2
        if in_class:
            raise Unsupported("invalid syntax", "\\B inside a class", i)
        return f"\\{c}", i + 2  # ASCII word boundary in both ECMA-262 and RE2
    if c == "c" and i + 2 < len(pattern) and pattern[i + 2].isascii() and pattern[i + 2].isalpha():
        return _char(ord(pattern[i + 2]) % 32), i + 3
    if c == "0" and not pattern[i + 2 : i + 3].isdigit():
        return _char(0), i + 2
    if c.isdigit() or (c == "k" and pattern.startswith("<", i + 2)):
        raise Unsupported(*_NAMED_BACKREFERENCE, i)
    if c == "x" and _HEX.fullmatch(pattern[i + 2 : i + 4]) and len(pattern) >= i + 4:
        return _char(int(pattern[i + 2 : i + 4], 16)), i + 4
    if c == "u":
        return _ecma_unicode(pattern, i)
    if c in "pP" and pattern.startswith("{", i + 2):
        end = pattern.find("}", i)
        if end < 0:
            raise Unsupported("invalid syntax", "a \\p{ property is not closed with }", i)
        return pattern[i : end + 1], end + 1  # RE2 knows general categories and scripts
    if c in _ECMA_CONTROLS:
        return _char(_ECMA_CONTROLS[c]), i + 2
    return _char(ord(c)), i + 2  # an identity escape: the character itself


def _ecma_unicode(pattern: str, i: int) -> tuple[str, int]:
    """A ``\\uXXXX`` escape (a surrogate pair read as one character) or ``\\u{...}``."""
    if pattern.startswith("{", i + 2):
        end = pattern.find("}", i)
        digits = pattern[i + 3 : end] if end > 0 else ""
        if not digits or _HEX.fullmatch(digits) is None or int(digits, 16) > 0x10FFFF:
            raise Unsupported("invalid syntax", "a \\u{...} escape needs a code point", i)
        code, after = int(digits, 16), end + 1
    else:
        digits = pattern[i + 2 : i + 6]
        if len(digits) < 4 or _HEX.fullmatch(digits) is None:
            return _char(ord("u")), i + 2  # Annex B: \u without four digits is a u
        code, after = int(digits, 16), i + 6
        low = pattern[after + 2 : after + 6] if pattern.startswith("\\u", after) else ""
        if 0xD800 <= code < 0xDC00 and len(low) == 4 and _HEX.fullmatch(low):
            second = int(low, 16)
            if 0xDC00 <= second < 0xE000:
                code = 0x10000 + ((code - 0xD800) << 10) + (second - 0xDC00)
                after += 6
    if 0xD800 <= code < 0xE000:
        raise Unsupported(*_LONE_SURROGATE, i)
    return _char(code), after


if __name__ == "__main__":
    import pathlib

    _write_stored_ranges(str(pathlib.Path(__file__).with_name("_unicode_classes.py")))
