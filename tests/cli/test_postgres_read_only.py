"""Reading a PostgreSQL ledger from the command line never writes to the database.

`callgate ledger list|show|export|verify --dsn DSN` and `callgate approvals list|show
--dsn DSN` open the database with `PostgresLedger(dsn, read_only=True)`: the schema is
checked, never created or migrated, and every session is read-only. Against a real
throwaway cluster (`pg_dsn`): another application's database and an empty one are
refused in one line (exit 2) and left exactly as they were; a callgate ledger is read.
"""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from callgate import Authority, Gate, Policy, Registry, ToolCall, allow, ask
from callgate.cli import app
from callgate.ledger import LedgerError
from callgate.ledger.sql_schema import SCHEMA_VERSION

psycopg = pytest.importorskip("psycopg")

pytestmark = pytest.mark.timeout(60)

runner = CliRunner()

READS = [
    ("ledger", "list"),
    ("ledger", "show", "c1"),
    ("ledger", "export"),
    ("ledger", "verify"),
    ("approvals", "list"),
    ("approvals", "show", "apr_1"),
]
"""Every command that only reads the ledger."""

_RELATIONS = """
SELECT n.nspname, c.relname, c.relkind
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
ORDER BY 1, 2
"""


def relations(dsn: str) -> list[tuple[Any, ...]]:
    """Every table, index, sequence and view in the database."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(_RELATIONS).fetchall()]


def state(dsn: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The database's relations and the rows of the foreign application's table."""
    found = relations(dsn)
    rows: list[tuple[Any, ...]] = []
    if ("public", "orders", "r") in found:
        with psycopg.connect(dsn, autocommit=True) as conn:
            rows = [tuple(r) for r in conn.execute("SELECT * FROM orders ORDER BY id")]
    return found, rows


def invoke(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), env={"COLUMNS": "2000"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def foreign(pg_dsn: str) -> str:
    """Another application's database: a table of its own, with rows."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id integer PRIMARY KEY, item text NOT NULL)")
        conn.execute("INSERT INTO orders VALUES (1, 'boots'), (2, 'socks')")
    return pg_dsn


@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_a_read_command_leaves_another_applications_database_unchanged(
    foreign: str, command: tuple[str, ...]
) -> None:
    """Refused in one line naming what was found and what was expected (exit 2, as for a
    SQLite file that is not a ledger); no table, index or row added, changed or removed."""
    before = state(foreign)
    code, out, err = invoke(*command, "--dsn", foreign)
    assert code == 2, out + err
    assert state(foreign) == before
    line = err.strip()
    assert "\n" not in line, err
    assert line.startswith("error: the PostgreSQL database '"), line
    assert "is not a callgate ledger: it has no schema_version table" in line
    assert "(its tables: public.orders)" in line
    assert line.endswith("check that the DSN names the database of a callgate ledger")
    assert "Traceback" not in out + err


@pytest.mark.parametrize("command", READS, ids=" ".join)
def test_a_read_command_refuses_an_empty_database_and_creates_nothing(
    pg_dsn: str, command: tuple[str, ...]
) -> None:
    """A read command on an empty PostgreSQL database exits 2, one line, and creates no table."""
    code, out, err = invoke(*command, "--dsn", pg_dsn)
    assert code == 2, out + err
    assert relations(pg_dsn) == []
    line = err.strip()
    assert "\n" not in line, err
    assert "is not a callgate ledger: it has no tables (expected a database written by" in line


def test_read_only_finds_the_dsn_in_the_environment(pg_dsn: str) -> None:
    """`$CALLGATE_DSN` is the same as `--dsn`: read-only too."""
    result = runner.invoke(app, ["ledger", "list"], env={"CALLGATE_DSN": pg_dsn})
    assert result.exit_code == 2, result.output
    assert relations(pg_dsn) == []


@pytest.fixture
def ledger_dsn(pg_dsn: str) -> str:
    """A real callgate ledger: a call that ran, one refused, one waiting for a person."""
    from callgate.ledger.postgres import PostgresLedger

    registry = Registry()

    @registry.tool(effects="read:notes", risk="read")
    def look(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    @registry.tool(effects="write:notes", risk="write")
    def wipe(q: str) -> str:
        """Wipe a note (a person approves)."""
        return "wiped"

    gate = Gate(
        registry,
        policy=Policy([allow("look", name="reads"), ask("wipe", name="wipes ask")]),
        ledger=PostgresLedger(pg_dsn, worker="test"),
    )
    run = gate.run(authority=Authority(principal="alice", grants=["read:*", "write:*"]))
    run.submit([ToolCall(id="c1", name="look", arguments={"q": "[/x] boots"})])
    [pending] = run.submit([ToolCall(id="c2", name="wipe", arguments={"q": "n1"})])
    assert pending.approval_id is not None
    gate.ledger.close()
    return pg_dsn


def test_read_commands_read_a_postgresql_ledger_and_change_nothing(ledger_dsn: str) -> None:
    """list, show, export, verify and the approvals' list and show work on a real ledger,
    and the database holds the same relations afterwards (nothing migrated or added)."""
    before = relations(ledger_dsn)
    with psycopg.connect(ledger_dsn, autocommit=True) as conn:
        audit_before = conn.execute("SELECT count(*) FROM journal").fetchone()
        (approval_id,) = conn.execute("SELECT id FROM approvals").fetchone()
    dsn = ["--dsn", ledger_dsn]

    code, out, _ = invoke("ledger", "list", *dsn)
    assert code == 0, out
    assert "look" in out
    assert "wipe" in out
    code, out, _ = invoke("ledger", "show", "c1", *dsn)
    assert code == 0, out
    assert "[/x] boots" in out
    code, out, _ = invoke("ledger", "export", *dsn)
    assert code == 0, out
    assert len(out.splitlines()) >= 2
    code, out, _ = invoke("ledger", "verify", *dsn)
    assert code == 0, out
    assert "chain intact" in out
    code, out, _ = invoke("approvals", "list", *dsn)
    assert code == 0, out
    assert approval_id in out
    code, out, _ = invoke("approvals", "show", approval_id, *dsn)
    assert code == 0, out
    assert "wipe" in out

    assert relations(ledger_dsn) == before
    with psycopg.connect(ledger_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM journal").fetchone() == audit_before


def test_a_read_only_ledger_cannot_write(ledger_dsn: str) -> None:
    """Every session of a read-only ledger is read-only in the database itself: a write
    fails there, whatever the code asks."""
    from callgate.ledger.postgres import PostgresLedger

    ledger = PostgresLedger(ledger_dsn, read_only=True)
    try:
        assert ledger._query("SHOW default_transaction_read_only") == [("on",)]
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            ledger.record_event("test.event", run_id="r", call_id=None, data={})
        assert [c.call_id for c in ledger.calls()] == ["c1", "c2"]
    finally:
        ledger.close()
    with psycopg.connect(ledger_dsn, autocommit=True) as conn:
        kinds = [r[0] for r in conn.execute("SELECT kind FROM journal")]
    assert "test.event" not in kinds


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            f"DELETE FROM schema_version WHERE version = {SCHEMA_VERSION}",
            f"has schema version {SCHEMA_VERSION - 1}, older than this",
        ),
        (
            f"INSERT INTO schema_version VALUES ({SCHEMA_VERSION + 1}, 0)",
            f"has schema version {SCHEMA_VERSION + 1}, newer than this",
        ),
    ],
    ids=["older", "newer"],
)
def test_a_ledger_of_another_schema_version_is_refused_and_not_migrated(
    ledger_dsn: str, change: str, message: str
) -> None:
    """A PostgreSQL ledger of an older or newer schema exits 2 naming it; nothing is migrated."""
    with psycopg.connect(ledger_dsn, autocommit=True) as conn:
        conn.execute(change)
        versions = conn.execute("SELECT version FROM schema_version ORDER BY 1").fetchall()
    before = relations(ledger_dsn)
    code, out, err = invoke("ledger", "list", "--dsn", ledger_dsn)
    assert code == 2, out + err
    assert message in err
    assert "\n" not in err.strip()
    assert relations(ledger_dsn) == before
    with psycopg.connect(ledger_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT version FROM schema_version ORDER BY 1").fetchall() == versions


def test_the_library_refuses_a_foreign_database_by_name(foreign: str) -> None:
    """`PostgresLedger(dsn, read_only=True)` raises `LedgerError` (not caused by a driver
    error: the database answered, and it is not a ledger)."""
    from callgate.ledger.postgres import PostgresLedger

    before = state(foreign)
    with pytest.raises(LedgerError, match="is not a callgate ledger") as raised:
        PostgresLedger(foreign, read_only=True)
    assert raised.value.__cause__ is None
    assert state(foreign) == before


WRITES = [
    ("ledger", "resolve", "c1", "--as", "ok", "--note", "checked", "--by", "dana"),
    ("approvals", "approve", "apr_1", "--by", "dana"),
    ("approvals", "deny", "apr_1", "--by", "dana", "--reason", "no"),
]
"""Commands that change an existing ledger."""


@pytest.mark.parametrize("command", WRITES, ids=lambda c: " ".join(c[:2]))
def test_a_write_command_creates_no_ledger_in_another_applications_database(
    foreign: str, command: tuple[str, ...]
) -> None:
    """A write command on another application's database exits 2 and changes nothing."""
    before = state(foreign)
    code, out, err = invoke(*command, "--dsn", foreign)
    assert code == 2, out + err
    assert state(foreign) == before
    assert "is not a callgate ledger" in err
