"""Persistence: the checkpointer factory, local (SQLite in ``.orchestrate/state/``) or shared
(Postgres).

Checkpoints are written with ``durability="sync"`` by the API, so model spend and git side
effects never re-run after a crash. The serializer allow-lists our own state types, so loading
a checkpoint never deserialises anything else. With a ``postgresql://`` URL every machine of a
fleet reads and writes the same checkpoints, so any worker can resume any run.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import importlib
import importlib.util
import re
import sqlite3
import sys
import threading
import zlib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from pydantic import BaseModel

from orchestrator import state
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
def _models_in(model: type[BaseModel], seen: dict[type, None] | None = None) -> list[type]:
    """Every pydantic model a checkpoint of ``model`` can hold: its own type and, recursively,
    every model in its fields' annotations (lists, dicts, optionals included). Derived, not
    listed by hand, so a new state field's type cannot be silently dropped on resume."""
    seen = {} if seen is None else seen
    if model in seen:
        return list(seen)
    seen[model] = None
    stack: list[Any] = [f.annotation for f in model.model_fields.values()]
    while stack:
        tp = stack.pop()
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            _models_in(tp, seen)
        stack.extend(get_args(tp))
    return list(seen)


# the state's own models, and what else the run checkpoints (handoffs, call records)
_STATE_TYPES = _models_in(state.RunState)
_STATE_TYPES += [t for t in (state.Handoff, state.CallRecord, state.AssertLine)
                 if t not in _STATE_TYPES]

# A checkpoint names the module of every type it holds. Before the package was grouped by
# concern these modules stood at its top: a run checkpointed then still resumes, its values
# loading as the same classes (``orchestrator.localize`` is now the package, which hands its
# types on; the other old name is an alias of the module that took its place).
_MOVED = {"orchestrator.localize": "orchestrator.localize.localization",
          "orchestrator.testreport": "orchestrator.localize.testreport"}
_ALLOWED = [(t.__module__, t.__name__) for t in _STATE_TYPES]
_ALLOWED += [(old, name) for old, new in _MOVED.items() for module, name in _ALLOWED
             if module == new]


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


def serializer() -> JsonPlusSerializer:
    for old, new in _MOVED.items():
        if old not in sys.modules and importlib.util.find_spec(old) is None:
            sys.modules[old] = importlib.import_module(new)
    return JsonPlusSerializer(allowed_msgpack_modules=_ALLOWED)


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
    psycopg = _driver()
    url = require_postgres(database_url)
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


class InlineSqliteSaver(SqliteSaver):
    """LangGraph's ``SqliteSaver`` with its async methods done inline, on the event loop.

    A checkpoint of ours is a few kilobytes, and with WAL and no sync to disk per commit it is
    written in a fraction of a millisecond; ``AsyncSqliteSaver`` hands every statement, commit
    and cursor close to a thread of its own and back, and those round trips cost several times
    the writes. (The platform brings its own checkpointer; this one serves the CLI and API.)
    """

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None
                    ) -> AsyncIterator[CheckpointTuple]:
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)


@asynccontextmanager
async def sqlite_checkpointer(repo: Path) -> AsyncIterator[InlineSqliteSaver]:
    """A checkpointer on ``<repo>/.orchestrate/state/checkpoints.sqlite``.

    WAL with ``synchronous=NORMAL``: a commit survives the process being killed, not a power
    cut, which may take the last checkpoints back; a resume then re-runs those nodes, and their
    model calls are answered by the call journal, which does sync to disk (``journal.py``).
    """
    # Concurrent runs in one repository share the file. Switching a new file to WAL and creating
    # the tables take locks that SQLite's busy timeout does not always wait for, so that first
    # part runs under a file lock; later writes wait up to the timeout.
    saver = await asyncio.to_thread(_sqlite_saver, repo)
    try:
        yield saver
    finally:
        await asyncio.to_thread(saver.conn.close)


def _sqlite_saver(repo: Path) -> InlineSqliteSaver:
    folder = state_dir(repo)
    conn = sqlite3.connect(str(folder / "checkpoints.sqlite"), timeout=60,
                           check_same_thread=False)
    try:
        conn.execute("PRAGMA synchronous=NORMAL")
        saver = InlineSqliteSaver(conn, serde=serializer())
        with (folder / "checkpoints.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            saver.setup()  # switches the file to WAL, creates the tables
    except BaseException:
        conn.close()
        raise
    return saver


@asynccontextmanager
async def postgres_checkpointer(database_url: str) -> AsyncIterator[BaseCheckpointSaver]:
    """An ``AsyncPostgresSaver`` on ``database_url``, its tables created on first use."""
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg import AsyncConnection
        from psycopg.rows import dict_row
    except ImportError:
        raise UsageError(
            "a PostgreSQL URL needs the driver: pip install 'orchestrate[postgres]'"
        ) from None
    # The saver's own from_conn_string uses these connection settings; we open the connection
    # ourselves to hold an advisory lock around setup(), whose migrations are not race-free.
    url = require_postgres(database_url)
    with database_errors(url, "connect to"):
        conn = await AsyncConnection.connect(url, autocommit=True, prepare_threshold=0,
                                             row_factory=dict_row, **_connect_options(url))
    async with conn:
        saver = AsyncPostgresSaver(conn, serde=serializer())
        with database_errors(url, "create the checkpoint tables in"):
            async with _advisory_lock(conn, "orchestrate.checkpoints"):
                await saver.setup()
        yield saver


async def _try_lock(conn: psycopg.AsyncConnection[Any], key: int) -> bool:
    row = await (await conn.execute("SELECT pg_try_advisory_lock(%s)", (key,))).fetchone()
    if row is None:
        return False
    return bool(row["pg_try_advisory_lock"] if isinstance(row, dict) else row[0])


@asynccontextmanager
async def _advisory_lock(conn: psycopg.AsyncConnection[Any], name: str) -> AsyncIterator[None]:
    """Hold a session advisory lock, polling for it rather than blocking on it: setup() creates
    an index CONCURRENTLY, which waits for every open statement, a blocked lock request too."""
    key = advisory_key(name)
    while not await _try_lock(conn, key):
        await asyncio.sleep(0.05)
    try:
        yield
    finally:
        await conn.execute("SELECT pg_advisory_unlock(%s)", (key,))


@asynccontextmanager
async def open_checkpointer(
    repo: Path, database_url: str | None = None
) -> AsyncIterator[BaseCheckpointSaver]:
    """The run's checkpointer: shared Postgres for a ``postgresql://`` URL, local SQLite for none."""
    if database_url:
        async with postgres_checkpointer(database_url) as saver:
            yield saver
    else:
        async with sqlite_checkpointer(repo) as saver:
            yield saver
