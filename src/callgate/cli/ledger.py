"""``callgate ledger``: list, show, export, verify and resolve what the ledger recorded.

The ledger is ``--db PATH`` (a SQLite file; default ``$CALLGATE_DB`` or
``./callgate.db``) or ``--dsn DSN`` (PostgreSQL; default ``$CALLGATE_DSN``).

Reading commands (``list``, ``show``, ``export``, ``verify``) open the file
read-only: they never create, migrate or lock it, and a writer in another
process does not make them wait. Every value is printed as plain text
(`callgate.cli.plain`): markup in a model's argument is shown, not obeyed, and
control characters are shown as escapes.

Exit codes:
    0  success (``verify``: the audit chain is intact)
    1  the command ran and found a problem: ``verify`` found an edited,
       deleted or truncated record; ``resolve`` refused (the call is not unknown)
    2  bad usage or input: no ledger there, a file that is not a callgate
       ledger (another application's database, an empty file), no such call,
       an ambiguous call id
    3  the ledger could not be read: the database is damaged (or failed: an
       I/O error, a lock held too long); the one-line error says which
"""

from __future__ import annotations

import os
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from callgate.cli.extras import require
from callgate.cli.plain import cell, console, fail, plain, plain_json
from callgate.ledger import CallRecord, CallState, Ledger, LedgerError
from callgate.ledger.chains import chain_of
from callgate.ledger.sqlite import DEFAULT_PATH, SQLiteLedger

__all__ = ["app"]

EXIT_CODES = (
    "Exit codes: 0 success; 1 a problem found (verify: the audit chain was edited, cut or "
    "rewritten; resolve: refused); 2 bad usage or input (no ledger there, a file that is not "
    "a callgate ledger, no such call); 3 the ledger could not be read (the database is "
    "damaged, or failed)."
)

app = typer.Typer(
    name="ledger",
    help="Inspect, export, verify and resolve the ledger of calls.\n\n"
    "Reading commands open the ledger read-only: they never create, migrate or lock it. "
    "Stored values are printed as plain text.\n\n" + EXIT_CODES,
    no_args_is_help=True,
    add_completion=False,
)

OK, PROBLEM, USAGE, UNREADABLE = 0, 1, 2, 3

DbOption = Annotated[
    Path,
    typer.Option(
        "--db",
        envvar="CALLGATE_DB",
        help="The SQLite ledger file.",
        show_default=True,
    ),
]
DsnOption = Annotated[
    str | None,
    typer.Option(
        "--dsn",
        envvar="CALLGATE_DSN",
        help="A PostgreSQL ledger (libpq DSN or URL); overrides --db.",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
RunOption = Annotated[
    str | None, typer.Option("--run", help="The run id, when a call id is in several runs.")
]


class Resolution(StrEnum):
    """What a person found out about an unknown call."""

    ok = "ok"
    error = "error"


class ExportFormat(StrEnum):
    """Formats of ``ledger export``."""

    jsonl = "jsonl"


def bad_usage(message: str, code: int = USAGE) -> typer.Exit:
    return fail(message, code)


def require_postgres() -> None:
    """Exit 2 naming the ``postgres`` extra unless psycopg and its pool import (a
    missing driver is not a damaged ledger)."""
    require("postgres", "a PostgreSQL ledger (--dsn)", "psycopg", "psycopg_pool")


def _read_errors() -> tuple[type[BaseException], ...]:
    """What reading a damaged or failing database raises: the driver's errors, and
    what decoding a garbled record raises."""
    errors: tuple[type[BaseException], ...] = (
        sqlite3.Error,
        LedgerError,
        ValueError,
        TypeError,
        OverflowError,
    )
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None:
        errors += (psycopg.Error,)
    return errors


def _unreadable(db: Path | None, exc: BaseException) -> typer.Exit:
    """Exit 3: the ledger at ``db`` (None: the PostgreSQL ledger) could not be read."""
    cause = exc.__cause__ if isinstance(exc, LedgerError) and exc.__cause__ else exc
    if db is None:
        where, advice = "the PostgreSQL ledger (--dsn)", "check the database and the connection"
    else:
        where = f"the ledger at {db}"
        advice = f"check it with: sqlite3 {db} 'PRAGMA integrity_check', or restore a backup"
    return bad_usage(
        f"cannot read {where}: it is damaged or the database failed ({cause}); {advice}",
        UNREADABLE,
    )


def _connect(db: Path, dsn: str | None, *, write: bool, dsn_hint: bool) -> Ledger:
    if dsn:
        require_postgres()
        from callgate.ledger.postgres import PostgresLedger

        # Reading never creates or migrates: an existing ledger, in read-only sessions.
        # Writing (resolve, approve, deny) acts on an existing ledger too: check first, so
        # no command creates callgate's tables in a database that is not a ledger.
        if write:
            PostgresLedger(dsn, worker="callgate-cli", read_only=True).close()
        return PostgresLedger(dsn, worker="callgate-cli", read_only=not write)
    from callgate.ledger.sqlite import SQLiteLedger

    check_ledger(db, dsn_hint=dsn_hint)
    if not write:
        return SQLiteLedger(db, worker="callgate-cli", read_only=True)
    return SQLiteLedger(db, worker="callgate-cli")


def check_ledger(db: Path, *, missing_ok: bool = False, dsn_hint: bool = True) -> None:
    """Exit 2 unless ``db`` is a callgate ledger (or, ``missing_ok``, absent or empty:
    a ledger may be created there); exit 3 if it cannot be read. Opens it read-only."""
    from callgate.ledger.sqlite import SQLiteLedger

    if missing_ok and (not db.exists() or (db.is_file() and db.stat().st_size == 0)):
        return
    if not db.is_file():
        hint = ", or --dsn for PostgreSQL" if dsn_hint else ""
        raise bad_usage(f"no ledger at {db}; pass --db PATH (or set CALLGATE_DB){hint}")
    try:
        SQLiteLedger(db, read_only=True).close()
    except LedgerError as exc:
        if exc.__cause__ is not None:  # the database failed, not the file's kind
            raise _unreadable(db, exc) from None
        raise bad_usage(
            f"{exc}; pass --db PATH of a callgate ledger (or set CALLGATE_DB)"
        ) from None


@contextmanager
def open_ledger(
    db: Path, dsn: str | None, *, write: bool = False, dsn_hint: bool = True
) -> Iterator[Ledger]:
    """The ledger named on the command line; an existing one only (never a new, empty
    file, never another application's database). Read-only unless ``write``."""
    where = None if dsn else db
    try:
        ledger = _connect(db, dsn, write=write, dsn_hint=dsn_hint)
    except LedgerError as exc:
        if exc.__cause__ is not None:  # the database failed, not the file's kind
            raise _unreadable(where, exc) from None
        raise bad_usage(str(exc)) from None
    errors = _read_errors()
    try:
        yield ledger
    except errors as exc:
        raise _unreadable(where, exc) from None
    finally:
        try:
            ledger.close()
        except errors as exc:
            if write:  # a reader has nothing left to lose; a writer must hear it
                raise _unreadable(where, exc) from None


def _find(ledger: Ledger, call_id: str, run_id: str | None) -> CallRecord:
    if run_id is not None:
        found = ledger.get_call(run_id, call_id)
        if found is None:
            raise bad_usage(f"no call '{call_id}' in run '{run_id}'; see 'callgate ledger list'")
        return found
    matches = ledger.calls(call_id=call_id)
    if not matches:
        raise bad_usage(f"no call '{call_id}' in the ledger; see 'callgate ledger list'")
    if len(matches) > 1:
        runs = ", ".join(c.run_id for c in matches[:5])
        raise bad_usage(f"call id '{call_id}' is in several runs ({runs}); pass --run RUN_ID")
    return matches[0]


def format_when(at: float) -> str:
    try:
        return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")
    except (TypeError, ValueError, OverflowError, OSError):
        return plain(at)  # a damaged record: show what is stored


def _call_dict(call: CallRecord) -> dict[str, Any]:
    data = asdict(call)
    data["state"] = call.state.value
    data["effects"] = list(call.effects)
    return data


def print_json(value: Any) -> None:
    sys.stdout.write(plain_json(value, indent=2) + "\n")


_STATE_STYLE = {
    "ok": "green",
    "error": "yellow",
    "unknown": "bold red",
    "rejected": "dim",
    "pending": "cyan",
    "running": "magenta",
}


@app.command("list")
def list_calls(
    db: DbOption = Path(DEFAULT_PATH),
    dsn: DsnOption = None,
    state: Annotated[
        CallState | None, typer.Option("--state", help="Only calls in this state.")
    ] = None,
    run: RunOption = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Show the newest N.")] = 50,
    as_json: JsonOption = False,
) -> None:
    """List calls, newest last: state, tool, who decided, attempts."""
    with open_ledger(db, dsn) as ledger:
        calls = list(ledger.calls(run_id=run, state=state, newest=limit))
        if as_json:
            print_json([_call_dict(c) for c in calls])
            return
        table = Table(title=f"{len(calls)} call(s)", title_justify="left")
        for column in (
            "updated (UTC)", "run", "call", "tool", "state", "stage", "tries", "decided by"
        ):  # fmt: skip
            table.add_column(column, overflow="fold")
        for c in calls:
            table.add_row(
                format_when(c.updated_at),
                cell(c.run_id),
                cell(c.call_id),
                cell(c.tool),
                _state(c.state.value, c.reconciled),
                cell(c.stage),
                cell(c.attempts),
                cell(c.decided_by or ""),
            )
        console().print(table)


def _state(state: str, reconciled: bool) -> Text:
    return cell(state + (" (reconciled)" if reconciled else ""), style=_STATE_STYLE.get(state, ""))


@app.command()
def show(
    call_id: Annotated[str, typer.Argument(help="The call id.")],
    db: DbOption = Path(DEFAULT_PATH),
    dsn: DsnOption = None,
    run: RunOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one call: its decision, every attempt, and its audit records."""
    with open_ledger(db, dsn) as ledger:
        call = _find(ledger, call_id, run)
        attempts = ledger.attempts(call.run_id, call.call_id)
        audit = ledger.records(run_id=call.run_id, call_id=call.call_id)
        if as_json:
            print_json(
                {
                    "call": _call_dict(call),
                    "attempts": [asdict(a) for a in attempts],
                    "audit": [{**asdict(r), "data": dict(r.data)} for r in audit],
                }
            )
            return
        _print_call(call, attempts, audit)


def _print_call(call: CallRecord, attempts: Any, audit: Any) -> None:
    out = console()
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    for label, value in (
        ("call", cell(f"{call.call_id}  (run {call.run_id})")),
        ("tool", cell(f"{call.tool}  {call.tool_version or ''}")),
        ("state", _state(call.state.value, call.reconciled)),
        ("stage", cell(call.stage)),
        ("principal", cell(call.principal)),
        ("decided by", cell(call.decided_by or "")),
        ("effects", cell(", ".join(map(str, call.effects)))),
        ("arguments", cell(call.arguments, multiline=True)),
        ("idempotency key", cell(call.idempotency_key or "")),
        ("message", cell(call.message, multiline=True)),
    ):
        head.add_row(label, value)
    out.print(head)
    tries = Table(title="attempts", title_justify="left")
    for column in ("#", "started (UTC)", "worker", "status", "error"):
        tries.add_column(column, overflow="fold")
    for a in attempts:
        o = a.outcome
        tries.add_row(
            cell(a.attempt),
            format_when(a.started_at),
            cell(a.worker),
            cell((o.status + (" (reconciled)" if o.reconciled else "")) if o else "running"),
            cell((o.error or "") if o else "", multiline=True),
        )
    out.print(tries)
    trail = Table(title="audit", title_justify="left")
    for column in ("seq", "at (UTC)", "kind", "actor"):
        trail.add_column(column)
    for r in audit:
        trail.add_row(cell(r.seq), format_when(r.at), cell(r.kind), cell(r.data.get("actor", "")))
    out.print(trail)


@app.command()
def export(
    db: DbOption = Path(DEFAULT_PATH),
    dsn: DsnOption = None,
    format: Annotated[
        ExportFormat, typer.Option("--format", help="Output format.")
    ] = ExportFormat.jsonl,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """Export the audit trail, one JSON record per line, with its hash chain.

    Each line carries the data exactly as stored and hashed (``data_text``) and names the
    chain its ``prev_hash`` links into (``chain``: ``r:`` and the run id); docs/ledger.md
    says how to check the hashes without callgate.

    Control and other invisible characters in stored strings are written as
    \\uXXXX escapes: each line decodes to exactly the stored record.
    """
    with open_ledger(db, dsn) as ledger:
        records = ledger.audit()
        head = ledger.audit_head()
        whole = [r.seq for r in records] == list(range(1, len(records) + 1)) and (
            head is None or head[0] == len(records)
        )
        if not whole and isinstance(ledger, SQLiteLedger):
            # Fewer records than the head says: a damaged page can end a scan early without
            # an error, so ask SQLite; a damaged file is exit 3, never a silent short export.
            found = [str(row[0]) for row in ledger._query_once("PRAGMA quick_check")]
            if found != ["ok"]:
                raise _unreadable(db, LedgerError("; ".join(found[:3])))
        lines = [
            plain_json(
                {
                    "seq": r.seq,
                    "at": r.at,
                    "kind": r.kind,
                    "run_id": r.run_id,
                    "call_id": r.call_id,
                    "data": dict(r.data),
                    "data_text": r.data_json,
                    "chain": chain_of(r),
                    "prev_hash": r.prev_hash,
                    "hash": r.hash,
                }
            )
            + "\n"
            for r in records
        ]
    if output is None:
        sys.stdout.writelines(lines)
    else:
        with open(output, "w", encoding="utf-8") as f:
            f.writelines(lines)


@app.command()
def verify(
    db: DbOption = Path(DEFAULT_PATH),
    dsn: DsnOption = None,
    expect_head: Annotated[
        str | None,
        typer.Option(
            "--expect-head",
            help="A head hash recorded earlier elsewhere: it must still be a record of the "
            "chain (the ledger may have grown since); detects a rewritten chain.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Check the audit chain: exit 1 if a record was edited, deleted or cut off."""
    with open_ledger(db, dsn) as ledger:
        check = ledger.verify()
        known = expect_head is None or any(r.hash == expect_head for r in ledger.audit())
        if isinstance(ledger, SQLiteLedger):
            # The chain covers the audit table; damage to any other page of the file is
            # SQLite's to find (read-only, no lock): a damaged file is exit 3, never "ok".
            found = [str(row[0]) for row in ledger._query_once("PRAGMA quick_check")]
            if found != ["ok"]:
                raise _unreadable(db, LedgerError("; ".join(found[:3])))
    problems = list(check.problems)
    if check.ok and not known:
        problems.append(
            f"no record of the chain has the expected hash {expect_head}: "
            "the trail was rewritten or is not the one recorded"
        )
    ok = not problems
    if as_json:
        print_json(
            {
                "ok": ok,
                "records": check.records,
                "head": check.head,
                "problems": problems,
                "first_bad_seq": check.first_bad_seq,
            }
        )
    elif ok:
        line = Text("ok", style="green")
        line.append(plain(f": {check.records} audit record(s), chain intact; head {check.head}"))
        console().print(line, soft_wrap=True)
    else:
        err = console(stderr=True)
        line = Text("TAMPERED", style="red")
        line.append(f": {len(problems)} problem(s)")
        err.print(line, soft_wrap=True)
        for problem in problems:
            err.print(cell(f"  - {problem}"), soft_wrap=True)
    raise typer.Exit(OK if ok else PROBLEM)


@app.command()
def migrate(
    db: DbOption = Path(DEFAULT_PATH),
    dsn: DsnOption = None,
    as_json: JsonOption = False,
) -> None:
    """Bring a ledger written by an older callgate to this version's schema, then verify it.

    One transaction: the old rows move into the journal (nothing is dropped from the
    audit trail). Exit 1 if the migrated ledger does not verify.
    """
    from callgate.ledger.upgrade import migrate_postgres, migrate_sqlite

    if dsn:
        require_postgres()
    try:
        done = migrate_postgres(dsn) if dsn else migrate_sqlite(db)
    except LedgerError as exc:
        if exc.__cause__ is not None:
            raise _unreadable(None if dsn else db, exc) from None
        raise bad_usage(str(exc)) from None
    except _read_errors() as exc:
        raise _unreadable(None if dsn else db, exc) from None
    ok = done.check is None or done.check.ok
    problems = list(done.check.problems) if done.check is not None else []
    if as_json:
        print_json(
            {
                "from_version": done.from_version,
                "to_version": done.to_version,
                "calls": done.calls,
                "keys": done.keys,
                "approvals": done.approvals,
                "approved_without_decision": list(done.approved_without_decision),
                "verified": ok,
                "problems": problems,
            }
        )
    elif done.from_version >= done.to_version:
        console().print(
            plain(f"already at schema version {done.to_version}: nothing to migrate"),
            soft_wrap=True,
        )
    else:
        console().print(
            plain(
                f"migrated from schema version {done.from_version} to {done.to_version}: "
                f"{done.calls} call(s), {done.keys} idempotency key(s) and {done.approvals} "
                "approval(s) moved into the journal"
            ),
            soft_wrap=True,
        )
        for approval_id in done.approved_without_decision:
            console().print(
                cell(
                    f"  approval {approval_id} was approved in the old table but its decision "
                    "is not in the old audit trail: it is pending again; decide it with "
                    "'callgate approvals approve/deny'"
                ),
                soft_wrap=True,
            )
    if not ok:
        err = console(stderr=True)
        err.print(Text("TAMPERED", style="red"), plain(": the migrated ledger does not verify"))
        for problem in problems:
            err.print(cell(f"  - {problem}"), soft_wrap=True)
    raise typer.Exit(OK if ok else PROBLEM)


@app.command()
def resolve(
    call_id: Annotated[str, typer.Argument(help="The unknown call to resolve.")],
    as_: Annotated[
        Resolution,
        typer.Option("--as", help="What happened: ok (the effect happened) or error (it did not)."),
    ],
    note: Annotated[
        str, typer.Option("--note", help="How you know: the record you checked, a ticket.")
    ],
    by: Annotated[
        str | None, typer.Option("--by", help="Who resolves it (default: $USER).")
    ] = None,
    db: DbOption = Path(DEFAULT_PATH),
    dsn: DsnOption = None,
    run: RunOption = None,
    as_json: JsonOption = False,
) -> None:
    """Settle an unknown call as ok or error after checking the real record; audited."""
    person = by or os.environ.get("USER") or os.environ.get("LOGNAME") or ""
    if not person.strip():
        raise bad_usage("say who resolves the call: --by NAME")
    if not note.strip():
        raise bad_usage("say how you know the outcome: --note 'the record you checked'")
    with open_ledger(db, dsn, write=True) as ledger:
        call = _find(ledger, call_id, run)
        try:
            settled = ledger.resolve(
                call.run_id, call.call_id, status=as_.value, by=person, note=note
            )
        except LedgerError as exc:
            raise bad_usage(str(exc), PROBLEM) from None
    if as_json:
        print_json(_call_dict(settled))
    else:
        line = cell(f"resolved {settled.call_id} (run {settled.run_id}) as ")
        line.append(settled.state.value, style="bold")
        line.append(plain(f", by {person}"))
        console().print(line, soft_wrap=True)
