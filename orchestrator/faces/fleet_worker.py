"""The fleet's worker: takes run jobs off the queue (``fleet.py``), one at a time per slot, on
any machine, and records them in the shared registry.

A job's role map files come as content and are checked against what the worker's owner lets a
job set (``fleet_job.py``). With a shared database every run mirrors what a resume needs
(``fleet_share.py``), so a job retried after its worker died continues the same run here,
replaying the calls already paid for. With ``push`` (``--push``, or ``[fleet] push = true`` in
the run's role map) the run's branch goes to the job's origin. The worker logs JSON lines
(``logs.py``) with the job id, run id, attempt and worker bound to every line. SIGTERM or
Ctrl-C drains: no new job is taken, the running ones finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from orchestrator import api
from orchestrator.engine.runfiles import read_run_file
from orchestrator.errors import UsageError
from orchestrator.faces.fleet import (
    QUEUE,
    RETRIED,
    app_for,
    checkout,
    is_url,
    prepare,
    retry_stalled,
)
from orchestrator.faces.fleet_fence import finish, job_manager, watch
from orchestrator.faces.fleet_job import check_job, owner_allows, write_agents, write_roles
from orchestrator.faces.fleet_share import RunMirror, adopt, push_branch, spent
from orchestrator.record.lease import LeaseLost, RunLease
from orchestrator.record.registry import FINAL_STATES, PostgresRegistry, RunRecord, new_record
from orchestrator.record.telemetry import Event, Listener

log = structlog.get_logger("orchestrate.fleet")
_ROLE_EVENTS = ("role_started", "role_finished", "role_lost", "run_started", "run_resumed",
                "run_finished", "worktree_restored", "warned")


@dataclass(frozen=True)
class WorkerConfig:
    """How a worker runs: its database, where it clones URL repositories, what a job may set,
    whether it pushes results, its timings."""

    database_url: str
    cache_dir: Path
    env: Mapping[str, str] | None = None
    name: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    concurrency: int = 1
    heartbeat_s: float = 2.0
    stalled_after_s: float = 10.0
    poll_s: float = 2.0
    drain: bool = False
    listeners: Sequence[Listener] = ()
    allow_set: tuple[str, ...] = ()  # protected keys a job may set (``--allow-set``)
    push: bool = False  # push every run's branch to its origin (``--push``)

    def run_env(self) -> dict[str, str]:
        return dict(os.environ if self.env is None else self.env)


async def run_worker(config: WorkerConfig) -> None:
    """Take run jobs until stopped (SIGINT/SIGTERM drain), or until the queue is empty with
    ``drain``."""
    await prepare(config.database_url)
    allowed = (*config.allow_set, *owner_allows(config.run_env()))
    app = app_for(config.database_url, _run_job, max_size=2 + config.concurrency)
    # (job id, attempt) -> the lease of its run, until procrastinate finishes that attempt
    leases: dict[tuple[int, int], RunLease] = {}
    app.job_manager = job_manager(app.job_manager, leases)
    structlog.contextvars.bind_contextvars(worker=config.name)
    log.info("worker started", concurrency=config.concurrency, allow_set=list(allowed),
             push=config.push)
    async with app.open_async():
        reaper = asyncio.create_task(_reap_forever(app, config))
        try:
            await app.run_worker_async(
                queues=[QUEUE], name=config.name, concurrency=config.concurrency,
                wait=not config.drain, fetch_job_polling_interval=config.poll_s,
                update_heartbeat_interval=config.heartbeat_s,
                stalled_worker_timeout=config.stalled_after_s,
                additional_context={"config": config, "allowed": allowed, "leases": leases},
            )
        finally:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
            log.info("worker stopped")


async def _reap_forever(app: Any, config: WorkerConfig) -> None:
    while True:
        try:
            await retry_stalled(app, stalled_after_s=config.stalled_after_s)
        except Exception as exc:  # a transient database error must not stop the worker
            log.warning("looking for stalled jobs failed", error=f"{type(exc).__name__}: {exc}")
        await asyncio.sleep(config.heartbeat_s)


async def _run_job(context: Any, *, task: str, repo: str, roles: list[dict[str, str]] | None = None,
                   sets: list[str], team: str | None, trust_repo_config: bool = False,
                   role_files: list[str] | None = None,
                   agents: list[dict[str, str]] | None = None) -> dict[str, Any]:
    config: WorkerConfig = context.additional_context["config"]
    job_id = context.job.id
    with structlog.contextvars.bound_contextvars(job_id=job_id, attempt=context.job.attempts + 1):
        try:
            if role_files:
                raise UsageError(f"job {job_id} names role map files on its submitter's disk "
                                 "(queued by an older orchestrate): submit it again")
            check_job(job_id, roles or [], sets, trust_repo_config,
                      context.additional_context["allowed"])
            return await _take(context, config, task, repo, roles or [], agents or [], sets,
                               team, trust_repo_config)
        except Exception as exc:
            log.error("job failed", error=f"{type(exc).__name__}: {exc}",
                      retried=isinstance(exc, RETRIED))
            raise


async def _take(context: Any, config: WorkerConfig, task: str, repo: str,
                roles: list[dict[str, str]], agents: list[dict[str, str]], sets: list[str],
                team: str | None, trust_repo_config: bool) -> dict[str, Any]:
    job_id = context.job.id
    path = await asyncio.to_thread(checkout, repo, config.cache_dir)
    origin = repo if is_url(repo) else None  # a path is the origin itself: the branch is there
    registry = PostgresRegistry(config.database_url)
    lease = RunLease(config.database_url, config.name, job_id)
    context.additional_context["leases"][job_id, context.job.attempts] = lease  # its job ends under it
    mirror = RunMirror(config.database_url, path, origin=origin, lease=lease)
    started: list[str] = []
    listeners: tuple[Listener, ...] = (*config.listeners, mirror, _recorder(
        registry, lease, task, str(path), job_id, started, config.name))
    given = api.RunOptions(repo=path, env=config.env, listeners=listeners,
                           database_url=config.database_url,
                           before_checkpoint=mirror.before_checkpoint)
    me = asyncio.current_task()
    assert me is not None
    watcher = asyncio.create_task(watch(lease, me, config.heartbeat_s))
    try:
        prior = await asyncio.to_thread(registry.for_job, job_id)
        if prior is not None and prior.state in FINAL_STATES - {"stopped"}:
            log.info("run already finished", run_id=prior.run_id, state=prior.state)
            return {"run_id": prior.run_id, "status": prior.state}
        result = (await _resume(registry, lease, prior, given, config, path, origin)
                  if prior else None)
        if result is None:
            log.info("new run", task=task[:200], repo=repo)
            with tempfile.TemporaryDirectory(prefix=f"job-{job_id}-") as folder:
                files = write_roles(roles, Path(folder))
                defined = write_agents(agents, Path(folder) / "agents")
                result = await api.arun(task, options=given, role_files=files, sets=sets,
                                        team=team, trust_repo_config=trust_repo_config,
                                        agent_files=defined)
        watcher.cancel()
        pushed = await asyncio.to_thread(
            finish, lease, lambda: _push(config, path, result.run_id, origin, result.commit),
            result.run_id, result.status, result.reason, result.cost_usd, result.commit)
        log.info("job done", run_id=result.run_id, status=result.status,
                 cost_usd=round(result.cost_usd, 6), commit=result.commit, pushed=pushed,
                 replayed_calls=result.replayed_calls,
                 paid_calls_repeated=result.paid_calls_repeated)
        return {"run_id": result.run_id, "status": result.status, "pushed": pushed}
    except asyncio.CancelledError:
        if lease.lost is None:
            raise
        raise LeaseLost(lease.lost) from None  # the watcher stopped the run: it is not ours
    except LeaseLost:
        raise
    except Exception as exc:
        # A retried job resumes a "stopped" run; a "failed" one is final.
        retried = isinstance(exc, RETRIED)
        for run_id in started[-1:]:
            with contextlib.suppress(LeaseLost):
                await asyncio.to_thread(
                    finish, lease, lambda: None, run_id, "stopped" if retried else "failed",
                    f"{type(exc).__name__}: {exc}", 0.0, None)
        raise
    finally:
        watcher.cancel()
        await mirror.aclose()
        registry.close()


async def _resume(registry: PostgresRegistry, lease: RunLease, prior: RunRecord,
                  given: api.RunOptions, config: WorkerConfig, path: Path,
                  origin: str | None) -> api.RunResult | None:
    """The resumed run's result, or None when it cannot resume (then the job starts afresh)."""
    structlog.contextvars.bind_contextvars(run_id=prior.run_id)
    epoch = await asyncio.to_thread(lease.take, prior.run_id)  # from here on, the run is ours
    log.info("took the run's lease", run_id=prior.run_id, epoch=epoch, from_host=prior.host)
    adopted = await asyncio.to_thread(adopt, config.database_url, path, prior.run_id, origin)
    log.info("resumes run", run_id=prior.run_id, from_host=prior.host, adopted=adopted)
    try:
        return await api.aresume(prior.run_id, options=given)
    except UsageError as exc:  # no checkpoint yet, or nothing of it reached the database
        log.warning("run cannot resume here: starting the task again", run_id=prior.run_id,
                    error=str(exc))
        cost = await asyncio.to_thread(spent, config.database_url, prior.run_id)
        await asyncio.to_thread(finish, lease, lambda: None, prior.run_id, "stopped",
                                f"not resumable on {config.name}: {exc}",
                                max(cost, prior.cost_usd), None)
        return None


def _push(config: WorkerConfig, path: Path, run_id: str, origin: str | None,
          commit: str | None) -> str | None:
    """Push the run's branch to the job's origin when asked to; the ref pushed."""
    if origin is None or commit is None:
        return None
    try:
        _, roles = read_run_file(path / "workspaces" / run_id)
    except UsageError:
        return None
    if not (config.push or roles.fleet.push):
        return None
    return push_branch(path, run_id, origin)


def _recorder(registry: PostgresRegistry, lease: RunLease, task: str, repo: str, job_id: int,
              started: list[str], worker: str) -> Listener:
    def record(event: Event) -> None:
        if event.kind in ("run_started", "run_resumed"):
            if lease.run_id != event.run_id:
                lease.take(event.run_id)  # a new run (a resumed one was taken before)
            started.append(event.run_id)
            structlog.contextvars.bind_contextvars(run_id=event.run_id)
            registry.record_start(new_record(event.run_id, task, repo,
                                             str(getattr(event, "branch", "")), job_id=job_id,
                                             host=worker))
        if event.kind in _ROLE_EVENTS:
            fields = event.model_dump(exclude={"kind", "run_id", "t", "at"}, exclude_none=True)
            log.info(event.kind, run_id=event.run_id, **{k: v for k, v in fields.items()
                                                         if isinstance(v, (str, int, float))})

    return record
