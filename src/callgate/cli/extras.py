"""Optional extras: which command needs which, and the one message that names a missing one.

The ``callgate`` command starts with any extra missing: a command module imports what
an extra brings only when one of its commands runs, and asks `require` first, so a
missing package becomes exit 2 with the install line (``pip install 'callgate[eval]'``)
instead of a traceback. `main` turns any other import of a missing extra's package,
one no command asked for, into the same message.
"""

from __future__ import annotations

import importlib

import typer

from callgate.cli.plain import fail

__all__ = ["EXTRAS", "extra_of", "missing_extra", "require"]

EXTRAS: dict[str, tuple[str, ...]] = {
    # extra: the top-level packages it brings (pyproject.toml, [project.optional-dependencies])
    "a2a": ("a2a", "jwt"),
    "anthropic": ("anthropic",),
    "console": ("jinja2", "multipart", "python_multipart", "starlette", "uvicorn"),
    "eval": ("matplotlib", "mpl_toolkits", "numpy", "pylab", "scipy"),
    "grammar": ("llguidance",),
    "integrations": ("agents", "langchain_core", "langgraph", "pydantic_ai"),
    "llama_cpp": ("llama_cpp", "llguidance"),
    "mcp": ("mcp",),
    "openai": ("openai",),
    "openapi": ("httpx", "yaml"),
    "otel": ("opentelemetry",),
    "postgres": ("psycopg", "psycopg_binary", "psycopg_pool"),
    "skills": ("yaml",),
}
"""A test checks this against pyproject.toml and the installed distributions."""


def extra_of(module: str | None) -> str | None:
    """The extra that brings ``module`` (a dotted name), or None for any other module."""
    top = (module or "").partition(".")[0]
    return next((extra for extra, tops in EXTRAS.items() if top in tops), None)


def missing_extra(extra: str, module: str, what: str) -> typer.Exit:
    """Exit 2: ``what`` needs ``extra``, whose ``module`` cannot be imported."""
    return fail(
        f"{what} needs the '{extra}' extra ({module} cannot be imported): "
        f"pip install 'callgate[{extra}]'",
        2,
    )


def require(extra: str, what: str, *modules: str) -> None:
    """Import ``modules`` (those of ``extra`` that ``what`` uses), or exit 2 naming ``extra``."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            raise missing_extra(extra, module, what) from None
