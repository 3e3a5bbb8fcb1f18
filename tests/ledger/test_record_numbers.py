"""A journal record whose number is edited past what a float or an int can hold (``1e400``,
``-1e400``, ``9**400``) is reported by name, never crashes a reader or a writer.

Edited in place (the hash no longer matches), ``verify`` names the record and a writer
refuses with `LedgerError`; re-signed (as anyone with write access to an unkeyed journal
can), a writer still decides (or refuses with `LedgerError`), never raises OverflowError.
A bad field the fold does not need (``"attempt": "x"``) loses none of the facts it does
need (the start's budget charges, the outcome's key).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from callgate.approvals import ApprovalRequest
from callgate.ledger import (
    AttemptFinish,
    AttemptStart,
    CallRecord,
    CallState,
    ClaimKind,
    LedgerError,
    Outcome,
)
from callgate.ledger.base import GENESIS, audit_hash
from callgate.ledger.sqlite import SQLiteLedger

T = 1700000000.0
FAR = 5000000000.0
B1 = "usd|run|alice|r1"
HUGE = ("1e400", "-1e400", "9" * 400)
"""Stored numbers a float (``1e400`` reads as infinity) or an int column cannot hold."""
_PLACEHOLDER = '"@@HUGE@@"'


def _decide(ledger: SQLiteLedger, call_id: str, key: str) -> None:
    ledger.record_decision(
        CallRecord(
            run_id="r1",
            call_id=call_id,
            tool="charge",
            tool_version="v1",
            principal="alice",
            arguments='{"amount":1}',
            state=CallState.ADMITTED,
            stage="policy",
            request_hash="h1",
            idempotency_key=key,
            decided_by="granted",
            effects=("spend:USD",),
            created_at=T,
            updated_at=T,
        )
    )


def _start(
    call_id: str, key: str, budgets: tuple[tuple[str, float, float], ...] = ()
) -> AttemptStart:
    return AttemptStart(
        run_id="r1",
        call_id=call_id,
        tool="charge",
        tool_version="v1",
        attempt=1,
        idempotency_key=key,
        request_hash="h1",
        started_at=T,
        key_expires_at=FAR,
        side_effecting=True,
        budgets=budgets,
    )


def _finish(ledger: SQLiteLedger, call_id: str, key: str, status: str) -> None:
    ledger.finish_attempt(
        AttemptFinish(
            run_id="r1",
            call_id=call_id,
            attempt=1,
            idempotency_key=key,
            outcome=Outcome(status=status, content="done", finished_at=T),
        )
    )


@pytest.fixture(scope="module")
def base_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A journal with one record of each kind that carries a number."""
    path = tmp_path_factory.mktemp("numbers") / "base.db"
    ledger = SQLiteLedger(path, worker="w1")
    ledger.record_run("r1", owner="alice", facts=[("run.intent", {"goal": "pay"})])
    for call_id, key, status in (("c1", "k1", "ok"), ("c2", "k2", "error"), ("c3", "k3", None)):
        _decide(ledger, call_id, key)
        ledger.begin_attempt(_start(call_id, key, ((B1, 5.0, 50.0),)))
        if status is not None:
            _finish(ledger, call_id, key, status)
    _decide(ledger, "c4", "k1")
    ledger.begin_attempt(_start("c4", "k1"))  # idempotency.replay (settles: started_at)
    _finish(ledger, "c3", "k3", "unknown")
    store = ledger.approvals()
    store.request(
        ApprovalRequest(
            id="a1",
            run_id="r1",
            call_id="c9",
            principal="alice",
            tool="charge",
            arguments_json="{}",
            arguments_hash="ah",
            effects=(),
            preview="p",
            created_at=T,
            expires_at=1800000000.0,
            policy_version="p1",
            resumable=True,
        )
    )
    store.approve("a1", by="carol")
    assert store.consume(
        principal="alice",
        tool="charge",
        arguments_hash="ah",
        resource_version=None,
        run_id="r1",
        used_by="r1/c9",
    )
    ledger.checkpoint()
    ledger.close()
    return path


def _rows(path: Path) -> list[tuple[int, str, str]]:
    with sqlite3.connect(path) as con:
        return list(con.execute("SELECT seq, kind, data FROM journal ORDER BY seq"))


def _targets(path: Path) -> list[tuple[int, str, str]]:
    """(seq, kind, field) for the first record of each kind and each number it carries
    (a budget's amount, a checkpoint head's record number included)."""
    found: list[tuple[int, str, str]] = []
    seen: set[str] = set()
    for seq, kind, text in _rows(path):
        if kind in seen:
            continue
        seen.add(kind)
        for name, value in json.loads(text).items():
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if number or name in ("budgets", "heads"):
                found.append((seq, kind, name))
    return found


def _edit(text: str, field: str, huge: str) -> str:
    data = json.loads(text)
    if field == "budgets":
        data[field] = [[B1, "@@HUGE@@"]]
    elif field == "heads":
        data[field] = [[c, "@@HUGE@@", h] for c, _, h in data[field]]
    else:
        data[field] = "@@HUGE@@"
    return json.dumps(data, separators=(",", ":")).replace(_PLACEHOLDER, huge)


def _rewrite(path: Path, seq: int, change: object, *, resign: bool) -> None:
    """Replace record ``seq``'s data with ``change(text)``; ``resign``: recompute every
    hash after it (and the anchors and head rows naming them), as an attacker can."""
    con = sqlite3.connect(path)
    rows = con.execute(
        "SELECT seq, at, kind, run_id, call_id, data, hash, chain FROM journal ORDER BY seq"
    ).fetchall()
    renamed: dict[str, str] = {}
    heads: dict[str, str] = {}
    for s, at, kind, run_id, call_id, text, h, chain in rows:
        c = chain if chain else "r:" + run_id
        if s == seq:
            text = change(text)  # type: ignore[operator]
            if not resign:
                con.execute("UPDATE journal SET data=? WHERE seq=?", (text, s))
        if resign:
            for old, new in renamed.items():
                text = text.replace(old, new)
            prev = heads.get(c, GENESIS)
            nh = audit_hash(prev, s, at, kind, run_id, call_id, text, None)
            if nh != h:
                renamed[h] = nh
            heads[c] = nh
            con.execute(
                "UPDATE journal SET data=?, prev_hash=?, hash=? WHERE seq=?", (text, prev, nh, s)
            )
    for c, nh in heads.items():
        con.execute("UPDATE chains SET hash=? WHERE chain=?", (nh, c))
    con.commit()
    con.close()


def _copy(base: Path, tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "l.db"
    shutil.copy(base, path)
    return path


def test_the_journal_carries_every_numbered_kind(base_db: Path) -> None:
    """The fixture has a start, each outcome, a settled key, approvals and a checkpoint."""
    kinds = {kind for _, kind, _ in _targets(base_db)}
    assert {
        "call.admitted",
        "attempt.started",
        "attempt.ok",
        "attempt.error",
        "attempt.unknown",
        "idempotency.replay",
        "approval.requested",
        "approval.approved",
        "approval.used",
        "journal.checkpoint",
    } <= kinds


def test_an_edited_huge_number_is_named_by_verify_and_refused_by_a_writer(
    base_db: Path, tmp_path: Path
) -> None:
    """Each number of each kind edited to 1e400, -1e400, 9**400: verify names the record,
    a writer raises LedgerError only."""
    failures = []
    for n, (seq, kind, field) in enumerate(_targets(base_db)):
        for huge in HUGE:
            path = _copy(base_db, tmp_path / f"{n}-{len(huge)}{huge[0]}")
            _rewrite(path, seq, lambda t, f=field, h=huge: _edit(t, f, h), resign=False)
            ledger = SQLiteLedger(path, worker="w9")
            try:
                check = ledger.verify()
                if not any(f"record {seq}" in p for p in check.problems):
                    failures.append((kind, field, huge[:6], "verify", check.problems[:2]))
                try:
                    ledger.begin_attempt(_start("z1", "k1"))
                    failures.append((kind, field, huge[:6], "writer ran"))
                except LedgerError:
                    pass
            except Exception as exc:  # (the finding: anything but LedgerError)
                failures.append((kind, field, huge[:6], type(exc).__name__, str(exc)[:80]))
            finally:
                ledger.close()
    assert failures == []


def test_a_resigned_huge_number_never_crashes_a_writer(base_db: Path, tmp_path: Path) -> None:
    """Re-signed, the same edits leave verify answering and a writer deciding (or refusing
    with LedgerError): never OverflowError."""
    failures = []
    for n, (seq, kind, field) in enumerate(_targets(base_db)):
        for huge in HUGE:
            path = _copy(base_db, tmp_path / f"{n}-{len(huge)}{huge[0]}")
            _rewrite(path, seq, lambda t, f=field, h=huge: _edit(t, f, h), resign=True)
            ledger = SQLiteLedger(path, worker="w9")
            try:
                ledger.verify()
                for call_id, key in (("z1", "k1"), ("z2", "k9")):
                    _decide(ledger, call_id, key)
                    with contextlib.suppress(LedgerError):
                        ledger.begin_attempt(_start(call_id, key, ((B1, 1.0, 50.0),)))
            except Exception as exc:  # (the finding: anything but LedgerError)
                failures.append((kind, field, huge[:6], type(exc).__name__, str(exc)[:80]))
            finally:
                ledger.close()
    assert failures == []


def _set(field: str, value: object) -> object:
    def change(text: str) -> str:
        data = json.loads(text)
        data[field] = value
        return json.dumps(data, separators=(",", ":"))

    return change


def test_a_resigned_bad_attempt_number_keeps_the_start_s_budget_charged(
    base_db: Path, tmp_path: Path
) -> None:
    """attempt.started with "attempt": "x" (re-signed) still charges its budgets: a call that
    would pass the budget only without that charge is refused."""
    path = _copy(base_db, tmp_path)
    seq = next(s for s, kind, _ in _rows(path) if kind == "attempt.started")
    _rewrite(path, seq, _set("attempt", "x"), resign=True)
    ledger = SQLiteLedger(path, worker="w9")
    try:
        _decide(ledger, "z1", "k9")
        # spent: 5 (c1, ok) + 5 (c3, unknown); c2's error gave its 5 back. 10 + 41 > 50.
        claim = ledger.begin_attempt(_start("z1", "k9", ((B1, 41.0, 50.0),)))
    finally:
        ledger.close()
    assert claim.kind is ClaimKind.OVER_BUDGET


def test_a_resigned_bad_attempt_number_keeps_the_outcome_s_key(
    base_db: Path, tmp_path: Path
) -> None:
    """attempt.ok with "attempt": "x" (re-signed) still settles its key: the key replays."""
    path = _copy(base_db, tmp_path)
    seq = next(s for s, kind, _ in _rows(path) if kind == "attempt.ok")
    _rewrite(path, seq, _set("attempt", "x"), resign=True)
    ledger = SQLiteLedger(path, worker="w9")
    try:
        _decide(ledger, "z1", "k1")
        claim = ledger.begin_attempt(_start("z1", "k1"))
        check = ledger.verify()
    finally:
        ledger.close()
    assert claim.kind is ClaimKind.REPLAY
    assert check.ok, check.problems


@pytest.mark.parametrize(
    "outcome",
    [
        Outcome(status="ok", content="x", finished_at=None),  # type: ignore[arg-type]
        Outcome(status="ok", content=None, stage="", error=None),  # type: ignore[arg-type]
    ],
)
def test_an_outcome_with_missing_values_finishes_and_verifies(
    tmp_path: Path, outcome: Outcome
) -> None:
    """An outcome with no finish time, no content or an empty stage is stored as its record
    reads back: the row is written and verify finds it matching."""
    ledger = SQLiteLedger(tmp_path / "l.db", worker="w1")
    try:
        _decide(ledger, "c1", "k1")
        ledger.begin_attempt(_start("c1", "k1"))
        ledger.finish_attempt(
            AttemptFinish(
                run_id="r1", call_id="c1", attempt=1, idempotency_key="k1", outcome=outcome
            )
        )
        check = ledger.verify()
    finally:
        ledger.close()
    assert check.ok, check.problems


@pytest.mark.parametrize("huge", [*HUGE, "NaN", '"x"', '["a","b"]'])
def test_a_resigned_huge_key_expiry_keeps_the_key(base_db: Path, tmp_path: Path, huge: str) -> None:
    """A start's key expiry re-signed past every float (1e400 as always read: never expires),
    or to no number, keeps its key: the key's ok outcome replays, the effect never runs
    twice."""
    path = _copy(base_db, tmp_path)
    seq = next(s for s, kind, _ in _rows(path) if kind == "attempt.started")
    _rewrite(path, seq, lambda t: _edit(t, "key_expires_at", huge), resign=True)
    ledger = SQLiteLedger(path, worker="w9")
    try:
        _decide(ledger, "z1", "k1")
        claim = ledger.begin_attempt(_start("z1", "k1"))
    finally:
        ledger.close()
    # -1e400: expired (as always read), so the ok key is free again; the others hold.
    assert claim.kind is (ClaimKind.RUN if huge.startswith("-") else ClaimKind.REPLAY)
