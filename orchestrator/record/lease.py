"""A fleet run's lease: who may finish it, fenced by an epoch in the shared database.

A worker that stalls (SIGSTOP, a long pause, a network partition) is not dead: its job is
queued again and another worker resumes the run, but the first one may wake up later and
carry on. So each run has one row in ``orchestrate_leases``: its ``epoch``, incremented by
every worker that takes the run over, and the ``holder``. A worker remembers the epoch it took;
every write that finalises the run (pushing its branch, its registry row, its queue job) is
made while the lease row is locked and only if the epoch is still the worker's own, in the
same transaction. A worker that finds a higher epoch has lost the lease and stops with
``LeaseLost`` ("lost the lease of run ... to worker X") without finishing anything.

The lease connection ends a transaction left idle (a worker stopped while it held the row) after
``IDLE_S``, so a stopped holder never blocks a takeover for longer than that.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from orchestrator.errors import OrchestrateError
from orchestrator.record.store import SharedConnection

IDLE_S = 20
_SCHEMA = ("CREATE TABLE IF NOT EXISTS orchestrate_leases (run_id TEXT PRIMARY KEY, "
           "epoch BIGINT NOT NULL, holder TEXT NOT NULL, job_id BIGINT, "
           "taken_at TIMESTAMPTZ NOT NULL DEFAULT now())")
_TAKE = ("INSERT INTO orchestrate_leases (run_id, epoch, holder, job_id) VALUES (%s, 1, %s, %s) "
         "ON CONFLICT (run_id) DO UPDATE SET epoch = orchestrate_leases.epoch + 1, "
         "holder = excluded.holder, job_id = COALESCE(excluded.job_id, "
         "orchestrate_leases.job_id), taken_at = now() RETURNING epoch")


class LeaseLost(OrchestrateError):
    """Another worker took this run over: this one must not finish it."""

    code = "lease_lost"


class RunLease:
    """The lease one worker holds on one run, on a connection of its own."""

    def __init__(self, database_url: str, holder: str, job_id: int | None = None) -> None:
        self._url, self.holder, self.job_id = database_url, holder, job_id
        self.run_id: str | None = None
        self.epoch = 0
        self.lost: str | None = None  # the message, once the lease is found lost
        self._db = SharedConnection(database_url, setup=_idle_limit)
        self._db.create("orchestrate.leases", (_SCHEMA,), None)

    def take(self, run_id: str) -> int:
        """Take the run (first start or takeover): the new epoch, which is now this worker's."""
        (row,) = self._db.run(_TAKE, (run_id, self.holder, self.job_id))
        self.run_id, self.epoch, self.lost = run_id, int(row[0]), None
        return self.epoch

    @property
    def held(self) -> bool:
        return self.run_id is not None

    def current(self) -> tuple[int, str] | None:
        """The run's epoch and holder as the database has them now."""
        rows = self._db.run("SELECT epoch, holder FROM orchestrate_leases WHERE run_id = %s",
                            (self.run_id,))
        return (int(rows[0][0]), str(rows[0][1])) if rows else None

    def check(self) -> None:
        """Raise ``LeaseLost`` when another worker has taken the run since this one did."""
        if self.run_id is None:
            return
        now = self.current()
        if now is not None and now[0] != self.epoch:
            raise self._lose(*now)

    @contextmanager
    def fenced(self) -> Iterator[Any]:
        """A transaction holding the run's lease row, entered only while the lease is this
        worker's: what is written in it (and what is done under it) is done by the holder."""
        with self._db.transaction() as conn:
            row = conn.execute("SELECT epoch, holder FROM orchestrate_leases WHERE "
                               "run_id = %s FOR UPDATE", (self.run_id,)).fetchone()
            if row is None or int(row[0]) != self.epoch:
                raise self._lose(int(row[0]) if row else 0, str(row[1]) if row else "?")
            yield conn

    def _lose(self, epoch: int, holder: str) -> LeaseLost:
        self.lost = (f"lost the lease of run {self.run_id} to worker {holder} (epoch {epoch}, "
                     f"ours {self.epoch}): it was taken over while this worker stalled; "
                     "stopping without finishing the run")
        return LeaseLost(self.lost)

    def close(self) -> None:
        self._db.close()


def _idle_limit(conn: Any) -> None:
    conn.execute(f"SET idle_in_transaction_session_timeout = '{IDLE_S}s'")
