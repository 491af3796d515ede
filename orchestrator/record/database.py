"""Where a repository's run state lives, and how the shared (PostgreSQL) database is reached:
its URL checked and redacted, a connection (``SharedConnection``, the one every PostgreSQL
user shares), its errors as one line. No LangGraph here (the
checkpointer is ``store``'s), so the run registry, the quota ledger and a command that is given
a bad URL do not pay for it; psycopg is imported when a connection is made.
"""

from __future__ import annotations

import contextlib
import re
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.errors import DatabaseUnavailable, UsageError
from orchestrator.gitsafe import git

if TYPE_CHECKING:
    import psycopg

STATE_DIR = Path(".orchestrate") / "state"  # run state: checkpoints and the run registry
LEGACY_STATE_DIR = Path(".orchestrate")  # where runs before 0.2 kept it
_STATE_FILES = ("checkpoints.sqlite", "runs.sqlite")
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
CONNECT_TIMEOUT_S = 10
_PASSWORD = re.compile(r"(://[^:/@]*:)([^@/]*)@")


def state_dir(repo: Path) -> Path:
    """``.orchestrate/state/`` (git-excluded); a repository whose runs predate it keeps its
    state in ``.orchestrate/`` itself, so those runs stay listed and resumable."""
    legacy = repo / LEGACY_STATE_DIR
    found = [f"{LEGACY_STATE_DIR}/{n}" for n in _STATE_FILES if (legacy / n).exists()]
    # files that came with the repository are not the user's runs: never read them
    if found and not git("ls-files", "-z", "--", *found, cwd=repo, check=False).stdout:
        return legacy
    path = repo / STATE_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


def is_postgres(database_url: str | None) -> bool:
    """True for a ``postgresql://`` (or ``postgres://``) URL; None and "" mean local SQLite."""
    return bool(database_url) and database_url.startswith(POSTGRES_SCHEMES)  # type: ignore[union-attr]


def require_postgres(database_url: str | None) -> str:
    """The URL itself, or a usage error that says what a shared database URL looks like."""
    if not is_postgres(database_url):
        shown = redact_url(database_url) if database_url else database_url
        raise UsageError(
            f"not a PostgreSQL URL: {shown!r} (expected postgresql://user@host:port/db)"
        )
    return database_url  # type: ignore[return-value]


def advisory_key(name: str) -> int:
    """A stable 32-bit key for ``pg_advisory_lock``, so concurrent schema setups queue up."""
    return zlib.crc32(name.encode("utf-8"))


def redact_url(database_url: str) -> str:
    """The URL with its password (if any) replaced by ``***``, for messages."""
    return _PASSWORD.sub(r"\1***@", database_url)


def _connect_options(database_url: str) -> dict[str, Any]:
    # An address that swallows packets would otherwise hang for the OS's TCP timeout.
    return {} if "connect_timeout" in database_url else {"connect_timeout": CONNECT_TIMEOUT_S}


@contextmanager
def database_errors(database_url: str, doing: str) -> Iterator[None]:
    """psycopg's errors while ``doing`` something with the database become one line, exit 2:
    what failed, the server's reason, and where the URL came from."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        reason = redact_url(" ".join(str(exc).split()) or type(exc).__name__)
        secret = _PASSWORD.search(database_url)
        if secret and len(secret.group(2)) >= 6:  # a driver may echo it outside a URL too
            reason = reason.replace(secret.group(2), "***")
        raise DatabaseUnavailable(
            f"cannot {doing} the database {redact_url(database_url)}: {reason} "
            "(check --database-url or ORCHESTRATE_DATABASE_URL)"
        ) from None


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        raise UsageError(
            "a PostgreSQL URL needs the driver: pip install 'orchestrate[postgres]'"
        ) from None
    return psycopg


def connect_postgres(database_url: str) -> psycopg.Connection:
    """A synchronous autocommit connection; a refused or unreachable server is one clear line."""
    url = require_postgres(database_url)  # a URL that is not one is refused before the driver loads
    psycopg = _driver()
    with database_errors(url, "connect to"):
        return psycopg.connect(url, autocommit=True, **_connect_options(url))


class SharedConnection:
    """One synchronous autocommit connection for an object's threads (each use under a lock),
    the one way the registry, quota ledger, call journal, run files and leases talk to
    PostgreSQL. A connection the server dropped (a restart) is closed and opened again once
    before a statement gives up; ``setup`` runs on every connection opened."""

    def __init__(self, database_url: str, *,
                 setup: Callable[[psycopg.Connection], None] | None = None) -> None:
        self.url = database_url
        self.lock = threading.Lock()
        self._setup = setup
        self._conn: psycopg.Connection | None = None
        with self.lock:
            self._connection()

    def _connection(self) -> psycopg.Connection:
        """The open connection (the caller holds ``lock``), opened again when it was dropped."""
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop()
            conn = connect_postgres(self.url)
            if self._setup is not None:
                self._setup(conn)
            self._conn = conn
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def run(self, sql: str, args: Any = ()) -> list[tuple[Any, ...]]:
        """One statement and its rows; once more on a new connection if the server dropped it."""
        psycopg = _driver()
        for attempt in (1, 2):
            with self.lock:
                conn = self._connection()
                try:
                    cur = conn.execute(sql, args)
                    return cur.fetchall() if cur.description else []
                except psycopg.OperationalError:
                    if attempt == 2 or not (conn.closed or conn.broken):
                        raise
                    self._drop()
        return []

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """The connection in a transaction of its own, held by this thread until it ends."""
        with self.lock:
            conn = self._connection()
            with conn.transaction():
                yield conn

    def create(self, lock_name: str, statements: Sequence[str], doing: str | None) -> None:
        """Run schema ``statements`` under an advisory lock (concurrent ``CREATE TABLE IF NOT
        EXISTS`` can still collide in PostgreSQL; they queue up instead); with ``doing``, an
        error is one line saying what failed."""
        errors = database_errors(self.url, doing) if doing else contextlib.nullcontext()
        with errors, self.transaction() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key(lock_name),))
            for statement in statements:
                conn.execute(statement)

    def close(self) -> None:
        with self.lock:
            self._drop()
