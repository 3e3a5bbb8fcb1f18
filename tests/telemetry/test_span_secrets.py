"""A secret a hostile model writes into a call's id or into a value an effect is built from
does not reach a span attribute, on calls that ran as on calls that were refused."""

from __future__ import annotations

from typing import Any

from callgate import Authority, Gate, MemoryLedger, Policy, Registry, ToolCall, allow
from callgate.telemetry import Telemetry

from .conftest import Spans

KEY = "sk-live-0123456789abcdefghijklmnop"
"""Credential-shaped text: the default secret patterns redact it."""
TENANT = "tenant-secret-42"
"""A trusted-context value: the run's context secrets redact it."""


def _gate(spans: Spans, ran: list[str]) -> Gate:
    registry = Registry()

    @registry.tool(effects="disclose:{to}")
    def share(to: str) -> str:
        """Share the report with someone."""
        ran.append(to)
        return "shared"

    telemetry = Telemetry(spans.provider, capture_content=True)
    return Gate(
        registry, policy=Policy([allow("share")]), ledger=MemoryLedger(), telemetry=telemetry
    )


AUTHORITY = Authority(principal="ana", grants=["disclose:*"], context={"tenant": TENANT})


def _text(span: Any) -> str:
    return " ".join(str(v) for v in dict(span.attributes or {}).values())


def test_an_admitted_calls_hostile_id_is_bounded_and_redacted(spans: Spans) -> None:
    """A call that runs keeps no credential from the id the model gave it, and the id is
    cut to a bounded length, as on a refused call's span."""
    ran: list[str] = []
    run = _gate(spans, ran).run(authority=AUTHORITY)
    [obs] = run.submit(
        [ToolCall(id=f"id-{KEY}-{'x' * 5000}", name="share", arguments='{"to":"bo"}')]
    )
    assert obs.status.value == "ok"
    assert ran == ["bo"]
    [span] = spans.named("execute_tool share")
    got = dict(span.attributes or {})
    assert KEY not in _text(span)
    assert len(got["gen_ai.tool.call.id"]) <= 128
    assert len(got["callgate.call.id"]) <= 128


def test_effects_built_from_secret_values_are_redacted_like_the_arguments(spans: Spans) -> None:
    """With capture_content, an effect written from a credential-shaped or trusted-context
    argument value is redacted on the span, as the arguments beside it are."""
    ran: list[str] = []
    run = _gate(spans, ran).run(authority=AUTHORITY)
    run.submit(
        [
            ToolCall(id="a", name="share", arguments=f'{{"to":"{KEY}"}}'),
            ToolCall(id="b", name="share", arguments=f'{{"to":"{TENANT}"}}'),
        ]
    )
    found = spans.named("execute_tool share")
    assert len(found) == 2
    for span in found:
        got = dict(span.attributes or {})
        assert KEY not in _text(span)
        assert TENANT not in _text(span)
        assert got["callgate.effects"] == ("disclose:[redacted]",)
