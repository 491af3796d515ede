"""The library API: run, resume, explore, stream; the quota, the runs and the trust records.
Typed results; no printing, no exits.

The CLI, the MCP server and the fleet are thin shells over these functions, and CI bots call
them directly. What a run is given (repository, role map, environment, event listeners, an
approver, budgets) is a ``RunOptions``: pass its fields as keyword arguments, or the model as
``options=`` (keyword arguments then override its fields). A test hands in the simulator's URL
and a temporary repository instead of patching anything. Every run opens through
``lifecycle.open_run``.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from orchestrator.config import trust as trusting
from orchestrator.config.layers import read_layer, resolve_roles
from orchestrator.engine.lifecycle import open_run
from orchestrator.engine.options import DATABASE_ENV, Approver, RunOptions
from orchestrator.errors import OrchestrateError, UsageError
from orchestrator.models.quota import ClaimRow, QuotaRow, ledger_name
from orchestrator.record.telemetry import Event
from orchestrator.results import ExploreResult, RunResult
from orchestrator.runs import RunDetails, RunInfo, list_runs, run_details
from orchestrator.runs import apply as apply_run
from orchestrator.runs import clean as clean_runs
from orchestrator.workspace.repo import repo_root

if TYPE_CHECKING:
    from orchestrator.record.registry import RunRecord

# The engine (LangGraph, the OpenAI SDK, the Postgres drivers) is imported by the functions that
# drive a run or reach a model or database, not here: `runs`, `show`, `clean`, `apply` and
# `trust` (and the CLI's commands over them) answer without it, and so does a run that
# `open_run` refuses before it opens (a missing key, a bad role map: `engine/runplan.py`).

__all__ = [
    "DATABASE_ENV", "Approver", "ExploreResult", "QuotaReport", "RunHandle", "RunOptions",
    "RunResult", "aexplore", "apply", "aresume", "arun", "clean", "explore", "quota",
    "repo_root", "resolve_roles", "resume", "revoke_trust", "run", "runs", "show", "start",
    "trust", "trusted_repos",
]


# --- run and resume ------------------------------------------------------------------------------


async def arun(task: str, *, options: RunOptions | None = None, **kwargs: Any) -> RunResult:
    """Plan, explore, build, verify and review ``task`` in a worktree of ``repo``.

    Keyword arguments are ``RunOptions`` fields: ``repo``, ``roles``, ``role_files``, ``sets``,
    ``team``, ``env``, ``listeners``, ``include_dirty``, ``approve_plan``, ``approver``,
    ``max_usd``, ``max_tokens``, ``quota_path``, ``database_url``, ``trust_repo_config``.
    With ``approve_plan`` the run pauses after planning: ``approver(plan)`` decides, or, with
    no approver, the result has status ``awaiting_approval`` and ``aresume`` continues it.
    ``trust_repo_config`` trusts the repository's own ``roles.toml`` for this run (see
    ``orchestrator.config.trust``); ``result.exit_code`` tells a clean success (0) from one that
    lost a role on the way (3).
    """
    opts = RunOptions.given("run", options, kwargs)
    run = await open_run("run", opts, task)
    from orchestrator.engine.drive import drive_run
    async with run:
        final, pending = await drive_run(run, opts.approver)
        return await run.finish(final, pending)


async def aresume(run_id: str, *, options: RunOptions | None = None, **kwargs: Any) -> RunResult:
    """Continue a run stopped by a crash, ``kill -9``, Ctrl-C, a budget or a plan approval.

    Keyword arguments are ``RunOptions`` fields: ``repo``, ``env``, ``listeners``, ``approve``
    (the answer to a pending plan approval), ``approver``, ``max_usd``, ``max_tokens``,
    ``quota_path``, ``database_url``. Finished nodes and finished explorers do not run again,
    and model calls that completed before the stop are answered from the run's journal instead
    of being paid for again.
    """
    opts = RunOptions.given("resume", options, kwargs)
    approver = opts.approver
    if opts.approve is not None:
        answer = opts.approve
        approver = lambda _plan: answer  # noqa: E731
    run = await open_run("resume", opts, run_id=run_id)
    from orchestrator.engine.drive import drive_run
    async with run:
        final, pending = await drive_run(run, approver)
        return await run.finish(final, pending)


def run(task: str, *, options: RunOptions | None = None, **kwargs: Any) -> RunResult:
    """Synchronous twin of :func:`arun`."""
    return asyncio.run(arun(task, options=options, **kwargs))


def resume(run_id: str, *, options: RunOptions | None = None, **kwargs: Any) -> RunResult:
    """Synchronous twin of :func:`aresume`."""
    return asyncio.run(aresume(run_id, options=options, **kwargs))


# --- streaming -----------------------------------------------------------------------------------


class RunHandle:
    """A run in progress: ``async for event in handle.events()``, then ``await handle.result()``."""

    def __init__(self, task: str, *, options: RunOptions | None = None, **kwargs: Any) -> None:
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        opts = RunOptions.given("run", options, kwargs)
        opts = opts.model_copy(update={"listeners": (*opts.listeners, self._queue.put_nowait)})
        self._task = asyncio.ensure_future(self._run(task, opts))

    async def _run(self, task: str, options: RunOptions) -> RunResult:
        try:
            return await arun(task, options=options)
        finally:
            self._queue.put_nowait(None)

    async def events(self) -> AsyncIterator[Event]:
        """Every event of the run, in order, ending when the run ends (progress ticks skipped)."""
        while (event := await self._queue.get()) is not None:
            if event.kind != "progress":
                yield event

    async def result(self) -> RunResult:
        return await self._task


def start(task: str, *, options: RunOptions | None = None, **kwargs: Any) -> RunHandle:
    """Start :func:`arun` in the background (inside a running event loop) and stream its events."""
    return RunHandle(task, options=options, **kwargs)


# --- explore -------------------------------------------------------------------------------------


async def aexplore(question: str, *, options: RunOptions | None = None,
                   **kwargs: Any) -> ExploreResult:
    """Split ``question`` and answer it with the explorer swarm; the checkout is only read.

    Keyword arguments are ``RunOptions`` fields: ``repo``, ``roles``, ``role_files``, ``sets``,
    ``team``, ``env``, ``listeners``, ``parallel``, ``workdir``, ``trust_repo_config``,
    ``split``. The run is recorded like ``run``'s, without a worktree or branch, in
    ``workspaces/<run-id>/`` (or ``workdir`` when given): ``events.jsonl`` as it happens,
    ``explorers.jsonl`` as each explorer finishes, paged tool outputs, and ``report.json`` at
    the end, so a run cut short still leaves what it found.

    ``split=False`` skips the planner: one explorer answers the question as asked (the
    explore bench measures explorers that way).
    """
    opts = RunOptions.given("explore", options, kwargs)
    run = await open_run("explore", opts, question)
    from orchestrator.engine.drive import drive_explore
    async with run:
        return await run.answer(await drive_explore(run, split=opts.split))


def explore(question: str, *, options: RunOptions | None = None,
            **kwargs: Any) -> ExploreResult:
    """Synchronous twin of :func:`aexplore`."""
    return asyncio.run(aexplore(question, options=options, **kwargs))


# --- the quota -----------------------------------------------------------------------------------


class QuotaReport(BaseModel):
    """Today's use per model (tokens, USD, calls, daily cap, exhaustion) and the explorer
    models' claim record since ``days`` ago: what ``orchestrate quota`` shows."""

    model_config = ConfigDict(frozen=True)

    usage: list[QuotaRow]
    claims: list[ClaimRow]

    def document(self) -> dict[str, Any]:
        """As ``orchestrate quota --json`` prints it (times as text)."""
        return {"usage": [_text_times(asdict(r)) for r in self.usage],
                "claims": [_text_times(asdict(c)) for c in self.claims]}


def _text_times(row: dict[str, Any]) -> dict[str, Any]:
    return {k: str(v) if isinstance(v, datetime) else v for k, v in row.items()}


def quota(
    *,
    repo: str | os.PathLike[str] | None = None,
    role_files: Sequence[str | os.PathLike[str]] = (),
    sets: Sequence[str] = (),
    team: str | None = None,
    env: Mapping[str, str] | None = None,
    database_url: str | None = None,
    trust_repo_config: bool = False,
    days: int = 7,
) -> QuotaReport:
    """The quota ledger (the database's, else the user's file) for the role map's models, with
    each model's daily cap; ``repo`` defaults to the current directory's repository, if any."""
    from orchestrator.models.quota_pg import build_ledger

    env = dict(os.environ if env is None else env)
    top = repo_root(repo) if repo is not None else _maybe_repo()
    role_map = resolve_roles(top, None, role_files, sets, team, env=env,
                             trust_repo_config=trust_repo_config)
    models = [role_map.models[alias] for role in role_map.roles for alias in role_map.chain(role)]
    caps = {ledger_name(m.provider, m.id): m.quota_tokens_per_day for m in models}
    if days < 1:
        raise UsageError("--days must be at least 1")
    ledger = build_ledger(database_url or env.get(DATABASE_ENV) or None, env)
    try:
        since = datetime.now(UTC) - timedelta(days=days - 1)
        return QuotaReport(usage=ledger.rows(None, caps), claims=ledger.claim_rows(since))
    finally:
        ledger.close()


def _maybe_repo() -> Path | None:
    try:
        return repo_root(None)
    except OrchestrateError:
        return None


# --- runs after the fact -------------------------------------------------------------------------


def runs(*, repo: str | os.PathLike[str] | None = None) -> list[RunInfo]:
    """The runs of ``repo`` (default: the current directory's), oldest first."""
    return list_runs(repo_root(repo))


def shared_runs(*, database_url: str) -> list[RunRecord]:
    """Every run of the fleet sharing ``database_url`` (its registry), newest first, whichever
    machine ran it: id, state, branch, commit, host or worker, cost, times, job."""
    from orchestrator.record.database import require_postgres
    from orchestrator.record.registry import PostgresRegistry

    registry = PostgresRegistry(require_postgres(database_url))
    try:
        return registry.list()
    finally:
        registry.close()


def show(run_id: str, *, repo: str | os.PathLike[str] | None = None) -> RunDetails:
    """Everything recorded about one run: its report, sessions (context peaks, forks), calls."""
    return run_details(repo_root(repo), run_id)


def clean(*, repo: str | os.PathLike[str] | None = None) -> list[str]:
    """Remove the worktrees of finished runs (branches and artefacts stay); the run ids."""
    return clean_runs(repo_root(repo))


def apply(run_id: str, *, repo: str | os.PathLike[str] | None = None,
          allow: Sequence[str] = (), allow_git_config: bool = False,
          guard_ci: bool | None = None) -> str:
    """Merge a run's branch into the current branch (see ``runs.apply``); the merge commit.

    Changes to files that run by themselves are refused unless ``allow`` names each path."""
    return apply_run(repo_root(repo), run_id, allow=tuple(allow),
                     allow_git_config=allow_git_config, guard_ci=guard_ci)


# --- trust in a repository's own configuration ---------------------------------------------------


def trust(*, repo: str | os.PathLike[str] | None = None,
          env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Trust the repository's own roles.toml as it is now; what was trusted: each file's
    sha256 and protected settings, and the agent files the repository overrides."""
    user_dir = trusting.user_config_dir(os.environ if env is None else env)
    top = repo_root(repo)
    # what is shown is what is recorded: the bytes read once, hashed once
    layers = [read_layer(f, repo=True) for f in trusting.repo_config_files(top)]
    trusting.record_trust(user_dir, top, {Path(lay.name).name: lay.digest for lay in layers})
    files = [{"path": lay.name, "sha256": lay.digest,
              "protected": [{"key": k, "value": v}
                            for k, v in trusting.protected_settings(lay.data)]}
             for lay in layers]
    return {"repo": str(top), "files": files, "store": str(user_dir / trusting.TRUST_FILE),
            "agent_overrides": [str(a) for a in trusting.agent_overrides(top)]}


def revoke_trust(*, repo: str | os.PathLike[str] | None = None,
                 env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Forget the trust given to the repository; whether there was any."""
    user_dir = trusting.user_config_dir(os.environ if env is None else env)
    top = repo_root(repo)
    return {"repo": str(top), "revoked": trusting.revoke_trust(user_dir, top)}


def trusted_repos(*, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The repositories the user trusts, and where that is recorded."""
    user_dir = trusting.user_config_dir(os.environ if env is None else env)
    records = trusting.load_records(user_dir)
    return {"trusted": [asdict(r) for r in records.values()],
            "store": str(user_dir / trusting.TRUST_FILE)}

