"""Secrets stay secret: unique canaries put in every place a secret leaked from once.

One canary each: a credential in the run's trusted context that a handler puts
in an exception; a credential-shaped environment token (a Google ``AIza`` key)
in an unexpected error; a secret field's value raised by a ``resource_version``
hook, by a precondition and by a preview; a secret field sent as an array; and
the ``api_key=`` / ``Authorization: Token`` forms in a tool's failure. After the
run the canaries appear nowhere: not in the SQLite file or its WAL, not in
``callgate ledger export``, ``callgate approvals list/show``, not in the logs
at DEBUG, not in any observation's content or details (``Observation.result``
is the application's own value and is not checked).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from callgate import (
    Authority,
    CallContext,
    Gate,
    Policy,
    Registry,
    ToolCall,
    ToolFailure,
    allow,
    ask,
)
from callgate.cli import app
from callgate.ledger import SQLiteLedger

CONTEXT_TOKEN = "ctxsecret-6f1e0b7a2c"
GOOGLE_KEY = "AIza" + "SyB3kQ7mZ1xV9cD2fH4jL6nP8rT0vW2yA5b"
RV_CARD = "4111-RV-8e2d91c3"
PRE_CARD = "4111-PRE-3b7f6a01"
PREVIEW_CARD = "4111-PV-c90d4e12"
ARRAY_PIN = "pin-ARRAY-5a3c7e9f"
API_KEY_VALUE = "apikeyvalue7c2e9d4b1a"
TOKEN_VALUE = "authtoken3f8a1c6e0d"
CANARIES = [
    CONTEXT_TOKEN,
    GOOGLE_KEY,
    RV_CARD,
    PRE_CARD,
    PREVIEW_CARD,
    ARRAY_PIN,
    API_KEY_VALUE,
    TOKEN_VALUE,
]


def _registry() -> Registry:
    registry = Registry()

    @registry.tool(effects="write:x")
    def uses_context(n: int, ctx: CallContext) -> str:
        """Fails quoting the trusted context's token."""
        raise ToolFailure(f"upstream rejected {ctx.context['token']}")

    @registry.tool(effects="write:x")
    def leaks_env(n: int) -> str:
        """Fails unexpectedly quoting an environment token."""
        raise RuntimeError(f"config: GOOGLE_API_KEY={GOOGLE_KEY}")

    def version(args: Any) -> str:
        raise KeyError(args.card_number)

    @registry.tool(effects="spend:x", secret_fields=["card_number"], resource_version=version)
    def charge_rv(card_number: str) -> str:
        """Its resource_version hook raises the card number."""
        return "charged"

    def needs(args: Any, evidence: Any) -> str | None:
        raise ValueError(f"no card {args.card_number}")

    @registry.tool(effects="write:x", secret_fields=["card_number"], precondition=needs)
    def charge_pre(card_number: str) -> str:
        """Its precondition raises the card number."""
        return "charged"

    def preview(args: Any) -> str:
        raise LookupError(args.card_number)

    @registry.tool(effects="spend:x", secret_fields=["card_number"], preview=preview)
    def charge_preview(card_number: str) -> str:
        """Its preview raises the card number."""
        return "charged"

    @registry.tool(effects="write:x", secret_fields=["pins"])
    def set_pins(pins: list[int]) -> str:
        """A secret field the model sends as an array (of the wrong item type)."""
        return "set"

    @registry.tool(effects="write:x")
    def header_forms(n: int) -> str:
        """Fails quoting credentials in assignment and header forms."""
        raise ToolFailure(f"api_key={API_KEY_VALUE}; Authorization: Token {TOKEN_VALUE}")

    return registry


CALLS = [
    ("uses_context", {"n": 1}),
    ("leaks_env", {"n": 1}),
    ("charge_rv", {"card_number": RV_CARD}),
    ("charge_pre", {"card_number": PRE_CARD}),
    ("charge_preview", {"card_number": PREVIEW_CARD}),
    ("set_pins", {"pins": [ARRAY_PIN]}),
    ("header_forms", {"n": 1}),
]


def _hits(text: str | bytes) -> list[str]:
    if isinstance(text, bytes):
        return [c for c in CANARIES if c.encode() in text]
    return [c for c in CANARIES if c in text]


def test_no_canary_reaches_the_ledger_the_cli_the_logs_or_the_model(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No canary reaches an observation, the logs, the SQLite files or any CLI output."""
    path = tmp_path / "ledger.db"
    ledger = SQLiteLedger(path)
    gate = Gate(
        _registry(),
        ledger=ledger,
        policy=Policy([ask("charge_rv"), ask("charge_preview"), allow("*")]),
    )
    authority = Authority(
        principal="p",
        grants=["write:x", "spend:x"],
        context={"tenant": "t", "token": CONTEXT_TOKEN},
    )
    run = gate.run(authority=authority)
    with caplog.at_level(logging.DEBUG):
        observations = [
            run.submit([ToolCall(id=f"c{i}", name=name, arguments=arguments)])[0]
            for i, (name, arguments) in enumerate(CALLS)
        ]
    for obs in observations:
        assert obs.status.value != "ok", obs  # each call failed where its canary was
        assert _hits(obs.content) == [], (obs.tool, obs.content)
        assert _hits(repr(obs.details)) == [], (obs.tool, obs.details)
    assert _hits(caplog.text) == []
    stored = path.read_bytes() + Path(f"{path}-wal").read_bytes()
    assert _hits(stored) == []

    monkeypatch.setenv("COLUMNS", "300")
    runner = CliRunner()
    outputs = [
        runner.invoke(app, ["ledger", "export", "--db", str(path)]),
        runner.invoke(app, ["ledger", "list", "--db", str(path)]),
        runner.invoke(app, ["approvals", "list", "--db", str(path)]),
    ]
    for request in gate.approvals.list():
        outputs.append(runner.invoke(app, ["approvals", "show", request.id, "--db", str(path)]))
    for result in outputs:
        assert result.exit_code == 0, result.output
        assert _hits(result.output) == [], result.output
    ledger.close()
    assert _hits(path.read_bytes()) == []
