"""A throwaway PostgreSQL server on 127.0.0.1 for the tests, and a fresh database per test.

Test modules load it with ``pytest_plugins = ["pg"]`` so that one server (started on first use,
about 2 s) serves the whole session. Without PostgreSQL binaries (``/usr/lib/postgresql/*/bin``,
installed by ``.ci/run``) or the ``postgres`` extra, the tests that need it are skipped with
the reason. ``ORCHESTRATE_TEST_DATABASE_URL`` points the tests at an existing server instead.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

_names = itertools.count()


def pg_bin() -> Path | None:
    """The newest ``/usr/lib/postgresql/<version>/bin`` that has initdb, if any."""
    found = [Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin") if Path(p, "initdb").exists()]
    return sorted(found, key=lambda p: [int(x) for x in p.parent.name.split(".") if x.isdigit()]
                  )[-1] if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PgCluster:
    """A cluster in a temporary directory; ``url(db)`` addresses one of its databases."""

    bin: Path
    data: Path
    sockets: Path
    port: int

    def _as_postgres(self, *cmd: str) -> subprocess.CompletedProcess[str]:
        # initdb refuses to run as root; as an ordinary user it runs as that user.
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        return subprocess.run([*prefix, *cmd], capture_output=True, text=True, check=True,
                              timeout=60, cwd="/")

    @classmethod
    def start(cls, pgbin: Path) -> PgCluster:
        data, sockets = Path(tempfile.mkdtemp(prefix="pg-data-")), Path(tempfile.mkdtemp(prefix="pg-s-"))
        if os.geteuid() == 0:
            shutil.chown(data, "postgres", "postgres")
            shutil.chown(sockets, "postgres", "postgres")
        data.chmod(0o700)
        cluster = cls(pgbin, data, sockets, free_port())
        cluster._as_postgres(str(pgbin / "initdb"), "-D", str(data), "-U", "postgres",
                             "-A", "trust", "--no-sync")
        cluster.up()
        return cluster

    def _options(self) -> str:
        return (f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.sockets} -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")

    def require_password(self, user: str, password: str) -> tuple[str, str, int]:
        """Create ``user`` with ``password`` and make the server ask for it (first hba line)."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {user} LOGIN PASSWORD '{password}'")
            hba = self.data / "pg_hba.conf"
            hba.write_text(f"host all {user} 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
            conn.execute("SELECT pg_reload_conf()")
        wrong = f"postgresql://{user}:not-{password}@127.0.0.1:{self.port}/postgres"
        for _ in range(100):  # the postmaster re-reads the file on its own time
            try:
                psycopg.connect(wrong).close()
            except psycopg.OperationalError:
                return user, password, self.port
            time.sleep(0.05)
        raise RuntimeError("the server never started asking for the password")

    def restart(self) -> None:
        """Stop the server at once (as a crash would) and start it again on the same port:
        every connection is dropped."""
        self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                          "-l", str(self.data / "server.log"), "-w", "restart")

    def down(self) -> None:
        """Stop the server at once, as a crash would (``up`` starts it again)."""
        self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                          "-w", "stop")

    def up(self) -> None:
        """Start the server (again, after ``down``), on the cluster's port."""
        self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data),
                          "-l", str(self.data / "server.log"), "-w", "-o", self._options(),
                          "start")

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def stop(self) -> None:
        try:
            self.down()
        finally:
            shutil.rmtree(self.data, ignore_errors=True)
            shutil.rmtree(self.sockets, ignore_errors=True)


def create_database(server_url: str) -> str:
    """A new empty database on the server at ``server_url``; returns its URL."""
    import psycopg

    name = f"t{os.getpid()}_{next(_names)}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster | None]:
    """The cluster this test session started, or None when using an existing server."""
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    if os.environ.get("ORCHESTRATE_TEST_DATABASE_URL"):
        yield None
        return
    pgbin = pg_bin()
    if pgbin is None:
        pytest.skip("no PostgreSQL binaries under /usr/lib/postgresql/*/bin "
                    "(apt-get install postgresql, as .ci/run does)")
    cluster = PgCluster.start(pgbin)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def pg_server(pg_cluster: PgCluster | None) -> str:
    """The URL of the session's PostgreSQL server (its ``postgres`` database)."""
    if pg_cluster is None:
        return os.environ["ORCHESTRATE_TEST_DATABASE_URL"]
    return pg_cluster.url()


@pytest.fixture(scope="session")
def pg_password_user(pg_cluster: PgCluster | None) -> tuple[str, str, int]:
    """``(user, password, port)`` of a role that must log in with its password (scram)."""
    if pg_cluster is None:
        pytest.skip("needs a PostgreSQL cluster this test session started (its pg_hba.conf)")
    return pg_cluster.require_password("orchestrate_pw", "right-password-123")


@pytest.fixture
def pg_url(pg_server: str) -> str:
    """A fresh, empty database for one test."""
    return create_database(pg_server)
