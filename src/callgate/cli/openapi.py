"""``callgate openapi``: see what an OpenAPI document would become before importing it.

``callgate openapi inspect shop.yaml --api shop`` lists one tool per
operation (its method and path, arguments and where each goes, effects,
risk, the credentials it needs), the collisions that were renamed, the
operations left out and why, and the policy the tools need: the grants a run
must hold and a starting policy file (reads allowed, writes asked).

A document without ``servers`` (or with a relative server URL) is inspected
all the same: without ``--base-url`` its effects name the placeholder host
``server.invalid``, and a note says to pass ``--base-url``. Server variables
take their defaults unless ``--server-variable NAME=VALUE`` says otherwise.
Each operation left out is listed with the reason and its JSON pointer.

Exit codes: 0 every operation can be imported; 1 some cannot (listed);
2 bad input (a document that cannot be read, is not OpenAPI 3.0/3.1, or a
``--base-url`` / ``--server-variable`` that does not fit it).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from callgate.cli.plain import cell, console, fail, plain, plain_json
from callgate.errors import DefinitionError

__all__ = ["app", "inspect"]

app = typer.Typer(
    help="OpenAPI: inspect what a document's operations would become as callgate tools.",
    no_args_is_help=True,
)


@app.callback()
def _root() -> None:
    """OpenAPI documents as callgate tools."""


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@app.command()
def inspect(
    source: Annotated[str, typer.Argument(help="The OpenAPI document: a path or an http(s) URL.")],
    api: Annotated[
        str, typer.Option(help="The API's name in effects (read:<api>:<path>).")
    ] = "api",
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url", help="The service's URL (default: the document's first server)."
        ),
    ] = None,
    server_variable: Annotated[
        list[str] | None,
        typer.Option(
            "--server-variable",
            help="NAME=VALUE: a server variable's value instead of its default (repeat).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """List the tools an OpenAPI document would create and the policy they need."""
    from callgate.openapi import import_openapi, load_document
    from callgate.openapi.servers import base_url as resolve

    variables: dict[str, str] = {}
    for item in server_variable or ():
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise fail(f"--server-variable takes NAME=VALUE; got {item!r}", 2)
        variables[name] = value
    note = None
    try:
        document = load_document(source)
        if base_url is None and not variables and not _has_server(document, source):
            base_url = _PLACEHOLDER
            note = (
                "the document names no absolute server URL: effects show the placeholder "
                f"host {_PLACEHOLDER.split('//')[1]}; pass --base-url https://… for the real one"
            )
        url = resolve(document, given=base_url, overrides=variables, source=source)
        result = import_openapi(document, api=api, base_url=url, require_credentials=False)
    except DefinitionError as exc:
        raise fail(str(exc), 2) from exc
    built = {spec.name: spec for spec in result.tools}
    rows: list[dict[str, Any]] = []
    for op in result.operations:
        spec = built.get(op.tool)
        rows.append(
            {
                "tool": op.tool,
                "operation": op.key,
                "imported": spec is not None,
                "arguments": [
                    {"name": a.name, "in": a.location, "as": a.source, "required": a.required}
                    for a in op.arguments
                ],
                "effects": [e.replace("{{", "{").replace("}}", "}") for e in op.effects],
                "risk": op.risk,
                "credentials": sorted({n for names in op.security for n in names}),
                "renamed": list(op.renamed),
                "pointer": op.pointer,
                "skipped": result.skipped.get(op.key),
            }
        )
    grants = result.grants()
    policy = _policy(result.api, rows)
    if as_json:
        typer.echo(
            plain_json(
                {
                    "api": result.api,
                    "base_url": None if note else result.base_url,
                    "note": note,
                    "tools": rows,
                    "grants": grants,
                    "policy": policy,
                }
            )
        )
    else:
        _print(result.api, result.base_url, rows, grants, policy)
        if note:
            console().print(cell(f"note: {note}", style="yellow"))
    if result.skipped:
        raise typer.Exit(1)


_PLACEHOLDER = "https://server.invalid"


def _has_server(document: dict[str, Any], source: str) -> bool:
    """Whether the document's first server gives an absolute URL (variables at defaults)."""
    from callgate.openapi.servers import base_url as resolve

    try:
        resolve(document, source=source)
    except DefinitionError:
        return False
    return True


def _policy(api: str, rows: list[dict[str, Any]]) -> str:
    """A starting policy file: each imported read allowed, each write asked."""
    lines = [f"# A starting policy for the {api} API: reads allowed, writes asked."]
    for row in rows:
        if not row["imported"]:
            continue
        action = "allow" if row["risk"] == "read" else "ask"
        lines += [
            "",
            "[[rule]]",
            f"name = {_toml_string(row['operation'])}",
            f'action = "{action}"',
            f"tool = {_toml_string(row['tool'])}",
        ]
    return "\n".join(lines) + "\n"


def _print(
    api: str, base_url: str, rows: list[dict[str, Any]], grants: list[str], policy: str
) -> None:
    out = console()
    imported = sum(r["imported"] for r in rows)
    table = Table(
        title=cell(f"{api} at {base_url}: {imported} of {len(rows)} operations as tools"),
        title_justify="left",
    )
    for column in ("tool", "operation", "arguments (in)", "effects", "risk", "credentials"):
        table.add_column(column)
    for row in rows:
        if not row["imported"]:
            continue
        arguments = ", ".join(
            f"{a['name']}{'' if a['required'] else '?'} ({a['in']})" for a in row["arguments"]
        )
        table.add_row(
            cell(row["tool"]),
            cell(row["operation"]),
            cell(arguments or "-", multiline=True),
            cell("\n".join(row["effects"]), multiline=True),
            cell(row["risk"]),
            cell(", ".join(row["credentials"]) or "-"),
        )
    out.print(table)
    for row in rows:
        for note in row["renamed"]:
            out.print(cell(f"renamed in {row['tool']}: {note}"))
    for row in rows:
        if row["skipped"]:
            out.print(cell(f"left out: {row['operation']}: {row['skipped']}", style="yellow"))
    out.print(cell("grants a run needs: " + ", ".join(grants)))
    out.print(cell("starting policy (TOML):"))
    for line in policy.splitlines():
        out.print(cell("  " + plain(line)))
