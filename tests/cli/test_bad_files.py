"""Bad files: the CLI never creates, migrates or locks a ledger to read it, and a file it
cannot read is a one-line error with its own exit code.

* Another application's SQLite file, an empty file or a file that is not a database:
  exit 2 with one line naming the file and what was expected; the file is unchanged
  byte for byte (no tables added, no switch to WAL), and no file appears beside it.
* A damaged ledger (bytes overwritten in the middle of the file): exit 3 with one line.
* A read while another process holds the write lock succeeds: reads need no lock.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from callgate.cli import app
from callgate.ledger import CallRecord, CallState, SQLiteLedger

runner = CliRunner()

NOT_A_LEDGER, UNREADABLE = 2, 3

READS = [
    ["ledger", "list"],
    ["ledger", "list", "--json"],
    ["ledger", "show", "c1"],
    ["ledger", "verify"],
    ["ledger", "export"],
    ["approvals", "list"],
    ["approvals", "show", "apr_1"],
    ["run", "replay", "run-1"],
]
WRITES = [
    ["ledger", "resolve", "c1", "--as", "ok", "--note", "checked", "--by", "dana"],
    ["approvals", "approve", "apr_1", "--by", "maria"],
    ["approvals", "deny", "apr_1", "--by", "maria", "--reason", "no"],
]


def name(args: list[str]) -> str:
    return " ".join(args[:3])


def invoke(args: list[str], db: Path) -> tuple[int, str, str]:
    result = runner.invoke(app, [*args, "--db", str(db)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout, result.stderr


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def foreign_file(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.executemany("INSERT INTO notes (body) VALUES (?)", [("milk",), ("eggs",)])
    conn.commit()
    conn.close()
    return path


def text_file(path: Path) -> Path:
    path.write_text("name,amount\nalice,5\n" * 100)
    return path


def empty_file(path: Path) -> Path:
    path.touch()
    return path


KINDS = {"foreign": foreign_file, "empty": empty_file, "text": text_file}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("args", READS + WRITES, ids=name)
def test_a_file_that_is_not_a_ledger_is_refused_and_left_unchanged(
    tmp_path: Path, kind: str, args: list[str]
) -> None:
    """Every command refuses a file that is no ledger: its exit code, one line, file untouched."""
    folder = tmp_path / "data"
    folder.mkdir()
    path = KINDS[kind](folder / "app.db")
    before = snapshot(folder)

    code, out, err = invoke(args, path)

    assert code == NOT_A_LEDGER
    assert out == ""
    [line] = err.splitlines()
    assert str(path) in line
    assert "not a callgate ledger" in line
    assert snapshot(folder) == before  # same bytes, and no -wal, -shm or -journal beside it


def test_run_start_refuses_another_applications_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``callgate run`` creates a ledger where there is none, never inside someone else's."""
    (tmp_path / "bad_files_tools.py").write_text(
        "from callgate import Registry\nregistry = Registry()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]}
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"format": "openai_chat", "responses": [answer]}))
    path = foreign_file(tmp_path / "app.db")
    before = path.read_bytes()
    result = runner.invoke(
        app,
        ["run", "bad_files_tools:registry", "--model", f"scripted:{script}", "-m", "hi",
         "--db", str(path)],
    )  # fmt: skip
    assert result.exit_code == NOT_A_LEDGER
    assert "not a callgate ledger" in result.output
    assert path.read_bytes() == before


def test_run_with_bad_usage_reports_it_before_opening_the_ledger(tmp_path: Path) -> None:
    """A typo in the command line never touches the ledger (``./callgate.db`` by default)."""
    path = foreign_file(tmp_path / "app.db")
    result = runner.invoke(
        app, ["run", "nope.module:registry", "--model", "openai:x", "-m", "hi", "--db", str(path)]
    )
    assert result.exit_code == NOT_A_LEDGER
    assert "cannot import" in result.output


# -- a damaged ledger -------------------------------------------------------------------


def make_ledger(path: Path, calls: int = 300) -> Path:
    """A ledger of ``calls`` rejected calls, everything in the main file (no WAL left)."""
    ledger = SQLiteLedger(path)
    now = time.time()
    for n in range(calls):
        ledger.record_decision(
            CallRecord(
                run_id="run-1",
                call_id=f"c{n}",
                tool="charge",
                tool_version="v1",
                principal="alice",
                arguments=json.dumps({"amount": n, "note": "x" * 200}),
                state=CallState.REJECTED,
                stage="schema",
                message="amount is too large",
                created_at=now,
                updated_at=now,
            )
        )
    ledger.close()
    del ledger  # (before the fix, close() left the connection open until collected)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.execute("PRAGMA journal_mode=DELETE").fetchall()
    conn.close()
    return path


@pytest.fixture(scope="module")
def intact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_ledger(tmp_path_factory.mktemp("intact") / "ledger.db")


def damage(path: Path, start: float, end: float, fill: bytes = b"\xa5") -> None:
    data = bytearray(path.read_bytes())
    lo, hi = int(len(data) * start), int(len(data) * end)
    data[lo:hi] = (fill * (hi - lo))[: hi - lo]
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "args",
    [["ledger", "list"], ["ledger", "show", "c150"], ["ledger", "verify"], ["ledger", "export"]],
    ids=name,
)
def test_a_damaged_ledger_is_a_one_line_error_with_its_own_exit_code(
    tmp_path: Path, intact: Path, args: list[str]
) -> None:
    """A damaged ledger file is exit UNREADABLE with one line naming it, no traceback."""
    path = tmp_path / "ledger.db"
    shutil.copy(intact, path)
    # Most of the file: every command reads the journal, whose pages are most of it.
    damage(path, 0.15, 0.9)

    code, out, err = invoke(args, path)

    assert code == UNREADABLE
    [line] = err.splitlines()
    assert str(path) in line
    assert "damaged" in line
    assert "Traceback" not in out + err


def test_a_table_name_that_is_not_utf8_is_a_damaged_ledger(tmp_path: Path) -> None:
    """Found by the property below: a garbled schema record once escaped as a
    UnicodeDecodeError traceback."""
    path = make_ledger(tmp_path / "ledger.db", calls=3)
    data = path.read_bytes()
    at = data.index(b"tablecallscalls") + len(b"table")
    path.write_bytes(data[:at] + b"\xe6\xaa\x34\x05\x80" + data[at + len(b"calls") :])
    for args in (["ledger", "list"], ["approvals", "list"], ["run", "replay", "r"]):
        code, _, err = invoke(args, path)
        assert code == UNREADABLE
        [line] = err.splitlines()
        assert "damaged" in line


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    start=st.floats(0.0, 0.99),
    size=st.integers(1, 8192),
    fill=st.binary(min_size=1, max_size=8),
    args=st.sampled_from(
        [["ledger", "list"], ["ledger", "show", "c7"], ["ledger", "verify"], ["ledger", "export"]]
    ),
)
def test_whatever_bytes_are_damaged_no_command_prints_a_traceback(
    intact: Path, start: float, size: int, fill: bytes, args: list[str]
) -> None:
    """Property: any damage gives a result (0; 1 for a tampered chain) or a one-line
    error (2, 3), never a traceback."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ledger.db"
        shutil.copy(intact, path)
        length = path.stat().st_size
        damage(path, start, min(1.0, start + size / length), fill)
        code, _, err = invoke(args, path)
    assert code in (0, 1, 2, 3)
    if code in (2, 3):
        assert len(err.splitlines()) == 1, err


# -- reads take no lock -------------------------------------------------------------------

HOLD_THE_WRITE_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE calls SET message = 'being written' WHERE call_id = 'c1'")
print("locked", flush=True)
time.sleep(120)
"""


@pytest.mark.timeout(60)
def test_read_commands_succeed_while_another_process_holds_the_write_lock(
    tmp_path: Path,
) -> None:
    """Read commands exit 0 while another process holds the ledger's write lock."""
    path = make_ledger(tmp_path / "ledger.db", calls=3)
    writable = SQLiteLedger(path)  # back in WAL mode, as a running application has it
    writable.close()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_WRITE_LOCK, str(path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        for args in (
            ["ledger", "list", "--json"],
            ["ledger", "show", "c1"],
            ["ledger", "verify"],
            ["ledger", "export"],
            ["approvals", "list"],
        ):
            code, _, err = invoke(args, path)
            assert code == 0, (args, err)
        assert holder.poll() is None  # the lock was held all along
    finally:
        holder.kill()
        holder.wait()
    assert "being written" not in invoke(["ledger", "list", "--json"], path)[1]


def test_a_read_command_neither_migrates_nor_switches_a_ledger_to_wal(tmp_path: Path) -> None:
    """A callgate ledger in rollback-journal mode stays so; ``list`` reads it as it is."""
    path = make_ledger(tmp_path / "ledger.db", calls=3)
    before = snapshot(tmp_path)
    code, out, _ = invoke(["ledger", "list", "--json"], path)
    assert code == 0
    assert '"c2"' in out
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("INSERT INTO schema_version (version, applied_at) VALUES (99, 0)", "version 99, newer"),
        ("DELETE FROM schema_version WHERE version > 1", "version 1, older"),
    ],
)
def test_an_older_or_newer_schema_is_named_not_migrated(
    tmp_path: Path, change: str, named: str
) -> None:
    """An older or newer schema version is refused, its version named; the file is untouched."""
    path = make_ledger(tmp_path / "ledger.db", calls=1)
    conn = sqlite3.connect(path)
    conn.execute(change)
    conn.commit()
    conn.close()
    before = snapshot(tmp_path)
    code, _, err = invoke(["ledger", "list"], path)
    assert code == NOT_A_LEDGER
    [line] = err.splitlines()
    assert named in line
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("group", ["ledger", "approvals"])
def test_help_documents_the_exit_codes(group: str) -> None:
    """ledger --help and approvals --help list the exit codes, not-a-ledger and damaged."""
    result = runner.invoke(app, [group, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for text in ("Exit codes", "not a callgate ledger", "3"):
        assert text in result.output
    assert "damaged" in result.output


def test_verify_finds_damage_outside_the_audit_chain(tmp_path: Path, intact: Path) -> None:
    """The chain covers the audit table; a damaged page of the calls table is still found:
    exit 3 and one line, never "ok"."""
    path = tmp_path / "ledger.db"
    shutil.copy(intact, path)
    conn = sqlite3.connect(path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    [root] = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'calls'").fetchone()
    conn.close()
    data = bytearray(path.read_bytes())
    start = (root - 1) * page_size
    data[start : start + 16] = b"\xa5" * 16  # the page header of the calls table's root
    path.write_bytes(bytes(data))

    code, out, err = invoke(["ledger", "verify"], path)

    assert code == UNREADABLE, out + err
    [line] = err.splitlines()
    assert "damaged" in line
    assert "Traceback" not in out + err
