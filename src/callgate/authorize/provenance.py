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

* Values are compared after normalisation (`callgate.authorize.text`): NFKC,
  case, whitespace, spaces inside IBAN-like values, and links in one form
  (scheme, ``www.``, default port and trailing slash dropped), the same way
  for the value and for trusted text.
* Inside free text (a user's message) only whole tokens count: a word, an
  email, a URL, an IBAN written in groups, a path or dotfile (``/srv/a.pdf``,
  ``.env``). Numbers never match free text: "June 13" does not vouch for
  ``delete_file("13")``; trusted code can vouch for a number explicitly.
* A sink may be typed (``sinks={"file_id": "file"}``): then only a trusted
  field of that kind vouches for it (a file tool's ``id``), never free text
  or a field of another kind with the same value. An *untyped* sink accepts
  a trusted field of any kind, so declare trusted only fields whose content
  no third party chooses (not a shared file's name, not a sender's subject).
* Links inside free-text arguments of a tool with sinks are sinks too, also
  when nested in lists or objects: with a scheme, ``www.`` names, names with
  a path or port (``evil.example/x``), and bare domains under a common
  top-level domain (``example.com``).
* A multi-word value ("Le Marais Boutique") is vouched for by trusted text
  holding the same words in the same order as whole words; when it is not,
  the finding names the untrusted observation it appears in.
* Keys of mappings in tool output are indexed like values, with their
  record's trust; ``output_trust`` addresses fields by path (`TrustPath`):
  ``owner.email``, ``meta."x.y"``, ``files.*.id``, ``keys(shared_with)``.
* The index knows which observations brought untrusted text into the run
  (`TrustIndex.exposed_by`): the intent and integrity checks read it.
* It does not detect a value the model derived from tainted text (spelled
  differently, computed, translated, a prefix of it), nor a harmful action
  whose values are all trusted, nor a value that trusted text merely
  mentions ("never write to eve@evil.example" vouches for that address):
  narrow the run's authority for those (`callgate.authorize.intent`).
* Indexing is linear in the size of tool output, so a hostile page cannot
  stall the gate.
* A label may be `Readers` (who may read the field): a call that sends the
  value, or a text holding it, to a recipient outside them is a finding too
  (`callgate.authorize.readers`).
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from callgate.authorize.paths import TrustPath
from callgate.authorize.readers import (
    ARGUMENT_DEPTH,
    ReaderFinding,
    Readers,
    Restrictions,
    content_texts,
)
from callgate.authorize.records import RecordTrust
from callgate.authorize.text import is_number, links, normalize, phrase, tokens, words
from callgate.errors import DefinitionError
from callgate.evidence import Evidence, EvidenceItem

__all__ = [
    "Finding",
    "OutputTrust",
    "Readers",
    "SinkFinding",
    "TrustIndex",
    "TrustPath",
    "normalize",
]

Label = str | bool | Readers
"""One place's label: trusted (``True``), trusted of a kind, or `Readers`."""
OutputTrust = (
    bool
    | Mapping[str, Label]
    | Callable[[Mapping[str, Any]], Mapping[str, Label] | bool]
    | RecordTrust
)
"""How a tool labels its output.

* ``True``: every value of every record, and the keys of its nested mappings,
  are trusted (a system of record);
* a mapping ``{path: kind}``: the fields at those paths (`TrustPath`) are
  trusted, tagged with a kind (``"file"``, ``"contact"``; ``True`` for no
  kind); the path ``"*"`` alone stands for the whole record;
* a function of one output record returning either of the above: trust
  decided per record (sent mail versus received mail);
* a label may be `Readers` (``{"passport": Readers("user")}``): the field's trust
  is ``Readers.trust`` and only those readers may receive its value;
* `Owned` / `Designated` (`callgate.authorize.records`): named fields of the
  records the user owns or the request designates.
"""

_MAX_DEPTH = 64
_RECORD_VALUES = 64
"""Trusted values of one record remembered together (`TrustIndex.named`)."""
_MAX_RECORDS = 100_000
_FUNCTION_TEXT = "the and for with from this that your our you are not but all any new old"
_FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split())
_RECORDS_PER_VALUE = 64
_SHOWN = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkFinding:
    """Why a sink value is not vouched for."""

    argument: str
    value: str
    kind: str | None
    tainted_by: tuple[str, ...]
    """Call ids of untrusted observations where the value appears (empty: made up)."""
    via: str = "value"
    """How the value was read: ``value`` (a sink argument), ``link`` (a link inside a
    free-text argument) or ``phrase`` (a multi-word value, compared word by word)."""

    @property
    def source(self) -> str | None:
        """The first untrusted observation the value appears in (None: made up)."""
        return self.tainted_by[0] if self.tainted_by else None

    @property
    def match(self) -> str:
        """``tainted`` (found in untrusted output) or ``made_up`` (found nowhere)."""
        return "tainted" if self.tainted_by else "made_up"

    def explain(self) -> str:
        """One line for the model and the audit trail."""
        shown = _shown(self.value, 80)
        what = "a link in" if self.via == "link" else "the value of"
        if self.tainted_by:
            where = ", ".join(self.tainted_by[:3])
            return (
                f"{what} '{self.argument}' ({shown!r}) does not come from trusted input: "
                f"it appears only in untrusted tool output (call {where})"
            )
        kind = f" of kind '{self.kind}'" if self.kind else ""
        return (
            f"{what} '{self.argument}' ({shown!r}) appears in no trusted input or "
            f"trusted record{kind}; it may have been made up"
        )

    def as_dict(self) -> dict[str, Any]:
        """The finding as a plain record for the ledger and `Observation.details`."""
        return {
            "rule": "untrusted_sink",
            "argument": self.argument,
            "value": _shown(self.value, _SHOWN),
            "kind": self.kind,
            "via": self.via,
            "match": self.match,
            "source": self.source,
            "sources": list(self.tainted_by),
            "tainted_by": list(self.tainted_by),
        }


def _shown(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(slots=True)
class _Index:
    trusted_tokens: set[str] = field(default_factory=set)
    trusted_values: dict[str, set[str | None]] = field(default_factory=dict)
    trusted_words: list[str] = field(default_factory=list)
    text_words: list[str] = field(default_factory=list)
    records: list[tuple[str, ...]] = field(default_factory=list)
    record_of: dict[str, list[int]] = field(default_factory=dict)
    records_indexed: int = 0
    untrusted: dict[str, list[str]] = field(default_factory=dict)
    untrusted_words: list[tuple[str, str]] = field(default_factory=list)
    exposed_by: list[str] = field(default_factory=list)
    indexed: int = 0
    restrictions: Restrictions = field(default_factory=Restrictions)
    plans: dict[Any, Any] = field(default_factory=dict)
    owners: set[str] = field(default_factory=set)
    """The user's identities as an owner field must hold them (`owner_key`)."""


class _Deep:
    """A subtree below the depth the index reads: unread, so taken as untrusted text."""


_DEEP = _Deep()
_SCALARS = (str, int, float)
_Labels = tuple[Label | None, tuple[tuple[TrustPath, Label], ...]]
"""What one record trusts: the label of every place (``*``) and labels by path."""


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

    @property
    def exposed_by(self) -> tuple[str, ...]:
        """Call ids (or sources) of the untrusted text this run has read, oldest first:
        empty while the run has seen only trusted input."""
        return tuple(self._index.exposed_by)

    @property
    def plan_uses(self) -> dict[Any, Any]:
        """Which calls used each planned call of the run's intents, by intent
        (`callgate.authorize.steps.PlanUses`): per run, beside what the run has read."""
        return self._index.plans

    def add_trusted_text(self, text: str) -> None:
        """Record trusted free text (a system, developer or user message)."""
        self._index.trusted_tokens.update(tokens(text))
        spoken = words(text)
        self._index.trusted_words.append(spoken)
        self._index.text_words.append(spoken)

    def add_trusted_value(self, value: Any, kind: str | None = None) -> None:
        """Record one value the application vouches for, optionally of a kind."""
        self._index.trusted_values.setdefault(normalize(value), set()).add(kind)

    def add_user(self, identity: Any) -> None:
        """Declare one identity of the run's user (an address, an account): a recipient
        with it may read values whose `Readers` name ``"user"``."""
        self._index.restrictions.users.add(normalize(identity))
        self._index.owners.add(owner_key(identity))

    def add_trusted_record(
        self, record: Mapping[str, Any], kinds: Mapping[str, str | Readers] | None = None
    ) -> None:
        """Record one record the application vouches for whole (an address-book entry, a
        saved payee): each value is trusted, of the kind ``kinds`` gives its field (a path,
        as in ``output_trust``), and the values are kept together, so that the request
        naming one of them names the others (`named`)."""
        labels: dict[str, Label] = {"*": True}
        if kinds:
            labels.update(kinds)
        self._absorb_record(record, _labels(record, labels), "application")

    def add_untrusted(self, text: str, source: str) -> None:
        """Record untrusted text that reached the run by another way than a tool call (a
        retrieved document put into the prompt); ``source`` names it in findings."""
        self._untrusted(text, source)
        self._exposed(source)

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
            labels = trust
            if isinstance(trust, RecordTrust):
                labels = self._record_labels(record, trust)
            self._absorb_record(record, _labels(record, labels), item.call_id)

    def _record_labels(
        self, record: Mapping[str, Any], trust: RecordTrust
    ) -> Mapping[str, Label] | None:
        """``trust.fields`` for a record the user owns or the request designates, else
        ``trust.others`` (`callgate.authorize.records`)."""
        if trust.owner_path is not None:
            found = _values_at(record, trust.owner_path, _RECORD_VALUES + 1)
            users = self._index.owners
            if found and len(found) <= _RECORD_VALUES and all(owner_key(v) in users for v in found):
                return trust.fields
        if trust.by_path is not None:
            by_path = trust.by_path
            if any(self.named(v) for v in _values_at(record, by_path) if isinstance(v, str)):
                return trust.fields
        return trust.others

    def _absorb_record(
        self, record: Mapping[str, Any], labels: _Labels | None, call_id: str
    ) -> None:
        """Index one record: labelled places trusted (kept together), the rest untrusted."""
        kept: list[str] = []
        readers_of: dict[int, list[str]] = {}
        seen: dict[tuple[tuple[str, ...], bool], Label | None] = {}
        for path, value, is_key in _walk(record, (), 0):
            if value is _DEEP:
                self._exposed(call_id)
                continue
            place = (path, is_key)
            if place not in seen:
                seen[place] = _label_of(labels, path, is_key)
            label = seen[place]
            if isinstance(label, Readers):
                self._restrict(record, value, label, path, call_id, readers_of)
                label = label.trust
            if label:
                self.add_trusted_value(value, label if isinstance(label, str) else None)
                if isinstance(value, str) and " " in value.strip():
                    self._index.trusted_words.append(words(value))
                if not is_key and not isinstance(value, bool) and len(kept) < _RECORD_VALUES:
                    kept.append(str(value))
            elif path or not is_key:  # a record's own field names are its schema, not data
                self._untrusted(value, call_id)
                if isinstance(value, str) and value.strip():
                    self._exposed(call_id)
        if len(kept) > 1:
            self._record(kept)

    def _restrict(
        self,
        record: Mapping[str, Any],
        value: Any,
        readers: Readers,
        path: tuple[str, ...],
        call_id: str,
        readers_of: dict[int, list[str]],
    ) -> None:
        """Remember that ``value`` may be read only by ``readers`` (resolved in ``record``,
        once per record and label: ``readers_of``)."""
        named = readers_of.get(id(readers))
        if named is None:
            named = readers_of[id(readers)] = [
                normalize(v)
                for p, v, is_key in _walk(record, (), 0)
                if v is not _DEEP and any(r.keys == is_key and r.matches(p) for r in readers.paths)
            ]
        where = ".".join(path) or "value"
        self._index.restrictions.add(value, readers, named, where, call_id)

    def _record(self, values: list[str]) -> None:
        """Remember which trusted values one record holds together (for `named`)."""
        index = self._index
        if len(index.records) >= _MAX_RECORDS:
            return
        index.records.append(tuple(values))  # looked up by value only when `named` asks

    def named(self, value: Any) -> bool:
        """Whether what the user asked for names ``value``: trusted *text* holds it (a whole
        token, or a phrase of whole words), or it belongs to a trusted record another of
        whose values trusted text holds, whole or by one of its words of three letters
        or more ("Tom" names the contact "Tom Becker", so his address; a file's name
        names its id). Values vouched for only by records or by the application, or
        only by a number, are not named."""
        if hasattr(value, "value") and not isinstance(value, str):
            value = value.value  # an Enum
        key = normalize(value)
        if self._in_text(key, str(value)):
            return True
        index = self._index
        while index.records_indexed < len(index.records):
            number = index.records_indexed
            for held in {normalize(v) for v in index.records[number]}:
                holders = index.record_of.setdefault(held, [])
                if len(holders) < _RECORDS_PER_VALUE:
                    holders.append(number)
            index.records_indexed += 1
        for number in index.record_of.get(key, ()):
            for sibling in index.records[number]:
                other = normalize(sibling)
                if other != key and (self._in_text(other, sibling) or self._by_word(other)):
                    return True
        return False

    def _by_word(self, key: str) -> bool:
        """Whether one word of a multi-word value (three letters or more, not a common
        function word) is a whole token of trusted text."""
        if " " not in key:
            return False
        tokens_ = self._index.trusted_tokens
        return any(
            len(word) >= 3 and word.isalpha() and word not in _FUNCTION_WORDS and word in tokens_
            for word in words(key).split()
        )

    def _in_text(self, key: str, raw: str) -> bool:
        index = self._index
        if not is_number(key) and key in index.trusted_tokens:
            return True
        spoken = phrase(raw)
        return spoken is not None and any(spoken in text for text in index.text_words)

    def _exposed(self, source: str) -> None:
        exposed = self._index.exposed_by
        if source not in exposed:
            exposed.append(source)

    def _untrusted(self, value: Any, call_id: str) -> None:
        text = str(value)
        seen = self._index.untrusted
        for token in {normalize(text), *tokens(text, numbers=True)}:
            calls = seen.setdefault(token, [])
            if call_id not in calls:
                calls.append(call_id)
        if " " in text.strip():
            self._index.untrusted_words.append((call_id, words(text)))

    def check(
        self,
        sinks: Mapping[str, str | None],
        values: Mapping[str, Any],
        *,
        links: bool,
        recipients: Iterable[str] = (),
    ) -> list[Finding]:
        """The sink values of a call that nothing trusted vouches for; with ``links``,
        also the links inside its other (free-text) arguments; with ``recipients`` (the
        arguments a call discloses to), restricted values its other arguments would send
        outside their readers (`ReaderFinding`)."""
        findings: list[Finding] = []
        for argument, kind in sinks.items():
            value = values.get(argument)
            if value is None:
                continue
            for one in value if isinstance(value, list | tuple | set | frozenset) else (value,):
                finding = self._check_value(argument, one, kind, "value")
                if finding is not None:
                    findings.append(finding)
        if links:
            for argument, value in values.items():
                if argument in sinks:
                    continue
                for text in _strings(value):
                    for link in _links_of(text):
                        finding = self._check_value(argument, link, None, "link")
                        if finding is not None:
                            findings.append(finding)
        findings.extend(self.readers_check(recipients, values))
        return findings

    def readers_check(
        self, recipients: Iterable[str], values: Mapping[str, Any]
    ) -> list[ReaderFinding]:
        """Restricted values inside the content arguments of a call (every argument but
        its recipients) that a recipient of the call may not read."""
        restrictions = self._index.restrictions
        targets = [
            (name, str(one)) for name in recipients for one in content_texts(values.get(name))
        ]
        if not targets or not restrictions.values:
            return []
        findings: list[ReaderFinding] = []
        recipient_names = {name for name, _ in targets}
        for argument, value in values.items():
            if argument in recipient_names:
                continue
            for text in content_texts(value):
                for held in restrictions.find(text):
                    outside = next(
                        (
                            (name, one)
                            for name, one in targets
                            if not restrictions.may_read(held, normalize(one))
                        ),
                        None,
                    )
                    if outside is None:
                        continue
                    allowed = sorted(held.readers or ())
                    if held.user:
                        allowed = sorted(restrictions.users) + allowed
                    findings.append(
                        ReaderFinding(
                            argument=argument,
                            value=held.shown,
                            field=held.field,
                            readers=held.who,
                            allowed=tuple(allowed[:20]),
                            recipient=_shown(outside[1], 120),
                            recipient_argument=outside[0],
                            tainted_by=(held.source,),
                        )
                    )
        return findings

    def _check_value(
        self, argument: str, value: Any, kind: str | None, via: str
    ) -> SinkFinding | None:
        if hasattr(value, "value") and not isinstance(value, str):
            value = value.value  # an Enum
        key = normalize(value)
        index = self._index
        kinds = index.trusted_values.get(key)
        if kinds is not None and (kind is None or kind in kinds):
            return None
        words_of = phrase(str(value)) if kind is None and via == "value" else None
        if kind is None:
            if not is_number(key) and key in index.trusted_tokens:
                return None
            if words_of is not None and any(words_of in text for text in index.trusted_words):
                return None
        tainted = list(index.untrusted.get(key, ()))
        if words_of is not None:
            for call_id, text in index.untrusted_words:
                if call_id not in tainted and words_of in text:
                    tainted.append(call_id)
        return SinkFinding(
            argument=argument,
            value=str(value),
            kind=kind,
            tainted_by=tuple(tainted),
            via="phrase" if words_of is not None and via == "value" else via,
        )


def _links_of(text: str) -> list[str]:
    """The distinct links of one argument text, in order."""
    return list(dict.fromkeys(links(text)))


def _values_at(
    record: Mapping[str, Any], path: TrustPath, limit: int = _RECORD_VALUES
) -> list[Any]:
    """The scalars of one record at ``path`` (keys with ``keys(...)``), at most ``limit``."""
    found: list[Any] = []
    for where, value, is_key in _walk(record, (), 0):
        if value is not _DEEP and is_key == path.keys and path.matches(where):
            found.append(value)
            if len(found) >= limit:
                break
    return found


def owner_key(value: Any) -> str:
    """The form in which an owner field is compared with the user's identities: ASCII text
    lower-cased and trimmed; any other text exact (NFC only). Not NFKC, not case folding: a
    full-width or look-alike address is another account a stranger can hold."""
    text = str(value).strip()
    if text.isascii():
        return text.lower()
    return unicodedata.normalize("NFC", text)


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    """The text inside an argument value: itself, or the strings nested in it. Below the
    walk's depth bound (the same as `content_texts`) the rest is read whole, as its JSON
    text, so a link cannot be hidden by nesting it deeper."""
    if isinstance(value, str):
        yield value
    elif depth > ARGUMENT_DEPTH:
        yield json.dumps(value, default=str, ensure_ascii=False)
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


def records_of(result: Any) -> Iterator[Mapping[str, Any]]:
    """The records of a tool result as provenance reads them (`_records`), a model first
    dumped as JSON."""
    if isinstance(result, BaseModel):
        result = result.model_dump(mode="json")
    return _records(result)


def leaves(record: Mapping[str, Any]) -> Iterator[tuple[tuple[str, ...], Any, bool]]:
    """Each scalar of one record with its path, and each key of its mappings (``True``);
    nothing below the walk's depth bound."""
    for path, value, is_key in _walk(record, (), 0):
        if value is not _DEEP:
            yield path, value, is_key


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


def _walk(
    node: Any, path: tuple[str, ...], depth: int
) -> Iterator[tuple[tuple[str, ...], Any, bool]]:
    """Each leaf value of a record with the keys on the way to it (lists are transparent),
    and each key of each mapping with the mapping's path, marked ``True``."""
    if depth > _MAX_DEPTH:
        yield path, _DEEP, False
    elif isinstance(node, _SCALARS):  # most leaves: no ABC check
        yield path, node, False
    elif isinstance(node, Mapping):
        for key, value in node.items():
            yield path, key, True
            if isinstance(value, _SCALARS):
                yield (*path, str(key)), value, False
            else:
                yield from _walk(value, (*path, str(key)), depth + 1)
    elif isinstance(node, list | tuple):
        for item in node:
            yield from _walk(item, path, depth + 1)
    elif node is not None:
        yield path, node, False


def _label_of(labels: _Labels | None, path: tuple[str, ...], is_key: bool) -> Label | None:
    """The label of one place of a record: a path that names it, else the record's ``*``
    (but a record's own field names only by ``keys()``: they are its schema, not data)."""
    if labels is None:
        return None
    everything, by_path = labels
    for trust_path, label in by_path:
        if trust_path.keys == is_key and trust_path.matches(path):
            return label
    return None if is_key and not path else everything


def _labels(record: Mapping[str, Any], trust: OutputTrust | None) -> _Labels | None:
    """Which places of this record are trusted, and their kinds (None: nothing trusted)."""
    if trust is None or trust is False:
        return None
    if callable(trust) and not isinstance(trust, Mapping):
        try:
            trust = trust(record)
        except Exception:
            return None  # a labeller that fails trusts nothing
    if trust is True:
        return (True, ())
    if trust is False or trust is None or not isinstance(trust, Mapping):
        return None
    everything: Label | None = None
    by_path: list[tuple[TrustPath, Label]] = []
    for raw, label in trust.items():
        if not label:
            continue
        if raw == "*":
            everything = label
            continue
        parsed = _parsed(str(raw))
        if parsed is not None:
            by_path.append((parsed, label))
    if everything is None and not by_path:
        return None
    return (everything, tuple(by_path))


_PARSED: dict[str, TrustPath | None] = {}


def _parsed(text: str) -> TrustPath | None:
    """A label's path, remembered; a path that does not parse labels nothing (trusts less)."""
    hit = _PARSED.get(text, _MISSING)
    if hit is _MISSING:
        try:
            hit = TrustPath.parse(text)
        except DefinitionError:
            hit = None
        if len(_PARSED) < 4096:
            _PARSED[text] = hit
    return hit if isinstance(hit, TrustPath) else None


_MISSING: Any = object()

Finding = SinkFinding | ReaderFinding
"""What the provenance check finds: a sink value nothing vouches for, or a restricted
value sent outside its readers."""
