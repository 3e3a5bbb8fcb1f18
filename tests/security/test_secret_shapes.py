"""Secrets in every shape stay out of every place a person or a program reads.

One unique canary per shape, each put through a real run over a SQLite ledger:

* a secret field typed as a nested Pydantic model, whose value the handler quotes in
  its `ToolFailure`, a preview quotes, and an unexpected exception quotes;
* an effect templated on a secret field (``spend:card:{card_number}``), on a call that
  runs, one the policy refuses and one that waits for a person;
* a provenance finding about a secret sink field (the value no trusted input vouches
  for, quoted by the finding, the approval's preview and the model's details);
* trusted-context secrets that are not text: a `SecretStr`, `bytes`, an `int`, and a
  value inside a nested model in the context;
* secrets the handler transforms before it prints them: ``repr``, percent-encoding,
  upper and lower case, base64 (standard and URL-safe, alone and inside other text);
* credential shapes the default patterns know: Stripe keys, a JWT, JSON ``"password"`` /
  ``"secret"``, ``client_secret=``.

After the run every canary, in each of the forms it could take, is looked for in: the
SQLite file and its WAL, ``callgate ledger export``, ``ledger list --json``, ``ledger
show`` (text and JSON) of every call, ``approvals list`` and ``show``, every span
attribute and event (the OpenTelemetry SDK's in-memory exporter, with
``capture_content=True``), every console page, the logs at DEBUG and every
observation's content and details. The expected count is 0.
"""

from __future__ import annotations

import base64
import logging
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel, SecretStr
from starlette.testclient import TestClient
from typer.testing import CliRunner

from callgate import (
    Authority,
    CallContext,
    Gate,
    MemoryLedger,
    Policy,
    Registry,
    ToolCall,
    ToolFailure,
    allow,
    ask,
    deny,
)
from callgate.cli import app
from callgate.console import NoAuth, create_app
from callgate.ledger import SQLiteLedger
from callgate.ledger.base import audit_json
from callgate.telemetry import Telemetry

# -- the canaries: each unique, none credential-shaped unless it is meant to be ----------

NESTED_FAILURE = "4111NESTFAIL7d1c9e0a"
NESTED_PREVIEW = "4111NESTPREV2b8f3c61"
NESTED_CRASH = "4111NESTCRSH9e4a7d02"
EFFECT_OK = "5500EFFOK3a9c1e7b4d"
EFFECT_DENIED = "5500EFFDENY8b2d6f0a"
EFFECT_ASKED = "5500EFFASK1c7e5a3b9"
CTX_SECRETSTR = "ctxSecretStr-9d3f1a7c"
CTX_BYTES = "ctxBytes-4e8a2c6f0b"
CTX_INT = 739152840617
CTX_MODEL = "ctxModelField-6b1d9f3e"
CTX_TRANSFORMED = "Ctx/Tr+ans=9x@kq7w"
FIELD_TRANSFORMED = "Pin/Tr+ans=3z@mv5e"
STRIPE_LIVE = "sk_live_" + "51HcanaryLIVE0a1b2c3d4e5f6g7h8"
STRIPE_TEST = "sk_test_" + "51HcanaryTEST9z8y7x6w5v4u3t2s1"
STRIPE_RESTRICTED = "rk_live_" + "51HcanaryRSTR1q2w3e4r5t6y7u8i9"
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiJjYW5hcnktand0LTQyIn0"
    ".c2lnbmF0dXJlLWNhbmFyeS1qd3QtNDI"
)
JSON_PASSWORD = "jsonPassw0rd-7c1e9a"
JSON_SECRET = "jsonSecr3t-2f6b8d"
CLIENT_SECRET = "clientSecr3t-5a0e4c"
FINDING = "finding-canary-7e3a@payee.example"

TEXT_CANARIES = [
    NESTED_FAILURE,
    NESTED_PREVIEW,
    NESTED_CRASH,
    EFFECT_OK,
    EFFECT_DENIED,
    EFFECT_ASKED,
    CTX_SECRETSTR,
    CTX_BYTES,
    str(CTX_INT),
    CTX_MODEL,
    CTX_TRANSFORMED,
    FIELD_TRANSFORMED,
    STRIPE_LIVE,
    STRIPE_TEST,
    STRIPE_RESTRICTED,
    JWT,
    JSON_PASSWORD,
    JSON_SECRET,
    CLIENT_SECRET,
    FINDING,
]


def _b64(data: bytes, *, urlsafe: bool = False) -> str:
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    return encode(data).decode().rstrip("=")


def _forms(canary: str) -> set[str]:
    """Every form of ``canary`` a reader could recover it from: itself, its cases, its
    percent-encodings, its base64 (alone: what a handler that encodes it prints)."""
    raw = canary.encode()
    return {
        canary,
        canary.upper(),
        canary.lower(),
        urllib.parse.quote(canary, safe=""),
        urllib.parse.quote(canary),
        urllib.parse.quote_plus(canary),
        _b64(raw),
        _b64(raw, urlsafe=True),
        # inside a longer base64 text, at the two other byte alignments
        _b64(b"x" + raw)[2:-2],
        _b64(b"xy" + raw)[3:-2],
    }


FORMS = {form: canary for canary in TEXT_CANARIES for form in _forms(canary)}


def hits(text: str | bytes) -> list[str]:
    """The canaries found in ``text`` (in any of their forms)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return sorted({canary for form, canary in FORMS.items() if form in text})


# -- the tools -------------------------------------------------------------------------


class Card(BaseModel):
    """A card, sent whole as one secret field."""

    number: str
    holder: str


class Profile(BaseModel):
    """A trusted-context value that is a model."""

    account: str


def _transformed(secret: str) -> str:
    raw = secret.encode()
    return (
        f"repr={secret!r} url={urllib.parse.quote(secret, safe='')} "
        f"plus={urllib.parse.quote_plus(secret)} up={secret.upper()} low={secret.lower()} "
        f"b64={base64.b64encode(raw).decode()} u64={base64.urlsafe_b64encode(raw).decode()} "
        f"in64={base64.b64encode(b'header:' + raw + b':trailer').decode()}"
    )


def _registry() -> Registry:
    registry = Registry()

    @registry.tool(effects="spend:card", secret_fields=["card"])
    def pay(card: Card, amount: int) -> str:
        """Fails quoting the nested card's number."""
        raise ToolFailure(f"card {card.number} of {card.holder} declined")

    @registry.tool(
        effects="spend:card",
        secret_fields=["card"],
        preview=lambda a: f"pay {a.amount} with card {a.card.number}",  # type: ignore[attr-defined]
    )
    def pay_asked(card: Card, amount: int) -> str:
        """Waits for a person; its preview quotes the nested card's number."""
        return "paid"

    @registry.tool(effects="spend:card", secret_fields=["card"])
    def pay_crash(card: Card) -> str:
        """Crashes (an unknown outcome) quoting the nested card's number."""
        raise RuntimeError(f"gateway timeout for {card.number}")

    @registry.tool(effects="spend:card:{card_number}", secret_fields=["card_number"])
    def charge(card_number: str) -> str:
        """Its effect is templated on its secret field."""
        return "charged"

    @registry.tool(effects="spend:card:{card_number}", secret_fields=["card_number"])
    def charge_denied(card_number: str) -> str:
        """Refused by the policy; its effect is templated on its secret field."""
        return "charged"

    @registry.tool(effects="spend:card:{card_number}", secret_fields=["card_number"])
    def charge_asked(card_number: str) -> str:
        """Waits for a person; its effect is templated on its secret field."""
        return "charged"

    @registry.tool(effects="spend:card", secret_fields=["payee"], sinks=["payee"])
    def pay_to(payee: str) -> str:
        """Pays a payee no trusted input named: the finding quotes the secret value."""
        return "paid"

    @registry.tool(effects="read:ctx")
    def use_context(n: int, ctx: CallContext) -> str:
        """Fails quoting the context's non-text secrets in their text forms."""
        c = ctx.context
        raise ToolFailure(
            f"api={c['api'].get_secret_value()} blob={c['blob']!r} "
            f"blob2={c['blob'].decode()} account={c['account']} profile={c['profile']} "
            f"{_transformed(c['plain'])}"
        )

    @registry.tool(effects="write:vault", secret_fields=["pin"])
    def vault(pin: str) -> str:
        """Returns its secret field transformed: stored in the ledger as the output."""
        return "stored " + _transformed(pin)

    @registry.tool(effects="read:ctx")
    def credentials(n: int) -> str:
        """Fails quoting credentials only the default patterns can know."""
        raise ToolFailure(
            f"stripe {STRIPE_LIVE} and {STRIPE_TEST}, restricted {STRIPE_RESTRICTED}; "
            f"Authorization: Bearer-less jwt {JWT}; "
            f'config {{"password": "{JSON_PASSWORD}", "secret": "{JSON_SECRET}"}}; '
            f"oauth client_secret={CLIENT_SECRET}&grant_type=client_credentials"
        )

    return registry


def _card(number: str) -> dict[str, Any]:
    return {"number": number, "holder": "Dana Li"}


CALLS = [
    ("pay", {"card": _card(NESTED_FAILURE), "amount": 5}),
    ("pay_asked", {"card": _card(NESTED_PREVIEW), "amount": 5}),
    ("pay_crash", {"card": _card(NESTED_CRASH)}),
    ("charge", {"card_number": EFFECT_OK}),
    ("charge_denied", {"card_number": EFFECT_DENIED}),
    ("charge_asked", {"card_number": EFFECT_ASKED}),
    ("use_context", {"n": 1}),
    ("vault", {"pin": FIELD_TRANSFORMED}),
    ("credentials", {"n": 1}),
    ("pay_to", {"payee": FINDING}),
]


class _Run:
    """What the run left: the ledger path, the gate, the observations, the spans."""

    def __init__(self, path: Path, gate: Gate, observations: list[Any], spans: list[Any]):
        self.path = path
        self.gate = gate
        self.observations = observations
        self.spans = spans


@pytest.fixture
def played(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> Iterator[_Run]:
    """Every call of `CALLS` through a gate over a SQLite ledger, traced."""
    path = tmp_path / "ledger.db"
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with SQLiteLedger(path) as ledger:
        gate = Gate(
            _registry(),
            ledger=ledger,
            policy=Policy(
                [deny("charge_denied"), ask("charge_asked"), ask("pay_asked"), allow("*")]
            ),
            telemetry=Telemetry(provider, capture_content=True),
        )
        authority = Authority(
            principal="p",
            grants=["spend:card", "spend:card:*", "read:ctx", "write:vault"],
            context={
                "tenant": "t",
                "api": SecretStr(CTX_SECRETSTR),
                "blob": CTX_BYTES.encode(),
                "account": CTX_INT,
                "profile": Profile(account=CTX_MODEL),
                "plain": CTX_TRANSFORMED,
            },
            scope="t",
        )
        run = gate.run(authority=authority)
        with caplog.at_level(logging.DEBUG):
            observations = [
                run.submit([ToolCall(id=f"c{i}", name=name, arguments=arguments)])[0]
                for i, (name, arguments) in enumerate(CALLS)
            ]
        yield _Run(path, gate, observations, list(exporter.get_finished_spans()))
    provider.shutdown()


def test_the_run_reached_every_place(played: _Run) -> None:
    """The run did what the canary test needs: each call failed, ran, waited or was
    refused where its canary was meant to go (else 0 hits would prove nothing)."""
    status = {o.tool: o.status.value for o in played.observations}
    assert status == {
        "pay": "error",
        "pay_asked": "pending",
        "pay_crash": "unknown",
        "charge": "ok",
        "charge_denied": "rejected",
        "charge_asked": "pending",
        "use_context": "error",
        "vault": "ok",
        "credentials": "error",
        "pay_to": "pending",
    }
    assert played.spans, "no span was recorded"


def test_no_canary_in_observations_or_logs(played: _Run, caplog: pytest.LogCaptureFixture) -> None:
    """The model's observations and the logs hold no canary."""
    for obs in played.observations:
        assert hits(obs.content) == [], (obs.tool, obs.content)
        assert hits(repr(obs.details)) == [], (obs.tool, obs.details)
    assert hits(caplog.text) == []


def test_no_canary_in_the_ledger_file(played: _Run) -> None:
    """The SQLite file and its WAL hold no canary."""
    wal = Path(f"{played.path}-wal")
    stored = played.path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    assert hits(stored) == []


def test_no_canary_in_the_cli(played: _Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ledger export``, ``ledger list --json``, ``ledger show`` (text and JSON) of every
    call, ``approvals list`` and ``approvals show`` of every request: no canary."""
    monkeypatch.setenv("COLUMNS", "400")
    db = ["--db", str(played.path)]
    commands = [
        ["ledger", "export", *db],
        ["ledger", "list", "--json", *db],
        ["ledger", "list", *db],
        ["approvals", "list", *db],
    ]
    for i in range(len(CALLS)):
        commands.append(["ledger", "show", f"c{i}", *db])
        commands.append(["ledger", "show", f"c{i}", "--json", *db])
    for request in played.gate.approvals.list():
        commands.append(["approvals", "show", request.id, *db])
    runner = CliRunner()
    for command in commands:
        result = runner.invoke(app, command)
        assert result.exit_code == 0, (command, result.output)
        assert hits(result.output) == [], (command, result.output)


def test_no_canary_in_spans(played: _Run) -> None:
    """No span attribute, event or status of the run holds a canary."""
    for span in played.spans:
        text = " ".join(
            [
                span.name,
                repr(dict(span.attributes or {})),
                repr([(e.name, dict(e.attributes or {})) for e in span.events]),
                str(span.status.description),
            ]
        )
        assert hits(text) == [], (span.name, text)


def test_no_canary_on_console_pages(played: _Run) -> None:
    """The console's inbox, every approval, the runs list, the run's timeline and every
    call's page hold no canary."""
    with SQLiteLedger(played.path) as ledger:
        client = TestClient(create_app(ledger, auth=NoAuth("dev"), key=b"k" * 32))
        run_id = played.gate.approvals.list()[0].run_id
        pages = ["/approvals", "/runs", f"/run?id={run_id}"]
        pages += [f"/approval?id={r.id}" for r in played.gate.approvals.list()]
        pages += [f"/call?run={run_id}&id=c{i}" for i in range(len(CALLS))]
        for page in pages:
            response = client.get(page)
            assert response.status_code == 200, (page, response.status_code)
            assert hits(response.text) == [], (page, hits(response.text))


# -- the same, for any secret a model may send ---------------------------------------------

SHOWN = {
    "as is": lambda s: s,
    "upper": str.upper,
    "repr": repr,
    "quote": lambda s: urllib.parse.quote(s, safe=""),
    "base64": lambda s: base64.b64encode(s.encode()).decode(),
    "inside base64": lambda s: base64.b64encode(b"card=" + s.encode() + b";").decode(),
}


def _stored(number: str, how: str) -> tuple[str, str]:
    """A nested card's number, quoted by the handler in form ``how``: the observation's
    content and every journal record's stored data."""
    registry = Registry()

    @registry.tool(effects="spend:card:{holder}", secret_fields=["card"])
    def pay(card: Card, holder: str) -> str:
        """Fails quoting the card's number in the chosen form."""
        raise ToolFailure(f"declined: {SHOWN[how](card.number)}")

    ledger = MemoryLedger()
    run = Gate(registry, ledger=ledger).run(
        authority=Authority(principal="p", grants=["spend:card:*"])
    )
    arguments = {"card": {"number": number, "holder": "x"}, "holder": "dana"}
    [obs] = run.submit([ToolCall(id="c", name="pay", arguments=arguments)])
    assert obs.status.value == "error", obs
    return obs.content, " ".join(audit_json(r.data) for r in ledger.audit())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    number=st.text(alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x17F), min_size=8),
    how=st.sampled_from(sorted(SHOWN)),
)
def test_any_nested_secret_in_any_listed_form_is_stored_nowhere(number: str, how: str) -> None:
    """Whatever number the model sends in a nested secret field, and whichever listed
    form the handler quotes it in, neither the observation nor the journal holds it."""
    shown = SHOWN[how](number)
    background = " ".join(_stored("Q" * 12, how))  # what the records hold anyway
    assume(shown.lower() not in background.lower())
    content, stored = _stored(number, how)
    assert shown not in content
    assert shown not in stored


def test_a_context_value_in_a_calls_arguments_is_not_stored() -> None:
    """A trusted-context token the model repeats in an argument is redacted from the
    stored call and approval request (which is then not resumable elsewhere)."""
    registry = Registry()

    @registry.tool(effects="write:notes")
    def note(text: str) -> str:
        """Write a note."""
        return "noted"

    ledger = MemoryLedger()
    gate = Gate(registry, ledger=ledger, policy=Policy([ask("note")]))
    token = "ctx-token-5f0c2a9e71"
    run = gate.run(
        authority=Authority(principal="p", grants=["write:notes"], context={"token": token})
    )
    [obs] = run.submit([ToolCall(id="c", name="note", arguments={"text": f"use {token}"})])
    assert obs.status.value == "pending"
    [request] = gate.approvals.list()
    assert token not in request.arguments_json
    assert not request.resumable
    assert token not in " ".join(audit_json(r.data) for r in ledger.audit())
