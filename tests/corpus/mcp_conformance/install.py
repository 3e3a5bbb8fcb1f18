"""Install the MCP reference servers for the conformance suite, outside the work tree.

``python -m tests.corpus.mcp_conformance.install`` (``make corpus`` runs it) puts the npm
servers (``@modelcontextprotocol/server-everything``, ``-filesystem``, ``-memory``,
``-sequential-thinking``) and the PyPI ones (``mcp-server-time``, ``-git``, ``-fetch``) in
``$CALLGATE_MCP_SERVERS`` (default ``~/.cache/callgate/mcp-servers``): ``npm/`` and a
virtual environment ``venv/``, with the registries' ordinary clients. Already installed:
nothing is downloaded. Tests never install anything: they skip, saying how to.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

NPM_PACKAGES = (
    "@modelcontextprotocol/server-everything",
    "@modelcontextprotocol/server-filesystem",
    "@modelcontextprotocol/server-memory",
    "@modelcontextprotocol/server-sequential-thinking",
)
PYPI_PACKAGES = ("mcp-server-time", "mcp-server-git", "mcp-server-fetch")
NPM_BINARIES = (
    "mcp-server-everything",
    "mcp-server-filesystem",
    "mcp-server-memory",
    "mcp-server-sequential-thinking",
)
PYPI_BINARIES = ("mcp-server-time", "mcp-server-git", "mcp-server-fetch")


def base() -> Path:
    """Where the servers live (never inside the repository)."""
    configured = os.environ.get("CALLGATE_MCP_SERVERS")
    return Path(configured) if configured else Path.home() / ".cache" / "callgate" / "mcp-servers"


def missing(where: Path | None = None) -> list[str]:
    """The server commands not installed under ``where``."""
    where = where or base()
    npm = [b for b in NPM_BINARIES if not (where / "npm" / "node_modules" / ".bin" / b).exists()]
    py = [b for b in PYPI_BINARIES if not (where / "venv" / "bin" / b).exists()]
    return npm + py


def install(where: Path | None = None) -> None:
    where = where or base()
    where.mkdir(parents=True, exist_ok=True)
    if any(not (where / "npm" / "node_modules" / ".bin" / b).exists() for b in NPM_BINARIES):
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("npm is not installed: the npm reference servers need it")
        (where / "npm").mkdir(exist_ok=True)
        subprocess.run(
            [
                npm,
                "install",
                "--no-audit",
                "--no-fund",
                "--prefix",
                str(where / "npm"),
                *NPM_PACKAGES,
            ],
            check=True,
        )
    if any(not (where / "venv" / "bin" / b).exists() for b in PYPI_BINARIES):
        subprocess.run([sys.executable, "-m", "venv", str(where / "venv")], check=True)
        subprocess.run(
            [str(where / "venv" / "bin" / "pip"), "install", "-q", *PYPI_PACKAGES], check=True
        )
    left = missing(where)
    if left:
        raise SystemExit(f"installed, but these commands are still missing: {left}")
    print(f"MCP reference servers ready in {where}")


if __name__ == "__main__":
    install()
