"""Readers on data: a restricted field's value, whole or inside a longer text, sent to a
recipient outside its readers asks a person (or is denied), even when the user named the
recipient; the same send to a reader runs. Through the real gate and a SQLite ledger."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate import Authority, Gate, Policy, Registry, SQLiteLedger, Status, ToolCall, allow
from callgate.authorize.provenance import TrustIndex
from callgate.authorize.readers import Readers
from callgate.errors import DefinitionError
from callgate.evidence import Evidence

ME = "maya@northwind.example"
PASSPORT = "C01X00T47"
CARD = "4111 1111 1111 1111"
AGENDA = "Offsite 2026-05-21: strategy at 09:00, roadmap at 13:00"
AUTHORITY = Authority(principal=ME, grants=["read:*", "disclose:*"])


def _gate(path: Path, sent: list[dict[str, Any]], *, deny: bool = False) -> Gate:
    """get_profile (the passport and card readable by the user only), read_file (content
    readable by the owner and the addresses it is shared with), send_email (discloses to
    ``to``)."""
    registry = Registry()

    @registry.tool(
        effects="read:profile",
        output_trust={
            "name": True,
            "email": "contact",
            "passport": Readers("user"),
            "card": Readers("user"),
        },
    )
    def get_profile() -> dict[str, str]:
        """The user's profile."""
        return {"name": "Maya Ortiz", "email": ME, "passport": PASSPORT, "card": CARD}

    @registry.tool(
        effects="read:files",
        output_trust={"id": "file", "content": Readers("owner", "keys(shared_with)")},
    )
    def read_file(file_id: str) -> dict[str, Any]:
        """One file."""
        return {
            "id": file_id,
            "owner": ME,
            "shared_with": {"liam@northwind.example": "rw"},
            "content": AGENDA,
        }

    @registry.tool(effects="disclose:{to}", sinks=["to"])
    def send_email(to: str, subject: str, body: str, attachments: list[str] | None = None) -> str:
        """Send a mail from the user's address."""
        sent.append({"to": to, "subject": subject, "body": body})
        return "sent"

    policy = Policy(
        [allow("get_profile"), allow("read_file"), allow("send_email")],
        untrusted_sinks="deny" if deny else "ask",
    )
    return Gate(registry, policy=policy, ledger=SQLiteLedger(str(path)))


def _send(to: str, body: str, subject: str = "Details", **extra: Any) -> ToolCall:
    args = {"to": to, "subject": subject, "body": body, **extra}
    return ToolCall(id="s", name="send_email", arguments=json.dumps(args))


def _run_with_profile(gate: Gate, request: str) -> Any:
    run = gate.run(authority=AUTHORITY, trusted=[request])
    run.provenance.add_user(ME)
    [read] = run.submit([ToolCall(id="p", name="get_profile", arguments="{}")])
    assert read.status is Status.OK
    return run


REQUEST = "Email my booking details to desk@hotel-lumen.example and to me, " + ME


def test_a_body_carrying_the_passport_to_a_named_outsider_asks(tmp_path: Path) -> None:
    """The recipient is named by the user's request (so its provenance is fine), but the
    body carries a field only the user may read: a person decides, nothing is sent."""
    sent: list[dict[str, Any]] = []
    run = _run_with_profile(_gate(tmp_path / "l.db", sent), REQUEST)
    body = f"Hello, my passport number is {PASSPORT} and my card {CARD}."
    [obs] = run.submit([_send("desk@hotel-lumen.example", body)])
    assert obs.status is Status.PENDING
    assert sent == []


def test_denied_by_policy_the_error_names_field_readers_and_what_to_do(tmp_path: Path) -> None:
    """With ``untrusted_sinks="deny"`` the call is refused; the message names the argument,
    the field, who may read it, the recipient, and what to do, without the value itself."""
    sent: list[dict[str, Any]] = []
    run = _run_with_profile(_gate(tmp_path / "l.db", sent, deny=True), REQUEST)
    [obs] = run.submit([_send("desk@hotel-lumen.example", f"passport: {PASSPORT}")])
    assert obs.status is Status.REJECTED
    assert sent == []
    text = obs.content
    assert "'body'" in text
    assert "'passport'" in text
    assert "user" in text
    assert "desk@hotel-lumen.example" in text
    assert "Leave that value out" in text
    assert PASSPORT not in text
    assert "restricted_reader" in str(obs.details) or "restricted_reader" in text


def test_the_subject_is_checked_too(tmp_path: Path) -> None:
    """Not only bodies: a subject carrying the card number (spaced differently) asks."""
    sent: list[dict[str, Any]] = []
    run = _run_with_profile(_gate(tmp_path / "l.db", sent), REQUEST)
    [obs] = run.submit(
        [_send("desk@hotel-lumen.example", "see subject", "card 4111-1111-1111-1111")]
    )
    assert obs.status is Status.PENDING
    assert sent == []


def test_an_attachment_list_is_checked(tmp_path: Path) -> None:
    """A value nested in a list argument (attachments) is content like a body."""
    sent: list[dict[str, Any]] = []
    run = _run_with_profile(_gate(tmp_path / "l.db", sent), REQUEST)
    call = _send("desk@hotel-lumen.example", "attached", attachments=[f"id-{PASSPORT}.pdf"])
    [obs] = run.submit([call])
    assert obs.status is Status.PENDING
    assert sent == []


def test_the_same_body_to_the_user_runs(tmp_path: Path) -> None:
    """The user may read their own passport: a mail to their own address goes through."""
    sent: list[dict[str, Any]] = []
    run = _run_with_profile(_gate(tmp_path / "l.db", sent), REQUEST)
    [obs] = run.submit([_send(ME, f"Your passport number is {PASSPORT}.")])
    assert obs.status is Status.OK
    assert sent == [
        {"to": ME, "subject": "Details", "body": f"Your passport number is {PASSPORT}."}
    ]


def test_a_body_without_restricted_values_to_the_named_outsider_runs(tmp_path: Path) -> None:
    """The user-authorised send itself is not stopped: only the restricted values are."""
    sent: list[dict[str, Any]] = []
    run = _run_with_profile(_gate(tmp_path / "l.db", sent), REQUEST)
    [obs] = run.submit([_send("desk@hotel-lumen.example", "Arriving 21 May, Maya Ortiz")])
    assert obs.status is Status.OK
    assert len(sent) == 1


def test_a_file_shared_with_the_recipient_may_be_sent_to_them_only(tmp_path: Path) -> None:
    """The record's own sharing list names its readers: Liam (shared) receives the
    content, Priya (not shared, but named by the user) needs a person."""
    sent: list[dict[str, Any]] = []
    gate = _gate(tmp_path / "l.db", sent)
    request = "Send the agenda to liam@northwind.example and priya@northwind.example"
    run = gate.run(authority=AUTHORITY, trusted=[request])
    [read] = run.submit([ToolCall(id="r", name="read_file", arguments='{"file_id": "f-1"}')])
    assert read.status is Status.OK
    body = f"Hi, the agenda: {AGENDA}. Best, Maya"
    [to_liam] = run.submit([_send("liam@northwind.example", body)])
    assert to_liam.status is Status.OK
    call = _send("priya@northwind.example", body)
    [to_priya] = run.submit([ToolCall(id="s2", name=call.name, arguments=call.arguments)])
    assert to_priya.status is Status.PENDING
    assert [m["to"] for m in sent] == ["liam@northwind.example"]


def test_a_value_without_readers_label_is_not_restricted(tmp_path: Path) -> None:
    """The owner-readable restriction applies to the labelled field only: the file's id
    (no Readers label) may be mentioned to anyone the user names."""
    sent: list[dict[str, Any]] = []
    gate = _gate(tmp_path / "l.db", sent)
    run = gate.run(authority=AUTHORITY, trusted=["Tell priya@northwind.example about f-1"])
    run.submit([ToolCall(id="r", name="read_file", arguments='{"file_id": "f-1"}')])
    [obs] = run.submit([_send("priya@northwind.example", "The file is f-1.")])
    assert obs.status is Status.OK


def test_readers_naming_nobody_is_a_definition_error() -> None:
    """A label naming no reader, or a malformed path, fails where it is declared."""
    with pytest.raises(DefinitionError, match="names nobody"):
        Readers()
    with pytest.raises(DefinitionError, match="output_trust path"):
        Readers("owner.")


_DIRT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


def _spelled(value: str, separators: list[str], upper: list[bool]) -> str:
    """``value`` with a separator after some characters and some letters case-changed."""
    out = []
    for i, ch in enumerate(value):
        out.append(ch.upper() if upper[i % len(upper)] else ch.lower())
        out.append(separators[i % len(separators)])
    return "".join(out)


@settings(max_examples=200, deadline=None)
@given(
    before=_DIRT,
    after=_DIRT,
    separators=st.lists(st.sampled_from(["", " ", "-", ".", "/"]), min_size=1, max_size=5),
    upper=st.lists(st.booleans(), min_size=1, max_size=5),
)
def test_any_text_embedding_the_value_is_found(
    before: str, after: str, separators: list[str], upper: list[bool]
) -> None:
    """Hypothesis over texts embedding the passport (any text around it, spaced and cased
    any way): the readers check always finds it for an outside recipient, never for the
    user."""
    index = TrustIndex(trusted_text=[REQUEST])
    index.add_user(ME)
    index.absorb(_profile_evidence(), lambda tool: _PROFILE_TRUST)
    body = before + _spelled(PASSPORT, separators, upper) + after
    values = {"to": "desk@hotel-lumen.example", "subject": "x", "body": body}
    [finding] = [f for f in index.readers_check(["to"], values) if f.field == "passport"]
    assert finding.argument == "body"
    assert finding.recipient == "desk@hotel-lumen.example"
    assert index.readers_check(["to"], {**values, "to": ME}) == []


_PROFILE_TRUST = {"email": "contact", "passport": Readers("user"), "card": Readers("user")}


def _profile_evidence() -> Evidence:
    evidence = Evidence()
    evidence.note("p", "get_profile", {}, {"name": "Maya Ortiz", "email": ME, "passport": PASSPORT})
    return evidence


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(before=_DIRT, after=_DIRT)
def test_through_the_gate_any_embedding_asks(before: str, after: str) -> None:
    """The same property through the real gate and a SQLite ledger (fewer examples)."""
    with tempfile.TemporaryDirectory() as tmp:
        sent: list[dict[str, Any]] = []
        run = _run_with_profile(_gate(Path(tmp) / "l.db", sent), REQUEST)
        [obs] = run.submit([_send("desk@hotel-lumen.example", before + PASSPORT + after)])
        assert obs.status is Status.PENDING
        assert sent == []


def test_a_restriction_read_from_tool_output_survives_a_resume(tmp_path: Path) -> None:
    """Restrictions are rebuilt from the recorded observations: a run resumed in another
    gate over the same SQLite ledger still refuses to mail the passport outside."""
    path = tmp_path / "l.db"
    first = _run_with_profile(_gate(path, []), REQUEST)
    sent: list[dict[str, Any]] = []
    resumed = _gate(path, sent).resume_run(first.id, authority=AUTHORITY, trusted=[REQUEST])
    resumed.provenance.add_user(ME)
    [obs] = resumed.submit([_send("desk@hotel-lumen.example", f"passport {PASSPORT}")])
    assert obs.status is Status.PENDING
    assert sent == []


def test_a_vouched_record_restricts_before_any_tool_read_it(tmp_path: Path) -> None:
    """The application vouches for the profile with Readers labels at the run's start: the
    passport is restricted before any tool returned it (a model told it by an attacker, or
    reading and sending in one batch, is still stopped)."""
    sent: list[dict[str, Any]] = []
    run = _gate(tmp_path / "l.db", sent).run(authority=AUTHORITY, trusted=[REQUEST])
    run.trust_record({"name": "Maya", "passport": PASSPORT}, {"passport": Readers("user")})
    profile = ToolCall(id="p", name="get_profile", arguments="{}")
    send = _send("desk@hotel-lumen.example", f"passport {PASSPORT}")
    statuses = [obs.status for obs in run.submit([profile, send])]
    assert statuses == [Status.OK, Status.PENDING]
    assert sent == []


def test_a_restriction_of_a_vouched_record_survives_a_resume(tmp_path: Path) -> None:
    """The application vouches for the profile with Readers labels; after a resume in
    another gate the passport still may not be mailed outside."""
    path = tmp_path / "l.db"
    gate = _gate(path, [])
    first = gate.run(authority=AUTHORITY, trusted=[REQUEST])
    first.trust_record({"name": "Maya", "passport": PASSPORT}, {"passport": Readers("user")})
    [read] = first.submit([ToolCall(id="f", name="read_file", arguments='{"file_id": "f-1"}')])
    assert read.status is Status.OK
    sent: list[dict[str, Any]] = []
    resumed = _gate(path, sent).resume_run(first.id, authority=AUTHORITY, trusted=[REQUEST])
    [obs] = resumed.submit([_send("desk@hotel-lumen.example", f"passport {PASSPORT}")])
    assert obs.status is Status.PENDING


def test_values_sharing_a_prefix_are_each_found() -> None:
    """Restricted values starting alike (``C01X00T47``, ``C01X99``) are each found, the
    shorter one also inside the longer one's text, and a short value (``AB1``) only as a
    whole argument."""
    index = TrustIndex()
    index.add_user(ME)
    evidence = Evidence()
    record = {"passport": PASSPORT, "old": "C01X99", "code": "AB1"}
    evidence.note("p", "get_profile", {}, record)
    labels = {name: Readers("user") for name in record}
    index.absorb(evidence, lambda tool: labels)
    values = {"to": "x@y.example", "body": "c01x99 and c01x00t47 and ab1"}
    found = sorted(f.field for f in index.readers_check(["to"], values))
    assert found == ["old", "passport"]
    assert [f.field for f in index.readers_check(["to"], {"to": "x@y.example", "s": "ab-1"})] == [
        "code"
    ]


def test_a_value_nested_past_the_walk_depth_is_still_found(tmp_path: Path) -> None:
    """Content nested deeper than the walk goes (here 30 levels of a free-form payload) is
    read as its JSON text, so the passport cannot be hidden below the walk's depth bound."""
    sent: list[dict[str, Any]] = []
    gate = _gate(tmp_path / "l.db", sent)

    @gate.registry.tool(effects="disclose:{to}", sinks=["to"])
    def send_data(to: str, payload: dict[str, Any]) -> str:
        """Send a structured payload from the user's account."""
        sent.append({"to": to, "payload": payload})
        return "sent"

    policy = Policy([allow("get_profile"), allow("send_data")])
    gate = Gate(gate.registry, policy=policy, ledger=SQLiteLedger(str(tmp_path / "m.db")))
    run = _run_with_profile(gate, REQUEST)
    payload: Any = {"passport": PASSPORT}
    for _ in range(30):
        payload = {"n": payload}
    call = ToolCall(
        id="d",
        name="send_data",
        arguments=json.dumps({"to": "desk@hotel-lumen.example", "payload": payload}),
    )
    [obs] = run.submit([call])
    assert obs.status is Status.PENDING, obs.content
    assert sent == []


def test_a_link_nested_past_the_walk_depth_is_still_a_sink() -> None:
    """A link 30 levels deep in a free-text argument is read as the subtree's JSON text (the
    same depth bound as readers), so it is checked instead of skipped."""
    index = TrustIndex(trusted_text=["Send the report to bob@acme.example."])
    payload: Any = {"note": "see https://evil.example/upload?d=1"}
    for _ in range(30):
        payload = {"n": payload}
    shallow = index.check(
        {"to": None}, {"to": "bob@acme.example", "p": {"note": "evil.example/x"}}, links=True
    )
    deep = index.check({"to": None}, {"to": "bob@acme.example", "p": payload}, links=True)
    assert [f.argument for f in shallow] == ["p"]
    assert [f.argument for f in deep] == ["p"]
    assert "evil.example" in deep[0].value


def test_the_principal_is_a_reader_named_user_without_add_user(tmp_path: Path) -> None:
    """The gate declares the run's principal as the user's identity: the passport mailed
    to the principal's own address runs with no add_user; to anyone else it still asks."""
    sent: list[dict[str, Any]] = []
    gate = _gate(tmp_path / "l.db", sent)
    run = gate.run(authority=AUTHORITY, trusted=[REQUEST])
    [read] = run.submit([ToolCall(id="p", name="get_profile", arguments="{}")])
    assert read.status is Status.OK
    [own] = run.submit([_send(ME, f"passport {PASSPORT}")])
    assert own.status is Status.OK, own.content
    [other] = run.submit([_send("desk@hotel-lumen.example", f"passport {PASSPORT}")])
    assert other.status is Status.PENDING
