"""A large argument is shown as a bounded preview that names its size, on every page.

A model may send a 200 KB ``content`` to a file-writing tool: the console must not render
it whole (a page of megabytes, a person scrolling past what they are approving), and must
say how large it is, so that nobody approves a value they saw only the start of unawares.
"""

from __future__ import annotations

import re

import pytest
from starlette.testclient import TestClient

from callgate import Authority, Gate, MemoryLedger, Policy, Registry, ToolCall, ask
from callgate.console import NoAuth, create_app
from callgate.console.text import MAX_SHOWN, shown

CONTENT = "line of text\n" * 16000
"""208,000 characters: a file a model asks to write."""
PAGE_BOUND = 60_000
"""No page that shows the request may be larger than this (it holds a few bounded values)."""


@pytest.fixture
def console() -> tuple[TestClient, str, str]:
    """A console over a run whose one call, writing CONTENT, waits for a person."""
    reg = Registry()

    @reg.tool(effects="write:files")
    def write_file(path: str, content: str) -> str:
        """Write a file."""
        return "written"

    ledger = MemoryLedger()
    gate = Gate(reg, policy=Policy([ask("write_file")]), ledger=ledger)
    run = gate.run(authority=Authority(principal="bot", grants=["write:files"]))
    call = ToolCall(id="c1", name="write_file", arguments={"path": "/tmp/a", "content": CONTENT})
    observation = run.submit([call])[0]
    assert observation.approval_id is not None
    return TestClient(create_app(ledger, auth=NoAuth("me"))), run.id, observation.approval_id


def test_every_page_of_a_200_kb_argument_is_bounded_and_names_its_size(
    console: tuple[TestClient, str, str],
) -> None:
    """The inbox, the request and the call page each show a capped preview of the arguments
    (not the 208,000 characters), say how much was left out, and name the size of the
    arguments in characters and KB."""
    client, run_id, approval_id = console
    stored = client.get(f"/approval?id={approval_id}").text
    total = re.search(r'class="size">([\d,]+) characters \(([\d.]+) KB\)<', stored)
    assert total is not None, "the size of the arguments is not named"
    assert int(total.group(1).replace(",", "")) > len(CONTENT)
    for path in ("/approvals", f"/approval?id={approval_id}", f"/call?run={run_id}&id=c1"):
        page = client.get(path).text
        assert len(page) < PAGE_BOUND, (path, len(page))
        assert total.group(0) in page, path
        assert "line of text" in page, path
        assert "more characters not shown" in page, path


def test_the_inbox_heading_is_a_short_preview(console: tuple[TestClient, str, str]) -> None:
    """The card's heading (the call's preview) is cut at PREVIEW_CHARS and says so."""
    from callgate.console.text import PREVIEW_CHARS

    client, _, _ = console
    heading = re.search(r"<h2>(.*?)</h2>", client.get("/approvals").text, re.S)
    assert heading is not None
    assert len(heading.group(1)) < PREVIEW_CHARS + 200
    assert "characters in all" in heading.group(1)


def test_a_cut_value_names_its_whole_size_and_a_short_one_is_whole() -> None:
    """``shown`` keeps a value under its limit whole; past it, it keeps the first ``limit``
    characters and names how many were left out and the size of the whole."""
    from callgate.console.text import size_label

    assert shown("short") == "short"
    long = shown("é" * (MAX_SHOWN + 5))
    assert long.startswith("é" * MAX_SHOWN)
    assert "5 more characters not shown" in long
    assert f"of {MAX_SHOWN + 5:,} characters in all" in long
    assert size_label("é" * 1024) == "1,024 characters (2.0 KB)"
