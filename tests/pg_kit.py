"""A throwaway PostgreSQL server for tests: ``initdb`` into a temporary directory, ``pg_ctl start`` on a
free localhost port, one fresh database per test, ``pg_ctl stop`` and the directory removed at the end.

The server binaries come from ``$COEVO_PG_BIN``, ``PATH`` or Debian's ``/usr/lib/postgresql/<v>/bin``
(``scripts/setup.sh`` installs the ``postgresql`` package on a fresh machine). PostgreSQL refuses to
run as root, so under root the data directory belongs to, and ``initdb``/``pg_ctl`` run as, the
``postgres`` user (Debian's package creates it). ``COEVO_TEST_POSTGRES_URL`` points the tests at an existing server
instead (a CI service container): its user must be allowed to create databases.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

REQUIRE_ENV = "COEVO_REQUIRE_POSTGRES"
"""Set to 1 (``.ci/run`` does) and a PostgreSQL server that cannot start fails the tests instead of skipping them."""

URL_ENV = "COEVO_TEST_POSTGRES_URL"


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server could be started or reached; the message says why and how to get one."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bindir() -> Path:
    """The directory holding ``initdb`` and ``pg_ctl``: ``$COEVO_PG_BIN`` when set (and then only it), else
    ``PATH``'s, else the newest ``/usr/lib/postgresql/<v>/bin``. Raises ``PostgresUnavailable`` when none is."""
    chosen = os.environ.get("COEVO_PG_BIN", "")
    found = shutil.which("initdb")
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
                      if Path(p).parent.name.isdigit() else 0)
    candidates = [chosen] if chosen else [str(Path(found).resolve().parent) if found else "", *reversed(versions)]
    for directory in candidates:
        if directory and (Path(directory) / "initdb").is_file() and (Path(directory) / "pg_ctl").is_file():
            return Path(directory)
    raise PostgresUnavailable("no PostgreSQL server binaries (initdb, pg_ctl) on this machine: run scripts/setup.sh "
                              "as root (it installs Debian's postgresql package), set COEVO_PG_BIN to their directory, "
                              f"or point {URL_ENV} at a server")


class PostgresServer:
    """A PostgreSQL server owned by the test session. ``url`` is a SQLAlchemy URL (``postgresql+psycopg``)
    of its ``postgres`` database; ``new_database()`` makes an empty database and returns its URL. A
    context manager: leaving it stops the server and deletes its data (only when this object started it)."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or ""
        self._dir: Path | None = None
        self._bin: Path | None = None
        self._owner: dict[str, int] = {}

    def start(self, timeout_s: float = 60.0) -> "PostgresServer":
        """Initialise and start the server (or check the given one answers). Raises ``PostgresUnavailable``."""
        try:
            import psycopg  # noqa: F401
        except ImportError as exc:
            raise PostgresUnavailable("psycopg is not installed: pip install 'coevo[postgres]'") from exc
        if self.url:
            self._wait(timeout_s)
            return self
        self._bin = pg_bindir()
        # under /tmp when root: the postgres user must reach it, and the socket path must stay short
        self._dir = Path(tempfile.mkdtemp(prefix="coevo-pg-", dir="/tmp" if os.geteuid() == 0 else None))
        data = self._dir / "data"
        if os.geteuid() == 0:
            try:
                user = pwd.getpwnam("postgres")
            except KeyError as exc:
                raise PostgresUnavailable("running as root and there is no 'postgres' user to run the server as: "
                                          "install Debian's postgresql package (scripts/setup.sh)") from exc
            os.chown(self._dir, user.pw_uid, user.pw_gid)
            self._owner = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        port = _free_port()
        self._call([str(self._bin / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                    "--no-sync", "--locale=C"], "initdb")
        options = (f"-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={self._dir} "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
                   "-c timezone=America/New_York")  # a non-UTC server zone, so UTC handling is really tested
        self._call([str(self._bin / "pg_ctl"), "-D", str(data), "-l", str(self._dir / "log"), "-o", options,
                    "-w", "-t", str(int(timeout_s)), "start"], "pg_ctl start")
        self.url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
        self._wait(timeout_s)
        return self

    @property
    def origin(self) -> str:
        """Where the server came from: the binaries this object started, or the given URL."""
        return f"started by the tests from {self._bin}" if self._bin else f"given by {URL_ENV}"

    def version(self) -> str:
        """The server's version string (``SHOW server_version``)."""
        import psycopg

        with psycopg.connect(self.dsn()) as conn:
            return str(conn.execute("SHOW server_version").fetchone()[0])

    def _call(self, argv: list[str], what: str) -> None:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, cwd=self._dir, **self._owner)
        except OSError as exc:
            raise PostgresUnavailable(f"{what} could not run: {exc}") from exc
        if done.returncode != 0:
            log = (self._dir / "log").read_text()[-2000:] if self._dir and (self._dir / "log").exists() else ""
            raise PostgresUnavailable(f"{what} failed ({done.returncode}): {done.stderr.strip()[-2000:]} {log}")

    def _wait(self, timeout_s: float) -> None:
        import psycopg

        deadline, error = time.monotonic() + timeout_s, None
        while time.monotonic() < deadline:
            try:
                with psycopg.connect(self.dsn(), connect_timeout=5):
                    return
            except psycopg.OperationalError as exc:
                error = exc
                time.sleep(0.2)
        raise PostgresUnavailable(f"PostgreSQL at {self.url} did not answer within {timeout_s:.0f} s: {error}")

    def dsn(self, database: str | None = None) -> str:
        """The libpq URL (``postgresql://``) of ``database`` (default: the server URL's own)."""
        base = self.url.replace("postgresql+psycopg://", "postgresql://", 1)
        return base.rsplit("/", 1)[0] + "/" + database if database else base

    def new_database(self) -> str:
        """Create an empty database; its SQLAlchemy URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:16]
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url.rsplit("/", 1)[0] + "/" + name

    def stop(self) -> None:
        """Stop a server this object started and delete its data directory."""
        if self._dir is None or self._bin is None:
            return
        try:
            subprocess.run([str(self._bin / "pg_ctl"), "-D", str(self._dir / "data"), "-m", "immediate", "-w",
                            "stop"], capture_output=True, cwd=self._dir, **self._owner)
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None

    def __enter__(self) -> "PostgresServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
