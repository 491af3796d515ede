"""The library API: run, resume, explore, stream. Typed results; no printing, no exits.

The CLI is a thin shell over these functions, and CI bots call them directly. Dependencies are
parameters (repository, role map, environment, event listeners, an approver), so a test hands
in the simulator's URL and a temporary repository instead of patching anything.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from .config import RoleMap, load_roles, merge_layers, parse_set, validate
from .definitions import load_agents
from .errors import BudgetExhausted, UsageError
from .gitsafe import git
from .graph import build_explore_graph, build_graph
from .journal import CallJournal, JournaledPool
from .models.budget import Budget
from .models.client import ClientPool
from .models.quota import QuotaLedger
from .models.quota_pg import build_ledger
from .models.routing import telemetry_listener
from .registry import new_record, open_registry
from .results import ExploreResult, RunResult
from .runs import run_lock
from .runtime import RunContext
from .sandbox import Sandbox, build_sandbox, kill_leftovers, require_sandbox
from .state import Plan, Role, RunState
from .store import open_checkpointer
from .telemetry import Event, Listener, Telemetry
from .workspace import Workspace, new_run_id

RUN_ROLES: tuple[Role, ...] = ("planner", "explorer", "builder", "reviewer")
Approver = Callable[[Plan], bool | Awaitable[bool]]
RUN_FILE = "run.json"
COMMANDS_FILE = "commands.jsonl"  # commands running now, found and killed on resume
DATABASE_ENV = "ORCHESTRATE_DATABASE_URL"

__all__ = [
    "ExploreResult", "RunHandle", "RunResult", "aexplore", "aresume", "arun", "explore",
    "repo_root", "resume", "run", "start",
]


def repo_root(path: str | os.PathLike[str] | None) -> Path:
    """The top level of the git repository at or above ``path``; a clear error otherwise."""
    start_at = Path(path or ".").resolve()
    if not start_at.exists():
        raise UsageError(f"repository path does not exist: {start_at}")
    proc = git("rev-parse", "--show-toplevel", cwd=start_at if start_at.is_dir() else start_at.parent,
               check=False)
    if proc.returncode != 0:
        raise UsageError(
            f"not a git repository: {start_at} (run inside a repository or pass --repo PATH)"
        )
    return Path(proc.stdout.strip())


def resolve_roles(
    repo: Path | None,
    roles: RoleMap | None,
    role_files: Sequence[str | os.PathLike[str]] = (),
    sets: Sequence[str] = (),
    team: str | None = None,
) -> RoleMap:
    """The role map of a run: the one given, or the layers merged (see config.load_roles)."""
    if roles is not None:
        return resolve_overrides(roles, sets) if sets else roles
    return load_roles(repo=repo, files=[Path(f) for f in role_files], sets=sets, team=team)


def resolve_overrides(roles: RoleMap, sets: Sequence[str]) -> RoleMap:
    """Apply ``--set`` style overrides to an already resolved role map."""
    data = roles.model_dump(mode="json")
    layers = [("role map", data), *[(f"--set {s}", parse_set(s)) for s in sets]]
    merged, sources = merge_layers(layers)
    return validate(merged, sources)


# --- run and resume ------------------------------------------------------------------------------


class _Relay:
    """Routing events of a pool built before the run's telemetry exists, delivered to it later."""

    def __init__(self) -> None:
        self.targets: list[Callable[[Any], None]] = []

    def __call__(self, event: Any) -> None:
        for target in self.targets:
            target(event)


def _database_url(database_url: str | None, env: Mapping[str, str]) -> str | None:
    """An explicit URL, else ``ORCHESTRATE_DATABASE_URL`` from the run's environment."""
    return database_url or env.get(DATABASE_ENV) or None


def _pool(
    role_map: RoleMap,
    env: Mapping[str, str],
    relay: _Relay,
    *,
    quota_path: str | os.PathLike[str] | None,
    max_usd: float | None,
    max_tokens: int | None,
    database_url: str | None = None,
) -> ClientPool:
    """Clients for every role, sharing the quota ledger (the user's, or the fleet's) and a budget."""
    if quota_path:
        ledger: Any = QuotaLedger(Path(quota_path))
    else:
        ledger = build_ledger(database_url, env)
    limited = max_usd is not None or max_tokens is not None  # 0 is a limit too
    budget = Budget(max_usd, max_tokens) if limited else None
    return ClientPool(role_map, env, ledger=ledger, budget=budget, listeners=[relay])


async def _close(pool: ClientPool) -> None:
    await pool.aclose()
    pool.routing.ledger.close()


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
) -> RunResult:
    """Plan, explore, build, verify and review ``task`` in a worktree of ``repo``.

    With ``approve_plan`` the run pauses after planning: ``approver(plan)`` decides, or, with
    no approver, the result has status ``awaiting_approval`` and ``aresume`` continues it.
    """
    if not task.strip():
        raise UsageError("the task is empty: say what should be done, e.g. 'fix the failing test'")
    top = repo_root(repo)
    env = dict(os.environ if env is None else env)
    role_map = resolve_roles(top, roles, role_files, sets, team)
    database_url = _database_url(database_url, env)
    relay = _Relay()
    pool = _pool(role_map, env, relay, quota_path=quota_path, max_usd=max_usd,
                 max_tokens=max_tokens, database_url=database_url)
    try:
        pool.check_credentials(RUN_ROLES)
        await asyncio.to_thread(check_sandbox, role_map)
        ws = await asyncio.to_thread(Workspace.create, top, new_run_id(),
                                     include_dirty=include_dirty)
    except BaseException:
        await _close(pool)
        raise
    (ws.run_dir / RUN_FILE).write_text(json.dumps({
        "task": task, "created": time.time(), "approve_plan": approve_plan,
        "roles": role_map.model_dump(mode="json"),
    }, indent=2), encoding="utf-8")
    initial = RunState(task=task, max_attempts=role_map.run.max_attempts,
                       max_reviews=role_map.run.max_reviews, approve_plan=approve_plan)
    return await _drive(ws, task, role_map, pool, relay, env, listeners, initial, approver,
                        resumed=False, database_url=database_url)


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
    ws = await asyncio.to_thread(Workspace.open, top, run_id, reattach=False)
    try:
        saved = json.loads((ws.run_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise UsageError(f"run {run_id} has no run.json; it cannot be resumed") from None
    role_map = RoleMap.model_validate_json(json.dumps(saved["roles"]))
    env = dict(os.environ if env is None else env)
    database_url = _database_url(database_url, env)
    relay = _Relay()
    pool = _pool(role_map, env, relay, quota_path=quota_path, max_usd=max_usd,
                 max_tokens=max_tokens, database_url=database_url)
    try:
        pool.check_credentials(RUN_ROLES)
        await asyncio.to_thread(check_sandbox, role_map)
    except BaseException:
        await _close(pool)
        raise
    if approve is not None:
        approver = lambda _plan: approve  # noqa: E731
    return await _drive(ws, saved["task"], role_map, pool, relay, env, listeners, None, approver,
                        resumed=True, database_url=database_url)


async def _drive(
    ws: Workspace,
    task: str,
    role_map: RoleMap,
    pool: ClientPool,
    relay: _Relay,
    env: dict[str, str],
    listeners: Sequence[Listener],
    initial: RunState | None,
    approver: Approver | None,
    *,
    resumed: bool,
    database_url: str | None,
) -> RunResult:
    with run_lock(ws.run_dir), open_registry(ws.repo, database_url) as registry:
        registry.record_start(new_record(ws.run_id, task, str(ws.repo), ws.branch))
        telemetry = Telemetry(ws.run_id, log_path=ws.run_dir / "events.jsonl",
                              listeners=tuple(listeners), env=env)
        relay.targets.append(telemetry_listener(telemetry))
        if resumed:
            telemetry.load_history(ws.run_dir / "events.jsonl")
            # before anything else: a command the dead process left running must not keep
            # writing into the worktree that is about to be restored
            killed = await asyncio.to_thread(kill_leftovers, ws.run_dir / COMMANDS_FILE)
            if killed:
                telemetry.emit("warning", message=f"killed {killed} process(es) left running "
                               "by the interrupted run")
        journal = CallJournal(ws.run_dir / "journal.sqlite")
        sandbox = await asyncio.to_thread(run_sandbox, ws, role_map, env)
        ctx = RunContext(
            run_id=ws.run_id, roles=role_map, agents=load_agents(ws.repo),
            pool=JournaledPool(pool, journal), telemetry=telemetry, repo=ws.repo,
            worktree=ws.worktree, run_dir=ws.run_dir,
            base_commit=ws.start_commit or ws.base_commit, env=env, workspace=ws,
            sandbox=sandbox,
        )
        telemetry.emit("run_resumed" if resumed else "run_started", repo=str(ws.repo),
                       branch=ws.branch, base_commit=ws.base_commit, dirty=ws.dirty,
                       included_dirty=ws.included_dirty, sandbox=sandbox.info.summary())
        if sandbox.info.warning:
            telemetry.emit("warning", message=sandbox.info.warning)
        try:
            final, pending = await _invoke(ctx, initial, approver, database_url)
            result = await asyncio.to_thread(_result, ctx, ws, final, pending, journal)
            telemetry.emit("run_finished", status=result.status, reason=result.reason)
            (ws.run_dir / "report.json").write_text(_report_json(result, telemetry), "utf-8")
            registry.record_finish(ws.run_id, result.status, result.reason, result.cost_usd,
                                   result.commit)
            return result
        except BaseException as exc:
            spent = sum(c.cost_usd for c in telemetry.calls)
            registry.record_finish(ws.run_id, "stopped", str(exc) or type(exc).__name__, spent, None)
            raise
        finally:
            journal.close()
            telemetry.close()
            sandbox.close()
            await _close(pool)


async def _invoke(
    ctx: RunContext, initial: RunState | None, approver: Approver | None, database_url: str | None
) -> tuple[RunState, bool]:
    """Run the graph to its end or to a pause; True in the result means a plan awaits approval."""
    config: RunnableConfig = {
        "configurable": {"thread_id": ctx.run_id},
        "max_concurrency": ctx.roles.roles["explorer"].parallel,  # only explorers fan out
        "recursion_limit": 200,
    }
    async with open_checkpointer(ctx.repo, database_url) as saver:
        app = build_graph().compile(checkpointer=saver)
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


def check_sandbox(role_map: RoleMap) -> None:
    """Fail before any model is paid when builder commands could not be sandboxed here."""
    require_sandbox(role_map.sandbox)


def run_sandbox(ws: Workspace, role_map: RoleMap, env: Mapping[str, str]) -> Sandbox:
    """The sandbox for this run's worktree: it may write there and read the git objects."""
    return build_sandbox(role_map.sandbox, worktree=ws.worktree, read_only=ws.objects_dirs,
                         env=env, ledger=ws.run_dir / COMMANDS_FILE)


def _head_of(ws: Workspace) -> str | None:
    sha = ws.tip()
    return sha if sha and sha != ws.base_commit else None


def _result(
    ctx: RunContext, ws: Workspace, final: RunState, pending: bool, journal: CallJournal
) -> RunResult:
    t = ctx.telemetry
    if pending:
        status, reason = "awaiting_approval", f"the plan awaits approval: orchestrate resume {ws.run_id} --approve (or --reject)"
    elif final.status == "running":
        status, reason = "stopped", final.reason or "the run stopped before its end"
    else:
        status, reason = final.status, final.reason
    return RunResult(
        run_id=ctx.run_id, task=final.task, status=status, reason=reason, repo=str(ctx.repo),
        branch=ws.branch, commit=_head_of(ws), base_commit=ws.base_commit,
        diff_stat=ws.diff_stat(), tests=final.verify, attempts=final.attempts, plan=final.plan,
        review=final.review.model_dump() if final.review else None,
        explorers=sorted(final.explorers, key=lambda r: r.index),
        per_role=t.per_role(), time_split=t.time_split(),
        cost_usd=sum(c.cost_usd for c in t.calls),
        policy_violations=t.counters.get("policy_violations", 0),
        warnings=[str(e.data.get("message")) for e in t.events if e.kind == "warning"],
        forks=[dict(e.data, session=e.session, role=e.role) for e in t.events if e.kind == "fork"],
        run_dir=str(ws.run_dir), included_dirty=ws.included_dirty, dirty=ws.dirty,
        sandbox=ctx.sandbox.info if ctx.sandbox else None, replayed_calls=journal.replayed,
        paid_calls_repeated=journal.repeated,
    )


def _report_json(result: RunResult, telemetry: Telemetry) -> str:
    report = result.model_dump(mode="json")
    report["calls"] = [c.model_dump(mode="json") for c in telemetry.calls]
    turns = max(1, len(telemetry.calls))
    report["overhead_per_turn_ms"] = 1000 * result.time_split.get("orchestration_s", 0.0) / turns
    return json.dumps(report, indent=2)


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
) -> ExploreResult:
    """Split ``question`` and answer it with the explorer swarm; nothing is written to the repo.

    Paged tool outputs and fork transcripts go to ``workdir`` when given (kept), else to a
    temporary directory removed at the end.
    """
    if not question.strip():
        raise UsageError("the question is empty")
    top = repo_root(repo)
    env = dict(os.environ if env is None else env)
    role_map = resolve_roles(top, roles, role_files, sets, team)
    if parallel:
        role_map = resolve_overrides(role_map, [f"explorer.parallel={parallel}"])
    telemetry = Telemetry(new_run_id(), listeners=tuple(listeners), env=env)
    relay = _Relay()
    relay.targets.append(telemetry_listener(telemetry))
    pool = _pool(role_map, env, relay, quota_path=None, max_usd=None, max_tokens=None)
    pool.check_credentials(("planner", "explorer"))
    # paged tool outputs and fork transcripts need a home; never the user's repository
    scratch = None if workdir else tempfile.TemporaryDirectory(prefix="orchestrate-explore-")
    run_dir = Path(workdir) if workdir else Path(scratch.name)  # type: ignore[union-attr]
    ctx = RunContext(
        run_id=telemetry.run_id, roles=role_map, agents=load_agents(top), pool=pool,
        telemetry=telemetry, repo=top, worktree=top, run_dir=run_dir,
        base_commit="HEAD", env=env,
    )
    try:
        app = build_explore_graph().compile()
        out = await app.ainvoke(
            RunState(task=question, mode="explore"),
            {"max_concurrency": role_map.roles["explorer"].parallel, "recursion_limit": 50},
            context=ctx,
        )
        final = RunState.model_validate(out)
    finally:
        telemetry.close()
        await _close(pool)
        if scratch is not None:
            scratch.cleanup()
    return ExploreResult(
        question=question, repo=str(top),
        sub_questions=list(final.plan.questions) if final.plan else [],
        explorers=sorted(final.explorers, key=lambda r: r.index), digest=final.digest,
        per_role=telemetry.per_role(), time_split=telemetry.time_split(),
        cost_usd=sum(c.cost_usd for c in telemetry.calls),
    )


def explore(question: str, **kwargs: Any) -> ExploreResult:
    """Synchronous twin of :func:`aexplore`."""
    return asyncio.run(aexplore(question, **kwargs))
