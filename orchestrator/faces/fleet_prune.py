"""Retention for the fleet's database: ``orchestrate jobs --prune --older-than DAYS``.

Finished jobs and what their runs left in PostgreSQL would otherwise grow forever (docs/fleet.md,
"What grows"). ``prune`` removes, in one transaction, the queue jobs that ended (succeeded,
failed, cancelled, aborted) more than ``days`` ago, with their events; and the runs that ended
that long ago (their registry row, call journal, mirrored run files, lease and checkpoints).
Never a running one: a job still queued or taken (``todo``/``doing``) keeps its runs, a
``stopped`` one included (a retried job resumes it), and a run still ``running`` stays whatever
its age. The branches and snapshot refs pushed to the origin are the team's and stay.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.errors import UsageError
from orchestrator.record.store import connect_postgres, database_errors

_FINAL_JOBS = ("succeeded", "failed", "cancelled", "aborted")
# what a run leaves, by run id: (table, its run id column)
_PER_RUN = (("orchestrate_calls", "run_id"), ("orchestrate_run_files", "run_id"),
            ("orchestrate_leases", "run_id"), ("checkpoint_writes", "thread_id"),
            ("checkpoint_blobs", "thread_id"), ("checkpoints", "thread_id"))


@dataclass(frozen=True)
class Pruned:
    """What ``prune`` removed (or, with ``dry_run``, would remove)."""

    jobs: int
    runs: int
    rows: int  # journal, run files, leases and checkpoint rows of those runs
    older_than_days: float


def prune(database_url: str, days: float, *, dry_run: bool = False) -> Pruned:
    """Remove finished jobs and finished runs older than ``days`` days (``dry_run``: count
    them, remove nothing)."""
    import psycopg

    if not days > 0:
        raise UsageError(f"--older-than {days}: give a number of days above 0, e.g. 30")
    conn = connect_postgres(database_url)
    with conn, database_errors(database_url, "prune"), conn.transaction():
        tables = {t for (t,) in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "current_schema()").fetchall()}
        jobs = _old_jobs(conn, days) if "procrastinate_jobs" in tables else []
        runs = _old_runs(conn, days, "procrastinate_jobs" in tables) \
            if "orchestrate_runs" in tables else []
        rows = 0
        for table, column in _PER_RUN:
            if table in tables and runs:
                rows += conn.execute(f"DELETE FROM {table} WHERE {column} = ANY(%s)",
                                     (runs,)).rowcount
        if runs:
            conn.execute("DELETE FROM orchestrate_runs WHERE run_id = ANY(%s)", (runs,))
        if jobs:
            conn.execute("DELETE FROM procrastinate_jobs WHERE id = ANY(%s)", (jobs,))
        found = Pruned(len(jobs), len(runs), rows, days)
        if dry_run:
            raise psycopg.Rollback()  # what would go, counted; nothing removed
    return found


def _old_jobs(conn: object, days: float) -> list[int]:
    """Jobs that ended before the cutoff: their last event is older than it."""
    rows = conn.execute(  # type: ignore[attr-defined]
        "SELECT j.id FROM procrastinate_jobs j WHERE j.status::text = ANY(%s) AND "
        "COALESCE((SELECT max(e.at) FROM procrastinate_events e WHERE e.job_id = j.id), "
        "'-infinity') < now() - make_interval(secs => %s) AND NOT EXISTS (SELECT 1 FROM "
        "procrastinate_periodic_defers p WHERE p.job_id = j.id)",
        (list(_FINAL_JOBS), days * 86400)).fetchall()
    return [int(r[0]) for r in rows]


def _old_runs(conn: object, days: float, has_jobs: bool) -> list[str]:
    """Runs that ended before the cutoff and whose job (if any) is not queued or taken."""
    live_job = ("AND NOT EXISTS (SELECT 1 FROM procrastinate_jobs j WHERE j.id = r.job_id "
                "AND j.status::text IN ('todo', 'doing'))") if has_jobs else ""
    rows = conn.execute(  # type: ignore[attr-defined]
        "SELECT r.run_id FROM orchestrate_runs r WHERE r.state IN ('succeeded', 'failed', "
        f"'stopped') AND r.updated_at < now() - make_interval(secs => %s) {live_job}",
        (days * 86400,)).fetchall()
    return [str(r[0]) for r in rows]
