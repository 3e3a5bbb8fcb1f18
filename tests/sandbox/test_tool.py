"""run_python as a tool: fail closed, the development mode, the workspace, bounded output,
and a bridge that treats every frame from the sandbox as hostile."""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from callgate import Authority, DefinitionError, Gate, MemoryLedger, Registry, Status, ToolCall
from callgate.sandbox import Limits, SandboxConfig, SandboxResult, launch, python_tool, shell_tool
from callgate.sandbox.protocol import ProtocolViolation, parse_request


def _submit(spec: Any, code: str, grants: tuple[str, ...] = ("exec:sandbox",)) -> Any:
    gate = Gate(Registry([spec]), ledger=MemoryLedger())
    run = gate.run(authority=Authority(principal="p", grants=list(grants)))
    field = next(iter(spec.arguments_model.model_fields))  # run_python: code, run_shell: script
    return run.submit([ToolCall(id="c", name=spec.name, arguments={field: code})])[0]


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A machine where bubblewrap is not installed (the probe finds no binary)."""
    launch._probe.cache_clear()
    monkeypatch.setattr(launch, "_bwrap_path", lambda: None)
    yield
    launch._probe.cache_clear()


def test_without_bubblewrap_run_python_refuses_and_names_what_is_missing(no_bwrap: None) -> None:
    """Fail closed: no bwrap, no code run; the error names the package to install."""
    obs = _submit(python_tool(), "print('ran')")
    assert obs.status is Status.ERROR
    assert "bubblewrap" in obs.content
    assert "apt-get install bubblewrap" in obs.content
    assert "ran" not in obs.content


@pytest.fixture
def bwrap_fails(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A machine whose bubblewrap cannot create namespaces (a real binary that fails)."""
    launch._probe.cache_clear()
    monkeypatch.setattr(launch, "_bwrap_path", lambda: "/bin/false")
    yield
    launch._probe.cache_clear()


def test_without_user_namespaces_run_python_refuses_and_says_so(bwrap_fails: None) -> None:
    """bwrap present but unable to sandbox: refused, naming user namespaces."""
    obs = _submit(python_tool(), "print('ran')")
    assert obs.status is Status.ERROR
    assert "user namespaces" in obs.content


def test_unsafe_subprocess_mode_runs_and_warns_loudly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The development mode is named unsafe and logs a warning when built and on every run."""
    with caplog.at_level(logging.WARNING, logger="callgate.sandbox"):
        spec = python_tool(mode="unsafe_subprocess")
        obs = _submit(spec, "print(6 * 7)")
    assert obs.status is Status.OK
    assert obs.result["stdout"].strip() == "42"
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) >= 2
    assert all("NOT" in w and "unsafe_subprocess" in w for w in warnings)


@pytest.mark.usefixtures("bwrap_available")
def test_workspace_is_a_private_copy(tmp_path: Path) -> None:
    """The code reads the configured files and changes only its copy; symlinks are left out."""
    seed = tmp_path / "seed"
    (seed / "data").mkdir(parents=True)
    (seed / "data" / "orders.csv").write_text("A1,shipped\n")
    (seed / "escape").symlink_to("/etc")
    code = (
        "import os\n"
        "print(open('data/orders.csv').read().strip())\n"
        "print(sorted(os.listdir('.')))\n"
        "open('data/orders.csv', 'w').write('changed')\n"
    )
    obs = _submit(python_tool(workspace=seed), code)
    assert obs.result["stdout"].splitlines() == ["A1,shipped", "['data']"], obs.result
    assert (seed / "data" / "orders.csv").read_text() == "A1,shipped\n"


@pytest.mark.usefixtures("bwrap_available")
def test_output_is_bounded(sandboxed: Callable[..., SandboxResult]) -> None:
    """Stdout past the bound is cut, with the count of what was dropped."""
    result = sandboxed("print('x' * 100_000)", output_bytes=1000)
    assert result.stdout.startswith("x" * 1000)
    assert "99,001 more bytes dropped" in result.stdout


@pytest.mark.usefixtures("bwrap_available")
def test_configured_environment_is_all_there_is(sandboxed: Callable[..., SandboxResult]) -> None:
    """Only PATH, HOME, LANG and what the deployer configures are set inside."""
    spec = python_tool(env={"REGION": "eu"})
    obs = _submit(spec, "import os; print(sorted(os.environ.items()))")
    env = dict(ast.literal_eval(obs.result["stdout"]))
    env.pop("PWD", None)
    assert env == {"HOME": "/workspace", "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin", "REGION": "eu"}


def test_multiprocessing_pool_maps_a_function_the_code_defined(
    sandboxed: Callable[..., SandboxResult],
) -> None:
    """What a new user writes first: a function of their own, mapped over a Pool. It is
    pickled by name from ``__main__``, so the code must run as the real ``__main__``
    module. Before, the lookup failed (``attribute lookup square on __main__ failed``)."""
    code = (
        "import multiprocessing\n"
        "def square(x):\n"
        "    return x * x\n"
        "if __name__ == '__main__':\n"
        "    with multiprocessing.Pool(2) as pool:\n"
        "        print(pool.map(square, [1, 2, 3]))\n"
    )
    result = sandboxed(code)
    assert result.stdout.strip() == "[1, 4, 9]", result


def test_configuration_mistakes_fail_where_declared(tmp_path: Path) -> None:
    """Bad limits, timeouts, modes and workspaces raise DefinitionError naming the field."""
    with pytest.raises(DefinitionError, match=r"Limits\.processes"):
        Limits(processes=0)
    with pytest.raises(DefinitionError, match="timeout"):
        python_tool(timeout=0)
    with pytest.raises(DefinitionError, match="mode"):
        SandboxConfig(mode="docker")  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="workspace"):
        python_tool(workspace=tmp_path / "missing")
    with pytest.raises(DefinitionError, match="tools"):
        python_tool(tools=["not a name!"])


# -- hostile frames -------------------------------------------------------------------


@pytest.mark.usefixtures("bwrap_available")
@pytest.mark.parametrize(
    ("frame", "violation"),
    [
        ("(1 << 31).to_bytes(4, 'big')", "exceeds the limit"),
        ("(5).to_bytes(4, 'big') + b'\\xff\\xfe{{{'", "not UTF-8 JSON"),
        ("(2).to_bytes(4, 'big') + b'[]'", "must be a JSON object"),
        (
            "(len(b := b'{\"op\":\"exec\"}')).to_bytes(4, 'big') + b",
            "op must be 'call'",
        ),
        (
            '(len(b := b\'{"op":"call","id":1,"tool":"../x","arguments":{}}\'))'
            ".to_bytes(4, 'big') + b",
            "tool must be a tool name",
        ),
        ("(10).to_bytes(4, 'big') + b'{'", "inside a frame"),
    ],
)
def test_a_hostile_frame_stops_the_sandbox(frame: str, violation: str) -> None:
    """A frame that breaks the protocol stops the code and is reported, never acted on."""
    code = f"import os, sys, time\nos.write(int(sys.argv[1]), {frame})\ntime.sleep(5)\n"
    if violation == "inside a frame":
        code = code.replace("time.sleep(5)", "os.close(int(sys.argv[1]))")
    obs = _submit(python_tool(tools=["nothing"], timeout=5), code)
    assert obs.status is Status.OK
    assert violation in obs.result.get("violation", ""), obs.result
    assert obs.result["timed_out"] is False


@pytest.mark.usefixtures("bwrap_available")
def test_a_flood_of_calls_is_cut_at_the_bound() -> None:
    """More calls than Limits.max_calls stop the sandbox."""
    spec = python_tool(tools=["nothing"], limits=Limits(max_calls=5))
    code = (
        "import tools, os, sys, json\n"
        "fd = int(sys.argv[1])\n"
        "for i in range(1, 50):\n"
        "    call = {'op': 'call', 'id': i, 'tool': 'nothing', 'arguments': {}}\n"
        "    body = json.dumps(call).encode()\n"
        "    os.write(fd, len(body).to_bytes(4, 'big') + body)\n"
        "import time; time.sleep(5)\n"
    )
    obs = _submit(spec, code)
    assert "Limits.max_calls" in obs.result["violation"]


@settings(suppress_health_check=[HealthCheck.too_slow])  # a shared machine under load
@given(st.binary(max_size=200))
def test_parse_request_raises_only_protocol_violations(body: bytes) -> None:
    """Arbitrary bytes from the sandbox are either a well-formed call or a ProtocolViolation."""
    try:
        request = parse_request(body)
    except ProtocolViolation:
        return
    assert request.tool
    assert isinstance(request.arguments, dict)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=10,
)


@settings(suppress_health_check=[HealthCheck.too_slow])  # a shared machine under load
@given(
    st.dictionaries(
        st.sampled_from(["op", "id", "tool", "arguments", "extra"]), json_values, max_size=5
    )
)
def test_parse_request_accepts_exactly_the_call_shape(message: dict[str, Any]) -> None:
    """A JSON object is accepted exactly when it has op=call, a positive int id, a tool name
    and an object of arguments."""
    body = json.dumps(message).encode()
    ident, tool_name = message.get("id"), message.get("tool")
    valid = (
        message.get("op") == "call"
        and type(ident) is int
        and 0 < ident < 2**31
        and isinstance(tool_name, str)
        and 0 < len(tool_name) <= 64
        and all(c.isascii() and (c.isalnum() or c in "_-") for c in tool_name)
        and isinstance(message.get("arguments"), dict)
    )
    try:
        request = parse_request(body)
    except ProtocolViolation:
        assert not valid
    else:
        assert valid
        assert request.arguments == message["arguments"]


# -- run_shell -------------------------------------------------------------------------


@pytest.mark.usefixtures("bwrap_available")
def test_run_shell_runs_a_script_in_the_same_sandbox() -> None:
    """A shell script runs as the sandbox user, in the workspace, seeing no host files."""
    script = "echo hello; id -u; pwd; cat /etc/shadow || echo no-shadow; ls /root || echo no-home"
    obs = _submit(shell_tool(), script)
    assert obs.status is Status.OK
    lines = obs.result["stdout"].split()
    assert lines == ["hello", "1000", "/workspace", "no-shadow", "no-home"], obs.result


@pytest.mark.usefixtures("bwrap_available")
def test_run_shell_cannot_reach_the_network_or_keep_a_daemon() -> None:
    """A script's sockets are refused and its background job dies with the run."""
    script = (
        "python3 -c 'import socket; socket.socket()' 2>/dev/null && echo ESCAPED || echo BLOCKED\n"
        "(sleep 60 &) ; echo started"
    )
    obs = _submit(shell_tool(), script)
    assert obs.result["stdout"].split() == ["BLOCKED", "started"], obs.result


@pytest.mark.usefixtures("bwrap_available")
def test_a_script_writes_to_dev_stdout_and_dev_stderr() -> None:
    """``echo ... > /dev/stderr``, common in scripts, reopens the output pipes through
    ``/proc/self/fd``: it works as root too (the pipes belong to the sandbox's uid). Before,
    as root, the host's pipes were root's and the script read ``Permission denied``."""
    script = "echo to-err > /dev/stderr && echo to-out > /dev/stdout && echo done"
    obs = _submit(shell_tool(), script)
    assert obs.result["stdout"].split() == ["to-out", "done"], obs.result
    assert obs.result["stderr"].strip() == "to-err", obs.result


def test_run_shell_needs_the_exec_grant() -> None:
    """run_shell's effect is exec:sandbox like run_python's: without it, nothing runs."""
    obs = _submit(shell_tool(), "echo ran", grants=())
    assert obs.status is Status.REJECTED
    assert obs.stage.value == "authorize"


@pytest.mark.parametrize(
    ("body", "violation"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nests too deeply"),
        (
            b'{"op":"call","id":1,"tool":"t","arguments":{"a":'
            + b"[" * 40
            + b"1"
            + b"]" * 40
            + b"}}",
            "nest deeper than 32",
        ),
        (b'{"op":"call","id":1,"tool":"t","arguments":{"x":NaN}}', "not UTF-8 JSON"),
        (b'{"op":"call","id":1,"tool":"t","arguments":{"x":' + b"9" * 5000 + b"}}", "JSON"),
    ],
    ids=["deep nesting", "deep arguments", "NaN", "huge integer"],
)
def test_hostile_json_is_a_protocol_violation(body: bytes, violation: str) -> None:
    """Nesting, NaN and huge numbers from the sandbox are refused, never crash the host."""
    with pytest.raises(ProtocolViolation, match=violation):
        parse_request(body)


@pytest.mark.usefixtures("bwrap_available")
def test_an_interpreter_the_sandbox_user_cannot_read_is_refused_by_name(tmp_path: Path) -> None:
    """An interpreter under a directory the sandbox's user cannot enter: refused, naming it."""
    locked = tmp_path / "locked"
    python = locked / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\necho ran\n")
    python.chmod(0o755)
    locked.chmod(0)
    try:
        obs = _submit(python_tool(python=str(python)), "print('ran')")
    finally:
        locked.chmod(0o755)
    assert obs.status is Status.ERROR
    assert str(python) in obs.content
    assert "refuses to run code" in obs.content
