"""Speed buys attempts: k candidate builds race, each in a worktree and sandbox of its own.

A build role with ``parallel = k`` (> 1) runs k sessions of the same task at once, candidate i
sampling at ``temperatures[i % len]``. Each candidate's acceptance commands run in its own
worktree as soon as it submits. With ``pick = "first"`` the first candidate whose commands pass
wins and the others are cancelled (their model calls and sandboxed commands stopped); with
``pick = "smallest"`` every candidate finishes and the passing one with the smallest change
wins. The winner's files become the run's worktree; the ``verify`` step then judges them there
again, so the result never rests on a candidate's word. When none passes, the candidate with the
fewest failing commands (candidate 1 on a tie) is kept and the failure feeds the next round.

Candidate 1 is the session a single build would be (``builder-N``); the others are
``builder-N-c2`` ... so a resumed race replays every candidate's calls from the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace

from orchestrator.engine.acceptance import run_checks
from orchestrator.engine.runtime import RunContext
from orchestrator.errors import BudgetExhausted, OrchestrateError
from orchestrator.models.errors import ModelRefused
from orchestrator.record.events import CandidateFinished, RaceFinished
from orchestrator.sandbox import build_sandbox
from orchestrator.session.account import SessionOutcome
from orchestrator.state import Candidate, CandidateStatus, CheckResult, Race, Role
from orchestrator.tools.shell import CommandPolicy
from orchestrator.workspace.worktree import Workspace

# runs one candidate's session: (context, candidate index, temperature) -> outcome
SessionRunner = Callable[[RunContext, int, float | None], Awaitable[SessionOutcome]]
FATAL = (BudgetExhausted, ModelRefused)  # these stop the run, not just one candidate


@dataclass
class CandidateRun:
    """One candidate while it runs: its worktree, sandbox and, when done, its result."""

    index: int
    temperature: float | None
    session: str
    ws: Workspace
    ctx: RunContext
    started: float
    outcome: SessionOutcome | None = None
    checks: list[CheckResult] | None = None
    tree: str = ""
    size: tuple[int, int] = (0, 0)
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.checks is not None and all(c.exit_code == 0 for c in self.checks)

    def record(self, status: CandidateStatus) -> Candidate:
        files, lines = self.size
        failing = [c.command for c in self.checks or [] if c.exit_code]
        return Candidate(index=self.index, session=self.session, temperature=self.temperature,
                         status=status,
                         duration_s=round(time.monotonic() - self.started, 3),
                         files_changed=files, diff_lines=lines, failing=failing,
                         error=self.error)


def temperature_of(temperatures: tuple[float, ...], index: int) -> float | None:
    """Candidate ``index``'s (1-based) sampling temperature; None: the model's own."""
    return temperatures[(index - 1) % len(temperatures)] if temperatures else None


def session_of(role: Role, n: int, index: int) -> str:
    """``builder-2`` for candidate 1 (what a single build is called), ``builder-2-c3`` after."""
    return f"{role}-{n}" if index == 1 else f"{role}-{n}-c{index}"


async def race(ctx: RunContext, role: Role, n: int, *, commands: list[str],
               policy: CommandPolicy, session: SessionRunner,
               protected: frozenset[str] = frozenset()) -> tuple[Race, SessionOutcome]:
    """Race the role's k candidates for build round ``n``; the winner's files end up in
    ``ctx.worktree``. Returns the race's record and the kept candidate's session outcome."""
    spec = ctx.roles.roles[role]
    assert ctx.workspace is not None, "a race needs the run's workspace"
    main = ctx.workspace
    started = time.monotonic()
    tree = await asyncio.to_thread(main.snapshot)
    runs = [await prepare(ctx, role, n, i, tree, spec.temperatures) for i in
            range(1, spec.parallel + 1)]
    tasks = {asyncio.create_task(attempt(r, commands, policy, session, sorted(protected))): r
             for r in runs}
    winner: CandidateRun | None = None
    statuses: dict[int, CandidateStatus] = {}
    try:
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                run = tasks[task]
                exc = task.exception()
                if isinstance(exc, FATAL):
                    raise exc
                if exc is not None:
                    run.error = " ".join(str(exc).split())[:500] or type(exc).__name__
                statuses[run.index] = "passed" if run.passed else (
                    "error" if run.error else "failed")
                _announce(ctx, role, run, statuses[run.index])
            if spec.pick == "first":
                passed = [tasks[t] for t in done if tasks[t].passed]
                if passed:
                    winner = min(passed, key=lambda r: r.index)
                    break
    finally:
        for task, run in tasks.items():
            if not task.done():
                task.cancel()
                statuses[run.index] = "cancelled"
        await asyncio.gather(*tasks, return_exceptions=True)
        for run in runs:
            if statuses.get(run.index) == "cancelled":
                _announce(ctx, role, run, "cancelled")
    if winner is None:
        winner = best(runs, spec.pick)
    errors = [r for r in runs if r.error]
    if len(errors) == len(runs):  # nobody built anything: the same failure a single build has
        raise OrchestrateError(f"role {role}: every candidate build failed; candidate 1: "
                               f"{errors[0].error}")
    await asyncio.to_thread(adopt, main, winner, runs)
    record = Race(round=n, pick=spec.pick, winner=winner.index if winner.passed else None,
                  candidates=[r.record(statuses.get(r.index, "failed")) for r in runs],
                  duration_s=round(time.monotonic() - started, 3))
    ctx.telemetry.emit(RaceFinished(
        role=role, session=session_of(role, n, 1), round=n, pick=spec.pick,
        winner=record.winner, kept=winner.index, candidates=len(runs),
        duration_s=record.duration_s))
    assert winner.outcome is not None  # kept candidates all ran their acceptance commands
    return record, winner.outcome


async def prepare(ctx: RunContext, role: Role, n: int, index: int, tree: str,
                   temperatures: tuple[float, ...]) -> CandidateRun:
    """A candidate's own worktree (holding ``tree``) and sandbox."""
    assert ctx.workspace is not None and ctx.sandbox is not None
    ws = await asyncio.to_thread(ctx.workspace.candidate, f"{n}-c{index}", tree)
    sandbox = await asyncio.to_thread(
        build_sandbox, ctx.roles.sandbox, worktree=ws.worktree, read_only=ws.objects_dirs,
        env=ctx.env, ledger=ctx.sandbox.ledger)
    own = replace(ctx, worktree=ws.worktree, workspace=ws, sandbox=sandbox)
    return CandidateRun(index, temperature_of(temperatures, index), session_of(role, n, index), ws, own,
                time.monotonic())


async def attempt(run: CandidateRun, commands: list[str], policy: CommandPolicy,
                   session: SessionRunner, protected: list[str]) -> None:
    """One candidate: its session, then the acceptance commands in its own worktree (with
    the failing tests as they were: they define the task)."""
    try:
        run.outcome = await session(run.ctx, run.index, run.temperature)
        if protected:
            await asyncio.to_thread(run.ws.put_back, protected, run.ctx.start_files())
        run.checks = await run_checks(run.ctx, commands, policy)
        run.tree = await asyncio.to_thread(run.ws.snapshot)
        run.size = await asyncio.to_thread(run.ws.diff_size)
    finally:
        if run.ctx.sandbox is not None:
            await asyncio.to_thread(run.ctx.sandbox.close)


def best(runs: list[CandidateRun], pick: str) -> CandidateRun:
    """Without a first passer: the smallest passing change, else the fewest failing commands
    (a candidate that changed nothing or errored comes last); candidate 1 on a tie."""
    passing = [r for r in runs if r.passed]
    if passing:
        return min(passing, key=lambda r: (r.size[1], r.index))
    built = [r for r in runs if r.checks is not None] or runs
    return min(built, key=lambda r: (sum(c.exit_code != 0 for c in r.checks or []),
                                     r.size == (0, 0), r.index))


def adopt(main: Workspace, winner: CandidateRun, runs: list[CandidateRun]) -> None:
    """The winner's files become the run's worktree; each candidate's patch is kept beside
    its (removed) worktree, for ``orchestrate show`` and for people."""
    tree = winner.tree or (winner.ws.snapshot() if winner.ws.worktree.exists() else "")
    for run in runs:
        with contextlib.suppress(OSError, OrchestrateError):
            if run.ws.worktree.exists():
                run.ws.write_patch()
        run.ws.remove()
    if tree:
        main.restore(tree)


def _announce(ctx: RunContext, role: Role, run: CandidateRun, status: CandidateStatus) -> None:
    files, lines = run.size
    ctx.telemetry.emit(CandidateFinished(
        role=role, session=run.session, index=run.index, status=status,
        temperature=run.temperature, duration_s=round(time.monotonic() - run.started, 3),
        files_changed=files, diff_lines=lines, error=run.error))

