"""What a run holds open while its graph runs, and how it ends.

``OpenRun`` takes the run lock and the registry entry, opens the telemetry and the call journal,
and assembles the ``RunContext`` that nodes receive; at the end it writes the result, the report
and the registry's verdict, then closes everything. The library API drives one around a local
graph; the platform graph (``platform.py``) rebuilds one inside its nodes, because live objects
cannot cross the platform's JSON boundary.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.config.definitions import Registry, load_registry
from orchestrator.config.pipeline import pipeline_of
from orchestrator.config.schema import RoleMap
from orchestrator.engine.runtime import RunContext
from orchestrator.errors import ConfigError, OrchestrateError, UsageError
from orchestrator.evidence.claimstats import UNKNOWN_MODEL, by_model, of_result
from orchestrator.evidence.verify import GitCommitSource
from orchestrator.localize.reporules import repo_rules
from orchestrator.models.budget import Budget
from orchestrator.models.journal import CallJournal, JournaledPool
from orchestrator.models.pool import ClientPool
from orchestrator.models.quota import QuotaLedger, WriteBehindLedger
from orchestrator.models.quota_pg import build_ledger
from orchestrator.models.routing import telemetry_listener
from orchestrator.record.events import Forked, Warned
from orchestrator.record.registry import new_record, open_registry
from orchestrator.record.telemetry import Listener, Telemetry
from orchestrator.results import EXIT_USAGE, RunResult
from orchestrator.runs import run_lock
from orchestrator.sandbox import Sandbox, build_sandbox, kill_leftovers, require_sandbox
from orchestrator.state import ExplorerResult, RunState
from orchestrator.workspace.worktree import Workspace

RUN_FILE = "run.json"
AGENTS_FILE = "agents.json"  # the run's agent definitions, so a resume sends the same prompts
COMMANDS_FILE = "commands.jsonl"  # commands running now, found and killed on resume


class Relay:
    """Routing events of a pool built before the run's telemetry exists, delivered to it later."""

    def __init__(self) -> None:
        self.targets: list[Callable[[Any], None]] = []

    def __call__(self, event: Any) -> None:
        for target in self.targets:
            target(event)


def build_pool(
    role_map: RoleMap,
    env: Mapping[str, str],
    relay: Relay,
    *,
    quota_path: str | os.PathLike[str] | None = None,
    max_usd: float | None = None,
    max_tokens: int | None = None,
    database_url: str | None = None,
) -> ClientPool:
    """Clients for every role, sharing the quota ledger (the user's, or the fleet's) and a budget."""
    if quota_path:
        ledger = WriteBehindLedger(QuotaLedger(Path(quota_path)))
    else:
        ledger = WriteBehindLedger(build_ledger(database_url, env))
    limited = max_usd is not None or max_tokens is not None  # 0 is a limit too
    budget = Budget(max_usd, max_tokens) if limited else None
    return ClientPool(role_map, env, ledger=ledger, budget=budget, listeners=[relay])


async def close_pool(pool: ClientPool) -> None:
    await pool.aclose()
    await asyncio.to_thread(pool.routing.ledger.close)  # writes out what is still queued


def write_run_file(ws: Workspace, task: str, role_map: RoleMap, *, approve_plan: bool,
                   registry: Registry) -> None:
    """What ``resume`` needs to rebuild a run: its task, its resolved role map and its agents."""
    (ws.run_dir / RUN_FILE).write_text(json.dumps({
        "task": task, "created": time.time(), "approve_plan": approve_plan,
        "roles": role_map.model_dump(mode="json"),
    }, indent=2), encoding="utf-8")
    (ws.run_dir / AGENTS_FILE).write_text(json.dumps(registry.snapshot(), indent=1),
                                          encoding="utf-8")


def run_registry(ws: Workspace) -> Registry:
    """The agent definitions a run started with (runs from before they were kept: the
    repository's as they are now)."""
    try:
        saved = json.loads((ws.run_dir / AGENTS_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return load_registry(ws.repo)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{ws.run_dir / AGENTS_FILE}: cannot read the run's agents ({exc})"
                          ) from None
    return Registry.from_snapshot(saved)


def check_sandbox(role_map: RoleMap) -> None:
    """Fail before any model is paid when builder commands could not be sandboxed here."""
    require_sandbox(role_map.sandbox)


def run_sandbox(ws: Workspace, role_map: RoleMap, env: Mapping[str, str]) -> Sandbox:
    """The sandbox for this run's worktree: it may write there and read the git objects."""
    return build_sandbox(role_map.sandbox, worktree=ws.worktree, read_only=ws.objects_dirs,
                         env=env, ledger=ws.run_dir / COMMANDS_FILE)


def write_explore_file(run_dir: Path, question: str, role_map: RoleMap) -> None:
    """``run.json`` of an ``explore`` run: listed with the runs, never resumed."""
    (run_dir / RUN_FILE).write_text(json.dumps({
        "kind": "explore", "task": question, "created": time.time(),
        "roles": role_map.model_dump(mode="json"),
    }, indent=2), encoding="utf-8")


def read_run_file(run_dir: Path) -> tuple[str, RoleMap]:
    """The task and role map a run started with; a usage error when there is no run.json."""
    try:
        saved = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise UsageError(f"run {run_dir.name} has no run.json; it cannot be resumed") from None
    if saved.get("kind") == "explore":
        raise UsageError(f"run {run_dir.name} is an `orchestrate explore` run: there is nothing "
                         "to resume (ask the question again)")
    return saved["task"], RoleMap.model_validate_json(json.dumps(saved["roles"]))


def is_final(exc: BaseException) -> bool:
    """A configuration error (a refused key, an unknown model): resuming would not help."""
    return isinstance(exc, OrchestrateError) and exc.exit_code == EXIT_USAGE


def write_failure(run_dir: Path, task: str, exc: BaseException, telemetry: Telemetry,
                  **extra: Any) -> None:
    """``report.json`` of a run that an error ended, so ``runs`` and ``show`` say why."""
    reason = " ".join(str(exc).split())
    telemetry.emit("run_finished", status="failed", reason=reason)
    report = {"run_id": telemetry.run_id, "task": task, "status": "failed", "reason": reason,
              "error": getattr(exc, "code", type(exc).__name__), **extra,
              "cost_usd": sum(c.cost_usd for c in telemetry.calls),
              "per_role": {role: usage.model_dump() for role, usage in telemetry.per_role().items()},
              "exit_code": getattr(exc, "exit_code", 1),
              "losses": [loss.model_dump() for loss in telemetry.losses],
              "calls": [c.model_dump(mode="json") for c in telemetry.calls]}
    (run_dir / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")


def run_warnings(telemetry: Telemetry) -> list[str]:
    """The run's warnings, the role sessions it lost included."""
    said = [e.message for e in telemetry.events if isinstance(e, Warned)]
    return said + [loss.message for loss in telemetry.losses]


class OpenRun:
    """One run's lock, registry entry, telemetry, journal, sandbox and client pool, and its
    ``RunContext``.

    ``OpenRun.open`` builds it in a worker thread (a file lock, SQLite files, the sandbox) and
    announces the run on the event loop: listeners are only ever called from the loop.
    ``aclose`` closes it and the pool; if building fails, the pool stays the caller's to close.
    """

    @classmethod
    async def open(cls, *args: Any, **kwargs: Any) -> OpenRun:
        run = await asyncio.to_thread(cls, *args, **kwargs)
        run.announce()
        return run

    def __init__(
        self,
        ws: Workspace,
        task: str,
        role_map: RoleMap,
        pool: ClientPool,
        relay: Relay,
        env: Mapping[str, str],
        listeners: Sequence[Listener] = (),
        *,
        resumed: bool,
        database_url: str | None = None,
    ) -> None:
        self.ws, self.pool, self.resumed, self._task = ws, pool, resumed, task
        self.leftovers = 0
        self._stack = ExitStack()
        try:
            self._stack.enter_context(run_lock(ws.run_dir))
            self.registry = self._stack.enter_context(open_registry(ws.repo, database_url))
            self.registry.record_start(new_record(ws.run_id, task, str(ws.repo), ws.branch))
            self.telemetry = Telemetry(ws.run_id, log_path=ws.run_dir / "events.jsonl",
                                       listeners=tuple(listeners), env=env)
            self._stack.callback(self.telemetry.close)
            with self.telemetry.busy("setup"):
                self._open_parts(role_map, pool, relay, env)
        except BaseException:
            self._stack.close()
            raise

    def _open_parts(self, role_map: RoleMap, pool: ClientPool, relay: Relay,
                    env: Mapping[str, str]) -> None:
        ws = self.ws
        relay.targets.append(telemetry_listener(self.telemetry))
        if self.resumed:
            self.telemetry.load_history(ws.run_dir / "events.jsonl")
            # before anything else: a command the dead process left running must not keep
            # writing into the worktree that is about to be restored
            self.leftovers = kill_leftovers(ws.run_dir / COMMANDS_FILE)
        self.journal = CallJournal(ws.run_dir / "journal.sqlite")
        self._stack.callback(self.journal.close)
        base = ws.start_commit or ws.base_commit
        citations = GitCommitSource(ws.repo, base, resolved=True)  # one reader for the run
        self._stack.callback(citations.close)
        # the repository's rules are read (a git process started, files read from it) while
        # the sandbox's mounts are planned (path work in Python): ~2 ms apart, ~2 ms together
        rules = ThreadPoolExecutor(max_workers=1, thread_name_prefix="repo-rules")
        reading = rules.submit(repo_rules, citations.lines,
                               max_tokens=role_map.run.repo_rules_tokens)
        rules.shutdown(wait=False)
        try:
            self.sandbox = sandbox = run_sandbox(ws, role_map, env)
        finally:
            wait([reading])
        self._stack.callback(sandbox.close)
        registry = run_registry(ws)
        self.ctx = RunContext(
            run_id=ws.run_id, roles=role_map, agents=registry,
            pool=JournaledPool(pool, self.journal), telemetry=self.telemetry, repo=ws.repo,
            worktree=ws.worktree, run_dir=ws.run_dir, base_commit=base, env=dict(env),
            workspace=ws, sandbox=sandbox, pipeline=pipeline_of(role_map, registry),
            repo_rules=reading.result(),
            citations=citations,
        )

    def announce(self) -> None:
        ws, info = self.ws, self.sandbox.info
        self.telemetry.emit("run_resumed" if self.resumed else "run_started", repo=str(ws.repo),
                            branch=ws.branch, base_commit=ws.base_commit, dirty=ws.dirty,
                            included_dirty=ws.included_dirty, sandbox=info.summary())
        if info.warning:
            self.telemetry.emit("warning", message=info.warning)
        if self.leftovers:
            self.telemetry.emit("warning", message=f"killed {self.leftovers} process(es) left "
                                "running by the interrupted run")

    async def finish(self, final: RunState, pending: bool) -> RunResult:
        """The run's result; ``pending`` means a plan awaits approval. Writes report.json."""
        with self.telemetry.busy("finish"):
            result = await asyncio.to_thread(_result, self.ctx, self.ws, final, pending,
                                             self.journal)
        self.telemetry.emit("run_finished", status=result.status, reason=result.reason)
        await asyncio.to_thread(self._record, result)
        return result

    def _record(self, result: RunResult) -> None:
        (self.ws.run_dir / "report.json").write_text(_report_json(result, self.telemetry), "utf-8")
        problem = record_claims(self.pool, self.ws.run_id, result.explorers)
        if problem:
            self.telemetry.emit("warning", message=problem)
        self.registry.record_finish(self.ws.run_id, result.status, result.reason,
                                    result.cost_usd, result.commit)

    def stop(self, exc: BaseException) -> None:
        """Record a run that ended without a result: ``failed`` (with a report) for a
        configuration error such as a refused key or an unknown model, else ``stopped`` (crash,
        Ctrl-C, cancellation, an outage), which ``resume`` continues."""
        spent = sum(c.cost_usd for c in self.telemetry.calls)
        failed = is_final(exc)
        if failed:
            write_failure(self.ws.run_dir, self._task, exc, self.telemetry, branch=self.ws.branch)
        self.registry.record_finish(self.ws.run_id, "failed" if failed else "stopped",
                                    " ".join(str(exc).split()) or type(exc).__name__, spent, None)

    async def aclose(self) -> None:
        """Close the pool, the sandbox, the journal, the telemetry and the registry; unlock."""
        try:
            await close_pool(self.pool)
        finally:
            await asyncio.to_thread(self._stack.close)  # SQLite files and a file lock


def _head_of(ws: Workspace) -> str | None:
    sha = ws.tip()
    return sha if sha and sha != ws.base_commit else None


def _committed(final: RunState) -> str | None:
    """The tree the report node committed (a finished run), else None: the worktree as it is."""
    return final.worktree_tree or None if final.status != "running" else None


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
        diff_stat=ws.diff_stat(_committed(final)), tests=final.verify, attempts=final.attempts,
        plan=final.plan, review=final.review, checks=dict(final.checks), races=list(final.races),
        explore_skipped=final.explore_skipped,
        explorers=sorted(final.explorers, key=lambda r: r.index),
        claims_by_model=by_model(sorted(final.explorers, key=lambda r: r.index)),
        known_tests=final.tests,
        per_role=t.per_role(), time_split=t.time_split(),
        cost_usd=sum(c.cost_usd for c in t.calls),
        policy_violations=t.counters.get("policy_violations", 0),
        warnings=run_warnings(t), losses=list(t.losses),
        forks=[e for e in t.events if isinstance(e, Forked)],
        run_dir=str(ws.run_dir), included_dirty=ws.included_dirty, dirty=ws.dirty,
        sandbox=ctx.sandbox.info if ctx.sandbox else None, replayed_calls=journal.replayed,
        paid_calls_repeated=journal.repeated,
    )


def record_claims(pool: ClientPool, run_id: str, explorers: Sequence[ExplorerResult]) -> str | None:
    """Each explorer's claim counts into the quota ledger's history, once per run and session
    (a resumed run replaces its rows), so `orchestrate quota` shows each model's record.
    Returns why that failed, if it did: history is never worth failing a finished run for."""
    now = datetime.now(UTC)
    try:
        for e in explorers:
            pool.routing.ledger.record_claims(run_id, f"explorer-{e.index + 1}",
                                              e.model or UNKNOWN_MODEL, of_result(e).model_dump(),
                                              now)
    except Exception as exc:  # sqlite3 / psycopg errors alike
        return f"explorer claim counts were not recorded in the quota ledger: {exc}"
    return None


def _report_json(result: RunResult, telemetry: Telemetry) -> str:
    report = result.model_dump(mode="json")
    report["calls"] = [c.model_dump(mode="json") for c in telemetry.calls]
    turns = max(1, len(telemetry.calls))
    report["overhead_per_turn_ms"] = 1000 * result.time_split.get("orchestration_s", 0.0) / turns
    report["phases_s"] = phases_at(telemetry, result.time_split)
    return json.dumps(report, indent=2)


def phases_at(telemetry: Telemetry, split: Mapping[str, float]) -> dict[str, float]:
    """Where the wall time of ``split`` went, per phase (``timing.py``), for ``report.json``."""
    end = telemetry.started + split.get("wall_s", 0.0)
    return {k: round(v, 6) for k, v in telemetry.phase_split(end).items()}
