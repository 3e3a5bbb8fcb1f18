"""``callgate console``: what it refuses before serving, and a real server it starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import console_support as cs
import httpx
import pytest
from typer.testing import CliRunner

from callgate.cli.console import app
from callgate.ledger import SQLiteLedger
from servers import free_port


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A ledger file holding the shop's run."""
    path = tmp_path / "calls.db"
    with SQLiteLedger(path) as ledger:
        cs.play(ledger)
    return path


def _users(tmp_path: Path, mode: int = 0o600) -> Path:
    path = tmp_path / "users.txt"
    path.write_text(f"maria:{cs.TOKEN}\n")
    os.chmod(path, mode)
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "needs to know who is signed in"),
        (["--no-auth", "--host", "0.0.0.0"], "only on a loopback address"),
        (["--auth-file", "USERS", "--no-auth"], "either --auth-file or --no-auth"),
        (["--auth-file", "OPEN_USERS"], "chmod 600"),
    ],
)
def test_the_console_refuses_to_start_unsafely(
    db: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    """Without authentication, with --no-auth off loopback, or with a credentials file others can
    read, the command exits 2 with the fix, before opening any port."""
    users = _users(tmp_path)
    (tmp_path / "open").mkdir()
    open_users = _users(tmp_path / "open", 0o644)
    args = [
        str(users) if a == "USERS" else str(open_users) if a == "OPEN_USERS" else a for a in args
    ]
    result = CliRunner().invoke(app, ["--db", str(db), *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_no_ledger_there_is_bad_usage(tmp_path: Path) -> None:
    """A --db that is not a ledger exits 2 and creates nothing."""
    missing = tmp_path / "none.db"
    result = CliRunner().invoke(app, ["--db", str(missing), "--auth-file", str(_users(tmp_path))])
    assert result.exit_code == 2
    assert "no ledger at" in result.output
    assert not missing.exists()


@pytest.mark.integration
def test_the_command_serves_the_console_until_interrupted(db: Path, tmp_path: Path) -> None:
    """A real ``callgate console`` process (the registered command) answers a signed-in
    request with the inbox, refuses an anonymous one, and stops cleanly on SIGINT."""
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "callgate.cli",
            "console",
            "--db",
            str(db),
            "--port",
            str(port),
            "--auth-file",
            str(_users(tmp_path)),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        # No deadline of our own: a loaded machine may take a while to start Python;
        # pytest's timeout ends a console that never answers.
        while True:
            try:
                httpx.get(base + "/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.communicate()[1].decode()
                time.sleep(0.05)
        inbox = httpx.get(base + "/approvals", headers={"Authorization": f"Bearer {cs.TOKEN}"})
        assert inbox.status_code == 200
        assert "refund 60.00 USD on o-1" in inbox.text
        assert httpx.get(base + "/approvals").status_code == 303
        rebound = httpx.get(base + "/approvals", headers={"Host": "evil.example"})
        assert rebound.status_code == 400  # loopback: only local Host names
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0, err.decode()
    assert f"callgate console on http://127.0.0.1:{port}" in err.decode()


def test_the_cli_loads_the_console_extra_only_when_the_command_runs(
    db: Path, tmp_path: Path
) -> None:
    """Importing the command loads no Starlette (``callgate`` works without the extra); without
    the extra, the command exits 2 naming it."""
    code = (
        "import sys; import callgate.cli.console as c; "
        "assert not [m for m in sys.modules if m.startswith(('starlette', 'jinja2', 'uvicorn'))]; "
        "sys.modules['starlette'] = None; c.app()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "--db", str(db), "--auth-file", str(_users(tmp_path))],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert "pip install 'callgate[console]'" in " ".join(done.stderr.split())


def test_the_command_says_how_it_serves() -> None:
    """The start lines name the address and ledger, and with --no-auth warn that anyone reaching
    it decides as the local name (an IPv6 address is bracketed)."""
    from callgate.cli.console import banner
    from callgate.console import Credentials, NoAuth, TokenAuth

    local = banner("::1", 8765, "calls.db", NoAuth("dev"))
    assert local[0] == "callgate console on http://[::1]:8765 over calls.db"
    assert "no authentication" in local[1]
    assert "'dev'" in local[1]
    token = banner("0.0.0.0", 80, "x.db", TokenAuth(Credentials({"maria": cs.TOKEN})))
    assert "no authentication" not in " ".join(token)
