"""The journal is the truth (issue 14): any edit of a ledger's database is reported by
``ledger verify``, and a forged approval is never spent.

Each test plays an attacker with write access to the database (a direct ``UPDATE``,
``INSERT`` or ``DELETE``, never through callgate), on SQLite and on PostgreSQL, and
checks that ``Ledger.verify()`` and ``callgate ledger verify`` report the record or
row that was touched, by name. The approval attack is played end to end: a refund
waits for a person, the attacker flips its approval row, and a new ledger object on
the same database (as another process would open it: no cached rows) resumes the run.
The handler must not run, the journal must say ``approval.forged``, and verify must
name the row. The positive control, a real decision, runs the handler exactly once.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from callgate import (
    ApprovalRequest,
    Authority,
    Gate,
    Policy,
    Registry,
    Stage,
    Status,
    ToolCall,
    allow,
    ask,
)
from callgate.cli import app
from callgate.ledger import (
    AttemptFinish,
    AttemptStart,
    CallRecord,
    CallState,
    ClaimKind,
    Ledger,
    LedgerError,
    Outcome,
    PostgresLedger,
    SQLiteLedger,
)
from callgate.ledger.sql_statements import CALL_COLUMNS, KEY_COLUMNS

runner = CliRunner()
RUN = "run-1"


# -- the database, as an attacker reaches it --------------------------------------------------


@dataclass
class Store:
    """One ledger database: callgate opens it; the attacker writes it directly."""

    backend: str
    target: str
    opened: list[Ledger] = field(default_factory=list)

    def open(self, **options: Any) -> Ledger:
        """A new ledger object on the database, as a newly started process makes one."""
        ledger: Ledger
        if self.backend == "postgres":
            ledger = PostgresLedger(self.target, **options)
        else:
            ledger = SQLiteLedger(self.target, **options)
        self.opened.append(ledger)
        return ledger

    def tamper(self, statement: str) -> None:
        """Run one statement straight on the database (no ledger involved)."""
        if self.backend == "postgres":
            import psycopg

            with psycopg.connect(self.target, autocommit=True) as conn:
                conn.execute(statement)
        else:
            import sqlite3

            lite = sqlite3.connect(self.target)
            try:
                lite.execute(statement)
                lite.commit()
            finally:
                lite.close()

    @property
    def where(self) -> list[str]:
        return ["--dsn", self.target] if self.backend == "postgres" else ["--db", self.target]


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "postgres":
        target: str = request.getfixturevalue("pg_dsn")
    else:
        target = str(tmp_path / "callgate.db")
    found = Store(request.param, target)
    yield found
    for ledger in found.opened:
        ledger.close()


def verify_cli(store: Store) -> tuple[int, str]:
    """``callgate ledger verify``: its exit code and what it printed (stdout and stderr)."""
    result = runner.invoke(app, ["ledger", "verify", *store.where], env={"COLUMNS": "300"})
    return result.exit_code, result.stdout + result.stderr


def assert_reported(store: Store, *fragments: str) -> None:
    """verify (API and CLI) fails, and one problem names every fragment."""
    with store.open(read_only=True) as ledger:
        check = ledger.verify()
    assert not check.ok
    assert any(all(f in p for f in fragments) for p in check.problems), check.problems
    code, out = verify_cli(store)
    assert code == 1, out
    assert "TAMPERED" in out
    assert any(all(f in line for f in fragments) for line in out.splitlines()), out


# -- a small ledger: c1 ok, c2 unknown, c3 rejected, one approval pending ---------------------


def decision(call_id: str, state: CallState = CallState.ADMITTED) -> CallRecord:
    now = time.time()
    return CallRecord(
        run_id=RUN,
        call_id=call_id,
        tool="charge",
        tool_version="v1",
        principal="alice",
        arguments='{"amount":5}',
        state=state,
        stage="policy",
        request_hash="h",
        idempotency_key=f"{RUN}/{call_id}",
        decided_by="allow charge",
        created_at=now,
        updated_at=now,
    )


def populate(ledger: Ledger) -> str:
    """Two side-effecting calls (ok, unknown), a rejection, a pending approval; its id."""
    now = time.time()
    for call_id, status in (("c1", "ok"), ("c2", "unknown")):
        ledger.record_decision(decision(call_id))
        start = AttemptStart(
            run_id=RUN,
            call_id=call_id,
            tool="charge",
            tool_version="v1",
            attempt=1,
            idempotency_key=f"{RUN}/{call_id}",
            request_hash="h",
            started_at=now,
            key_expires_at=now + 3600,
            side_effecting=True,
        )
        assert ledger.begin_attempt(start).kind is ClaimKind.RUN
        outcome = Outcome(status=status, content="{}", finished_at=now)
        assert ledger.finish_attempt(
            AttemptFinish(
                run_id=RUN,
                call_id=call_id,
                attempt=1,
                idempotency_key=start.idempotency_key,
                outcome=outcome,
            )
        )
    ledger.record_decision(decision("c3", CallState.REJECTED))
    request = ledger.approvals().request(
        ApprovalRequest(
            id="apr_test_pending",
            run_id=RUN,
            call_id="c4",
            principal="alice",
            tool="charge",
            arguments_json='{"amount":500}',
            arguments_hash="h500",
            effects=("spend:USD=500",),
            preview="charge 500",
            created_at=now,
            expires_at=now + 3600,
        )
    )
    return request.id


@pytest.fixture
def populated(store: Store) -> Store:
    with store.open() as ledger:
        populate(ledger)
        assert ledger.verify().ok
    return store


def seq_of(store: Store, kind: str, call_id: str | None = None) -> int:
    """The number of the first record of ``kind`` (of ``call_id``)."""
    with store.open(read_only=True) as ledger:
        found = [
            r.seq
            for r in ledger.audit()
            if r.kind == kind and (call_id is None or r.call_id == call_id)
        ]
    return found[0]


def test_an_intact_ledger_verifies(populated: Store) -> None:
    """The control for every test below: before the attacker, verify says ok."""
    with populated.open(read_only=True) as ledger:
        assert ledger.verify().ok
    code, out = verify_cli(populated)
    assert code == 0, out


# -- the journal ------------------------------------------------------------------------------


def test_an_edited_journal_record_is_reported(populated: Store) -> None:
    """An outcome record edited in place no longer matches its hash, and verify names it."""
    seq = seq_of(populated, "attempt.ok", "c1")
    populated.tamper(
        f'UPDATE journal SET data = replace(data, \'"status":"ok"\', \'"status":"error"\') '
        f"WHERE seq = {seq}"
    )
    assert_reported(populated, f"record {seq}", "does not match its hash")


def test_an_edited_record_time_is_reported(populated: Store) -> None:
    """A record whose time is moved no longer matches its hash, and verify names it."""
    seq = seq_of(populated, "call.rejected", "c3")
    populated.tamper(f"UPDATE journal SET at = at + 1 WHERE seq = {seq}")
    assert_reported(populated, f"record {seq}", "does not match its hash")


def next_in_run(store: Store, seq: int) -> int:
    """The number of the record after ``seq`` in its run's chain."""
    with store.open(read_only=True) as ledger:
        records = list(ledger.audit())
    run = next(r.run_id for r in records if r.seq == seq)
    return next(r.seq for r in records if r.run_id == run and r.seq > seq)


def test_a_deleted_record_in_the_middle_is_reported(populated: Store) -> None:
    """A record deleted from the middle of its run's chain: the next record of the run no
    longer links to the one before it, and verify names it."""
    seq = seq_of(populated, "attempt.started", "c2")
    after = next_in_run(populated, seq)
    populated.tamper(f"DELETE FROM journal WHERE seq = {seq}")
    assert_reported(populated, f"record {after}", "does not link to the record before it")


def test_a_deleted_tail_with_the_head_row_is_reported(populated: Store) -> None:
    """Deleting a run's last records together with its chain's head row is reported: the
    checkpoint that bound the run's head names the missing record."""
    last = seq_of(populated, "approval.requested")
    head = max(r.seq for r in audit_of(populated) if r.run_id == RUN)
    populated.tamper(f"DELETE FROM journal WHERE seq >= {last} AND run_id = '{RUN}'")
    populated.tamper(f"DELETE FROM chains WHERE chain = 'r:{RUN}'")
    assert_reported(populated, f"binds record {head}", "which is missing")


def test_a_deleted_tail_without_the_head_row_is_reported(populated: Store) -> None:
    """Deleting a run's last records but keeping its head row is reported: the run's chain
    no longer ends at its head."""
    last = seq_of(populated, "approval.requested")
    before = max(r.seq for r in audit_of(populated) if r.run_id == RUN and r.seq < last)
    populated.tamper(f"DELETE FROM journal WHERE seq >= {last} AND run_id = '{RUN}'")
    assert_reported(populated, f"ends at record {before}", "head row says")


def test_a_whole_run_deleted_is_reported(populated: Store) -> None:
    """Deleting every record and row of a run (its chain's head row too) is reported by the
    checkpoint that bound it."""
    head = max(r.seq for r in audit_of(populated) if r.run_id == RUN)
    for table in ("journal", "calls", "idempotency_keys", "approvals", "journal_orphans"):
        populated.tamper(f"DELETE FROM {table} WHERE run_id = '{RUN}'")
    populated.tamper(f"DELETE FROM chains WHERE chain = 'r:{RUN}'")
    assert_reported(populated, f"binds record {head}", "which is missing")


def audit_of(store: Store) -> list[Any]:
    """Every record of the journal, as a new reader sees it."""
    with store.open(read_only=True) as ledger:
        return list(ledger.audit())


# -- call rows --------------------------------------------------------------------------------


def test_an_edited_call_row_is_reported(populated: Store) -> None:
    """unknown → ok: the call would look settled (and its key released to no one)."""
    populated.tamper(f"UPDATE calls SET state = 'ok' WHERE run_id = '{RUN}' AND call_id = 'c2'")
    assert_reported(populated, f"call {RUN}/c2", "state", "(edited)")


def test_an_inserted_call_row_is_reported(populated: Store) -> None:
    """A call row that no journal record made is reported as not in the journal."""
    columns = CALL_COLUMNS.replace("call_id", "'c9'", 1)
    populated.tamper(
        f"INSERT INTO calls ({CALL_COLUMNS}) SELECT {columns} FROM calls WHERE call_id = 'c1'"
    )
    assert_reported(populated, f"call {RUN}/c9", "not in the journal")


def test_a_deleted_call_row_is_reported(populated: Store) -> None:
    """A call row deleted from the table is reported as missing."""
    populated.tamper("DELETE FROM calls WHERE call_id = 'c1'")
    assert_reported(populated, f"call {RUN}/c1", "row is missing")


# -- idempotency key rows ---------------------------------------------------------------------


def test_an_edited_key_row_is_reported(populated: Store) -> None:
    """unknown → error frees the key for a second execution: reported by name."""
    populated.tamper(f"UPDATE idempotency_keys SET status = 'error' WHERE key = '{RUN}/c2'")
    assert_reported(populated, f"idempotency key '{RUN}/c2'", "status", "(edited)")


def test_an_inserted_key_row_is_reported(populated: Store) -> None:
    """An idempotency key row that no journal record made is reported as not in the journal."""
    columns = KEY_COLUMNS.replace("key", "'held-by-no-one'", 1)
    populated.tamper(
        f"INSERT INTO idempotency_keys ({KEY_COLUMNS}) SELECT {columns} "
        f"FROM idempotency_keys WHERE key = '{RUN}/c1'"
    )
    assert_reported(populated, "idempotency key 'held-by-no-one'", "not in the journal")


def test_a_deleted_key_row_is_reported(populated: Store) -> None:
    """An idempotency key row deleted from the table is reported as missing."""
    populated.tamper(f"DELETE FROM idempotency_keys WHERE key = '{RUN}/c2'")
    assert_reported(populated, f"idempotency key '{RUN}/c2'", "row is missing")


KEY_FREEING = {
    "unknown set to error": (
        f"UPDATE idempotency_keys SET status = 'error' WHERE key = '{RUN}/c2'",
        "c2",
    ),
    "ok set to expired": (
        f"UPDATE idempotency_keys SET expires_at = 0 WHERE key = '{RUN}/c1'",
        "c1",
    ),
    "unknown deleted": (f"DELETE FROM idempotency_keys WHERE key = '{RUN}/c2'", "c2"),
    "ok deleted": (f"DELETE FROM idempotency_keys WHERE key = '{RUN}/c1'", "c1"),
}


@pytest.mark.parametrize("how", sorted(KEY_FREEING))
def test_a_key_row_edited_to_free_the_key_does_not_run_the_effect_again(
    populated: Store, how: str
) -> None:
    """A key whose row says the effect may run again is checked against its holder's
    records: a new call with that key, in a new ledger object, does not run."""
    statement, holder = KEY_FREEING[how]
    populated.tamper(statement)
    ledger = populated.open()
    again = decision("c5")
    again.idempotency_key = f"{RUN}/{holder}"
    ledger.record_decision(again)
    now = time.time()
    claim = ledger.begin_attempt(
        AttemptStart(
            run_id=RUN,
            call_id="c5",
            tool="charge",
            tool_version="v1",
            attempt=1,
            idempotency_key=f"{RUN}/{holder}",
            request_hash="h",
            started_at=now,
            key_expires_at=now + 3600,
            side_effecting=True,
        )
    )
    assert claim.kind is not ClaimKind.RUN
    assert claim.holder == (RUN, holder)
    forged_keys = [
        r.data.get("idempotency_key") for r in ledger.audit() if r.kind == "idempotency.forged"
    ]
    assert forged_keys == [f"{RUN}/{holder}"]
    assert_reported(populated, f"idempotency key '{RUN}/{holder}'")


# -- approval rows ----------------------------------------------------------------------------


def test_an_approval_flipped_to_approved_is_reported(populated: Store) -> None:
    """A pending approval flipped to approved by UPDATE is reported with the field that differs."""
    populated.tamper("UPDATE approvals SET status = 'approved' WHERE id = 'apr_test_pending'")
    assert_reported(populated, "approval apr_test_pending", "status", "(edited)")


def test_a_deleted_approval_row_is_reported(populated: Store) -> None:
    """An approval row deleted from the table is reported as missing."""
    populated.tamper("DELETE FROM approvals WHERE id = 'apr_test_pending'")
    assert_reported(populated, "approval apr_test_pending", "row is missing")


@pytest.mark.parametrize(
    "kind",
    [
        "approval.approved",
        "approval.used",
        "call.admitted",
        "attempt.ok",
        "idempotency.replay",
        "migrated.approval",
        "ledger.migrated",
    ],
)
def test_record_event_refuses_a_kind_that_changes_state(store: Store, kind: str) -> None:
    """Only the ledger writes records that rows are derived from: an event of such a
    kind would approve, settle or replay without a decision."""
    ledger = store.open()
    populate(ledger)
    before = len(ledger.audit())
    with pytest.raises(LedgerError, match="change the ledger's state"):
        ledger.record_event(
            kind,
            run_id=RUN,
            call_id="c4",
            data={"approval_id": "apr_test_pending", "actor": "mallory"},
        )
    assert len(ledger.audit()) == before
    found = ledger.approvals().get("apr_test_pending")
    assert found is not None
    assert found.status.value == "pending"
    ledger.record_event("note.approval", run_id=RUN, call_id="c4", data={"actor": "mallory"})
    assert ledger.verify().ok


# -- the attack, end to end -------------------------------------------------------------------

ALICE = Authority(principal="alice", grants=["spend:USD<=1000", "read:orders"])
POLICY = Policy([allow("get_order"), ask("refund", name="refunds need a person")])


@dataclass
class Refunds:
    """The refund service: every executed refund, counted on the back end."""

    done: list[tuple[str, float]] = field(default_factory=list)

    def registry(self) -> Registry:
        registry = Registry()

        @registry.tool(effects="read:orders", risk="read")
        def get_order(order_id: str) -> dict[str, Any]:
            """Read an order."""
            return {"order_id": order_id, "total": 250}

        @registry.tool(effects="spend:{currency}={amount}")
        def refund(order_id: str, amount: float, currency: str) -> dict[str, Any]:
            """Refund part of an order."""
            self.done.append((order_id, amount))
            return {"refunded": amount}

        return registry

    def gate(self, ledger: Ledger) -> Gate:
        return Gate(self.registry(), policy=POLICY, ledger=ledger)


def refund(call_id: str, amount: float) -> ToolCall:
    return ToolCall(
        id=call_id, name="refund", arguments={"order_id": "o1", "amount": amount, "currency": "USD"}
    )


def ask_for_refunds(store: Store, refunds: Refunds, *amounts: float) -> tuple[str, list[str]]:
    """Process A: propose refunds that wait for a person; (run id, their approval ids)."""
    ledger = store.open()
    gate = refunds.gate(ledger)
    run = gate.run(authority=ALICE)
    found = []
    for n, amount in enumerate(amounts):
        [obs] = run.submit([refund(f"refund-{n}", amount)])
        assert (obs.status, obs.stage) == (Status.PENDING, Stage.APPROVE), obs.content
        assert obs.approval_id is not None
        found.append(obs.approval_id)
    gate.close()
    ledger.close()
    return run.id, found


def resume_elsewhere(store: Store, refunds: Refunds, run_id: str, how: str) -> Ledger:
    """Process B: a new ledger object on the database resumes the run, or the model sends
    the same refunds again under new ids; the ledger it used."""
    ledger = store.open()
    gate = refunds.gate(ledger)
    run = gate.resume_run(run_id, authority=ALICE)
    if how == "resume":
        for obs in run.resume():
            assert obs.status is not Status.OK, obs
    else:
        calls = [c for c in ledger.calls(run_id=run_id) if c.tool == "refund"]
        for call in calls:
            amount = float(call.arguments.split('"amount":')[1].split(",")[0])
            [obs] = run.submit([refund(f"{call.call_id}-again", amount)])
            assert obs.status is not Status.OK, obs
    gate.close()
    return ledger


def forged(ledger: Ledger, approval_id: str) -> list[str]:
    """The problems of the ``approval.forged`` records of ``approval_id``."""
    return [
        str(r.data["problem"])
        for r in ledger.audit()
        if r.kind == "approval.forged" and r.data.get("approval_id") == approval_id
    ]


RESUMES = ["resume", "resubmit"]


def assert_the_forgery_is_caught(
    store: Store, refunds: Refunds, ledger: Ledger, approval_id: str, *named: str
) -> None:
    """Nothing ran; the journal says ``approval.forged`` for that approval (its problem
    naming each of ``named``); verify (API and CLI) names the approval."""
    assert refunds.done == []
    problems = forged(ledger, approval_id)
    assert problems, [r.kind for r in ledger.audit()]
    for word in named:
        assert all(word in p for p in problems), problems
    assert_reported(store, f"approval {approval_id}")


@pytest.mark.parametrize("how", RESUMES)
def test_an_approval_flipped_by_update_is_never_spent(store: Store, how: str) -> None:
    """The issue's attack: UPDATE approvals SET status = 'approved', then resume."""
    refunds = Refunds()
    run_id, [approval_id] = ask_for_refunds(store, refunds, 20)
    store.tamper(f"UPDATE approvals SET status = 'approved' WHERE id = '{approval_id}'")
    assert_reported(store, f"approval {approval_id}", "status", "(edited)")

    ledger = resume_elsewhere(store, refunds, run_id, how)

    assert_the_forgery_is_caught(store, refunds, ledger, approval_id)


@pytest.mark.parametrize("how", RESUMES)
def test_an_approval_flipped_with_a_decider_and_time_is_never_spent(store: Store, how: str) -> None:
    """An approval flipped to approved with a decider and time set by UPDATE never runs the
    refund, and is reported."""
    refunds = Refunds()
    run_id, [approval_id] = ask_for_refunds(store, refunds, 20)
    store.tamper(
        "UPDATE approvals SET status = 'approved', decided_by = 'maria', "
        f"decided_at = created_at + 5 WHERE id = '{approval_id}'"
    )
    assert_reported(store, f"approval {approval_id}", "decided_by", "(edited)")

    ledger = resume_elsewhere(store, refunds, run_id, how)

    assert_the_forgery_is_caught(store, refunds, ledger, approval_id)


@pytest.mark.parametrize("how", RESUMES)
def test_an_approval_pointing_at_another_approvals_decision_is_never_spent(
    store: Store, how: str
) -> None:
    """decision_seq set to a real ``approval.approved`` record, of another request."""
    refunds = Refunds()
    run_id, [approval_id] = ask_for_refunds(store, refunds, 20)
    _, [other] = ask_for_refunds(store, refunds, 30)
    with store.open() as ledger:
        decided = ledger.approvals().approve(other, by="maria")
    assert decided.decision_seq is not None
    store.tamper(
        "UPDATE approvals SET status = 'approved', decided_by = 'maria', "
        f"decided_at = created_at + 5, decision_seq = {decided.decision_seq} "
        f"WHERE id = '{approval_id}'"
    )
    assert_reported(store, f"approval {approval_id}", "decision_seq", "(edited)")

    ledger = resume_elsewhere(store, refunds, run_id, how)

    assert_the_forgery_is_caught(store, refunds, ledger, approval_id, "decision")


@pytest.mark.parametrize("how", RESUMES)
def test_an_approval_redirected_to_another_call_is_never_spent(store: Store, how: str) -> None:
    """A real approval of 20 USD, its arguments hash changed to that of the 200 USD refund
    waiting in the same run: neither refund runs.

    A resume submits again only calls whose own request is no longer pending, so for
    ``resume`` the attacker flips the 200 USD request too; the oldest bound approval,
    the redirected one, is tried first.
    """
    refunds = Refunds()
    run_id, [twenty, two_hundred] = ask_for_refunds(store, refunds, 20, 200)
    with store.open() as ledger:
        ledger.approvals().approve(twenty, by="maria")
        big = ledger.approvals().get(two_hundred)
    assert big is not None
    store.tamper(
        f"UPDATE approvals SET arguments_hash = '{big.arguments_hash}' WHERE id = '{twenty}'"
    )
    if how == "resume":
        store.tamper(f"UPDATE approvals SET status = 'approved' WHERE id = '{two_hundred}'")
    assert_reported(store, f"approval {twenty}", "arguments_hash", "(edited)")

    ledger = resume_elsewhere(store, refunds, run_id, how)

    assert_the_forgery_is_caught(store, refunds, ledger, twenty, "arguments")
    if how == "resume":
        assert forged(ledger, two_hundred)
        assert_reported(store, f"approval {two_hundred}")


def test_after_a_forgery_a_person_can_still_decide_and_the_refund_runs_once(
    store: Store,
) -> None:
    """The forged row does not block the real request: approved with ``callgate approvals
    approve``, the next resume refunds exactly once."""
    refunds = Refunds()
    run_id, [approval_id] = ask_for_refunds(store, refunds, 20)
    store.tamper(f"UPDATE approvals SET status = 'approved' WHERE id = '{approval_id}'")
    resume_elsewhere(store, refunds, run_id, "resume").close()
    assert refunds.done == []

    result = runner.invoke(
        app, ["approvals", "approve", approval_id, "--by", "maria", *store.where]
    )
    assert result.exit_code == 0, result.output
    ledger = store.open()
    gate = refunds.gate(ledger)
    [obs] = gate.resume_run(run_id, authority=ALICE).resume()
    gate.close()

    assert obs.status is Status.OK, obs.content
    assert refunds.done == [("o1", 20.0)]
    used = ledger.approvals().get(approval_id)
    assert used is not None
    assert used.status.value == "used"


@pytest.mark.parametrize("decide", ["cli", "api"])
def test_a_real_approval_runs_the_refund_exactly_once(store: Store, decide: str) -> None:
    """The positive control: the same resume, after a person's decision, refunds once."""
    refunds = Refunds()
    run_id, [approval_id] = ask_for_refunds(store, refunds, 20)
    if decide == "cli":
        result = runner.invoke(
            app, ["approvals", "approve", approval_id, "--by", "maria", *store.where]
        )
        assert result.exit_code == 0, result.output
    else:
        with store.open() as ledger:
            ledger.approvals().approve(approval_id, by="maria")

    ledger = store.open()
    gate = refunds.gate(ledger)
    [obs] = gate.resume_run(run_id, authority=ALICE).resume()
    again = gate.resume_run(run_id, authority=ALICE).resume()
    gate.close()

    assert obs.status is Status.OK, obs.content
    assert again == []
    assert refunds.done == [("o1", 20.0)]
    assert forged(ledger, approval_id) == []
    kinds = [r.kind for r in ledger.audit() if r.kind.startswith("approval.")]
    assert kinds == ["approval.requested", "approval.approved", "approval.used"]
    code, out = verify_cli(store)
    assert code == 0, out


def test_a_forged_use_leaves_the_ledger_recording(store: Store) -> None:
    """After a forgery is refused, the ledger still works for everything else."""
    refunds = Refunds()
    run_id, [approval_id] = ask_for_refunds(store, refunds, 20)
    store.tamper(f"UPDATE approvals SET status = 'approved' WHERE id = '{approval_id}'")
    resume_elsewhere(store, refunds, run_id, "resume").close()

    ledger = store.open()
    gate = refunds.gate(ledger)
    run = gate.resume_run(run_id, authority=ALICE)
    [read] = run.submit([ToolCall(id="read-1", name="get_order", arguments={"order_id": "o1"})])
    gate.close()
    assert read.status is Status.OK
    assert refunds.done == []
    call = ledger.get_call(run_id, "refund-0")
    assert call is not None
    assert call.state is CallState.PENDING
