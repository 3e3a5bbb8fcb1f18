"""Trusted-context values are scrubbed like secret fields (SQLite file and WAL, observations).

A credential in ``Authority.context`` that a handler or a tool's hook puts into
an exception message must reach neither the ledger's file nor its WAL nor the
model; neither may a secret field's value sent as an array or object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from callgate import (
    Authority,
    CallContext,
    Gate,
    OutcomeUnknown,
    Policy,
    Registry,
    ToolCall,
    ToolFailure,
    allow,
    ask,
)
from callgate.ledger import SQLiteLedger

TOKEN = "ctx-CANARY-7d41c2e9b0"  # looks like nothing a pattern would catch


def _registry() -> Registry:
    registry = Registry()

    @registry.tool(effects="write:x")
    def fails(n: int, ctx: CallContext) -> str:
        """A known failure that quotes the token."""
        raise ToolFailure(f"upstream refused token {ctx.context['token']}")

    @registry.tool(effects="write:x")
    def crashes(n: int, ctx: CallContext) -> str:
        """An unexpected failure that quotes the token."""
        raise RuntimeError(f"auth header Bearer-less {ctx.context['token']}")

    @registry.tool(effects="write:x")
    def unknown(n: int, ctx: CallContext) -> str:
        """An unknown outcome that quotes the token."""
        raise OutcomeUnknown(f"lost the reply for {ctx.context['token']}")

    @registry.tool(effects="write:x")
    def echoes(n: int, ctx: CallContext) -> str:
        """A result that quotes the token."""
        return f"used {ctx.context['token']}"

    def version(args: Any) -> str:
        raise KeyError(TOKEN)

    @registry.tool(effects="write:y", resource_version=version)
    def versioned(n: int) -> str:
        """A tool whose resource-version hook fails quoting the token."""
        return "ok"

    return registry


@pytest.mark.parametrize("tool", ["fails", "crashes", "unknown", "echoes", "versioned"])
def test_a_context_value_in_an_error_or_result_is_never_stored_or_shown(
    tmp_path: Path, tool: str
) -> None:
    path = tmp_path / "ledger.db"
    ledger = SQLiteLedger(path)
    gate = Gate(_registry(), ledger=ledger, policy=Policy([ask("versioned"), allow("*")]))
    authority = Authority(
        principal="p", grants=["write:x", "write:y"], context={"tenant": "t", "token": TOKEN}
    )
    [obs] = gate.run(authority=authority).submit([ToolCall(id="c1", name=tool, arguments={"n": 1})])
    assert TOKEN not in obs.content
    assert TOKEN not in repr(obs.details)
    stored = path.read_bytes() + Path(f"{path}-wal").read_bytes()
    assert TOKEN.encode() not in stored
    ledger.close()
    assert TOKEN.encode() not in path.read_bytes()
