"""``callgate ledger migrate``: a ledger written by the released callgate (schema 2) moves
into the journal (schema 3) with nothing lost, on SQLite and on PostgreSQL.

The ledgers under test are the files in tests/ledger/data, written by commit 95112a4
(see its README): each test migrates a fresh copy (SQLite: a copy of the file in
``tmp_path``; PostgreSQL: the dump loaded into a fresh database). What the old ledger
held is read from its tables before the migration, and compared with what the
migrated ledger answers through its public API afterwards.

Nothing here relies on the fixture's expiry times: a test that uses a key or an
approval runs on a clock set back to just after the fixture was written.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from typer.testing import CliRunner

from callgate import Gate, Status, ToolCall
from callgate.cli import app
from callgate.ledger import Ledger, PostgresLedger, SQLiteLedger
from callgate.ledger.journal import MIGRATED

DATA = Path(__file__).with_name("data")
HEAD_SEQ = 2**62
V2_ATTEMPT_COLUMNS = (
    "run_id, call_id, attempt, tool_version, idempotency_key, request_hash, started_at, worker, "
    "status, content, error, stage, finished_at, reconciled, transaction_id"
)
V2_CALL_COLUMNS = (
    "run_id, call_id, tool, tool_version, principal, arguments, state, stage, request_hash, "
    "idempotency_key, decided_by, message, effects, approval_id, attempts, reconciled, "
    "created_at, updated_at"
)
V2_APPROVAL_COLUMNS = (
    "id, run_id, call_id, principal, tool, arguments_json, arguments_hash, resource_version, "
    "effects, preview, policy_version, created_at, expires_at, status, decided_by, decided_at, "
    "reason, used_at, used_by, resumable"
)

runner = CliRunner()


def _load_scenario() -> ModuleType:
    """The generator of the fixture: its tools, policy and principals rebuild the same calls."""
    name = "callgate_tests_make_v2_ledger"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, DATA / "make_v2_ledger.py")
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


v2 = _load_scenario()


# -- the old ledger, before and after ---------------------------------------------------------


@dataclass
class Snapshot:
    """What the schema-2 ledger held, read from its tables before the migration."""

    audit: list[tuple[Any, ...]]
    calls: dict[tuple[str, str], dict[str, Any]]
    attempts: dict[tuple[str, str], list[dict[str, Any]]]
    keys: dict[str, tuple[Any, ...]]
    approvals: dict[str, dict[str, Any]]

    @property
    def written_at(self) -> float:
        """The time of the fixture's last record."""
        return max(float(r[1]) for r in self.audit)


@dataclass
class OldLedger:
    """A fresh copy of a schema-2 ledger in one backend, and how to reach it."""

    backend: str
    target: str
    manifest: dict[str, Any]
    query: Callable[[str], list[tuple[Any, ...]]]
    execute: Callable[[str], None]
    before: Snapshot = field(init=False)

    def __post_init__(self) -> None:
        self.before = snapshot(self.query)

    @property
    def where(self) -> list[str]:
        return ["--dsn", self.target] if self.backend == "postgres" else ["--db", self.target]

    def open(self, **options: Any) -> Ledger:
        if self.backend == "postgres":
            return PostgresLedger(self.target, **options)
        return SQLiteLedger(self.target, **options)


def _dicts(columns: str, rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    names = [c.strip() for c in columns.split(",")]
    return [dict(zip(names, r, strict=True)) for r in rows]


def snapshot(query: Callable[[str], list[tuple[Any, ...]]]) -> Snapshot:
    audit = query(
        "SELECT seq, at, kind, run_id, call_id, data, prev_hash, hash FROM audit "
        f"WHERE seq < {HEAD_SEQ} ORDER BY seq"
    )
    calls = {
        (c["run_id"], c["call_id"]): c
        for c in _dicts(V2_CALL_COLUMNS, query(f"SELECT {V2_CALL_COLUMNS} FROM calls"))
    }
    attempts: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for a in _dicts(
        V2_ATTEMPT_COLUMNS,
        query(f"SELECT {V2_ATTEMPT_COLUMNS} FROM attempts ORDER BY run_id, call_id, attempt"),
    ):
        attempts.setdefault((a["run_id"], a["call_id"]), []).append(a)
    keys = {
        r[0]: tuple(r)
        for r in query(
            "SELECT key, request_hash, run_id, call_id, attempt, expires_at FROM idempotency_keys"
        )
    }
    approvals = {
        a["id"]: a
        for a in _dicts(V2_APPROVAL_COLUMNS, query(f"SELECT {V2_APPROVAL_COLUMNS} FROM approvals"))
    }
    return Snapshot(audit=audit, calls=calls, attempts=attempts, keys=keys, approvals=approvals)


def _psql_understands_restrict(psql: str) -> bool:
    """psql 15.14, 16.10, 17.6 and later know ``\\restrict`` (README of tests/ledger/data)."""
    out = subprocess.run([psql, "--version"], capture_output=True, text=True, check=True).stdout
    found = re.search(r"(\d+)\.(\d+)", out)
    if found is None:
        return False
    major, minor = int(found[1]), int(found[2])
    return major >= 18 or (major, minor) >= {15: (15, 14), 16: (16, 10), 17: (17, 6)}.get(
        major, (major + 1, 0)
    )


def load_dump(cluster: Any, dsn: str, tmp_path: Path, name: str = "ledger_v2.pg.sql") -> None:
    """Load a dump of tests/ledger/data (``name``) into the empty database ``dsn`` with psql."""
    psql = shutil.which("psql") or str(Path(cluster.bindir) / "psql")
    dump = DATA / name
    if not _psql_understands_restrict(psql):
        stripped = tmp_path / name
        lines = dump.read_text(encoding="utf-8").splitlines(keepends=True)
        stripped.write_text(
            "".join(x for x in lines if not x.startswith(("\\restrict", "\\unrestrict"))),
            encoding="utf-8",
        )
        dump = stripped
    done = subprocess.run(
        [psql, "-q", "-X", "-v", "ON_ERROR_STOP=1", "-d", dsn, "-f", str(dump)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(params=["sqlite", "postgres"])
def old(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OldLedger]:
    """A fresh copy of the released callgate's ledger, not yet migrated."""
    if request.param == "sqlite":
        path = tmp_path / "ledger_v2.sqlite"
        shutil.copyfile(DATA / "ledger_v2.sqlite", path)

        def query(statement: str) -> list[tuple[Any, ...]]:
            conn = sqlite3.connect(path)
            try:
                return [tuple(r) for r in conn.execute(statement).fetchall()]
            finally:
                conn.close()

        def execute(statement: str) -> None:
            conn = sqlite3.connect(path)
            try:
                conn.execute(statement)
                conn.commit()
            finally:
                conn.close()

        manifest = json.loads((DATA / "ledger_v2.expected.json").read_text())
        yield OldLedger("sqlite", str(path), manifest, query, execute)
        return
    import psycopg

    dsn: str = request.getfixturevalue("pg_dsn")
    load_dump(request.getfixturevalue("pg_cluster"), dsn, tmp_path)

    def pg_query(statement: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            return [tuple(r) for r in conn.execute(statement).fetchall()]

    def pg_execute(statement: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(statement)

    manifest = json.loads((DATA / "ledger_v2.pg.expected.json").read_text())
    yield OldLedger("postgres", dsn, manifest, pg_query, pg_execute)


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env={"COLUMNS": "300"})
    return result.exit_code, result.stdout, result.stderr


def migrate(old: OldLedger, *extra: str) -> tuple[int, str, str]:
    return cli("ledger", "migrate", *old.where, *extra)


@pytest.fixture
def migrated(old: OldLedger) -> OldLedger:
    code, out, err = migrate(old)
    assert code == 0, out + err
    return old


@pytest.fixture
def fixture_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """Run the clock from ``moment`` on, so that keys and approvals of the fixture are
    as fresh as when it was written, whatever day the test runs."""

    def start_at(moment: float) -> None:
        real = time.time
        began = real()
        monkeypatch.setattr(time, "time", lambda: moment + (real() - began))

    return start_at


# -- before: reading never migrates -------------------------------------------------------------


def test_the_fixture_is_the_released_schema_2_ledger(old: OldLedger) -> None:
    """The copy under test is what the manifest describes (70 audit records, 24 calls)."""
    assert old.manifest["written_by"]["schema_version"] == 2
    assert len(old.before.audit) == old.manifest["audit"]["records"] == 70
    assert old.before.audit[-1][7] == old.manifest["audit"]["head"]
    assert len(old.before.calls) == len(old.manifest["calls"]) == 24


def test_reading_an_unmigrated_ledger_says_to_migrate_it(old: OldLedger) -> None:
    """ledger list on a schema-2 ledger exits 2, says to run callgate ledger migrate, and
    migrates nothing."""
    code, out, err = cli("ledger", "list", *old.where)
    assert code == 2, out + err
    assert "callgate ledger migrate" in err
    assert "schema version 2" in err
    assert old.query("SELECT max(version) FROM schema_version") == [(2,)]


def test_verify_on_an_unmigrated_ledger_says_to_migrate_it(old: OldLedger) -> None:
    """ledger verify on a schema-2 ledger exits 2 and says to run callgate ledger migrate."""
    code, out, err = cli("ledger", "verify", *old.where)
    assert code == 2, out + err
    assert "callgate ledger migrate" in err


# -- the migration ------------------------------------------------------------------------------


def test_migrate_exits_0_and_says_what_moved(old: OldLedger) -> None:
    """migrate exits 0, names the versions and counts what moved, and leaves the ledger at schema
    4."""
    code, out, err = migrate(old)
    assert code == 0, out + err
    assert "migrated from schema version 2 to 4" in out
    assert "24 call(s), 11 idempotency key(s) and 4 approval(s)" in out
    assert old.query("SELECT max(version) FROM schema_version") == [(4,)]


def test_migrate_json_reports_the_counts_and_that_it_verified(old: OldLedger) -> None:
    """migrate --json reports exactly the versions, the counts and that the result verified."""
    code, out, err = migrate(old, "--json")
    assert code == 0, out + err
    report = json.loads(out)
    assert report == {
        "from_version": 2,
        "to_version": 4,
        "calls": len(old.before.calls),
        "keys": len(old.before.keys),
        "approvals": len(old.before.approvals),
        "approved_without_decision": [],
        "verified": True,
        "problems": [],
    }


def test_migrating_again_has_nothing_to_do(migrated: OldLedger) -> None:
    """A second migrate appends nothing and says there is nothing to migrate."""
    records = migrated.query(f"SELECT count(*) FROM journal WHERE seq < {HEAD_SEQ}")
    code, out, err = migrate(migrated)
    assert code == 0, out + err
    assert "nothing to migrate" in out
    assert migrated.query(f"SELECT count(*) FROM journal WHERE seq < {HEAD_SEQ}") == records
    code, out, _ = migrate(migrated, "--json")
    assert json.loads(out)["from_version"] == 4
    assert json.loads(out)["calls"] == 0


def test_every_call_keeps_its_state_attempts_key_and_reconciled(migrated: OldLedger) -> None:
    """Every call of the old ledger keeps its state, attempts and outcomes, key and reconciled
    flag."""
    with migrated.open(read_only=True) as ledger:
        for expected in migrated.manifest["calls"]:
            call = ledger.get_call(expected["run_id"], expected["call_id"])
            assert call is not None, expected
            got = {
                "run_id": call.run_id,
                "call_id": call.call_id,
                "tool": call.tool,
                "state": call.state.value,
                "stage": call.stage,
                "attempts": call.attempts,
                "attempt_rows": len(ledger.attempts(call.run_id, call.call_id)),
                "idempotency_key": call.idempotency_key,
                "reconciled": call.reconciled,
            }
            assert got == expected
        assert len(ledger.calls()) == len(migrated.manifest["calls"])


def test_every_call_keeps_its_whole_row(migrated: OldLedger) -> None:
    """Arguments (hostile text included), principal, decision, times: carried exactly."""
    with migrated.open(read_only=True) as ledger:
        for ident, row in migrated.before.calls.items():
            call = ledger.get_call(*ident)
            assert call is not None, ident
            assert {
                **row,
                "effects": list(json.loads(row["effects"])),
                "reconciled": bool(row["reconciled"]),
            } == {
                **{name: getattr(call, name) for name in row},
                "state": call.state.value,
                "effects": list(call.effects),
            }


def test_every_attempt_keeps_its_outcome(migrated: OldLedger) -> None:
    """Count, order, and every field of each outcome (status, content, error, times)."""
    with migrated.open(read_only=True) as ledger:
        assert sum(len(a) for a in migrated.before.attempts.values()) == 16
        for ident in migrated.before.calls:
            was = migrated.before.attempts.get(ident, [])
            now = [
                {
                    "run_id": a.run_id,
                    "call_id": a.call_id,
                    "attempt": a.attempt,
                    "tool_version": a.tool_version,
                    "idempotency_key": a.idempotency_key,
                    "request_hash": a.request_hash,
                    "started_at": a.started_at,
                    "worker": a.worker,
                    "status": a.outcome.status if a.outcome else None,
                    "content": a.outcome.content if a.outcome else None,
                    "error": a.outcome.error if a.outcome else None,
                    "stage": a.outcome.stage if a.outcome else None,
                    "finished_at": a.outcome.finished_at if a.outcome else None,
                    "reconciled": bool(a.outcome.reconciled) if a.outcome else False,
                    "transaction_id": a.outcome.transaction_id if a.outcome else None,
                }
                for a in ledger.attempts(*ident)
            ]
            assert now == [{**a, "reconciled": bool(a["reconciled"])} for a in was], ident
    reconciled = {
        (a["call_id"], a["status"])
        for rows in migrated.before.attempts.values()
        for a in rows
        if a["reconciled"]
    }
    assert reconciled == {  # settled after the fact: by dana, by recovery, by erin
        ("bob-wire", "ok"),
        ("carol-post_entry", "ok"),
        ("carol-print_label", "error"),
    }


def test_every_idempotency_key_is_there_with_its_holders_outcome(migrated: OldLedger) -> None:
    """Every old idempotency key is there with its holder and its holder's outcome status."""
    after = {
        r[0]: r
        for r in migrated.query(
            "SELECT key, request_hash, run_id, call_id, attempt, expires_at, status "
            "FROM idempotency_keys"
        )
    }
    assert set(after) == set(migrated.before.keys)
    for key, row in migrated.before.keys.items():
        assert after[key][:6] == row
        holder = [
            a for a in migrated.before.attempts.get((row[2], row[3]), []) if a["attempt"] == row[4]
        ]
        assert after[key][6] == (holder[0]["status"] if holder else None), key
    reads = {"get_order", "search_notes"}  # a read-only attempt takes no key
    ran = {
        c["idempotency_key"]
        for c in migrated.manifest["calls"]
        if c["attempts"] and c["tool"] not in reads
    }
    assert ran <= set(after)


def test_every_approval_is_there_with_its_status(migrated: OldLedger) -> None:
    """Every old approval is there with its status and decision fields."""
    with migrated.open(read_only=True) as ledger:
        store = ledger.approvals()
        for expected in migrated.manifest["approvals"]:
            found = store.get(expected["id"])
            assert found is not None, expected
            got = {
                "id": found.id,
                "status": found.status.value,
                "run_id": found.run_id,
                "call_id": found.call_id,
            }
            assert got == expected
            was = migrated.before.approvals[found.id]
            for name in ("decided_by", "decided_at", "used_at", "used_by", "expires_at", "reason"):
                assert getattr(found, name) == was[name], (found.id, name)
        assert len(store.list()) == len(migrated.manifest["approvals"])


def test_the_old_audit_records_stay_in_the_chain(migrated: OldLedger) -> None:
    """Every old record, byte for byte (times carried exactly), then the migration's
    records chained to the old head: the v2 head is still a record of the chain."""
    head = migrated.manifest["audit"]["head"]
    with migrated.open(read_only=True) as ledger:
        records = list(ledger.audit())
    old_records = migrated.before.audit
    assert [
        (r.seq, r.at, r.kind, r.run_id, r.call_id, r.data_json, r.prev_hash, r.hash)
        for r in records[: len(old_records)]
    ] == [tuple(r) for r in old_records]
    assert records[len(old_records) - 1].hash == head
    marker = records[len(old_records)]
    assert (marker.kind, marker.prev_hash) == (MIGRATED, head)
    kinds: dict[str, int] = {}
    for r in records[: len(old_records)]:
        kinds[r.kind] = kinds.get(r.kind, 0) + 1
    assert kinds == migrated.manifest["audit"]["kinds"]
    moved = [r.kind for r in records[len(old_records) + 1 :]]
    assert moved == (
        ["migrated.call"] * len(migrated.before.calls)
        + ["migrated.key"] * len(migrated.before.keys)
        + ["migrated.approval"] * len(migrated.before.approvals)
        + ["journal.checkpoint"]  # schema 4: binds the schema-3 chain's head
    )
    bound = records[-1].data["heads"]
    assert bound == [["@v3", records[-2].seq, records[-2].hash]]


def test_the_migrated_ledger_verifies(migrated: OldLedger) -> None:
    """The migrated ledger verifies, with the old records and one per moved row, and its old head
    still in the chain."""
    head = migrated.manifest["audit"]["head"]
    with migrated.open(read_only=True) as ledger:
        check = ledger.verify()
    assert check.ok, check.problems
    assert check.records == 70 + 1 + 24 + 11 + 4 + 1  # and the checkpoint of schema 4
    code, out, err = cli("ledger", "verify", *migrated.where, "--expect-head", head, "--json")
    assert code == 0, out + err
    assert json.loads(out)["ok"] is True


# -- the migrated ledger at work ------------------------------------------------------------------


def test_a_replayed_key_still_replays(
    migrated: OldLedger, fixture_clock: Callable[[float], None]
) -> None:
    """alice's charge op-7 ran once under its business key: the same charge, sent by a
    new call after the migration, replays the recorded result and does not charge again."""
    fixture_clock(migrated.before.written_at + 60)
    world = v2.World()
    with migrated.open() as ledger:
        gate = Gate(v2.make_registry(world), policy=v2.POLICY, ledger=ledger)
        run = gate.run(authority=v2.ALICE, run_id="run-after-migration")
        args = {"operation_id": "op-7", "amount": 30, "currency": "USD"}
        [obs] = run.submit([ToolCall(id="charge-op-7-again", name="charge", arguments=args)])
        gate.close()
        assert obs.status is Status.OK, obs.content
        assert world.effects == []
        assert "ch_op-7" in obs.content
        call = ledger.get_call("run-after-migration", "charge-op-7-again")
        original = ledger.get_call("run-v2-alice", "alice-charge")
        assert call is not None
        assert original is not None
        assert call.idempotency_key == original.idempotency_key
        assert call.attempts == 0
        kinds = [r.kind for r in ledger.records(call_id="charge-op-7-again")]
        assert "idempotency.replay" in kinds
        assert ledger.verify().ok


def _approval_of(old: OldLedger, call_id: str) -> str:
    [found] = [a["id"] for a in old.manifest["approvals"] if a["call_id"] == call_id]
    return str(found)


def test_a_pending_approval_can_be_approved_and_then_used(
    migrated: OldLedger, fixture_clock: Callable[[float], None]
) -> None:
    """bob's refund waited for a person: approved with ``callgate approvals approve`` after
    the migration, the resumed run refunds once; a second resume refunds nothing."""
    fixture_clock(migrated.before.written_at + 60)
    approval_id = _approval_of(migrated, "bob-refund")
    code, out, err = cli("approvals", "approve", approval_id, "--by", "maria", *migrated.where)
    assert code == 0, out + err
    world = v2.World()
    with migrated.open() as ledger:
        gate = Gate(v2.make_registry(world), policy=v2.POLICY, ledger=ledger)
        run = gate.resume_run(
            "run-v2-bob", authority=v2.BOB, trusted=["pay DE89370400440532013000"]
        )
        resumed = {o.call_id: o for o in run.resume()}
        assert resumed["bob-refund"].status is Status.OK, resumed["bob-refund"].content
        assert world.effects == [("refund", "o-2001:15.5")]
        assert run.resume() == []
        again = gate.resume_run("run-v2-bob", authority=v2.BOB).resume()
        gate.close()
        assert "bob-refund" not in {o.call_id for o in again}
        assert world.effects == [("refund", "o-2001:15.5")]
        used = ledger.approvals().get(approval_id)
        assert used is not None
        assert (used.status.value, used.used_by) == ("used", "run-v2-bob/bob-refund")
        assert [r.kind for r in ledger.audit() if r.kind == "approval.forged"] == []
        assert ledger.verify().ok


def test_the_fixture_has_no_approved_but_unused_approval(old: OldLedger) -> None:
    """Nothing to test for an approved, unused approval: the fixture holds none (if it is
    regenerated with one, test that it can still be used)."""
    assert "approved" not in {a["status"] for a in old.manifest["approvals"]}


def test_an_approved_row_without_its_decision_is_migrated_as_pending(
    old: OldLedger, fixture_clock: Callable[[float], None]
) -> None:
    """A row flipped to approved in the old table, with no ``approval.approved`` record in
    the old audit trail, is moved as pending, named in the migration's report, and
    spends nothing."""
    approval_id = _approval_of(old, "bob-refund")
    old.execute(
        "UPDATE approvals SET status = 'approved', decided_by = 'mallory', "
        f"decided_at = created_at + 1 WHERE id = '{approval_id}'"
    )
    code, out, err = migrate(old)
    assert code == 0, out + err
    assert approval_id in out
    assert "pending again" in out
    code, out, _ = migrate(old, "--json")  # nothing left to do; the first report said it
    assert json.loads(out)["approved_without_decision"] == []

    fixture_clock(old.before.written_at + 60)
    world = v2.World()
    with old.open() as ledger:
        [marker] = [r for r in ledger.audit() if r.kind == MIGRATED]
        assert marker.data["approved_without_decision"] == [approval_id]
        found = ledger.approvals().get(approval_id)
        assert found is not None
        assert (found.status.value, found.decided_by, found.decision_seq) == (
            "pending",
            None,
            None,
        )
        gate = Gate(v2.make_registry(world), policy=v2.POLICY, ledger=ledger)
        run = gate.resume_run("run-v2-bob", authority=v2.BOB)
        assert run.resume() == []
        gate.close()
        assert world.effects == []
        assert ledger.verify().ok


def test_the_json_report_names_an_approved_row_without_its_decision(old: OldLedger) -> None:
    """An approval row approved with no decision in the old trail is named in the migrate report."""
    approval_id = _approval_of(old, "bob-refund")
    old.execute(f"UPDATE approvals SET status = 'approved' WHERE id = '{approval_id}'")
    code, out, err = migrate(old, "--json")
    assert code == 0, out + err
    report = json.loads(out)
    assert report["approved_without_decision"] == [approval_id]
    assert report["verified"] is True


# -- schema 3 (one chain, table journal) to schema 4 (a chain per run) -------------------------
# ledger_v3.sqlite and ledger_v3.pg.sql were written by the code of e4c926e^
# (tests/ledger/data/make_v3_ledger.py).

V3_EDIT = (
    "UPDATE journal SET data = replace(data, 'op-b', 'op-x') WHERE seq = "
    "(SELECT min(seq) FROM journal WHERE run_id = 'run-v3-b' AND kind = 'call.admitted')"
)


@dataclass
class V3Ledger:
    """A fresh copy of the schema-3 ledger in one backend, and how to reach it."""

    backend: str
    target: str
    query: Callable[[str], list[tuple[Any, ...]]]
    execute: Callable[[str], None]

    @property
    def where(self) -> list[str]:
        return ["--dsn", self.target] if self.backend == "postgres" else ["--db", self.target]


@pytest.fixture(params=["sqlite", "postgres"])
def v3(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[V3Ledger]:
    """A fresh copy of a schema-3 ledger, not yet migrated."""
    if request.param == "sqlite":
        path = tmp_path / "ledger_v3.sqlite"
        shutil.copyfile(DATA / "ledger_v3.sqlite", path)

        def query(statement: str) -> list[tuple[Any, ...]]:
            conn = sqlite3.connect(path)
            try:
                return [tuple(r) for r in conn.execute(statement).fetchall()]
            finally:
                conn.close()

        def execute(statement: str) -> None:
            conn = sqlite3.connect(path)
            try:
                conn.execute(statement)
                conn.commit()
            finally:
                conn.close()

        yield V3Ledger("sqlite", str(path), query, execute)
        return
    import psycopg

    dsn: str = request.getfixturevalue("pg_dsn")
    load_dump(request.getfixturevalue("pg_cluster"), dsn, tmp_path, "ledger_v3.pg.sql")

    def pg_query(statement: str) -> list[tuple[Any, ...]]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            return [tuple(r) for r in conn.execute(statement).fetchall()]

    def pg_execute(statement: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(statement)

    yield V3Ledger("postgres", dsn, pg_query, pg_execute)


def open_v3(v3: V3Ledger) -> Ledger:
    """Open the ledger for writing, as a process starting a gate does."""
    if v3.backend == "postgres":
        return PostgresLedger(v3.target, worker="w")
    return SQLiteLedger(v3.target, worker="w")


def test_the_v3_fixture_is_a_schema_3_ledger(v3: V3Ledger) -> None:
    """The fixture is at schema 3, with its records in the table journal."""
    assert v3.query("SELECT max(version) FROM schema_version") == [(3,)]
    assert v3.query("SELECT count(*) FROM journal")[0][0] > 20


def test_a_schema_3_ledger_migrates_with_the_cli(v3: V3Ledger) -> None:
    """``callgate ledger migrate`` brings a schema-3 ledger to 4, and it verifies."""
    code, out, err = cli("ledger", "migrate", *v3.where)
    assert code == 0, out + err
    assert "3" in out
    code, out, err = cli("ledger", "verify", *v3.where)
    assert code == 0, out + err


def test_a_migrated_schema_3_ledger_replays_its_charge(v3: V3Ledger) -> None:
    """After the migration a charge sent again under its key replays, the handler never runs."""
    from callgate import Authority, Policy, Registry, allow

    done: list[str] = []
    registry = Registry()

    @registry.tool(effects="spend:USD={amount}", idempotency_key="{op}")
    def charge(op: str, amount: int) -> dict[str, Any]:
        """Charge."""
        done.append(op)
        return {"charged": amount, "op": op}

    ledger = open_v3(v3)
    try:
        gate = Gate(registry, policy=Policy([allow("charge")]), ledger=ledger)
        run = gate.run(authority=Authority(principal="alice", grants=["spend:USD<=1000"]))
        [obs] = run.submit(
            [ToolCall(id="c", name="charge", arguments={"op": "op-a", "amount": 10})]
        )
        assert obs.status is Status.OK, obs.content
        assert done == []
        assert ledger.verify().ok
    finally:
        ledger.close()


def test_an_edited_schema_3_ledger_is_refused_by_the_cli(v3: V3Ledger) -> None:
    """A schema-3 record edited without its hash: migrate refuses and changes nothing."""
    v3.execute(V3_EDIT)
    code, out, err = cli("ledger", "migrate", *v3.where)
    assert code != 0, out + err
    assert "does not verify" in out + err
    assert v3.query("SELECT max(version) FROM schema_version") == [(3,)]


def test_an_edited_schema_3_ledger_is_refused_when_opened_for_writing(v3: V3Ledger) -> None:
    """Opening it for writing runs the same check: the migration refuses, nothing changes."""
    from callgate.errors import LedgerError

    v3.execute(V3_EDIT)
    with pytest.raises(LedgerError, match="does not verify"):
        open_v3(v3).close()
    assert v3.query("SELECT max(version) FROM schema_version") == [(3,)]
