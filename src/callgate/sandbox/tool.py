"""``run_python``: the code surface as an ordinary callgate tool.

`python_tool` builds a `ToolSpec` whose handler runs the model's code in a
fresh sandbox (`callgate.sandbox.runner`) and answers the code's tool calls
through the same run (`callgate.sandbox.bridge`). Its own effect is
``exec:sandbox``, which the run's authority must grant like any other; each
call the code makes needs its own grants too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import anyio.to_thread

from callgate.effects import Grants
from callgate.errors import DefinitionError, ToolFailure
from callgate.gate import running_run
from callgate.sandbox.bridge import Bridge
from callgate.sandbox.config import Limits, Mode, SandboxConfig
from callgate.sandbox.launch import unavailable_reason
from callgate.sandbox.network import drop_connections, is_network_tool
from callgate.sandbox.runner import run_code
from callgate.sandbox.uids import UidsExhausted
from callgate.tools import TOOL_NAME, CallContext, ToolSpec, make_spec

__all__ = ["EXEC_EFFECT", "python_tool", "shell_tool"]

EXEC_EFFECT = "exec:sandbox"
"""The effect of running code at all (grant it to the runs that may)."""

_log = logging.getLogger("callgate.sandbox")
_GRACE_SECONDS = 5.0
"""The tool's own timeout is the sandbox's plus this: the sandbox is killed, and reported as
timed out, before the gate would give up on the call as ``unknown``."""


def _describe(tools: Iterable[str | ToolSpec]) -> tuple[list[str], str]:
    names: list[str] = []
    lines: list[str] = []
    for item in tools:
        if isinstance(item, ToolSpec):
            name = item.name
            params = ", ".join(
                f"{p}: {info.annotation.__name__ if isinstance(info.annotation, type) else 'Any'}"
                for p, info in item.arguments_model.model_fields.items()
            )
            first = item.description.splitlines()[0] if item.description else ""
            lines.append(f"- tools.{name}({params}): {first}".rstrip(": "))
        elif isinstance(item, str) and TOOL_NAME.fullmatch(item):
            name = item
            lines.append(f"- tools.{name}(**arguments)")
        else:
            raise DefinitionError(
                f"python_tool tools must be tool names or ToolSpecs, got {item!r}"
            )
        names.append(name)
    return names, "\n".join(lines)


def python_tool(
    *,
    workspace: str | Path | None = None,
    timeout: float = 10.0,
    tools: Iterable[str | ToolSpec] = (),
    name: str = "run_python",
    limits: Limits | None = None,
    mode: Mode | str = Mode.BWRAP,
    env: Mapping[str, str] | None = None,
    python: str = "/usr/bin/python3",
    read_only: Iterable[str] = (),
    grants: Iterable[str] | None = None,
) -> ToolSpec:
    """A tool that runs model-written Python in a bubblewrap sandbox.

    Args:
        workspace: a directory copied into the sandbox's ``/workspace`` at every run
            (never written back); None: an empty workspace.
        timeout: wall-clock seconds per run; then every process of the sandbox is killed.
        tools: the tools (names or specs) the code may call as ``tools.<name>(...)``;
            each call goes through the run executing this tool.
        name: the tool's name.
        limits: resource bounds (`Limits`).
        mode: ``"bwrap"``, or ``"unsafe_subprocess"`` for development only (NOT
            confined; warned about on every run).
        env: the only environment variables inside (besides PATH, HOME, LANG).
        python: the interpreter inside (bound read-only with ``/usr``).
        read_only: more host paths bound read-only at the same place.
        grants: the code's own grants (e.g. ``["read:*"]``): a call from code needs these
            *and* the run's (None: the run's alone). Narrows, never widens.
    """
    chosen = Mode(mode)
    code_grants = (
        None if grants is None else Grants([grants] if isinstance(grants, str) else grants)
    )
    config = SandboxConfig(
        timeout=timeout,
        limits=limits if limits is not None else Limits(),
        workspace=Path(workspace) if workspace is not None else None,
        python=python,
        env=dict(env or {}),
        mode=chosen,
        read_only=tuple(read_only),
    )
    visible, listing = _describe(tools)
    if chosen is Mode.UNSAFE_SUBPROCESS:
        _log.warning(
            "callgate.sandbox: tool %r uses mode unsafe_subprocess: code it runs is NOT "
            "confined; for development only",
            name,
        )

    async def run_python(code: str, ctx: CallContext) -> dict[str, Any]:
        if chosen is not Mode.UNSAFE_SUBPROCESS:
            # a probe that runs bubblewrap once per process: not on the event loop
            reason = await anyio.to_thread.run_sync(unavailable_reason, config)
            if reason is not None:
                raise ToolFailure(f"the code was not run: {reason}", retryable=False)
        specs: list[dict[str, str]] = []
        bridge = None
        network = ""
        if visible:
            run = running_run(ctx)
            registry = run.gate.registry
            for tool_name in visible:
                spec = registry.get(tool_name)
                if spec is not None:
                    specs.append({"name": tool_name, "doc": spec.description})
                    if is_network_tool(spec):
                        network = tool_name
            bridge = Bridge(
                run,
                [s["name"] for s in specs],
                ctx.call_id,
                wait_until=time.monotonic() + config.timeout,
                grants=code_grants,
            )
        try:
            result = await run_code(
                code,
                config,
                tools=specs,
                answer=bridge.answer if bridge else None,
                network=network,
            )
        except (ValueError, UidsExhausted) as exc:  # the workspace grew past its bound, ...
            raise ToolFailure(f"the code was not run: {exc}", retryable=False) from None
        finally:
            if network:
                drop_connections(ctx.run_id, ctx.call_id + ".")
        return result.report()

    description = (
        "Run Python 3 code in an isolated sandbox (no network, no host files; a private "
        "/workspace and /tmp). Print what you need to see: the result holds exit_code, "
        f"timed_out, stdout and stderr. The run is killed after {timeout:g} s."
    )
    if listing:
        description += (
            "\nInside, `import tools` and call (keyword arguments only; each call is checked "
            "and recorded like a direct call; a refused call raises tools.CallRejected, a "
            "failed one tools.CallFailed):\n" + listing
        )
    run_python.__doc__ = "Run Python code in the sandbox.\n\nArgs:\n    code: Python source."
    return make_spec(
        run_python,
        name=name,
        description=description,
        effects=[EXEC_EFFECT],
        risk="write",
        timeout=config.timeout + _GRACE_SECONDS,
        max_result_chars=max(2 * config.limits.output_bytes + 1000, 100),
    )


def shell_tool(
    *,
    workspace: str | Path | None = None,
    timeout: float = 10.0,
    name: str = "run_shell",
    limits: Limits | None = None,
    mode: Mode | str = Mode.BWRAP,
    env: Mapping[str, str] | None = None,
    read_only: Iterable[str] = (),
) -> ToolSpec:
    """A tool that runs a model-written ``/bin/sh`` script in the same sandbox as `python_tool`
    (the programs of the host's ``/usr``, read-only), for deployers who want one. It has no
    bridge: a script calls no tools. Effect ``exec:sandbox``; arguments as for `python_tool`.
    """
    chosen = Mode(mode)
    config = SandboxConfig(
        timeout=timeout,
        limits=limits if limits is not None else Limits(),
        workspace=Path(workspace) if workspace is not None else None,
        env=dict(env or {}),
        mode=chosen,
        read_only=tuple(read_only),
    )
    if chosen is Mode.UNSAFE_SUBPROCESS:
        _log.warning(
            "callgate.sandbox: tool %r uses mode unsafe_subprocess: scripts it runs are NOT "
            "confined; for development only",
            name,
        )

    async def run_shell(script: str) -> dict[str, Any]:
        if chosen is not Mode.UNSAFE_SUBPROCESS:
            # a probe that runs bubblewrap once per process: not on the event loop
            reason = await anyio.to_thread.run_sync(unavailable_reason, config)
            if reason is not None:
                raise ToolFailure(f"the script was not run: {reason}", retryable=False)
        try:
            result = await run_code(script, config, shell=True)
        except (ValueError, UidsExhausted) as exc:
            raise ToolFailure(f"the script was not run: {exc}", retryable=False) from None
        return result.report()

    run_shell.__doc__ = "Run a shell script in the sandbox.\n\nArgs:\n    script: /bin/sh script."
    return make_spec(
        run_shell,
        name=name,
        description=(
            "Run a /bin/sh script in an isolated sandbox (no network, no host files; a private "
            "/workspace and /tmp; the standard programs of /usr). The result holds exit_code, "
            f"timed_out, stdout and stderr. The run is killed after {timeout:g} s."
        ),
        effects=[EXEC_EFFECT],
        risk="write",
        timeout=config.timeout + _GRACE_SECONDS,
        max_result_chars=max(2 * config.limits.output_bytes + 1000, 100),
    )
