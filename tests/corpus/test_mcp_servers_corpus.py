"""The fast sample of the MCP reference servers' recorded tools (``make corpus`` runs all)."""

from __future__ import annotations

from .mcp_servers import source


def test_the_reference_servers_tools_import_and_pass_the_checks() -> None:
    """Every sampled tool is built (none refused, none crashing), imports through
    import_tools_sync from an in-process server, exports to every provider's shape, and
    takes a generated valid call through the gate."""
    report = source.run(full=False)
    assert report.crashes == []
    assert report.checks_failed == []
    assert report.definitions == report.imported == 12
    assert report.checked["calls ok"] >= report.imported
