"""Provenance: prompt injection treated as an information-flow violation.

A run knows which text is trusted (system, developer and user input, and
values the application passes explicitly) and records every tool output as
untrusted unless the tool declares that its output, named fields of it, or
some of its records come from a system of record the deployment trusts.

A tool declares *sinks*: arguments whose value decides where an action goes
(a recipient, an account, a URL, a path, the id of a thing to delete). A sink
value must be *vouched for*: found in trusted input or in a trusted record.
A value found only in untrusted tool output is *tainted*; a value found
nowhere was made up. Either way the policy escalates (``ask``) or denies.

What the matcher detects, and what it does not:

* Values are compared after normalisation: case, surrounding whitespace,
  URL scheme, ``www.`` and trailing slash, spaces inside IBAN-like values.
* Inside free text (a user's message) only whole tokens count: a word, an
  email, a URL, an IBAN written in groups, a path or dotfile (``/srv/a.pdf``,
  ``.env``). Numbers never match free text: "June 13" does not vouch for
  ``delete_file("13")``; trusted code can vouch for a number explicitly.
* A sink may be typed (``sinks={"file_id": "file"}``): then only a trusted
  field of that kind vouches for it (a file tool's ``id``), never free text
  or a field of another kind with the same value. An *untyped* sink accepts
  a trusted field of any kind, so declare trusted only fields whose content
  no third party chooses (not a shared file's name, not a sender's subject).
* URLs inside free-text arguments of a tool with sinks are sinks too, also
  when nested in lists or objects. Only ``http(s)://`` links are found: a
  bare ``evil.example/x`` in a message body is not.
* It does not detect a value the model derived from tainted text (spelled
  differently, computed, translated, a prefix of it), nor a harmful action
  whose values are all trusted, nor a value that trusted text merely
  mentions ("never write to eve@evil.example" vouches for that address):
  narrow the run's authority for those.
* Indexing is linear in the size of tool output, so a hostile page cannot
  stall the gate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from callgate.evidence import Evidence, EvidenceItem

__all__ = [
    "OutputTrust",
    "SinkFinding",
    "TrustIndex",
    "normalize",
]

OutputTrust = (
    bool | Mapping[str, str | bool] | Callable[[Mapping[str, Any]], Mapping[str, str | bool] | bool]
)
"""How a tool labels its output.

* ``True``: every field of every record is trusted (a system of record);
* a mapping ``{field: kind}``: those fields are trusted, tagged with a kind
  (``"file"``, ``"contact"``; ``True`` for no kind);
* a function of one output record returning either of the above: trust
  decided per record (sent mail versus received mail).
"""

_URL = re.compile(r"\bhttps?://[^\s<>\"'()\[\]{}]+", re.IGNORECASE)
# Matched against one piece of a token only (``fullmatch``, possessive): a
# search over the whole text is quadratic on untrusted input such as "a.a.a…".
_EMAIL = re.compile(r"[\w.+-]++@[\w-]++(?:\.[\w-]++)++")
_TOKEN = re.compile(r"[\w.+@:/-]+")
# An IBAN written in groups ("DE89 3704 0044 ..."), which whitespace would split.
_IBAN_GROUPED = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
_IBANISH = re.compile(r"^[A-Z]{2}\d{2}[A-Z0-9 ]{10,40}$", re.IGNORECASE)
_NUMBER = re.compile(r"^[+-]?\d+(?:[.,]\d+)*$")


def normalize(value: Any) -> str:
    """The form in which values are compared."""
    text = str(value).strip()
    if _IBANISH.match(text):
        return text.replace(" ", "").upper()
    lowered = " ".join(text.split()).casefold()
    if lowered.startswith(("http://", "https://")):
        lowered = lowered.split("://", 1)[1]
        lowered = lowered.removeprefix("www.")
        lowered = lowered.rstrip("/")
    return lowered


def _tokens(text: str, *, numbers: bool = False) -> Iterator[str]:
    """Whole tokens of free text, normalised; URLs, emails, grouped IBANs, paths kept whole.

    Numbers are left out unless ``numbers`` (used only to say where an untrusted
    value came from, never to vouch for one).
    """
    for match in _URL.finditer(text):
        yield normalize(match.group(0).rstrip(".,;:!?"))
    for match in _IBAN_GROUPED.finditer(text):
        yield normalize(match.group(0))
    for raw in _TOKEN.findall(text):
        token = raw.strip(".,;:!?/-")
        if not token:
            continue
        if "@" in token:
            for piece in re.split(r"[:/]", token):
                piece = piece.strip(".,;:!?-")
                if piece != token and _EMAIL.fullmatch(piece):
                    yield normalize(piece)
        if numbers or not _NUMBER.match(token):
            yield normalize(token)
        kept = raw.rstrip(".,;:!?")
        if kept != token and kept.startswith(("/", ".")):
            yield normalize(kept)  # a path or dotfile: "/etc/passwd", "./run.sh", ".env"


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkFinding:
    """Why a sink value is not vouched for."""

    argument: str
    value: str
    kind: str | None
    tainted_by: tuple[str, ...]
    """Call ids of untrusted observations where the value appears (empty: made up)."""

    def explain(self) -> str:
        """One line for the model and the audit trail."""
        shown = self.value if len(self.value) <= 80 else self.value[:77] + "..."
        if self.tainted_by:
            where = ", ".join(self.tainted_by[:3])
            return (
                f"the value of '{self.argument}' ({shown!r}) does not come from trusted input: "
                f"it appears only in untrusted tool output (call {where})"
            )
        kind = f" of kind '{self.kind}'" if self.kind else ""
        return (
            f"the value of '{self.argument}' ({shown!r}) appears in no trusted input or "
            f"trusted record{kind}; it may have been made up"
        )

    def as_dict(self) -> dict[str, Any]:
        """The finding as a plain record for the ledger."""
        return {
            "argument": self.argument,
            "value": self.value,
            "kind": self.kind,
            "tainted_by": list(self.tainted_by),
        }


@dataclass(slots=True)
class _Index:
    trusted_tokens: set[str] = field(default_factory=set)
    trusted_values: dict[str, set[str | None]] = field(default_factory=dict)
    untrusted: dict[str, list[str]] = field(default_factory=dict)
    indexed: int = 0


class TrustIndex:
    """What one run has seen, labelled trusted or untrusted, for sink checks."""

    __slots__ = ("_index",)

    def __init__(
        self, trusted_text: Iterable[str] = (), trusted_values: Iterable[Any] = ()
    ) -> None:
        self._index = _Index()
        for text in trusted_text:
            self.add_trusted_text(text)
        for value in trusted_values:
            self.add_trusted_value(value)

    def add_trusted_text(self, text: str) -> None:
        """Record trusted free text (a system, developer or user message)."""
        self._index.trusted_tokens.update(_tokens(text))

    def add_trusted_value(self, value: Any, kind: str | None = None) -> None:
        """Record one value the application vouches for, optionally of a kind."""
        self._index.trusted_values.setdefault(normalize(value), set()).add(kind)

    def absorb(self, evidence: Evidence, trust_of: Callable[[str], OutputTrust | None]) -> None:
        """Index the observations recorded since the last call."""
        for item in evidence.since(self._index.indexed):
            self._absorb_one(item, trust_of(item.tool))
            self._index.indexed += 1

    def _absorb_one(self, item: EvidenceItem, trust: OutputTrust | None) -> None:
        result = item.result
        if isinstance(result, BaseModel):
            result = result.model_dump(mode="json")
        for record in _records(result):
            labels = _labels(record, trust)
            for name, value in _fields(record):
                label = labels.get(name, labels.get("*")) if labels is not None else None
                if label:
                    self.add_trusted_value(value, label if isinstance(label, str) else None)
                else:
                    self._untrusted(value, item.call_id)

    def _untrusted(self, value: Any, call_id: str) -> None:
        text = str(value)
        seen = self._index.untrusted
        for token in {normalize(text), *_tokens(text, numbers=True)}:
            calls = seen.setdefault(token, [])
            if call_id not in calls:
                calls.append(call_id)

    def check(
        self, sinks: Mapping[str, str | None], values: Mapping[str, Any], *, links: bool
    ) -> list[SinkFinding]:
        """The sink values of a call that nothing trusted vouches for."""
        findings: list[SinkFinding] = []
        for argument, kind in sinks.items():
            value = values.get(argument)
            if value is None:
                continue
            for one in value if isinstance(value, list | tuple | set) else (value,):
                finding = self._check_value(argument, one, kind)
                if finding is not None:
                    findings.append(finding)
        if links:
            for argument, value in values.items():
                if argument in sinks:
                    continue
                for text in _strings(value):
                    for match in _URL.finditer(text):
                        url = match.group(0).rstrip(".,;:!?")
                        finding = self._check_value(argument, url, None)
                        if finding is not None:
                            findings.append(finding)
        return findings

    def _check_value(self, argument: str, value: Any, kind: str | None) -> SinkFinding | None:
        if hasattr(value, "value") and not isinstance(value, str):
            value = value.value  # an Enum
        key = normalize(value)
        index = self._index
        kinds = index.trusted_values.get(key)
        if kinds is not None and (kind is None or kind in kinds):
            return None
        if kind is None and not _NUMBER.match(key) and key in index.trusted_tokens:
            return None
        tainted = tuple(index.untrusted.get(key, ()))
        return SinkFinding(argument=argument, value=str(value), kind=kind, tainted_by=tainted)


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    """The text inside an argument value: itself, or the strings nested in it."""
    if isinstance(value, str):
        yield value
    elif depth > 20:
        return
    elif isinstance(value, BaseModel):
        for item in value.__dict__.values():
            yield from _strings(item, depth + 1)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from _strings(key, depth + 1)
            yield from _strings(item, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _strings(item, depth + 1)


def _records(result: Any) -> Iterator[Mapping[str, Any]]:
    """The records of a tool result: a dict, the dicts of a list, or one text value."""
    if isinstance(result, Mapping):
        nested = [v for v in result.values() if isinstance(v, list) and v and _all_maps(v)]
        if nested and len(result) <= 3:
            # {"items": [...], "next": ...}: the list holds the records.
            for value in nested:
                yield from (r for r in value if isinstance(r, Mapping))
            yield {k: v for k, v in result.items() if not (isinstance(v, list) and _all_maps(v))}
        else:
            yield result
    elif isinstance(result, list | tuple):
        for item in result:
            if isinstance(item, Mapping):
                yield item
            else:
                yield {"value": item}
    elif result is not None:
        yield {"value": result}


def _all_maps(values: list[Any]) -> bool:
    return all(isinstance(v, Mapping) for v in values)


def _fields(record: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Leaf values of a record with their field names (nested names dotted)."""
    for name, value in record.items():
        path = f"{prefix}{name}"
        if isinstance(value, Mapping):
            yield from _fields(value, path + ".")
        elif isinstance(value, list | tuple):
            for item in value:
                if isinstance(item, Mapping):
                    yield from _fields(item, path + ".")
                elif item is not None:
                    yield path, item
        elif value is not None:
            yield path, value


def _labels(record: Mapping[str, Any], trust: OutputTrust | None) -> dict[str, str | bool] | None:
    """Which fields of this record are trusted, and their kinds (None: nothing trusted)."""
    if trust is None or trust is False:
        return None
    if callable(trust) and not isinstance(trust, Mapping):
        try:
            trust = trust(record)
        except Exception:
            return None  # a labeller that fails trusts nothing
    if trust is True:
        return {"*": True}
    if trust is False or trust is None:
        return None
    labels: dict[str, str | bool] = {str(k): v for k, v in trust.items() if v}
    return labels or None
