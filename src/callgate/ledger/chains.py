"""A chain per run, and the checkpoints that bind every chain into one root.

Since schema 4 the journal is not one chain but one per run: a record's
``prev_hash`` is the hash of the record before it *in its run*, so writers of
different runs never touch a shared row (each run's head is a row of its own in
``chains``). Records are still numbered by one sequence (``seq``), which may have
gaps (a number taken by a transaction that rolled back); within a chain the
numbers only grow. The records of a schema-3 ledger keep their single chain,
named `LEGACY_CHAIN`, exactly as they were written.

A **checkpoint** (`CHECKPOINT`, a record of the run ``""``, whose chain is the
root chain) binds the heads of the chains that moved since the last one: its data
lists ``[chain, seq, hash]`` for each. Each checkpoint links to the one before
it, so the last checkpoint's hash (the **root**) covers every chain head bound so
far; ``verify`` reports a chain whose bound record is missing or differs (a
whole run removed, a chain cut back), and ``--expect-head ROOT`` detects a
rewrite of everything. Records written after the last checkpoint are protected
by their own chain's links and head row, and bound by the next checkpoint (every
process writes one after `CHECKPOINT_RECORDS` of its records, and at close).

**Anchors** tie every record to the root chain forward: a SQL ledger writes, first in a
record's hashed data, ``"@root": [seq, hash]``, the root chain's head as the writer's
transaction read it with its locks (`ANCHOR`). Cutting the root chain back (a run deleted
with every checkpoint after it, and the root's head row moved back) then leaves later
records of other runs anchored to root records that are gone, which ``verify`` and the
truth's fold report even where record numbers have gaps (PostgreSQL). A record without an
anchor (written before anchors, or before the root chain had a record) is accepted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from callgate.ledger.base import GENESIS, AuditCheck, AuditRecord, audit_hash, audit_json
from callgate.ledger.record_data import Checkpoint
from callgate.ledger.records import RecordKind

__all__ = [
    "ANCHOR",
    "CHECKPOINT",
    "CHECKPOINT_RECORDS",
    "LEGACY_CHAIN",
    "ROOT_CHAIN",
    "anchor_of",
    "anchored",
    "chain_of",
    "checkpoint_heads",
    "run_chain",
    "verify_chains",
]

LEGACY_CHAIN = "@v3"
"""The chain of the records written before schema 4 (one chain for every run)."""
CHECKPOINT = RecordKind.CHECKPOINT.value
"""The kind of a checkpoint record: ``{"heads": [[chain, seq, hash], ...]}``."""
CHECKPOINT_RECORDS = 256
"""Records a process writes before it writes a checkpoint binding the chains it moved."""


def run_chain(run_id: str) -> str:
    """The name of a run's chain (``r:`` + the run id: never `LEGACY_CHAIN`)."""
    return "r:" + run_id


ROOT_CHAIN = run_chain("")
"""The chain of the records of no run, checkpoints included."""


ANCHOR = "@root"
"""The field, first in a record's stored data, naming the root chain's record (``[seq,
hash]``) that was the root's head when the record's transaction took its locks."""
_ANCHOR_PREFIX = '{"@root":['


def anchored(text: str, anchor: tuple[int, str]) -> str:
    """``text`` (a record's data as stored: a JSON object) with ``anchor`` first in it."""
    inner = text[1:].lstrip()
    sep = "" if inner.startswith("}") else ","
    return f'{_ANCHOR_PREFIX}{int(anchor[0])},"{anchor[1]}"]{sep}{inner}'


def anchor_of(text: str) -> tuple[int, str] | None:
    """The anchor a record's stored data begins with (None: it has none); a malformed one
    raises ValueError."""
    if not text.startswith(_ANCHOR_PREFIX):
        return None
    end = text.find("]", len(_ANCHOR_PREFIX))
    seq, sep, h = text[len(_ANCHOR_PREFIX) : end].partition(",")
    if end < 0 or not sep or len(h) < 2 or h[0] != '"' or h[-1] != '"':
        raise ValueError("its anchor is not [seq, hash]")
    return int(seq), h[1:-1]


def chain_of(rec: AuditRecord) -> str:
    """The chain a record belongs to: its run's, or the one named in its row."""
    return rec.chain if rec.chain else "r:" + rec.run_id


def checkpoint_heads(rec: AuditRecord) -> list[tuple[str, int, str]]:
    """The heads a checkpoint record binds; a malformed entry raises ValueError."""
    try:
        return list(Checkpoint.decode(rec.data).heads)
    except ValueError as exc:
        raise ValueError(f"checkpoint {rec.seq}: {exc}") from exc


def _name(chain: str) -> str:
    if chain == LEGACY_CHAIN:
        return "the schema-3 chain"
    if chain == ROOT_CHAIN:
        return "the chain of records of no run"
    return f"the chain of run {chain[2:]!r}" if chain.startswith("r:") else f"chain {chain!r}"


def verify_chains(
    records: Sequence[AuditRecord],
    heads: Mapping[str, tuple[int, str]],
    key: bytes | None = None,
    *,
    dense: bool = False,
) -> AuditCheck:
    """Check every record's hash and its link to the record before it in its chain, that
    each chain ends at its head row (``heads``: chain → seq, hash), and that every head a
    checkpoint binds is still a record of its chain.

    An edited record breaks its own hash; a deleted record breaks the next record's link
    in its chain; a deleted end no longer matches the head row; a whole run removed
    (records and head row) is missing from the checkpoint that bound it. ``dense`` (SQLite:
    one writer at a time numbers records without gaps): a gap in the numbers is a deleted
    record, even a whole run deleted with the checkpoints after it. Each record's anchor
    (`ANCHOR`) must be a record of the root chain in the journal, so the root chain cut
    back under records that anchored past the cut is reported on any backend. A deleted
    tail (every record after some point, head rows moved back) is found only by
    ``--expect-head``.
    """
    problems: list[str] = []
    bad: list[int] = []
    last: dict[str, tuple[int, str]] = {}
    by_seq: dict[int, tuple[str, str]] = {}
    legacy_next = next_seq = 1
    for r in records:
        chain = chain_of(r)
        seq_before, prev = last.get(chain, (0, GENESIS))
        found: list[str] = []
        if dense and r.seq != next_seq:
            found.append(
                f"record {r.seq}: expected record number {next_seq}; {r.seq - next_seq} "
                "record(s) before it are missing (this ledger numbers records without gaps: "
                "they were deleted)"
            )
        elif chain == LEGACY_CHAIN and r.seq != legacy_next:
            found.append(
                f"record {r.seq}: expected sequence number {legacy_next}; "
                f"{r.seq - legacy_next} record(s) before it are missing"
            )
        if r.prev_hash != prev:
            found.append(
                f"record {r.seq}: does not link to the record before it in {_name(chain)} "
                f"(record {seq_before}): a record was deleted or inserted"
            )
        data = r.data_json or audit_json(r.data)
        if audit_hash(r.prev_hash, r.seq, r.at, r.kind, r.run_id, r.call_id, data, key) != r.hash:
            found.append(f"record {r.seq}: its content does not match its hash (edited)")
        if found:
            problems.extend(found)
            bad.append(r.seq)
        last[chain] = (r.seq, r.hash)
        by_seq[r.seq] = (chain, r.hash)
        next_seq = r.seq + 1
        if chain == LEGACY_CHAIN:
            legacy_next = r.seq + 1
    for chain in sorted(set(last) | set(heads)):
        have, row = last.get(chain), heads.get(chain)
        if row is None:
            assert have is not None
            problems.append(
                f"{_name(chain)} ends at record {have[0]} but has no head row: the head row "
                "was deleted"
            )
            bad.append(have[0])
        elif have is None:
            problems.append(
                f"{_name(chain)}: its head row says record {row[0]}, but the journal has no "
                "record of it: the run's records were deleted"
            )
            bad.append(row[0])
        elif have != row:
            problems.append(
                f"{_name(chain)} ends at record {have[0]} but its head row says record "
                f"{row[0]}: records at the end were deleted or the head was altered"
            )
            bad.append(min(have[0], row[0]) + 1)
    root: AuditRecord | None = None
    for r in records:
        if r.kind != CHECKPOINT or chain_of(r) != ROOT_CHAIN:
            continue
        root = r
        try:
            bound = checkpoint_heads(r)
        except (TypeError, ValueError, OverflowError) as exc:
            problems.append(f"record {r.seq}: an unreadable checkpoint ({exc})")
            bad.append(r.seq)
            continue
        for chain, seq, h in bound:
            have_rec = by_seq.get(seq)
            if have_rec is None:
                problems.append(
                    f"checkpoint record {r.seq} binds record {seq} of {_name(chain)}, which "
                    "is missing: the record (or the whole run) was deleted"
                )
                bad.append(seq)
            elif have_rec != (chain, h):
                problems.append(
                    f"checkpoint record {r.seq} binds record {seq} of {_name(chain)}, which "
                    "differs from it (rewritten)"
                )
                bad.append(seq)
    for r in records:
        try:
            anchor = anchor_of(r.data_json)
        except ValueError as exc:
            problems.append(f"record {r.seq}: {exc}")
            bad.append(r.seq)
            continue
        if (
            anchor is not None
            and anchor[0] > 0
            and by_seq.get(anchor[0]) != (ROOT_CHAIN, anchor[1])
        ):
            problems.append(anchor_problem(r.seq, anchor[0]))
            bad.append(r.seq)
    newest = records[-1].hash if records else GENESIS
    return AuditCheck(
        ok=not problems,
        records=len(records),
        head=root.hash if root is not None else newest,
        problems=tuple(problems),
        first_bad_seq=min(bad) if bad else None,
    )


def anchor_problem(seq: int, anchor: int) -> str:
    """What a record anchored to a root record the journal lacks says."""
    return (
        f"record {seq}: it anchors to record {anchor} of the chain of records of no run (the "
        "root its writer read), which the journal does not have there: checkpoints (or other "
        "records of no run) were deleted and the root's head moved back, e.g. to hide a "
        "deleted run"
    )
