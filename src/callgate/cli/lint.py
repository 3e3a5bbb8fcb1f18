"""``callgate lint TARGET``: check tool schemas against the design rules.

TARGET is ``module:attribute`` naming a `Registry`; a JSON file of function
definitions (a list, or ``{"tools": [...]}``, in any provider's shape),
linted as schema tools; or an OpenAPI document (a ``.yaml``/``.yml``/``.json``
path or an ``http(s)`` URL) whose operations are linted as the tools
`callgate.openapi` would make of them. Each definition or operation left out
is a CG100 error with its reason (the rest are linted), and a target that
yields no tool is one more: never "0 tools, 0 findings".

Each finding is printed as ``tool: location: RULE severity: message (fix:
...)``, then each tool's estimated definition length in tokens. Exit codes:
0 no finding at or above ``--fail-on`` (default ``warning``); 1 some; 2 bad
input (a target that cannot be imported or read, an unknown rule id).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from callgate.cli.plain import cell, console, fail, plain_json
from callgate.errors import DefinitionError
from callgate.tools import Registry

__all__ = ["app"]

app = typer.Typer(
    help="Lint tool schemas against the design rules (free-form objects, unenumerated "
    "choices, decorative descriptions, naming, nesting, token cost). "
    "Exit codes: 0 clean, 1 findings, 2 bad input.",
    no_args_is_help=True,
    # One command with its target as an argument: options may follow the target.
    context_settings={"allow_interspersed_args": True},
)

_SEVERITIES = ("error", "warning", "info")


def _registry(target: str) -> tuple[Registry, list[Any]]:
    """The registry TARGET names, and CG100 findings for definitions it could not read."""
    lowered = target.lower()
    if lowered.endswith(".json") and not lowered.startswith(("http://", "https://")):
        from callgate.lint.sources import function_definitions, is_function_list

        try:
            data = json.loads(Path(target).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            # RecursionError: nested past what Python's JSON reader takes.
            raise fail(f"{target}: cannot be read as JSON ({exc})", 2) from exc
        if is_function_list(data):
            return function_definitions(data)
    if lowered.startswith(("http://", "https://")) or lowered.endswith((".yaml", ".yml", ".json")):
        from callgate.openapi import import_openapi

        api = Path(target.split("?")[0]).stem or "api"
        cleaned = "".join(c if c.isalnum() or c in "_-." else "_" for c in api)
        try:
            result = import_openapi(
                target,
                api=cleaned,
                base_url="http://openapi.invalid",
                require_credentials=False,
            )
        except DefinitionError as exc:
            raise fail(str(exc), 2) from exc
        from callgate.lint.sources import left_out

        return Registry(result.tools), left_out(result.skipped)
    from callgate.cli.policy import load_registry

    try:
        return load_registry(target), []
    except typer.BadParameter as exc:
        raise fail(str(exc), 2) from exc


@app.callback(invoke_without_command=True)
def lint(
    target: Annotated[
        str, typer.Argument(help="module:attribute of a Registry, or an OpenAPI document.")
    ],
    fail_on: Annotated[
        str, typer.Option("--fail-on", help="Exit 1 for findings of this severity or worse.")
    ] = "warning",
    disable: Annotated[
        list[str] | None,
        typer.Option("--disable", help="A rule id to leave out (repeat for more), e.g. CG103."),
    ] = None,
    per_tool: Annotated[
        int, typer.Option("--per-tool", help="Token budget of one tool's definition (CG107).")
    ] = 600,
    total: Annotated[
        int, typer.Option("--total", help="Token budget of the registry's definitions (CG107).")
    ] = 6_000,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Check every tool of TARGET against the schema design rules."""
    from callgate.lint import RULES, Budgets
    from callgate.lint import lint as run_lint

    if fail_on not in _SEVERITIES:
        raise fail(f"--fail-on must be one of {', '.join(_SEVERITIES)}; got {fail_on!r}", 2)
    off = [rule.upper() for rule in disable or ()]
    unknown = [rule for rule in off if rule not in RULES]
    if unknown:
        raise fail(f"unknown rule id {unknown[0]!r}; rules: {', '.join(RULES)}", 2)
    registry, refused = _registry(target)
    if not len(registry):
        from callgate.lint.sources import nothing_defined

        refused = [*refused, nothing_defined(target, len(refused))]
    report = run_lint(
        registry,
        budgets=Budgets(per_tool=per_tool, registry=total),
        disable=off,
        refused=refused,
    )
    failing = report.at_least(fail_on)  # type: ignore[arg-type]
    left = [f for f in refused if f.rule == "CG100" and f.location != "source"]
    if as_json:
        typer.echo(
            plain_json(
                {
                    "findings": [f.as_dict() for f in report.findings],
                    "tokens": report.tokens,
                    "total_tokens": report.total_tokens,
                    "failing": len(failing),
                    "left_out": len(left),
                }
            )
        )
    else:
        out = console()
        for finding in report.findings:
            style = {"error": "red", "warning": "yellow", "info": ""}[finding.severity]
            out.print(
                cell(
                    f"{finding.tool or '(registry)'}: {finding.location}: {finding.rule} "
                    f"{finding.severity}: {finding.message} (fix: {finding.fix})",
                    style=style,
                ),
                soft_wrap=True,
            )
        for name, tokens in report.tokens.items():
            out.print(cell(f"{name}: about {tokens} tokens"), soft_wrap=True)
        out.print(
            cell(
                f"{len(registry)} tools, "
                + (f"{len(left)} definitions left out, " if left else "")
                + f"about {report.total_tokens} tokens in all "
                f"(UTF-8 bytes / 4); {len(report.findings)} findings, {len(failing)} at "
                f"{fail_on} or worse"
            ),
            soft_wrap=True,
        )
    if failing:
        raise typer.Exit(1)
