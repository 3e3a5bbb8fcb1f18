"""Where an OpenAPI document's requests go: its server URL, variables filled, or the caller's.

OpenAPI lists ``servers``, each a URL that may hold variables
(``https://{region}.api.example.com/{version}``), each variable with a
``default`` and perhaps an ``enum``. `base_url` takes the first server,
fills every variable from ``overrides`` (which must name variables the
server has, with values its ``enum`` allows) or else from its default, and
resolves a relative URL (``/api/v3``) against the document's own URL when
the document was read from one. A document without ``servers``, or whose
server URL is relative and was read from a file, names no host: the caller
must give ``base_url`` (`DefinitionError` says so, with the CLI's spelling).

The network effect is ``network:<host>``: the host alone, lower-cased, without
the port, as the sandbox's ``network_connect`` names it (an IPv6 address in
brackets). The port and scheme come from the document or the caller's
``base_url``, never from the model.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from callgate.errors import DefinitionError

__all__ = ["NO_SERVER", "base_url", "network_host"]

NO_SERVER = (
    "pass base_url='https://…' (on the command line: --base-url https://…) with the "
    "service's address"
)
_VARIABLE = re.compile(r"\{([^{}]*)\}")


def base_url(
    document: Mapping[str, Any],
    *,
    given: str | None = None,
    overrides: Mapping[str, str] | None = None,
    source: str | None = None,
) -> str:
    """The absolute ``http(s)`` URL requests go to.

    ``given`` (the caller's ``base_url``) wins; else the first server's URL with its
    variables filled (``overrides`` first, then defaults), resolved against ``source``
    when that is the document's own ``http(s)`` URL. Raises `DefinitionError` naming
    what is missing and how to give it.
    """
    overrides = dict(overrides or {})
    if given:
        url = given
        if overrides:
            raise DefinitionError(
                f"server_variables {sorted(overrides)} were given with base_url={given!r}; "
                "base_url is used as it is: give one or the other"
            )
    else:
        url = _server_url(document, overrides)
        relative = url and not urllib.parse.urlsplit(url).scheme
        if relative and source and source.startswith(("http://", "https://")):
            url = urllib.parse.urljoin(source, url)
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        if not url:
            raise DefinitionError(f"the document names no server (no 'servers'); {NO_SERVER}")
        raise DefinitionError(
            f"the API's base URL {url[:200]!r} is not an absolute http(s) URL (a relative "
            f"server URL is relative to where the document came from); {NO_SERVER}"
        )
    return url


def network_host(url: str) -> str:
    """The host of ``url`` as the ``network:`` effect names it: lower-cased, no port, no
    user information; an IPv6 address in brackets."""
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    return f"[{host}]" if ":" in host else host


def _server_url(document: Mapping[str, Any], overrides: dict[str, str]) -> str:
    servers = document.get("servers")
    first = servers[0] if isinstance(servers, list) and servers else None
    if not isinstance(first, Mapping) or not isinstance(first.get("url"), str):
        if overrides:
            raise DefinitionError(
                f"server_variables {sorted(overrides)} were given, but the document names "
                "no server with variables"
            )
        return ""
    url = str(first["url"])
    declared = first.get("variables")
    variables: Mapping[str, Any] = declared if isinstance(declared, Mapping) else {}
    unknown = sorted(set(overrides) - set(variables))
    if unknown:
        raise DefinitionError(
            f"server variable {unknown[0]!r} is not one of the server's "
            f"({', '.join(repr(str(v)) for v in variables) or 'it has none'}); server URL "
            f"{url[:200]!r}"
        )
    values: dict[str, str] = {}
    for name, spec in variables.items():
        spec = spec if isinstance(spec, Mapping) else {}
        allowed = [str(v) for v in spec.get("enum") or []]
        if name in overrides:
            value = str(overrides[name])
            if allowed and value not in allowed:
                raise DefinitionError(
                    f"server variable {str(name)!r} is {value[:80]!r}; the document allows "
                    f"{', '.join(repr(a) for a in allowed)}"
                )
        elif "default" in spec:
            value = str(spec["default"])
        else:
            raise DefinitionError(
                f"server variable {str(name)!r} has no default; give it with "
                f"server_variables={{{str(name)!r}: '…'}}"
            )
        values[str(name)] = value

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise DefinitionError(
                f"the server URL {url[:200]!r} uses {{{name}}}, which its 'variables' do not "
                f"define; {NO_SERVER}"
            )
        return values[name]

    return _VARIABLE.sub(fill, url)
