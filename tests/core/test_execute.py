"""Stage ``execute``: outcomes, idempotency, timeouts, reconciliation, retries, messages.

Runs the orders domain (optimistic concurrency on ``expected_revision``,
idempotency key ``{operation_id}``) and small purpose-built tools.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import anyio
import pytest

from callgate import (
    CallContext,
    Gate,
    Observation,
    OutcomeUnknown,
    Provenance,
    Registry,
    Run,
    Stage,
    Status,
    ToolCall,
    ToolFailure,
    tool,
)
from callgate.ledger import CallState

from .domains import (
    ALLOW_ALL,
    CANCEL_CONTRACT,
    OrderDatabase,
    get_order_status_tool,
    orders_registry,
)


def one(run: Run, name: str, arguments: Any, call_id: str = "c1") -> Observation:
    """Submit one call and return its observation."""
    [obs] = run.submit([ToolCall(id=call_id, name=name, arguments=arguments)])
    return obs


def read_status(run: Run, order_id: str = "A-100", call_id: str = "read") -> Observation:
    """Record the evidence cancel_order's precondition asks for."""
    obs = one(run, "get_order_status", {"order_id": order_id}, call_id)
    assert obs.status is Status.OK, obs.content
    return obs


def cancel(revision: int = 3, operation_id: str = "op-1", order_id: str = "A-100") -> dict:
    """Arguments of a cancel_order call."""
    return {"order_id": order_id, "expected_revision": revision, "operation_id": operation_id}


def single_tool_run(spec: Any, **gate_options: Any) -> Run:
    """A run on a gate holding just ``spec``, every effect granted."""
    return Gate(Registry([spec]), **gate_options).run(authority=ALLOW_ALL)


# -- ok / error: optimistic concurrency ------------------------------------------------


def test_read_returns_status_and_revision() -> None:
    """get_order_status answers with the order's status and revision, as untrusted data."""
    db = OrderDatabase()
    run = Gate(orders_registry(db)).run(authority=ALLOW_ALL)
    obs = read_status(run)
    assert obs.result == {"order_id": "A-100", "status": "placed", "revision": 3}
    assert '"revision":3' in obs.content.replace(" ", "")
    assert obs.provenance is Provenance.UNTRUSTED
    assert obs.retryable is True


def test_cancel_at_the_current_revision_commits() -> None:
    """The happy path: read, then cancel at the revision read."""
    db = OrderDatabase()
    run = Gate(orders_registry(db)).run(authority=ALLOW_ALL)
    read_status(run)
    obs = one(run, "cancel_order", cancel(3))
    assert obs.status is Status.OK
    assert obs.retryable is False
    assert db.rows["A-100"].status == "cancelled"
    assert db.rows["A-100"].revision == 4
    assert db.commits == [("A-100", "op-1")]


def test_stale_revision_is_an_error_that_changes_nothing() -> None:
    """Cancelling at an old revision: ``error``, retryable, the order untouched."""
    db = OrderDatabase()
    run = Gate(orders_registry(db)).run(authority=ALLOW_ALL)
    read_status(run)
    obs = one(run, "cancel_order", cancel(revision=2))
    assert obs.status is Status.ERROR
    assert obs.stage is Stage.EXECUTE
    assert obs.retryable is True
    assert "revision 3" in obs.content
    assert db.rows["A-100"].status == "placed"
    assert db.rows["A-100"].revision == 3
    assert db.commits == []


def test_revision_changed_by_someone_else_between_read_and_write_is_an_error() -> None:
    """A concurrent writer bumps the revision after our read: the cancel fails cleanly."""
    db = OrderDatabase()
    run = Gate(orders_registry(db)).run(authority=ALLOW_ALL)
    read_status(run)
    db.rows["A-100"].revision = 4  # another process wrote in between
    obs = one(run, "cancel_order", cancel(revision=3))
    assert obs.status is Status.ERROR
    assert db.rows["A-100"].status == "placed"


# -- idempotency keys -------------------------------------------------------------------


def test_idempotency_key_reused_with_different_arguments_is_rejected() -> None:
    """Same ``operation_id``, different order: rejected at ``execute``; the handler never runs."""
    db = OrderDatabase()
    run = Gate(orders_registry(db)).run(authority=ALLOW_ALL)
    read_status(run, "A-100")
    read_status(run, "B-200", call_id="read-b")
    first = one(run, "cancel_order", cancel(3, "op-1", "A-100"), call_id="c1")
    reused = one(run, "cancel_order", cancel(1, "op-1", "B-200"), call_id="c2")
    assert first.status is Status.OK
    assert reused.status is Status.REJECTED
    assert reused.stage is Stage.EXECUTE
    assert "idempotency key" in reused.content
    assert db.calls["cancel_order"] == 1
    assert db.rows["B-200"].status == "placed"


def test_same_idempotency_key_and_arguments_returns_the_recorded_outcome() -> None:
    """A repeat of a finished operation replays its outcome; the handler ran once."""
    db = OrderDatabase()
    run = Gate(orders_registry(db)).run(authority=ALLOW_ALL)
    read_status(run)
    first = one(run, "cancel_order", cancel(3), call_id="c1")
    again = one(run, "cancel_order", cancel(3), call_id="c2")
    assert first.status is Status.OK
    assert again.status is Status.OK
    assert again.call_id == "c2"
    assert '"status":"cancelled"' in again.content.replace(" ", "")
    assert "already ran" in again.content
    assert db.calls["cancel_order"] == 1
    assert db.commits == [("A-100", "op-1")]
    assert db.rows["A-100"].revision == 4


def test_idempotency_key_holds_across_runs_of_one_principal() -> None:
    """The key is a business key: a second run repeating the operation does not repeat it."""
    db = OrderDatabase()
    gate = Gate(orders_registry(db))
    for run_no in range(2):
        run = gate.run(authority=ALLOW_ALL)
        read_status(run)
        obs = one(run, "cancel_order", cancel(3), call_id=f"c{run_no}")
        assert obs.status is Status.OK
    assert db.calls["cancel_order"] == 1


def test_new_operation_id_is_a_new_operation() -> None:
    """A different ``operation_id`` is not a replay: the handler runs again."""
    db = OrderDatabase()
    run = Gate(orders_registry(db)).run(authority=ALLOW_ALL)
    read_status(run)
    one(run, "cancel_order", cancel(3, "op-1"), call_id="c1")
    second = one(run, "cancel_order", cancel(3, "op-2"), call_id="c2")
    assert db.calls["cancel_order"] == 2
    assert second.status is Status.ERROR  # the revision moved on to 4


# -- unknown outcomes: commit, then time out ----------------------------------------------


def slow_cancel_registry(
    db: OrderDatabase, *, commit_first: bool, reconcile: Any = None
) -> Registry:
    """get_order_status plus an async cancel_order that sleeps past its 0.05 s timeout.

    With ``commit_first`` the handler writes to the database, then hangs (the
    reply is lost); otherwise it hangs before writing (nothing is committed).
    """

    @tool(**CANCEL_CONTRACT, timeout=0.05, reconcile=reconcile)
    async def cancel_order(order_id: str, expected_revision: int, operation_id: str) -> dict:
        """Cancel an order (slowly)."""
        db.calls["cancel_order"] += 1
        if commit_first:
            db.cancel(order_id, expected_revision, operation_id)
        await anyio.sleep(5)
        return db.cancel(order_id, expected_revision, operation_id)

    return Registry([get_order_status_tool(db), cancel_order])


def reconcile_from(db: OrderDatabase, counter: Counter[str]) -> Any:
    """A reconcile hook that reads the authoritative row."""

    def reconcile(args: Any, ctx: CallContext) -> dict:
        counter["reconcile"] += 1
        row = db.rows[args.order_id]
        if row.cancelled_by == args.operation_id:
            return {"order_id": args.order_id, "status": row.status, "revision": row.revision}
        raise ToolFailure(f"order {args.order_id} was not cancelled; it is {row.status}")

    return reconcile


def test_handler_that_commits_then_times_out_is_unknown_and_the_commit_happened() -> None:
    """Timeout after the write: ``unknown``, not retryable, and the database shows the commit."""
    db = OrderDatabase()
    run = Gate(slow_cancel_registry(db, commit_first=True)).run(authority=ALLOW_ALL)
    read_status(run)
    obs = one(run, "cancel_order", cancel(3))
    assert obs.status is Status.UNKNOWN
    assert obs.stage is Stage.EXECUTE
    assert obs.retryable is False
    assert "0.05" in obs.content
    assert db.rows["A-100"].status == "cancelled"
    assert db.commits == [("A-100", "op-1")]
    assert db.calls["cancel_order"] == 1


def test_unknown_write_is_never_retried_automatically() -> None:
    """Even with read retries configured, a side-effecting unknown runs once."""
    db = OrderDatabase()
    gate = Gate(slow_cancel_registry(db, commit_first=True), read_retries=5)
    run = gate.run(authority=ALLOW_ALL)
    read_status(run)
    obs = one(run, "cancel_order", cancel(3))
    assert obs.status is Status.UNKNOWN
    assert obs.attempts == 1
    assert db.calls["cancel_order"] == 1
    assert len(gate.ledger.attempts(run.id, "c1")) == 1


def test_repeating_an_unknown_write_with_the_same_key_does_not_run_it_again() -> None:
    """The key of an unknown attempt is held: the repeat replays ``unknown``, no second run."""
    db = OrderDatabase()
    run = Gate(slow_cancel_registry(db, commit_first=True)).run(authority=ALLOW_ALL)
    read_status(run)
    one(run, "cancel_order", cancel(3), call_id="c1")
    again = one(run, "cancel_order", cancel(3), call_id="c2")
    assert again.status is Status.UNKNOWN
    assert again.retryable is False
    assert db.calls["cancel_order"] == 1


def test_reconcile_turns_a_committed_unknown_into_ok_without_a_second_execution() -> None:
    """With a reconcile hook that finds the commit, the outcome is ``ok`` (reconciled)."""
    db = OrderDatabase()
    hooks: Counter[str] = Counter()
    registry = slow_cancel_registry(db, commit_first=True, reconcile=reconcile_from(db, hooks))
    gate = Gate(registry)
    run = gate.run(authority=ALLOW_ALL)
    read_status(run)
    obs = one(run, "cancel_order", cancel(3))
    assert obs.status is Status.OK, obs.content
    assert obs.result == {"order_id": "A-100", "status": "cancelled", "revision": 4}
    assert hooks["reconcile"] == 1
    assert db.calls["cancel_order"] == 1
    assert db.commits == [("A-100", "op-1")]
    record = gate.ledger.get_call(run.id, "c1")
    assert record is not None
    assert record.reconciled is True
    assert record.state is CallState.OK


def test_reconcile_raising_tool_failure_makes_the_outcome_error() -> None:
    """The hook finds no commit and says so: ``error``, nothing happened, nothing re-run."""
    db = OrderDatabase()
    hooks: Counter[str] = Counter()
    registry = slow_cancel_registry(db, commit_first=False, reconcile=reconcile_from(db, hooks))
    run = Gate(registry).run(authority=ALLOW_ALL)
    read_status(run)
    obs = one(run, "cancel_order", cancel(3))
    assert obs.status is Status.ERROR
    assert "was not cancelled" in obs.content
    assert hooks["reconcile"] == 1
    assert db.calls["cancel_order"] == 1
    assert db.rows["A-100"].status == "placed"


def test_reconcile_that_cannot_tell_keeps_the_outcome_unknown() -> None:
    """A hook that raises `OutcomeUnknown` leaves the call ``unknown``."""
    db = OrderDatabase()

    def undecided(args: Any, ctx: CallContext) -> dict:
        raise OutcomeUnknown("the order service is down")

    run = Gate(slow_cancel_registry(db, commit_first=True, reconcile=undecided)).run(
        authority=ALLOW_ALL
    )
    read_status(run)
    obs = one(run, "cancel_order", cancel(3))
    assert obs.status is Status.UNKNOWN
    assert obs.retryable is False


def test_commit_then_timeout_under_asubmit_is_unknown_too() -> None:
    """The async path classifies the same way as the sync one."""
    db = OrderDatabase()
    run = Gate(slow_cancel_registry(db, commit_first=True)).run(authority=ALLOW_ALL)
    read_status(run)

    async def main() -> list[Observation]:
        return await run.asubmit([ToolCall(id="c1", name="cancel_order", arguments=cancel(3))])

    [obs] = anyio.run(main)
    assert obs.status is Status.UNKNOWN
    assert db.commits == [("A-100", "op-1")]


def test_outcome_unknown_raised_by_a_handler_is_unknown_with_its_message() -> None:
    """`OutcomeUnknown` says the effect may have happened; its (redacted) message is shown."""

    @tool(effects="write:mail")
    def send_mail(to: str) -> str:
        """Send mail."""
        raise OutcomeUnknown("the SMTP connection dropped after DATA")

    obs = one(single_tool_run(send_mail), "send_mail", {"to": "a@example.com"})
    assert obs.status is Status.UNKNOWN
    assert obs.retryable is False
    assert "SMTP connection dropped" in obs.content


# -- retries ---------------------------------------------------------------------------------


def flaky(failures: int, *, effects: str, counter: Counter[str]) -> Any:
    """A tool that raises an unexpected exception on its first ``failures`` calls."""

    @tool(name="flaky", effects=effects)
    def flaky_tool(key: str) -> str:
        """Look something up over a flaky connection."""
        counter["calls"] += 1
        if counter["calls"] <= failures:
            raise ConnectionResetError("peer reset")
        return f"value of {key}"

    return flaky_tool


@pytest.mark.parametrize(
    ("read_retries", "failures", "status", "calls"),
    [
        (2, 0, Status.OK, 1),
        (2, 1, Status.OK, 2),
        (2, 2, Status.OK, 3),
        (2, 3, Status.UNKNOWN, 3),
        (0, 1, Status.UNKNOWN, 1),
        (4, 4, Status.OK, 5),
    ],
)
def test_read_only_tool_is_retried_up_to_read_retries(
    read_retries: int, failures: int, status: Status, calls: int
) -> None:
    """A read that fails unexpectedly is attempted again, at most ``read_retries`` more times."""
    counter: Counter[str] = Counter()
    spec = flaky(failures, effects="read:stock", counter=counter)
    run = single_tool_run(spec, read_retries=read_retries)
    obs = one(run, "flaky", {"key": "k"})
    assert obs.status is status
    assert counter["calls"] == calls
    assert obs.attempts == calls
    assert len(run.gate.ledger.attempts(run.id, "c1")) == calls
    assert obs.retryable is True


@pytest.mark.parametrize("effects", ["write:stock", "spend:USD", "network:example.com"])
def test_side_effecting_tool_is_never_retried(effects: str) -> None:
    """The same failure on a tool with side effects: one attempt, ``unknown``, not retryable."""
    counter: Counter[str] = Counter()
    run = single_tool_run(flaky(1, effects=effects, counter=counter), read_retries=5)
    obs = one(run, "flaky", {"key": "k"})
    assert obs.status is Status.UNKNOWN
    assert counter["calls"] == 1
    assert obs.retryable is False


def test_tool_failure_on_a_read_is_not_retried() -> None:
    """A known failure is an answer, not a transient: no retry even for reads."""
    calls: Counter[str] = Counter()

    @tool(effects="read:stock")
    def stock(sku: str) -> int:
        """Stock level."""
        calls["stock"] += 1
        raise ToolFailure(f"unknown sku {sku}")

    obs = one(single_tool_run(stock, read_retries=3), "stock", {"sku": "x"})
    assert obs.status is Status.ERROR
    assert calls["stock"] == 1


# -- what reaches the model ----------------------------------------------------------------------

CANARY = "CANARY-7f3a9c-internal-db-host-10.0.0.5"


def test_unexpected_exception_text_never_reaches_the_model() -> None:
    """``str()`` of an arbitrary exception stays out of the observation; its type is named."""

    @tool(effects="write:x")
    def explode(n: int) -> None:
        """Explode."""
        raise RuntimeError(CANARY)

    obs = one(single_tool_run(explode), "explode", {"n": 1})
    assert obs.status is Status.UNKNOWN
    assert CANARY not in obs.content
    assert "RuntimeError" in obs.content
    assert "Traceback" not in obs.content
    assert 'File "' not in obs.content
    assert all(CANARY not in str(d) for d in obs.details)


def test_unexpected_exception_text_never_reaches_the_model_from_a_read() -> None:
    """The same holds for a read-only tool after its retries run out."""

    @tool(effects="read:x")
    def explode_read(n: int) -> None:
        """Explode."""
        raise KeyError(CANARY)

    obs = one(single_tool_run(explode_read), "explode_read", {"n": 1})
    assert obs.status is Status.UNKNOWN
    assert CANARY not in obs.content


def test_tool_failure_message_reaches_the_model() -> None:
    """A `ToolFailure` message is written for the model and is shown verbatim."""

    @tool(effects="write:x")
    def refuse(n: int) -> None:
        """Refuse."""
        raise ToolFailure(f"item {n} is out of stock; {CANARY}")

    obs = one(single_tool_run(refuse), "refuse", {"n": 7})
    assert obs.status is Status.ERROR
    assert "item 7 is out of stock" in obs.content
    assert CANARY in obs.content


SECRET = "sk-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5"


@pytest.mark.parametrize("raise_kind", ["failure", "unknown"])
def test_credentials_in_a_handler_message_are_redacted(raise_kind: str) -> None:
    """An API-key-shaped string in a ToolFailure or OutcomeUnknown message is redacted."""
    assert len(SECRET) == 33

    @tool(effects="write:x")
    def leaky(n: int) -> None:
        """Leak."""
        message = f"upstream refused key {SECRET} for item {n}"
        if raise_kind == "failure":
            raise ToolFailure(message)
        raise OutcomeUnknown(message)

    run = single_tool_run(leaky)
    obs = one(run, "leaky", {"n": 7})
    assert SECRET not in obs.content
    assert "[redacted]" in obs.content
    assert "for item 7" in obs.content
    trail = repr(run.gate.ledger.audit()) + repr(run.gate.ledger.attempts(run.id, "c1"))
    assert SECRET not in trail


def test_credentials_in_arguments_are_not_written_to_the_ledger() -> None:
    """A key-shaped argument value is redacted in the ledger's record of the call."""

    @tool(effects="write:x")
    def store_note(text: str) -> str:
        """Store a note."""
        return "stored"

    run = single_tool_run(store_note)
    obs = one(run, "store_note", {"text": f"my key is {SECRET}"})
    assert obs.status is Status.OK
    record = run.gate.ledger.get_call(run.id, "c1")
    assert record is not None
    assert SECRET not in record.arguments
    assert SECRET not in repr(run.gate.ledger.audit())


def test_secret_field_is_never_written_in_clear() -> None:
    """An argument marked secret is redacted in the ledger and scrubbed from messages."""

    @tool(effects="write:x", secret_fields=["password"])
    def login(user: str, password: str) -> str:
        """Log in."""
        raise ToolFailure(f"password {password} rejected for {user}")

    run = single_tool_run(login)
    obs = one(run, "login", {"user": "bob", "password": "hunter2-correct-horse"})
    assert "hunter2-correct-horse" not in obs.content
    assert "bob" in obs.content
    assert "hunter2-correct-horse" not in repr(run.gate.ledger.audit())


# -- result size ---------------------------------------------------------------------------------


def test_long_result_is_cut_with_a_marker_stating_the_original_size() -> None:
    """A result over ``max_result_chars`` is cut; the marker says how long it was."""

    @tool(effects="read:logs", max_result_chars=100)
    def logs(n: int) -> str:
        """Read logs."""
        return "x" * n

    obs = one(single_tool_run(logs), "logs", {"n": 2500})
    assert obs.status is Status.OK
    assert obs.truncated_from == 2500
    assert obs.content.startswith("x" * 100)
    assert "x" * 101 not in obs.content
    assert "2,500" in obs.content or "2500" in obs.content
    assert len(obs.content) < 400
    assert obs.result == "x" * 2500


@pytest.mark.parametrize("n", [0, 99, 100])
def test_result_within_the_bound_is_not_cut(n: int) -> None:
    """A result of at most ``max_result_chars`` is shown whole; ``truncated_from`` is None."""

    @tool(effects="read:logs", max_result_chars=100)
    def logs(n: int) -> str:
        """Read logs."""
        return "y" * n

    obs = one(single_tool_run(logs), "logs", {"n": n})
    assert obs.content == "y" * n
    assert obs.truncated_from is None


def test_structured_result_is_serialized_as_json_then_bounded() -> None:
    """A dict result is shown as JSON, and is cut by the same bound."""

    @tool(effects="read:logs", max_result_chars=100)
    def rows(n: int) -> list[dict]:
        """Read rows."""
        return [{"i": i} for i in range(n)]

    small = one(single_tool_run(rows), "rows", {"n": 2})
    assert small.content.replace(" ", "") == '[{"i":0},{"i":1}]'
    big = one(single_tool_run(rows), "rows", {"n": 500})
    assert big.truncated_from is not None
    assert big.truncated_from > 100


# -- retryable, for every status -----------------------------------------------------------------


def _behaving(effects: str, risk: str | None, behaviour: str, key: str | None = None) -> Any:
    @tool(name="probe", effects=effects, risk=risk, idempotency_key=key)
    def probe(n: int) -> str:
        """Probe."""
        if behaviour == "failure":
            raise ToolFailure("no such thing")
        if behaviour == "unknown":
            raise OutcomeUnknown("connection lost")
        return "done"

    return probe


@pytest.mark.parametrize(
    ("effects", "risk", "key", "behaviour", "status", "retryable"),
    [
        ("read:x", None, None, "ok", Status.OK, True),
        ("write:x", None, None, "ok", Status.OK, False),
        ("write:x", "write_idempotent", "{n}", "ok", Status.OK, True),
        ("read:x", None, None, "unknown", Status.UNKNOWN, True),
        ("write:x", None, None, "unknown", Status.UNKNOWN, False),
        ("write:x", "write_idempotent", "{n}", "unknown", Status.UNKNOWN, True),
        # Without a business key, a resend under a new call id gets a new key: not safe.
        ("write:x", "write_idempotent", None, "ok", Status.OK, False),
        ("write:x", "write_idempotent", None, "unknown", Status.UNKNOWN, False),
        ("read:x", None, None, "failure", Status.ERROR, True),
        ("write:x", None, None, "failure", Status.ERROR, True),
    ],
)
def test_retryable_says_whether_sending_the_call_again_is_safe(
    effects: str,
    risk: str | None,
    key: str | None,
    behaviour: str,
    status: Status,
    retryable: bool,
) -> None:
    """Reads are always safe to repeat; writes only when nothing could be doubled."""
    run = single_tool_run(_behaving(effects, risk, behaviour, key), read_retries=0)
    obs = one(run, "probe", {"n": 1})
    assert obs.status is status
    assert obs.retryable is retryable


@pytest.mark.parametrize(
    ("arguments", "grants", "status", "stage", "retryable"),
    [
        ({"n": "one"}, ["*:*"], Status.REJECTED, Stage.VALIDATE, True),
        ("{n: 1", ["*:*"], Status.REJECTED, Stage.PARSE, True),
        ({"n": 1}, ["read:*"], Status.REJECTED, Stage.AUTHORIZE, False),
    ],
)
def test_retryable_for_rejections(
    arguments: Any, grants: list[str], status: Status, stage: Stage, retryable: bool
) -> None:
    """A fixable rejection may be resent; a policy refusal may not."""
    from callgate import Authority

    gate = Gate(Registry([_behaving("write:x", None, "ok")]))
    run = gate.run(authority=Authority(principal="p", grants=grants))
    obs = one(run, "probe", arguments)
    assert (obs.status, obs.stage, obs.retryable) == (status, stage, retryable)


def test_is_error_is_false_only_for_ok() -> None:
    """`Observation.is_error` is what provider formats need: everything but ``ok``."""
    ok = one(single_tool_run(_behaving("read:x", None, "ok")), "probe", {"n": 1})
    bad = one(single_tool_run(_behaving("read:x", None, "failure")), "probe", {"n": 1})
    assert ok.is_error is False
    assert bad.is_error is True


def test_same_operation_twice_in_one_batch_runs_once() -> None:
    """Two calls of one batch with one idempotency key and the same arguments: one commit."""
    db = OrderDatabase()
    run = Gate(orders_registry(db)).run(authority=ALLOW_ALL)
    read_status(run)
    observations = run.submit(
        [
            ToolCall(id="c1", name="cancel_order", arguments=cancel(3)),
            ToolCall(id="c2", name="cancel_order", arguments=cancel(3)),
        ]
    )
    assert [o.call_id for o in observations] == ["c1", "c2"]
    assert [o.status for o in observations] == [Status.OK, Status.OK]
    assert db.calls["cancel_order"] == 1
    assert db.commits == [("A-100", "op-1")]


def test_one_key_for_two_different_operations_in_one_batch_runs_one_of_them() -> None:
    """Same ``operation_id`` on two orders in one batch: one runs, the other is refused."""
    db = OrderDatabase()
    run = Gate(orders_registry(db)).run(authority=ALLOW_ALL)
    read_status(run, "A-100")
    read_status(run, "B-200", call_id="read-b")
    observations = run.submit(
        [
            ToolCall(id="c1", name="cancel_order", arguments=cancel(3, "op-1", "A-100")),
            ToolCall(id="c2", name="cancel_order", arguments=cancel(1, "op-1", "B-200")),
        ]
    )
    assert sorted(o.status.value for o in observations) == ["ok", "rejected"]
    refused = next(o for o in observations if o.status is Status.REJECTED)
    assert refused.stage is Stage.EXECUTE
    assert db.calls["cancel_order"] == 1
    assert len(db.commits) == 1


# -- postconditions ------------------------------------------------------------------------------


@pytest.mark.parametrize(("holds", "status"), [(True, Status.OK), (False, Status.ERROR)])
def test_postcondition_decides_whether_a_reported_success_is_ok(
    holds: bool, status: Status
) -> None:
    """A handler saying "done" is not proof: ``verify`` checks the authoritative state."""
    db = OrderDatabase()
    checked: list[Any] = []

    def verify(args: Any, result: Any) -> bool:
        checked.append(result)
        return holds

    @tool(effects="write:orders", verify=verify)
    def mark_shipped(order_id: str) -> dict:
        """Mark an order shipped."""
        return {"order_id": order_id, "status": "shipped"}

    obs = one(single_tool_run(mark_shipped), "mark_shipped", {"order_id": "A-100"})
    assert obs.status is status
    assert checked == [{"order_id": "A-100", "status": "shipped"}]
    if not holds:
        assert obs.stage is Stage.VERIFY
        assert "postcondition" in obs.content
    assert db.rows["A-100"].status == "placed"


def test_sync_handler_past_its_timeout_is_unknown() -> None:
    """A blocking sync handler that overruns its timeout is reported ``unknown``, not waited for."""
    import threading

    release = threading.Event()

    @tool(effects="write:x", timeout=0.05)
    def hang(n: int) -> str:
        """Hang."""
        release.wait(2)
        return "late"

    try:
        obs = one(single_tool_run(hang), "hang", {"n": 1})
        assert not release.is_set()  # answered while the handler still waits
    finally:
        release.set()
    assert obs.status is Status.UNKNOWN
    assert obs.retryable is False


def test_default_timeout_applies_to_tools_without_one() -> None:
    """``Gate(default_timeout=...)`` bounds async tools that declare no timeout."""

    @tool(effects="read:x")
    async def slow(n: int) -> str:
        """Slow."""
        await anyio.sleep(5)
        return "late"

    obs = one(single_tool_run(slow, default_timeout=0.05, read_retries=0), "slow", {"n": 1})
    assert obs.status is Status.UNKNOWN
    assert obs.retryable is True


@pytest.mark.parametrize(("retryable", "expected"), [(True, True), (False, False)])
def test_tool_failure_says_whether_the_same_call_may_succeed_later(
    retryable: bool, expected: bool
) -> None:
    """`ToolFailure(retryable=False)` (e.g. an account closed for good) reaches the observation."""

    @tool(effects="write:account")
    def close(account: str) -> str:
        raise ToolFailure(f"account {account} is closed", retryable=retryable)

    gate = Gate(Registry([close]))
    run = gate.run(authority=ALLOW_ALL)
    [obs] = run.submit([ToolCall(id="c1", name="close", arguments={"account": "a-1"})])
    assert obs.status is Status.ERROR
    assert obs.retryable is expected


def test_secrets_in_a_result_never_reach_the_model() -> None:
    """A handler that echoes a secret argument or returns credential-shaped text: the
    model reads the scrubbed text; the application still gets the raw result."""
    key = "sk-" + "a1b2c3d4" * 4

    @tool(effects="read:vault", secret_fields=["password"])
    def echo(user: str, password: str) -> str:
        return f"set {password} for {user}; api key {key}"

    obs = one(single_tool_run(echo), "echo", {"user": "ann", "password": "hunter2-long"})
    assert obs.status is Status.OK
    assert "hunter2-long" not in obs.content
    assert key not in obs.content
    assert "[redacted]" in obs.content
    assert "hunter2-long" in obs.result


@pytest.mark.sync_driver
def test_a_handler_that_could_not_start_in_time_never_runs_later() -> None:
    """When every worker thread is held by hung handlers, a call whose timeout passes
    before it starts is a known failure (nothing happened), and it never runs later
    behind the model's back."""
    import threading

    from callgate.execute import _thread_pool

    release = threading.Event()
    ran: list[str] = []

    @tool(effects="read:x", timeout=0.05)
    def hang(n: int) -> str:
        release.wait(10)
        return "late"

    @tool(effects="write:mail", timeout=0.1)
    def send(to: str) -> str:
        ran.append(to)
        return "sent"

    run = Gate(Registry([hang, send]), read_retries=0).run(authority=ALLOW_ALL)
    try:
        for i in range(_thread_pool()._max_workers):
            [held] = run.submit([ToolCall(id=f"h{i}", name="hang", arguments={"n": i})])
            assert held.status is Status.UNKNOWN
        [obs] = run.submit([ToolCall(id="s", name="send", arguments={"to": "bob"})])
    finally:
        release.set()
    assert obs.status is Status.ERROR
    assert "could not start" in obs.content
    time.sleep(0.2)
    assert ran == []


@pytest.mark.sync_driver
def test_async_tool_under_sync_submit_keeps_its_event_loop_between_calls() -> None:
    """A sync ``submit`` of async tools runs them on one loop per thread, so a client
    the tool keeps between calls (bound to the loop it was made on) still works."""
    loops: list[asyncio.AbstractEventLoop] = []

    async def ping(n: int) -> str:
        """Answer through the loop the first call ran on, as a pooled client would.

        Args:
            n: which ping.
        """
        if not loops:
            loops.append(asyncio.get_running_loop())
        answer = loops[0].create_future()  # fails on a loop other than the first
        loops[0].call_soon(answer.set_result, f"pong {n}")
        return str(await answer)

    registry = Registry()
    registry.tool(effects="read:ping")(ping)
    run = Gate(registry).run(authority=ALLOW_ALL)
    first = run.submit([ToolCall(id="p1", name="ping", arguments={"n": 1})])
    second = run.submit([ToolCall(id="p2", name="ping", arguments={"n": 2})])
    assert [first[0].status, second[0].status] == [Status.OK, Status.OK]
    assert second[0].content == "pong 2"


def test_sync_submit_inside_a_running_loop_still_runs_async_tools() -> None:
    """A sync submit called inside a running event loop still runs an async tool to ok."""
    registry = Registry()

    @registry.tool(effects="read:ping")
    async def ping(n: int) -> int:
        """Answer.

        Args:
            n: a number.
        """
        await anyio.sleep(0)
        return n

    run = Gate(registry).run(authority=ALLOW_ALL)

    async def main() -> list[Observation]:
        return run.submit([ToolCall(id="p1", name="ping", arguments={"n": 7})])

    (obs,) = anyio.run(main)
    assert (obs.status, obs.content) == (Status.OK, "7")


def test_retries_of_a_hanging_read_fit_inside_its_one_timeout() -> None:
    """A read that hangs gets the whole timeout once; no retry is started with none of it
    left, and the message states the shared budget and the attempts made (it used to be
    attempted ``1 + read_retries`` times, each with the full timeout)."""
    calls: Counter[str] = Counter()

    @tool(effects="read:stock", timeout=0.2)
    async def hang(sku: str) -> str:
        """A read that never answers."""
        calls["hang"] += 1
        await anyio.sleep(30)
        return "never"

    run = single_tool_run(hang, read_retries=2)

    async def main() -> list[Observation]:
        return await run.asubmit([ToolCall(id="c1", name="hang", arguments={"sku": "x"})])

    [obs] = anyio.run(main)
    assert obs.status is Status.UNKNOWN
    assert calls["hang"] == 1
    assert obs.attempts == 1
    assert (
        "did not finish within 0.2 s, the timeout shared by all attempts of this call "
        "(1 attempt made)" in obs.content
    )


def test_a_read_that_fails_fast_is_still_retried_within_its_timeout() -> None:
    """Sharing the timeout takes nothing from quick failures: each is retried while time is left."""
    counter: Counter[str] = Counter()
    spec = flaky(2, effects="read:stock", counter=counter)
    run = single_tool_run(spec, read_retries=2)
    obs = one(run, "flaky", {"key": "k"})
    assert obs.status is Status.OK
    assert counter["calls"] == 3


def test_asubmit_runs_a_lone_sync_handler_off_the_event_loop() -> None:
    """Two concurrent ``asubmit`` calls of a blocking sync tool run side by side: each
    handler waits at a barrier for the other, which it could never reach if the first
    one blocked the loop (the barrier's timeout turns that into a failure)."""
    barrier = threading.Barrier(2, timeout=10)
    threads: list[int] = []

    @tool(effects="read:stock")
    def blocking(sku: str) -> str:
        """A sync read that blocks its thread."""
        threads.append(threading.get_ident())
        barrier.wait()
        return sku

    run = single_tool_run(blocking)

    async def main() -> list[Observation]:
        loop_thread = threading.get_ident()
        results: list[Observation] = []

        async def one_call(call_id: str) -> None:
            [obs] = await run.asubmit(
                [ToolCall(id=call_id, name="blocking", arguments={"sku": call_id})]
            )
            results.append(obs)

        async with anyio.create_task_group() as tg:
            tg.start_soon(one_call, "a")
            tg.start_soon(one_call, "b")
        assert loop_thread not in threads
        return results

    results = anyio.run(main)
    assert sorted(o.status for o in results) == [Status.OK, Status.OK]


def test_a_sync_handler_past_its_timeout_found_nothing_yet_stays_unknown() -> None:
    """Threads cannot be stopped: a reconcile asked at once finds nothing yet, which would
    free the key and let a resend charge twice. The call stays ``unknown`` and holds its
    key (a reconcile that finds the effect still settles it ``ok``: the Harbor demo)."""
    made: list[str] = []
    release = threading.Event()
    asked: list[str] = []

    def reconcile(args: Any, ctx: CallContext) -> str:
        asked.append(args.order_id)
        raise ToolFailure("no charge found")

    @tool(effects="spend:USD", idempotency_key="{order_id}", timeout=0.05, reconcile=reconcile)
    def charge(order_id: str) -> str:
        """A charge whose reply comes late."""
        release.wait(10)
        made.append(order_id)
        return "charged"

    run = single_tool_run(charge)
    try:
        first = one(run, "charge", {"order_id": "o-1"}, call_id="c1")
        again = one(run, "charge", {"order_id": "o-1"}, call_id="c2")
    finally:
        release.set()
    assert first.status is Status.UNKNOWN
    assert "found no effect yet, but the handler may still be running" in first.content
    assert asked == ["o-1"]
    assert again.status is Status.UNKNOWN  # the key is held: replayed, not run
    assert again.details[0]["rule"] == "idempotent_replay"
