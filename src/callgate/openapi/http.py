"""The handler of an imported operation: one bounded HTTP request, its answer as an outcome.

How an answer becomes an outcome (see docs/openapi.md):

| answer | read (GET, HEAD, OPTIONS) | write (any other method) |
|---|---|---|
| 2xx | ``ok``: the body (JSON decoded, else text), cut at the size bound | the same |
| 3xx | ``error``: redirects are not followed (they could leave ``network:<host>``) | the same |
| 4xx | ``error``: the request was refused, nothing happened | the same |
| 5xx | ``error`` (retryable) | ``unknown``: the server may have committed before failing |
| no connection | ``error``: nothing was sent | the same |
| timeout after sending | ``error`` (retryable) | ``unknown`` |

Credentials never come from the model: each security scheme's value is read
from the run's trusted context (`CallContext.context`) under the key the
application configured, and put where the scheme says (a bearer or basic
``Authorization`` header, an API-key header, query parameter or cookie).
"""

from __future__ import annotations

import base64
import json
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from callgate.errors import OutcomeUnknown, ToolFailure
from callgate.openapi.document import Operation
from callgate.openapi.encoding import form_pairs, multipart, path_text, query_pairs, text
from callgate.openapi.operations import FORM, MULTIPART, OCTETS, TEXT
from callgate.tools import CallContext

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "DEFAULT_TIMEOUT", "Credential", "handler"]

DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_RESPONSE_BYTES = 1_000_000
_SHOWN = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class Credential:
    """How one security scheme is filled: which trusted-context key holds its value."""

    scheme: str
    kind: str
    """``bearer``, ``basic`` (value ``user:password``), or ``apiKey``."""
    key: str
    """The key in ``CallContext.context`` whose value is the secret."""
    where: str = "header"
    """For ``apiKey``: ``header``, ``query`` or ``cookie``."""
    name: str = "Authorization"
    """For ``apiKey``: the header, query parameter or cookie name."""


def handler(
    operation: Operation,
    *,
    base_url: str,
    credentials: Sequence[Sequence[Credential]],
    timeout: float,
    max_response_bytes: int,
    transport: httpx.BaseTransport | None = None,
) -> Callable[..., Any]:
    """``call(ctx, **arguments)``: send the operation's request, map the answer to an outcome."""
    method = operation.method.upper()
    is_read = operation.method in ("get", "head", "options")
    by_name = {a.name: a for a in operation.arguments}
    base = base_url.rstrip("/")
    origin = httpx.URL(base)

    def call(ctx: CallContext, **arguments: Any) -> Any:
        secrets = _credentials(credentials, ctx, operation)
        path = operation.path
        query: list[tuple[str, str]] = []
        headers: dict[str, str] = {"accept": "application/json"}
        cookies: list[tuple[str, str]] = []
        body: dict[str, Any] = {}
        whole: Any = None
        for name, value in arguments.items():
            arg = by_name[name]
            if arg.location == "path":
                path = path.replace("{" + arg.source + "}", path_text(arg, value, quote=True))
            elif arg.location == "query":
                query.extend(query_pairs(arg, value))
            elif arg.location == "header":
                if value is not None:
                    headers[arg.source] = path_text(arg, value, quote=False)
            elif arg.location == "cookie":
                cookies.extend(query_pairs(arg, value))
            elif operation.body == "whole":
                whole = value
            elif value is not None or operation.media == "application/json":
                body[name] = value  # JSON says null; a form has no null and leaves it out
        if operation.idempotency_header is not None:
            # The gate's key for this operation: a resend of the same call (a replay, a
            # reconciliation) carries the same key, so the service can refuse a double.
            headers[operation.idempotency_header] = ctx.idempotency_key
        for credential, secret in secrets:
            if credential.kind == "bearer":
                headers["authorization"] = f"Bearer {secret}"
            elif credential.kind == "basic":
                token = base64.b64encode(secret.encode()).decode()
                headers["authorization"] = f"Basic {token}"
            elif credential.where == "query":
                query.append((credential.name, secret))
            elif credential.where == "cookie":
                cookies.append((credential.name, secret))
            else:
                headers[credential.name] = secret
        content = _content(operation, body, whole, headers)
        if cookies:
            headers["cookie"] = "; ".join(f"{k}={urllib.parse.quote(v)}" for k, v in cookies)
        url = base + path
        target = httpx.URL(url)
        if (target.scheme, target.netloc, target.userinfo) != (
            origin.scheme,
            origin.netloc,
            origin.userinfo,
        ):
            raise ToolFailure(
                f"{operation.key}: its URL would go to another host ({target.host[:80]!r}, not "
                f"{origin.host!r}); nothing was sent. The operation's path must start with '/': "
                "tell the user the API description is faulty.",
                retryable=False,
            )
        return _send(
            method,
            url,
            params=query,
            headers=headers,
            content=content,
            is_read=is_read,
            timeout=timeout,
            max_bytes=max_response_bytes,
            transport=transport,
            what=operation.key,
            secrets=_forms([s for _, s in secrets]),
        )

    return call


def _content(
    operation: Operation, body: dict[str, Any], whole: Any, headers: dict[str, str]
) -> bytes | None:
    """The request body in the operation's media type (its content type set in
    ``headers``), or None when nothing is sent."""
    media = operation.media
    if operation.body == "whole":
        if whole is None and not operation.body_required:
            return None
        headers["content-type"] = media
        if media == OCTETS:
            return base64.b64decode(whole or "", validate=True)
        if media == TEXT:
            return text(whole).encode()
        return json.dumps(whole).encode()
    if operation.body != "properties" or not (body or operation.body_required):
        return None
    if media == FORM:
        headers["content-type"] = FORM
        return urllib.parse.urlencode(form_pairs(operation, body)).encode()
    if media == MULTIPART:
        content, headers["content-type"] = multipart(operation, body)
        return content
    headers["content-type"] = "application/json"
    by_name = {a.name: a.source for a in operation.arguments}
    return json.dumps({by_name[k]: v for k, v in body.items()}).encode()


_REDACTED = "[redacted: the credential sent]"


def _forms(secrets: Sequence[str]) -> tuple[str, ...]:
    """Every form in which a service could echo a credential back: as sent, URL-quoted,
    and base64 (a basic credential), longest first so no part of one is left behind."""
    found: set[str] = set()
    for secret in secrets:
        found |= {secret, urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret)}
        found.add(base64.b64encode(secret.encode()).decode())
    return tuple(sorted((f for f in found if len(f) >= 4), key=len, reverse=True))


def _redact(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, _REDACTED)
    return text


def _credentials(
    alternatives: Sequence[Sequence[Credential]], ctx: CallContext, operation: Operation
) -> list[tuple[Credential, str]]:
    """The first alternative whose every secret the trusted context holds."""
    if not alternatives:
        return []
    missing: list[str] = []
    for alternative in alternatives:
        found = [(c, ctx.context.get(c.key)) for c in alternative]
        absent = [c.key for c, value in found if not isinstance(value, str) or not value]
        if not absent:
            return [(c, str(v)) for c, v in found]
        missing.extend(absent)
    raise ToolFailure(
        f"{operation.key} needs credentials the application has not configured "
        f"(trusted context key {sorted(set(missing))[0]!r}); nothing was sent. This is not "
        "something to fix in the call: tell the user the tool is not set up.",
        retryable=False,
    )


def _send(
    method: str,
    url: str,
    *,
    params: Sequence[tuple[str, str]],
    headers: Mapping[str, str],
    content: bytes | None,
    is_read: bool,
    timeout: float,
    max_bytes: int,
    transport: httpx.BaseTransport | None,
    what: str,
    secrets: Sequence[str] = (),
) -> Any:
    """Send the request and map the answer. A service can echo the credential it was sent
    (in a body, an error); every form of it is redacted before anyone reads the answer."""
    try:
        with (
            httpx.Client(
                timeout=timeout, follow_redirects=False, transport=transport, trust_env=False
            ) as client,
            client.stream(
                method, url, params=tuple(params), headers=headers, content=content
            ) as answer,
        ):
            data, cut = _read_bounded(answer, max_bytes, time.monotonic() + timeout)
            status = answer.status_code
            media = answer.headers.get("content-type", "")
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol) as exc:
        raise ToolFailure(
            f"{what}: could not connect to the service ({type(exc).__name__}); nothing was sent. "
            "It may be down: try again later.",
        ) from exc
    except httpx.TimeoutException as exc:
        if is_read:
            raise ToolFailure(
                f"{what}: the service did not answer in {timeout:g} s; this read changed nothing "
                "and may be tried again."
            ) from exc
        raise OutcomeUnknown(
            f"{what}: the request was sent but no answer came in {timeout:g} s; the change may "
            "or may not have been made. Do not send it again: check its state first."
        ) from exc
    except httpx.HTTPError as exc:
        if is_read:
            raise ToolFailure(f"{what}: the exchange failed ({type(exc).__name__})") from exc
        raise OutcomeUnknown(
            f"{what}: the exchange broke off after the request was sent ({type(exc).__name__}); "
            "the change may or may not have been made. Check its state before trying again."
        ) from exc
    body = _decode(_redact(data.decode("utf-8", "replace"), secrets), media)
    if 200 <= status < 300:
        if cut:
            shown = _redact(data[:max_bytes].decode("utf-8", "replace"), secrets)
            return {"truncated": f"the answer was over {max_bytes:,} bytes; cut", "text": shown}
        return body
    excerpt = _excerpt(body)
    if 300 <= status < 400:
        raise ToolFailure(
            f"{what}: the service answered HTTP {status} (a redirect), which callgate does not "
            "follow; nothing was done.",
            retryable=False,
        )
    if 400 <= status < 500:
        raise ToolFailure(
            f"{what}: the service refused the request with HTTP {status}: {excerpt}",
            retryable=status in (408, 409, 425, 429),
        )
    if is_read:
        raise ToolFailure(f"{what}: the service failed with HTTP {status}: {excerpt}")
    raise OutcomeUnknown(
        f"{what}: the service failed with HTTP {status} after receiving the request; the change "
        f"may or may not have been made. Check its state before trying again. ({excerpt})"
    )


def _read_bounded(answer: httpx.Response, max_bytes: int, deadline: float) -> tuple[bytes, bool]:
    """The body, cut past ``max_bytes``. httpx's timeout bounds each read, so a service
    sending a byte at a time could hold the call for ever: past ``deadline`` (the request's
    start plus its timeout) the exchange counts as timed out (at most one read later)."""
    chunks: list[bytes] = []
    size = 0
    for chunk in answer.iter_bytes():
        if time.monotonic() > deadline:
            raise httpx.ReadTimeout("the answer did not end within the timeout")
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            return b"".join(chunks)[: max_bytes + 1], True
    return b"".join(chunks), False


def _decode(text: str, media: str) -> Any:
    kind = media.split(";")[0].strip().lower()
    if kind == "application/json" or kind.endswith("+json"):
        try:
            return json.loads(text)
        except (ValueError, RecursionError):  # a hostile service can nest without end
            return text
    return text


def _excerpt(body: Any) -> str:
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    text = text.strip() or "(no body)"
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"
