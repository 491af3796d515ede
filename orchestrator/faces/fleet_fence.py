"""A fleet worker finishes a run only while it holds the run's lease (``record/lease.py``).

Three things finish a run, and each is fenced by the lease's epoch: the branch pushed to the
origin and the run's registry row (``finish``: one transaction that holds the lease row while the
push is made and the row written), and the queue job (``FencedJobManager``: procrastinate's
finish or retry of a job happens only while its run's lease row is held by this worker). A
``watch`` task notices a takeover while the run goes on and cancels it, so a worker that wakes up
after a stall stops at once instead of spending more calls on a run another worker owns.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from orchestrator.errors import DatabaseUnavailable
from orchestrator.record.lease import LeaseLost, RunLease
from orchestrator.record.registry import finish_statement

log = structlog.get_logger("orchestrate.fleet")

AWAY_S = 120.0  # how long a job's end is written again while the database is away (a restart)


def finish(lease: RunLease, push: Callable[[], str | None], run_id: str, status: str,
           reason: str, cost_usd: float, commit: str | None) -> str | None:
    """Push (``push()``, may do nothing) and record the run's end, as the lease holder; the
    ref pushed. ``LeaseLost`` when another worker took the run over: nothing is done."""
    with lease.fenced() as conn:
        pushed = push()
        sql, args = finish_statement(run_id, status, reason, cost_usd, commit)
        conn.execute(sql, args)
    return pushed


async def watch(lease: RunLease, task: asyncio.Task[Any], every_s: float) -> None:
    """Cancel ``task`` as soon as the run's lease is found to belong to another worker."""
    while True:
        await asyncio.sleep(every_s)
        if not lease.held:
            continue
        try:
            await asyncio.to_thread(lease.check)
        except LeaseLost as exc:
            log.error("lease lost", run_id=lease.run_id, error=str(exc))
            task.cancel()
            return
        except Exception as exc:  # the database is away: the fenced writes decide later
            log.warning("could not check the run's lease", error=f"{type(exc).__name__}: {exc}")


def job_manager(base: Any, leases: dict[tuple[int, int], RunLease]) -> Any:
    """procrastinate's job manager whose finish and retry of a job whose run this worker has
    leased happen only while the lease is still this worker's (else they are skipped)."""
    from procrastinate.manager import JobManager

    class FencedJobManager(JobManager):
        async def finish_job(self, job: Any, status: Any, delete_job: bool) -> None:
            await _fenced(job, lambda: super(FencedJobManager, self).finish_job(
                job, status=status, delete_job=delete_job))

        async def retry_job(self, job: Any, *args: Any, **kwargs: Any) -> None:
            await _fenced(job, lambda: super(FencedJobManager, self).retry_job(
                job, *args, **kwargs))

    async def _fenced(job: Any, write: Callable[[], Any]) -> None:
        lease = leases.pop((job.id, job.attempts), None)  # this attempt's, not a later one's
        if lease is None or not lease.held:
            await through_restart(write, job.id)
            return

        async def fenced() -> None:
            # the lease row stays locked while procrastinate writes the job: no takeover between
            with lease.fenced():
                await write()
        try:
            await through_restart(fenced, job.id)
        except LeaseLost as exc:
            log.warning("job left to the worker that holds its run", job_id=job.id,
                        error=str(exc))
        finally:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(lease.close)

    return FencedJobManager(base.connector)


async def through_restart(write: Callable[[], Awaitable[Any]], job_id: int,
                          away_s: float = AWAY_S) -> None:
    """``write()``, again while the database is away (restarting, still recovering), for up to
    ``away_s``. A job's end that fails once is otherwise lost: procrastinate's task for the job
    dies with the error and the job stays "doing" under a worker that is still up (CI saw it
    when PostgreSQL took a second to accept connections after a restart)."""
    from procrastinate.exceptions import ConnectorException

    deadline, delay = time.monotonic() + away_s, 0.25
    while True:
        try:
            await write()
            return
        except (DatabaseUnavailable, ConnectorException) as exc:
            if time.monotonic() + delay > deadline:
                raise
            log.warning("the database is away: the job's end is written again", job_id=job_id,
                        in_s=delay, error=f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 4.0)
