"""How provenance reads text: values normalised, links found, words and phrases compared.

Everything here reads text a model, a tool or a web page chose, so every
pattern runs on RE2 (`callgate.regex`: linear in the text, never
backtracking) and everything else is a split or a dictionary lookup.

* `normalize` is the one form in which a sink value and a trusted value are
  compared: NFKC (full-width letters and ligatures fold to their plain
  form), case-folded, whitespace collapsed, spaces dropped from IBAN-like
  values, and links reduced to one form (`link_key`). A value of one word
  holding ``.``, ``@``, ``:`` or ``/`` (a link, an address, a path) is
  lower-cased, not case-folded: ``baß.example`` and ``bass.example`` are two
  domains to a browser, and stay two here.
* `link_key` reads a link with or without a scheme: ``https://www.x.com:443/a/``,
  ``www.x.com/a`` and ``x.com/a`` are all ``x.com/a``. The same function is
  applied to trusted text and to arguments, so both sides meet in one form.
  It reads links as browsers do: ``//x.com/a`` (no scheme), ``https:x.com/a``
  and ``https:///x.com/a`` are ``x.com/a`` too.
* `links` finds the links inside free text (a message body): anything with a
  scheme, ``www.`` names, names with a path or port, and bare domains under a
  common top-level domain (``example.com``). A bare name under a TLD that is
  also a common file extension (``notes.md``, ``archive.zip``) counts only
  with ``www.``, a scheme, a port or a path. Before it looks, it reads the text
  as a browser reads a link: backslashes are slashes, the ideographic full
  stops are dots, and invisible format characters (zero-width spaces and
  joiners, soft hyphens, bidi controls, variation selectors) are dropped.
  Links to a bracketed IPv6 literal (``http://[2001:db8::1]/x``) are found whole.
* `words` and `phrase` compare multi-word values ("Le Marais Boutique") with
  trusted text: the value's words must appear in the text in the same order
  as whole words, never as part of a longer word.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any

from callgate.regex import compile_re2, python_regex, safe_text

__all__ = ["is_number", "link_key", "links", "normalize", "phrase", "tokens", "words"]


@functools.cache
def _email() -> Any:
    """The e-mail pattern, compiled on first use rather than at import.

    Translating ``\\w`` builds Python's Unicode class tables (0.1-0.3 s), which
    ``import callgate`` should not pay for when no free text is ever tokenized.
    """
    return compile_re2(python_regex(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"))


# An IBAN written in groups ("DE89 3704 0044 ..."), which whitespace would split.
_IBAN_GROUPED = compile_re2(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
_IBANISH = compile_re2(r"(?i)[A-Z]{2}\d{2}[A-Z0-9 ]{10,40}")
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789+.-")
# Characters that end a link or a token in prose: brackets and quotes.
_BREAKS = str.maketrans(dict.fromkeys("<>\"'()[]{}`|\\^", " "))
_EDGE = ".,;:!?"
# Schemes a browser reads without "//" ("https:x.com", "https:/x.com"): WHATWG special schemes.
_SPECIAL_SCHEMES = frozenset({"http", "https", "ws", "wss", "ftp"})
# How a browser reads a link's characters: a backslash is "/", the ideographic full stops
# are dots, and the characters IDNA maps to nothing (or that only steer display) are dropped.
_INVISIBLE = (
    0xAD,
    0x34F,
    0x61C,
    0x180E,
    0xFEFF,
    *range(0x180B, 0x1810),
    *range(0x200B, 0x2010),
    *range(0x202A, 0x202F),
    *range(0x2060, 0x2070),
    *range(0xFE00, 0xFE10),
)
_LINK_FOLD: dict[int, int | None] = {
    ord("\\"): ord("/"),
    0x3002: ord("."),
    0xFF61: ord("."),
    **dict.fromkeys(_INVISIBLE),
}
_CACHED_CHARS = 128
# Before "//[": the characters of a scheme and its colon; after it, what ends a link.
_SCHEME_LEAD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-:")
_LINK_END = frozenset("<>\"'`()|^{}")
_DEFAULT_PORTS = {"http": "80", "https": "443", "": "443"}

# Top-level domains under which a bare name ("example.com") counts as a link in prose.
_TLDS = """
com net org edu gov mil int info biz name pro mobi asia tel
io co ai app dev me tv cc ly to gg ws fm am im is la su tk ml ga cf gq cx nu
uk de fr es it nl be ch at se no dk fi pl cz sk hu ro bg gr pt ie lu li lt lv ee
ru ua by kz cn jp kr tw hk sg my th vn id ph in pk au nz ca us mx br ar cl pe
za ng ke eg ma tr il ir sa ae qa
eu xyz online site top store shop tech cloud link live club page blog news email
website space fun world today digital network systems solutions agency finance
bank money pay travel hotel booking events chat social support help login
example test invalid localhost local internal corp home lan
"""
_COMMON_TLDS = frozenset(_TLDS.split())
# Top-level domains that are also common file extensions: a bare "notes.md" is a file.
_FILE_EXTENSIONS = "md py sh rs pl zip mov doc pdf txt csv json yaml toml"
_FILE_LIKE = frozenset(_FILE_EXTENSIONS.split())


class _Keep(dict[int, int]):
    """A `str.translate` table that keeps the characters ``keep`` accepts and turns every
    other into a space; filled as characters are met (bounded), so one pass of C code
    splits a text, however hostile, with no regular expression at all."""

    def __init__(self, keep: Callable[[str], bool]) -> None:
        super().__init__()
        self.keep = keep

    def __missing__(self, code: int) -> int:
        value = code if self.keep(chr(code)) else 32
        if len(self) < 65_536:
            self[code] = value
        return value


_WORD_CHARS = _Keep(lambda ch: unicodedata.category(ch)[0] in "LNM")
"""Letters, digits and marks of every script: what `words` keeps."""
_TOKEN_CHARS = _Keep(lambda ch: ch.isalnum() or ch in "_.+@:/-")
"""Python's ``\\w`` and ``.+@:/-``: what a token is made of."""


def is_number(text: str) -> bool:
    """Whether ``text`` is a number: ASCII digits, with a sign and ``.`` or ``,`` between
    groups (``-3``, ``1,200.50``)."""
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body[:1].isdigit() or not body[-1:].isdigit():
        return False
    return all(part.isascii() and part.isdigit() for part in body.replace(",", ".").split("."))


def normalize(value: Any) -> str:
    """The form in which sink values and trusted values are compared."""
    text = str(value)
    if len(text) <= _CACHED_CHARS:
        return _normalized(text)
    return _normalize(text)


@functools.lru_cache(maxsize=1 << 16)
def _normalized(text: str) -> str:
    """`_normalize` of a short text, remembered: field values repeat across records."""
    return _normalize(text)


def _normalize(text: str) -> str:
    if not text.isascii():
        text = unicodedata.normalize("NFKC", safe_text(text))
    text = text.strip()
    if (
        14 <= len(text) <= 44
        and text[:2].isalpha()
        and text[2:4].isdigit()
        and _IBANISH.fullmatch(text)
    ):
        return text.replace(" ", "").upper()
    spaced = " ".join(text.split())
    if " " in spaced or not any(mark in spaced for mark in ".@:/"):
        return spaced.casefold()
    # One word that names something (a link, an address, a path): lower-cased, as hosts
    # are; case folding would make "baß.example" the other domain "bass.example".
    lowered = spaced.lower()
    if "." in lowered or ":" in lowered:
        key = link_key(lowered, strict=False)
        if key is not None:
            return key
    return lowered


def link_key(piece: str, *, strict: bool = True) -> str | None:
    """``piece`` (one word of text, lower-cased) in the one form links are compared in,
    or None if it is not a link.

    The form drops ``http(s)://``, a leading ``www.``, a default port (80 for http,
    443 for https or no scheme) and trailing slashes; the host's trailing dot too.
    Read as a browser reads it: ``//host/a`` (the page's scheme) and, for http(s),
    ws(s) and ftp, ``https:host``, ``https:/host`` and ``https:///host`` are links
    to ``host``.
    ``strict``: a name without scheme, ``www.``, port or path counts only under a
    common top-level domain that is not also a file extension (for finding links in
    prose); without it any alphabetic TLD does (for normalising a value).
    """
    scheme = ""
    rest = piece
    relative = False
    head, sep, tail = piece.partition(":")
    if sep and head in _SPECIAL_SCHEMES:
        scheme, rest = head, tail.lstrip("/")
    elif piece.startswith("//"):
        relative, rest = True, piece[2:]  # protocol-relative: the page's own scheme
    else:
        head, sep, tail = piece.partition("://")
        if sep:
            if not (0 < len(head) <= 16 and head[0].isalpha() and _SCHEME_CHARS.issuperset(head)):
                return None
            scheme, rest = head, tail
    cut = len(rest)
    for mark in "/?#":
        found = rest.find(mark)
        if 0 <= found < cut:
            cut = found
    host, remainder = rest[:cut], rest[cut:]
    if not host:
        return None
    if relative:
        after = host.rpartition("@")[2].partition(":")[0].rstrip(".")
        if not _host_like(after.removeprefix("www."), named=True, strict=False):
            return None
        return host.removeprefix("www.") + remainder.rstrip("/")
    if "@" in host and not scheme:
        if not remainder and not host.startswith("www."):
            return None  # an email address
        # "www.bank.example@evil.example/login": a link whose host is after the "@"
        after = host.rpartition("@")[2].partition(":")[0]
        if not _host_like(after, named=True, strict=False):
            return None
        return host.removeprefix("www.") + remainder.rstrip("/")
    port = ""
    name, colon, digits = host.rpartition(":")
    if colon and digits.isdigit() and "@" not in digits:
        host, port = name, digits
    elif colon and not scheme:
        return None  # "note:" or "a:b" is not a host
    host = host.rstrip(".")
    had_www = host.startswith("www.")
    host = host.removeprefix("www.")
    named = had_www or bool(port) or bool(remainder)
    if not scheme and not _host_like(host, named=named, strict=strict):
        return None
    if port == _DEFAULT_PORTS.get(scheme, "") or (not scheme and port in ("80", "443")):
        port = ""
    remainder = remainder.rstrip("/")
    key = host + (":" + port if port else "") + remainder
    if scheme and scheme not in ("http", "https"):
        key = scheme + "://" + key
    return key


def _host_like(host: str, *, named: bool, strict: bool) -> bool:
    """Whether ``host`` reads as a domain name (or, with a port or path, an IPv4 address)."""
    labels = host.split(".")
    if len(labels) < 2 or not all(labels):
        return False
    if all(label.isdigit() for label in labels):
        return named and len(labels) == 4 and all(int(label) <= 255 for label in labels)
    for label in labels:
        if not all(ch.isalnum() or ch in "-_" for ch in label):
            return False
    tld = labels[-1]
    if len(tld) < 2 or not tld.isalpha():
        return False
    if named or not strict:
        return True
    return tld in _COMMON_TLDS and tld not in _FILE_LIKE


def _pieces(text: str) -> Iterator[str]:
    """The words of prose split at whitespace, brackets and quotes, with the punctuation
    that ends a sentence or a clause taken off (a leading dot stays: ``.env``)."""
    for raw in text.translate(_BREAKS).split():
        piece = raw.rstrip(_EDGE).lstrip(",;:!?")
        if piece:
            yield piece


def links(text: str) -> Iterator[str]:
    """The links inside free text, as a browser reads them (NFKC, backslashes as slashes,
    ideographic full stops as dots, invisible characters dropped); `link_key` gives their
    one form."""
    if not text.isascii():
        text = unicodedata.normalize("NFKC", safe_text(text))
    text = text.translate(_LINK_FOLD)
    if "." not in text and ":" not in text:
        return
    for raw in [r for r in text.translate(_BREAKS).split() if "." in r or ":" in r]:
        piece = raw.rstrip(_EDGE).lstrip(",;:!?")
        if not piece:
            continue
        lowered = piece.lower()
        key = _strict_key(lowered) if len(lowered) <= _CACHED_CHARS else link_key(lowered)
        if key is not None:
            yield piece
    if "//[" in text:
        yield from _bracketed(text)


def _bracketed(text: str) -> Iterator[str]:
    """Links to a bracketed host (an IPv6 literal, ``http://[2001:db8::1]/x``), which the
    split at brackets would cut apart: each from its scheme to the end of its word. One
    pass: a search resumes after the link it found."""
    for raw in text.split():
        at = raw.find("//[")
        while at >= 0:
            start = at
            while start > 0 and at - start < 17 and raw[start - 1] in _SCHEME_LEAD:
                start -= 1
            end = at + 3
            while end < len(raw) and raw[end] not in _LINK_END:
                end += 1
            yield raw[start:end].rstrip(_EDGE)
            at = raw.find("//[", end)


@functools.lru_cache(maxsize=1 << 14)
def _strict_key(piece: str) -> str | None:
    """`link_key` of one short piece of prose, remembered (the same links recur in a run;
    a long piece is not kept, so hostile text cannot fill memory through this cache)."""
    return link_key(piece)


def tokens(text: str, *, numbers: bool = False) -> Iterator[str]:
    """Whole tokens of free text, normalised: links, emails, grouped IBANs and paths whole.

    Tokens are cut from the text as written and from its NFKC form (a full-width
    ``ｂｏｂ＠ｘ．ｃｏｍ`` is ``bob@x.com``), each then normalised. Numbers are left out
    unless ``numbers`` (used only to say where an untrusted value came from, never to
    vouch for one).
    """
    text = safe_text(text)
    if len(text) >= 15 and (" " in text or not text.isascii()):  # grouped: spaces
        folded = text if text.isascii() else unicodedata.normalize("NFKC", text)
        for match in _IBAN_GROUPED.finditer(folded):
            yield normalize(match.group(0))
    for piece in _pieces(text):
        if len(piece) <= _CACHED_CHARS:
            yield from _piece_tokens(piece, numbers)
        else:
            yield from _tokens_of_piece(piece, numbers)


@functools.lru_cache(maxsize=1 << 16)
def _piece_tokens(piece: str, numbers: bool) -> tuple[str, ...]:
    """`_tokens_of_piece`, remembered: words repeat, in prose and in hostile pages alike."""
    return tuple(_tokens_of_piece(piece, numbers))


def _tokens_of_piece(piece: str, numbers: bool) -> Iterator[str]:
    if piece.isascii() and piece.isalnum():  # a plain word: no link, email or path
        if numbers or not piece.isdigit():
            yield normalize(piece)
        return
    nfkc = unicodedata.normalize("NFKC", piece)
    key = link_key(nfkc.lower())
    if key is not None:
        yield key
    for form in (piece,) if nfkc == piece else (piece, nfkc):
        yield from _word_tokens(form, numbers=numbers)


def _word_tokens(piece: str, *, numbers: bool) -> Iterator[str]:
    for raw in piece.translate(_TOKEN_CHARS).split():
        token = raw.strip(".,;:!?/-")
        if not token:
            continue
        if "@" in token:
            for part in token.replace(":", "/").split("/"):
                part = part.strip(".,;:!?-")
                if part != token and _email().fullmatch(part):
                    yield normalize(part)
        if numbers or not is_number(token):
            yield normalize(token)
        kept = raw.rstrip(".,;:!?")
        if kept != token and kept.startswith(("/", ".")):
            yield normalize(kept)  # a path or dotfile: "/etc/passwd", "./run.sh", ".env"


def words(text: str) -> str:
    """``text`` as its words (letters, digits and marks of any script), normalised and
    joined by single spaces, with a space at each end: the form `phrase` searches."""
    folded = unicodedata.normalize("NFKC", safe_text(text)).casefold()
    return " " + " ".join(folded.translate(_WORD_CHARS).split()) + " "


def phrase(value: str) -> str | None:
    """The words of a multi-word value in `words` form, or None when ``value`` is one
    word (no whitespace once normalised) or has no word with a letter (numbers alone
    never match prose)."""
    if " " not in normalize(value):
        return None  # one word, a link, or an IBAN written in groups: compared whole
    found = words(value)
    inner = found.strip()
    if " " not in inner or not any(ch.isalpha() for ch in inner):
        return None
    return found
