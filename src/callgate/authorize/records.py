"""Designated and owned records: trust a record's own fields because of whose, or which, it is.

``output_trust`` labels fields the same way for every record a tool returns,
or by a function of one record. Two cases need the run: a record the
*principal owns* (its owner field, set by the system of record, is one of
the user's identities) and a record the *user's request designates* (its
name or id is named by the request, directly or through a trusted listing
the request names: `TrustIndex.named`). For those, the deployer names the
record's own fields, which are then trusted; every other field, its free
text above all, stays untrusted, so a designated bill vouches for its IBAN
field and never for an IBAN written in its note::

    @tool(output_trust=Owned(owner="owner", fields={"id": "file", "name": True}))
    def get_file(file_id: str) -> dict[str, Any]: ...

    @tool(output_trust=Designated(by="name", fields={"iban": "iban", "payee": True},
                                  others={"name": True}))
    def read_bill(name: str) -> dict[str, Any]: ...

* **Owned**: every value at ``owner`` (a `TrustPath`; lists count each item)
  must be an identity the run declares as the user's
  (`TrustIndex.add_user`; the gate adds the principal), and there must be one.
  The path names one place: an ``owner`` key nested in free text, or an
  owner written in a description, is another place and owns nothing.
* **Designated**: a value at ``by`` is named by the request when the record
  is indexed (the listing that designates it must have been read first).
* ``others``: the labels of records that are neither (default: nothing
  trusted).

Both decide from fields of the record itself: label as ``owner`` or ``by``
only a field the system of record sets, never one a third party chooses (a
file's name in a shared folder can be chosen by whoever shares it; its id
and owner cannot).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from callgate.authorize.paths import TrustPath
from callgate.authorize.readers import Readers
from callgate.errors import DefinitionError

__all__ = ["Designated", "Owned", "RecordTrust"]

Label = str | bool | Readers


@dataclass(frozen=True, kw_only=True, eq=False)
class RecordTrust:
    """Labels for the records the user owns or designates (`Owned`, `Designated`)."""

    fields: Mapping[str, Label]
    owner: str | None = None
    by: str | None = None
    others: Mapping[str, Label] | None = None
    owner_path: TrustPath | None = field(init=False, repr=False)
    by_path: TrustPath | None = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.owner is None and self.by is None:
            raise DefinitionError(
                "RecordTrust needs owner= (the field naming the record's owner) or by= (the "
                "field the user's request names), e.g. Owned(owner='owner', fields={...})"
            )
        if not isinstance(self.fields, Mapping) or not self.fields:
            raise DefinitionError(
                "RecordTrust fields: name the record's own fields to trust, e.g. "
                "{'id': 'file', 'iban': 'iban'}; free-text fields are best left out"
            )
        if "*" in self.fields:
            raise DefinitionError(
                "RecordTrust fields: '*' would trust the record's free text too; list its own "
                "fields (id, owner, amount, iban) instead"
            )
        object.__setattr__(self, "owner_path", _parsed(self.owner, "owner"))
        object.__setattr__(self, "by_path", _parsed(self.by, "by"))


def _parsed(text: str | None, name: str) -> TrustPath | None:
    if text is None:
        return None
    if not isinstance(text, str) or not text:
        raise DefinitionError(f"RecordTrust {name}: expected a field path, got {text!r}")
    return TrustPath.parse(text)


def Owned(
    *, owner: str, fields: Mapping[str, Label], others: Mapping[str, Label] | None = None
) -> RecordTrust:
    """Trust ``fields`` of records whose ``owner`` field is the user (`RecordTrust`)."""
    return RecordTrust(fields=fields, owner=owner, others=others)


def Designated(
    *,
    by: str,
    fields: Mapping[str, Label],
    owner: str | None = None,
    others: Mapping[str, Label] | None = None,
) -> RecordTrust:
    """Trust ``fields`` of records whose ``by`` field the user's request names (or, with
    ``owner``, that the user owns) (`RecordTrust`)."""
    return RecordTrust(fields=fields, by=by, owner=owner, others=others)


def describe(trust: RecordTrust) -> dict[str, Any]:
    """The labels as plain data, for messages and tests."""
    return {
        "owner": trust.owner,
        "by": trust.by,
        "fields": sorted(trust.fields),
        "others": sorted(trust.others or ()),
    }
