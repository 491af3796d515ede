"""The library API: ``run`` / ``arun`` return a typed ``RunResult``; no printing, no exits.

The CLI is a thin shell over these functions, and CI bots call them directly. Dependencies are
parameters (repository, role map, environment, event listeners), so a test hands in the
simulator's URL and a temporary repository instead of patching anything.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .config import RoleMap, load_roles, merge_layers, parse_set, validate
from .definitions import load_agents
from .errors import UsageError
from .graph import build_explore_graph, build_graph
from .models.client import ClientPool
from .runtime import RunContext
from .state import ExplorerResult, Role, RunState, VerifyResult
from .runs import run_lock
from .store import sqlite_checkpointer
from .telemetry import Listener, Telemetry
from .tools.shell import isolation
from .workspace import Workspace, new_run_id

RUN_ROLES: tuple[Role, ...] = ("planner", "explorer", "builder", "reviewer")


class RunResult(BaseModel):
    """What a finished run produced, for people (the CLI's summary) and bots (``--json``)."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    task: str
    status: Literal["succeeded", "failed"]
    reason: str
    repo: str
    branch: str
    commit: str | None
    base_commit: str
    diff_stat: str
    tests: VerifyResult | None
    attempts: int
    review: dict[str, Any] | None
    explorers: list[ExplorerResult] = Field(default_factory=list)
    per_role: dict[str, dict[str, Any]] = Field(default_factory=dict)
    time_split: dict[str, float] = Field(default_factory=dict)
    cost_usd: float = 0.0
    policy_violations: int = 0
    warnings: list[str] = Field(default_factory=list)
    run_dir: str = ""
    included_dirty: bool = False
    dirty: bool = False
    isolation: str = "none"

    @property
    def exit_code(self) -> int:
        return 0 if self.status == "succeeded" else 1


def repo_root(path: str | os.PathLike[str] | None) -> Path:
    """The top level of the git repository at or above ``path``; a clear error otherwise."""
    start = Path(path or ".").resolve()
    if not start.exists():
        raise UsageError(f"repository path does not exist: {start}")
    proc = subprocess.run(
        ["git", "-C", str(start), "rev-parse", "--show-toplevel"],
        capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        raise UsageError(
            f"not a git repository: {start} (run inside a repository or pass --repo PATH)"
        )
    return Path(proc.stdout.strip())


def resolve_roles(
    repo: Path,
    roles: RoleMap | None,
    role_files: Sequence[str | os.PathLike[str]],
    sets: Sequence[str],
    team: str | None,
) -> RoleMap:
    if roles is not None:
        return roles
    return load_roles(repo=repo, files=[Path(f) for f in role_files], sets=sets, team=team)


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
) -> RunResult:
    """Plan, explore, build, verify and review ``task`` in a worktree of ``repo``."""
    if not task.strip():
        raise UsageError("the task is empty: say what should be done, e.g. 'fix the failing test'")
    top = repo_root(repo)
    env = dict(os.environ if env is None else env)
    role_map = resolve_roles(top, roles, role_files, sets, team)
    agents = load_agents(top)
    pool = ClientPool(role_map, env)
    pool.check_credentials(RUN_ROLES)
    run_id = new_run_id()
    ws = await asyncio.to_thread(Workspace.create, top, run_id, include_dirty=include_dirty)
    with run_lock(ws.run_dir):
        return await _run_in(ws, task, role_map, agents, pool, env, listeners)


async def _run_in(
    ws: Workspace,
    task: str,
    role_map: RoleMap,
    agents: dict,
    pool: ClientPool,
    env: dict[str, str],
    listeners: Sequence[Listener],
) -> RunResult:
    top, run_id = ws.repo, ws.run_id
    telemetry = Telemetry(
        run_id, log_path=ws.run_dir / "events.jsonl", listeners=tuple(listeners), env=env
    )
    ctx = RunContext(
        run_id=run_id, roles=role_map, agents=agents, pool=pool, telemetry=telemetry, repo=top,
        worktree=ws.worktree, run_dir=ws.run_dir, base_commit=ws.start_commit or ws.base_commit,
        env=env, workspace=ws,
    )
    telemetry.emit(
        "run_started", task=task, repo=str(top), branch=ws.branch, base_commit=ws.base_commit,
        dirty=ws.dirty, included_dirty=ws.included_dirty,
    )
    try:
        final = await _invoke(ctx, RunState(
            task=task,
            max_attempts=role_map.run.max_attempts,
            max_reviews=role_map.run.max_reviews,
        ))
        result = await asyncio.to_thread(_result, ctx, ws, final)
        (ws.run_dir / "report.json").write_text(_report_json(result, telemetry), encoding="utf-8")
        telemetry.emit("run_finished", status=result.status, reason=result.reason)
        return result
    finally:
        telemetry.close()
        await pool.aclose()


async def _invoke(ctx: RunContext, initial: RunState) -> RunState:
    async with sqlite_checkpointer(ctx.repo) as saver:
        app = build_graph().compile(checkpointer=saver)
        out = await app.ainvoke(
            initial,
            {
                "configurable": {"thread_id": ctx.run_id},
                "max_concurrency": max(2, ctx.roles.roles["explorer"].parallel),
                "recursion_limit": 200,
            },
            context=ctx,
            durability="sync",
        )
    return RunState.model_validate(out)


def _head_of(ws: Workspace) -> str | None:
    proc = subprocess.run(
        ["git", "-C", str(ws.repo), "rev-parse", "--verify", "-q", ws.branch],
        capture_output=True, text=True, check=False,
    )
    sha = proc.stdout.strip()
    return sha if sha and sha != ws.base_commit else None


def _result(ctx: RunContext, ws: Workspace, final: RunState) -> RunResult:
    t = ctx.telemetry
    warnings = [str(e.data.get("message")) for e in t.events if e.kind == "warning"]
    return RunResult(
        run_id=ctx.run_id,
        task=final.task,
        status="succeeded" if final.status == "succeeded" else "failed",
        reason=final.reason,
        repo=str(ctx.repo),
        branch=ws.branch,
        commit=_head_of(ws),
        base_commit=ws.base_commit,
        diff_stat=ws.diff_stat(),
        tests=final.verify,
        attempts=final.attempts,
        review=final.review.model_dump() if final.review else None,
        explorers=sorted(final.explorers, key=lambda r: r.index),
        per_role=t.per_role(),
        time_split=t.time_split(),
        cost_usd=sum(c.cost_usd for c in t.calls),
        policy_violations=t.counters.get("policy_violations", 0),
        warnings=warnings,
        run_dir=str(ws.run_dir),
        included_dirty=ws.included_dirty,
        dirty=ws.dirty,
        isolation=isolation(),
    )


def _report_json(result: RunResult, telemetry: Telemetry) -> str:
    report = result.model_dump(mode="json")
    report["calls"] = [c.model_dump(mode="json") for c in telemetry.calls]
    turns = max(1, len(telemetry.calls))
    split = result.time_split
    report["overhead_per_turn_ms"] = 1000 * split.get("orchestration_s", 0.0) / turns
    return json.dumps(report, indent=2)


def run(task: str, **kwargs: Any) -> RunResult:
    """Synchronous twin of :func:`arun`."""
    return asyncio.run(arun(task, **kwargs))


class ExploreResult(BaseModel):
    """The verified answer to a question about a repository."""

    model_config = ConfigDict(frozen=True)

    question: str
    repo: str
    sub_questions: list[str]
    explorers: list[ExplorerResult]
    digest: str
    per_role: dict[str, dict[str, Any]] = Field(default_factory=dict)
    time_split: dict[str, float] = Field(default_factory=dict)
    cost_usd: float = 0.0

    @property
    def failures(self) -> list[ExplorerResult]:
        return [e for e in self.explorers if e.error]


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
) -> ExploreResult:
    """Split ``question`` and answer it with the explorer swarm; writes nothing anywhere."""
    if not question.strip():
        raise UsageError("the question is empty")
    top = repo_root(repo)
    env = dict(os.environ if env is None else env)
    role_map = resolve_roles(top, roles, role_files, sets, team)
    if parallel:
        role_map = resolve_overrides(role_map, [f"explorer.parallel={parallel}"])
    pool = ClientPool(role_map, env)
    pool.check_credentials(("planner", "explorer"))
    telemetry = Telemetry(new_run_id(), listeners=tuple(listeners), env=env)
    ctx = RunContext(
        run_id=telemetry.run_id, roles=role_map, agents=load_agents(top), pool=pool,
        telemetry=telemetry, repo=top, worktree=top, run_dir=top, base_commit="HEAD", env=env,
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
        await pool.aclose()
    return ExploreResult(
        question=question,
        repo=str(top),
        sub_questions=list(final.plan.questions) if final.plan else [],
        explorers=sorted(final.explorers, key=lambda r: r.index),
        digest=final.digest,
        per_role=telemetry.per_role(),
        time_split=telemetry.time_split(),
        cost_usd=sum(c.cost_usd for c in telemetry.calls),
    )


def resolve_overrides(roles: RoleMap, sets: Sequence[str]) -> RoleMap:
    """Apply ``--set`` style overrides to an already resolved role map."""
    data = roles.model_dump(mode="json")
    merged, sources = merge_layers([("role map", data), *[(f"--set {s}", parse_set(s)) for s in sets]])
    return validate(merged, sources)


def explore(question: str, **kwargs: Any) -> ExploreResult:
    """Synchronous twin of :func:`aexplore`."""
    return asyncio.run(aexplore(question, **kwargs))
