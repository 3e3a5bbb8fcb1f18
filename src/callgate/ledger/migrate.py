"""Moving a schema-2 ledger's rows into its journal (schema migration 3), and a schema-3
journal's single chain under a checkpoint (schema migration 4).

Before version 3 the state the gate decided by lived in tables beside the audit
trail. Migration 3 keeps every old record (the chain still verifies from its
first record) and appends, after a ``ledger.migrated`` record, one
``migrated.call`` record per call (with its attempts and outcomes), one
``migrated.key`` per idempotency key and one ``migrated.approval`` per
approval request; from then on the rows are derived from the journal like any
others (`callgate.ledger.journal`).

The old tables could be edited without trace, so the move checks what it can:
an approval the table says was approved, or used, but whose decision is not in
the old audit trail is moved as it is only if it was used already (its call ran
and is history); an approved one that was never decided in the trail is moved
as **pending**, and named in the ``ledger.migrated`` record, so that a person
decides it again.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from callgate.approvals import ApprovalStatus
from callgate.errors import LedgerError
from callgate.ledger.base import (
    AttemptRecord,
    AuditCheck,
    AuditRecord,
    Outcome,
    audit_hash,
    verify_chain,
)
from callgate.ledger.chains import LEGACY_CHAIN
from callgate.ledger.journal import MIGRATED, migrated_call_data
from callgate.ledger.pg_dialect import dialect_for
from callgate.ledger.sql_schema import HEAD_SEQ, Cursor
from callgate.ledger.sql_statements import HEAD
from callgate.ledger.sql_writes import (
    CHECKPOINT_ITEM,
    Transaction,
    approval_from_row,
    call_from_row,
    run_items,
)
from callgate.ledger.truth import resolve_chain_key

__all__ = ["MIGRATION_HOOKS", "check_old_chain", "journal_from_v2", "old_chain_query"]


def old_chain_query(version: int) -> str:
    """The records of a schema-``version`` ledger's single chain, head row included: the
    table ``audit`` up to schema 2, ``journal`` in schema 3 (migration 3 renamed it)."""
    table = "audit" if version <= 2 else "journal"
    return f"SELECT seq, at, kind, run_id, call_id, data, prev_hash, hash FROM {table} ORDER BY seq"


def old_chain_check(rows: list[Any], key: bytes | None) -> AuditCheck:
    """``verify`` of an old ledger's single chain (rows of `old_chain_query`). A chain whose
    first record does not hash with ``key`` was keyed with a key not given here: its links,
    numbers and head are still checked, its hashes by ``verify`` once it is opened with it."""
    records = [
        AuditRecord(
            seq=int(r[0]),
            at=r[1],
            kind=r[2],
            run_id=r[3],
            call_id=r[4],
            prev_hash=r[6],
            hash=r[7],
            data_json=r[5],
        )
        for r in rows
        if int(r[0]) != HEAD_SEQ
    ]
    head = next(((int(r[5]), str(r[7])) for r in rows if int(r[0]) == HEAD_SEQ), None)
    check = verify_chain(records, head, key)
    first = records[0] if records else None
    if check.ok or first is None:
        return check
    hashes = audit_hash(
        first.prev_hash,
        first.seq,
        first.at,
        first.kind,
        first.run_id,
        first.call_id,
        first.data_json,
        key,
    )
    if hashes == first.hash:
        return check
    kept = tuple(p for p in check.problems if "does not match its hash" not in p)
    return AuditCheck(
        ok=not kept,
        records=check.records,
        head=check.head,
        problems=kept,
        first_bad_seq=check.first_bad_seq if kept else None,
    )


def check_old_chain(rows: list[Any], where: str, key: bytes | None) -> None:
    """Refuse to migrate a ledger whose old chain is already broken: the migration would
    carry edited rows into the journal as if they were true (raises `LedgerError`)."""
    check = old_chain_check(rows, key)
    if not check.ok:
        raise LedgerError(
            f"{where}'s audit trail does not verify ({check.problems[0]}), so its rows "
            "cannot be trusted into the journal; nothing was changed. Restore it from a "
            "backup, or inspect it with 'callgate ledger verify' under the callgate that "
            "wrote it"
        )


def _check_before_moving(cur: Cursor, sql: Callable[[str], str], version: int) -> None:
    """The check `callgate ledger migrate` makes, made by every migration that moves data
    (a ledger opened for writing migrates itself): the old chain must verify first."""
    cur.execute(sql(old_chain_query(version)))
    check_old_chain(list(cur.fetchall()), "the ledger", resolve_chain_key(None))


_V2_APPROVAL_COLUMNS = (
    "id, run_id, call_id, principal, tool, arguments_json, arguments_hash, resource_version, "
    "effects, preview, policy_version, created_at, expires_at, status, decided_by, decided_at, "
    "reason, used_at, used_by, resumable"
)
_V2_CALL_COLUMNS = (
    "run_id, call_id, tool, tool_version, principal, arguments, state, stage, request_hash, "
    "idempotency_key, decided_by, message, effects, approval_id, attempts, reconciled, "
    "created_at, updated_at"
)


def journal_from_v2(cur: Cursor, sql: Callable[[str], str]) -> None:
    """The data step of migration 3: the old rows become journal records; ``attempts``
    is dropped. Runs inside the migration's transaction."""
    _check_before_moving(cur, sql, 3)  # the audit table is named journal by now
    calls = [
        call_from_row(r)
        for r in _all(cur, sql, f"SELECT {_V2_CALL_COLUMNS} FROM calls ORDER BY created_at")
    ]
    attempts: dict[tuple[str, str], list[AttemptRecord]] = {}
    for r in _all(
        cur,
        sql,
        "SELECT run_id, call_id, attempt, tool_version, idempotency_key, request_hash, "
        "started_at, worker, status, content, error, stage, finished_at, reconciled, "
        "transaction_id FROM attempts ORDER BY run_id, call_id, attempt",
    ):
        outcome = (
            None
            if r[8] is None
            else Outcome(
                status=r[8],
                content=r[9] or "",
                error=r[10],
                stage=r[11] or "execute",
                finished_at=r[12] or 0.0,
                reconciled=bool(r[13]),
                transaction_id=r[14],
            )
        )
        attempts.setdefault((r[0], r[1]), []).append(
            AttemptRecord(
                run_id=r[0],
                call_id=r[1],
                attempt=r[2],
                tool_version=r[3],
                idempotency_key=r[4],
                request_hash=r[5],
                started_at=r[6],
                worker=r[7],
                outcome=outcome,
            )
        )
    keys = _all(
        cur,
        sql,
        "SELECT k.key, k.request_hash, k.run_id, k.call_id, k.attempt, k.expires_at, a.status "
        "FROM idempotency_keys k LEFT JOIN attempts a ON a.run_id = k.run_id "
        "AND a.call_id = k.call_id AND a.attempt = k.attempt ORDER BY k.key",
    )
    approvals = [
        approval_from_row([*r, None])
        for r in _all(
            cur, sql, f"SELECT {_V2_APPROVAL_COLUMNS} FROM approvals ORDER BY created_at, id"
        )
    ]
    decided = set()
    audited: dict[tuple[str, str, int], str] = {}
    for kind, run_id, call_id, text in _all(
        cur,
        sql,
        "SELECT kind, run_id, call_id, data FROM journal WHERE kind IN "
        "('approval.approved', 'attempt.ok', 'attempt.error', 'attempt.unknown') ORDER BY seq",
    ):
        try:
            data = json.loads(text)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        if kind == "approval.approved" and isinstance(data.get("approval_id"), str):
            decided.add(data["approval_id"])
        elif kind != "approval.approved" and isinstance(data.get("attempt"), int):
            audited[(run_id, call_id, data["attempt"])] = kind[8:]
    # An outcome the old table holds but the old audit trail does not (an edited row) is
    # moved as the trail has it, or as unknown: never as a freed key.
    corrected: list[str] = []
    for ident, rows in attempts.items():
        for n, att in enumerate(rows):
            if att.outcome is None:
                continue
            said = audited.get((ident[0], ident[1], att.attempt), "unknown")
            if said != att.outcome.status:
                corrected.append(f"{ident[0]}/{ident[1]}#{att.attempt}")
                rows[n] = dataclasses.replace(
                    att, outcome=dataclasses.replace(att.outcome, status=said)
                )
    status_of = {
        (att.run_id, att.call_id, att.attempt): att.outcome.status
        for rows in attempts.values()
        for att in rows
        if att.outcome is not None
    }
    keys = [(*k[:6], status_of.get((k[2], k[3], k[4]), k[6])) for k in keys]
    called = {(c.run_id, c.call_id) for c in calls}
    history: dict[tuple[str, str], list[int]] = {}
    orphans: list[list[Any]] = []
    for seq, run_id, call_id in _all(
        cur, sql, f"SELECT seq, run_id, call_id FROM journal WHERE seq < {HEAD_SEQ} ORDER BY seq"
    ):
        if call_id is not None and (run_id, call_id) in called:
            history.setdefault((run_id, call_id), []).append(int(seq))
        else:
            orphans.append([run_id, call_id or "", int(seq)])
    if calls or keys or approvals or orphans:
        undecided = [
            a.id for a in approvals if a.status is ApprovalStatus.APPROVED and a.id not in decided
        ]
        tx = Transaction(cur, dialect_for(sql), "migration", None, None, legacy=True)
        tx.append(
            MIGRATED,
            "",
            None,
            {
                "actor": "migration",
                "from_version": 2,
                "calls": len(calls),
                "keys": len(keys),
                "approvals": len(approvals),
                "approved_without_decision": undecided,
                "outcomes_not_in_trail": corrected,
                "orphans": orphans,
            },
        )
        holder_seq: dict[tuple[str, str], int] = {}
        for call in calls:
            ident = (call.run_id, call.call_id)
            rec = tx.append(
                "migrated.call",
                call.run_id,
                call.call_id,
                migrated_call_data(call, attempts.get(ident, []), history.get(ident, [])),
            )
            holder_seq[ident] = rec.seq
        for k in keys:
            row: dict[str, Any] = {
                "key": k[0],
                "request_hash": k[1],
                "run_id": k[2],
                "call_id": k[3],
                "attempt": k[4],
                "expires_at": k[5],
                "status": k[6],
            }
            seq = holder_seq.get((k[2], k[3])) if k[6] is not None else None
            tx.append(
                "migrated.key", k[2], k[3], {"actor": "migration", "row": row, "outcome_seq": seq}
            )
        for a in approvals:
            status = ApprovalStatus.PENDING if a.id in undecided else a.status
            tx.append(
                "migrated.approval",
                a.run_id,
                a.call_id,
                {
                    "actor": "migration",
                    "row": {
                        "id": a.id,
                        "run_id": a.run_id,
                        "call_id": a.call_id,
                        "principal": a.principal,
                        "tool": a.tool,
                        "arguments_json": a.arguments_json,
                        "arguments_hash": a.arguments_hash,
                        "resource_version": a.resource_version,
                        "effects": list(a.effects),
                        "preview": a.preview,
                        "policy_version": a.policy_version,
                        "created_at": a.created_at,
                        "expires_at": a.expires_at,
                        "status": status.value,
                        "decided_by": None if status is ApprovalStatus.PENDING else a.decided_by,
                        "decided_at": None if status is ApprovalStatus.PENDING else a.decided_at,
                        "reason": a.reason,
                        "used_at": a.used_at,
                        "used_by": a.used_by,
                        "resumable": a.resumable,
                    },
                },
            )
        tx.write()
    cur.execute(sql("DROP TABLE attempts"))


def _all(cur: Cursor, sql: Callable[[str], str], statement: str) -> list[Any]:
    cur.execute(sql(statement))
    return list(cur.fetchall())


def chains_from_v3(cur: Cursor, sql: Callable[[str], str]) -> None:
    """The data step of migration 4: the journal's single chain becomes `LEGACY_CHAIN`
    (its head row moves into ``chains``, and a first checkpoint binds it), and new
    records are numbered after its last."""
    _check_before_moving(cur, sql, 3)
    dialect = dialect_for(sql)
    cur.execute(sql(HEAD))
    row = cur.fetchone()
    seq, head = (int(row[0]), str(row[1])) if row is not None else (0, "")
    cur.execute(sql(f"DELETE FROM journal WHERE seq = {HEAD_SEQ}"))
    if dialect.concurrent:
        cur.execute("SELECT setval('journal_seq', %s, %s)", (max(seq, 1), seq > 0))
    if seq <= 0:
        return
    cur.execute(
        sql("INSERT INTO chains (chain, seq, hash, bound) VALUES (?, ?, ?, 0)"),
        (LEGACY_CHAIN, seq, head),
    )
    tx = Transaction(cur, dialect, "migration", None, None)
    run_items(tx, [(CHECKPOINT_ITEM, "migration")])


MIGRATION_HOOKS = {3: journal_from_v2, 4: chains_from_v3}
"""The data steps of the migrations that move data (`apply_migrations`)."""
