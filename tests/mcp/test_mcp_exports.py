"""The public surface of `callgate.mcp` is pinned: nothing leaks or vanishes by accident."""

from __future__ import annotations

import pytest

import callgate.mcp

pytestmark = pytest.mark.timeout(10)

PUBLIC_NAMES = [
    "ClientIdentity",
    "GateServer",
    "PinEntry",
    "PinError",
    "PinReport",
    "PinStore",
    "ProxyCatalog",
    "RemoteArguments",
    "RemoteResult",
    "RemoteToolset",
    "Restart",
    "StaticTokens",
    "ToolCatalog",
    "ToolConfig",
    "ToolDefinition",
    "UnsupportedSchema",
    "UpstreamFailed",
    "credential_patterns",
    "import_tools",
    "import_tools_sync",
    "proxy",
    "remote_arguments",
    "suggested_rules",
    "tool_result",
]


def test_all_lists_exactly_the_public_names() -> None:
    """callgate.mcp.__all__ is exactly the pinned list of public names."""
    assert callgate.mcp.__all__ == PUBLIC_NAMES


def test_every_public_name_exists() -> None:
    """Every pinned public name is an attribute of callgate.mcp."""
    assert all(hasattr(callgate.mcp, name) for name in PUBLIC_NAMES)


def test_callgate_itself_does_not_import_the_mcp_package() -> None:
    """`import callgate` stays free of the SDK (checked in a clean interpreter elsewhere);
    here: the top-level package does not re-export MCP names."""
    import callgate

    assert not any(name in callgate.__all__ for name in PUBLIC_NAMES)
