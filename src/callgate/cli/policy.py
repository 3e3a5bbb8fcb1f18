"""``callgate policy``: validate a policy file, and explain which rule decides a call."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from callgate.authorize.policy import Action, Policy, Rule
from callgate.authorize.policy_file import PolicyFileError, load_policy_file
from callgate.cli.plain import cell, console, fail, plain_json
from callgate.errors import DefinitionError
from callgate.tools import Registry, ToolSpec, make_spec

__all__ = ["app", "load_registry"]

app = typer.Typer(help="Check and explain policy files.", no_args_is_help=True)

PolicyPath = Annotated[Path, typer.Argument(help="The policy file (TOML).")]


def load_registry(target: str) -> Registry:
    """Import ``module:attribute`` and return the Registry it names."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise typer.BadParameter(
            f"expected module:attribute, e.g. myapp.tools:registry; got {target!r}"
        )
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise typer.BadParameter(f"cannot import {module_name!r}: {exc}") from exc
    if not hasattr(module, attribute):
        raise typer.BadParameter(
            f"module {module_name!r} has no attribute {attribute!r}; name the Registry it "
            "defines (module:attribute)"
        )
    registry = getattr(module, attribute)
    if not isinstance(registry, Registry):
        raise typer.BadParameter(f"{target} is {type(registry).__name__}, not a callgate Registry")
    return registry


def _load(path: Path) -> Policy:
    try:
        return load_policy_file(path)
    except PolicyFileError as exc:
        raise fail(str(exc), 2) from exc


@app.command()
def check(
    path: PolicyPath,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Validate a policy file and list its rules. Exit 0 if valid, 2 if not."""
    policy = _load(path)
    if as_json:
        typer.echo(
            plain_json(
                {
                    "valid": True,
                    "version": policy.version,
                    "preset": policy.preset.value,
                    "untrusted_sinks": policy.untrusted_sinks.value,
                    "rules": [_rule_json(r) for r in policy.rules],
                }
            )
        )
        return
    out = console()
    title = cell(f"{path}: valid (version {policy.version})")
    table = Table(title=title, title_justify="left")
    for column in ("#", "action", "tool", "effect", "when", "name"):
        table.add_column(column)
    for i, rule in enumerate(policy.rules, 1):
        row = _rule_json(rule)
        table.add_row(
            *(cell(v) for v in (i, row["action"], row["tool"], row["effect"] or "")),
            cell(row["when"]),
            cell(row["name"]),
        )
    out.print(table)
    out.print(
        f"preset: {policy.preset.value}; untrusted sink values: {policy.untrusted_sinks.value}; "
        "evaluation: deny beats ask beats allow; no matching rule → preset, else deny"
    )


def _rule_json(rule: Rule) -> dict[str, Any]:
    label = {Action.ADMIT: "allow", Action.ASK: "ask", Action.DENY: "deny"}[rule.action]
    when = getattr(rule.when, "__name__", "predicate") if rule.when is not None else ""
    return {
        "action": label,
        "tool": rule.tool,
        "effect": rule.effect,
        "when": when,
        "name": rule.name,
    }


@app.command()
def explain(
    path: PolicyPath,
    tool: Annotated[str, typer.Option(help="The tool's name.")],
    args: Annotated[str, typer.Option(help="The call's arguments as a JSON object.")] = "{}",
    registry: Annotated[
        str | None,
        typer.Option(help="module:attribute of the Registry, to know the tool's effects and risk."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Say which rule decides a call, and why. Exit 0 for allow, 1 for ask or deny."""
    policy = _load(path)
    try:
        values = json.loads(args)
    except json.JSONDecodeError as exc:
        raise fail(f"--args is not valid JSON: {exc}", 2) from exc
    if not isinstance(values, dict):
        raise fail("--args must be a JSON object, e.g. '{\"amount\": 20}'", 2)
    spec = _spec(tool, registry)
    effects = spec.required_effects(values) if registry is not None else ()
    matching = [r for r in policy.rules if r.matches(spec, values, effects)]
    action, rule = policy.decide(spec, values, effects)
    verdict = {Action.ADMIT: "allow", Action.ASK: "ask", Action.DENY: "deny"}[action]
    reason = (
        f"rule {rule.name!r}"
        if rule is not None
        else "no rule matches and the preset has no default"
    )
    if as_json:
        typer.echo(
            plain_json(
                {
                    "decision": verdict,
                    "rule": rule.name if rule else None,
                    "effects": [str(e) for e in effects],
                    "matching_rules": [r.name for r in matching],
                }
            )
        )
    else:
        out = console()
        out.print(Text.assemble((verdict, "bold"), " — decided by ", cell(reason)))
        if effects:
            out.print(cell("effects required: " + ", ".join(str(e) for e in effects)))
        elif registry is None:
            out.print("(no --registry given: effect-based rules were not evaluated)")
        for r in matching:
            out.print(cell(f"  matches: {_rule_json(r)['action']} {r.name}"))
        out.print("order: deny beats ask beats allow; no match → preset, else deny")
    raise typer.Exit(0 if action is Action.ADMIT else 1)


def _spec(tool: str, registry: str | None) -> ToolSpec:
    if registry is not None:
        found = load_registry(registry).get(tool)
        if found is None:
            raise typer.BadParameter(f"the registry has no tool named {tool!r}")
        return found

    def placeholder() -> None:
        """A stand-in: only the tool's name is known."""

    try:
        return make_spec(placeholder, name=tool)
    except DefinitionError as exc:
        raise typer.BadParameter(str(exc)) from exc
