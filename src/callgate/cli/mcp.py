"""``callgate mcp``: serve a registry over MCP, proxy an MCP server, manage tool pins.

Exit codes: 0 success (a server that ran until its client left); 1 the
command ran and found a problem (an upstream that could not be reached,
nothing to approve); 2 bad usage or input (a bad policy file, target, pin
file or option).

The MCP SDK is imported only when a command needs it, so ``callgate``
works without the ``mcp`` extra installed.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from callgate.cli.plain import cell, console, fail, plain, plain_json

if TYPE_CHECKING:
    from callgate.authorize.policy import Policy
    from callgate.gate import Gate
    from callgate.ledger.base import Ledger
    from callgate.mcp.client import ToolConfig
    from callgate.mcp.pins import PinStore
    from callgate.tools import Registry

__all__ = ["app"]

app = typer.Typer(
    help=(
        "MCP: serve a registry's tools through the gate, put a policy-enforcing proxy in front "
        "of any MCP server, and review tool pins. Exit codes: 0 ok, 1 problem found, 2 bad input."
    ),
    no_args_is_help=True,
)
pins_app = typer.Typer(
    help=(
        "Review and approve pinned MCP tool definitions (the rug-pull defence): a tool whose "
        "description or schema changed, or that a server added later, is blocked until approved."
    ),
    no_args_is_help=True,
)
app.add_typer(pins_app, name="pins")

DEFAULT_PINS = "callgate-pins.json"

# -- shared options ------------------------------------------------------------------

PolicyOption = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        help="Policy file (TOML); see `callgate policy check`. Required unless TARGET is a Gate.",
    ),
]
TransportOption = Annotated[
    str, typer.Option("--transport", help="How clients connect: 'stdio' or 'http'.")
]
HostOption = Annotated[
    str, typer.Option("--host", help="HTTP address to bind (keep 127.0.0.1 unless behind TLS).")
]
PortOption = Annotated[int, typer.Option("--port", help="HTTP port.")]
PrincipalOption = Annotated[
    str | None,
    typer.Option(
        "--principal",
        help="The principal of clients the transport does not authenticate "
        "(stdio; HTTP without --token). Default: the operating-system user.",
    ),
]
GrantOption = Annotated[
    list[str] | None,
    typer.Option("--grant", help="An effect granted to every client, e.g. 'read:*' (repeatable)."),
]
ContextOption = Annotated[
    list[str] | None,
    typer.Option(
        "--context-env",
        help="KEY=ENVVAR: put the environment variable's value in the handlers' trusted "
        "context under KEY (credentials, tenant). Never shown to clients (repeatable).",
    ),
]
TokenOption = Annotated[
    list[str] | None,
    typer.Option(
        "--token",
        help="PRINCIPAL=ENVVAR: HTTP clients presenting the bearer token held in ENVVAR act as "
        "PRINCIPAL; with any --token, unauthenticated requests get 401 (repeatable).",
    ),
]
LedgerOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        "--ledger",
        help="SQLite ledger file for calls, approvals and the audit trail (default: in "
        "memory, which nothing else can read: give a file to inspect the calls with "
        "`callgate ledger list --db FILE` and decide approvals with `callgate approvals "
        "--db FILE`).",
    ),
]
TrustOption = Annotated[
    list[str] | None,
    typer.Option(
        "--trust",
        help="A value every run vouches for, e.g. the user's own e-mail address, so sink "
        "arguments holding it need no approval (repeatable).",
    ),
]
PinsOption = Annotated[
    Path,
    typer.Option("--pins", envvar="CALLGATE_PINS", help="The pin file (JSON)."),
]


def bad_usage(message: str, code: int = 2) -> typer.Exit:
    return fail(message, code)


def _say(text: str) -> None:
    """One line of news on stderr (stdout may carry the protocol), as plain text."""
    console(stderr=True).print(cell(text), soft_wrap=True)


def _require_sdk() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise bad_usage("the MCP SDK is not installed: pip install 'callgate[mcp]'") from exc


def _pairs(values: Sequence[str] | None, option: str) -> list[tuple[str, str]]:
    out = []
    for value in values or ():
        key, sep, rest = value.partition("=")
        if not sep or not key or not rest:
            raise bad_usage(f"{option} expects NAME=ENVVAR, got {value!r}")
        out.append((key, rest))
    return out


def _from_env(values: Sequence[str] | None, option: str) -> dict[str, str]:
    found = {}
    for key, variable in _pairs(values, option):
        value = os.environ.get(variable)
        if value is None:
            raise bad_usage(
                f"{option} {key}={variable}: the environment variable {variable} is not set"
            )
        found[key] = value
    return found


def _tokens(values: Sequence[str] | None) -> dict[str, str]:
    """Bearer token → principal, read from the environment."""
    return {token: principal for principal, token in _from_env(values, "--token").items()}


def _policy(path: Path | None) -> Policy | None:
    if path is None:
        return None
    from callgate.authorize.policy_file import PolicyFileError, load_policy_file

    try:
        return load_policy_file(path)
    except PolicyFileError as exc:
        raise bad_usage(str(exc)) from exc


def _ledger(path: Path | None) -> Ledger:
    """The SQLite ledger at ``path``; without one, in memory: a server a desktop app starts
    has no predictable working directory to put a file in."""
    if path is None:
        from callgate.ledger.memory import MemoryLedger

        return MemoryLedger()
    from callgate.ledger.sqlite import SQLiteLedger

    return SQLiteLedger(str(path))


def _secret_patterns(values: Mapping[str, Any]) -> tuple[str, ...]:
    from callgate.mcp.server import credential_patterns

    return credential_patterns(values)


def _load_target(target: str) -> Registry | Gate:
    """Import ``module:attribute`` (or ``path/to/file.py:attribute``): a Registry or a Gate."""
    from callgate.gate import Gate
    from callgate.tools import Registry

    location, _, attribute = target.rpartition(":")
    if not location or not attribute:
        raise bad_usage(f"TARGET must be module:attribute or file.py:attribute, got {target!r}")
    try:
        if location.endswith(".py") or os.sep in location:
            spec = importlib.util.spec_from_file_location(Path(location).stem, location)
            if spec is None or spec.loader is None:
                raise ImportError(f"no Python file at {location}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        else:
            if "" not in sys.path:
                sys.path.insert(0, "")
            module = importlib.import_module(location)
    except (ImportError, OSError) as exc:
        raise bad_usage(f"cannot import {location!r}: {exc}") from exc
    if not hasattr(module, attribute):
        raise bad_usage(
            f"{location!r} has no attribute {attribute!r}; name the Registry or Gate it "
            "defines (module:attribute)"
        )
    found = getattr(module, attribute)
    if not isinstance(found, Registry | Gate):
        raise bad_usage(f"{target} is {type(found).__name__}, not a callgate Registry or Gate")
    return found


def _check_transport(transport: str, token: Sequence[str] | None) -> None:
    if transport not in ("stdio", "http"):
        raise bad_usage(f"--transport must be 'stdio' or 'http', got {transport!r}")
    if token and transport != "http":
        raise bad_usage("--token applies to --transport http only")


async def _serve(server: Any, transport: str, host: str, port: int, tokens: dict[str, str]) -> None:
    if transport == "stdio":
        await server.run_stdio()
    else:
        _say(f"callgate: serving MCP on http://{host}:{port}/mcp")
        await server.run_http(host=host, port=port, tokens=tokens)


# -- serve -----------------------------------------------------------------------------


_SERVE_HELP = (
    "Serve a registry's tools over MCP; every call goes through the gate.\n\n"
    "Validation, policy, approvals, ledger and audit apply to each call. Rejections come back "
    "as isError results carrying the gate's message; a call that needs approval comes back "
    "naming the request, which a person resolves with `callgate approvals approve ID`; the same "
    "call sent again then runs once.\n\n"
    "Identity: stdio clients act as --principal; HTTP clients as the principal of their "
    "--token. Credentials reach handlers through --context-env, never through arguments.\n\n"
    "Example: callgate mcp serve myapp.tools:registry --policy policy.toml --grant 'read:*'"
)


@app.command(help=_SERVE_HELP)
def serve(
    target: Annotated[
        str,
        typer.Argument(
            help="module:attribute (or file.py:attribute) naming a callgate Registry or Gate."
        ),
    ],
    policy: PolicyOption = None,
    transport: TransportOption = "stdio",
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    principal: PrincipalOption = None,
    grant: GrantOption = None,
    context_env: ContextOption = None,
    token: TokenOption = None,
    ledger: LedgerOption = None,
    trust: TrustOption = None,
    name: Annotated[str, typer.Option("--name", help="Server name shown to clients.")] = "callgate",
) -> None:
    """Serve a registry's tools over MCP (see --help)."""
    _require_sdk()
    _check_transport(transport, token)
    import anyio

    from callgate.gate import Gate
    from callgate.mcp.server import GateServer

    loaded = _load_target(target)
    rules = _policy(policy)
    context = _from_env(context_env, "--context-env")
    tokens = _tokens(token)
    if isinstance(loaded, Gate):
        if rules is not None or ledger is not None:
            raise bad_usage("TARGET is a Gate: configure its policy and ledger in code, not here")
        gate = loaded
    else:
        if rules is None:
            raise bad_usage("--policy is required: which calls may run is never left to a default")
        gate = Gate(
            loaded,
            policy=rules,
            ledger=_ledger(ledger),
            secret_patterns=_secret_patterns(context),
        )
    server = GateServer(
        gate,
        name=name,
        principal=principal,
        grants=tuple(grant or ()),
        context=context,
        trusted_values=tuple(trust or ()),
    )

    async def run() -> None:
        await _serve(server, transport, host, port, tokens)

    anyio.run(run)


# -- proxy ------------------------------------------------------------------------------

_TOOL_KEYS = {
    "effects",
    "sinks",
    "risk",
    "timeout",
    "reads",
    "writes",
    "secret_fields",
    "max_result_chars",
    "name",
}


def _tool_configs(path: Path | None) -> dict[str, ToolConfig]:
    """Per-tool configuration from a TOML file: ``[tools.NAME] effects = [...] sinks = [...]``."""
    if path is None:
        return {}
    from callgate.mcp.client import ToolConfig

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise bad_usage(f"{path}: cannot read the tool configuration: {exc}") from exc
    unknown = set(data) - {"tools"}
    if unknown:
        raise bad_usage(
            f"{path}: unknown top-level key(s) {sorted(unknown)}; use [tools.NAME] tables"
        )
    configs = {}
    for tool, raw in data.get("tools", {}).items():
        if not isinstance(raw, dict):
            raise bad_usage(f"{path}: [tools.{tool}] must be a table")
        if "risk" in raw and raw["risk"] not in _RISKS:
            raise bad_usage(f"{path}: [tools.{tool}]: risk must be one of {sorted(_RISKS)}")
        bad = set(raw) - _TOOL_KEYS
        if bad:
            raise bad_usage(
                f"{path}: [tools.{tool}]: unknown key(s) {sorted(bad)}; "
                f"allowed: {sorted(_TOOL_KEYS)}"
            )
        try:
            configs[tool] = ToolConfig(**raw)
        except TypeError as exc:
            raise bad_usage(f"{path}: [tools.{tool}]: {exc}") from exc
    return configs


_RISKS = {"read", "write", "write_idempotent"}
_LAUNCHERS = {"python", "python3", "node", "npx", "uvx", "uv", "deno", "bun", "docker", "pipx"}


def _default_name(command: Sequence[str], url: str | None) -> str:
    """A local server name from the command line or URL (never from the server itself)."""
    import re
    from urllib.parse import urlsplit

    if url is not None:
        parts = urlsplit(url)
        raw = parts.hostname or "upstream"
        if parts.port:
            raw += f"-{parts.port}"
    else:
        raw = Path(command[0]).stem
        if raw.lower().rstrip("0123456789.") in _LAUNCHERS:
            rest = [a for a in command[1:] if not a.startswith("-") and a not in ("run", "-m")]
            if rest:
                raw = Path(rest[0].split("@")[-1] if rest[0].startswith("@") else rest[0]).stem
                raw = raw.rsplit("/", 1)[-1]
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "-", raw).strip("-.") or "upstream"
    return cleaned[:64]


_PROXY_HELP = (
    "Put a policy-enforcing MCP server in front of any MCP server.\n\n"
    "Every call is validated against the upstream's schema, authorized by the policy (each tool "
    "needs the effect network:NAME plus what --tools declares; the proxy grants network:NAME and "
    "the policy decides), approved by a person when the policy asks, recorded, and bounded by "
    "--timeout (a timeout is reported as unknown and never retried). Upstream results are passed "
    "back as untrusted data.\n\n"
    "Tool definitions are pinned in --pins: a tool whose description or schema changed, or that "
    "the server added later, is hidden and blocked until `callgate mcp pins approve`.\n\n"
    "Example: callgate mcp proxy --policy policy.toml -- "
    "npx -y @modelcontextprotocol/server-filesystem /tmp"
)


@app.command(
    help=_PROXY_HELP,
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def proxy(
    command: Annotated[
        list[str] | None,
        typer.Argument(help="The upstream server's command, after `--` (stdio upstream)."),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option("--policy", help="Policy file (TOML); see `callgate policy check`."),
    ] = None,
    pins: PinsOption = Path(DEFAULT_PINS),
    upstream_url: Annotated[
        str | None,
        typer.Option("--upstream-url", help="A Streamable HTTP upstream instead of a command."),
    ] = None,
    upstream_header: Annotated[
        list[str] | None,
        typer.Option(
            "--upstream-header",
            help="HEADER=ENVVAR: send this header, valued from the environment, to an HTTP "
            "upstream (e.g. Authorization=UPSTREAM_AUTH) (repeatable).",
        ),
    ] = None,
    server_name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="Local name of the upstream (effect network:NAME, pins). Default: from the "
            "command or URL, never from what the server says.",
        ),
    ] = None,
    tools: Annotated[
        Path | None,
        typer.Option(
            "--tools",
            help="TOML with per-tool configuration: [tools.NAME] effects, sinks, risk, timeout.",
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option("--timeout", help="Seconds before an upstream call's outcome is unknown."),
    ] = 60.0,
    transport: TransportOption = "stdio",
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    principal: PrincipalOption = None,
    grant: GrantOption = None,
    token: TokenOption = None,
    ledger: LedgerOption = None,
    trust: TrustOption = None,
    trust_new_tools: Annotated[
        bool,
        typer.Option(
            "--trust-new-tools", help="Pin tools a known server adds instead of blocking them."
        ),
    ] = False,
    restarts: Annotated[
        int,
        typer.Option(
            "--restarts",
            min=0,
            help="Restarts in a row of an upstream command that exits, before the proxy ends "
            "the session (0: never restart). Calls made while it is down are refused, not sent.",
        ),
    ] = 3,
    restart_delay: Annotated[
        float,
        typer.Option(
            "--restart-delay",
            min=0.0,
            help="Seconds before the first restart; each further one waits twice as long.",
        ),
    ] = 1.0,
    max_argument_chars: Annotated[
        int,
        typer.Option(
            "--max-argument-chars",
            min=1,
            help="Refuse (at parse, nothing sent) a call whose arguments, as compact JSON, "
            "are longer than this.",
        ),
    ] = 1_000_000,
    forward_requests: Annotated[
        str,
        typer.Option(
            "--forward-requests",
            help="Which requests the upstream may make of the client are declared to it and "
            "forwarded to the client whose call is in flight: a comma-separated subset of "
            "sampling,elicitation,roots ('' for none). Sampling and elicitation are recorded "
            "in the audit trail.",
        ),
    ] = "sampling,elicitation,roots",
) -> None:
    """Proxy an MCP server through the gate (see --help)."""
    _require_sdk()
    _check_transport(transport, token)
    command = list(command or [])
    if bool(command) == bool(upstream_url):
        raise bad_usage("give either the upstream command after `--` or --upstream-url, not both")
    rules = _policy(policy)
    if rules is None:
        raise bad_usage("--policy is required: which calls may run is never left to a default")
    name = server_name or _default_name(command, upstream_url)
    forwarded = _forwarded(forward_requests)
    configs = _tool_configs(tools)
    tokens = _tokens(token)
    headers = _from_env(upstream_header, "--upstream-header")
    _say(f"callgate: proxying MCP server '{name}' (pins: {pins})")
    import anyio

    from callgate.errors import DefinitionError
    from callgate.mcp.pins import PinError, PinStore
    from callgate.mcp.proxy import proxy as open_proxy
    from callgate.mcp.upstream import Restart, UpstreamFailed

    try:
        store = PinStore(pins, trust_new=trust_new_tools)
    except PinError as exc:
        raise bad_usage(str(exc)) from exc
    upstream = _upstream(command, upstream_url, headers)

    async def run() -> None:
        stop = anyio.CancelScope()
        async with anyio.create_task_group() as watch:
            # Watching starts before the upstream does, so no signal can end the proxy
            # with its upstream running.
            await watch.start(_stop_on_signal, stop)
            with stop:
                async with open_proxy(
                    upstream,
                    server_name=name,
                    policy=rules,
                    pins=store,
                    tools=configs,
                    timeout=timeout,
                    ledger=_ledger(ledger),
                    grants=tuple(grant or ()),
                    principal=principal,
                    trusted_values=tuple(trust or ()),
                    gate_options={"secret_patterns": _secret_patterns(headers)},
                    restart=Restart(attempts=restarts, delay=restart_delay),
                    max_argument_chars=max_argument_chars,
                    forward_requests=forwarded,
                ) as server:
                    await _serve(server, transport, host, port, tokens)
            watch.cancel_scope.cancel()

    _log_to_stderr()
    try:
        anyio.run(run)
    except Exception as exc:
        failed = _find(exc, UpstreamFailed)
        if failed is not None:
            # The supervisor logged it already when the session ends; at start it did not.
            if "did not start" in str(failed):
                _say(f"callgate: {failed}")
            raise typer.Exit(1) from None
        leaf = _leaf(exc)
        if isinstance(leaf, DefinitionError):
            raise bad_usage(f"--tools: {leaf}") from exc
        if isinstance(leaf, OSError | ConnectionError):
            raise bad_usage(f"cannot reach the upstream MCP server: {leaf}", 1) from exc
        raise


def _forwarded(value: str) -> tuple[str, ...]:
    """The kinds named by --forward-requests; bad usage for a kind that cannot be forwarded."""
    kinds = tuple(k.strip() for k in value.split(",") if k.strip())
    known = ("sampling", "elicitation", "roots")
    unknown = [k for k in kinds if k not in known]
    if unknown:
        raise bad_usage(
            f"--forward-requests: {', '.join(unknown)} cannot be forwarded; expected a "
            f"comma-separated subset of {','.join(known)} (or '' for none)"
        )
    return kinds


_STOP_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")


async def _stop_on_signal(stop: Any, *, task_status: Any) -> None:
    """On SIGTERM, SIGINT or SIGHUP, cancel ``stop`` (the proxy and its upstream connection),
    so the proxy shuts down in order: the call in flight is recorded as cancelled and the
    upstream's process group is ended. Later signals are ignored until that is done."""
    import signal

    import anyio

    signals = [getattr(signal, name) for name in _STOP_SIGNALS if hasattr(signal, name)]
    if sys.platform == "win32":  # no signal receiver there: the default handlers stay
        task_status.started()
        return
    with anyio.open_signal_receiver(*signals) as received:
        task_status.started()
        async for signum in received:
            if not stop.cancel_called:
                _say(f"callgate: {signal.Signals(signum).name} received; stopping the upstream")
                stop.cancel()


def _find(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """The first exception of ``kind`` in (nested) exception groups, if any."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _find(inner, kind)
            if found is not None:
                return found
    return None


def _leaf(exc: BaseException) -> BaseException:
    """The first exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _log_to_stderr() -> None:
    """Pin reports and skipped tools go to stderr (never stdout: it may carry the protocol),
    as plain text: they name the upstream's tools (`_PlainFormatter`)."""
    import logging

    class _PlainFormatter(logging.Formatter):
        """Each message on one line with every invisible character escaped: tool names
        and descriptions come from the upstream server, so none may steer the terminal or
        forge a log line of its own."""

        def formatMessage(self, record: logging.LogRecord) -> str:
            return plain(super().formatMessage(record))

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_PlainFormatter("callgate: %(message)s"))
    logger = logging.getLogger("callgate.mcp")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


def _upstream(command: list[str], url: str | None, headers: Mapping[str, str]) -> Any:
    from mcp import StdioServerParameters

    if url is None:
        # The upstream gets the proxy's environment, as if the client had started it.
        return StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    if not headers:
        return url
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    # The MCP transports' usual timeouts: 30 s to connect and write, 300 s to read a stream.
    http = httpx2.AsyncClient(headers=dict(headers), timeout=httpx2.Timeout(30.0, read=300.0))
    return streamable_http_client(url, http_client=http)


# -- pins -------------------------------------------------------------------------------


def _store(path: Path) -> PinStore:
    from callgate.mcp.pins import PinError, PinStore

    if not path.exists():
        raise bad_usage(
            f"{path}: no pin file (it is written the first time a proxy or import runs)"
        )
    try:
        return PinStore(path)
    except PinError as exc:
        raise bad_usage(str(exc)) from exc


def format_when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else ""


@pins_app.command("list")
def pins_list(
    server: Annotated[str | None, typer.Argument(help="Only this server.")] = None,
    pins: PinsOption = Path(DEFAULT_PINS),
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List pinned tools: pinned, changed or new (blocked); exit 1 if any is blocked."""
    entries = _store(pins).entries(server)
    if as_json:
        typer.echo(
            plain_json(
                [
                    {
                        "server": e.server,
                        "tool": e.tool,
                        "state": e.state,
                        "approved_hash": e.approved_hash,
                        "seen_hash": e.seen_hash,
                        "approved_by": e.approved_by,
                    }
                    for e in entries
                ]
            )
        )
    else:
        table = Table(title=cell(f"pins in {pins}"), title_justify="left")
        for column in ("server", "tool", "state", "approved by", "approved at"):
            table.add_column(column)
        for e in entries:
            color = {"pinned": "green", "changed": "red", "new": "yellow"}.get(e.state, "")
            table.add_row(
                cell(e.server),
                cell(e.tool),
                cell(e.state, style=color),
                cell(e.approved_by or ""),
                cell(format_when(e.approved_at)),
            )
        console().print(table)
    raise typer.Exit(1 if any(e.state != "pinned" for e in entries) else 0)


@pins_app.command("show")
def pins_show(
    server: Annotated[str, typer.Argument(help="The server's local name.")],
    tool: Annotated[str, typer.Argument(help="The tool's name on that server.")],
    pins: PinsOption = Path(DEFAULT_PINS),
) -> None:
    """Show a tool's approved definition and, if it changed, what the server now says."""
    from callgate.mcp.pins import PinError

    try:
        found = [e for e in _store(pins).entries(server) if e.tool == tool]
    except PinError as exc:
        raise bad_usage(str(exc)) from exc
    if not found:
        raise bad_usage(f"server '{server}' has no pinned tool '{tool}'")
    entry = found[0]
    out = console()
    head = cell(f"{server} / {tool}", style="bold")
    head.append(plain(f": {entry.state}"))
    out.print(head, soft_wrap=True)
    shown = [(label, d) for label, d in (("approved", entry.approved), ("now seen", entry.seen))]
    present = [(label, d) for label, d in shown if d is not None]
    if len(present) == 2 and present[0][1] != present[1][1]:
        # Both, and they differ: what changed, as a unified diff of the two renderings.
        import difflib

        (_, old), (_, new) = present
        out.print(plain(f"--- approved ({old.get('hash')})"), soft_wrap=True)
        out.print(plain(f"+++ now seen ({new.get('hash')})"), soft_wrap=True)
        diff = difflib.unified_diff(_rendered(old), _rendered(new), lineterm="", n=3)
        for changed in list(diff)[2:]:  # the two file headers are printed above
            mark = changed[:1]
            style = "red" if mark == "-" else "green" if mark == "+" else ""
            out.print(Text(changed, style=style), soft_wrap=True)
        return
    for label, definition in present:
        line = Text(label, style="bold")
        line.append(plain(f" ({definition.get('hash')}):"))
        out.print(line, soft_wrap=True)
        out.print(Text("\n".join(_rendered(definition))), soft_wrap=True)


def _rendered(definition: Mapping[str, Any]) -> list[str]:
    """One pinned definition as plain lines. The description and the schema are the
    upstream's words: shown as data, the description on one line (its line breaks as
    \\n), the schema as JSON whose invisible characters are \\uXXXX escapes."""
    lines = [plain(f"  description: {definition.get('description') or ''}")]
    schema = plain_json(_sorted(definition.get("input_schema")), indent=2)
    lines += ("  input schema: " + schema.replace("\n", "\n  ")).split("\n")
    return lines


def _sorted(value: Any) -> Any:
    """``value`` with every object's keys in order (a stable display of a schema)."""
    if isinstance(value, dict):
        return {str(k): _sorted(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


@pins_app.command("approve")
def pins_approve(
    server: Annotated[str, typer.Argument(help="The server's local name.")],
    tool: Annotated[
        str | None, typer.Argument(help="The tool to approve (omit with --all for every tool).")
    ] = None,
    approve_all: Annotated[
        bool, typer.Option("--all", help="Approve every changed or new tool of the server.")
    ] = False,
    by: Annotated[
        str | None, typer.Option("--by", help="Who approves (default: the operating-system user).")
    ] = None,
    pins: PinsOption = Path(DEFAULT_PINS),
) -> None:
    """Approve what a server now shows for a tool (review it first with `pins show`).

    Exit 0 when approved, 1 when there was nothing to approve, 2 for an unknown name.
    """
    from callgate.mcp.pins import PinError

    if (tool is None) != approve_all:
        raise bad_usage("name one TOOL, or pass --all (not both)")
    store = _store(pins)
    who = by or _user()
    try:
        done = store.approve(server, tool, by=who)
    except PinError as exc:
        raise bad_usage(str(exc)) from exc
    if not done:
        _print(f"nothing to approve for {server}" + (f" / {tool}" if tool else ""))
        raise typer.Exit(1)
    for name in done:
        _print(f"approved {server} / {name} (by {who})")


@pins_app.command("forget")
def pins_forget(
    server: Annotated[str, typer.Argument(help="The server's local name.")],
    tool: Annotated[
        str | None, typer.Argument(help="One tool (default: the whole server).")
    ] = None,
    pins: PinsOption = Path(DEFAULT_PINS),
) -> None:
    """Remove pins; the next connection pins the server's tools as on first use."""
    from callgate.mcp.pins import PinError

    try:
        removed = _store(pins).forget(server, tool)
    except PinError as exc:
        raise bad_usage(str(exc)) from exc
    _print(f"forgot {len(removed)} pin(s) of {server}: {', '.join(removed)}")


def _print(text: str) -> None:
    """One line on stdout, as plain text (it names a server's tools)."""
    console().print(cell(text), soft_wrap=True)


def _user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:
        return "unknown"
