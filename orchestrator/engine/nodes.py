"""The graph's nodes: the agent steps and the mechanical ones.

Every role runs as ``agent_node(role, kind)`` (``agentstep.py``): its kind decides what it is
told and what its submission does. ``explore_node(role)`` (``explore.py``) runs one explorer per
question (a ``Send``) and keeps the claims that verify; ``approve``, ``gather``, ``verify`` and
``report`` are mechanical. Each node is ``async def node(state, runtime) -> partial update``: it reads the
state, does its work through what ``runtime.context`` provides, and never mutates the state.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from orchestrator.config.prompts import text
from orchestrator.engine import deadline
from orchestrator.engine.acceptance import run_checks
from orchestrator.engine.agentstep import NodeFn, agent_node
from orchestrator.engine.explore import explore_node
from orchestrator.engine.prompting import acceptance_commands, plan_text
from orchestrator.engine.runtime import RunContext
from orchestrator.engine.toolbox import output_mask, policy_of, protected_tests
from orchestrator.errors import OrchestrateError
from orchestrator.evidence.digest import build_digest
from orchestrator.localize import failures
from orchestrator.localize.leads import leads
from orchestrator.record.events import AttemptFinished, TestResult, Verdict, Warned
from orchestrator.state import (
    Attempt,
    RunState,
    VerifyResult,
)

__all__ = ["NodeFn", "agent_node", "approve", "approved", "explore_node", "gather", "plan_text",
           "report", "verify"]


# --- approve, explore, gather --------------------------------------------------------------------

APPROVE_QUESTION = "Approve this plan? Resume with true to go ahead, false to reject it."
_YES = frozenset({"true", "yes", "y", "approve", "approved", "ok", "go"})


def approved(decision: Any) -> bool:
    """A resume value as yes or no: a bool, a word a person typed (Studio sends what it is
    given, and "no" must not count as yes), or ``{"approve": ...}``."""
    if isinstance(decision, str):
        return decision.strip().lower() in _YES
    if isinstance(decision, dict):
        return approved(decision.get("approve", decision.get("approved", False)))
    return bool(decision)


async def approve(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """With ``--approve-plan``, pause for a human; resumed with ``True`` (go) or ``False``."""
    if not state.approve_plan or state.plan is None:
        return {}
    decision = approved(interrupt({"run_id": runtime.context.run_id, "question": APPROVE_QUESTION,
                                   "plan": state.plan.model_dump()}))
    runtime.context.telemetry.emit(
        Verdict(role="human", verdict="approve" if decision else "reject"))
    return {} if decision else {"plan_rejected": True}


async def gather(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """The verified findings as the builder's digest, and leads from the task's words when
    the failure pins no code; a run the time budget stopped goes to its report instead."""
    if state.out_of_time:  # the planner was stopped
        return {}
    ctx = runtime.context
    settings = ctx.roles.run
    digest = build_digest(
        state.explorers,
        per_explorer_tokens=settings.digest_tokens_per_explorer,
        total_tokens=settings.digest_tokens_total,
        known=state.tests,
    )
    if deadline.spent(ctx):  # the explorers were stopped, or used it up (an explore's answer
        # is still what the others found)
        stopped = sum(loss.code == "out_of_time" for loss in ctx.telemetry.losses)
        ctx.telemetry.emit(Warned(role=ctx.pipeline.explore, category="out_of_time", message=(
            f"{deadline.ran_out(ctx)} while the explorers searched ({stopped} of "
            f"{len(state.explorers)} stopped); the run stops")))
        return {"digest": digest, "out_of_time": True, "out_of_time_in": "exploring"}
    loc = state.localization
    if loc is None or loc.pinned or loc.passed:
        return {"digest": digest}
    try:
        found = await asyncio.to_thread(leads, runtime.context.retriever(), state.task)
    except (OrchestrateError, OSError, ValueError) as exc:  # a lead is a hint: go on without
        runtime.context.telemetry.emit(Warned(role="explorer", category="no_leads",
                                              message=f"no leads from the task's words: {exc}"))
        return {"digest": digest}
    return {"digest": digest, "leads": [f"{w.path}:{w.start}-{w.end}" for w in found]}


# --- verify and report ---------------------------------------------------------------------------


async def verify(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Run the acceptance commands in the worktree; failures become the builder's feedback."""
    ctx = runtime.context
    if ctx.sandbox is None:
        raise OrchestrateError("verify needs the run's sandbox; none was set up")
    if state.out_of_time:  # the build was stopped: nothing finished to judge
        return {"verify": VerifyResult(passed=False), "feedback": "",
                "attempt_log": _judged(ctx, state, passed=False)}
    protected = sorted(protected_tests(ctx, state))
    put_back = (await asyncio.to_thread(ctx.workspace.put_back, protected, ctx.start_files())
                if protected and ctx.workspace else [])
    if put_back:
        ctx.telemetry.emit(Warned(role="verify", category="tests_put_back",
                                  message="the builder changed the failing tests "
                                  f"{', '.join(put_back)}; they were put back before verify"))
    # the diff of what the builder left, which the judges and the report read, and the run's
    # commit of it are made while the commands run (unless those change a file, they are the
    # diff and commit of the tree checked; the report moves the branch to a commit that fits)
    message = _commit_message(ctx, state)
    async with ctx.ahead.diffing(ctx.workspace, state.worktree_tree):
        ctx.ahead.prepare_commit(ctx.workspace, message, state.worktree_tree)
        checks = await run_checks(ctx, acceptance_commands(ctx, state), policy_of(ctx))
        tree = await ctx.worktree_tree()  # the commands may have written files
    shown = output_mask(ctx)  # what a command printed of a secret file is not kept, nor shown
    checks = [c.model_copy(update={"output": shown(c.output)}) for c in checks]
    result = VerifyResult(passed=all(c.exit_code == 0 for c in checks), checks=checks)
    failed = [c for c in checks if c.exit_code]
    ctx.telemetry.emit(TestResult(
        role="verify", passed=result.passed, attempt=state.attempts,
        commands=[c.command for c in checks], exit_codes=[c.exit_code for c in checks],
    ))
    log = _judged(ctx, state, passed=result.passed)
    if tree != state.worktree_tree:  # the commands wrote: the commit is made again ahead
        ctx.ahead.prepare_commit(ctx.workspace, message, tree)
    if result.passed:
        return {"verify": result, "feedback": "", "worktree_tree": tree, "attempt_log": log}
    kept, undone = _kept(ctx, state, tree, failures.failing(
        (c.command, c.exit_code, c.output) for c in checks))
    feedback = (text("pipeline", "tests_put_back", tests=", ".join(put_back)) + "\n"
                if put_back else "")
    said = text("pipeline", "verify_failed", failures="\n\n".join(
        shown(failures.trim(c.output, command=c.command, exit_code=c.exit_code,
                           root=str(ctx.worktree)))
        for c in failed))
    feedback += undone + said
    if kept.get("kept_tree") == tree:  # the failure of the files the next attempt starts
        kept = {**kept, "kept_verify": result, "kept_feedback": said}  # from, when undone
    sig = " || ".join(failures.signature(c.command, c.exit_code, c.output) for c in failed)
    return {"verify": result, "feedback": feedback, "failures": [sig], "worktree_tree": tree,
            "attempt_log": log, **kept}


PARTIAL_MISSES = 2
"""Attempts in a row that may build on a kept partial fix without fixing more before it is
dropped and the next attempt starts from the start's files again. A partial fix can be a wrong
one that one test happens to like: live (r39, py-config-merge) a one-line answer set the default
timeout to the value the failing test passes in, which fixed that test and broke none, and the
eight attempts after it built on it; one of them wrote the right merge, which failed only
because of that default. Two is one round of the live maps' cycled requests (the line, then
whole files with the facts)."""


def _kept(ctx: RunContext, state: RunState, tree: str, failing: list[str]
          ) -> tuple[dict[str, Any], str]:
    """Whether the next attempt starts from ``tree`` (its failing tests are fewer than the kept
    tree's and none is new) or from the kept tree again (``building.undo`` puts it back), or
    from the start's files when a kept partial fix has led nowhere ``PARTIAL_MISSES`` times;
    the state's update and, when undone, what the builder is told."""
    if not state.kept_tree:  # no attempt's start was taken (a judge's changes, no worktree)
        return {}, ""
    loc = state.localization
    base = state.kept_failing if state.kept_failing is not None else (
        failures.failing((c.command, c.exit_code, c.output) for c in loc.checks)
        if loc is not None and loc.checks else None)
    if base is None or set(failing) < set(base):
        return {"kept_tree": tree, "kept_failing": failing, "kept_misses": 0}, ""
    misses = state.kept_misses + 1 if state.kept_failing is not None else 0
    if misses >= PARTIAL_MISSES and state.start_tree and state.start_tree != state.kept_tree:
        ctx.telemetry.emit(Warned(role="verify", category="partial_dropped", message=(
            f"the last {misses} attempts built on a kept partial fix (it left "
            f"{len(state.kept_failing or [])} failing test(s)) and fixed nothing more: it is "
            "dropped, the next attempt starts from the files of the start")))
        return ({"kept_tree": state.start_tree, "kept_failing": None, "kept_verify": None,
                 "kept_feedback": "", "kept_misses": 0},
                text("pipeline", "undone", when=text("pipeline", "undone_start")) + "\n")
    if tree == state.kept_tree:
        return {"kept_misses": misses}, ""
    when = text("pipeline", "undone_start" if state.kept_failing is None else "undone_after")
    return {"kept_misses": misses}, text("pipeline", "undone", when=when) + "\n"


def _judged(ctx: RunContext, state: RunState, *, passed: bool) -> list[Attempt]:
    """The attempt log with verify's word on the last attempt, said as an event."""
    if not state.attempt_log or state.attempt_log[-1].passed is not None:
        return list(state.attempt_log)
    last = state.attempt_log[-1].model_copy(update={"passed": passed})
    ctx.telemetry.emit(AttemptFinished(
        role=ctx.pipeline.build, attempt=last.n, strategy=last.strategy,
        model_step=last.model_step, changed=last.changed, passed=passed,
        duration_s=last.duration_s, samples=len(last.samples)))
    return [*state.attempt_log[:-1], last]


def ladder_note(state: RunState) -> str:
    """The strategies the build attempts took, for a failed run's reason."""
    said = [a.strategy + ("" if a.changed else " (changed nothing)") for a in state.attempt_log]
    return f"; strategies tried: {', '.join(said)}" if said else ""


def repeating(state: RunState) -> bool:
    """The same failure twice in a row after an attempt that changed something and was the
    ladder's last rung: another attempt would only repeat it. An attempt that changed nothing
    is not a failed fix, and a next rung is a different strategy: neither stops the loop."""
    if len(state.failures) < 2 or state.failures[-1] != state.failures[-2]:
        return False
    last = state.attempt_log[-1] if state.attempt_log else None
    return last is None or (last.changed and last.last_rung)


def _commit_message(ctx: RunContext, state: RunState) -> str:
    first_line = " ".join(state.task.split())[:72]
    return f"orchestrate: {first_line}\n\n{state.task}\n\nRun: {ctx.run_id}"


async def report(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Commit the work on the run branch and decide the outcome."""
    ctx = runtime.context
    if state.plan_rejected:
        return {"status": "failed", "reason": "the plan was rejected; nothing was changed"}
    passed = bool(state.verify and state.verify.passed)
    ws = ctx.workspace
    if ws is not None:
        # the tree verify checked (the worktree as it was then; judges put back whatever
        # their commands wrote) is what gets committed
        tree = state.worktree_tree or None
        await ctx.ahead.commit(ws, _commit_message(ctx, state), tree)
        await asyncio.to_thread(ws.write_patch, tree)
    if passed:
        reason = ("acceptance commands passed" if state.verify.checks  # type: ignore[union-attr]
                  else "no acceptance commands: the change is unverified")
        if state.out_of_time:  # a judge was stopped: the result is the verified build's
            reason += (f"; {deadline.ran_out(ctx)} while {state.out_of_time_in} judged it, so "
                       "its verdict is missing")
        if state.unaddressed:
            reason += (f"; the changes {state.unaddressed} requested were not made (no attempt "
                       "left, see run.max_attempts)")
        return {"status": "succeeded", "reason": reason}
    if state.out_of_time:
        spent = deadline.ran_out(ctx)
        if not state.attempts:
            return {"status": "failed", "reason": (
                f"{spent} while {state.out_of_time_in or 'building'}, before any build attempt; "
                "nothing was changed")}
        again = "" if state.out_of_time_in in ("", "building") else (
            f" (then while {state.out_of_time_in})")
        return {"status": "failed", "reason": (
            f"{spent} after {state.attempts} attempt(s) without a verified pass{again}"
            + ladder_note(state))}
    if state.verify is None:
        return {"status": "failed", "reason": "no acceptance result"}
    failing = [c for c in state.verify.checks if c.exit_code]
    tests = [t for c in failing for t in failures.failing_tests(c.output)][:5]
    repeated = repeating(state)
    reason = (
        f"acceptance still failing after {state.attempts} attempt(s)"
        + (" (the same failure repeated, so the loop stopped early)" if repeated else "")
        + ": " + "; ".join(f"{c.command} exited {c.exit_code}" for c in failing)
        + (f"; failing tests: {', '.join(tests)}" if tests else "") + ladder_note(state)
    )
    return {"status": "failed", "reason": reason}
