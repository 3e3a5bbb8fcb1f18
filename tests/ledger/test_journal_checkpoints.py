"""Checkpoints written while other writers commit (issue 31, review finding C1).

On PostgreSQL a checkpoint may see a head committed by a writer whose record number is
above its own (numbers are drawn before the writer commits). The journal's fold reads
records by number, so it meets such a checkpoint before the record it binds: it must
check that binding when it has the record, not refuse the journal; and a checkpoint
binds only heads numbered below its own, so new checkpoints never need that.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from callgate.errors import LedgerError
from callgate.ledger.base import GENESIS, AuditRecord, audit_hash, audit_json
from callgate.ledger.chains import CHECKPOINT, ROOT_CHAIN
from callgate.ledger.truth import JournalTruth


def record(seq: int, kind: str, run_id: str, data: dict[str, Any], prev: str) -> AuditRecord:
    """A record hashed as a writer hashes it."""
    text = audit_json(data)
    h = audit_hash(prev, seq, 1.0, kind, run_id, None, text, None)
    return AuditRecord(
        seq=seq,
        at=1.0,
        kind=kind,
        run_id=run_id,
        call_id=None,
        data=data,
        prev_hash=prev,
        hash=h,
        data_json=text,
    )


def fold(records: list[AuditRecord], rows: list[tuple[str, int, str]]) -> JournalTruth:
    """A fresh truth that reads ``records`` (by number) and the head rows ``rows``."""
    truth = JournalTruth()
    ordered = sorted(records, key=lambda r: r.seq)
    truth.catch_up(lambda _mark: (ordered, ordered[-1].seq), lambda: rows)
    return truth


def test_a_checkpoint_binding_a_record_numbered_after_it_folds() -> None:
    """A checkpoint numbered 3 binding run x's record 5 (committed first) verifies."""
    rec = record(5, "note.x", "x", {"n": 1}, GENESIS)
    cp = record(3, CHECKPOINT, "", {"actor": "w", "heads": [["r:x", 5, rec.hash]]}, GENESIS)
    truth = fold([cp, rec], [("r:x", 5, rec.hash), (ROOT_CHAIN, 3, cp.hash)])
    assert truth.heads["r:x"] == (5, rec.hash)


def test_a_checkpoint_binding_a_missing_later_record_is_refused() -> None:
    """Deferred, the binding is still checked: record 5 deleted, the fold refuses."""
    rec = record(5, "note.x", "x", {"n": 1}, GENESIS)
    cp = record(3, CHECKPOINT, "", {"actor": "w", "heads": [["r:x", 5, rec.hash]]}, GENESIS)
    with pytest.raises(LedgerError, match="checkpoint 3 binds it"):
        fold([cp], [(ROOT_CHAIN, 3, cp.hash)])


def test_a_checkpoint_binding_a_later_record_that_differs_is_refused() -> None:
    """Deferred, the bound hash is still compared: record 5 rehashed, the fold refuses."""
    rec = record(5, "note.x", "x", {"n": 1}, GENESIS)
    cp = record(3, CHECKPOINT, "", {"actor": "w", "heads": [["r:x", 5, "f" * 64]]}, GENESIS)
    with pytest.raises(LedgerError, match="checkpoint 3 binds it"):
        fold([cp, rec], [("r:x", 5, rec.hash), (ROOT_CHAIN, 3, cp.hash)])


WRITER = textwrap.dedent(
    """
    import sys, time
    import callgate.ledger.sql as sql
    sql.CHECKPOINT_RECORDS = 2  # a checkpoint every other record: many races
    from callgate import Authority, Gate, Policy, Registry, ToolCall, allow
    from callgate.ledger import PostgresLedger

    dsn, me, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
    registry = Registry()

    @registry.tool(effects="spend:USD={amount}", idempotency_key="{op}")
    def charge(op: str, amount: int) -> dict:
        \"\"\"Charge.\"\"\"
        return {"charged": amount}

    who = Authority(principal="alice", grants=["spend:USD<=100000"])
    ledger = PostgresLedger(dsn, worker=me)
    gate = Gate(registry, policy=Policy([allow("charge")]), ledger=ledger)
    time.sleep(max(0.0, start - time.time()))
    for r in range(int(sys.argv[4])):
        run = gate.run(authority=who, run_id=f"{me}-{r}")
        call = ToolCall(id="c", name="charge", arguments={"op": f"{me}-{r}", "amount": 1})
        [obs] = run.submit([call])
        assert obs.status.value == "ok", obs
    ledger.close()
    """
)


def test_concurrent_postgres_writers_leave_a_ledger_a_new_process_acts_on(
    pg_dsn: str, tmp_path: Path
) -> None:
    """Six processes write and checkpoint at once; a fresh process's side effect then runs."""
    import time

    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    start = time.time() + 3
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), pg_dsn, f"w{i}", str(start), "25"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    from callgate import Authority, Gate, Policy, Registry, Status, ToolCall, allow
    from callgate.ledger import PostgresLedger

    registry = Registry()
    done: list[int] = []

    @registry.tool(effects="spend:USD={amount}", idempotency_key="{op}")
    def charge(op: str, amount: int) -> dict[str, int]:
        """Charge."""
        done.append(amount)
        return {"charged": amount}

    ledger = PostgresLedger(pg_dsn, worker="late")
    try:
        assert ledger.verify().ok
        gate = Gate(registry, policy=Policy([allow("charge")]), ledger=ledger)
        run = gate.run(authority=Authority(principal="alice", grants=["spend:USD<=10"]))
        [obs] = run.submit([ToolCall(id="c", name="charge", arguments={"op": "late", "amount": 1})])
        assert obs.status is Status.OK, obs.content
        assert done == [1]
    finally:
        ledger.close()


def _tamper(backend: str, target: str, *statements: str) -> None:
    """Run statements straight on the database (no ledger involved)."""
    if backend == "postgres":
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)
    else:
        import sqlite3

        lite = sqlite3.connect(target)
        try:
            for statement in statements:
                lite.execute(statement)
            lite.commit()
        finally:
            lite.close()


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(backend, where) of an empty ledger."""
    if request.param == "postgres":
        return "postgres", str(request.getfixturevalue("pg_dsn"))
    return "sqlite", str(tmp_path / "callgate.db")


def _open(where: tuple[str, str], **options: Any) -> Any:
    from callgate.ledger import PostgresLedger, SQLiteLedger

    backend, target = where
    if backend == "postgres":
        return PostgresLedger(target, **options)
    return SQLiteLedger(target, **options)


def test_a_flipped_bound_flag_does_not_keep_a_run_out_of_checkpoints(
    target: tuple[str, str],
) -> None:
    """``UPDATE chains SET bound = 1`` on run E: the next checkpoint still binds E, and E
    deleted later is reported."""
    ledger = _open(target, worker="w")
    ledger.record_event("note.e", run_id="E", call_id=None, data={"n": 1})
    _tamper(*target, "UPDATE chains SET bound = 1")
    ledger.record_event("note.f", run_id="F", call_id=None, data={"n": 2})
    ledger.close()  # writes a checkpoint
    _tamper(
        *target,
        "DELETE FROM journal WHERE run_id = 'E'",
        "DELETE FROM chains WHERE chain = 'r:E'",
    )
    reader = _open(target, read_only=True)
    try:
        check = reader.verify()
    finally:
        reader.close()
    assert not check.ok
    assert any("run 'E'" in p for p in check.problems), check.problems


def _excise_run_c(path: str) -> None:
    """Delete run C's records, rows and head row, every checkpoint from the first that binds
    it, and move the root chain's head row back to the checkpoint before: deletions only."""
    import json
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        cps = conn.execute(
            "SELECT seq, hash, data FROM journal WHERE kind = ? ORDER BY seq", (CHECKPOINT,)
        ).fetchall()
        first = min(s for s, _, d in cps if any(e[0] == "r:C" for e in json.loads(d)["heads"]))
        keep = [(s, h) for s, h, _ in cps if s < first]
        conn.execute("DELETE FROM journal WHERE run_id = 'C'")
        for table in ("calls", "idempotency_keys", "approvals", "journal_orphans"):
            conn.execute(f"DELETE FROM {table} WHERE run_id = 'C'")
        conn.execute("DELETE FROM chains WHERE chain = 'r:C'")
        conn.execute("DELETE FROM journal WHERE kind = ? AND seq >= ?", (CHECKPOINT, first))
        conn.execute(
            "DELETE FROM journal_orphans WHERE run_id = '' AND seq NOT IN (SELECT seq FROM journal)"
        )
        if keep:
            conn.execute("UPDATE chains SET seq = ?, hash = ? WHERE chain = 'r:'", keep[-1])
        else:
            conn.execute("DELETE FROM chains WHERE chain = 'r:'")
        conn.commit()
    finally:
        conn.close()


def _charge_again(gate: Any, who: Any) -> None:
    """Run C's charge sent again by a new run (it must never run again)."""
    from callgate import ToolCall

    run = gate.run(authority=who, run_id="C2")
    run.submit([ToolCall(id="c", name="charge", arguments={"op": "C", "amount": 1})])


def test_a_run_and_the_checkpoints_after_it_deleted_from_sqlite_are_reported(
    tmp_path: Path,
) -> None:
    """SQLite numbers records without gaps: deleting run C and every later checkpoint (and
    rewinding the root head) leaves a gap that verify and the next side effect report."""
    from callgate import Authority, Gate, Policy, Registry, ToolCall, allow
    from callgate.ledger import SQLiteLedger

    done: list[str] = []
    registry = Registry()

    @registry.tool(effects="spend:USD={amount}", idempotency_key="{op}")
    def charge(op: str, amount: int) -> dict[str, Any]:
        """Charge."""
        done.append(op)
        return {"charged": amount}

    who = Authority(principal="alice", grants=["spend:USD<=100"])
    path = str(tmp_path / "callgate.db")
    for run_id in "ABCD":
        with SQLiteLedger(path, worker="w") as ledger:  # a checkpoint at each close
            gate = Gate(registry, policy=Policy([allow("charge")]), ledger=ledger)
            run = gate.run(authority=who, run_id=run_id)
            run.submit([ToolCall(id="c", name="charge", arguments={"op": run_id, "amount": 1})])
    assert done == ["A", "B", "C", "D"]
    _excise_run_c(path)
    with SQLiteLedger(path, read_only=True) as reader:
        check = reader.verify()
    assert not check.ok
    assert any("missing" in p for p in check.problems), check.problems
    with SQLiteLedger(path, worker="w2") as ledger:
        gate = Gate(registry, policy=Policy([allow("charge")]), ledger=ledger)
        with pytest.raises(LedgerError, match="does not verify"):
            _charge_again(gate, who)
    assert done == ["A", "B", "C", "D"]


def _excise_run_c_postgres(dsn: str) -> str:
    """`_excise_run_c` on PostgreSQL; returns the root noted before the cut."""
    import json

    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cps = conn.execute(
            "SELECT seq, hash, data FROM journal WHERE kind = %s ORDER BY seq", (CHECKPOINT,)
        ).fetchall()
        root = str(cps[-1][1])
        first = min(s for s, _, d in cps if any(e[0] == "r:C" for e in json.loads(d)["heads"]))
        keep = [(s, h) for s, h, _ in cps if s < first][-1]
        conn.execute("DELETE FROM journal WHERE run_id = 'C'")
        for table in ("calls", "idempotency_keys", "approvals", "journal_orphans"):
            conn.execute(f"DELETE FROM {table} WHERE run_id = 'C'")
        conn.execute("DELETE FROM chains WHERE chain = 'r:C'")
        conn.execute("DELETE FROM journal WHERE kind = %s AND seq >= %s", (CHECKPOINT, first))
        conn.execute(
            "DELETE FROM journal_orphans WHERE run_id = '' AND seq NOT IN (SELECT seq FROM journal)"
        )
        conn.execute("UPDATE chains SET seq = %s, hash = %s WHERE chain = 'r:'", keep)
    return root


def test_on_postgres_a_run_cut_with_later_checkpoints_is_reported_by_later_anchors(
    pg_dsn: str,
) -> None:
    """On PostgreSQL (numbers with gaps) run C deleted with every later checkpoint and the root
    head moved back: run D's records anchor to a cut checkpoint, so verify, the next side
    effect and ``--expect-head`` all refuse, and C's charge never runs again."""
    from typer.testing import CliRunner

    from callgate import Authority, Gate, Policy, Registry, ToolCall, allow
    from callgate.cli import app
    from callgate.ledger import PostgresLedger

    done: list[str] = []
    registry = Registry()

    @registry.tool(effects="spend:USD={amount}", idempotency_key="{op}")
    def charge(op: str, amount: int) -> dict[str, Any]:
        """Charge."""
        done.append(op)
        return {"charged": amount}

    who = Authority(principal="alice", grants=["spend:USD<=100"])
    for run_id in "ABCD":
        ledger = PostgresLedger(pg_dsn, worker="w")
        try:  # a checkpoint at each close
            gate = Gate(registry, policy=Policy([allow("charge")]), ledger=ledger)
            run = gate.run(authority=who, run_id=run_id)
            run.submit([ToolCall(id="c", name="charge", arguments={"op": run_id, "amount": 1})])
        finally:
            ledger.close()
    assert done == ["A", "B", "C", "D"]
    root = _excise_run_c_postgres(pg_dsn)
    reader = PostgresLedger(pg_dsn, read_only=True)
    try:
        check = reader.verify()
    finally:
        reader.close()
    assert not check.ok
    assert any("anchors to record" in p for p in check.problems), check.problems
    ledger = PostgresLedger(pg_dsn, worker="w2")
    try:
        gate = Gate(registry, policy=Policy([allow("charge")]), ledger=ledger)
        with pytest.raises(LedgerError, match="anchors to record"):
            _charge_again(gate, who)
    finally:
        ledger.close()
    assert done == ["A", "B", "C", "D"]
    result = CliRunner().invoke(app, ["ledger", "verify", "--dsn", pg_dsn, "--expect-head", root])
    assert result.exit_code == 1, result.stdout


def test_a_record_anchored_to_a_missing_root_record_is_refused_by_the_fold() -> None:
    """A record whose hashed data anchors to root record 2, which the journal lacks: refused."""
    cp = record(2, CHECKPOINT, "", {"actor": "w", "heads": []}, GENESIS)
    rec = record(5, "note.x", "x", {"@root": [2, cp.hash], "n": 1}, GENESIS)
    with pytest.raises(LedgerError, match="anchors to record 2"):
        fold([rec], [("r:x", 5, rec.hash)])
    truth = fold([cp, rec], [("r:x", 5, rec.hash), (ROOT_CHAIN, 2, cp.hash)])
    assert truth.heads["r:x"] == (5, rec.hash)


def test_verify_reports_an_anchor_to_a_missing_root_record_and_accepts_none() -> None:
    """verify_chains: an anchor to a root record that is gone (or another record) is reported;
    a record without an anchor (written before anchors) is accepted as before."""
    from callgate.ledger.chains import verify_chains

    cp = record(2, CHECKPOINT, "", {"actor": "w", "heads": []}, GENESIS)
    old = record(3, "note.x", "x", {"n": 0}, GENESIS)
    rec = record(5, "note.x", "x", {"@root": [2, cp.hash], "n": 1}, old.hash)
    heads = {"r:x": (5, rec.hash), ROOT_CHAIN: (2, cp.hash)}
    assert verify_chains([cp, old, rec], heads).ok
    check = verify_chains([old, rec], {"r:x": (5, rec.hash)})
    assert not check.ok
    assert any("anchors to record 2" in p for p in check.problems), check.problems
    wrong = record(5, "note.x", "x", {"@root": [3, old.hash], "n": 1}, old.hash)
    assert not verify_chains([cp, old, wrong], {**heads, "r:x": (5, wrong.hash)}).ok


def test_records_carry_their_anchor_in_the_hashed_text_only(tmp_path: Path) -> None:
    """After a checkpoint a record's stored text begins with its anchor; ``data`` omits it,
    and an event whose data has an ``@root`` field is refused."""
    from callgate.ledger import SQLiteLedger
    from callgate.ledger.chains import anchor_of

    path = str(tmp_path / "callgate.db")
    with SQLiteLedger(path, worker="w") as ledger:
        ledger.record_event("note.a", run_id="A", call_id=None, data={"n": 1})
    with SQLiteLedger(path, worker="w") as ledger:
        ledger.record_event("note.b", run_id="B", call_id=None, data={"n": 2})
        with pytest.raises(LedgerError, match="@root"):
            ledger.record_event("note.c", run_id="B", call_id=None, data={"@root": [1, "x"]})
        records = {r.kind: r for r in ledger.audit()}
        assert ledger.verify().ok
    cp = records[CHECKPOINT]
    assert anchor_of(records["note.a"].data_json) is None
    assert anchor_of(records["note.b"].data_json) == (cp.seq, cp.hash)
    assert records["note.b"].data == {"n": 2}
