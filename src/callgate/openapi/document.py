"""An OpenAPI 3.0/3.1 document read into operations: what each tool would be, before any is built.

`load_document` reads a file or URL the user names (YAML or JSON, bounded in
size, never following references to other documents). `operations` walks
the paths and gives one `Operation` per method: its tool name, the merged
argument schema (path, query, header and cookie parameters, and the JSON
body's properties), where each argument goes in the request, the names
changed to resolve collisions, the effects and risk from the method, the
security schemes it needs, or why it cannot be imported (`skipped`).

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

from callgate.definitions.names import tool_name
from callgate.errors import DefinitionError

__all__ = [
    "MAX_DEPTH",
    "MAX_DOCUMENT_BYTES",
    "MAX_NODES",
    "MAX_OPERATION_VALUES",
    "Argument",
    "Operation",
    "OperationConfig",
    "load_document",
    "operations",
    "schema_values",
]

MAX_DOCUMENT_BYTES = 10_000_000
"""The largest document read (10 MB; the largest public API descriptions are a few MB)."""

_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_READS = frozenset({"get", "head", "options"})
_CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})
_CLIENT_HEADERS = frozenset(
    {
        "accept",
        "connection",
        "content-length",
        "content-type",
        "expect",
        "host",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
"""Headers the HTTP client sets (OpenAPI ignores Accept and Content-Type parameters): a
model-chosen Host or Content-Length would send the request elsewhere or desynchronise it."""
MAX_DEPTH = 128
"""How deep a document may nest (a node inside its own alias nests without end)."""
MAX_OPERATION_VALUES = 20_000
"""The most values one operation's argument schema may hold with the components it refers
to: checking a schema costs about 0.3 ms per value, and each operation copies its own."""
MAX_NODES = 2_000_000
"""How many values a document may hold once its YAML aliases are expanded (a 10 MB JSON
document holds at most about this many; an alias bomb holds billions)."""
Location = Literal["path", "query", "header", "cookie", "body"]
_PRIORITY: dict[str, int] = {"path": 0, "query": 1, "header": 2, "cookie": 3, "body": 4}


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
    """One argument of an operation's tool and where it goes in the request."""

    name: str
    """The argument's name in the tool's schema."""
    source: str
    """Its name in the request (the parameter's or the body property's)."""
    location: Location
    required: bool


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
    """How the JSON body is built: none, from the body's properties, or one ``body`` argument."""
    body_required: bool = False
    effects: tuple[str, ...] = ()
    risk: Literal["read", "write_idempotent", "write"] = "write"
    security: tuple[tuple[str, ...], ...] = ()
    """Alternative sets of security scheme names; one set must be satisfied."""
    renamed: tuple[str, ...] = ()
    """How name collisions were resolved, one sentence each."""
    skipped: str | None = None
    """Why the operation is not imported, if it is not."""
    timeout: float | None = None
    idempotency_header: str | None = None
    """The ``Idempotency-Key`` header the operation declares: callgate's key goes there."""

    @property
    def key(self) -> str:
        """``"GET /orders/{id}"``: the operation's name for configuration and reports."""
        return f"{self.method.upper()} {self.path}"


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
        # The safe loader builds plain data only (no Python objects from tags).
        return yaml.safe_load(text)
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


def _pointer(document: Mapping[str, Any], ref: str) -> Any:
    if not ref.startswith("#/"):
        raise _Skip(f"it refers to another document ({ref[:80]}), which callgate never fetches")
    node: Any = document
    for part in ref[2:].split("/"):
        part = urllib.parse.unquote(part).replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            raise _Skip(f"its reference {ref[:80]} points at nothing in the document")
        node = node[part]
    return node


def _deref(document: Mapping[str, Any], node: Any, depth: int = 0) -> Any:
    """A parameter, request body or security requirement with its own ``$ref`` followed."""
    while isinstance(node, Mapping) and isinstance(node.get("$ref"), str) and depth < 16:
        node = _pointer(document, node["$ref"])
        depth += 1
    return node


class _Skip(Exception):
    """An operation callgate cannot import faithfully; the text says why."""


def operations(
    document: Mapping[str, Any],
    *,
    api: str,
    host: str,
    config: Mapping[str, OperationConfig] | None = None,
) -> list[Operation]:
    """One `Operation` per method of every path, in document order."""
    config = dict(config or {})
    dialect: Literal["2020-12", "openapi-3.0"] = (
        "openapi-3.0" if str(document.get("openapi", "")).startswith("3.0") else "2020-12"
    )
    taken: set[str] = set()
    out: list[Operation] = []
    paths = document.get("paths") or {}
    for path, item in paths.items():
        item = _deref(document, item)
        if not isinstance(item, Mapping):
            continue
        shared = item.get("parameters", [])
        for method in _METHODS:
            op = item.get(method)
            if not isinstance(op, Mapping):
                continue
            op_id = op.get("operationId") if isinstance(op.get("operationId"), str) else None
            own = config.get(op_id or "") or config.get(f"{method.upper()} {path}")
            if own is not None and not own.include:
                continue
            base = op_id or f"{method}_{path}"
            name = tool_name(base, taken)
            taken.add(name)
            out.append(
                _operation(document, method, str(path), op, shared, name, dialect, api, host, own)
            )
    return out


def _operation(
    document: Mapping[str, Any],
    method: str,
    path: str,
    op: Mapping[str, Any],
    shared: Any,
    name: str,
    dialect: Literal["2020-12", "openapi-3.0"],
    api: str,
    host: str,
    own: OperationConfig | None,
) -> Operation:
    text = [str(op.get(k)).strip() for k in ("summary", "description") if op.get(k)]
    description = "\n\n".join(dict.fromkeys(text)) or f"{method.upper()} {path}"
    failures = _failures(op.get("responses"))
    if failures:
        description += "\n\nFails with: " + "; ".join(failures) + "."
    is_read = method in _READS
    literal = path.replace("{", "{{").replace("}", "}}")
    effects = (
        own.effects
        if own is not None and own.effects is not None
        else (f"{'read' if is_read else 'write'}:{api}:{literal}",)
    )
    effects = (*effects, f"network:{host}")
    risk = own.risk if own is not None and own.risk else ("read" if is_read else "write")
    op_id = op.get("operationId") if isinstance(op.get("operationId"), str) else None
    common: dict[str, Any] = {
        "method": method,
        "path": path,
        "operation_id": op_id,
        "tool": name,
        "description": description,
        "dialect": dialect,
        "effects": effects,
        "risk": risk,
        "timeout": own.timeout if own is not None else None,
    }
    try:
        return _build(document, op, shared, common)
    except _Skip as skip:
        return Operation(schema={"type": "object"}, skipped=str(skip), **common)


def _failures(responses: Any) -> list[str]:
    """The documented error answers (``404 No such product``), at most five, for the
    description: a model that knows how a call fails calls it better (design rule 3)."""
    if not isinstance(responses, Mapping):
        return []
    found = []
    for code, answer in responses.items():
        text = str(code)
        if not (text[:1] in "45" and len(text) == 3) or not isinstance(answer, Mapping):
            continue
        said = " ".join(str(answer.get("description") or "").split())[:80].rstrip(".")
        found.append(f"{text} {said}".strip())
    return found[:5]


def _build(
    document: Mapping[str, Any], op: Mapping[str, Any], shared: Any, common: dict[str, Any]
) -> Operation:
    if not common["path"].startswith("/"):
        raise _Skip(
            f"its path {common['path'][:80]!r} must start with '/': appended to the base URL "
            "it would change the host the request goes to"
        )
    security = _security(document, op)
    credential_params = _credential_parameters(document, security)
    params: dict[tuple[str, str], Mapping[str, Any]] = {}
    for raw in [*(shared if isinstance(shared, list) else []), *op.get("parameters", [])]:
        param = _deref(document, raw)
        if not isinstance(param, Mapping) or not isinstance(param.get("name"), str):
            raise _Skip("a parameter has no name")
        where = param.get("in")
        if where not in ("path", "query", "header", "cookie"):
            raise _Skip(f"parameter {param['name']!r} is in {where!r}")
        params[(where, param["name"])] = param  # an operation's own replaces the path's
    properties: dict[str, Any] = {}
    required: list[str] = []
    arguments: list[Argument] = []
    renamed: list[str] = []
    used: set[str] = set()
    candidates: list[tuple[str, str, Any, bool]] = []
    idempotency_header: str | None = None
    for (where, pname), param in params.items():
        if where == "header" and pname.lower() in _CREDENTIAL_HEADERS | _CLIENT_HEADERS:
            continue  # credentials come from configuration, never from the model
        if where == "header" and pname.lower() == "idempotency-key":
            idempotency_header = pname  # the call's own key, never the model's choice
            continue
        if (where, pname.lower()) in credential_params:
            continue
        if "content" in param and "schema" not in param:
            raise _Skip(f"parameter {pname!r} is described by 'content', not 'schema'")
        style = param.get("style")
        if style not in (None, "simple", "form") or param.get("explode") is False:
            raise _Skip(f"parameter {pname!r} uses style {style!r}, which callgate does not send")
        schema = copy.deepcopy(param.get("schema") or {})
        if _kind(document, schema) == "object":
            raise _Skip(f"parameter {pname!r} is an object, which callgate does not send")
        if param.get("description") and isinstance(schema, dict):
            schema.setdefault("description", str(param["description"]))
        is_required = bool(param.get("required")) or where == "path"
        candidates.append((where, pname, schema, is_required))
    body_mode: Literal["none", "properties", "whole"] = "none"
    body_required = False
    body = _deref(document, op.get("requestBody"))
    if isinstance(body, Mapping):
        content = body.get("content") or {}
        media = next((m for m in content if _is_json(m)), None)
        if media is None:
            kinds = ", ".join(sorted(str(m) for m in content)) or "none"
            raise _Skip(f"its request body is not JSON ({kinds}), which callgate does not send")
        body_schema = copy.deepcopy((content[media] or {}).get("schema") or {})
        body_required = bool(body.get("required"))
        resolved = _deref(document, body_schema)
        if (
            _kind(document, body_schema) == "object"
            and isinstance(resolved, Mapping)
            and (
                set(resolved)
                <= {
                    "type",
                    "properties",
                    "required",
                    "description",
                    "title",
                    "additionalProperties",
                    "example",
                    "examples",
                    "x-examples",
                }
            )
            and resolved.get("additionalProperties", False) is False
        ):
            body_mode = "properties"
            inner_required = set(resolved.get("required") or [])
            for pname, sub in (resolved.get("properties") or {}).items():
                if isinstance(sub, Mapping) and sub.get("readOnly") is True:
                    continue  # set by the server; never sent
                candidates.append(
                    (
                        "body",
                        str(pname),
                        copy.deepcopy(sub),
                        body_required and pname in inner_required,
                    )
                )
        else:
            body_mode = "whole"
            if isinstance(body.get("description"), str):
                body_schema = {**body_schema} if isinstance(body_schema, dict) else body_schema
            candidates.append(("body", "body", body_schema, body_required))
    for where, pname, schema, is_required in sorted(candidates, key=lambda c: _PRIORITY[c[0]]):
        arg = pname
        if arg in used:
            arg = f"{where}_{pname}"
            while arg in used:
                arg += "_"
            renamed.append(
                f"{where} {'property' if where == 'body' else 'parameter'} {pname!r} is the "
                f"argument {arg!r} ({pname!r} is taken by a parameter found first)"
            )
        used.add(arg)
        properties[arg] = schema
        if is_required:
            required.append(arg)
        arguments.append(Argument(name=arg, source=pname, location=where, required=is_required))  # type: ignore[arg-type]
    merged: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        merged["required"] = required
    merged = _with_definitions(document, merged)
    values = schema_values(merged, MAX_OPERATION_VALUES)
    if values > MAX_OPERATION_VALUES:
        raise _Skip(
            f"its argument schema, with the components it refers to, holds over "
            f"{MAX_OPERATION_VALUES:,} values; a model cannot fill it in one call"
        )
    _drop_read_only(merged)
    return Operation(
        schema=merged,
        arguments=tuple(arguments),
        body=body_mode,
        body_required=body_required,
        security=security,
        renamed=tuple(renamed),
        idempotency_header=idempotency_header,
        **common,
    )


def _is_json(media: Any) -> bool:
    text = str(media).split(";")[0].strip().lower()
    return text == "application/json" or text.endswith("+json")


def _kind(document: Mapping[str, Any], schema: Any) -> str | None:
    resolved = _deref(document, schema)
    if not isinstance(resolved, Mapping):
        return None
    kind = resolved.get("type")
    if kind is None and isinstance(resolved.get("properties"), Mapping):
        return "object"
    return kind if isinstance(kind, str) else None


def _security(document: Mapping[str, Any], op: Mapping[str, Any]) -> tuple[tuple[str, ...], ...]:
    requirement = op.get("security", document.get("security", []))
    if not isinstance(requirement, list):
        return ()
    return tuple(tuple(sorted(r)) for r in requirement if isinstance(r, Mapping))


def _credential_parameters(
    document: Mapping[str, Any], security: tuple[tuple[str, ...], ...]
) -> set[tuple[str, str]]:
    """``(in, lower-cased name)`` of the parameters the security schemes carry."""
    schemes = (document.get("components") or {}).get("securitySchemes") or {}
    found: set[tuple[str, str]] = set()
    for names in security:
        for scheme_name in names:
            scheme = _deref(document, schemes.get(scheme_name))
            if isinstance(scheme, Mapping) and scheme.get("type") == "apiKey":
                found.add((str(scheme.get("in")), str(scheme.get("name", "")).lower()))
    return found


_COMPONENT = "#/components/schemas/"


def _with_definitions(document: Mapping[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with the components it refers to (transitively) under ``$defs``."""
    components = ((document.get("components") or {}).get("schemas")) or {}
    defs: dict[str, Any] = {}
    pending = [schema]
    while pending:
        node = pending.pop()
        for ref in _refs(node):
            if not ref.startswith(_COMPONENT):
                if ref.startswith("#/"):
                    raise _Skip(f"its schema refers to {ref[:80]}, outside components/schemas")
                raise _Skip(f"its schema refers to another document ({ref[:80]})")
            key = urllib.parse.unquote(ref[len(_COMPONENT) :]).replace("~1", "/").replace("~0", "~")
            if key not in defs:
                if key not in components:
                    raise _Skip(f"its schema refers to {ref[:80]}, which is not in the document")
                defs[key] = copy.deepcopy(components[key])
                pending.append(defs[key])
    out: dict[str, Any] = _rewrite_refs(schema)
    if defs:
        out["$defs"] = {k: _rewrite_refs(v) for k, v in defs.items()}
    return out


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
    found: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, Mapping):
            if isinstance(item.get("$ref"), str):
                found.append(item["$ref"])
            stack.extend(
                v for k, v in item.items() if k not in ("example", "examples", "enum", "default")
            )
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _rewrite_refs(node: Any) -> Any:
    if isinstance(node, list):
        return [_rewrite_refs(n) for n in node]
    if not isinstance(node, Mapping):
        return node
    out = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str) and value.startswith(_COMPONENT):
            out[key] = "#/$defs/" + value[len(_COMPONENT) :]
        elif key in ("example", "examples", "enum", "default", "const"):
            out[key] = value
        else:
            out[key] = _rewrite_refs(value)
    return out


def _drop_read_only(node: Any) -> None:
    """Properties marked ``readOnly`` are set by the server: never part of a request."""
    if isinstance(node, list):
        for item in node:
            _drop_read_only(item)
        return
    if not isinstance(node, dict):
        return
    props = node.get("properties")
    if isinstance(props, dict):
        gone = [k for k, v in props.items() if isinstance(v, Mapping) and v.get("readOnly") is True]
        for key in gone:
            del props[key]
        if gone and isinstance(node.get("required"), list):
            node["required"] = [r for r in node["required"] if r not in gone]
    for key, value in node.items():
        if key not in ("example", "examples", "enum", "default", "const"):
            _drop_read_only(value)
