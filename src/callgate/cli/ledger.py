"""``callgate ledger``: list, show, export, verify and resolve what the ledger recorded.

The ledger is ``--db PATH`` (a SQLite file; default ``$CALLGATE_DB`` or
``./callgate.db``) or ``--dsn DSN`` (PostgreSQL; default ``$CALLGATE_DSN``).

Exit codes:
    0  success (``verify``: the audit chain is intact)
    1  the command ran and found a problem: ``verify`` found an edited,
       deleted or truncated record; ``resolve`` refused (the call is not unknown)
    2  bad usage or input: no ledger there, no such call, an ambiguous call id
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from callgate.ledger import CallRecord, CallState, Ledger, LedgerError
from callgate.ledger.sqlite import DEFAULT_PATH

__all__ = ["app"]

app = typer.Typer(
    name="ledger",
    help="Inspect, export, verify and resolve the ledger of calls.",
    no_args_is_help=True,
    add_completion=False,
)

OK, PROBLEM, USAGE = 0, 1, 2

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


def _fail(message: str, code: int = USAGE) -> typer.Exit:
    Console(stderr=True).print(f"[red]error:[/red] {message}", highlight=False)
    return typer.Exit(code)


@contextmanager
def _open(db: Path, dsn: str | None) -> Iterator[Ledger]:
    """The ledger named on the command line; an existing one only (never a new, empty file)."""
    ledger: Ledger
    try:
        if dsn:
            from callgate.ledger.postgres import PostgresLedger

            ledger = PostgresLedger(dsn, worker="callgate-cli")
        else:
            if not db.is_file():
                raise _fail(
                    f"no ledger at {str(db)!r}; pass --db PATH (or set CALLGATE_DB), "
                    "or --dsn for PostgreSQL"
                )
            from callgate.ledger.sqlite import SQLiteLedger

            ledger = SQLiteLedger(db, worker="callgate-cli")
    except LedgerError as exc:
        raise _fail(str(exc)) from None
    try:
        yield ledger
    finally:
        ledger.close()


def _find(ledger: Ledger, call_id: str, run_id: str | None) -> CallRecord:
    if run_id is not None:
        found = ledger.get_call(run_id, call_id)
        if found is None:
            raise _fail(f"no call {call_id!r} in run {run_id!r}; see 'callgate ledger list'")
        return found
    matches = ledger.calls(call_id=call_id)
    if not matches:
        raise _fail(f"no call {call_id!r} in the ledger; see 'callgate ledger list'")
    if len(matches) > 1:
        runs = ", ".join(c.run_id for c in matches[:5])
        raise _fail(f"call id {call_id!r} is in several runs ({runs}); pass --run RUN_ID")
    return matches[0]


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _call_dict(call: CallRecord) -> dict[str, Any]:
    data = asdict(call)
    data["state"] = call.state.value
    data["effects"] = list(call.effects)
    return data


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n")


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
    with _open(db, dsn) as ledger:
        calls = list(ledger.calls(run_id=run, state=state))[-limit:]
    if as_json:
        _print_json([_call_dict(c) for c in calls])
        return
    table = Table(title=f"{len(calls)} call(s)", title_justify="left")
    for column in ("updated (UTC)", "run", "call", "tool", "state", "stage", "tries", "decided by"):
        table.add_column(column, overflow="fold")
    for c in calls:
        style = _STATE_STYLE.get(c.state.value, "")
        state_text = c.state.value + (" (reconciled)" if c.reconciled else "")
        table.add_row(
            _when(c.updated_at),
            c.run_id,
            c.call_id,
            c.tool,
            f"[{style}]{state_text}[/{style}]" if style else state_text,
            c.stage,
            str(c.attempts),
            c.decided_by or "",
        )
    Console().print(table)


@app.command()
def show(
    call_id: Annotated[str, typer.Argument(help="The call id.")],
    db: DbOption = Path(DEFAULT_PATH),
    dsn: DsnOption = None,
    run: RunOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one call: its decision, every attempt, and its audit records."""
    with _open(db, dsn) as ledger:
        call = _find(ledger, call_id, run)
        attempts = ledger.attempts(call.run_id, call.call_id)
        audit = [r for r in ledger.audit() if r.run_id == call.run_id and r.call_id == call.call_id]
    if as_json:
        _print_json(
            {
                "call": _call_dict(call),
                "attempts": [asdict(a) for a in attempts],
                "audit": [{**asdict(r), "data": dict(r.data)} for r in audit],
            }
        )
        return
    console = Console()
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    for label, value in (
        ("call", f"{call.call_id}  (run {call.run_id})"),
        ("tool", f"{call.tool}  {call.tool_version or ''}"),
        ("state", call.state.value + (" (reconciled)" if call.reconciled else "")),
        ("stage", call.stage),
        ("principal", call.principal),
        ("decided by", call.decided_by or ""),
        ("effects", ", ".join(call.effects)),
        ("arguments", call.arguments),
        ("idempotency key", call.idempotency_key or ""),
        ("message", call.message),
    ):
        head.add_row(label, value)
    console.print(head)
    tries = Table(title="attempts", title_justify="left")
    for column in ("#", "started (UTC)", "worker", "status", "error"):
        tries.add_column(column, overflow="fold")
    for a in attempts:
        o = a.outcome
        tries.add_row(
            str(a.attempt),
            _when(a.started_at),
            a.worker,
            (o.status + (" (reconciled)" if o.reconciled else "")) if o else "running",
            (o.error or "") if o else "",
        )
    console.print(tries)
    trail = Table(title="audit", title_justify="left")
    for column in ("seq", "at (UTC)", "kind", "actor"):
        trail.add_column(column)
    for r in audit:
        trail.add_row(str(r.seq), _when(r.at), r.kind, str(r.data.get("actor", "")))
    console.print(trail)


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
    """Export the audit trail, one JSON record per line, with its hash chain."""
    with _open(db, dsn) as ledger:
        records = ledger.audit()
    lines = (
        json.dumps(
            {
                "seq": r.seq,
                "at": r.at,
                "kind": r.kind,
                "run_id": r.run_id,
                "call_id": r.call_id,
                "data": dict(r.data),
                "prev_hash": r.prev_hash,
                "hash": r.hash,
            },
            ensure_ascii=False,
            default=str,
        )
        + "\n"
        for r in records
    )
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
    with _open(db, dsn) as ledger:
        check = ledger.verify()
        known = expect_head is None or any(r.hash == expect_head for r in ledger.audit())
    problems = list(check.problems)
    if check.ok and not known:
        problems.append(
            f"no record of the chain has the expected hash {expect_head}: "
            "the trail was rewritten or is not the one recorded"
        )
    ok = not problems
    if as_json:
        _print_json(
            {
                "ok": ok,
                "records": check.records,
                "head": check.head,
                "problems": problems,
                "first_bad_seq": check.first_bad_seq,
            }
        )
    elif ok:
        Console().print(
            f"[green]ok[/green]: {check.records} audit record(s), chain intact; head {check.head}",
            highlight=False,
        )
    else:
        console = Console(stderr=True)
        console.print(f"[red]TAMPERED[/red]: {len(problems)} problem(s)", highlight=False)
        for problem in problems:
            console.print(f"  - {problem}", highlight=False)
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
        raise _fail("say who resolves the call: --by NAME")
    if not note.strip():
        raise _fail("say how you know the outcome: --note 'the record you checked'")
    with _open(db, dsn) as ledger:
        call = _find(ledger, call_id, run)
        try:
            settled = ledger.resolve(
                call.run_id, call.call_id, status=as_.value, by=person, note=note
            )
        except LedgerError as exc:
            raise _fail(str(exc), PROBLEM) from None
    if as_json:
        _print_json(_call_dict(settled))
    else:
        Console().print(
            f"resolved {settled.call_id} (run {settled.run_id}) as "
            f"[bold]{settled.state.value}[/bold], by {person}",
            highlight=False,
        )
