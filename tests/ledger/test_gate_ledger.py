"""The gate and the ledger together: the default ledger, replays across runs, secrets.

A canary secret passed through calls (as a secret field, echoed by the
handler, in a failure message, in a rejected call) must never reach the
ledger's storage, its audit export, or the logs.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

import callgate.gate.gate
from callgate import Authority, CallContext, Gate, Registry, ToolCall, ToolFailure
from callgate.cli import app
from callgate.ledger import CallState, Ledger, SQLiteLedger, default_ledger

CANARY = "tok_CANARY_8c1f5e2a9d"
API_KEY = "sk-canary0123456789abcdefXYZ"
AUTHORITY = Authority(principal="alice", grants=["spend:USD"])


def payments(charges: list[str]) -> Registry:
    registry = Registry()

    @registry.tool(
        effects="spend:USD",
        writes="charge:{operation_id}",
        idempotency_key="{operation_id}",
        secret_fields=["card_token"],
    )
    def charge(operation_id: str, amount: int, card_token: str, memo: str = "") -> dict[str, str]:
        """Charge a card once per operation id."""
        if amount <= 0:
            raise ToolFailure(f"card {card_token} declined for {amount}")
        charges.append(operation_id)
        return {"charge": f"ch_{operation_id}", "card": card_token, "memo": memo}

    return registry


def test_the_default_gate_keeps_its_ledger_in_callgate_db(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Gate with no ledger keeps a SQLiteLedger in ./callgate.db."""
    monkeypatch.setattr(callgate.gate.gate, "default_ledger", default_ledger)
    monkeypatch.chdir(tmp_path)
    gate = Gate(payments([]))
    assert isinstance(gate.ledger, SQLiteLedger)
    run = gate.run(authority=AUTHORITY)
    [obs] = run.submit([_charge("c1", "op-1")])
    assert obs.status == "ok"
    gate.ledger.close()
    assert (tmp_path / "callgate.db").exists()


def test_the_default_ledger_is_announced_and_closed_by_the_gate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The file is named in the log, and ``with Gate(...)`` closes the ledger it opened."""
    monkeypatch.setattr(callgate.gate.gate, "default_ledger", default_ledger)
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.INFO, logger="callgate"), Gate(payments([])) as gate:
        gate.run(authority=AUTHORITY).submit([_charge("c1", "op-1")])
    assert any("callgate.db" in r.getMessage() for r in caplog.records)
    assert not (tmp_path / "callgate.db-wal").exists()  # closed: the WAL is checkpointed away
    with pytest.raises(Exception):  # noqa: B017, PT011 - any use of a closed ledger fails
        gate.ledger.calls()


def test_a_ledger_passed_in_is_left_open_by_the_gate(tmp_path: Path) -> None:
    """Closing a Gate leaves a ledger passed in open for its owner."""
    ledger = SQLiteLedger(tmp_path / "mine.db")
    with Gate(payments([]), ledger=ledger) as gate:
        gate.run(authority=AUTHORITY).submit([_charge("c1", "op-1")])
    assert ledger.calls()  # still usable: it is the caller's to close
    ledger.close()


def _charge(call_id: str, operation_id: str, amount: int = 5, memo: str = "") -> ToolCall:
    arguments = {"operation_id": operation_id, "amount": amount, "card_token": CANARY}
    if memo:
        arguments["memo"] = memo
    return ToolCall(id=call_id, name="charge", arguments=arguments)


def test_a_business_key_replays_across_runs_and_restarts(
    make_ledger: Callable[..., Ledger],
) -> None:
    """A business key replays in a new run on a reopened ledger: "already ran", one charge."""
    charges: list[str] = []
    first = Gate(payments(charges), ledger=make_ledger()).run(authority=AUTHORITY)
    [obs] = first.submit([_charge("c1", "op-1")])
    assert obs.status == "ok"
    second = Gate(payments(charges), ledger=make_ledger()).run(authority=AUTHORITY)
    [again] = second.submit([_charge("c1", "op-1")])
    assert again.status == "ok"
    assert "already ran" in again.content
    assert charges == ["op-1"]


def test_concurrent_calls_through_asubmit_are_all_recorded(
    make_ledger: Callable[..., Ledger],
) -> None:
    """Eight concurrent asubmit calls all run, all rows end ok, and the ledger verifies."""
    charges: list[str] = []
    ledger = make_ledger()
    run = Gate(payments(charges), ledger=ledger).run(authority=AUTHORITY)
    calls = [_charge(f"c{i}", f"op-{i}") for i in range(8)]
    observations = asyncio.run(run.asubmit(calls))
    assert [o.status for o in observations] == ["ok"] * 8
    assert sorted(charges) == sorted(f"op-{i}" for i in range(8))
    assert {c.state for c in ledger.calls(run_id=run.id)} == {CallState.OK}
    assert ledger.verify().ok


def test_a_canary_secret_never_reaches_the_ledger_export_or_logs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """Secrets in results, errors and rejected arguments reach no ledger file, export or log."""
    caplog.set_level(logging.DEBUG)
    path = tmp_path / "ledger.db"
    ledger = SQLiteLedger(path)
    run = Gate(payments([]), ledger=ledger).run(authority=AUTHORITY)
    observations = run.submit(
        [
            _charge("ok", "op-1", memo=f"key {API_KEY}"),  # echoed in the result
            _charge("declined", "op-2", amount=-1),  # in the failure message
        ]
    )
    assert [o.status for o in observations] == ["ok", "error"]
    bad = ToolCall(
        id="bad", name="charge", arguments={"operation_id": 7, "amount": "x", "card_token": CANARY}
    )
    assert run.submit([bad])[0].status == "rejected"
    broken = ToolCall(id="broken", name="charge", arguments=f'{{"card_token": "{CANARY}", ')
    assert run.submit([broken])[0].status == "rejected"
    assert ledger.verify().ok
    ledger.close()

    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    exported = CliRunner().invoke(app, ["ledger", "export", "--db", str(path)])
    assert exported.exit_code == 0
    logs = caplog.text + capsys.readouterr().out
    for secret in (CANARY, API_KEY):
        assert secret.encode() not in stored
        assert secret not in exported.stdout
        assert secret not in logs
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    assert any("[redacted]" in json.dumps(line) for line in lines)


def test_a_reported_downstream_transaction_id_is_stored_with_the_attempt(
    make_ledger: Callable[..., Ledger],
) -> None:
    """`ctx.report_transaction(...)` lands on the attempt, for people and reconcile hooks."""
    registry = Registry()

    @registry.tool(effects="spend:USD", idempotency_key="{operation_id}")
    def pay(operation_id: str, ctx: CallContext) -> str:
        ctx.report_transaction(f"ch_{operation_id}")
        return "paid"

    ledger = make_ledger()
    run = Gate(registry, ledger=ledger).run(authority=AUTHORITY)
    [obs] = run.submit([ToolCall(id="c1", name="pay", arguments={"operation_id": "op-9"})])
    assert obs.status.value == "ok"
    [attempt] = ledger.attempts(run.id, "c1")
    assert attempt.outcome is not None
    assert attempt.outcome.transaction_id == "ch_op-9"


def test_a_closed_gate_runs_nothing_and_says_why(tmp_path: Path) -> None:
    """After Gate.close, submit, asubmit and run raise GateClosed saying why (the gate is
    closed, not the ledger: a ledger passed in is still open); nothing runs."""
    charges: list[str] = []
    gate = Gate(payments(charges), ledger=SQLiteLedger(tmp_path / "l.db"))
    run = gate.run(authority=AUTHORITY)
    gate.close()
    from callgate.errors import GateClosed, LedgerError

    with pytest.raises(GateClosed, match="this gate was closed"):
        run.submit([_charge("c1", "op-1")])
    with pytest.raises(GateClosed, match="this gate was closed"):
        asyncio.run(run.asubmit([_charge("c2", "op-2")]))
    with pytest.raises(GateClosed, match="Make a new Gate"):
        gate.run(authority=AUTHORITY)
    assert not issubclass(GateClosed, LedgerError)
    with pytest.raises(GateClosed, match="Make a new Gate"):
        gate.run(authority=AUTHORITY)
    assert charges == []
    gate.ledger.close()


def test_a_sqlite_ledger_is_a_context_manager(tmp_path: Path) -> None:
    """SQLiteLedger as a context manager closes at the block's end (no -wal file left)."""
    with SQLiteLedger(tmp_path / "cm.db") as ledger:
        Gate(payments([]), ledger=ledger).run(authority=AUTHORITY).submit([_charge("c1", "op-1")])
    assert not (tmp_path / "cm.db-wal").exists()  # closed at the end of the block
