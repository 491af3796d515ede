"""The graph's nodes: the agent steps and the mechanical ones.

Every role runs as ``agent_node(role, kind)`` (``agentstep.py``): its kind decides what it is
told and what its submission does. ``explore_node(role)`` runs one explorer per question (a
``Send``) and keeps the claims that verify; ``approve``, ``gather``, ``verify`` and ``report``
are mechanical. Each node is ``async def node(state, runtime) -> partial update``: it reads the
state, does its work through what ``runtime.context`` provides, and never mutates the state.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from orchestrator.config.prompts import text
from orchestrator.engine.acceptance import run_checks
from orchestrator.engine.agentstep import NodeFn, agent_node
from orchestrator.engine.prompting import acceptance_commands, plan_text
from orchestrator.engine.runtime import RunContext
from orchestrator.engine.sessions import run_session
from orchestrator.engine.toolbox import policy_of, protected_tests
from orchestrator.errors import BudgetExhausted, OrchestrateError
from orchestrator.evidence.digest import build_digest
from orchestrator.evidence.known import for_explorer
from orchestrator.evidence.verify import DirSource, Verified, verify_findings
from orchestrator.localize import failures
from orchestrator.models.errors import ModelRefused
from orchestrator.state import (
    ExplorerResult,
    ExploreTask,
    Findings,
    KnownTests,
    Role,
    RoleLoss,
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
    runtime.context.telemetry.emit("review", role="human", verdict="approve" if decision else "reject")
    return {} if decision else {"plan_rejected": True}


def explore_node(role: Role) -> NodeFn:
    """The node that runs one explorer of ``role`` per ``Send``."""

    async def explore(payload: ExploreTask, runtime: Runtime[RunContext]) -> dict[str, Any]:
        return await _explore(role, payload, runtime.context)

    return explore


async def _explore(role: Role, payload: ExploreTask, ctx: RunContext) -> dict[str, Any]:
    """One explorer: answer one question, then keep only the claims that verify.

    A refused call (key, unknown model) fails the run: the role map is wrong for every
    explorer. Any other error loses this explorer only; the run goes on and reports the loss.
    """
    question, index = payload["question"], payload["index"]
    sid = f"{role}-{index + 1}"
    known = payload.get("tests")
    task = ctx.agents[role].render_task(question=question, task=payload["task"],
                                        known=for_explorer(known))
    limit = ctx.roles.run.explorer_timeout_s
    lost: RoleLoss | None = None
    _count_lines_ahead(ctx)
    try:
        outcome = await asyncio.wait_for(run_session(ctx, role, task, n=index + 1), limit)
    except (BudgetExhausted, ModelRefused):
        raise  # a budget stops the run resumably (this explorer runs again on resume)
    except TimeoutError:
        result = ExplorerResult(question=question, index=index,
                                error=f"timed out after {limit:g}s (run.explorer_timeout_s)")
        lost = RoleLoss(role=role, session=sid, code="timeout",
                        message=f"{_where(ctx, role)} ({sid}): {result.error}")
    except (OrchestrateError, OSError) as exc:
        result = ExplorerResult(question=question, index=index, error=_one_line(str(exc)))
        said = result.error if str(result.error).startswith("role ") else (
            f"{_where(ctx, role)} ({sid}): {result.error}")
        lost = RoleLoss(role=role, session=sid, message=said,
                        code=getattr(exc, "code", "os_error"))
    else:
        findings = cast(Findings, outcome.payload)
        checked = await asyncio.to_thread(_verify, ctx, findings, outcome.tool_calls, known)
        result = ExplorerResult(
            question=question,
            index=index,
            claims=checked.claims,
            answer=findings.answer,
            submitted=checked.submitted,
            verified=checked.verified,
            adds_nothing=checked.adds_nothing,
            dropped=checked.dropped,
            tool_calls=outcome.tool_calls,
            drop_reasons=checked.reasons[:20],
            drops=checked.drops,
            verdicts=checked.verdicts[:100],
        )
    model = _served_model(ctx, role, sid) or ctx.roles.model_for(role).id
    result = result.model_copy(update={"model": model})
    _keep_partial(ctx, result)  # on disk before anyone is told, so a cut run keeps it
    ctx.telemetry.emit(
        "explorer_finished", role=role, session=sid, model=result.model,
        question=question, submitted=result.submitted, verified=result.verified,
        adds_nothing=result.adds_nothing, dropped=result.dropped, error=result.error,
        drops=[v.kind for v in result.verdicts if v.kind],
    )
    if lost is not None:
        ctx.telemetry.lose(lost)
    return {"explorers": [result]}


def _where(ctx: RunContext, role: Role) -> str:
    """``role explorer: model spark (gpt-x) at provider openai`` for the role's first model."""
    alias = ctx.roles.roles[role].model
    model = ctx.roles.models[alias]
    return f"role {role}: model {alias} ({model.id}) at provider {model.provider}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _keep_partial(ctx: RunContext, result: ExplorerResult) -> None:
    """Append the explorer's result to ``explorers.jsonl``, so a cut run keeps what finished."""
    with (ctx.run_dir / "explorers.jsonl").open("a", encoding="utf-8") as fh:
        fh.write(result.model_dump_json() + "\n")


def _served_model(ctx: RunContext, role: Role, session: str) -> str:
    """The model that answered the explorer's last call (its forks included), "" if none did
    (then the explorer is counted against the role's configured model)."""
    calls = [c for c in ctx.telemetry.calls if c.role == role and c.error is None
             and (c.session == session or c.session.startswith(session + "."))]
    return (calls[-1].served_model or calls[-1].requested_model) if calls else ""


def _count_lines_ahead(ctx: RunContext) -> None:
    """The repository's line counts, which the citation check needs (a read of every file),
    are made while the explorers' models think (``Ahead.count_lines``), when there is a reader
    that lives as long as the run (``RunContext.source``)."""
    if ctx.workspace is None:
        ctx.ahead.count_lines(DirSource(ctx.worktree))
    elif ctx.citations is not None:
        ctx.ahead.count_lines(ctx.citations)


def _verify(ctx: RunContext, findings: Findings, tool_calls: int,
            known: KnownTests | None) -> Verified:
    """Check citations; the run's explorers share one count of the repository's lines."""
    with ctx.source() as source:
        return verify_findings(source, findings, tool_calls=tool_calls,
                               line_counts=ctx.ahead.line_counts, known=known)


async def gather(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    settings = runtime.context.roles.run
    digest = build_digest(
        state.explorers,
        per_explorer_tokens=settings.digest_tokens_per_explorer,
        total_tokens=settings.digest_tokens_total,
        known=state.tests,
    )
    return {"digest": digest}


# --- verify and report ---------------------------------------------------------------------------


async def verify(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Run the acceptance commands in the worktree; failures become the builder's feedback."""
    ctx = runtime.context
    if ctx.sandbox is None:
        raise OrchestrateError("verify needs the run's sandbox; none was set up")
    protected = sorted(protected_tests(ctx, state))
    put_back = (await asyncio.to_thread(ctx.workspace.put_back, protected, ctx.start_files())
                if protected and ctx.workspace else [])
    if put_back:
        ctx.telemetry.emit("warning", role="verify", category="tests_put_back",
                           message="the builder changed the failing tests "
                                   f"{', '.join(put_back)}; they were put back before verify")
    # the diff of what the builder left, which the judges and the report read, is made while
    # the commands run (unless those change a file, it is the diff of the tree checked)
    async with ctx.ahead.diffing(ctx.workspace, state.worktree_tree):
        checks = await run_checks(ctx, acceptance_commands(ctx, state), policy_of(ctx))
        tree = await ctx.worktree_tree()  # the commands may have written files
    result = VerifyResult(passed=all(c.exit_code == 0 for c in checks), checks=checks)
    failed = [c for c in checks if c.exit_code]
    ctx.telemetry.emit(
        "test_result", role="verify", passed=result.passed, attempt=state.attempts,
        commands=[c.command for c in checks], exit_codes=[c.exit_code for c in checks],
    )
    if result.passed:  # the commit is made while the judges read; the report moves the branch
        ctx.ahead.prepare_commit(ctx.workspace, _commit_message(ctx, state), tree)
        return {"verify": result, "feedback": "", "worktree_tree": tree}
    feedback = (text("pipeline", "tests_put_back", tests=", ".join(put_back)) + "\n"
                if put_back else "")
    feedback += text("pipeline", "verify_failed", failures="\n\n".join(
        failures.trim(c.output, command=c.command, exit_code=c.exit_code, root=str(ctx.worktree))
        for c in failed))
    sig = " || ".join(failures.signature(c.command, c.exit_code, c.output) for c in failed)
    return {"verify": result, "feedback": feedback, "failures": [sig], "worktree_tree": tree}


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
        if state.unaddressed:
            reason += (f"; the changes {state.unaddressed} requested were not made (no attempt "
                       "left, see run.max_attempts)")
        return {"status": "succeeded", "reason": reason}
    if state.verify is None:
        return {"status": "failed", "reason": "no acceptance result"}
    failing = [c for c in state.verify.checks if c.exit_code]
    tests = [t for c in failing for t in failures.failing_tests(c.output)][:5]
    repeated = len(state.failures) >= 2 and state.failures[-1] == state.failures[-2]
    reason = (
        f"acceptance still failing after {state.attempts} attempt(s)"
        + (" (the same failure repeated, so the loop stopped early)" if repeated else "")
        + ": " + "; ".join(f"{c.command} exited {c.exit_code}" for c in failing)
        + (f"; failing tests: {', '.join(tests)}" if tests else "")
    )
    return {"status": "failed", "reason": reason}
