"""``callgate approvals list`` at 80 columns: every line fits, and every approval id is
shown whole on one line (wrapped text, never a truncated or folded id)."""

from __future__ import annotations

import re
from pathlib import Path

import console_support as cs
from typer.testing import CliRunner

from callgate.cli import app
from callgate.ledger import SQLiteLedger


def test_the_list_fits_80_columns_with_whole_ids(tmp_path: Path) -> None:
    """Two waiting approvals (one with a long provenance note): no line is wider than 80
    characters, each id appears whole, and the preview, effects and note are all there."""
    db = tmp_path / "calls.db"
    with SQLiteLedger(db) as ledger:
        scenario = cs.play(ledger)
    result = CliRunner().invoke(app, ["approvals", "list", "--db", str(db)], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 80, "\n".join(lines)
    for approval_id in (scenario.refund_approval, scenario.email_approval):
        assert re.search(rf"(^|\s){approval_id}(\s|$)", result.output, flags=re.M), approval_id
    flat = " ".join(" ".join(lines).split())
    assert "refund 60.00 USD on o-1" in flat
    assert "spend:USD=60" in flat
    assert cs.INJECTED_EMAIL in flat
