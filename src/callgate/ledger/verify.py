"""``ledger verify``'s second half: the rows the gate decides by, recomputed from the journal.

The hash chain shows that no record was edited, inserted or removed; this shows
that every call, key and approval row is what the records make of it
(`callgate.ledger.journal.derive`): an ``UPDATE`` that flips a pending approval to
approved, a deleted key, an inserted call, each is reported by name.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar

from callgate.approvals import ApprovalRequest
from callgate.ledger.base import AuditRecord, CallRecord
from callgate.ledger.journal import KeyRow, derive

__all__ = ["compare_rows"]

MAX_REPORTED = 50
"""Differences reported per table; the rest are counted."""

_Row = TypeVar("_Row")


def compare_rows(
    records: Iterable[AuditRecord],
    *,
    calls: Iterable[CallRecord],
    keys: Iterable[KeyRow],
    approvals: Iterable[ApprovalRequest],
    orphans: Iterable[tuple[str, str, int]] = (),
) -> list[str]:
    """Every difference between the stored rows and the rows ``records`` make, and every
    record that breaks a rule (`callgate.ledger.journal.apply`)."""
    derived, problems = derive(records)
    problems = problems[:MAX_REPORTED] + (
        [f"... and {len(problems) - MAX_REPORTED} more records that break a rule"]
        if len(problems) > MAX_REPORTED
        else []
    )
    problems += _compare(
        "call", derived.calls, calls, lambda c: (c.run_id, c.call_id), lambda k: "/".join(k)
    )
    problems += _compare("idempotency key", derived.keys, keys, lambda k: k.key, repr)
    problems += _compare("approval", derived.approvals, approvals, lambda a: a.id, str)
    stored = set(orphans)
    for run_id, call_id, seq in sorted(stored - derived.orphans)[:MAX_REPORTED]:
        problems.append(
            f"orphan list: record {seq} of {run_id}/{call_id} is listed but the journal does "
            "not put it there (inserted)"
        )
    for run_id, call_id, seq in sorted(derived.orphans - stored)[:MAX_REPORTED]:
        problems.append(
            f"orphan list: record {seq} of {run_id}/{call_id} is missing from it (deleted)"
        )
    return problems


def _compare(
    what: str,
    expected: Mapping[Any, _Row],
    stored: Iterable[_Row],
    ident: Callable[[_Row], Hashable],
    name: Callable[[Any], str],
) -> list[str]:
    found: list[str] = []
    seen = set()
    for row in stored:
        key = ident(row)
        seen.add(key)
        want = expected.get(key)
        if want is None:
            found.append(
                f"{what} {name(key)}: its row is not in the journal (inserted, or its "
                "records were deleted)"
            )
        elif want != row:
            found.append(f"{what} {name(key)}: {_differences(want, row)} (edited)")
    for key in expected:
        if key not in seen:
            found.append(f"{what} {name(key)}: the journal has it but its row is missing (deleted)")
    if len(found) > MAX_REPORTED:
        found = [*found[:MAX_REPORTED], f"... and {len(found) - MAX_REPORTED} more {what} rows"]
    return found


def _differences(want: Any, got: Any) -> str:
    parts: list[str] = []
    for f in dataclasses.fields(want):
        a, b = getattr(want, f.name), getattr(got, f.name)
        if a != b:
            parts.append(f"{f.name} is {_short(b)} in the table but {_short(a)} in the journal")
    return "; ".join(parts[:4]) + ("; ..." if len(parts) > 4 else "")


def _short(value: Any) -> str:
    text = repr(value.value if isinstance(value, enum.Enum) else value)
    return text if len(text) <= 60 else text[:57] + "..."
