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
    """A context token in a tool's error, crash or result is in no observation nor SQLite file."""
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


def _one(gate: Gate, authority: Authority, name: str, arguments: Any) -> Any:
    return gate.run(authority=authority).submit(
        [ToolCall(id="c1", name=name, arguments=arguments)]
    )[0]


def test_a_value_contained_in_another_cannot_leave_the_rest_showing(tmp_path: Path) -> None:
    """Longest first: the tenant inside the token does not split it."""
    token = "acme-corp-eu_live_9f8e7d6c5b4a"
    registry = Registry()

    @registry.tool(effects="write:x")
    def refuse(n: int, ctx: CallContext) -> str:
        """Fails quoting the token."""
        raise ToolFailure(f"refused credentials {ctx.context['token']}")

    authority = Authority(
        principal="p", grants=["write:x"], context={"token": token, "tenant": "acme-corp-eu"}
    )
    obs = _one(Gate(registry), authority, "refuse", {"n": 1})
    assert "live_9f8e" not in obs.content
    assert obs.content.count("[redacted]") == 1


def test_short_context_labels_are_not_scrubbed_from_what_the_model_reads() -> None:
    """A plan or a role is a label, not a secret: "freedom" stays "freedom"."""
    registry = Registry()

    @registry.tool(effects="read:x", risk="read")
    def words(n: int) -> str:
        """Ordinary words that contain the labels."""
        return "freedom; administrators; q=admin"

    authority = Authority(
        principal="p", grants=["read:x"], context={"plan": "free", "role": "admin"}
    )
    assert _one(Gate(registry), authority, "words", {"n": 1}).content == (
        "freedom; administrators; q=admin"
    )


def test_a_short_secret_field_is_never_quoted_back_in_a_rejection() -> None:
    """A schema rejection of a 2-character secret field never quotes its value."""
    registry = Registry()

    @registry.tool(effects="spend:x", secret_fields=["cvv"])
    def pay(card: str, cvv: str) -> str:
        """Pay by card."""
        return "paid"

    obs = _one(
        Gate(registry),
        Authority(principal="p", grants=["spend:x"]),
        "pay",
        {"card": "visa", "cvv": 12},
    )
    assert obs.stage.value == "validate"
    assert "12" not in obs.content
    assert "field 'cvv' is not valid: expected string (its value is secret and not shown)" in (
        obs.content
    )
    assert "12" not in repr(obs.details)


def test_a_credential_the_model_wrote_into_a_field_name_is_not_echoed() -> None:
    """A credential the model sent as a field name is not echoed in the schema rejection."""
    key = "sk-proj-" + "Zq8wE2rT6yU1iO9pA3sD"
    registry = Registry()

    @registry.tool(effects="write:x")
    def save(text: str) -> str:
        """Save."""
        return "saved"

    obs = _one(
        Gate(registry), Authority(principal="p", grants=["write:x"]), "save", {"text": "a", key: 1}
    )
    assert obs.stage.value == "validate"
    assert key not in obs.content
