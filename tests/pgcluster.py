"""A throwaway PostgreSQL cluster for tests: initdb + pg_ctl in a temporary directory.

The cluster listens only on a Unix socket inside its own directory, so it
never collides with a server already on the machine. When the tests run as
root, the server runs as the ``postgres`` user (or ``nobody``), since
PostgreSQL refuses to run as root. One cluster serves the whole session; each
test gets its own database.

Binaries are found in ``$PG_BIN``, on ``PATH``, or under
``/usr/lib/postgresql/*/bin`` (the newest). Both ``tests/ledger`` and
``tests/integration`` load this module by path under one name, so they share
the cluster.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

PORT = 5432


def find_bin() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or None."""
    if os.environ.get("PG_BIN"):
        return Path(os.environ["PG_BIN"])
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return Path(found[-1]).parent if found else None


def missing_reason() -> str | None:
    """Why no cluster can be started here, or None."""
    if find_bin() is None:
        return (
            "PostgreSQL binaries not found (set PG_BIN, or install them: "
            "apt-get install -y postgresql)"
        )
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'callgate[postgres]')"
    return None


def _server_user() -> str | None:
    """Who runs the server: None (the current user) unless we are root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise RuntimeError("running as root and neither a 'postgres' nor a 'nobody' user exists")


@dataclass
class Cluster:
    """A running cluster: its directory and how to reach it."""

    root: Path
    bindir: Path
    user: str | None

    @property
    def socket_dir(self) -> Path:
        return self.root / "sock"

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.socket_dir} port={PORT} user=postgres dbname={dbname}"

    def _run(self, *args: str) -> None:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self.user is not None:
            cmd = ["runuser", "-u", self.user, "--", *cmd]
        subprocess.run(
            cmd,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "LC_ALL": "C"},
        )

    def start(self) -> None:
        data = self.root / "data"
        self.socket_dir.mkdir()
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            for path in (self.root, self.socket_dir):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self._run(
            "initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"
        )
        options = (
            f"-k {self.socket_dir} -p {PORT} -c listen_addresses='' -c fsync=off "
            "-c full_page_writes=off -c max_connections=100"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(self.root / "log"),
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def create_database(self) -> str:
        """A fresh database; its DSN."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def drop_database(self, dsn: str) -> None:
        import psycopg

        name = dsn.rsplit("dbname=", 1)[1]
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_cluster: Cluster | None = None
_users = 0


def acquire() -> Cluster:
    """The session's cluster, started on first use."""
    global _cluster, _users
    if _cluster is None:
        bindir = find_bin()
        assert bindir is not None, missing_reason()
        root = Path(tempfile.mkdtemp(prefix="cgpg-"))
        os.chmod(root, 0o755)
        cluster = Cluster(root=root, bindir=bindir, user=_server_user())
        try:
            cluster.start()
        except subprocess.CalledProcessError as exc:
            log = root / "log"
            detail = log.read_text() if log.exists() else exc.stderr.decode(errors="replace")
            shutil.rmtree(root, ignore_errors=True)
            raise RuntimeError(f"could not start a throwaway PostgreSQL: {detail}") from exc
        _cluster = cluster
    _users += 1
    return _cluster


def release() -> None:
    """Stop the cluster once its last user is done."""
    global _cluster, _users
    _users -= 1
    if _users <= 0 and _cluster is not None:
        _cluster.stop()
        _cluster = None
