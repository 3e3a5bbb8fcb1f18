"""``callgate approvals list`` prints a bounded preview of a proxied call's arguments: a
200 KB ``send_email`` body is a few lines naming its size, never thousands of lines;
``--json`` keeps the whole request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from mcp_support import upstream_params
from typer.testing import CliRunner

from callgate.cli import app
from callgate.ledger import SQLiteLedger
from callgate.mcp import proxy

pytestmark = [pytest.mark.timeout(90)]

BODY = "All work and no play makes Jack a dull boy.\n" * 4_700  # about 200 KB


@pytest.mark.anyio
async def test_a_200_kb_argument_is_a_bounded_preview(log: Path, tmp_path: Path) -> None:
    """The pending call's preview in ``approvals list`` is cut to a few hundred characters
    with the whole size named; ``show`` bounds the arguments the same way; ``--json`` has all."""
    db = tmp_path / "calls.db"
    with SQLiteLedger(db) as ledger:
        async with (
            proxy(upstream_params("mail", log), server_name="mail", ledger=ledger) as gate,
            Client(gate.server) as client,
        ):
            result = await client.call_tool(
                "send_email", {"to": "bob@example.com", "subject": "s", "body": BODY}
            )
    assert result.meta is not None
    assert result.meta["callgate/status"] == "pending"
    approval = result.meta["callgate/approval_id"]
    runner = CliRunner()
    for width in ("80", "200"):
        listed = runner.invoke(app, ["approvals", "list", "--db", str(db)], env={"COLUMNS": width})
        assert listed.exit_code == 0, listed.output[:2000]
        assert len(listed.output.splitlines()) < 30, f"{len(listed.output.splitlines())} lines"
        flat = " ".join(listed.output.split())
        assert "characters in all" in flat
        assert "cut:" in flat
    shown = runner.invoke(app, ["approvals", "show", approval, "--db", str(db)])
    assert shown.exit_code == 0, shown.output[:2000]
    assert len(shown.output.splitlines()) < 200, f"{len(shown.output.splitlines())} lines"
    whole = runner.invoke(app, ["approvals", "list", "--db", str(db), "--json"])
    [request] = json.loads(whole.output)
    assert len(request["preview"]) > len(BODY)
