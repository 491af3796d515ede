"""``OpenRun``: what a run holds open until it ends, and the run's files made before it
(``make_files``). ``lifecycle.open_run`` builds both once ``runplan.prepare`` has checked the
run; they need the checkpointer (LangGraph) and the client pool (the OpenAI SDK).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from types import TracebackType
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver

from orchestrator.engine.options import RunOptions, TreeHook
from orchestrator.engine.runfiles import (
    COMMANDS_FILE,
    explore_report,
    explore_result,
    is_final,
    record_claims,
    report_json,
    run_result,
    write_explore_file,
    write_failure,
    write_run_file,
)
from orchestrator.engine.runplan import Plan
from orchestrator.engine.runtime import RunContext
from orchestrator.evidence.verify import DirSource, GitCommitSource
from orchestrator.localize.reporules import repo_rules
from orchestrator.models.budget import Budget
from orchestrator.models.journal import CallJournal, JournaledPool
from orchestrator.models.journal_pg import PostgresJournal
from orchestrator.models.pool import ClientPool
from orchestrator.models.quota import WriteBehindLedger
from orchestrator.models.routing import telemetry_listener
from orchestrator.record.events import RunFinished, RunResumed, RunStarted, Warned
from orchestrator.record.registry import RunRegistry, new_record, open_registry
from orchestrator.record.store import open_checkpointer
from orchestrator.record.telemetry import Telemetry
from orchestrator.results import ExploreResult, RunResult
from orchestrator.runs import run_lock
from orchestrator.sandbox import Sandbox, build_sandbox, kill_leftovers
from orchestrator.state import RunState
from orchestrator.workspace.worktree import Bounds, Workspace, create_record_dir

# the run's checkpointer, why opening it failed (raised once the run can record it), or none
Saver = BaseCheckpointSaver | BaseException | None


async def make_files(plan: Plan, options: RunOptions, saving: AsyncExitStack) -> Saver:
    """The run's files, and its checkpointer (none for a platform node: the platform keeps the
    checkpoints): a new run's worktree, branch and run.json, an explore run's record."""
    if plan.mode == "explore":
        plan.run_dir = await asyncio.to_thread(_record_dir, plan, options.workdir)
        write_explore_file(plan.run_dir, plan.task, plan.role_map)
        return None
    making: Awaitable[Workspace | None] = _nothing() if plan.resumed else asyncio.to_thread(
        Workspace.create, plan.top, plan.run_id, include_dirty=options.include_dirty,
        bounds=Bounds(plan.role_map.run.max_result_mb, plan.role_map.run.max_result_files),
        probed=plan.probed)
    opening: Awaitable[BaseCheckpointSaver | None] = _nothing() if plan.mode == "node" else \
        saving.enter_async_context(open_checkpointer(plan.top, plan.database_url))
    # the checkpointer opens while the worktree is made (a new file's syncs to disk, a
    # database's connection); if opening it fails, the run says why as a run that stopped
    made, saver = await asyncio.gather(making, opening, return_exceptions=True)
    if isinstance(made, BaseException):
        raise made
    if options.before_checkpoint is not None and isinstance(saver, BaseCheckpointSaver):
        _announce_trees(saver, plan.run_id, options.before_checkpoint)
    if made is not None:
        plan.ws, plan.run_dir = made, made.run_dir
        write_run_file(made, plan.task, plan.role_map, approve_plan=options.approve_plan,
                       registry=plan.registry)
    return saver


def _announce_trees(saver: BaseCheckpointSaver, run_id: str, hook: TreeHook) -> None:
    """Await ``hook(run_id, tree)`` before a checkpoint with a new worktree tree is written, so
    whoever must restore that checkpoint can have its files first."""
    put, told = saver.aput, [""]

    async def aput(config: Any, checkpoint: Any, metadata: Any, versions: Any) -> Any:
        tree = str(checkpoint.get("channel_values", {}).get("worktree_tree") or "")
        if tree and tree != told[0]:
            await hook(run_id, tree)
            told[0] = tree
        return await put(config, checkpoint, metadata, versions)

    saver.aput = aput  # type: ignore[method-assign, assignment]


async def _nothing() -> None:
    return None


def _record_dir(plan: Plan, workdir: Path | None) -> Path:
    if workdir is None:
        return create_record_dir(plan.top, plan.run_id, "explore")
    workdir.mkdir(parents=True, exist_ok=True)
    return workdir


class OpenRun:
    """One run's lock, registry entry, telemetry, client pool, call journal, sandbox and
    checkpointer, and the ``RunContext`` its nodes receive (an explore run has no registry
    entry, journal, sandbox or checkpointer: it only reads the checkout).

    ``open_run`` builds it (the parts that touch files in a worker thread). ``async with run:``
    records an error that ends the block (``stop``) and closes everything (``aclose``);
    ``finish`` and ``answer`` write a run's and an explore run's result.
    """

    saver: Saver = None

    def __init__(self, plan: Plan, options: RunOptions, ledger: WriteBehindLedger) -> None:
        self.task, self.resumed = plan.task, plan.resumed
        self.ws, self.run_dir, self.approve_plan = plan.ws, plan.run_dir, options.approve_plan
        self.leftovers = 0
        self.ignored = plan.ignored
        self.registry: RunRegistry | None = None
        self.journal: CallJournal | None = None
        self.sandbox: Sandbox | None = None
        self.saving = AsyncExitStack()
        self._stack = ExitStack()
        try:
            self._stack.enter_context(run_lock(plan.run_dir))
            if plan.ws is not None:
                ws = plan.ws
                self.registry = self._stack.enter_context(open_registry(ws.repo,
                                                                        plan.database_url))
                self.registry.record_start(new_record(ws.run_id, self.task, str(ws.repo),
                                                      ws.branch))
            self.telemetry = Telemetry(plan.run_id, log_path=plan.run_dir / "events.jsonl",
                                       listeners=tuple(options.listeners), env=plan.env)
            self._stack.callback(self.telemetry.close)
            limited = options.max_usd is not None or options.max_tokens is not None  # 0 too
            # made once the telemetry is: its routing events (failed attempts, fallbacks) go there
            self.pool = ClientPool(
                plan.role_map, plan.env, ledger=ledger,
                budget=Budget(options.max_usd, options.max_tokens) if limited else None,
                listeners=[telemetry_listener(self.telemetry)])
            if plan.ws is None:
                self.ctx = self._explore_context(plan)
            else:
                with self.telemetry.busy("setup"):
                    self.ctx = self._run_context(plan, plan.ws)
        except BaseException:
            self._stack.close()
            raise

    def _run_context(self, plan: Plan, ws: Workspace) -> RunContext:
        if self.resumed:
            self.telemetry.load_history(ws.run_dir / "events.jsonl")
            # before anything else: a command the dead process left running must not keep
            # writing into the worktree that is about to be restored
            self.leftovers = kill_leftovers(ws.run_dir / COMMANDS_FILE)
        # with a shared database the journal is there, so any machine resumes the run exactly
        self.journal = journal = (PostgresJournal(plan.database_url, ws.run_id)
                                  if plan.database_url else
                                  CallJournal(ws.run_dir / "journal.sqlite"))
        self._stack.callback(journal.close)
        base = ws.start_commit or ws.base_commit
        citations = GitCommitSource(ws.repo, base, resolved=True)  # one reader for the run
        self._stack.callback(citations.close)
        # the repository's rules are read (a git process started, files read from it) on a
        # thread while the preflight's commands run, or when a prompt first needs them
        # (``RunContext.read_rules_ahead``, ``rules``)
        rules = functools.partial(repo_rules, citations.lines,
                                  max_tokens=plan.role_map.run.repo_rules_tokens)
        self.sandbox = sandbox = build_sandbox(
            plan.role_map.sandbox, worktree=ws.worktree, read_only=ws.objects_dirs,
            env=plan.env, ledger=ws.run_dir / COMMANDS_FILE)
        self._stack.callback(sandbox.close)
        return RunContext(
            run_id=ws.run_id, roles=plan.role_map, agents=plan.registry,
            pool=JournaledPool(self.pool, journal), telemetry=self.telemetry, repo=ws.repo,
            worktree=ws.worktree, run_dir=ws.run_dir, base_commit=base, env=dict(plan.env),
            workspace=ws, sandbox=sandbox, pipeline=plan.pipeline,
            repo_rules=rules, citations=citations,
        )

    def _explore_context(self, plan: Plan) -> RunContext:
        return RunContext(
            run_id=plan.run_id, roles=plan.role_map, agents=plan.registry, pool=self.pool,
            telemetry=self.telemetry, repo=plan.top, worktree=plan.top, run_dir=plan.run_dir,
            base_commit="HEAD", env=plan.env, pipeline=plan.pipeline,
            repo_rules=repo_rules(DirSource(plan.top).lines,
                                  max_tokens=plan.role_map.run.repo_rules_tokens),
        )

    def announce(self) -> None:
        ws = self.ws
        if ws is None:
            self.telemetry.emit(RunStarted(repo=str(self.ctx.repo), mode="explore"))
            self._warn_ignored()
            return
        info = self.sandbox.info if self.sandbox else None
        started = RunResumed if self.resumed else RunStarted
        self.telemetry.emit(started(repo=str(ws.repo), branch=ws.branch,
                                    base_commit=ws.base_commit, dirty=ws.dirty,
                                    included_dirty=ws.included_dirty,
                                    sandbox=info.summary() if info else ""))
        if info and info.warning:
            self.telemetry.emit(Warned(message=info.warning))
        if self.leftovers:
            self.telemetry.emit(Warned(message=f"killed {self.leftovers} process(es) left "
                                       "running by the interrupted run"))
        self._warn_ignored()

    def _warn_ignored(self) -> None:
        """Once per run: what an untrusted repository's files tried and were not let do."""
        for line in self.ignored:
            self.telemetry.emit(Warned(message=line, category="untrusted_repo"))

    def initial_state(self) -> RunState | None:
        """What a new run's graph starts from; None for a resumed run (its checkpoint)."""
        if self.resumed:
            return None
        settings = self.ctx.roles.run
        return RunState(task=self.task, max_attempts=settings.max_attempts,
                        max_reviews=settings.max_reviews, approve_plan=self.approve_plan)

    async def finish(self, final: RunState, pending: bool) -> RunResult:
        """The run's result; ``pending`` means a plan awaits approval. Writes report.json."""
        assert self.ws is not None and self.journal is not None  # an explore run: ``answer``
        with self.telemetry.busy("finish"):
            result = await asyncio.to_thread(run_result, self.ctx, self.ws, final, pending,
                                             self.journal)
        self.telemetry.emit(RunFinished(status=result.status, reason=result.reason))
        await asyncio.to_thread(self._record, result)
        return result

    def _record(self, result: RunResult) -> None:
        (self.run_dir / "report.json").write_text(report_json(result, self.telemetry), "utf-8")
        problem = record_claims(self.pool, result.run_id, result.explorers,
                                role=self.ctx.pipeline.explore)
        if problem:
            self.telemetry.emit(Warned(message=problem))
        assert self.registry is not None
        self.registry.record_finish(result.run_id, result.status, result.reason,
                                    result.cost_usd, result.commit)

    async def answer(self, final: RunState) -> ExploreResult:
        """An explore run's result; writes report.json, so a run cut short leaves its findings."""
        result = explore_result(self.ctx, final)
        problem = await asyncio.to_thread(record_claims, self.pool, result.run_id,
                                          result.explorers, role=self.ctx.pipeline.explore)
        if problem:
            self.telemetry.emit(Warned(message=problem))
        (self.run_dir / "report.json").write_text(explore_report(result, self.telemetry),
                                                  "utf-8")
        return result

    def stop(self, exc: BaseException) -> None:
        """Record a run that ended without a result: ``failed`` (with a report) for a
        configuration error such as a refused key or an unknown model, else ``stopped`` (crash,
        Ctrl-C, cancellation, an outage), which ``resume`` continues. An explore run keeps a
        report only of the first kind (it is never resumed)."""
        failed = is_final(exc)
        if self.ws is None:
            if failed:
                write_failure(self.run_dir, self.task, exc, self.telemetry, kind="explore")
            return
        spent = sum(c.cost_usd for c in self.telemetry.calls)
        if failed:
            write_failure(self.run_dir, self.task, exc, self.telemetry, branch=self.ws.branch)
        assert self.registry is not None
        self.registry.record_finish(self.ws.run_id, "failed" if failed else "stopped",
                                    " ".join(str(exc).split()) or type(exc).__name__, spent, None)

    async def aclose(self) -> None:
        """Close the pool, the sandbox, the journal, the telemetry, the registry and the
        checkpointer; unlock."""
        try:
            if getattr(self, "ctx", None) is not None:
                self.ctx.ahead.close()  # a call asked ahead that nobody used
            await self.pool.aclose()
            await asyncio.to_thread(self.pool.routing.ledger.close)  # writes out what is queued
        finally:
            try:
                await asyncio.to_thread(self._stack.close)  # SQLite files and a file lock
            finally:
                await self.saving.aclose()

    async def __aenter__(self) -> OpenRun:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        try:
            if exc is not None:
                self.stop(exc)
        finally:
            await self.aclose()

