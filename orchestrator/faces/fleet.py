"""The fleet's queue: ``submit`` queues a run in PostgreSQL, ``jobs`` lists the queue with what
the shared registry knows of each job's run; ``fleet_worker.run_worker``, on any number of
machines, takes runs off it.

The queue is procrastinate's (jobs, retries, worker heartbeats), in the same database as the
checkpoints, registry, call journal and quota ledger. A job carries what it needs (the task,
the repository's URL, its role map files' *content*, ``fleet_job.py``), never a path on the
submitter's disk. A job remembers the run it started (the registry's ``job_id``), so when a
worker dies mid-run the job, found stalled by its stopped heartbeat and retried by any other
worker, resumes that run (``fleet_share.py``) instead of starting over. A run that already
finished is never run twice.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import hashlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from orchestrator.errors import ModelUnavailable, UsageError
from orchestrator.faces.fleet_job import agent_contents, role_contents
from orchestrator.gitsafe import git
from orchestrator.record.registry import PostgresRegistry, RunRecord
from orchestrator.record.store import (
    CONNECT_TIMEOUT_S,
    advisory_key,
    database_errors,
    require_postgres,
)

QUEUE = "orchestrate"
TASK_NAME = "orchestrate.run"
MAX_ATTEMPTS = 3


def _retried() -> tuple[type[Exception], ...]:
    """What a job is tried again after (elsewhere, or here): an outage of the model, the
    network, or the database (a restart drops every connection)."""
    try:
        import psycopg
    except ImportError:
        return (ModelUnavailable, OSError)
    return (ModelUnavailable, OSError, psycopg.OperationalError, psycopg.InterfaceError)


RETRIED = _retried()
_URL = re.compile(r"^([a-z][a-z0-9+.-]*://|\w[\w.-]*@\w[\w.-]*:)", re.IGNORECASE)
log = structlog.get_logger("orchestrate.fleet")


@dataclass(frozen=True)
class JobInfo:
    """A queued or finished run job, as ``orchestrate jobs`` lists it."""

    job_id: int
    status: str
    task: str
    repo: str
    attempts: int
    worker_id: int | None
    stalled: bool = False
    # the job's run, from the shared registry (none before a worker started it)
    run_id: str | None = None
    state: str | None = None
    branch: str | None = None
    commit: str | None = None
    host: str | None = None
    cost_usd: float | None = None
    created_at: str | None = None
    updated_at: str | None = None


def is_url(repo: str) -> bool:
    """``https://...``, ``file://...``, ``ssh://...`` or scp-like ``git@host:path``."""
    return bool(_URL.match(repo))


# --- the queue -----------------------------------------------------------------------------------


def app_for(database_url: str, run_job: Callable[..., Any] | None = None, *,
            max_size: int = 4) -> Any:
    """The queue's procrastinate app; a worker registers ``run_job`` as the run task."""
    try:
        import procrastinate
    except ImportError:
        raise UsageError("the fleet needs its queue: pip install 'orchestrate[fleet]'") from None
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(
        conninfo=require_postgres(database_url), min_size=1, max_size=max_size))
    if run_job is not None:
        retry = procrastinate.RetryStrategy(max_attempts=MAX_ATTEMPTS, wait=1,
                                            retry_exceptions=set(RETRIED))
        app.task(name=TASK_NAME, queue=QUEUE, pass_context=True, retry=retry)(run_job)
    return app


async def prepare(database_url: str) -> None:
    """Create the queue's tables once; safe to call from many workers at the same moment."""
    import psycopg

    app = app_for(database_url)
    with database_errors(database_url, "connect to"):
        conn = await psycopg.AsyncConnection.connect(database_url, autocommit=True,
                                                     connect_timeout=CONNECT_TIMEOUT_S)
    async with conn, conn.transaction():
        with database_errors(database_url, "create the queue tables in"):
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (advisory_key("orchestrate.queue"),))
            row = await (await conn.execute("SELECT to_regclass('procrastinate_jobs')")).fetchone()
            if row is None or row[0] is None:
                await conn.execute(app.schema_manager.get_schema())


async def submit(
    task: str,
    repo: str,
    *,
    database_url: str,
    role_files: Sequence[str | os.PathLike[str]] = (),
    sets: Sequence[str] = (),
    team: str | None = None,
    trust_repo_config: bool = False,
    agent_files: Sequence[str | os.PathLike[str]] = (),
    env: Mapping[str, str] | None = None,
) -> int:
    """Queue ``task`` on ``repo`` (a URL to clone, or a path every worker can reach); the job id.

    The role files' content travels with the job (``fleet_job.role_contents``), and so do the
    agent files it needs from the submitter's own ``agents/`` folder (``env``'s home, default
    this process's) and ``agent_files`` (``fleet_job.agent_contents``).
    ``trust_repo_config`` asks the worker to trust the repository's own ``roles.toml``; like a
    protected key in the role files or ``sets``, a worker takes it only when its owner allows.
    """
    if not task.strip():
        raise UsageError("the task is empty: say what should be done, e.g. 'fix the failing test'")
    _check_repo(repo)
    if not is_url(repo):
        repo = str(Path(repo).resolve())
    roles = role_contents(role_files)
    agents = agent_contents(roles, sets, os.environ if env is None else env, agent_files)
    await prepare(database_url)
    app = app_for(database_url)
    async with app.open_async():
        return await app.configure_task(TASK_NAME, queue=QUEUE).defer_async(
            task=task, repo=repo, roles=roles, agents=agents, sets=list(sets), team=team,
            trust_repo_config=trust_repo_config,
        )


async def jobs(database_url: str, *, stalled_after_s: float = 30.0) -> list[JobInfo]:
    """Every run job, oldest first, with ``stalled`` set for those whose worker went silent."""
    await prepare(database_url)  # fails fast, in one line, on a database that cannot be used
    app = app_for(database_url)
    async with app.open_async():
        stalled = {j.id for j in await app.job_manager.get_stalled_jobs(
            queue=QUEUE, seconds_since_heartbeat=stalled_after_s)}
        found = await app.job_manager.list_jobs_async(queue=QUEUE)
    runs = await asyncio.to_thread(_runs_of_jobs, database_url)
    return sorted((_info(j, j.id in stalled, runs.get(j.id)) for j in found),
                  key=lambda j: j.job_id)


def _runs_of_jobs(database_url: str) -> dict[int, RunRecord]:
    """The newest run of each job, from the shared registry."""
    registry = PostgresRegistry(database_url)
    try:
        found: dict[int, RunRecord] = {}
        for run in reversed(registry.list()):  # oldest first: the newest run of a job wins
            if run.job_id is not None:
                found[run.job_id] = run
        return found
    finally:
        registry.close()


def _info(job: Any, stalled: bool, run: RunRecord | None) -> JobInfo:
    kwargs = job.task_kwargs
    info = JobInfo(job_id=job.id, status=str(getattr(job.status, "value", job.status)),
                   task=kwargs.get("task", ""), repo=kwargs.get("repo", ""),
                   attempts=job.attempts, worker_id=job.worker_id, stalled=stalled)
    if run is None:
        return info
    return dataclasses.replace(
        info, run_id=run.run_id, state=run.state, branch=run.branch, commit=run.commit,
        host=run.host, cost_usd=run.cost_usd, created_at=run.created_at.isoformat(),
        updated_at=run.updated_at.isoformat())


async def retry_stalled(app: Any, *, stalled_after_s: float) -> list[int]:
    """Put the jobs of silent workers back in the queue (or fail them after MAX_ATTEMPTS)."""
    from procrastinate.jobs import Status

    retried = []
    for job in await app.job_manager.get_stalled_jobs(
        queue=QUEUE, seconds_since_heartbeat=stalled_after_s
    ):
        if job.attempts + 1 >= MAX_ATTEMPTS:
            await app.job_manager.finish_job(job, status=Status.FAILED, delete_job=False)
            log.warning("job stalled too often: failed", job_id=job.id, attempt=job.attempts + 1)
            continue
        await app.job_manager.retry_job(job)
        log.warning("job was stalled (its worker stopped): queued again", job_id=job.id,
                    attempt=job.attempts + 1)
        retried.append(job.id)
    return retried


# --- repositories --------------------------------------------------------------------------------


def checkout(repo: str, cache_dir: Path) -> Path:
    """A path as is; a URL cloned (or fetched) into ``cache_dir``, one clone per URL."""
    _check_repo(repo)  # the queue is written by whoever can write the database
    if not is_url(repo):
        return Path(repo)
    cache_dir = cache_dir.expanduser().resolve()
    name = re.sub(r"[^\w.-]+", "-", repo.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git"))
    target = cache_dir / f"{name}-{hashlib.sha256(repo.encode()).hexdigest()[:12]}"
    cache_dir.mkdir(parents=True, exist_ok=True)
    with (cache_dir / f"{target.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # jobs of one worker may share a clone
        if (target / ".git").exists():
            _git(target, "fetch", "-q", "origin")
            _git(target, "reset", "-q", "--hard", "origin/HEAD")
        else:
            _git(cache_dir, "clone", "-q", "--", repo, str(target))
    return target


def _check_repo(repo: str) -> None:
    """A job's repository is a URL or a path, never something git could read as an option."""
    if not repo.strip() or repo.lstrip().startswith("-") or "\0" in repo:
        raise UsageError(f"job repository {repo!r} is neither a URL nor a path (it may not "
                         "begin with '-'); give e.g. https://host/org/repo.git or /srv/repo")


def _git(cwd: Path, *args: str) -> None:
    proc = git(*args, cwd=cwd, check=False, timeout=600, network=True)
    if proc.returncode != 0:
        raise OSError(f"git {args[0]} failed: {proc.stderr.strip() or proc.stdout.strip()}")
