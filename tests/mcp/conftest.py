"""Fixtures for the MCP tests (helpers live in mcp_support.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "upstream.jsonl"


@pytest.fixture
def policy_file(tmp_path: Path) -> Iterator[Path]:
    """A policy for the test app: reads allowed, refunds ask, wipes denied."""
    path = tmp_path / "policy.toml"
    path.write_text(
        """
[[rule]]
name = "reads"
action = "allow"
tool = "*"
effect = "read:*"

[[rule]]
name = "refunds ask"
action = "ask"
tool = "refund"
""",
        encoding="utf-8",
    )
    return path
