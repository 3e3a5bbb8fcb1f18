"""Approval text escapes bidirectional and other invisible characters (issue 32 follow-up).

A value the model sends can hold U+202E (right-to-left override) and its kin: shown raw
in the approval's preview, the person reads "pay 0.05" for "pay 50.0". The preview (and
the pending observation quoting it) writes each as a ``\\u202e`` escape.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from callgate import Authority, Gate, MemoryLedger, Policy, Registry, Status, ToolCall, ask

BIDI = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
AUTHORITY = Authority(principal="maya@northwind.example", grants=["disclose:*"])


def gate(preview: Any = None) -> Gate:
    """A gate whose one tool always needs a person (optionally with a custom preview)."""
    reg = Registry()

    @reg.tool(effects="disclose:{to}", preview=preview)
    def send_mail(to: str, body: str) -> dict[str, Any]:
        """Mail ``body`` to ``to``."""
        return {"sent": True}

    return Gate(reg, policy=Policy([ask("*")]), ledger=MemoryLedger())


def pending(g: Gate, to: str, body: str) -> tuple[str, str]:
    """The pending observation's text and the approval's preview for one call."""
    run = g.run(authority=AUTHORITY)
    call = ToolCall(id="c1", name="send_mail", arguments={"to": to, "body": body})
    (obs,) = run.submit([call])
    assert obs.status is Status.PENDING
    assert obs.approval_id is not None
    request = g.approvals.get(obs.approval_id)
    assert request is not None
    return obs.content, request.preview


def test_a_right_to_left_override_is_shown_escaped() -> None:
    """U+202E in an argument appears as \\u202e in the preview and the model's text."""
    content, preview = pending(gate(), "bob@example.com", "pay \u202e0.05")
    for text in (content, preview):
        assert "\u202e" not in text
        assert "pay \\u202e0.05" in text


def test_a_custom_preview_is_escaped_too() -> None:
    """A tool's own preview quoting the value is escaped the same way."""
    content, preview = pending(gate(lambda a: f"mail {a.to}"), "bob\u2066@evil.test", "x")
    assert "\u2066" not in preview
    assert "\u2066" not in content
    assert "mail bob\\u2066@evil.test" in preview


@given(st.text(alphabet=st.sampled_from(list(BIDI) + list("ab 1.")), min_size=1, max_size=20))
def test_no_bidi_or_format_character_reaches_the_approval_text(body: str) -> None:
    """Whatever mix of bidi/format characters the model sends, none is shown raw."""
    content, preview = pending(gate(), "bob@example.com", body)
    for text in (content, preview):
        assert not any(char in text for char in BIDI)
    for char in set(body) & set(BIDI):
        assert f"\\u{ord(char):04x}" in preview
