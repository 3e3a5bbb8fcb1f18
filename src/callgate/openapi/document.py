"""An OpenAPI 3.0/3.1 document read, and what each operation would be, before any tool is built.

`load_document` reads a file or URL the user names (YAML or JSON, bounded in
size, never following references to other documents). `Operation` is one
operation as the tool it becomes (`callgate.openapi.operations` builds them):
its tool name, the merged argument schema (path, query, header and cookie
parameters, and the body's properties), where each argument goes in the
request and how it is written there, the names changed to resolve
collisions, the effects and risk from the method, the security schemes it
needs, or why it cannot be imported (`skipped`, with the JSON pointer of
the obstacle).

Pure functions of the document: no request is made here.
"""

from __future__ import annotations

import copy
import json
import re
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from callgate.errors import DefinitionError
from callgate.schema import DATA_KEYWORDS, SCHEMA_MAPS, reachable_schemas

__all__ = [
    "MAX_DEPTH",
    "MAX_DOCUMENT_BYTES",
    "MAX_NODES",
    "MAX_OPERATION_VALUES",
    "Argument",
    "Operation",
    "OperationConfig",
    "load_document",
    "schema_values",
]

MAX_DOCUMENT_BYTES = 10_000_000
"""The largest document read (10 MB; the largest public API descriptions are a few MB)."""
MAX_DEPTH = 128
"""How deep a document may nest (a node inside its own alias nests without end)."""
MAX_OPERATION_VALUES = 20_000
"""The most values one operation's argument schema may hold with the components it refers
to: checking a schema costs about 0.3 ms per value, and each operation copies its own."""
MAX_NODES = 2_000_000
"""How many values a document may hold once its YAML aliases are expanded (a 10 MB JSON
document holds at most about this many; an alias bomb holds billions)."""
Location = Literal["path", "query", "header", "cookie", "body"]
Style = Literal["form", "simple", "deepObject", "spaceDelimited", "pipeDelimited", "json"]
"""How a value is written (OpenAPI's parameter styles; ``json`` for a parameter described
by ``content: application/json``, and for an object or array in a multipart part)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OperationConfig:
    """Local configuration of one operation (by ``operationId`` or ``"METHOD /path"``)."""

    effects: tuple[str, ...] | None = None
    """Effects instead of the ones the method implies (``network:<host>`` is always added)."""
    risk: Literal["read", "write_idempotent", "write"] | None = None
    include: bool = True
    """False leaves the operation out."""
    timeout: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Argument:
    """One argument of an operation's tool, where it goes in the request and how."""

    name: str
    """The argument's name in the tool's schema."""
    source: str
    """Its name in the request (the parameter's or the body property's)."""
    location: Location
    required: bool
    style: Style = "form"
    """How the value is written (``simple`` in a path or header; a body property of a form
    takes its ``encoding`` entry's style, ``form`` by default)."""
    explode: bool = True
    file: bool = False
    """The value is a file's bytes as base64 text (or a list of them): a multipart file
    part, or the whole ``application/octet-stream`` body."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Operation:
    """One operation of the document, as the tool it becomes (or why it does not)."""

    method: str
    path: str
    operation_id: str | None
    tool: str
    description: str
    schema: dict[str, Any]
    """The arguments' JSON Schema, in the document's dialect (``$defs`` from components)."""
    dialect: Literal["2020-12", "openapi-3.0"]
    arguments: tuple[Argument, ...] = ()
    body: Literal["none", "properties", "whole"] = "none"
    """How the body is built: none, from the body's properties, or one ``body`` argument."""
    media: str = "application/json"
    """The body's media type: JSON, ``application/x-www-form-urlencoded``,
    ``multipart/form-data``, ``application/octet-stream`` or ``text/plain``."""
    body_required: bool = False
    effects: tuple[str, ...] = ()
    risk: Literal["read", "write_idempotent", "write"] = "write"
    security: tuple[tuple[str, ...], ...] = ()
    """Alternative sets of security scheme names; one set must be satisfied."""
    renamed: tuple[str, ...] = ()
    """How name collisions were resolved, one sentence each."""
    skipped: str | None = None
    """Why the operation is not imported, if it is not (with the obstacle's JSON pointer)."""
    timeout: float | None = None
    idempotency_header: str | None = None
    """The ``Idempotency-Key`` header the operation declares: callgate's key goes there."""
    query_names: tuple[str, ...] = ()
    """Every query parameter name the operation declares, those credentials fill included:
    an object argument spread into the query may not write one of them."""

    @property
    def key(self) -> str:
        """``"GET /orders/{id}"``: the operation's name for configuration and reports."""
        return f"{self.method.upper()} {self.path}"

    @property
    def pointer(self) -> str:
        """``#/paths/~1orders~1{id}/get``: where the operation is in the document."""
        return "#/paths/" + escape(self.path) + "/" + self.method


def escape(token: str) -> str:
    """One JSON-pointer token: ``~`` as ``~0``, ``/`` as ``~1`` (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def load_document(
    source: str | Path | Mapping[str, Any], *, timeout: float = 10.0
) -> dict[str, Any]:
    """The OpenAPI document at a path or ``http(s)`` URL (YAML or JSON), or given as a dict.

    Raises `DefinitionError` for a document that cannot be read, is over
    `MAX_DOCUMENT_BYTES`, or is not OpenAPI 3.0 or 3.1.
    """
    if isinstance(source, Mapping):
        document: Any = copy.deepcopy(dict(source))
    else:
        text = _read(str(source), timeout)
        document = _parse(text, str(source))
    if not isinstance(document, dict):
        raise DefinitionError(f"{source}: an OpenAPI document is a JSON/YAML object")
    _check_tree(document, str(source) if not isinstance(source, Mapping) else "the document")
    version = str(document.get("openapi", ""))
    if not re.fullmatch(r"3\.[01]\.\d+(-.*)?", version):
        found = version or ("Swagger " + str(document["swagger"]) if "swagger" in document else "")
        raise DefinitionError(
            f"{source}: callgate reads OpenAPI 3.0 and 3.1 documents, this one is "
            f"{found or 'not OpenAPI'!r}; convert Swagger 2.0 with a converter first"
        )
    if not isinstance(document.get("paths", {}), dict):
        raise DefinitionError(f"{source}: 'paths' must be an object")
    return document


def _read(source: str, timeout: float) -> str:
    if source.startswith(("http://", "https://")):
        import httpx

        try:
            with (
                httpx.Client(timeout=timeout, follow_redirects=False) as client,
                client.stream("GET", source) as response,
            ):
                if response.status_code != 200:
                    raise DefinitionError(
                        f"{source}: the server answered HTTP {response.status_code}, "
                        "not the document"
                    )
                chunks: list[bytes] = []
                size = 0
                deadline = time.monotonic() + timeout  # httpx's timeout bounds each read only
                for chunk in response.iter_bytes():
                    if time.monotonic() > deadline:
                        raise DefinitionError(
                            f"{source}: the document did not arrive within {timeout:g} s; "
                            "download it and pass the file"
                        )
                    size += len(chunk)
                    if size > MAX_DOCUMENT_BYTES:
                        raise DefinitionError(f"{source}: over {MAX_DOCUMENT_BYTES:,} bytes")
                    chunks.append(chunk)
        except httpx.HTTPError as exc:
            raise DefinitionError(f"{source}: could not be fetched ({type(exc).__name__})") from exc
        return b"".join(chunks).decode("utf-8", "replace")
    path = Path(source)
    try:
        if path.stat().st_size > MAX_DOCUMENT_BYTES:
            raise DefinitionError(f"{source}: over {MAX_DOCUMENT_BYTES:,} bytes")
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DefinitionError(f"{source}: cannot be read ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise DefinitionError(f"{source}: not UTF-8 text") from exc


def _parse(text: str, source: str) -> Any:
    import yaml

    deep = DefinitionError(
        f"{source}: the document nests deeper than Python's parsers go; an OpenAPI "
        f"document nests at most {MAX_DEPTH} levels here"
    )
    try:
        return json.loads(text)
    except ValueError:
        pass
    except RecursionError:
        raise deep from None
    try:
        # The safe loader builds plain data only (no Python objects from tags); libyaml's
        # is about 20 times faster where PyYAML was built with it (a 4 MB document: 10 s).
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as exc:
        raise DefinitionError(f"{source}: neither JSON nor YAML ({type(exc).__name__})") from exc
    except RecursionError:
        raise deep from None


def _check_tree(document: Any, source: str) -> None:
    """Refuse a document that nests deeper than `MAX_DEPTH` (a YAML node inside its own
    alias nests without end) or holds more than `MAX_NODES` values once its aliases are
    expanded (a 'billion laughs' document): every later walk over it is then bounded."""
    stack: list[tuple[Any, int]] = [(document, 0)]
    count = 0
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise DefinitionError(
                f"{source}: the document expands to more than {MAX_NODES:,} values (YAML "
                "aliases repeat what they name); write the schemas out or use $ref instead"
            )
        if depth > MAX_DEPTH:
            raise DefinitionError(
                f"{source}: the document nests deeper than {MAX_DEPTH} levels (or a YAML "
                "alias sits inside its own anchor); use $ref for recursive schemas"
            )
        if isinstance(node, Mapping):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def pointer(document: Mapping[str, Any], ref: str) -> Any:
    if not ref.startswith("#/"):
        raise Skip(f"it refers to another document ({ref[:80]}), which callgate never fetches")
    node: Any = document
    for part in ref[2:].split("/"):
        part = urllib.parse.unquote(part).replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            raise Skip(f"its reference {ref[:80]} points at nothing in the document")
        node = node[part]
    return node


def deref(document: Mapping[str, Any], node: Any, depth: int = 0) -> Any:
    """A parameter, request body or security requirement with its own ``$ref`` followed."""
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and depth < 16:
        node = pointer(document, node["$ref"])
        depth += 1
    return node


class Skip(Exception):
    """An operation callgate cannot import faithfully; the text says why, ``at`` where (a
    JSON pointer below the operation's, e.g. ``parameters/2``)."""

    def __init__(self, message: str, at: str = "") -> None:
        super().__init__(message)
        self.at = at


_COMPONENT = "#/components/schemas/"


def with_definitions(document: Mapping[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with the components it refers to (transitively) under ``$defs``."""
    components = ((document.get("components") or {}).get("schemas")) or {}
    defs: dict[str, Any] = {}
    pending = [schema]
    while pending:
        node = pending.pop()
        for ref in _refs(node):
            if not ref.startswith(_COMPONENT):
                if ref.startswith("#/"):
                    raise Skip(f"its schema refers to {ref[:80]}, outside components/schemas")
                raise Skip(f"its schema refers to another document ({ref[:80]})")
            key = urllib.parse.unquote(ref[len(_COMPONENT) :]).replace("~1", "/").replace("~0", "~")
            if key not in defs:
                if key not in components:
                    raise Skip(f"its schema refers to {ref[:80]}, which is not in the document")
                defs[key] = copy.deepcopy(components[key])
                _anchor_recursion(defs[key], _COMPONENT + escape(key))
                pending.append(defs[key])
    out: dict[str, Any] = _rewrite_refs(schema)
    if defs:
        out["$defs"] = {k: _rewrite_refs(v) for k, v in defs.items()}
    return out


def _anchor_recursion(component: Any, ref: str) -> None:
    """A component marked ``$recursiveAnchor: true`` (JSON Schema 2019-09, which OpenAI's
    3.1 document uses) refers to itself with ``$recursiveRef: "#"``; copied under
    ``$defs`` that ``#`` would mean the tool's whole schema, so each becomes a ``$ref`` to
    the component (the same schema: the component is its own outermost anchor)."""
    if not isinstance(component, dict) or component.get("$recursiveAnchor") is not True:
        return
    del component["$recursiveAnchor"]
    for _, node in reachable_schemas(component):  # a property named "enum" is a name
        if node.get("$recursiveRef") == "#":
            del node["$recursiveRef"]
            node["$ref"] = ref


def schema_values(schema: Any, limit: int | None = None) -> int:
    """How many values ``schema`` holds (objects, lists and scalars), counting stops past
    ``limit``: the cost of checking and compiling it grows with this number."""
    count = 0
    stack = [schema]
    while stack and (limit is None or count <= limit):
        node = stack.pop()
        count += 1
        if isinstance(node, Mapping):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return count


def _refs(node: Any) -> list[str]:
    # Schemas only: a property named "enum" or "default" holds a schema, not data.
    return [r for _, s in reachable_schemas(node) if isinstance(r := s.get("$ref"), str)]


def _rewrite_refs(node: Any, names: bool = False) -> Any:
    """``node`` with references to components rewritten to ``$defs``; ``names``: ``node``
    maps names to schemas (``properties``), so its keys are names, never keywords."""
    if isinstance(node, list):
        return [_rewrite_refs(n) for n in node]
    if not isinstance(node, Mapping):
        return node
    out = {}
    for key, value in node.items():
        if names:
            out[key] = _rewrite_refs(value)
        elif key == "$ref" and isinstance(value, str) and value.startswith(_COMPONENT):
            out[key] = "#/$defs/" + value[len(_COMPONENT) :]
        elif key in DATA_KEYWORDS:
            out[key] = value
        else:
            out[key] = _rewrite_refs(value, key in SCHEMA_MAPS)
    return out


def drop_read_only(node: Any) -> None:
    """Properties marked ``readOnly`` are set by the server: never part of a request."""
    for _, schema in reachable_schemas(node):  # a property named "properties" is a name
        props = schema.get("properties")
        if not isinstance(props, dict):
            continue
        gone = [k for k, v in props.items() if isinstance(v, Mapping) and v.get("readOnly") is True]
        for key in gone:
            del props[key]
        if gone and isinstance(schema.get("required"), list):
            schema["required"] = [r for r in schema["required"] if r not in gone]
