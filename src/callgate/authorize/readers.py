"""Readers on data: who may read a field, and the check that a call sends it nowhere else.

A tool's ``output_trust`` (or a record the application vouches for) may label
a field with `Readers`: ``{"passport": Readers("user")}``, ``{"content":
Readers("owner", "keys(shared_with)")}``. A reader is either the role
``"user"`` (the identities the run declares as the user's own:
`TrustIndex.add_user`) or a path (`TrustPath`) into the same record whose
values name readers: the record's owner field, its sharing list.

A call *discloses* to the values of its recipient arguments: the sink
arguments a ``disclose:{argument}`` effect of the tool names (``send_email``
with ``effects="disclose:{to}"`` and ``sinks=["to"]``). Every other argument
is *content*: subject, body, attachments, nested lists and objects. When a
content argument holds a restricted value, whole or inside a longer text,
and a recipient of the call is not among that value's readers, the call is
an exfiltration finding (`ReaderFinding`), asked or denied as the policy's
``untrusted_sinks`` says, whatever the recipient's own provenance: an
address the user named does not make the user's passport number theirs.

What the check detects, and what it does not:

* Values and texts are compared in one form: NFKC, case-folded, every
  character that is not a letter or a digit dropped. So ``C01X00T47`` is found
  in "passport c01x-00t47, thanks" and ``4111 1111 1111 1111`` in
  "card 4111-1111-1111-1111". A value of fewer than 4 letters and digits is
  found only when an argument is that value whole (short values would match
  any text).
* It does not detect a value transformed other than by spacing, case and
  punctuation: a prefix, an encoding (base64, spelling the digits out), a
  translation, a look-alike letter of another script. Label the fields whose
  leak matters, and keep their values long enough to be specific.
* A value restricted by two records may be read only by readers both allow.
* Recipients are only the arguments a ``disclose:`` effect names; a tool that
  sends without declaring one (a URL fetched, a payment subject) has no
  recipient here, so its content is not checked.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from callgate.authorize.paths import TrustPath
from callgate.errors import DefinitionError

__all__ = [
    "ROLES",
    "ReaderFinding",
    "Readers",
    "canonical",
    "disclosed_arguments",
    "label_from_record",
    "label_record",
]

ROLES = frozenset({"user"})
"""Reader names that are roles of the run rather than paths into the record."""
_MIN_INSIDE = 4
"""Letters and digits a value needs before it is searched for inside longer text."""
_MAX_RESTRICTED = 10_000
ARGUMENT_DEPTH = 20
"""How deep argument values are walked before the rest is read whole as JSON text (shared
with `callgate.authorize.provenance`)."""


class Readers:
    """Who may read a labelled field: ``Readers("user")``, ``Readers("owner",
    "keys(shared_with)")``. ``trust`` is the field's trust label as in ``output_trust``
    (``True``, a kind such as ``"file"``, or ``False`` for a field that is restricted but
    not trusted)."""

    __slots__ = ("paths", "trust", "who")

    def __init__(self, *who: str, trust: str | bool = True) -> None:
        if not who:
            raise DefinitionError(
                "Readers() names nobody; name 'user' and/or a field of the record that "
                "holds its readers, e.g. Readers('user') or Readers('owner', "
                "'keys(shared_with)')"
            )
        paths: list[TrustPath] = []
        for name in who:
            if not isinstance(name, str) or not name:
                raise DefinitionError(
                    f"Readers: a reader must be 'user' or a field path, got {name!r}"
                )
            if name not in ROLES:
                paths.append(TrustPath.parse(name))
        self.who: tuple[str, ...] = tuple(who)
        self.paths: tuple[TrustPath, ...] = tuple(paths)
        self.trust = trust

    @property
    def user(self) -> bool:
        """Whether the run's user is a reader."""
        return "user" in self.who

    def __repr__(self) -> str:
        args = ", ".join(repr(w) for w in self.who)
        return f"Readers({args}, trust={self.trust!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Readers) and other.who == self.who and other.trust == self.trust

    def as_record(self) -> dict[str, Any]:
        """The label as plain data for a journal record (`label_from_record` reads it)."""
        return {"readers": list(self.who), "trust": self.trust}


def label_record(label: Any) -> Any:
    """A trust label as plain data: `Readers` as ``{"readers": [...], "trust": ...}``, any
    other label (a kind, a boolean) as itself."""
    return label.as_record() if isinstance(label, Readers) else label


def label_from_record(data: Any) -> Any:
    """The label `label_record` wrote. A mapping that is not a well-formed `Readers` record
    raises `DefinitionError` (a journal that cannot be read back is not guessed at)."""
    if not isinstance(data, Mapping):
        return data
    who = data.get("readers")
    trust = data.get("trust", True)
    if (
        set(data) - {"readers", "trust"}
        or not isinstance(who, list)
        or not all(isinstance(w, str) for w in who)
        or not isinstance(trust, str | bool)
    ):
        raise DefinitionError(
            f"a trust label record must be {{'readers': [names], 'trust': kind}}, got {data!r:.80}"
        )
    return Readers(*who, trust=trust)

    def __hash__(self) -> int:
        return hash((self.who, self.trust))


def canonical(value: Any) -> str:
    """The form in which a restricted value is searched for: NFKC, case-folded, only its
    letters and digits."""
    text = unicodedata.normalize("NFKC", str(value)).casefold()
    return "".join(ch for ch in text if ch.isalnum())


def disclosed_arguments(effects: Iterable[Any], sinks: Mapping[str, Any]) -> tuple[str, ...]:
    """The recipient arguments of a tool: sink arguments named by one of its
    ``disclose:`` effect templates (objects with ``text`` and ``name.fields``)."""
    found: list[str] = []
    for template in effects:
        if not str(getattr(template, "text", "")).startswith("disclose:"):
            continue
        for name in getattr(getattr(template, "name", None), "fields", ()):
            if name in sinks and name not in found:
                found.append(name)
    return tuple(found)


@dataclass(slots=True)
class Restricted:
    """One restricted value: where it came from and who may read it."""

    shown: str
    field: str
    source: str
    readers: frozenset[str] | None
    """Normalised reader identities named by the record (None: not limited by records)."""
    user: bool
    """Whether the user may read it (every restriction so far included the user)."""
    who: tuple[str, ...]


class Restrictions:
    """The restricted values one run has seen, by `canonical` form."""

    __slots__ = ("_by_prefix", "users", "values")

    def __init__(self) -> None:
        self.values: dict[str, Restricted] = {}
        self.users: set[str] = set()
        self._by_prefix: dict[str, list[str]] = {}
        """Values of `_MIN_INSIDE` characters or more by their first `_MIN_INSIDE`: a text
        is searched once per position, not once per restricted value."""

    def add(
        self,
        value: Any,
        readers: Readers,
        named: Iterable[str],
        field: str,
        source: str,
    ) -> None:
        """Restrict ``value`` to ``readers`` (the record's reader values already read as
        ``named``, normalised); a value restricted twice keeps the readers both allow."""
        key = canonical(value)
        if not key or isinstance(value, bool):
            return
        allowed = frozenset(named) if readers.paths else None
        held = self.values.get(key)
        if held is None:
            if len(self.values) >= _MAX_RESTRICTED:
                return
            if len(key) >= _MIN_INSIDE:
                self._by_prefix.setdefault(key[:_MIN_INSIDE], []).append(key)
            self.values[key] = Restricted(
                shown=str(value),
                field=field,
                source=source,
                readers=allowed,
                user=readers.user,
                who=readers.who,
            )
            return
        if allowed is not None:
            held.readers = allowed if held.readers is None else held.readers & allowed
        held.user = held.user and readers.user
        held.who = tuple(dict.fromkeys((*held.who, *readers.who)))

    def may_read(self, restricted: Restricted, recipient_key: str) -> bool:
        """Whether one recipient (normalised) is among a restricted value's readers."""
        if restricted.user and recipient_key in self.users:
            return True
        return restricted.readers is not None and recipient_key in restricted.readers

    def find(self, text: str) -> Iterator[Restricted]:
        """The restricted values inside one content text."""
        if not self.values:
            return
        key = canonical(text)
        if not key:
            return
        found: dict[str, None] = {}
        whole = self.values.get(key)
        if whole is not None:
            found[key] = None
        prefixes = self._by_prefix
        for start in range(len(key) - _MIN_INSIDE + 1):
            for value_key in prefixes.get(key[start : start + _MIN_INSIDE], ()):
                if value_key not in found and key.startswith(value_key, start):
                    found[value_key] = None
        for value_key in found:
            yield self.values[value_key]


@dataclass(frozen=True, slots=True, kw_only=True)
class ReaderFinding:
    """A restricted value a call would send to someone outside its readers."""

    argument: str
    """The content argument carrying the value."""
    value: str
    field: str
    """The record field the value came from (its path)."""
    readers: tuple[str, ...]
    """Who may read it, as declared (``user``, ``owner``, ``keys(shared_with)``)."""
    allowed: tuple[str, ...]
    """The identities those readers stand for in this run (shown, at most a few)."""
    recipient: str
    recipient_argument: str
    tainted_by: tuple[str, ...]
    """The observation the value was read from."""
    kind: str | None = None
    via: str = "readers"

    @property
    def source(self) -> str | None:
        """The observation the restricted value was read from."""
        return self.tainted_by[0] if self.tainted_by else None

    @property
    def match(self) -> str:
        """Always ``restricted``: the value is known; who receives it is the problem."""
        return "restricted"

    @property
    def rule(self) -> str:
        """The rule name findings of this kind are recorded under."""
        return "restricted_reader"

    def explain(self) -> str:
        """One line for the model and the audit trail: what, which field, who may read it,
        what to do."""
        allowed = ", ".join(self.allowed[:5]) or "nobody this run knows"
        return (
            f"'{self.argument}' carries the value of the field '{self.field}' "
            f"({_masked(self.value)}) read by call {self.source or '?'}; only its readers "
            f"({', '.join(self.readers)}: {allowed}) may receive it, and "
            f"'{self.recipient_argument}' is {self.recipient!r}, who is not one of them. "
            f"Leave that value out of the message, or send it only to a reader"
        )

    def as_dict(self) -> dict[str, Any]:
        """The finding as a plain record for the ledger and `Observation.details`."""
        return {
            "rule": self.rule,
            "argument": self.argument,
            "value": _masked(self.value),
            "field": self.field,
            "readers": list(self.readers),
            "allowed": list(self.allowed[:20]),
            "recipient": self.recipient,
            "recipient_argument": self.recipient_argument,
            "kind": self.kind,
            "via": self.via,
            "match": self.match,
            "source": self.source,
            "sources": list(self.tainted_by),
            "tainted_by": list(self.tainted_by),
        }


def _masked(value: str) -> str:
    """A restricted value as findings show it: its last characters only, never whole."""
    tail = value[-3:] if len(value) > 6 else ""
    return f"…{tail} ({len(value)} characters)" if tail else f"({len(value)} characters)"


def content_texts(value: Any, depth: int = 0) -> Iterator[str]:
    """The text inside a content argument: strings and numbers, nested in lists, mappings
    (keys too) and models. Below the walk's depth bound the rest is read whole, as its JSON
    text, so a value cannot be hidden by nesting it deeper."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, bool) or value is None:
        return
    elif depth > ARGUMENT_DEPTH:
        yield json.dumps(value, default=str, ensure_ascii=False)
    elif isinstance(value, int | float):
        yield str(value)
    elif isinstance(value, BaseModel):
        for item in value.__dict__.values():
            yield from content_texts(item, depth + 1)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield from content_texts(key, depth + 1)
            yield from content_texts(item, depth + 1)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from content_texts(item, depth + 1)
    elif hasattr(value, "value"):  # an Enum
        yield str(value.value)
