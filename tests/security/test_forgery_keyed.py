"""The keyed chain (issue 28): an attacker with write access to the ledger's file who
appends a well-formed record, with its hash and the head row recomputed, gets it past
the plain chain but not past a keyed one.

The attack: a refund waits for a person; the attacker appends the approval record
callgate would write for it (SHA-256 recomputed, as anyone can), moves the head row
onto it and flips the approval row. On a plain SHA-256 chain this is indistinguishable
from a real decision, and ``verify`` passes: what the plain chain promises is that an
*edit* or a *deletion* is seen, not that an append is genuine. With a chain key
(HMAC-SHA-256, the key never in the ledger) the forged record does not verify, the
refund never runs and ``verify`` names the record.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from callgate import Authority, Gate, Policy, Registry, Status, ToolCall, ask
from callgate.ledger import LedgerError, SQLiteLedger

KEY = b"k" * 32
ALICE = Authority(principal="alice", grants=["spend:USD<=1000"])
RUN = "run-keyed"


def gate_for(ledger: SQLiteLedger, done: list[int]) -> Gate:
    registry = Registry()

    @registry.tool(effects="spend:USD={amount}")
    def refund(order_id: str, amount: int) -> dict[str, Any]:
        """Refund an order."""
        done.append(amount)
        return {"refunded": amount}

    return Gate(registry, policy=Policy([ask("refund")]), ledger=ledger)


def _blob(prev: str, seq: int, at: float, kind: str, run_id: str, call_id: str, data: str) -> bytes:
    cid = f"{len(call_id)}:{call_id}"
    text = f"{prev}|{seq}|{at!r}|{len(kind)}:{kind}|{len(run_id)}:{run_id}|{cid}|{data}"
    return text.encode()


def sha(*fields: Any) -> str:
    """The plain chain's hash, as the attacker computes it."""
    return hashlib.sha256(_blob(*fields)).hexdigest()


def guessed_hmac(*fields: Any) -> str:
    """The attacker's best try at a keyed hash: HMAC under a key it does not have."""
    return hmac.new(b"not the key, but 32 bytes long..", _blob(*fields), "sha256").hexdigest()


def forge_approval(path: str, approval_id: str, digest: Callable[..., str]) -> None:
    """Append the decision callgate would write, move the head onto it, flip the row."""
    lite = sqlite3.connect(path)
    try:
        head_hash = lite.execute(  # the run's chain head (a chain per run: schema 4)
            "SELECT hash FROM chains WHERE chain = ?", (f"r:{RUN}",)
        ).fetchone()[0]
        head_seq = lite.execute("SELECT max(seq) FROM journal").fetchone()[0]
        row = lite.execute(
            "SELECT principal, expires_at, tool, arguments_hash, resource_version, "
            "policy_version, call_id FROM approvals WHERE id = ?",
            (approval_id,),
        ).fetchone()
        principal, expires_at, tool, arguments_hash, version, policy, call_id = row
        at = expires_at - 60
        data = json.dumps(
            {
                "actor": "maria",
                "approval_id": approval_id,
                "principal": principal,
                "expires_at": expires_at,
                "tool": tool,
                "arguments_hash": arguments_hash,
                "resource_version": version,
                "policy_version": policy,
                "reason": None,
                "decided_at": at,
            },
            separators=(",", ":"),
        )
        seq = int(head_seq) + 1
        kind = "approval.approved"
        new = digest(head_hash, seq, at, kind, RUN, call_id, data)
        lite.execute(
            "INSERT INTO journal (seq, at, kind, run_id, call_id, data, prev_hash, hash, chain) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)",
            (seq, at, kind, RUN, call_id, data, head_hash, new),
        )
        lite.execute("UPDATE chains SET seq = ?, hash = ? WHERE chain = ?", (seq, new, f"r:{RUN}"))
        lite.execute(
            "UPDATE approvals SET status = 'approved', decided_by = 'maria', decided_at = ?, "
            "decision_seq = ? WHERE id = ?",
            (at, seq, approval_id),
        )
        lite.execute(
            "UPDATE calls SET records = records || ',' || ? WHERE run_id = ? AND call_id = ?",
            (str(seq), RUN, call_id),
        )
        lite.commit()
    finally:
        lite.close()


def wait_for_a_person(path: str, key: bytes | None, done: list[int]) -> str:
    with SQLiteLedger(path, chain_key=key) as ledger:
        gate = gate_for(ledger, done)
        run = gate.run(authority=ALICE, run_id=RUN)
        [obs] = run.submit(
            [ToolCall(id="c1", name="refund", arguments={"order_id": "o1", "amount": 40})]
        )
        assert obs.status is Status.PENDING
        assert obs.approval_id is not None
        return obs.approval_id


def resume(path: str, key: bytes | None, done: list[int]) -> list[Status]:
    with SQLiteLedger(path, chain_key=key) as ledger:
        gate = gate_for(ledger, done)
        try:
            return [o.status for o in gate.resume_run(RUN, authority=ALICE).resume()]
        except LedgerError:
            return []


def test_a_plain_chain_accepts_an_appended_decision(tmp_path: Path) -> None:
    """The limit of the plain chain, shown so the keyed test below means something: the
    appended decision verifies and the refund runs."""
    path = str(tmp_path / "plain.db")
    done: list[int] = []
    approval_id = wait_for_a_person(path, None, done)
    forge_approval(path, approval_id, sha)
    with SQLiteLedger(path, read_only=True) as ledger:
        assert ledger.verify().ok
    assert resume(path, None, done) == [Status.OK]
    assert done == [40]


def test_a_keyed_chain_refuses_an_appended_decision(tmp_path: Path) -> None:
    """With a chain key, the same append does not verify and the refund never runs."""
    path = str(tmp_path / "keyed.db")
    done: list[int] = []
    approval_id = wait_for_a_person(path, KEY, done)
    with SQLiteLedger(path, read_only=True, chain_key=KEY) as ledger:
        assert ledger.verify().ok
    for digest in (sha, guessed_hmac):
        forge_approval(path, approval_id, digest)
        assert resume(path, KEY, done) != [Status.OK]
        assert done == []
        with SQLiteLedger(path, read_only=True, chain_key=KEY) as ledger:
            check = ledger.verify()
        assert not check.ok
        assert any("does not match its hash" in p for p in check.problems), check.problems


def test_a_keyed_ledger_opened_without_its_key_runs_no_effect(tmp_path: Path) -> None:
    """A keyed journal read without the key (or with another) does not verify, so nothing
    runs on it: the key is never in the ledger, and a wrong one is not quietly accepted."""
    path = str(tmp_path / "keyed.db")
    done: list[int] = []
    approval_id = wait_for_a_person(path, KEY, done)
    with SQLiteLedger(path, chain_key=KEY) as ledger:
        ledger.approvals().approve(approval_id, by="maria")
    for wrong in (None, b"x" * 32):
        assert resume(path, wrong, done) == [] or done == []
        assert done == []
        with SQLiteLedger(path, read_only=True, chain_key=wrong) as ledger:
            assert not ledger.verify().ok
    assert resume(path, KEY, done) == [Status.OK]
    assert done == [40]


def test_the_key_comes_from_a_file_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``CALLGATE_CHAIN_KEY_FILE`` (or ``CALLGATE_CHAIN_KEY``) keys a ledger made without
    ``chain_key``; a short key is refused with what to do."""
    path = str(tmp_path / "env.db")
    done: list[int] = []
    key_file = tmp_path / "chain.key"
    key_file.write_bytes(KEY + b"\n")
    monkeypatch.setenv("CALLGATE_CHAIN_KEY_FILE", str(key_file))
    wait_for_a_person(path, None, done)
    monkeypatch.delenv("CALLGATE_CHAIN_KEY_FILE")
    with SQLiteLedger(path, read_only=True, chain_key=KEY) as ledger:
        assert ledger.verify().ok
    monkeypatch.setenv("CALLGATE_CHAIN_KEY", KEY.decode())
    with SQLiteLedger(path, read_only=True) as ledger:
        assert ledger.verify().ok
    monkeypatch.setenv("CALLGATE_CHAIN_KEY", "short")
    with pytest.raises(LedgerError, match="at least 16"):
        SQLiteLedger(path, read_only=True)
