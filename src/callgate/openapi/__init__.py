"""OpenAPI 3.0/3.1 operations as callgate tools, each call one bounded HTTP request.

```python
from callgate import Registry
from callgate.openapi import import_openapi

api = import_openapi("shop.yaml", api="shop", credentials={"bearerAuth": "shop_token"})
registry = Registry(api.tools)
```

One tool per operation (named by ``operationId``, else method and path),
its arguments the operation's path, query, header and cookie parameters and
its body's properties merged into one schema (a collision is resolved
by prefixing the later one with where it goes, ``body_id``, and reported).
Values are written as OpenAPI's ``style``/``explode`` say (``deepObject``,
form and delimited arrays, objects); bodies are JSON, forms (Stripe's
nested ``a[b]``/``a[0]``), multipart with files (base64 arguments, bounded
by ``max_file_bytes``), raw bytes or text (`callgate.openapi.encoding`).
The base URL is the first server's, its variables filled (defaults, or
``server_variables``), or ``base_url`` (required when the document names no
server). Effects come from the method (``GET``/``HEAD``/``OPTIONS`` →
``read:<api>:<path>``, others → ``write:<api>:<path>``, overridable per
operation) plus ``network:<host>`` always: the host alone, without the port,
as the sandbox's ``network_connect`` names it. Credentials come from the run's
trusted context (``Authority(context={"shop_token": ...})``), never from
arguments: parameters that carry them are not in the schema. The handler
(`callgate.openapi.http`) bounds time and response size and maps answers to
outcomes (4xx → ``error``; a timeout or 5xx after a write → ``unknown``).
Operations that cannot be imported faithfully are listed with the reason and
the JSON pointer of the obstacle (`OpenAPIImport.skipped`), never loosened,
and never drop the rest of the document. See docs/openapi.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from callgate.definitions.formats import FormatCheck
from callgate.errors import DefinitionError
from callgate.openapi.document import (
    Argument,
    Operation,
    OperationConfig,
    load_document,
    schema_values,
)
from callgate.openapi.encoding import request_check
from callgate.openapi.http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_TIMEOUT,
    Credential,
    handler,
)
from callgate.openapi.operations import DEFAULT_MAX_FILE_BYTES, OPENAPI_FORMATS, operations
from callgate.openapi.servers import base_url as resolve_base_url
from callgate.openapi.servers import network_host
from callgate.tools import Registry, ToolSpec, schema_spec

MAX_SCHEMA_VALUES = 1_000_000
"""The default bound of `import_openapi`'s ``max_schema_values``."""

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "MAX_SCHEMA_VALUES",
    "Argument",
    "Credential",
    "OpenAPIImport",
    "Operation",
    "OperationConfig",
    "import_openapi",
    "load_document",
]


@dataclass(frozen=True, kw_only=True)
class OpenAPIImport:
    """What an OpenAPI document became: its operations, the tools built, what was left out."""

    api: str
    base_url: str
    host: str
    operations: tuple[Operation, ...]
    tools: tuple[ToolSpec, ...]
    skipped: Mapping[str, str] = field(default_factory=dict)
    """``{"METHOD /path": why}`` for every operation not imported; the reason ends with
    the JSON pointer of the obstacle (``(at #/paths/~1v1~1charges/get/parameters/3)``)."""

    def register(self, registry: Registry) -> Registry:
        """Add every imported tool to ``registry`` (and return it)."""
        for spec in self.tools:
            registry.add(spec)
        return registry

    def grants(self) -> list[str]:
        """The effects a run needs to be granted to call every imported tool."""
        found: dict[str, None] = {}
        for spec in self.tools:
            for effect in spec.effects:
                found.setdefault(effect.text.replace("{{", "{").replace("}}", "}"))
        return list(found)


def import_openapi(
    source: str | Path | Mapping[str, Any],
    *,
    api: str,
    base_url: str | None = None,
    credentials: Mapping[str, str] | None = None,
    operations_config: Mapping[str, OperationConfig] | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
    formats: Mapping[str, FormatCheck | None] | None = None,
    transport: httpx.BaseTransport | None = None,
    require_credentials: bool = True,
    max_schema_values: int = MAX_SCHEMA_VALUES,
    server_variables: Mapping[str, str] | None = None,
    max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
) -> OpenAPIImport:
    """Read an OpenAPI document (a path, an ``http(s)`` URL, or a dict) into tools.

    ``api`` names the API in effects (``read:shop:/orders``). ``base_url``
    defaults to the document's first server, its variables filled from
    ``server_variables`` or their defaults (a relative server URL is resolved
    against the document's URL); a document without servers needs ``base_url``.
    ``max_file_bytes`` bounds each file a multipart or raw-bytes body carries.
    ``credentials`` maps each security scheme name to the trusted-context key
    holding its secret (``{"bearerAuth": "shop_token"}``). ``operations_config``
    configures operations by ``operationId`` or ``"METHOD /path"`` (effects,
    risk, timeout, or ``include=False``). ``transport`` replaces httpx's
    network transport (tests, proxies). ``max_schema_values`` bounds the values of
    all the imported argument schemas together (each operation copies the components
    it refers to, so a small document could otherwise expand without end). Raises
    `DefinitionError` for a document that cannot be read or (unless
    ``require_credentials`` is false, as when only inspecting) a security scheme
    without a configured key.
    """
    if not api or not all(c.isalnum() or c in "_-." for c in api):
        raise DefinitionError(f"api name {api!r}: use letters, digits, '_', '-' or '.'")
    if timeout <= 0 or max_response_bytes < 1 or max_file_bytes < 1:
        raise DefinitionError("timeout, max_response_bytes and max_file_bytes must be positive")
    document = load_document(source)
    url = resolve_base_url(
        document,
        given=base_url,
        overrides=server_variables,
        source=None if isinstance(source, Mapping) else str(source),
    )
    host = network_host(url)
    found = operations(
        document,
        api=api,
        host=host,
        config=operations_config,
        max_file_bytes=max_file_bytes,
    )
    total = sum(schema_values(op.schema) for op in found if op.skipped is None)
    if total > max_schema_values:
        raise DefinitionError(
            f"the imported operations' argument schemas hold {total:,} values together, over "
            f"max_schema_values={max_schema_values:,} (each operation copies the components "
            "it refers to); leave operations out with operations_config={...: "
            "OperationConfig(include=False)}, or raise max_schema_values if the document "
            "is trusted"
        )
    schemes = ((document.get("components") or {}).get("securitySchemes")) or {}
    keys = dict(credentials or {})
    tools: list[ToolSpec] = []
    skipped: dict[str, str] = {}
    taken: set[str] = set()
    for op in found:
        if op.skipped is not None:
            skipped[op.key] = op.skipped
            continue
        credential_query = {
            c.name
            for names in op.security
            for n in names
            if (c := _credential(n, schemes, keys)) is not None and c.where == "query"
        }
        check = request_check(op, credential_query)
        alternatives = [
            [_credential(name, schemes, keys) for name in names] for names in op.security
        ]
        call = handler(
            op,
            base_url=url,
            credentials=[a for a in alternatives if all(a)],  # type: ignore[misc]
            timeout=op.timeout or timeout,
            max_response_bytes=max_response_bytes,
            transport=transport,
        )
        unconfigured = [a for a in alternatives if not all(a)]
        if (
            require_credentials
            and op.security
            and len(unconfigured) == len(alternatives)
            and () not in op.security
        ):
            names = sorted({n for names in op.security for n in names})
            raise DefinitionError(
                f"{op.key} needs the security scheme {names[0]!r}; pass "
                f"credentials={{{names[0]!r}: '<trusted context key>'}} (the secret is read "
                "from Authority(context=...) at call time, never from the model)"
            )
        try:
            spec = schema_spec(
                op.tool,
                op.description,
                op.schema,
                call,
                dialect=op.dialect,
                formats={**OPENAPI_FORMATS, **(formats or {})},
                taken=taken,
                effects=list(op.effects),
                risk=op.risk,
                timeout=None,  # the request's own timeout decides, and says what it means
                checks=[check] if check is not None else [],
            )
        except DefinitionError as exc:
            skipped[op.key] = f"{exc} (at {op.pointer})"
            continue
        taken.add(spec.name)
        tools.append(spec)
    return OpenAPIImport(
        api=api,
        base_url=url,
        host=host,
        operations=tuple(found),
        tools=tuple(tools),
        skipped=skipped,
    )


def _credential(
    name: str, schemes: Mapping[str, Any], keys: Mapping[str, str]
) -> Credential | None:
    scheme = schemes.get(name)
    key = keys.get(name)
    if not isinstance(scheme, Mapping) or key is None:
        return None
    kind = scheme.get("type")
    if kind == "http" and str(scheme.get("scheme", "")).lower() in ("bearer", "basic"):
        return Credential(scheme=name, kind=str(scheme["scheme"]).lower(), key=key)
    if kind == "apiKey" and scheme.get("in") in ("header", "query", "cookie"):
        return Credential(
            scheme=name, kind="apiKey", key=key, where=str(scheme["in"]), name=str(scheme["name"])
        )
    if kind in ("oauth2", "openIdConnect"):
        # The application obtains the access token; callgate sends it as a bearer token.
        return Credential(scheme=name, kind="bearer", key=key)
    raise DefinitionError(f"security scheme {name!r} of type {kind!r} is not one callgate sends")
