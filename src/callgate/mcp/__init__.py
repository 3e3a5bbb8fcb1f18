"""MCP: serve a gate's tools, import remote tools as untrusted, and a policy-enforcing proxy.

Built on the official ``mcp`` SDK (``pip install 'callgate[mcp]'``); no
protocol code of our own. ``import callgate`` never imports this package.

* `GateServer`: an MCP server whose every call goes through a `Gate`.
* `import_tools` / `import_tools_sync`: a remote server's tools as callgate
  tools: validated locally, results untrusted, effects from local
  configuration, definitions pinned (`PinStore`).
* `proxy`: an MCP server in front of an MCP server, enforcing policy,
  approvals, pins and audit.

See docs/mcp.md.
"""

from __future__ import annotations

try:
    import mcp as _sdk  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "callgate.mcp needs the official MCP SDK: pip install 'callgate[mcp]'"
    ) from exc

from callgate.mcp.arguments import RemoteArguments, UnsupportedSchema, remote_arguments
from callgate.mcp.client import (
    RemoteResult,
    RemoteToolset,
    ToolConfig,
    import_tools,
    import_tools_sync,
    suggested_rules,
)
from callgate.mcp.pins import PinEntry, PinError, PinReport, PinStore, ToolDefinition
from callgate.mcp.proxy import ProxyCatalog, proxy
from callgate.mcp.server import (
    ClientIdentity,
    GateServer,
    StaticTokens,
    ToolCatalog,
    credential_patterns,
    tool_result,
)
from callgate.mcp.upstream import Restart, UpstreamFailed

__all__ = [
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
