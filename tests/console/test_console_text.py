"""Hostile text stays text: every stored value is escaped, its hidden characters shown, its
credentials redacted, whatever a model or tool put in it (hypothesis properties and examples)."""

from __future__ import annotations

import functools
import html
import unicodedata
from html.parser import HTMLParser

import console_support as cs
import jinja2
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from callgate.console.templating import environment
from callgate.console.text import MAX_SHOWN, shown, visible
from callgate.console.views import timeline
from callgate.ledger.base import AuditRecord
from conftest import sign_in

HIDDEN = {"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"}


@functools.cache
def _timeline_template() -> jinja2.Template:
    """The timeline macro of the console's templates, compiled once."""
    return environment().from_string(
        '{% from "_fields.html" import timeline %}{{ timeline(events, true, "run_1") }}'
    )


class _Tags(HTMLParser):
    """The start tags of a document, in order, with their attribute names."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, tuple[str, ...]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, tuple(name for name, _ in attrs)))


def _tags(document: str) -> list[tuple[str, tuple[str, ...]]]:
    parser = _Tags()
    parser.feed(document)
    return parser.tags


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_visible_text_has_no_hidden_character(text: str) -> None:
    """No control, format (bidi, zero-width), surrogate, private-use or unassigned character
    survives `visible` on one line; each becomes an escape a reader can see."""
    out = visible(text)
    assert not [c for c in out if unicodedata.category(c) in HIDDEN]
    multiline = visible(text, multiline=True)
    assert not [c for c in multiline if c != "\n" and unicodedata.category(c) in HIDDEN]


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.characters(exclude_categories=("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")))
)
def test_visible_text_leaves_printable_text_alone(text: str) -> None:
    """Text with nothing hidden is shown as it is (letters of any script, markup, quotes)."""
    assert visible(text) == text


def test_hidden_characters_become_their_escapes() -> None:
    """An ANSI escape, a right-to-left override, a zero-width space and a line feed on one line."""
    assert visible("a\x1b[31mb\u202ec\u200bd\ne") == "a\\x1b[31mb\\u202ec\\u200bd\\ne"
    assert visible("a\nb", multiline=True) == "a\nb"


def test_shown_redacts_credentials_and_bounds_length() -> None:
    """Credential-shaped text is redacted, and a long value is cut with the count left out."""
    assert cs.API_KEY not in shown("key " + cs.API_KEY)
    long = shown("x" * (MAX_SHOWN + 10))
    assert long.startswith("x" * MAX_SHOWN)
    assert "10 more characters not shown" in long


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=200), st.text(min_size=1, max_size=40))
def test_a_record_of_any_text_renders_to_the_same_markup(text: str, call_id: str) -> None:
    """Whatever text a record holds (in its data and its call id), the timeline's HTML has the
    same tags and attributes as for plain text, and no hidden character: nothing a model wrote
    becomes markup or hides itself."""
    template = _timeline_template()

    def render(value: str, cid: str) -> str:
        record = AuditRecord(
            seq=1,
            at=0.0,
            kind="call.rejected",
            run_id="run_1",
            call_id=cid,
            data={"tool": value, "arguments": value, "message": value, "stage": value},
        )
        return template.render(events=timeline([record]))

    rendered = render(text, call_id)
    assert _tags(rendered) == _tags(render("plain", "c"))
    assert not [c for c in rendered if c != "\n" and unicodedata.category(c) in HIDDEN]


def test_hostile_text_in_every_page_is_shown_as_text(
    client: TestClient, scenario: cs.Scenario
) -> None:
    """The shop's hostile note (a script tag, quotes, an RTL override, an ANSI escape) is escaped
    on the inbox, the run, the call and the approval pages; no page has a script element."""
    sign_in(client)
    run = scenario.run.id
    for path in (
        "/approvals",
        f"/run?id={run}",
        f"/call?run={run}&id=call_2",
        f"/approval?id={scenario.refund_approval}",
    ):
        page = client.get(path).text
        assert "<script" not in page.lower(), path
        assert "&lt;script&gt;" in page, path
        assert "\u202e" not in page, path
        assert "\x1b" not in page, path
        assert "\\u202e" in html.unescape(page), path


def test_a_hostile_call_id_is_quoted_in_links(client: TestClient, ledger: object) -> None:
    """A model's call id with quotes, markup and a slash is escaped in text and quoted in URLs,
    and its link leads to the call."""
    import re

    sign_in(client)
    run = cs.gate(ledger, []).run(authority=cs.AUTHORITY)  # type: ignore[arg-type]
    bad_id = 'x"/><b>&id=1'
    run.submit([cs.ToolCall(id=bad_id, name="get_order", arguments={"order_id": "o-2"})])
    page = client.get("/run", params={"id": run.id}).text
    assert "<b>" not in page
    links = re.findall(r'href="(/call\?[^"]*)"', page)
    assert links
    response = client.get(html.unescape(links[0]))
    assert response.status_code == 200
    assert "o-2" in response.text


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
KINDS = st.sampled_from(
    [
        "agent.started", "agent.model", "agent.observations", "agent.paused", "agent.resumed",
        "agent.stopped", "call.admitted", "call.rejected", "call.pending", "call.renamed",
        "attempt.started", "attempt.ok", "attempt.unknown", "approval.requested",
        "approval.denied", "provenance.untrusted_sink", "security.boundary", "other.kind",
    ]
)  # fmt: skip
FIELDS = st.sampled_from(
    ["text", "calls", "results", "effects", "findings", "tool", "arguments", "reason", "step",
     "content", "approvals", "decisions", "tainted_by", "user", "preview", "actor"]
)  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(KINDS, st.dictionaries(FIELDS, JSON, max_size=6))
def test_a_record_of_any_shape_renders(kind: str, data: dict[str, object]) -> None:
    """An edited record may hold any JSON under any field (a number where a list belongs): its
    page still renders, so the reader can see the damage."""
    from callgate.console.views import provenance_findings

    if kind == "provenance.untrusted_sink":
        data = {"findings": [data, data.get("findings")]}
    record = AuditRecord(seq=1, at=0.0, kind=kind, run_id="r", call_id="c", data=data)
    assert 'id="r1"' in _timeline_template().render(events=timeline([record]))
    provenance_findings([record])
