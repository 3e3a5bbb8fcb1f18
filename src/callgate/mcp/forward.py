"""Requests an upstream server makes of the client, passed through the proxy.

An MCP server may ask its client for a model completion (``sampling/createMessage``),
for input from the user (``elicitation/create``) or for the client's folders
(``roots/list``). The proxy declares these to its upstream and forwards each request
to the client whose call is in flight (`ClientRequests`):

* a client on a protocol with a back-channel (2025-11-25 and earlier, over stdio or
  HTTP) gets the request as the server's own request, related to its call;
* a 2026-07-28 client has no back-channel: its call is answered with an
  ``InputRequiredResult`` carrying the request, and the client's retry of the same call
  (with ``input_responses`` and the opaque ``request_state``) delivers the answer to the
  waiting upstream (`Exchange`). The call goes through the gate once.

Which client: the one whose call is in flight. A request made while calls of two
different clients are in flight cannot be attributed (the protocol does not say which
call it serves) and is refused. A sampling or elicitation request made while no call is
in flight is refused: it serves no client's call, and whichever client answered it would
pay for (or be asked about) another's business. A roots request made while no call is in
flight (a filesystem server asks for the roots when it starts) waits for a client, but
only while a single principal is known to the proxy: it is sent to the next client seen
with a back-channel, or put before the next call of a 2026-07-28 client. With clients of
two principals it is refused (one principal's folders would be given for another's).

Gating: a request kind not in ``forward`` is refused; a kind the client did not declare
is refused, as the server would be refused by that client directly. A sampling request
is a model call paid by the client: it is written to the audit trail (``mcp.sampling``:
the server, the call it served, the number and size of the messages, the token limit,
the outcome; never the text). Elicitation is recorded the same way (``mcp.elicitation``:
the mode, the message's size, the user's action, never the content).

Caps: at most ``max_requests_per_call`` requests (16) are forwarded during one call, the
rest refused; at most ``max_held`` (8) roots requests wait for a client between calls; a
sampling request whose messages and system prompt exceed ``max_sampling_chars``
(100,000 characters) is refused. A sampling request's ``includeContext`` is rewritten to
``"none"``: the context of the client's other sessions or servers is never the
upstream's to ask for.
"""

from __future__ import annotations

import contextvars
import logging
import secrets
import warnings
from collections.abc import Awaitable, Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import mcp_types
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

__all__ = ["FORWARDABLE", "ClientRequests", "Exchange"]

logger = logging.getLogger("callgate.mcp")

FORWARDABLE = frozenset({"sampling", "elicitation", "roots"})
"""The kinds of request an upstream may make of the client that the proxy can forward."""

WAIT_FOR_CLIENT = 60.0
"""Seconds a request made while no call is in flight waits for a client to answer it."""

MAX_REQUESTS_PER_CALL = 16
"""Requests of the upstream forwarded during one call; more are refused."""

MAX_HELD = 8
"""Requests (roots) waiting for a client between calls; more are refused."""

MAX_SAMPLING_CHARS = 100_000
"""Characters of a sampling request's messages and system prompt; a longer one is refused."""

ANSWER_TIMEOUT = 600.0
"""Seconds a forwarded request waits for the client's answer (a person may be asked)."""

_SETTLE = 0.2
"""Seconds a call waits after the client answered requests that waited for it (a server's
roots, asked when it started) before the call is sent: the server applies the answer in the
meantime (the filesystem server resolves each folder first)."""

Recorder = Callable[[str, Mapping[str, Any]], None]

_FLIGHT: contextvars.ContextVar[_Flight | None] = contextvars.ContextVar(
    "callgate_mcp_flight", default=None
)
"""The call a request belongs to, when the upstream's request reaches the proxy inside that
call's own task (a 2026-07-28 upstream answers the call with an input-required result)."""


def _principal(client: Hashable) -> Hashable:
    """The principal of a client key ``(principal, session)`` (or of an owner
    ``((principal, session), connection)``)."""
    while isinstance(client, tuple) and client:
        client = client[0]
    return client


def _no_context(request: BaseModel) -> BaseModel:
    """A sampling request with ``includeContext`` set to ``"none"``: the client's other
    context is not the upstream's to ask for."""
    if not isinstance(request, mcp_types.CreateMessageRequest):
        return request
    if request.params.include_context in (None, "none"):
        return request
    return mcp_types.CreateMessageRequest(
        params=request.params.model_copy(update={"include_context": "none"})
    )


def _kind(request: BaseModel) -> str:
    if isinstance(request, mcp_types.CreateMessageRequest):
        return "sampling"
    if isinstance(request, mcp_types.ElicitRequest):
        return "elicitation"
    return "roots"


def _result_type(request: BaseModel) -> type[BaseModel]:
    if isinstance(request, mcp_types.CreateMessageRequest):
        params = request.params
        if params.tools or params.tool_choice is not None:
            return mcp_types.CreateMessageResultWithTools
        return mcp_types.CreateMessageResult
    if isinstance(request, mcp_types.ElicitRequest):
        return mcp_types.ElicitResult
    return mcp_types.ListRootsResult


def _declared(capabilities: mcp_types.ClientCapabilities | None, request: BaseModel) -> str | None:
    """Why the client cannot be asked this (it did not declare it), or None."""
    kind = _kind(request)
    if capabilities is None:
        return f"the client declared no {kind} capability"
    if kind == "sampling":
        return None if capabilities.sampling is not None else "the client declared no sampling"
    if kind == "roots":
        return None if capabilities.roots is not None else "the client declared no roots"
    elicitation = capabilities.elicitation
    if elicitation is None:
        return "the client declared no elicitation"
    assert isinstance(request, mcp_types.ElicitRequest)
    if isinstance(request.params, mcp_types.ElicitRequestURLParams):
        if elicitation.url is None:
            return "the client declared no URL elicitation"
    elif elicitation.form is None and elicitation.url is not None:
        return "the client declared no form elicitation"
    return None


def _error(message: str) -> mcp_types.ErrorData:
    return mcp_types.ErrorData(code=mcp_types.INVALID_REQUEST, message=message)


def _text_size(content: Any) -> int:
    blocks = content if isinstance(content, list) else [content]
    size = 0
    for block in blocks:
        text = getattr(block, "text", None)
        if isinstance(text, str):
            size += len(text)
        data = getattr(block, "data", None)
        if isinstance(data, str):
            size += len(data)
    return size


@dataclass(eq=False)
class _Ask:
    """One request of the upstream, waiting for the client's answer."""

    request: BaseModel
    sending: bool = False
    done: anyio.Event = field(default_factory=anyio.Event)
    answer: BaseModel | mcp_types.ErrorData | None = None

    def settle(self, answer: BaseModel | mcp_types.ErrorData) -> None:
        if not self.done.is_set():
            self.answer = answer
            self.done.set()

    async def wait(self, seconds: float) -> BaseModel | mcp_types.ErrorData:
        with anyio.move_on_after(seconds):
            await self.done.wait()
        if self.answer is None:
            self.settle(_error(f"the client did not answer within {seconds:g} s"))
        assert self.answer is not None
        return self.answer


class Exchange:
    """One call of a 2026-07-28 client that may carry the upstream's requests.

    The call runs in a task of its own; `next` returns either its result or an
    ``InputRequiredResult`` with the requests asked meanwhile, and `deliver` hands the
    client's answers (from its retry) to the waiting upstream.
    """

    def __init__(self, owner: Any) -> None:
        self.token = "callgate-" + secrets.token_urlsafe(24)
        self.owner = owner
        self.result: Any = None
        self.finished = False
        self.scope = anyio.CancelScope()
        self._asked: dict[str, _Ask] = {}
        self._unsent: list[str] = []
        self._wake = anyio.Event()
        self._counter = 0
        self.rounds = 0
        """Input-required answers given: the client comes back with a retry."""

    def ask(self, ask: _Ask) -> bool:
        """Carry ``ask`` to the client with the call's next answer; False once it is over."""
        if self.finished:
            return False
        self._counter += 1
        key = f"{_kind(ask.request)}-{self._counter}"
        self._asked[key] = ask
        self._unsent.append(key)
        self._wake.set()
        return True

    def deliver(self, responses: Mapping[str, Any] | None) -> None:
        for key, response in (responses or {}).items():
            ask = self._asked.pop(key, None)
            if ask is not None:
                ask.settle(response)
        # A request the client left unanswered is refused, never left waiting.
        for key in [k for k in self._asked if k not in self._unsent]:
            self._asked.pop(key).settle(_error("the client sent no answer to this request"))

    def finish(self, result: Any) -> list[_Ask]:
        """The call is over. Requests never sent to the client (asked as the call's result
        arrived) are returned, for another call to carry; those the client was sent stay
        until its retry answers them (and then gets the result) or they time out."""
        self.result = result
        unsent = [self._asked.pop(key) for key in self._unsent if key in self._asked]
        self._unsent.clear()
        self.finished = True
        self._wake.set()
        return unsent

    @property
    def awaiting_answers(self) -> bool:
        """Whether the client was sent requests it has not answered yet."""
        return any(not ask.done.is_set() for ask in self._asked.values())

    async def next(self) -> Any:
        """The call's result, or the requests the client must answer first."""
        while True:
            if self._unsent:
                requests = {key: self._asked[key].request for key in self._unsent}
                self._unsent.clear()
                self.rounds += 1
                return mcp_types.InputRequiredResult(
                    input_requests=requests,
                    request_state=self.token,
                )
            if self.finished:
                return self.result
            if self._wake.is_set():
                self._wake = anyio.Event()
            await self._wake.wait()


@dataclass(eq=False)
class _Flight:
    """A client's call in flight: where the upstream's requests go while it runs."""

    ctx: Any
    owner: Any
    exchange: Exchange | None = None
    run_id: str | None = None
    call_id: str | None = None
    asked: int = 0
    """Requests of the upstream forwarded during this call."""


class ClientRequests:
    """Routes the upstream's requests of the client to the client whose call is in flight.

    Args:
        forward: the kinds forwarded (``sampling``, ``elicitation``, ``roots``); any other
            is refused with a message naming the option.
        server_name: the upstream's local name (messages and the audit trail).
        record: writes an audit event (kind, data); the proxy writes to the ledger.
    """

    def __init__(
        self,
        *,
        forward: Collection[str] = FORWARDABLE,
        server_name: str,
        record: Recorder | None = None,
        max_requests_per_call: int = MAX_REQUESTS_PER_CALL,
        max_held: int = MAX_HELD,
        max_sampling_chars: int = MAX_SAMPLING_CHARS,
    ) -> None:
        unknown = set(forward) - FORWARDABLE
        if unknown:
            raise ValueError(
                f"forward: {sorted(unknown)} cannot be forwarded; expected any of "
                f"{sorted(FORWARDABLE)}"
            )
        self.forward = frozenset(forward)
        self.max_requests_per_call = max_requests_per_call
        self.max_held = max_held
        self.max_sampling_chars = max_sampling_chars
        self.server_name = server_name
        self.record = record
        self.tasks: anyio.abc.TaskGroup | None = None
        """Where the calls of 2026-07-28 clients run (set by the proxy)."""
        self.notify_roots_changed: Callable[[], Awaitable[object]] | None = None
        """Tells the upstream that the client's roots changed (set by the proxy)."""
        self._flights: list[_Flight] = []
        self._exchanges: dict[str, Exchange] = {}
        self._waiting: list[_Ask] = []
        self._sessions: dict[Any, Hashable] = {}
        """Clients with a back-channel seen lately, with their principal."""
        self._principals: dict[Hashable, None] = {}
        """The principals of the clients seen since the proxy started (the last 64)."""

    # -- the upstream side: the callbacks its client connection is given -----------

    def client_options(self) -> dict[str, Any]:
        """The callbacks for the upstream connection (`mcp.Client` keyword arguments): they
        declare to the upstream each kind forwarded."""
        options: dict[str, Any] = {}
        if "sampling" in self.forward:
            options["sampling_callback"] = self._on_sampling
        if "elicitation" in self.forward:
            options["elicitation_callback"] = self._on_elicitation
        if "roots" in self.forward:
            options["list_roots_callback"] = self._on_roots
        return options

    async def _on_sampling(self, context: Any, params: mcp_types.CreateMessageRequestParams) -> Any:
        return await self.ask(mcp_types.CreateMessageRequest(params=params))

    async def _on_elicitation(self, context: Any, params: mcp_types.ElicitRequestParams) -> Any:
        return await self.ask(mcp_types.ElicitRequest(params=params))

    async def _on_roots(self, context: Any) -> Any:
        return await self.ask(mcp_types.ListRootsRequest())

    def principals(self) -> set[Hashable]:
        """The principals known to the proxy: of the clients seen since it started (the last
        64) and of the calls in flight."""
        return set(self._principals) | {_principal(f.owner) for f in self._flights}

    def _principal_seen(self, principal: Hashable) -> None:
        self._principals.pop(principal, None)
        self._principals[principal] = None
        while len(self._principals) > 64:
            del self._principals[next(iter(self._principals))]

    async def ask(self, request: BaseModel) -> Any:
        """Forward one request of the upstream to the right client; its answer, or an error."""
        kind = _kind(request)
        flight = _FLIGHT.get()
        exact = flight is not None and flight in self._flights
        if not exact:
            flight = self._flights[-1] if self._flights else None
        if kind not in self.forward:
            answer: Any = _error(
                f"callgate does not forward {kind} requests from the MCP server "
                f"'{self.server_name}' (not in --forward-requests)"
            )
        elif not exact and len({f.owner for f in self._flights}) > 1:
            answer = _error(
                f"callgate cannot tell which client this {kind} request is for: calls of "
                "several clients are in flight; refused"
            )
        elif (too_big := self._oversized(request)) is not None:
            answer = too_big
        elif flight is None:
            answer = await self._without_call(_no_context(request))
        elif flight.asked >= self.max_requests_per_call:
            answer = _error(
                f"callgate refuses this {kind} request from the MCP server "
                f"'{self.server_name}': {self.max_requests_per_call} requests were already "
                "forwarded during this call (the cap per call)"
            )
        else:
            flight.asked += 1
            answer = await self._to_flight(flight, _no_context(request))
        self._audit(request, answer, flight)
        return answer

    def _oversized(self, request: BaseModel) -> mcp_types.ErrorData | None:
        """Why a sampling request is too large to forward, or None."""
        if not isinstance(request, mcp_types.CreateMessageRequest):
            return None
        params = request.params
        size = sum(_text_size(m.content) for m in params.messages) + len(params.system_prompt or "")
        if size <= self.max_sampling_chars:
            return None
        return _error(
            f"callgate refuses this sampling request from the MCP server "
            f"'{self.server_name}': its messages and system prompt are {size} characters, "
            f"over the cap of {self.max_sampling_chars}"
        )

    def _unattributable(self, request: BaseModel) -> mcp_types.ErrorData | None:
        """Why a request made while no call is in flight is refused, or None (it may wait
        for a client)."""
        kind = _kind(request)
        if kind != "roots":
            return _error(
                f"callgate refuses this {kind} request from the MCP server "
                f"'{self.server_name}': no call is in flight, so it serves no client's call "
                f"(a server may make {kind} requests only while it serves a call)"
            )
        if len(self.principals()) > 1:
            return _error(
                f"callgate refuses this roots request from the MCP server '{self.server_name}': "
                "no call is in flight and clients of several principals are connected, so "
                "it cannot tell whose folders to give; ask during a call"
            )
        return None

    async def _to_flight(self, flight: _Flight, request: BaseModel) -> Any:
        session = flight.ctx.session
        refused = _declared(session.client_capabilities, request)
        if refused is not None:
            return _error(f"{refused}; refused")
        if flight.exchange is None:
            return await self._send(
                session, request, ServerMessageMetadata(related_request_id=flight.ctx.request_id)
            )
        ask = _Ask(request)
        if not flight.exchange.ask(ask):
            return await self._without_call(request)
        return await ask.wait(ANSWER_TIMEOUT)

    async def _send(self, session: Any, request: BaseModel, metadata: Any) -> Any:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                return await session.send_request(
                    request,
                    _result_type(request),
                    request_read_timeout_seconds=ANSWER_TIMEOUT,
                    metadata=metadata,
                )
        except Exception as exc:
            error = getattr(exc, "error", None)
            if isinstance(error, mcp_types.ErrorData):
                return error
            return _error(f"the client could not be asked ({type(exc).__name__})")

    async def _without_call(self, request: BaseModel) -> Any:
        """A request made while no call is in flight: refused unless it is a roots request
        and a single principal is known; then to a known client with a back-channel, else
        held for the next client seen."""
        refused = self._unattributable(request)
        if refused is not None:
            return refused
        for session in reversed(list(self._sessions)):
            if session.can_send_request and _declared(session.client_capabilities, request) is None:
                return await self._send(session, request, None)
        self._waiting = [a for a in self._waiting if not a.done.is_set()]
        if len(self._waiting) >= self.max_held:
            return _error(
                f"callgate refuses this {_kind(request)} request from the MCP server "
                f"'{self.server_name}': {self.max_held} requests already wait for a client"
            )
        ask = _Ask(request)
        self._waiting.append(ask)
        try:
            return await ask.wait(WAIT_FOR_CLIENT)
        finally:
            if ask in self._waiting:
                self._waiting.remove(ask)

    def _audit(self, request: BaseModel, answer: Any, flight: _Flight | None) -> None:
        if self.record is None or isinstance(request, mcp_types.ListRootsRequest):
            return
        refused = isinstance(answer, mcp_types.ErrorData)
        data: dict[str, Any] = {
            "server": self.server_name,
            "call_id": flight.call_id if flight is not None else None,
            "run_id": flight.run_id if flight is not None else None,
            "outcome": "refused" if refused else "answered",
        }
        if refused:
            data["reason"] = answer.message[:200]
        if isinstance(request, mcp_types.CreateMessageRequest):
            params = request.params
            data.update(
                messages=len(params.messages),
                message_chars=sum(_text_size(m.content) for m in params.messages),
                system_prompt_chars=len(params.system_prompt or ""),
                max_tokens=params.max_tokens,
                tools=len(params.tools or ()),
            )
            if params.include_context not in (None, "none"):
                data["include_context_asked"] = str(params.include_context)[:50]
            if not refused:
                data.update(
                    model=str(getattr(answer, "model", ""))[:100],
                    stop_reason=str(getattr(answer, "stop_reason", None) or "")[:50],
                    result_chars=_text_size(getattr(answer, "content", None)),
                )
            kind = "mcp.sampling"
        else:
            assert isinstance(request, mcp_types.ElicitRequest)
            params_e = request.params
            data["mode"] = (
                "url" if isinstance(params_e, mcp_types.ElicitRequestURLParams) else "form"
            )
            data["message_chars"] = len(params_e.message)
            if not refused:
                data["action"] = str(getattr(answer, "action", ""))
            kind = "mcp.elicitation"
        try:
            self.record(kind, data)
        except Exception as exc:  # the audit trail must not break the call
            logger.warning("MCP %s request not recorded: %s", kind, type(exc).__name__)

    # -- the client side: calls in flight ------------------------------------------

    async def roots_changed(self) -> None:
        """The client says its roots changed: the upstream is told, and asks again (the
        client is asked through the proxy, as the first time)."""
        if "roots" not in self.forward or self.notify_roots_changed is None:
            return
        try:
            await self.notify_roots_changed()
        except Exception as exc:  # the upstream is down: it asks when it is back
            logger.debug("roots change not forwarded: %s", type(exc).__name__)

    def client_seen(self, session: Any, principal: Hashable = None) -> None:
        """A client (of ``principal``) with a back-channel made a request: requests waiting
        for a client go to it, while it is the only principal known."""
        self._principal_seen(principal)
        if not session.can_send_request:
            self._refuse_held()
            return
        self._sessions.pop(session, None)
        self._sessions[session] = principal
        while len(self._sessions) > 8:
            del self._sessions[next(iter(self._sessions))]
        self._refuse_held()
        if self.tasks is not None:
            for ask in self._answerable(session):
                if not ask.sending:
                    ask.sending = True
                    self.tasks.start_soon(self._answer_from, session, ask)

    def _refuse_held(self) -> None:
        """Requests held for a client are refused once clients of two principals are known."""
        if len(self.principals()) <= 1:
            return
        for ask in self._waiting:
            if not ask.sending:
                refused = self._unattributable(ask.request)
                if refused is not None:
                    ask.settle(refused)

    def _hold(self, asks: list[_Ask]) -> None:
        """Keep ``asks`` (handed back by a call that ended) for the next client, if they may
        wait; the others are refused."""
        for ask in asks:
            refused = self._unattributable(ask.request)
            if refused is not None:
                ask.settle(refused)
            else:
                self._waiting.append(ask)

    def _answerable(self, session: Any) -> list[_Ask]:
        """The requests waiting for a client that this client declared it answers."""
        self._refuse_held()
        self._waiting = [a for a in self._waiting if not a.done.is_set()]
        capabilities = session.client_capabilities
        return [a for a in self._waiting if _declared(capabilities, a.request) is None]

    async def _answer_from(self, session: Any, ask: _Ask) -> None:
        ask.sending = True
        try:
            ask.settle(await self._send(session, ask.request, None))
        finally:
            if ask in self._waiting:
                self._waiting.remove(ask)

    async def call(
        self,
        ctx: Any,
        params: mcp_types.CallToolRequestParams,
        submit: Callable[[_Flight], Awaitable[Any]],
        *,
        client: Hashable,
    ) -> Any:
        """Run one client call so that the upstream's requests during it reach this client.

        ``client`` is who the transport says is calling (principal and transport session);
        with a handshake-era connection, the connection itself tells clients apart too.
        """
        modern = ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS
        principal = _principal(client)
        self._principal_seen(principal)
        owner: Hashable = (
            client if modern else (client, id(getattr(ctx.session, "_connection", ctx.session)))
        )
        state = params.request_state
        if state is not None and state.startswith("callgate-"):
            exchange = self._exchanges.get(state)
            if exchange is None or exchange.owner != owner:
                return mcp_types.CallToolResult(
                    content=[
                        mcp_types.TextContent(
                            text="this retry names no call in progress (request_state unknown "
                            "or of another client); nothing was sent. Send the call again."
                        )
                    ],
                    is_error=True,
                )
            exchange.deliver(params.input_responses)
            return await self._next(exchange)
        if not modern or self.tasks is None:
            # A back-channel (or none at all): requests go to the client as they come; those
            # waiting for a client are answered before the call reaches the upstream.
            waiting = self._answerable(ctx.session) if ctx.session.can_send_request else []
            for ask in waiting:
                if ask.sending:  # sent when this client listed the tools: its answer
                    await ask.wait(ANSWER_TIMEOUT)
                else:
                    await self._answer_from(ctx.session, ask)
            if waiting:
                await anyio.sleep(_SETTLE)
            self.client_seen(ctx.session, principal)
            flight = _Flight(ctx=ctx, owner=owner)
            self._flights.append(flight)
            token = _FLIGHT.set(flight)
            try:
                return await submit(flight)
            finally:
                _FLIGHT.reset(token)
                self._flights.remove(flight)
        exchange = Exchange(owner)
        flight = _Flight(ctx=ctx, owner=owner, exchange=exchange)
        self._flights.append(flight)  # counted among the principals while held asks are taken
        try:
            self._refuse_held()
        finally:
            self._flights.remove(flight)
        waiting = [a for a in self._answerable(ctx.session) if not a.sending]
        for ask in waiting:
            self._waiting.remove(ask)
            exchange.ask(ask)
        self._exchanges[exchange.token] = exchange

        async def body() -> None:
            result: Any = None
            try:
                with exchange.scope:
                    for ask in waiting:
                        await ask.wait(ANSWER_TIMEOUT)
                    if waiting:
                        await anyio.sleep(_SETTLE)
                    self._flights.append(flight)
                    _FLIGHT.set(flight)
                    try:
                        result = await submit(flight)
                    except Exception as exc:  # never let one call end the proxy's task group
                        logger.exception("MCP call failed in the proxy")
                        result = mcp_types.CallToolResult(
                            content=[
                                mcp_types.TextContent(
                                    text=f"the call failed inside callgate ({type(exc).__name__})"
                                )
                            ],
                            is_error=True,
                        )
                    finally:
                        self._flights.remove(flight)
            finally:
                if result is None:
                    result = mcp_types.CallToolResult(
                        content=[mcp_types.TextContent(text="the call was cancelled")],
                        is_error=True,
                    )
                # A request asked as the result arrived belongs to no call of this one:
                # it waits for the client's next call, as one asked between calls does.
                self._hold(exchange.finish(result))
                if exchange.rounds and self.tasks is not None:
                    self.tasks.start_soon(self._forget, exchange)

        assert self.tasks is not None
        self.tasks.start_soon(body)
        return await self._next(exchange)

    async def _next(self, exchange: Exchange) -> Any:
        try:
            answer = await exchange.next()
        except anyio.get_cancelled_exc_class():
            # The client gave up on its call: the call is cancelled, upstream too.
            exchange.scope.cancel()
            self._exchanges.pop(exchange.token, None)
            raise
        if not isinstance(answer, mcp_types.InputRequiredResult):
            self._exchanges.pop(exchange.token, None)
        return answer

    async def _forget(self, exchange: Exchange) -> None:
        """Drop a finished call whose client never came back for its result."""
        with anyio.move_on_after(ANSWER_TIMEOUT):
            while exchange.awaiting_answers:
                await anyio.sleep(1.0)
        for ask in list(exchange._asked.values()):
            ask.settle(_error("the client did not answer"))
        self._exchanges.pop(exchange.token, None)
