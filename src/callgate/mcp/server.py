"""Serve a gate's tools over MCP: every call goes through the gate.

`GateServer` is an MCP server built with the SDK's low-level API, so the
tools are listed with callgate's own schemas, verbatim. Each ``tools/call``
becomes one proposed call in a `Run`: parse, validate, authorize, approve,
execute, record. What the client reads:

* ``ok``: the result (for a remote tool behind a proxy, its content blocks);
* ``rejected`` / ``error`` / ``unknown``: ``isError: true`` and the gate's
  model-facing message;
* ``pending``: ``isError: true``, a message naming the approval request and
  how a person resolves it; the same call sent again after approval runs once.

Identity: the principal comes from the transport, never from arguments. Over
HTTP with bearer tokens it is the token's subject (or client id); otherwise
(stdio, unauthenticated HTTP on localhost) it is the configured principal.
There is one `Run` per principal and MCP session, so evidence and provenance
(what the session's tools returned) are per session.

Credentials for upstream systems live in the server's configuration and
reach handlers through ``CallContext.context``; they are scrubbed from every
result the server sends.
"""

from __future__ import annotations

import collections
import getpass
import hashlib
import hmac
import json
import re
import uuid
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

import mcp_types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.subscriptions import ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from callgate.authorize.policy import Authority
from callgate.calls import Observation, Stage, Status, ToolCall
from callgate.gate import Gate, Run
from callgate.mcp.client import REQUEST, RemoteResult
from callgate.providers.mcp import tool_definitions
from callgate.redact import REDACTED
from callgate.tools import ToolSpec

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken
    from mcp.server.context import ServerRequestContext
    from starlette.applications import Starlette

    from callgate.mcp.forward import ClientRequests

__all__ = [
    "ClientIdentity",
    "GateServer",
    "StaticTokens",
    "ToolCatalog",
    "credential_patterns",
    "default_principal",
    "tool_result",
]

_MIN_SECRET_CHARS = 6

DEFAULT_MAX_ARGUMENT_CHARS = 1_000_000
"""The default cap on one call's arguments as compact JSON (the parse stage's own cap on
argument text, `callgate.parse.MAX_ARGUMENT_CHARS`, is the same)."""


def credential_patterns(context: Mapping[str, Any]) -> tuple[str, ...]:
    """Secret patterns for ``Gate(secret_patterns=...)``: the defaults plus every credential
    string in ``context``, so the ledger and audit never hold them either."""
    from callgate.redact import DEFAULT_SECRET_PATTERNS

    values = {v for v in context.values() if isinstance(v, str) and len(v) >= _MIN_SECRET_CHARS}
    return DEFAULT_SECRET_PATTERNS + tuple(re.escape(v) for v in sorted(values))


def default_principal() -> str:
    """The principal of a stdio client: the operating-system user who started the server."""
    try:
        return getpass.getuser()
    except Exception:  # no user name in this environment
        return "local"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientIdentity:
    """Who is calling, as the transport tells it (never as the arguments claim)."""

    principal: str
    session: str | None = None
    authenticated: bool = False


class ToolCatalog(Protocol):
    """Which tools a server lists, kept current (a proxy re-lists its upstream here)."""

    async def listing(self) -> Sequence[ToolSpec]:
        """The tools to list now."""
        ...

    async def prepare_call(self, name: str) -> None:
        """Bring the tool named ``name`` up to date before a call."""
        ...


class _RegistryCatalog:
    def __init__(self, gate: Gate) -> None:
        self.gate = gate

    async def listing(self) -> Sequence[ToolSpec]:
        return list(self.gate.registry)

    async def prepare_call(self, name: str) -> None:
        return None


class _Server(Server[Any]):
    """The SDK's low-level server, whose capabilities say whether the tool list may change
    on every transport (in process, stdio, HTTP), not only where options are passed."""

    def __init__(self, notifications: NotificationOptions, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._notifications = notifications

    def get_capabilities(
        self, notification_options: NotificationOptions | None = None, *args: Any, **kwargs: Any
    ) -> mcp_types.ServerCapabilities:
        if notification_options is None or not notification_options.tools_changed:
            notification_options = self._notifications
        return super().get_capabilities(notification_options, *args, **kwargs)


class GateServer:
    """An MCP server in front of a `Gate`.

    Args:
        gate: the gate whose registry is served and through which every call goes.
        name: the server name announced to clients.
        principal: the principal of clients the transport does not authenticate.
        grants: effects granted to every principal (ignored with ``authority``).
        context: trusted context for handlers (tenant, credentials); never shown
            to the client and scrubbed from results.
        authority: builds the `Authority` for a principal (default: ``grants`` and
            ``context`` for everyone).
        trusted_values: values every run vouches for (e.g. the user's own address),
            so sink arguments holding them need no approval.
        catalog: which tools are listed (default: the gate's registry).
        instructions: text sent to clients on connection.
        max_runs: runs kept in memory (least recently used are dropped).
        list_changed: advertise ``tools.listChanged`` and tell clients when the listed
            tools change (`tools_changed`): on ``subscriptions/listen`` streams
            (2026-07-28 clients) and as ``notifications/tools/list_changed`` on the
            connections of earlier protocol versions.
        lasting_runs: a name (the proxy's server name) under which each principal's
            run survives a restart: a client without a transport session (stdio) gets
            the same run id every time, so a call left pending is found again by its
            exact effect and the person's decision is used once by the next session;
            the run's evidence and what it read come back with it (`Gate.resume_run`).
        max_argument_chars: a call whose arguments, as compact JSON, are longer is
            rejected at the parse stage with the limit named, and not sent (None: no cap
            but the gate's own). The ledger records the rejection, not the arguments.
        client_requests: routes the requests an upstream makes of the client (sampling,
            elicitation, roots) to the client whose call is in flight (the proxy sets it).
    """

    def __init__(
        self,
        gate: Gate,
        *,
        name: str = "callgate",
        principal: str | None = None,
        grants: Sequence[str] = (),
        context: Mapping[str, Any] | None = None,
        authority: Callable[[str], Authority] | None = None,
        trusted_values: Iterable[Any] = (),
        catalog: ToolCatalog | None = None,
        instructions: str | None = None,
        max_runs: int = 1024,
        list_changed: bool = False,
        lasting_runs: str | None = None,
        max_argument_chars: int | None = DEFAULT_MAX_ARGUMENT_CHARS,
        client_requests: ClientRequests | None = None,
    ) -> None:
        self.gate = gate
        self.client_requests = client_requests
        self.list_changed = list_changed
        self.lasting_runs = lasting_runs
        self.max_argument_chars = max_argument_chars
        self._bus = InMemorySubscriptionBus()
        self._sessions: collections.OrderedDict[int, Any] = collections.OrderedDict()
        self.principal = principal or default_principal()
        self.grants = tuple(grants)
        self.context = dict(context or {})
        self._authority = authority
        self.trusted_values = tuple(trusted_values)
        self.catalog: ToolCatalog = catalog if catalog is not None else _RegistryCatalog(gate)
        self.max_runs = max_runs
        self._runs: collections.OrderedDict[tuple[str, str | None], Run] = collections.OrderedDict()
        self._secrets = tuple(
            sorted(
                {v for v in self.context.values() if isinstance(v, str)} - {""},
                key=len,
                reverse=True,
            )
        )
        with warnings.catch_warnings():
            # Roots are deprecated by the 2026-07-28 protocol; 2025-era clients still send
            # their changes, which a proxy passes on.
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            self.server: Server[Any] = _Server(
                NotificationOptions(tools_changed=list_changed),
                name,
                instructions=instructions,
                on_list_tools=self._on_list_tools,
                on_call_tool=self._on_call_tool,
                on_subscriptions_listen=ListenHandler(self._bus) if list_changed else None,
                on_roots_list_changed=self._on_roots_list_changed if client_requests else None,
            )

    # -- telling clients the tool list changed -------------------------------------

    def _remember(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Keep a handshake-era connection's session, to notify it of list changes later."""
        if self.client_requests is not None:
            self.client_requests.client_seen(ctx.session, self.identity(ctx).principal)
        if not self.list_changed or ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        key = id(getattr(ctx.session, "_connection", ctx.session))
        self._sessions[key] = ctx.session
        self._sessions.move_to_end(key)
        while len(self._sessions) > self.max_runs:
            self._sessions.popitem(last=False)

    async def tools_changed(self) -> None:
        """Tell every client that the tools it may see changed (it lists them again)."""
        if not self.list_changed:
            return
        await self._bus.publish(ToolsListChanged())
        for key, session in list(self._sessions.items()):
            try:
                await session.send_tool_list_changed()
            except Exception:  # that client is gone
                self._sessions.pop(key, None)

    async def _on_roots_list_changed(
        self, ctx: ServerRequestContext[Any, Any], params: mcp_types.NotificationParams | None
    ) -> None:
        """A client's roots changed: the upstream is told (it asks for them again)."""
        if self.client_requests is not None:
            self.client_requests.client_seen(ctx.session, self.identity(ctx).principal)
            await self.client_requests.roots_changed()

    # -- the gate side ---------------------------------------------------------

    def authority_for(self, principal: str) -> Authority:
        """The authority of a principal's runs."""
        if self._authority is not None:
            return self._authority(principal)
        return Authority(principal=principal, grants=self.grants, context=self.context)

    def run_for(self, identity: ClientIdentity) -> Run:
        """The run of this principal and session, started on first use."""
        key = (identity.principal, identity.session)
        run = self._runs.get(key)
        if run is None:
            run = self._start_run(identity)
            self._runs[key] = run
            while len(self._runs) > self.max_runs:
                self._runs.popitem(last=False)
        else:
            self._runs.move_to_end(key)
        return run

    def lasting_run_id(self, principal: str) -> str | None:
        """The run id a principal's sessions share across restarts (`lasting_runs`)."""
        if self.lasting_runs is None:
            return None
        digest = hashlib.sha256(f"{self.lasting_runs}\x00{principal}".encode()).hexdigest()
        return "run_mcp_" + digest[:24]

    def _start_run(self, identity: ClientIdentity) -> Run:
        authority = self.authority_for(identity.principal)
        run_id = self.lasting_run_id(identity.principal) if identity.session is None else None
        if run_id is not None:
            ledger = self.gate.ledger
            if ledger.run_facts(run_id) or ledger.calls(run_id=run_id, newest=1):
                return self.gate.resume_run(
                    run_id, authority=authority, trusted_values=self.trusted_values
                )
        return self.gate.run(authority=authority, run_id=run_id, trusted_values=self.trusted_values)

    async def call(
        self,
        identity: ClientIdentity,
        name: str,
        arguments: Mapping[str, Any],
        *,
        flight: Any = None,
    ) -> Observation:
        """Submit one call from a client through the gate (``flight``, if given, is told the
        run and call ids: the audit of the upstream's requests during the call names them)."""
        run = self.run_for(identity)
        call_id = "mcp_" + uuid.uuid4().hex[:20]
        if flight is not None:
            flight.run_id, flight.call_id = run.id, call_id
        if self.max_argument_chars is not None:
            refused = _over_cap(call_id, name, arguments, self.max_argument_chars)
            if refused is not None:
                run.record_rejected([refused])
                return refused
        await self.catalog.prepare_call(name)
        call = ToolCall(id=call_id, name=name, arguments=dict(arguments))
        # asubmit runs a sync handler in a worker thread: it cannot stall other clients.
        observations = await run.asubmit([call])
        return observations[0]

    # -- the MCP side ------------------------------------------------------------

    def identity(self, ctx: ServerRequestContext[Any, Any]) -> ClientIdentity:
        """The caller of one request: the authenticated token's subject, else the configured
        principal; the session is the transport's session id, if any."""
        request = ctx.request
        headers = getattr(request, "headers", None)
        session = headers.get("mcp-session-id") if headers is not None else None
        token = _access_token(request)
        if token is not None:
            return ClientIdentity(
                principal=token.subject or token.client_id, session=session, authenticated=True
            )
        return ClientIdentity(principal=self.principal, session=session)

    async def _on_list_tools(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: mcp_types.PaginatedRequestParams | None,
    ) -> mcp_types.ListToolsResult:
        self._remember(ctx)
        specs = list(await self.catalog.listing())
        definitions = tool_definitions(specs)
        presented = getattr(self.catalog, "presented", None)
        if presented is not None:
            for spec, definition in zip(specs, definitions, strict=True):
                definition.update(presented(spec))
        return mcp_types.ListToolsResult(
            tools=[mcp_types.Tool.model_validate(d) for d in definitions]
        )

    async def _on_call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        self._remember(ctx)
        identity = self.identity(ctx)

        async def submit(flight: Any = None) -> mcp_types.CallToolResult:
            # A proxied call's progress (and log messages) go back to this request.
            token = REQUEST.set(ctx)
            try:
                observation = await self.call(
                    identity, params.name, params.arguments or {}, flight=flight
                )
            finally:
                REQUEST.reset(token)
            return tool_result(observation, secrets=self._secrets)

        if self.client_requests is None:
            return await submit()
        result: Any = await self.client_requests.call(
            ctx, params, submit, client=(identity.principal, identity.session)
        )
        return cast("mcp_types.CallToolResult", result)

    # -- transports --------------------------------------------------------------

    async def run_stdio(self) -> None:
        """Serve one client over this process's stdin and stdout until it disconnects
        or this is cancelled (cancelling does not wait for the client's next line); pipes
        are read and written without worker threads (`callgate.mcp.stdio_wire`). A client line
        longer than the argument cap allows, or not JSON-RPC, is answered with an error (id
        null) and skipped."""
        from mcp.server.stdio import stdio_server

        from callgate.mcp.stdio_wire import answer_bad_lines, line_limit_for, stdio_wire

        async with (
            stdio_wire(line_limit_for(self.max_argument_chars)) as (stdin, stdout),
            stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream),
        ):
            await self.server.run(
                answer_bad_lines(read_stream, write_stream),
                write_stream,
                self.server.create_initialization_options(),
            )

    def http_app(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        path: str = "/mcp",
        tokens: Mapping[str, str] | None = None,
    ) -> Starlette:
        """A Streamable HTTP (ASGI) app serving this server at ``path``.

        ``tokens`` maps bearer tokens to principals; with it, requests without a
        known token get 401 and each client acts as its own principal.
        """
        if not tokens:
            return self.server.streamable_http_app(streamable_http_path=path, host=host)
        from mcp.server.auth.settings import AuthSettings

        return self.server.streamable_http_app(
            streamable_http_path=path,
            host=host,
            auth=AuthSettings(
                issuer_url=f"http://{_url_host(host)}:{port}",
                resource_server_url=None,
            ),
            token_verifier=StaticTokens(tokens),
        )

    async def run_http(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        path: str = "/mcp",
        tokens: Mapping[str, str] | None = None,
    ) -> None:
        """Serve Streamable HTTP on ``host:port`` until cancelled."""
        import uvicorn

        app = self.http_app(host=host, port=port, path=path, tokens=tokens)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning")
        await uvicorn.Server(config).serve()


def _over_cap(
    call_id: str, name: str, arguments: Mapping[str, Any], cap: int
) -> Observation | None:
    """A parse-stage rejection if the arguments, as compact JSON, are over ``cap`` characters."""
    size = len(json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=str))
    if size <= cap:
        return None
    return Observation(
        call_id=call_id,
        tool=name,
        status=Status.REJECTED,
        stage=Stage.PARSE,
        content=(
            f"rule arguments_size: the arguments are {size:,} characters long (as JSON), over "
            f"the limit of {cap:,} characters; they were not read further or sent. Send smaller "
            "arguments (split the work into several calls), or ask the operator to raise "
            "--max-argument-chars."
        ),
        retryable=False,
    )


class StaticTokens:
    """A token verifier for a fixed set of bearer tokens, each standing for one principal."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._tokens = [(token.encode(), principal) for token, principal in tokens.items()]

    async def verify_token(self, token: str) -> AccessToken | None:
        from mcp.server.auth.provider import AccessToken

        given = token.encode()
        found = None
        for known, principal in self._tokens:
            if hmac.compare_digest(known, given):
                found = principal
        if found is None:
            return None
        return AccessToken(token=token, client_id=found, scopes=[], subject=found)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _access_token(request: Any) -> AccessToken | None:
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    if token is not None:
        return token
    scope = getattr(request, "scope", None)
    user = scope.get("user") if isinstance(scope, Mapping) else None
    found = getattr(user, "access_token", None)
    return found if found is not None and hasattr(found, "client_id") else None


# -- observations as MCP results -------------------------------------------------


def _scrub(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if len(secret) >= _MIN_SECRET_CHARS and secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _scrub_json(value: Any, secrets: Sequence[str]) -> Any:
    if isinstance(value, str):
        return _scrub(value, secrets)
    if isinstance(value, list):
        return [_scrub_json(v, secrets) for v in value]
    if isinstance(value, dict):
        return {k: _scrub_json(v, secrets) for k, v in value.items()}
    return value


def _pending_text(observation: Observation) -> str:
    approval = observation.approval_id
    return (
        f"{observation.content}\n"
        f"How it is resolved: a person reviews request {approval} and runs "
        f"`callgate approvals approve {approval}` (or `callgate approvals deny {approval}`). "
        "Once it is approved, send exactly the same call again: it then runs once."
    )


def tool_result(
    observation: Observation, *, secrets: Sequence[str] = ()
) -> mcp_types.CallToolResult:
    """The MCP result for a gate observation (``isError`` unless the call ran and succeeded)."""
    meta: dict[str, Any] = {
        "callgate/status": observation.status.value,
        "callgate/stage": observation.stage.value,
    }
    if observation.approval_id:
        meta["callgate/approval_id"] = observation.approval_id
    if observation.status is not Status.OK:
        text = _pending_text(observation) if observation.status is Status.PENDING else None
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(text=_scrub(text or observation.content, secrets))],
            is_error=True,
            _meta=meta,
        )
    result = observation.result
    if isinstance(result, RemoteResult) and observation.truncated_from is None and result.blocks:
        blocks = [
            mcp_types.TextContent(text=_scrub(b.text, secrets), annotations=b.annotations)
            if isinstance(b, mcp_types.TextContent)
            else b
            for b in result.blocks
        ]
        structured = _scrub_json(result.structured, secrets)
        return mcp_types.CallToolResult(
            content=blocks, structured_content=structured, is_error=False, _meta=meta
        )
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(text=_scrub(observation.content, secrets))],
        is_error=False,
        _meta=meta,
    )
