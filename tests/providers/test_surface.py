"""The provider surface: one uniform shape per format, pinned so nothing leaks or vanishes."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

import callgate.providers
from callgate.providers import anthropic, gemini, mcp, openai_chat, openai_responses, text

FORMATS = [openai_chat, openai_responses, anthropic, gemini, text]


def test_the_package_exports_the_formats_and_the_extraction_record() -> None:
    """``callgate.providers.__all__`` is pinned."""
    assert callgate.providers.__all__ == [
        "Extraction",
        "anthropic",
        "gemini",
        "mcp",
        "openai_chat",
        "openai_responses",
        "text",
    ]


@pytest.mark.parametrize("module", FORMATS, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_every_format_offers_extract_render_and_tool_definitions(module: Any) -> None:
    """One extension point per concept: the same three functions everywhere."""
    public = set(module.__all__)
    assert {"extract", "render", "tool_definitions"} <= public
    assert public - {"extract", "render", "tool_definitions"} <= {
        "StreamAssembler",
        "strict_parameters",
    }


def test_mcp_offers_only_the_schema_export() -> None:
    """Serving MCP lives elsewhere; this module only shapes tool definitions."""
    assert mcp.__all__ == ["tool_definitions"]


def test_no_sdk_is_imported_by_callgate_providers() -> None:
    """openai, anthropic and mcp are optional extras: importing the formats needs none of them."""
    code = (
        "import sys\n"
        "for name in ('openai', 'anthropic', 'mcp'):\n"
        "    sys.modules[name] = None  # any import of them now fails\n"
        "import callgate.providers\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "ok", done.stderr
