"""The library API: run, resume, explore, stream. Typed results; no printing, no exits.

The CLI is a thin shell over these functions, and CI bots call them directly. Dependencies are
parameters (repository, role map, environment, event listeners, an approver), so a test hands
in the simulator's URL and a temporary repository instead of patching anything.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import Command

from orchestrator.config.layers import (  # noqa: F401 (api.resolve_roles)
    resolve_overrides,
    resolve_roles,
    resolve_setup,
)
from orchestrator.config.pipeline import Pipeline, pipeline_of
from orchestrator.config.schema import RoleMap
from orchestrator.engine.graph import build_explore_graph, build_graph, timed
from orchestrator.engine.lifecycle import (
    OpenRun,
    Relay,
    build_pool,
    check_sandbox,
    close_pool,
    is_final,
    phases_at,
    read_run_file,
    record_claims,
    run_registry,
    run_warnings,
    write_explore_file,
    write_failure,
    write_run_file,
)
from orchestrator.engine.runtime import RunContext
from orchestrator.errors import BudgetExhausted, ConfigError, UsageError
from orchestrator.evidence.claimstats import by_model
from orchestrator.evidence.verify import DirSource
from orchestrator.localize.reporules import repo_rules
from orchestrator.models.pool import ClientPool
from orchestrator.models.routing import telemetry_listener
from orchestrator.record.store import open_checkpointer
from orchestrator.record.telemetry import Event, Listener, Telemetry
from orchestrator.results import ExploreResult, RunResult
from orchestrator.runs import run_lock
from orchestrator.state import Plan, RunState
from orchestrator.workspace.repo import repo_root
from orchestrator.workspace.worktree import Workspace, create_record_dir, new_run_id

Approver = Callable[[Plan], bool | Awaitable[bool]]
DATABASE_ENV = "ORCHESTRATE_DATABASE_URL"

__all__ = [
    "ExploreResult", "RunHandle", "RunResult", "aexplore", "aresume", "arun", "explore",
    "repo_root", "resume", "run", "start",
]


# --- run and resume ------------------------------------------------------------------------------


def _database_url(database_url: str | None, env: Mapping[str, str]) -> str | None:
    """An explicit URL, else ``ORCHESTRATE_DATABASE_URL`` from the run's environment."""
    return database_url or env.get(DATABASE_ENV) or None


async def arun(
    task: str,
    *,
    repo: str | os.PathLike[str] | None = None,
    roles: RoleMap | None = None,
    role_files: Sequence[str | os.PathLike[str]] = (),
    sets: Sequence[str] = (),
    team: str | None = None,
    env: Mapping[str, str] | None = None,
    listeners: Sequence[Listener] = (),
    include_dirty: bool = False,
    approve_plan: bool = False,
    approver: Approver | None = None,
    max_usd: float | None = None,
    max_tokens: int | None = None,
    quota_path: str | os.PathLike[str] | None = None,
    database_url: str | None = None,
    trust_repo_config: bool = False,
) -> RunResult:
    """Plan, explore, build, verify and review ``task`` in a worktree of ``repo``.

    With ``approve_plan`` the run pauses after planning: ``approver(plan)`` decides, or, with
    no approver, the result has status ``awaiting_approval`` and ``aresume`` continues it.
    ``trust_repo_config`` trusts the repository's own ``roles.toml`` for this run (see
    ``orchestrator.config.trust``); ``result.exit_code`` tells a clean success (0) from one that lost
    a role on the way (3).
    """
    if not task.strip():
        raise UsageError("the task is empty: say what should be done, e.g. 'fix the failing test'")
    top = repo_root(repo)
    env = dict(os.environ if env is None else env)
    role_map, registry = resolve_setup(top, roles, role_files, sets, team, env=env,
                                       trust_repo_config=trust_repo_config)
    pipeline = pipeline_of(role_map, registry)
    database_url = _database_url(database_url, env)
    relay = Relay()
    pool = build_pool(role_map, env, relay, quota_path=quota_path, max_usd=max_usd,
                      max_tokens=max_tokens, database_url=database_url)
    saving = AsyncExitStack()  # the checkpointer, open from before the worktree is made
    try:
        pool.check_credentials(pipeline.roles())
        await asyncio.to_thread(check_sandbox, role_map)
        # the checkpointer opens while the worktree is made (a new file's syncs to disk, a
        # database's connection); if opening it fails, the run says why as a run that stopped
        made, saver = await asyncio.gather(
            asyncio.to_thread(Workspace.create, top, new_run_id(), include_dirty=include_dirty),
            saving.enter_async_context(open_checkpointer(top, database_url)),
            return_exceptions=True)
        if isinstance(made, BaseException):
            raise made
        ws = made
    except BaseException:
        try:
            await saving.aclose()
        finally:
            await close_pool(pool)
        raise
    async with saving:
        write_run_file(ws, task, role_map, approve_plan=approve_plan, registry=registry)
        initial = RunState(task=task, max_attempts=role_map.run.max_attempts,
                           max_reviews=role_map.run.max_reviews, approve_plan=approve_plan)
        return await _drive(ws, task, role_map, pool, relay, env, listeners, initial, approver,
                            resumed=False, database_url=database_url, saver=saver)


async def aresume(
    run_id: str,
    *,
    repo: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    listeners: Sequence[Listener] = (),
    approve: bool | None = None,
    approver: Approver | None = None,
    max_usd: float | None = None,
    max_tokens: int | None = None,
    quota_path: str | os.PathLike[str] | None = None,
    database_url: str | None = None,
) -> RunResult:
    """Continue a run stopped by a crash, ``kill -9``, Ctrl-C, a budget or a plan approval.

    Finished nodes and finished explorers do not run again, and model calls that completed
    before the stop are answered from the run's journal instead of being paid for again.
    """
    top = repo_root(repo)
    # reattach=False: the worktree is rebuilt from the checkpoint before the graph resumes
    ws = await asyncio.to_thread(Workspace.open, top, run_id, reattach=False)
    task, role_map = read_run_file(ws.run_dir)
    pipeline = pipeline_of(role_map, run_registry(ws))
    env = dict(os.environ if env is None else env)
    database_url = _database_url(database_url, env)
    relay = Relay()
    pool = build_pool(role_map, env, relay, quota_path=quota_path, max_usd=max_usd,
                      max_tokens=max_tokens, database_url=database_url)
    try:
        pool.check_credentials(pipeline.roles())
        await asyncio.to_thread(check_sandbox, role_map)
    except BaseException:
        await close_pool(pool)
        raise
    if approve is not None:
        approver = lambda _plan: approve  # noqa: E731
    return await _drive(ws, task, role_map, pool, relay, env, listeners, None, approver,
                        resumed=True, database_url=database_url)


async def _drive(
    ws: Workspace,
    task: str,
    role_map: RoleMap,
    pool: ClientPool,
    relay: Relay,
    env: dict[str, str],
    listeners: Sequence[Listener],
    initial: RunState | None,
    approver: Approver | None,
    *,
    resumed: bool,
    database_url: str | None,
    saver: BaseCheckpointSaver | BaseException | None = None,
) -> RunResult:
    try:
        run = await OpenRun.open(ws, task, role_map, pool, relay, env, listeners,
                                 resumed=resumed, database_url=database_url)
    except BaseException:
        await close_pool(pool)
        raise
    try:
        final, pending = await _invoke(run.ctx, initial, approver, database_url, saver)
        return await run.finish(final, pending)
    except BaseException as exc:
        run.stop(exc)
        raise
    finally:
        await run.aclose()


async def _invoke(
    ctx: RunContext, initial: RunState | None, approver: Approver | None, database_url: str | None,
    saver: BaseCheckpointSaver | BaseException | None = None,
) -> tuple[RunState, bool]:
    """Run the graph to its end or to a pause; True in the result means a plan awaits approval.
    ``saver`` is the checkpointer opened ahead (or why opening it failed); None opens it here."""
    config: RunnableConfig = {
        "configurable": {"thread_id": ctx.run_id},
        "max_concurrency": _parallel(ctx.roles, ctx.pipeline),  # only explorers fan out
        "recursion_limit": 200,
    }
    opening = time.monotonic()
    async with AsyncExitStack() as stack:
        if isinstance(saver, BaseException):
            raise saver
        if saver is None:
            saver = await stack.enter_async_context(open_checkpointer(ctx.repo, database_url))
        app = _run_graph(ctx.pipeline).copy(update={"checkpointer": saver})
        ctx.telemetry.phases.add("setup", opening, time.monotonic())
        payload: Any = initial
        if initial is None:
            snapshot = await app.aget_state(config)
            if not snapshot.values:
                raise UsageError(f"run {ctx.run_id} has no checkpoint to resume from")
            await _restore_worktree(ctx, RunState.model_validate(snapshot.values))
            if snapshot.interrupts:
                payload = await _decide(approver, snapshot.values)
                if payload is None:
                    return RunState.model_validate(snapshot.values), True
        while True:
            try:
                with ctx.telemetry.recording():
                    out = await app.ainvoke(payload, config, context=ctx, durability="sync")
            except BudgetExhausted as exc:  # stop cleanly at the last checkpoint
                snapshot = await app.aget_state(config)
                state = RunState.model_validate(snapshot.values or initial)
                return state.model_copy(update={"reason": str(exc)}), False
            if "__interrupt__" not in out:
                return RunState.model_validate(out), False
            payload = await _decide(approver, out)
            if payload is None:
                values = {k: v for k, v in out.items() if k != "__interrupt__"}
                return RunState.model_validate(values), True


def _parallel(roles: RoleMap, pipeline: Pipeline) -> int:
    """Explorers in flight at once: the explore role's ``parallel``."""
    return roles.roles[pipeline.explore].parallel if pipeline.explore else 1


@functools.cache
def _run_graph(pipeline: Pipeline) -> Any:
    """The run graph of a pipeline, compiled once per process; each run copies it with its
    checkpointer."""
    return build_graph(pipeline, adapt=timed).compile()


@functools.cache
def _explore_graph(pipeline: Pipeline, split: bool) -> Any:
    """The explore graph, compiled once per process (it keeps no checkpoints)."""
    return build_explore_graph(pipeline, split=split, adapt=timed).compile()


async def _restore_worktree(ctx: RunContext, state: RunState) -> None:
    """Put the worktree back to what the last checkpoint saw, so the journal replays exactly."""
    ws = ctx.workspace
    if ws is None:
        return
    tree = state.worktree_tree or None
    await asyncio.to_thread(ws.restore, tree)
    ctx.telemetry.emit("worktree_restored", tree=tree or "start commit")


async def _decide(approver: Approver | None, values: Mapping[str, Any]) -> Command | None:
    if approver is None:
        return None
    plan = RunState.model_validate(
        {k: v for k, v in values.items() if k != "__interrupt__"}).plan
    decision = approver(plan)  # type: ignore[arg-type]
    if inspect.isawaitable(decision):
        decision = await decision
    return Command(resume=bool(decision))


def run(task: str, **kwargs: Any) -> RunResult:
    """Synchronous twin of :func:`arun`."""
    return asyncio.run(arun(task, **kwargs))


def resume(run_id: str, **kwargs: Any) -> RunResult:
    """Synchronous twin of :func:`aresume`."""
    return asyncio.run(aresume(run_id, **kwargs))


# --- streaming -----------------------------------------------------------------------------------


class RunHandle:
    """A run in progress: ``async for event in handle.events()``, then ``await handle.result()``."""

    def __init__(self, task: str, **kwargs: Any) -> None:
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        listeners = [*kwargs.pop("listeners", ()), self._queue.put_nowait]
        self._task = asyncio.ensure_future(self._run(task, listeners=listeners, **kwargs))

    async def _run(self, task: str, **kwargs: Any) -> RunResult:
        try:
            return await arun(task, **kwargs)
        finally:
            self._queue.put_nowait(None)

    async def events(self) -> AsyncIterator[Event]:
        """Every event of the run, in order, ending when the run ends (progress ticks skipped)."""
        while (event := await self._queue.get()) is not None:
            if event.kind != "progress":
                yield event

    async def result(self) -> RunResult:
        return await self._task


def start(task: str, **kwargs: Any) -> RunHandle:
    """Start :func:`arun` in the background (inside a running event loop) and stream its events."""
    return RunHandle(task, **kwargs)


# --- explore -------------------------------------------------------------------------------------


async def aexplore(
    question: str,
    *,
    repo: str | os.PathLike[str] | None = None,
    roles: RoleMap | None = None,
    role_files: Sequence[str | os.PathLike[str]] = (),
    sets: Sequence[str] = (),
    team: str | None = None,
    env: Mapping[str, str] | None = None,
    listeners: Sequence[Listener] = (),
    parallel: int | None = None,
    workdir: str | os.PathLike[str] | None = None,
    trust_repo_config: bool = False,
    split: bool = True,
) -> ExploreResult:
    """Split ``question`` and answer it with the explorer swarm; the checkout is only read.

    The run is recorded like ``run``'s, without a worktree or branch, in
    ``workspaces/<run-id>/`` (or ``workdir`` when given): ``events.jsonl`` as it happens,
    ``explorers.jsonl`` as each explorer finishes, paged tool outputs, and ``report.json`` at
    the end, so a run cut short still leaves what it found.

    ``split=False`` skips the planner: one explorer answers the question as asked (the
    explore bench measures explorers that way).
    """
    if not question.strip():
        raise UsageError("the question is empty")
    top = repo_root(repo)
    env = dict(os.environ if env is None else env)
    role_map, registry = resolve_setup(top, roles, role_files, sets, team, env=env,
                                       trust_repo_config=trust_repo_config)
    pipeline = pipeline_of(role_map, registry, need_build=False)
    if pipeline.explore is None:
        raise ConfigError(f"[pipeline] steps: explore needs an explore role "
                          f"(the pipeline is {pipeline.describe()})")
    if parallel:
        role_map = resolve_overrides(role_map, [f"{pipeline.explore}.parallel={parallel}"])
    relay = Relay()
    pool = build_pool(role_map, env, relay)
    try:
        explorers = (pipeline.roles(explore_only=True) if split
                     else (pipeline.explore,) if pipeline.explore else ())
        pool.check_credentials(explorers)
        run_id = new_run_id()
        if workdir:
            run_dir = Path(workdir)
            run_dir.mkdir(parents=True, exist_ok=True)
        else:
            run_dir = await asyncio.to_thread(create_record_dir, top, run_id, "explore")
    except BaseException:
        await close_pool(pool)
        raise
    write_explore_file(run_dir, question, role_map)
    with run_lock(run_dir):
        telemetry = Telemetry(run_id, log_path=run_dir / "events.jsonl",
                              listeners=tuple(listeners), env=env)
        relay.targets.append(telemetry_listener(telemetry))
        ctx = RunContext(
            run_id=run_id, roles=role_map, agents=registry, pool=pool,
            telemetry=telemetry, repo=top, worktree=top, run_dir=run_dir,
            base_commit="HEAD", env=env, pipeline=pipeline,
            repo_rules=repo_rules(DirSource(top).lines,
                                  max_tokens=role_map.run.repo_rules_tokens),
        )
        telemetry.emit("run_started", repo=str(top), mode="explore")
        try:
            app = _explore_graph(pipeline, split)
            preset = None if split else Plan(goal=question, steps=[], questions=[question])
            with telemetry.recording():
                out = await app.ainvoke(
                    RunState(task=question, mode="explore", plan=preset),
                    {"max_concurrency": _parallel(role_map, pipeline), "recursion_limit": 50},
                    context=ctx,
                )
            final = RunState.model_validate(out)
            result = _explore_result(question, top, run_dir, final, telemetry)
            problem = await asyncio.to_thread(record_claims, pool, run_id, result.explorers)
            if problem:
                telemetry.emit("warning", message=problem)
            (run_dir / "report.json").write_text(_explore_report(result, telemetry), "utf-8")
            return result
        except BaseException as exc:
            if is_final(exc):
                write_failure(run_dir, question, exc, telemetry, kind="explore")
            raise
        finally:
            telemetry.close()
            await close_pool(pool)


def _explore_result(question: str, top: Path, run_dir: Path, final: RunState,
                    telemetry: Telemetry) -> ExploreResult:
    explorers = sorted(final.explorers, key=lambda r: r.index)
    return ExploreResult(
        question=question, repo=str(top),
        sub_questions=list(final.plan.questions) if final.plan else [],
        explorers=explorers, digest=final.digest, claims_by_model=by_model(explorers),
        per_role=telemetry.per_role(), time_split=telemetry.time_split(),
        cost_usd=sum(c.cost_usd for c in telemetry.calls), run_id=telemetry.run_id,
        run_dir=str(run_dir), losses=list(telemetry.losses), warnings=run_warnings(telemetry),
    )


def _explore_report(result: ExploreResult, telemetry: Telemetry) -> str:
    """The explore run's ``report.json``: the result plus what ``runs`` and ``show`` read."""
    answered = result.exit_code != 1
    reason = (f"{sum(e.verified for e in result.explorers)} verified claim(s) from "
              f"{len(result.explorers)} explorer(s)" if answered else "no verified findings")
    telemetry.emit("run_finished", status="succeeded" if answered else "failed", reason=reason)
    report = result.model_dump(mode="json")
    report.update(kind="explore", task=result.question, branch="",
                  status="succeeded" if answered else "failed", reason=reason,
                  calls=[c.model_dump(mode="json") for c in telemetry.calls],
                  phases_s=phases_at(telemetry, result.time_split))
    return json.dumps(report, indent=2)


def explore(question: str, **kwargs: Any) -> ExploreResult:
    """Synchronous twin of :func:`aexplore`."""
    return asyncio.run(aexplore(question, **kwargs))
