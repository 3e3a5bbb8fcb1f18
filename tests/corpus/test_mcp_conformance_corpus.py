"""The proxy against the real MCP reference servers (``make corpus`` installs and runs it).

``make corpus`` runs it through ``python -m tests.corpus`` (the ``mcp_conformance``
source, about 90 s). Under pytest it runs with ``CALLGATE_MCP_CONFORMANCE=1`` and the
servers installed, and is skipped otherwise, saying why: the default test run never
downloads anything and stays fast.
"""

from __future__ import annotations

import os

import pytest

from .mcp_conformance import install, source

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        os.environ.get("CALLGATE_MCP_CONFORMANCE") != "1",
        reason="the MCP conformance suite runs under `make corpus` (about 90 s), or here "
        "with CALLGATE_MCP_CONFORMANCE=1",
    ),
    pytest.mark.skipif(
        bool(install.missing()),
        reason="the MCP reference servers are not installed: `make corpus` (or `python -m "
        "tests.corpus.mcp_conformance.install`) installs them outside the work tree",
    ),
]


def test_every_tool_of_every_reference_server_answers_the_same_through_the_proxy() -> None:
    """Every tool of the seven installed reference servers is visible and answers through proxy()
    and `callgate mcp proxy` as it does directly (no crash, no failed check)."""
    report = source.run(full=True)
    assert report.crashes == []
    assert report.checks_failed == []
    assert report.definitions >= 50
