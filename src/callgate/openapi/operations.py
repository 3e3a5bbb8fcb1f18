"""An OpenAPI document's operations, each as the tool it would become (or why it cannot).

`operations` walks the paths and gives one `Operation` per method. Its
arguments are the path, query, header and cookie parameters and the body's
properties, merged into one schema; each `Argument` says where its value
goes and how it is written (OpenAPI's ``style`` and ``explode``). Bodies are
JSON, ``application/x-www-form-urlencoded`` (each property written by its
``encoding`` entry: Stripe's ``a[b]`` / ``a[0]`` for ``deepObject``),
``multipart/form-data`` (a file property is base64 text of its bytes,
bounded by ``max_file_bytes``), ``application/octet-stream`` or
``text/plain``. An operation callgate cannot send faithfully is kept with
``skipped``: the reason and the JSON pointer of the obstacle
(``#/paths/~1v1~1charges/get/parameters/3``); it never drops the document.

Pure functions of the document: no request is made here.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from callgate.definitions.formats import FormatCheck
from callgate.definitions.names import tool_name
from callgate.openapi.document import (
    MAX_OPERATION_VALUES,
    Argument,
    Location,
    Operation,
    OperationConfig,
    Skip,
    Style,
    deref,
    drop_read_only,
    escape,
    schema_values,
    with_definitions,
)

__all__ = ["DEFAULT_MAX_FILE_BYTES", "OPENAPI_FORMATS", "operations"]

DEFAULT_MAX_FILE_BYTES = 1_000_000
"""The largest file one argument may carry (its base64 text is a third longer)."""


def _decimal(value: Any) -> bool:
    """A fixed-point decimal: a JSON number, or text such as ``-12.50``."""
    return not isinstance(value, str) or _DECIMAL.fullmatch(value) is not None


def _whole(value: Any) -> bool:
    """Whole seconds since the epoch: an integral number."""
    return not isinstance(value, int | float) or isinstance(value, bool) or value == int(value)


def _range(low: int, high: int) -> Any:
    def check(value: Any) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return True
        return low <= value <= high

    return check


_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?", re.ASCII)
OPENAPI_FORMATS: Mapping[str, FormatCheck | None] = {
    "decimal": _decimal,
    "decimal128": _decimal,
    "unix-time": _whole,
    "unixtime": _whole,
    "int8": _range(-(2**7), 2**7 - 1),
    "int16": _range(-(2**15), 2**15 - 1),
    "uint8": _range(0, 2**8 - 1),
    "uint16": _range(0, 2**16 - 1),
    "uint32": _range(0, 2**32 - 1),
    "uint64": _range(0, 2**64 - 1),
    "commonmark": None,
    "html": None,
}
"""Formats of the OpenAPI Format Registry (and the spellings ``unix-time``/``unixtime``
that Stripe and OpenAI use) that `import_openapi` checks on top of callgate's own
(`callgate.definitions.formats`): ``decimal`` text, whole epoch seconds, integer ranges;
``commonmark`` and ``html`` are text, which the type says. ``formats=`` overrides them."""

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
_PRIORITY: dict[str, int] = {"path": 0, "query": 1, "header": 2, "cookie": 3, "body": 4}
_STYLES: dict[str, frozenset[str]] = {
    "path": frozenset({"simple"}),
    "query": frozenset({"form", "spaceDelimited", "pipeDelimited", "deepObject"}),
    "header": frozenset({"simple"}),
    "cookie": frozenset({"form"}),
    "body": frozenset({"form", "spaceDelimited", "pipeDelimited", "deepObject"}),
}
"""The styles callgate writes, by where the value goes (a form body's properties take the
query's). ``matrix`` and ``label`` path styles are not written: such operations are left
out with the reason."""
FORM = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"
OCTETS = "application/octet-stream"
TEXT = "text/plain"
_PLAIN_OBJECT = frozenset(
    {"type", "properties", "required", "description", "title", "additionalProperties"}
    | {"example", "examples", "x-examples"}
)
_BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"


@dataclass(frozen=True, slots=True)
class _Candidate:
    where: Location
    name: str
    schema: Any
    required: bool
    style: Style = "form"
    explode: bool = True
    file: bool = False


def operations(
    document: Mapping[str, Any],
    *,
    api: str,
    host: str,
    config: Mapping[str, OperationConfig] | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> list[Operation]:
    """One `Operation` per method of every path, in document order.

    ``host`` is the network effect's host (``network:<host>``); ``max_file_bytes`` bounds
    each file argument (its schema's ``maxLength``)."""
    config = dict(config or {})
    dialect: Literal["2020-12", "openapi-3.0"] = (
        "openapi-3.0" if str(document.get("openapi", "")).startswith("3.0") else "2020-12"
    )
    taken: set[str] = set()
    out: list[Operation] = []
    paths = document.get("paths") or {}
    for path, raw_item in paths.items():
        try:
            item = deref(document, raw_item)
        except Skip:
            item = None
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
            common = _common(method, str(path), op, name, dialect, api, host, own)
            try:
                out.append(_build(document, op, shared, common, max_file_bytes))
            except Skip as skip:
                where = f"#/paths/{escape(str(path))}/{method}"
                if skip.at.startswith("#/"):
                    where = skip.at
                elif skip.at:
                    where += "/" + skip.at
                out.append(
                    Operation(schema={"type": "object"}, skipped=f"{skip} (at {where})", **common)
                )
    return out


def _common(
    method: str,
    path: str,
    op: Mapping[str, Any],
    name: str,
    dialect: Literal["2020-12", "openapi-3.0"],
    api: str,
    host: str,
    own: OperationConfig | None,
) -> dict[str, Any]:
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
    return {
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
    document: Mapping[str, Any],
    op: Mapping[str, Any],
    shared: Any,
    common: dict[str, Any],
    max_file_bytes: int,
) -> Operation:
    if not common["path"].startswith("/"):
        raise Skip(
            f"its path {common['path'][:80]!r} must start with '/': appended to the base URL "
            "it would change the host the request goes to"
        )
    item_at = f"#/paths/{escape(common['path'])}"
    security = _security(document, op)
    credential_params = _credential_parameters(document, security)
    params: dict[tuple[str, str], tuple[Mapping[str, Any], str]] = {}
    own = op.get("parameters", [])
    listed = [
        *((raw, f"{item_at}/parameters/{i}") for i, raw in enumerate(_list(shared))),
        *((raw, f"parameters/{i}") for i, raw in enumerate(_list(own))),
    ]
    for raw, at in listed:
        param = _at(document, raw, at)
        if not isinstance(param, Mapping) or not isinstance(param.get("name"), str):
            raise Skip("a parameter has no name", at)
        where = param.get("in")
        if where not in ("path", "query", "header", "cookie"):
            raise Skip(f"parameter {param['name']!r} is in {where!r}", at)
        params[(where, param["name"])] = (param, at)  # an operation's own replaces the path's
    query_names = tuple(pname for where, pname in params if where == "query")
    candidates: list[_Candidate] = []
    idempotency_header: str | None = None
    for (where, pname), (param, at) in params.items():
        if where == "header" and pname.lower() in _CREDENTIAL_HEADERS | _CLIENT_HEADERS:
            continue  # credentials come from configuration, never from the model
        if where == "header" and pname.lower() == "idempotency-key":
            idempotency_header = pname  # the call's own key, never the model's choice
            continue
        if (where, pname.lower()) in credential_params:
            continue
        try:
            candidates.append(_parameter(document, where, pname, param, at))
        except Skip as skip:
            raise Skip(str(skip), skip.at or at) from None
    body_mode: Literal["none", "properties", "whole"] = "none"
    media = "application/json"
    body_required = False
    body = _at(document, op.get("requestBody"), "requestBody")
    if isinstance(body, Mapping):
        body_required = bool(body.get("required"))
        body_mode, media, found = _body(document, body, body_required, max_file_bytes)
        candidates += found
    properties: dict[str, Any] = {}
    required: list[str] = []
    arguments: list[Argument] = []
    renamed: list[str] = []
    used: set[str] = set()
    for c in sorted(candidates, key=lambda c: _PRIORITY[c.where]):
        arg = c.name
        if arg in used:
            arg = f"{c.where}_{c.name}"
            while arg in used:
                arg += "_"
            renamed.append(
                f"{c.where} {'property' if c.where == 'body' else 'parameter'} {c.name!r} is "
                f"the argument {arg!r} ({c.name!r} is taken by a parameter found first)"
            )
        used.add(arg)
        properties[arg] = c.schema
        if c.required:
            required.append(arg)
        arguments.append(
            Argument(
                name=arg,
                source=c.name,
                location=c.where,
                required=c.required,
                style=c.style,
                explode=c.explode,
                file=c.file,
            )
        )
    merged: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        merged["required"] = required
    merged = with_definitions(document, merged)
    values = schema_values(merged, MAX_OPERATION_VALUES)
    if values > MAX_OPERATION_VALUES:
        raise Skip(
            f"its argument schema, with the components it refers to, holds over "
            f"{MAX_OPERATION_VALUES:,} values; a model cannot fill it in one call"
        )
    drop_read_only(merged)
    return Operation(
        schema=merged,
        arguments=tuple(arguments),
        body=body_mode,
        media=media,
        body_required=body_required,
        security=security,
        renamed=tuple(renamed),
        idempotency_header=idempotency_header,
        query_names=query_names,
        **common,
    )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _at(document: Mapping[str, Any], node: Any, at: str) -> Any:
    """``node`` with its ``$ref`` followed; a reference that fails says where it was."""
    try:
        return deref(document, node)
    except Skip as skip:
        raise Skip(str(skip), skip.at or at) from None


def _parameter(
    document: Mapping[str, Any], where: str, pname: str, param: Mapping[str, Any], at: str
) -> _Candidate:
    """The argument one parameter becomes: its schema, style and explode."""
    default_style = "simple" if where in ("path", "header") else "form"
    style = param.get("style", default_style)
    if "content" in param and "schema" not in param:
        content = param.get("content")
        if not isinstance(content, Mapping):
            content = {}
        media = next(iter(content), None)
        if media is None or not _is_json(media) or not isinstance(content[media], Mapping):
            raise Skip(
                f"parameter {pname!r} is described by 'content' of type {str(media)[:60]!r}, "
                "which callgate does not write (JSON only)",
                at,
            )
        schema = copy.deepcopy(content[media].get("schema") or {})
        style = "json"
    else:
        if style not in _STYLES[where]:
            raise Skip(
                f"parameter {pname!r} in {where} uses style {str(style)[:40]!r}, which "
                f"callgate does not write (it writes {', '.join(sorted(_STYLES[where]))})",
                at,
            )
        schema = copy.deepcopy(param.get("schema") or {})
    explode = param.get("explode", style == "form")
    if not isinstance(explode, bool):
        raise Skip(f"parameter {pname!r} has explode {explode!r}, not true or false", at)
    kind = _kind(document, schema)
    if kind == "object" and style in ("spaceDelimited", "pipeDelimited"):
        raise Skip(f"parameter {pname!r} is an object written {style} (not defined)", at)
    if kind == "object" and where == "cookie":
        raise Skip(f"parameter {pname!r} is an object in a cookie (not written)", at)
    if param.get("description") and isinstance(schema, dict):
        schema.setdefault("description", str(param["description"]))
    is_required = bool(param.get("required")) or where == "path"
    return _Candidate(where, pname, schema, is_required, style, explode)  # type: ignore[arg-type]


def _choose(content: Mapping[str, Any]) -> str | None:
    """The body media type callgate writes, JSON first, then forms, then raw bytes or text."""
    kinds = [str(m) for m in content]
    for test in (_is_json, _is(FORM), _is(MULTIPART), _is(OCTETS), _is("*/*"), _is(TEXT)):
        found = next((m for m in kinds if test(m)), None)
        if found is not None:
            return found
    return None


def _body(
    document: Mapping[str, Any],
    body: Mapping[str, Any],
    body_required: bool,
    max_file_bytes: int,
) -> tuple[Literal["properties", "whole"], str, list[_Candidate]]:
    content = body.get("content") or {}
    if not isinstance(content, Mapping):
        raise Skip("its request body's 'content' is not an object", "requestBody")
    chosen = _choose(content)
    if chosen is None:
        kinds = ", ".join(sorted(str(m)[:60] for m in content)) or "none"
        raise Skip(
            f"its request body is {kinds}, which callgate does not write (it writes JSON, "
            f"{FORM}, {MULTIPART}, {OCTETS} or */* and {TEXT})",
            "requestBody/content",
        )
    at = f"requestBody/content/{escape(chosen)}"
    entry = content[chosen] if isinstance(content[chosen], Mapping) else {}
    media = chosen.split(";")[0].strip().lower()
    media = "application/json" if _is_json(media) else OCTETS if media == "*/*" else media
    body_schema = copy.deepcopy(entry.get("schema") or {})
    resolved = _at(document, body_schema, at + "/schema")
    plain = (
        _kind(document, body_schema) == "object"
        and isinstance(resolved, Mapping)
        and set(resolved) <= _PLAIN_OBJECT
        and resolved.get("additionalProperties", False) is False
    )
    if media in (OCTETS, TEXT):
        if media == OCTETS:
            schema = _file_schema(max_file_bytes, body.get("description"))
            return "whole", media, [_Candidate("body", "body", schema, body_required, file=True)]
        if _kind(document, body_schema) not in ("string", None):
            raise Skip("its text/plain body is not a string", at + "/schema")
        schema = body_schema if body_schema else {"type": "string"}
        return "whole", media, [_Candidate("body", "body", schema, body_required)]
    if not plain:
        if media != "application/json":
            raise Skip(
                f"its {media} body is not an object with properties (each property is one "
                "field of the form)",
                at + "/schema",
            )
        return "whole", media, [_Candidate("body", "body", body_schema, body_required)]
    assert isinstance(resolved, Mapping)
    encoding = entry.get("encoding") if isinstance(entry.get("encoding"), Mapping) else {}
    inner_required = set(resolved.get("required") or [])
    found: list[_Candidate] = []
    for pname, sub in (resolved.get("properties") or {}).items():
        if isinstance(sub, Mapping) and sub.get("readOnly") is True:
            continue  # set by the server; never sent
        is_required = body_required and pname in inner_required
        schema = copy.deepcopy(sub)
        if media == "application/json":
            found.append(_Candidate("body", str(pname), schema, is_required))
            continue
        own: Mapping[str, Any] = encoding.get(pname) or {} if encoding else {}
        if not isinstance(own, Mapping):
            own = {}
        if media == MULTIPART:
            found.append(_part(document, str(pname), schema, is_required, max_file_bytes))
            continue
        style = own.get("style", "form")
        explode = own.get("explode", style == "form")
        if style not in _STYLES["body"] or not isinstance(explode, bool):
            raise Skip(
                f"form field {str(pname)!r} is written with style {str(style)[:40]!r} and "
                f"explode {explode!r}, which callgate does not write",
                f"{at}/encoding/{escape(str(pname))}",
            )
        found.append(_Candidate("body", str(pname), schema, is_required, style, explode))
    return "properties", media, found


def _part(
    document: Mapping[str, Any], name: str, schema: Any, required: bool, max_file_bytes: int
) -> _Candidate:
    """One multipart field: a file (base64 text, or a list of them), else text or JSON."""
    resolved = deref(document, schema)
    said = resolved.get("description") if isinstance(resolved, Mapping) else None
    if _is_file(document, resolved):
        return _Candidate("body", name, _file_schema(max_file_bytes, said), required, file=True)
    items = resolved.get("items") if isinstance(resolved, Mapping) else None
    if _kind(document, resolved) == "array" and _is_file(document, deref(document, items)):
        files = {"type": "array", "items": _file_schema(max_file_bytes, None)}
        if said:
            files["description"] = said
        return _Candidate("body", name, files, required, file=True)
    kind = _kind(document, resolved)
    style: Style = "json" if kind in ("object", "array") else "form"
    return _Candidate("body", name, schema, required, style)


def _is_file(document: Mapping[str, Any], schema: Any) -> bool:
    """A string of bytes: ``format: binary`` (3.0) or a ``contentMediaType`` (3.1)."""
    if not isinstance(schema, Mapping):
        return False
    if schema.get("format") == "binary":
        return True
    return "contentMediaType" in schema and schema.get("type") in ("string", None)


def _file_schema(limit: int, description: Any) -> dict[str, Any]:
    said = f"{str(description).strip()} " if description else ""
    return {
        "type": "string",
        "contentEncoding": "base64",
        "maxLength": 4 * -(-limit // 3),
        "pattern": _BASE64,
        "description": f"{said}The file's bytes as base64 (at most {limit:,} bytes).",
    }


def _is_json(media: Any) -> bool:
    text = str(media).split(";")[0].strip().lower()
    return text == "application/json" or text.endswith("+json")


def _is(kind: str) -> Any:
    def test(media: str) -> bool:
        return media.split(";")[0].strip().lower() == kind

    return test


def _kind(document: Mapping[str, Any], schema: Any) -> str | None:
    resolved = deref(document, schema)
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
            scheme = deref(document, schemes.get(scheme_name))
            if isinstance(scheme, Mapping) and scheme.get("type") == "apiKey":
                found.add((str(scheme.get("in")), str(scheme.get("name", "")).lower()))
    return found
