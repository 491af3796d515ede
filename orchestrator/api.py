"""The library API: run, resume, explore, stream. Typed results; no printing, no exits.

The CLI, the MCP server and the fleet are thin shells over these functions, and CI bots call
them directly. What a run is given (repository, role map, environment, event listeners, an
approver, budgets) is a ``RunOptions``: pass its fields as keyword arguments, or the model as
``options=`` (keyword arguments then override its fields). A test hands in the simulator's URL
and a temporary repository instead of patching anything. Every run opens through
``lifecycle.open_run``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from orchestrator.config.schema import resolve_roles
from orchestrator.engine.drive import drive_explore, drive_run
from orchestrator.engine.lifecycle import open_run
from orchestrator.engine.options import DATABASE_ENV, Approver, RunOptions
from orchestrator.record.telemetry import Event
from orchestrator.results import ExploreResult, RunResult
from orchestrator.workspace.repo import repo_root

__all__ = [
    "DATABASE_ENV", "Approver", "ExploreResult", "RunHandle", "RunOptions", "RunResult",
    "aexplore", "aresume", "arun", "explore", "repo_root", "resolve_roles", "resume", "run",
    "start",
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
    async with run:
        return await run.answer(await drive_explore(run, split=opts.split))


def explore(question: str, *, options: RunOptions | None = None,
            **kwargs: Any) -> ExploreResult:
    """Synchronous twin of :func:`aexplore`."""
    return asyncio.run(aexplore(question, options=options, **kwargs))
