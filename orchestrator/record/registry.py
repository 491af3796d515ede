"""The run registry: one row per run (task, repository, branch, state, cost, host), queryable.

Embedded, it is ``<repo>/.orchestrate/state/runs.sqlite``; with a ``postgresql://`` URL it is the
``orchestrate_runs`` table of the shared database, so a fleet's runs are listed in one place
whichever machine ran them. Every write is a single statement (an upsert or a guarded update),
so concurrent writers never interleave half a change.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from orchestrator.record.sqlite import connect
from orchestrator.record.store import SharedConnection, state_dir

RunStatus = Literal["queued", "running", "succeeded", "failed", "stopped", "awaiting_approval"]
FINAL_STATES: frozenset[str] = frozenset({"succeeded", "failed", "stopped"})
_COLUMNS = ("run_id", "task", "repo", "branch", "state", "created_at", "updated_at", "cost_usd",
            "reason", "host", "commit_sha", "job_id")


@dataclass(frozen=True)
class RunRecord:
    """One run as the registry knows it. ``job_id`` links a fleet run to its queue job."""

    run_id: str
    task: str
    repo: str
    branch: str
    state: RunStatus
    created_at: datetime
    updated_at: datetime
    cost_usd: float = 0.0
    reason: str = ""
    host: str = ""
    commit: str | None = None
    job_id: int | None = None

    def document(self) -> dict[str, Any]:
        """The record as ``runs --json`` gives it (times in ISO 8601)."""
        return {**{k: v for k, v in vars(self).items()},
                "created_at": self.created_at.isoformat(),
                "updated_at": self.updated_at.isoformat()}


def new_record(
    run_id: str, task: str, repo: str, branch: str, *, state: RunStatus = "running",
    job_id: int | None = None, now: datetime | None = None, host: str | None = None,
) -> RunRecord:
    """A record stamped now, on this host (or ``host``: a fleet worker's name)."""
    now = now or datetime.now(UTC)
    return RunRecord(run_id=run_id, task=task, repo=repo, branch=branch, state=state,
                     created_at=now, updated_at=now, host=host or socket.gethostname(),
                     job_id=job_id)


class RunRegistry(Protocol):
    """Where runs are recorded; SQLite per repository or Postgres per fleet."""

    def record_start(self, run: RunRecord) -> None:
        """Insert ``run``, or update a known run (a resume) keeping its ``created_at``."""

    def record_finish(self, run_id: str, status: RunStatus, reason: str, cost_usd: float,
                      commit: str | None) -> None:
        """Set the final state of a known run; unknown ids are ignored."""

    def get(self, run_id: str) -> RunRecord | None: ...

    def list(self, repo: str | None = None) -> list[RunRecord]:
        """Newest first; only runs of ``repo`` when given."""

    def close(self) -> None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS orchestrate_runs (
    run_id TEXT PRIMARY KEY, task TEXT NOT NULL, repo TEXT NOT NULL, branch TEXT NOT NULL,
    state TEXT NOT NULL, created_at {ts} NOT NULL, updated_at {ts} NOT NULL,
    cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0, reason TEXT NOT NULL DEFAULT '',
    host TEXT NOT NULL DEFAULT '', commit_sha TEXT, job_id BIGINT);
CREATE INDEX IF NOT EXISTS orchestrate_runs_repo ON orchestrate_runs (repo, created_at);
CREATE INDEX IF NOT EXISTS orchestrate_runs_job ON orchestrate_runs (job_id)
"""

_UPSERT = (
    f"INSERT INTO orchestrate_runs ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))}) "
    "ON CONFLICT (run_id) DO UPDATE SET task = excluded.task, repo = excluded.repo, "
    "branch = excluded.branch, state = excluded.state, updated_at = excluded.updated_at, "
    "host = excluded.host, job_id = COALESCE(excluded.job_id, orchestrate_runs.job_id)"
)
_FINISH = ("UPDATE orchestrate_runs SET state = ?, reason = ?, cost_usd = ?, commit_sha = ?, "
           "updated_at = ? WHERE run_id = ?")


def finish_statement(run_id: str, status: str, reason: str, cost_usd: float,
                     commit: str | None) -> tuple[str, tuple[Any, ...]]:
    """``record_finish``'s statement for a Postgres connection of the caller's (to be made in
    a transaction of its own, e.g. one that holds the run's lease)."""
    return (_FINISH.replace("?", "%s"),
            (status, reason, float(cost_usd), commit, datetime.now(UTC), run_id))


_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM orchestrate_runs"


class _SqlRegistry:
    """The queries both backends share; subclasses only say how to execute one."""

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _decode_time(self, value: Any) -> datetime:
        return value

    def _encode_time(self, value: datetime) -> Any:
        return value

    def record_start(self, run: RunRecord) -> None:
        row = _row_of(run)
        self._execute(_UPSERT, tuple(
            self._encode_time(v) if isinstance(v, datetime) else v for v in row))

    def record_finish(self, run_id: str, status: RunStatus, reason: str, cost_usd: float,
                      commit: str | None) -> None:
        now = self._encode_time(datetime.now(UTC))
        self._execute(_FINISH, (status, reason, float(cost_usd), commit, now, run_id))

    def get(self, run_id: str) -> RunRecord | None:
        rows = self._execute(f"{_SELECT} WHERE run_id = ?", (run_id,))
        return self._record(rows[0]) if rows else None

    def list(self, repo: str | None = None) -> list[RunRecord]:
        where, args = ("WHERE repo = ?", (repo,)) if repo is not None else ("", ())
        rows = self._execute(f"{_SELECT} {where} ORDER BY created_at DESC, run_id DESC", args)
        return [self._record(r) for r in rows]

    def for_job(self, job_id: int) -> RunRecord | None:
        """The newest run started for queue job ``job_id`` (what a retried job resumes)."""
        rows = self._execute(
            f"{_SELECT} WHERE job_id = ? ORDER BY created_at DESC LIMIT 1", (job_id,))
        return self._record(rows[0]) if rows else None

    def _record(self, row: tuple[Any, ...]) -> RunRecord:
        d = dict(zip(_COLUMNS, row, strict=True))
        return RunRecord(
            run_id=d["run_id"], task=d["task"], repo=d["repo"], branch=d["branch"],
            state=d["state"], created_at=self._decode_time(d["created_at"]),
            updated_at=self._decode_time(d["updated_at"]), cost_usd=float(d["cost_usd"]),
            reason=d["reason"], host=d["host"], commit=d["commit_sha"], job_id=d["job_id"],
        )


def _row_of(run: RunRecord) -> tuple[Any, ...]:
    return (run.run_id, run.task, run.repo, run.branch, run.state, run.created_at,
            run.updated_at, float(run.cost_usd), run.reason, run.host, run.commit, run.job_id)


class SqliteRegistry(_SqlRegistry):
    """``<repo>/.orchestrate/state/runs.sqlite``; WAL and a busy timeout let processes share it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = connect(str(path), schema=_SCHEMA.format(ts="TEXT") + ";")
        self._lock = threading.Lock()

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _encode_time(self, value: datetime) -> str:
        return value.astimezone(UTC).isoformat()

    def _decode_time(self, value: Any) -> datetime:
        return datetime.fromisoformat(value)

    def close(self) -> None:
        with self._lock:
            self._db.close()


class PostgresRegistry(_SqlRegistry):
    """The ``orchestrate_runs`` table of a shared PostgreSQL database."""

    def __init__(self, database_url: str) -> None:
        self._url = database_url
        self._db = SharedConnection(database_url)
        self._db.create("orchestrate.registry", _SCHEMA.format(ts="TIMESTAMPTZ").split(";"),
                        "create the run registry in")

    def _execute(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """One statement; a connection the server dropped (a restart) is opened again once."""
        return self._db.run(sql.replace("?", "%s"), args)

    def close(self) -> None:
        self._db.close()


def build_registry(repo: Path, database_url: str | None = None) -> SqliteRegistry | PostgresRegistry:
    """The registry for ``repo``: Postgres for a database URL, else the repository's SQLite file."""
    if database_url:
        return PostgresRegistry(database_url)
    return SqliteRegistry(state_dir(repo) / "runs.sqlite")


@contextmanager
def open_registry(
    repo: Path, database_url: str | None = None
) -> Iterator[SqliteRegistry | PostgresRegistry]:
    """:func:`build_registry`, closed on exit."""
    registry = build_registry(repo, database_url)
    try:
        yield registry
    finally:
        registry.close()

