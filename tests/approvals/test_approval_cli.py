"""``callgate approvals``: list, show, approve, deny, and their exit codes.

Exit codes: 0 success; 1 refused (already approved, denied or used; expired),
nothing changed; 2 bad usage or input (no ledger, no such approval, no name).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from approval_domain import ALICE, effects, gate, read_order, refund_call
from typer.testing import CliRunner

from callgate import ApprovalStatus, Status
from callgate.cli import app
from callgate.ledger import Ledger

BACKENDS = ["sqlite", "postgres"]
runner = CliRunner()


def where(make_ledger: Callable[..., Ledger]) -> list[str]:
    target: str = make_ledger.target  # type: ignore[attr-defined]
    return ["--dsn", target] if make_ledger.backend == "postgres" else ["--db", target]  # type: ignore[attr-defined]


def cli(
    make_ledger: Callable[..., Ledger], *args: str, env: dict[str, str] | None = None
) -> tuple[int, str]:
    wide = {"COLUMNS": "200", **(env or {})}
    result = runner.invoke(app, ["approvals", *args, *where(make_ledger)], env=wide)
    return result.exit_code, result.output


def pending(
    make_ledger: Callable[..., Ledger], tmp_path: Path, amount: float = 20, ttl: float = 3600
) -> tuple[str, str]:
    """A run that waits for one refund; (run id, approval id)."""
    g = gate(make_ledger(), tmp_path / "effects.jsonl", approval_ttl=ttl)
    run = g.run(authority=ALICE)
    run.submit([read_order()])
    [obs] = run.submit([refund_call(f"refund-{amount}", amount)])
    assert obs.approval_id is not None
    return run.id, obs.approval_id


def test_list_shows_pending_requests_with_preview_effects_and_expiry(
    make_ledger: Callable[..., Ledger], tmp_path: Path
) -> None:
    """approvals list shows a pending request's id, preview, effects and status."""
    _, approval_id = pending(make_ledger, tmp_path)
    code, out = cli(make_ledger, "list")
    assert code == 0, out
    assert approval_id in out
    assert "refund 20.00 USD to o1" in out
    assert "spend:USD=20" in out
    assert "pending" in out


def test_list_json_filters_by_status(make_ledger: Callable[..., Ledger], tmp_path: Path) -> None:
    """list --status --json lists only requests in that status, with effects and decider."""
    _, twenty = pending(make_ledger, tmp_path, 20)
    _, thirty = pending(make_ledger, tmp_path, 30)
    assert cli(make_ledger, "approve", twenty, "--by", "maria")[0] == 0

    code, out = cli(make_ledger, "list", "--status", "pending", "--json")

    assert code == 0, out
    rows = json.loads(out)
    assert [(r["id"], r["status"], r["effects"]) for r in rows] == [
        (thirty, "pending", ["spend:USD=30"])
    ]
    approved = json.loads(cli(make_ledger, "list", "--status", "approved", "--json")[1])
    assert [(r["id"], r["decided_by"]) for r in approved] == [(twenty, "maria")]


def test_list_shows_expired_requests(make_ledger: Callable[..., Ledger], tmp_path: Path) -> None:
    """A request past its ttl is listed as expired, no longer as pending."""
    _, approval_id = pending(make_ledger, tmp_path, ttl=0.05)
    time.sleep(0.1)
    rows = json.loads(cli(make_ledger, "list", "--status", "expired", "--json")[1])
    assert [r["id"] for r in rows] == [approval_id]
    assert json.loads(cli(make_ledger, "list", "--status", "pending", "--json")[1]) == []


def test_show_prints_the_exact_call_and_its_audit(
    make_ledger: Callable[..., Ledger], tmp_path: Path
) -> None:
    """approvals show prints the call's arguments, run, decider and audit (text and --json)."""
    run_id, approval_id = pending(make_ledger, tmp_path)
    cli(make_ledger, "approve", approval_id, "--by", "maria")

    code, out = cli(make_ledger, "show", approval_id)
    assert code == 0, out
    for text in (
        "refund 20.00 USD to o1",
        '"amount":20.0',
        "rev-1",
        run_id,
        "maria",
        "approval.approved",
    ):
        assert text in out, text

    data = json.loads(cli(make_ledger, "show", approval_id, "--json")[1])
    assert data["approval"]["status"] == "approved"
    assert [r["kind"] for r in data["audit"]] == ["approval.requested", "approval.approved"]


def test_approve_defaults_to_the_user_and_releases_the_call_once(
    make_ledger: Callable[..., Ledger], tmp_path: Path
) -> None:
    """approve without --by records $USER, runs nothing itself; the resumed run runs it once."""
    run_id, approval_id = pending(make_ledger, tmp_path)

    code, out = cli(make_ledger, "approve", approval_id, env={"USER": "maria"})

    assert code == 0, out
    assert "approved" in out
    store = make_ledger().approvals()
    assert store.get(approval_id).decided_by == "maria"  # type: ignore[union-attr]
    assert effects(tmp_path / "effects.jsonl") == []  # the command executes nothing
    g = gate(make_ledger(), tmp_path / "effects.jsonl")
    [obs] = g.resume_run(run_id, authority=ALICE).resume()
    assert obs.status is Status.OK
    assert len(effects(tmp_path / "effects.jsonl")) == 1


def test_deny_needs_a_reason_and_records_it(
    make_ledger: Callable[..., Ledger], tmp_path: Path
) -> None:
    """deny without --reason exits 2; with one, the request is denied with that reason."""
    _, approval_id = pending(make_ledger, tmp_path)
    assert cli(make_ledger, "deny", approval_id, "--by", "maria")[0] == 2  # --reason missing
    code, out = cli(make_ledger, "deny", approval_id, "--by", "maria", "--reason", "not eligible")
    assert code == 0, out
    request = make_ledger().approvals().get(approval_id)
    assert request is not None
    assert (request.status, request.reason) == (ApprovalStatus.DENIED, "not eligible")


@pytest.mark.parametrize("command", ["approve", "deny", "show"])
def test_an_approval_id_that_does_not_exist_exits_2(
    make_ledger: Callable[..., Ledger], tmp_path: Path, command: str
) -> None:
    """approve, deny or show of an unknown approval id exits 2 naming it."""
    pending(make_ledger, tmp_path)
    extra = ["--reason", "x"] if command == "deny" else []
    code, out = (
        cli(make_ledger, command, "apr_nope", "--by", "maria", *extra)
        if command != "show"
        else cli(make_ledger, command, "apr_nope")
    )
    assert code == 2
    assert "no approval 'apr_nope'" in out


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ("approved", "already approved"),
        ("denied", "already denied"),
        ("used", "already used"),
        ("expired", "expired"),
    ],
)
@pytest.mark.parametrize("command", ["approve", "deny"])
def test_a_request_that_cannot_be_decided_exits_1_and_nothing_changes(
    make_ledger: Callable[..., Ledger], tmp_path: Path, state: str, message: str, command: str
) -> None:
    """Deciding an approved, denied, used or expired request exits 1 and changes nothing."""
    run_id, approval_id = pending(make_ledger, tmp_path, ttl=0.05 if state == "expired" else 3600)
    if state in ("approved", "used"):
        cli(make_ledger, "approve", approval_id, "--by", "maria")
    if state == "denied":
        cli(make_ledger, "deny", approval_id, "--by", "maria", "--reason", "no")
    if state == "used":
        g = gate(make_ledger(), tmp_path / "effects.jsonl")
        g.resume_run(run_id, authority=ALICE).resume()
    if state == "expired":
        time.sleep(0.1)
    before = make_ledger().approvals().get(approval_id)
    ran = len(effects(tmp_path / "effects.jsonl"))

    extra = ["--reason", "late"] if command == "deny" else []
    code, out = cli(make_ledger, command, approval_id, "--by", "bob", *extra)

    assert code == 1, out
    assert message in out
    assert make_ledger().approvals().get(approval_id) == before
    assert len(effects(tmp_path / "effects.jsonl")) == ran


def test_a_missing_ledger_file_exits_2(tmp_path: Path) -> None:
    """approvals list --db of a missing file exits 2 with "no ledger" and creates no file."""
    result = runner.invoke(app, ["approvals", "list", "--db", str(tmp_path / "nope.db")])
    assert result.exit_code == 2
    assert "no ledger" in result.output
    assert not (tmp_path / "nope.db").exists()


def test_the_ledger_comes_from_callgate_db(
    make_ledger: Callable[..., Ledger], tmp_path: Path
) -> None:
    """Without --db, approvals list reads the SQLite ledger named by CALLGATE_DB."""
    if make_ledger.backend != "sqlite":  # type: ignore[attr-defined]
        pytest.skip("CALLGATE_DB names a SQLite file")
    _, approval_id = pending(make_ledger, tmp_path)
    result = runner.invoke(
        app,
        ["approvals", "list", "--json"],
        env={"CALLGATE_DB": make_ledger.target},  # type: ignore[attr-defined]
    )
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in json.loads(result.output)] == [approval_id]
