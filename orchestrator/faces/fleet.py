"""The fleet: ``submit`` queues a run in PostgreSQL; ``run_worker``, on any number of machines,
takes runs off the queue one at a time and records them in the shared run registry.

The queue is procrastinate's (jobs, retries, worker heartbeats), in the same database as the
checkpoints, registry and quota ledger. A job remembers the run it started (the registry's
``job_id``), so when a worker dies mid-run the job, found stalled by its stopped heartbeat and
retried by any other worker, resumes that run from its checkpoint instead of starting over.
A run that already finished is never run twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import logging
import os
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import api
from orchestrator.errors import ModelUnavailable, UsageError
from orchestrator.gitsafe import git
from orchestrator.record.registry import FINAL_STATES, PostgresRegistry, RunRecord, new_record
from orchestrator.record.store import (
    CONNECT_TIMEOUT_S,
    advisory_key,
    database_errors,
    require_postgres,
)
from orchestrator.record.telemetry import Event, Listener

QUEUE = "orchestrate"
TASK_NAME = "orchestrate.run"
MAX_ATTEMPTS = 3
_URL = re.compile(r"^([a-z][a-z0-9+.-]*://|\w[\w.-]*@\w[\w.-]*:)", re.IGNORECASE)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkerConfig:
    """How a worker runs: its database, where it clones URL repositories, its timings."""

    database_url: str
    cache_dir: Path
    env: Mapping[str, str] | None = None
    name: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    concurrency: int = 1
    heartbeat_s: float = 10.0
    stalled_after_s: float = 30.0
    poll_s: float = 5.0
    drain: bool = False
    listeners: Sequence[Listener] = ()


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


def is_url(repo: str) -> bool:
    """``https://...``, ``file://...``, ``ssh://...`` or scp-like ``git@host:path``."""
    return bool(_URL.match(repo))


# --- the queue -----------------------------------------------------------------------------------


def _app(database_url: str) -> Any:
    try:
        import procrastinate
    except ImportError:
        raise UsageError("the fleet needs its queue: pip install 'orchestrate[fleet]'") from None
    app = procrastinate.App(connector=procrastinate.PsycopgConnector(
        conninfo=require_postgres(database_url), min_size=1, max_size=4))
    retry = procrastinate.RetryStrategy(max_attempts=MAX_ATTEMPTS, wait=5,
                                        retry_exceptions={ModelUnavailable, OSError})
    app.task(name=TASK_NAME, queue=QUEUE, pass_context=True, retry=retry)(_run_job)
    return app


async def prepare(database_url: str) -> None:
    """Create the queue's tables once; safe to call from many workers at the same moment."""
    import psycopg

    app = _app(database_url)
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
) -> int:
    """Queue ``task`` on ``repo`` (a URL to clone, or a path every worker can reach); the job id.

    ``trust_repo_config`` is the submitter's trust in the repository's own ``roles.toml``
    (provider URLs, key variables, policy allows, sandbox); without it the worker refuses them.
    Role files are queued as absolute paths, so a worker finds them wherever it runs.
    """
    if not task.strip():
        raise UsageError("the task is empty: say what should be done, e.g. 'fix the failing test'")
    _check_repo(repo)
    if not is_url(repo):
        repo = str(Path(repo).resolve())
    await prepare(database_url)
    app = _app(database_url)
    async with app.open_async():
        return await app.configure_task(TASK_NAME, queue=QUEUE).defer_async(
            task=task, repo=repo, role_files=[str(Path(f).resolve()) for f in role_files],
            sets=list(sets), team=team, trust_repo_config=trust_repo_config,
        )


async def jobs(database_url: str, *, stalled_after_s: float = 30.0) -> list[JobInfo]:
    """Every run job, oldest first, with ``stalled`` set for those whose worker went silent."""
    await prepare(database_url)  # fails fast, in one line, on a database that cannot be used
    app = _app(database_url)
    async with app.open_async():
        stalled = {j.id for j in await app.job_manager.get_stalled_jobs(
            queue=QUEUE, seconds_since_heartbeat=stalled_after_s)}
        found = await app.job_manager.list_jobs_async(queue=QUEUE)
    return sorted((_info(j, j.id in stalled) for j in found), key=lambda j: j.job_id)


def _info(job: Any, stalled: bool) -> JobInfo:
    kwargs = job.task_kwargs
    return JobInfo(job_id=job.id, status=str(getattr(job.status, "value", job.status)),
                   task=kwargs.get("task", ""), repo=kwargs.get("repo", ""),
                   attempts=job.attempts, worker_id=job.worker_id, stalled=stalled)


async def retry_stalled(app: Any, *, stalled_after_s: float) -> list[int]:
    """Put the jobs of silent workers back in the queue (or fail them after MAX_ATTEMPTS)."""
    from procrastinate.jobs import Status

    retried = []
    for job in await app.job_manager.get_stalled_jobs(
        queue=QUEUE, seconds_since_heartbeat=stalled_after_s
    ):
        if job.attempts + 1 >= MAX_ATTEMPTS:
            await app.job_manager.finish_job(job, status=Status.FAILED, delete_job=False)
            log.warning("job %s stalled %d times: failed", job.id, job.attempts + 1)
            continue
        await app.job_manager.retry_job(job)
        log.warning("job %s was stalled (its worker stopped): queued again", job.id)
        retried.append(job.id)
    return retried


# --- the worker ----------------------------------------------------------------------------------


async def run_worker(config: WorkerConfig) -> None:
    """Take run jobs until stopped (SIGINT/SIGTERM), or until the queue is empty with ``drain``."""
    await prepare(config.database_url)
    app = _app(config.database_url)
    async with app.open_async():
        reaper = asyncio.create_task(_reap_forever(app, config))
        try:
            await app.run_worker_async(
                queues=[QUEUE], name=config.name, concurrency=config.concurrency,
                wait=not config.drain, fetch_job_polling_interval=config.poll_s,
                update_heartbeat_interval=config.heartbeat_s,
                stalled_worker_timeout=config.stalled_after_s,
                additional_context={"config": config},
            )
        finally:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper


async def _reap_forever(app: Any, config: WorkerConfig) -> None:
    while True:
        try:
            await retry_stalled(app, stalled_after_s=config.stalled_after_s)
        except Exception:  # a transient database error must not stop the worker
            log.exception("looking for stalled jobs failed")
        await asyncio.sleep(config.heartbeat_s)


async def _run_job(context: Any, *, task: str, repo: str, role_files: list[str],
                   sets: list[str], team: str | None,
                   trust_repo_config: bool = False) -> dict[str, Any]:
    config: WorkerConfig = context.additional_context["config"]
    job_id = context.job.id
    path = await asyncio.to_thread(checkout, repo, config.cache_dir)
    registry = PostgresRegistry(config.database_url)
    started: list[str] = []
    listeners = (*config.listeners, _recorder(registry, task, str(path), job_id, started))
    # what a resumed run and a new one are both given; a new one also gets its role map
    given = api.RunOptions(repo=path, env=config.env, listeners=listeners,
                           database_url=config.database_url)
    try:
        prior = await asyncio.to_thread(registry.for_job, job_id)
        if prior is not None and prior.state in FINAL_STATES - {"stopped"}:
            log.info("job %s: run %s already %s", job_id, prior.run_id, prior.state)
            return {"run_id": prior.run_id, "status": prior.state}
        result = await _resume(registry, prior, given, config) if prior else None
        if result is None:
            log.info("job %s on %s: new run for %r", job_id, config.name, task)
            result = await api.arun(task, options=given, role_files=role_files, sets=sets,
                                    team=team, trust_repo_config=trust_repo_config)
        await asyncio.to_thread(registry.record_finish, result.run_id, result.status,
                                result.reason, result.cost_usd, result.commit)
        return {"run_id": result.run_id, "status": result.status}
    except Exception as exc:
        # A retried job resumes a "stopped" run; a "failed" one is final.
        retried = isinstance(exc, (ModelUnavailable, OSError))
        for run_id in started[-1:]:
            registry.record_finish(run_id, "stopped" if retried else "failed",
                                   f"{type(exc).__name__}: {exc}", 0.0, None)
        raise
    finally:
        registry.close()


async def _resume(registry: PostgresRegistry, prior: RunRecord, given: api.RunOptions,
                  config: WorkerConfig) -> api.RunResult | None:
    """The resumed run's result, or None when it cannot resume (then the job starts afresh)."""
    log.info("job resumes run %s on %s", prior.run_id, config.name)
    try:
        return await api.aresume(prior.run_id, options=given)
    except UsageError as exc:  # no checkpoint yet, or its worktree is on another machine
        log.warning("run %s cannot resume here (%s): starting the task again", prior.run_id, exc)
        registry.record_finish(prior.run_id, "stopped", f"not resumable on {config.name}: {exc}",
                               prior.cost_usd, None)
        return None


def _recorder(registry: PostgresRegistry, task: str, repo: str, job_id: int,
              started: list[str]) -> Listener:
    def record(event: Event) -> None:
        if event.kind in ("run_started", "run_resumed"):
            started.append(event.run_id)
            registry.record_start(new_record(event.run_id, task, repo,
                                             str(event.data.get("branch", "")), job_id=job_id))

    return record


# --- repositories --------------------------------------------------------------------------------


def checkout(repo: str, cache_dir: Path) -> Path:
    """A path as is; a URL cloned (or fetched) into ``cache_dir``, one clone per URL."""
    _check_repo(repo)  # the queue is written by whoever can write the database
    if not is_url(repo):
        return Path(repo)
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
