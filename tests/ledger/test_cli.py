"""``callgate ledger``: list, show, export, verify, resolve, and their exit codes.

Exit codes: 0 success, 1 a problem found (tampering; a refused resolution),
2 bad usage or input (no ledger, no such call, an ambiguous call id).
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from callgate.cli import app
from callgate.ledger import (
    AttemptFinish,
    AttemptStart,
    CallRecord,
    CallState,
    Ledger,
    MemoryLedger,
    Outcome,
    SQLiteLedger,
)
from callgate.ledger.base import verify_chain

runner = CliRunner()


def populate(ledger: Ledger, *, unknown: str = "c2", run_id: str = "run-1") -> None:
    """c1 ok, c2 unknown, c3 rejected."""
    now = time.time()
    for call_id, status in (("c1", "ok"), (unknown, "unknown")):
        ledger.record_decision(
            CallRecord(
                run_id=run_id,
                call_id=call_id,
                tool="charge",
                tool_version="v1",
                principal="alice",
                arguments='{"amount":5}',
                state=CallState.ADMITTED,
                stage="policy",
                request_hash="h",
                idempotency_key=f"{run_id}/{call_id}",
                decided_by="allow charge",
                created_at=now,
                updated_at=now,
            )
        )
        start = AttemptStart(
            run_id=run_id,
            call_id=call_id,
            tool="charge",
            tool_version="v1",
            attempt=1,
            idempotency_key=f"{run_id}/{call_id}",
            request_hash="h",
            started_at=now,
            key_expires_at=now + 3600,
            side_effecting=True,
        )
        ledger.begin_attempt(start)
        ledger.finish_attempt(
            AttemptFinish(
                run_id=run_id,
                call_id=call_id,
                attempt=1,
                idempotency_key=start.idempotency_key,
                outcome=Outcome(status=status, content="{}", finished_at=now),
            )
        )
    ledger.record_decision(
        CallRecord(
            run_id=run_id,
            call_id="c3",
            tool="charge",
            tool_version="v1",
            principal="alice",
            arguments="{}",
            state=CallState.REJECTED,
            stage="schema",
            message="amount is required",
            created_at=now,
            updated_at=now,
        )
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "callgate.db"
    ledger = SQLiteLedger(path)
    populate(ledger)
    ledger.close()
    return path


def cli(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["ledger", *args])
    return result.exit_code, result.stdout, result.stderr


def test_list_shows_every_call_and_filters_by_state(db: Path) -> None:
    """ledger list shows every call with its state; --state unknown --json lists only c2."""
    code, out, _ = cli("list", "--db", str(db))
    assert code == 0
    for text in ("c1", "c2", "c3", "unknown", "rejected"):
        assert text in out
    code, out, _ = cli("list", "--db", str(db), "--state", "unknown", "--json")
    assert code == 0
    assert [c["call_id"] for c in json.loads(out)] == ["c2"]


def test_the_ledger_path_comes_from_callgate_db(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without --db, ledger list reads the file named by CALLGATE_DB."""
    monkeypatch.setenv("CALLGATE_DB", str(db))
    code, out, _ = cli("list", "--json")
    assert code == 0
    assert len(json.loads(out)) == 3


def test_show_gives_the_decision_attempts_and_audit_of_a_call(db: Path) -> None:
    """ledger show gives a call's state, attempts and audit records, in JSON and as text."""
    code, out, _ = cli("show", "c1", "--db", str(db), "--json")
    assert code == 0
    shown = json.loads(out)
    assert shown["call"]["state"] == "ok"
    assert [a["attempt"] for a in shown["attempts"]] == [1]
    assert [r["kind"] for r in shown["audit"]] == ["call.admitted", "attempt.started", "attempt.ok"]
    code, out, _ = cli("show", "c1", "--db", str(db))
    assert code == 0
    assert "attempt.ok" in out


def test_export_writes_the_chained_audit_trail_as_jsonl(db: Path, tmp_path: Path) -> None:
    """export --format jsonl writes every record numbered from 1, each linked to the one before
    it in its run's chain."""
    target = tmp_path / "audit.jsonl"
    code, _, _ = cli("export", "--db", str(db), "--format", "jsonl", "--output", str(target))
    assert code == 0
    records = [json.loads(line) for line in target.read_text().splitlines()]
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    runs = {r["run_id"] for r in records}
    for run in runs:
        chain = [r for r in records if r["run_id"] == run]
        assert chain[0]["prev_hash"] == "0" * 64
        assert all(b["prev_hash"] == a["hash"] for a, b in itertools.pairwise(chain))


def test_verify_passes_an_intact_ledger(db: Path) -> None:
    """verify of an intact ledger exits 0 and reports ok."""
    code, out, _ = cli("verify", "--db", str(db), "--json")
    assert code == 0
    assert json.loads(out)["ok"] is True


TAMPERING = {
    "edited": (  # the first record (PostgreSQL may skip numbers)
        "UPDATE journal SET data = replace(data, 'alice', 'mallory') "
        "WHERE seq = (SELECT min(seq) FROM journal)"
    ),
    "deleted": (  # the third record (PostgreSQL may skip numbers)
        "DELETE FROM journal WHERE seq = (SELECT seq FROM journal ORDER BY seq LIMIT 1 OFFSET 2)"
    ),
    "truncated": (
        "DELETE FROM journal WHERE seq = (SELECT max(seq) FROM journal WHERE kind != '@head')"
    ),
}


@pytest.mark.parametrize("how", sorted(TAMPERING))
def test_verify_detects_a_tampered_sqlite_ledger(db: Path, how: str) -> None:
    """verify exits 1 with TAMPERED on a SQLite journal record edited, deleted or truncated."""
    conn = sqlite3.connect(db)
    if how == "edited":
        conn.execute(TAMPERING[how].replace("seq = 2", "seq = 1"))
    else:
        conn.execute(TAMPERING[how])
    conn.commit()
    conn.close()
    code, _, err = cli("verify", "--db", str(db))
    assert code == 1
    assert "TAMPERED" in err


@pytest.mark.parametrize("how", sorted(TAMPERING))
def test_verify_detects_a_tampered_postgres_ledger(pg_dsn: str, how: str) -> None:
    """verify exits 1 with TAMPERED on a PostgreSQL journal record edited, deleted, truncated."""
    import psycopg

    from callgate.ledger import PostgresLedger

    ledger = PostgresLedger(pg_dsn)
    populate(ledger)
    ledger.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(TAMPERING[how].replace("seq = 2", "seq = 1"))  # type: ignore[arg-type]
    code, _, err = cli("verify", "--dsn", pg_dsn)
    assert code == 1
    assert "TAMPERED" in err


def test_verify_detects_tampering_in_memory() -> None:
    """verify_chain fails on an edited, a removed middle or a dropped last record."""
    ledger = MemoryLedger()
    populate(ledger)
    records = list(ledger.audit())
    assert verify_chain(records, ledger.audit_head()).ok
    edited = [*records]
    edited[1] = type(records[1])(
        **{**{f: getattr(records[1], f) for f in records[1].__dataclass_fields__}, "kind": "x"}
    )
    assert not verify_chain(edited, ledger.audit_head()).ok
    assert not verify_chain(records[:2] + records[3:], ledger.audit_head()).ok
    assert not verify_chain(records[:-1], ledger.audit_head()).ok


def test_verify_with_an_expected_head_detects_a_rewritten_chain(db: Path) -> None:
    """verify --expect-head with another head exits 1."""
    code, _, _ = cli("verify", "--db", str(db), "--expect-head", "0" * 64)
    assert code == 1


def test_a_ledger_that_grew_since_its_head_was_noted_still_verifies(db: Path) -> None:
    """--expect-head checks that the noted record is still in the chain, not that
    nothing was appended since."""
    ledger = SQLiteLedger(db)
    noted = ledger.verify().head
    ledger.record_event("note", run_id="r9", call_id=None, data={"later": True})
    ledger.close()
    code, out, _ = cli("verify", "--db", str(db), "--expect-head", noted, "--json")
    assert code == 0, out
    assert json.loads(out)["head"] != noted


def test_resolve_without_a_note_is_bad_input(db: Path) -> None:
    """resolve with a blank --note exits 2 naming --note."""
    code, _, err = cli(
        "resolve", "c2", "--as", "error", "--note", "  ", "--by", "dana", "--db", str(db)
    )  # fmt: skip
    assert code == 2
    assert "--note" in err


def test_resolve_settles_an_unknown_call_and_audits_who_and_why(db: Path) -> None:
    """resolve settles an unknown call, audits who and the note; the ledger still verifies."""
    code, out, _ = cli(
        "resolve", "c2", "--as", "error", "--note", "no charge in Stripe", "--by", "dana",
        "--db", str(db), "--json",
    )  # fmt: skip
    assert code == 0
    assert json.loads(out)["state"] == "error"
    ledger = SQLiteLedger(db)
    last = [r for r in ledger.audit() if r.kind != "journal.checkpoint"][-1]
    assert last.data["actor"] == "dana"
    assert last.data["note"] == "no charge in Stripe"
    assert ledger.verify().ok
    ledger.close()


def test_resolve_refuses_a_call_that_is_not_unknown(db: Path) -> None:
    """resolve of a call that is not unknown exits 1 saying only an unknown call can be."""
    code, _, err = cli("resolve", "c1", "--as", "ok", "--note", "n", "--by", "d", "--db", str(db))
    assert code == 1
    assert "only an unknown call" in err


def test_bad_input_exits_2(db: Path, tmp_path: Path) -> None:
    """An unknown call, a missing ledger file (not created) or a bad --as value exits 2."""
    assert cli("show", "nope", "--db", str(db))[0] == 2
    assert cli("list", "--db", str(tmp_path / "missing.db"))[0] == 2
    assert not (tmp_path / "missing.db").exists()
    assert cli("resolve", "c2", "--as", "maybe", "--note", "n", "--db", str(db))[0] == 2


def test_a_call_id_in_several_runs_needs_run(tmp_path: Path) -> None:
    """show of a call id found in two runs exits 2 asking for --run; with --run it exits 0."""
    path = tmp_path / "two.db"
    ledger = SQLiteLedger(path)
    populate(ledger, run_id="run-1")
    populate(ledger, run_id="run-2")
    ledger.close()
    code, _, err = cli("show", "c1", "--db", str(path))
    assert code == 2
    assert "--run" in err
    assert cli("show", "c1", "--db", str(path), "--run", "run-2")[0] == 0


def test_the_cli_reads_a_postgres_ledger(pg_dsn: str) -> None:
    """ledger list --dsn reads a PostgreSQL ledger's three calls."""
    from callgate.ledger import PostgresLedger

    ledger = PostgresLedger(pg_dsn)
    populate(ledger)
    ledger.close()
    code, out, _ = cli("list", "--dsn", pg_dsn, "--json")
    assert code == 0
    assert len(json.loads(out)) == 3


def test_an_export_is_checked_without_callgate_by_the_documented_recipe(
    db: Path, tmp_path: Path
) -> None:
    """Every exported line carries its hashed text and names its chain, and re-hashing it with
    hashlib alone (the recipe in docs/ledger.md) gives its hash and links it to the line before
    it in its chain."""
    import hashlib

    ledger = SQLiteLedger(db)
    populate(ledger, run_id="run-2")
    ledger.close()
    target = tmp_path / "audit.jsonl"
    code, _, _ = cli("export", "--db", str(db), "--output", str(target))
    assert code == 0
    records = [json.loads(line) for line in target.read_text().splitlines()]
    chains: dict[str, str] = {}
    for r in records:
        data = r["data_text"]
        assert {k: v for k, v in json.loads(data).items() if k != "@root"} == r["data"]
        cid = "-" if r["call_id"] is None else f"{len(r['call_id'])}:{r['call_id']}"
        blob = (
            f"{r['prev_hash']}|{r['seq']}|{r['at']!r}|{len(r['kind'])}:{r['kind']}|"
            f"{len(r['run_id'])}:{r['run_id']}|{cid}|{data}"
        )
        assert hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest() == r["hash"]
        assert r["prev_hash"] == chains.get(r["chain"], "0" * 64), r["seq"]
        chains[r["chain"]] = r["hash"]
    assert {"r:run-1", "r:run-2"} <= set(chains)
