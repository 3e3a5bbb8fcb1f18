"""``callgate approvals``: list, show, approve and deny approval requests in the ledger.

The ledger is ``--db PATH`` (a SQLite file; default ``$CALLGATE_DB`` or
``./callgate.db``) or ``--dsn DSN`` (PostgreSQL; default ``$CALLGATE_DSN``),
as for ``callgate ledger``. Approving releases exactly the call the request
was made for, once; the run that waits for it picks it up with
``run.resume()`` (in another process: ``gate.resume_run(run_id, ...)``).
Nothing is executed by this command.

``list`` and ``show`` open the ledger read-only (never created, migrated or
locked); ``approve`` and ``deny`` write, to an existing callgate ledger only.
Every stored value (a preview, an effect, arguments, a name) is printed as plain
text (`callgate.cli.plain`).

Exit codes:
    0  success
    1  the command ran and refused: the request is already approved, denied
       or used, or it expired (nothing was changed)
    2  bad usage or input: no ledger there, a file that is not a callgate
       ledger, no approval with that id, no name for the person deciding
    3  the ledger could not be read: the database is damaged (or failed)
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from callgate.approvals import ApprovalRequest, ApprovalStatus
from callgate.cli.ledger import (
    PROBLEM,
    DbOption,
    DsnOption,
    JsonOption,
    bad_usage,
    format_when,
    open_ledger,
    print_json,
)
from callgate.cli.plain import cell, console, plain
from callgate.errors import ApprovalError
from callgate.ledger.sqlite import DEFAULT_PATH

__all__ = ["app"]

app = typer.Typer(
    name="approvals",
    help="List, show, approve and deny the approval requests waiting in the ledger.\n\n"
    "list and show open the ledger read-only: they never create, migrate or lock it. "
    "Stored values are printed as plain text.\n\n"
    "Exit codes: 0 success; 1 refused (already approved, denied or used; expired), nothing "
    "changed; 2 bad usage or input (no ledger there, a file that is not a callgate ledger, "
    "no such approval, no name); 3 the ledger could not be read (the database is damaged, "
    "or failed).",
    no_args_is_help=True,
    add_completion=False,
)

IdArgument = Annotated[str, typer.Argument(help="The approval id (apr_...).")]
ByOption = Annotated[
    str | None, typer.Option("--by", help="Who decides (default: $USER); recorded and audited.")
]

_STYLE = {
    "pending": "cyan",
    "approved": "green",
    "denied": "yellow",
    "used": "dim",
    "expired": "red",
}
_NOTE = " [provenance: "


PREVIEW_CHARS = 400
"""Characters of a preview (and of its provenance note) that `list`, `show`, `approve` and
`deny` print; the rest is named by its size (``--json`` prints it whole)."""


ARGUMENTS_CHARS = 4000
"""Characters of the stored arguments `show` prints (``--json`` prints them whole)."""


def _bounded(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` cut to ``limit`` characters, the cut named with the whole size."""
    if len(text) <= limit:
        return text
    return (
        f"{text[:limit]}… [cut: {len(text):,} characters in all; --json prints the whole request]"
    )


def _split(preview: str) -> tuple[str, str]:
    """The preview and its provenance note (the gate appends ``[provenance: …]``), each
    bounded (`PREVIEW_CHARS`): a request for a 200 KB argument prints a few lines."""
    head, sep, tail = preview.partition(_NOTE)
    if not sep:
        return _bounded(preview), ""
    return _bounded(head), _bounded(tail.removesuffix("]"))


def _split_whole(preview: str) -> tuple[str, str]:
    """`_split` without the bound (``--json``)."""
    head, sep, tail = preview.partition(_NOTE)
    return (head, tail.removesuffix("]")) if sep else (preview, "")


def _styled(status: ApprovalStatus) -> Text:
    return cell(status.value, style=_STYLE.get(status.value, ""))


def _expiry(request: ApprovalRequest, now: float) -> str:
    left = request.expires_at - now
    if left <= 0:
        return f"{format_when(request.expires_at)} (expired)"
    try:
        hours, rest = divmod(int(left), 3600)
    except (TypeError, ValueError, OverflowError):
        return format_when(request.expires_at)
    return f"{format_when(request.expires_at)} (in {hours}h{rest // 60:02d}m)"


def _as_dict(request: ApprovalRequest, now: float) -> dict[str, Any]:
    data = asdict(request)
    data["status"] = request.state(now).value
    data["stored_status"] = request.status.value
    data["effects"] = list(request.effects)
    data["preview"], data["provenance"] = _split_whole(request.preview)
    return data


def _person(by: str | None) -> str:
    person = by or os.environ.get("USER") or os.environ.get("LOGNAME") or ""
    if not person.strip():
        raise bad_usage("say who decides: --by NAME")
    return person


@app.command("list")
def list_requests(
    status: Annotated[
        ApprovalStatus | None,
        typer.Option("--status", help="Only requests in this state (expired: past their expiry)."),
    ] = None,
    db: DbOption = Path(DEFAULT_PATH),
    dsn: DsnOption = None,
    as_json: JsonOption = False,
) -> None:
    """List approval requests, oldest first: preview, effects, expiry, provenance."""
    with open_ledger(db, dsn) as ledger:
        requests = list(ledger.approvals().list(status))
        now = time.time()
        if as_json:
            print_json([_as_dict(r, now) for r in requests])
            return
        out = console()
        if out.width < _WIDE:
            _print_stacked(out, requests, now)
            return
        table = Table(title=f"{len(requests)} approval request(s)", title_justify="left")
        table.add_column("id", no_wrap=True)
        for column in ("status", "principal", "preview", "effects", "expires (UTC)", "note"):
            table.add_column(column, overflow="fold")
        for r in requests:
            preview, note = _split(r.preview)
            table.add_row(
                cell(r.id),
                _styled(r.state(now)),
                cell(r.principal),
                cell(preview),
                cell(", ".join(map(str, r.effects))),
                cell(_expiry(r, now)),
                cell(note),
            )
        out.print(table)


_WIDE = 120
"""Below this many columns, `approvals list` prints one block per request, not a table."""


def _print_stacked(out: Any, requests: list[ApprovalRequest], now: float) -> None:
    """One block per request, for a narrow terminal: the id whole on its own line with the
    status and principal, then the preview, effects, expiry and note, each wrapped."""
    out.print(cell(f"{len(requests)} approval request(s)"))
    for r in requests:
        preview, note = _split(r.preview)
        head = cell(r.id)
        head.append("  ")
        head.append_text(_styled(r.state(now)))
        head.append("  " + plain(r.principal))
        out.print(head, overflow="fold")
        body = Table.grid(padding=(0, 1))
        body.add_column(style="bold", no_wrap=True)
        body.add_column(overflow="fold")
        body.add_row("  preview", cell(preview))
        body.add_row("  effects", cell(", ".join(map(str, r.effects))))
        body.add_row("  expires", cell(_expiry(r, now)))
        if note:
            body.add_row("  note", cell(note))
        out.print(body)


@app.command()
def show(
    approval_id: IdArgument,
    db: DbOption = Path(DEFAULT_PATH),
    dsn: DsnOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one request: the exact call it covers, its decision, its use and its audit."""
    with open_ledger(db, dsn) as ledger:
        request = ledger.approvals().get(approval_id)
        if request is None:
            raise bad_usage(f"no approval '{approval_id}'; see 'callgate approvals list'")
        audit = [
            r
            for r in ledger.audit()
            if r.kind.startswith("approval.") and r.data.get("approval_id") == approval_id
        ]
        now = time.time()
        if as_json:
            print_json(
                {
                    "approval": _as_dict(request, now),
                    "audit": [{**asdict(r), "data": dict(r.data)} for r in audit],
                }
            )
            return
        _print_request(request, audit, now)


def _print_request(request: ApprovalRequest, audit: Any, now: float) -> None:
    preview, note = _split(request.preview)
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    decided = ""
    if request.decided_by:
        when = format_when(request.decided_at) if request.decided_at else ""
        decided = f"{request.decided_by} at {when}" + (
            f": {request.reason}" if request.reason else ""
        )
    used = f"{request.used_by} at {format_when(request.used_at)}" if request.used_at else ""
    for label, value in (
        ("approval", cell(request.id)),
        ("status", _styled(request.state(now))),
        ("preview", cell(preview)),
        ("provenance", cell(note)),
        ("tool", cell(request.tool)),
        ("principal", cell(request.principal)),
        ("effects", cell(", ".join(map(str, request.effects)))),
        ("arguments", cell(_bounded(request.arguments_json, ARGUMENTS_CHARS), multiline=True)),
        ("arguments hash", cell(request.arguments_hash)),
        ("resource version", cell(request.resource_version or "")),
        ("policy version", cell(request.policy_version or "")),
        ("call", cell(f"{request.call_id}  (run {request.run_id})")),
        ("requested (UTC)", cell(format_when(request.created_at))),
        ("expires (UTC)", cell(_expiry(request, now))),
        ("decided", cell(decided)),
        ("used by", cell(used)),
        ("resumable", cell("yes" if request.resumable else "no: arguments include secrets")),
    ):
        head.add_row(label, value)
    out = console()
    out.print(head)
    trail = Table(title="audit", title_justify="left")
    for column in ("seq", "at (UTC)", "kind", "actor"):
        trail.add_column(column)
    for r in audit:
        trail.add_row(cell(r.seq), format_when(r.at), cell(r.kind), cell(r.data.get("actor", "")))
    out.print(trail)


def _decide(
    approval_id: str,
    *,
    approve: bool,
    by: str | None,
    reason: str | None,
    db: Path,
    dsn: str | None,
) -> ApprovalRequest:
    person = _person(by)
    with open_ledger(db, dsn, write=True) as ledger:
        store = ledger.approvals()
        if store.get(approval_id) is None:
            raise bad_usage(f"no approval '{approval_id}'; see 'callgate approvals list'")
        try:
            return store.decide(approval_id, approve=approve, by=person, reason=reason)
        except ApprovalError as exc:
            raise bad_usage(str(exc), PROBLEM) from None


@app.command()
def approve(
    approval_id: IdArgument,
    by: ByOption = None,
    db: DbOption = Path(DEFAULT_PATH),
    dsn: DsnOption = None,
    as_json: JsonOption = False,
) -> None:
    """Approve a pending request: it releases exactly that call, once, when its run resumes."""
    decided = _decide(approval_id, approve=True, by=by, reason=None, db=db, dsn=dsn)
    if as_json:
        print_json(_as_dict(decided, time.time()))
        return
    preview, _ = _split(decided.preview)
    line = Text("approved", style="green")
    line.append(
        plain(
            f" {decided.id}: {preview} (by {decided.decided_by or ''}); "
            f"it runs when run {decided.run_id} resumes"
        )
    )
    console().print(line, soft_wrap=True)


@app.command()
def deny(
    approval_id: IdArgument,
    reason: Annotated[str, typer.Option("--reason", help="Why; the model is told.")],
    by: ByOption = None,
    db: DbOption = Path(DEFAULT_PATH),
    dsn: DsnOption = None,
    as_json: JsonOption = False,
) -> None:
    """Deny a pending request; the call is rejected when its run resumes."""
    if not reason.strip():
        raise bad_usage("say why the call is denied: --reason TEXT")
    decided = _decide(approval_id, approve=False, by=by, reason=reason, db=db, dsn=dsn)
    if as_json:
        print_json(_as_dict(decided, time.time()))
        return
    preview, _ = _split(decided.preview)
    line = Text("denied", style="yellow")
    line.append(plain(f" {decided.id}: {preview} (by {decided.decided_by or ''}): {reason}"))
    console().print(line, soft_wrap=True)
