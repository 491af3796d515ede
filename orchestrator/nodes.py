"""The graph's nodes: plan, explore, gather, build, verify, review, report.

Each node is ``async def node(state, runtime) -> partial update``: it reads the state, does its
work through what ``runtime.context`` provides, and never mutates the state it was given.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any, cast

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from . import failures, localize, questions
from .context import policy_for
from .digest import build_digest
from .errors import BudgetExhausted, MissingCredentials, OrchestrateError, ToolError
from .known import for_explorer, known_tests
from .models.errors import ModelRefused
from .preflight import preflight
from .runtime import RunContext
from .session import Session, Summarizer
from .state import (
    BuildReport,
    CheckResult,
    ExplorerResult,
    ExploreTask,
    Findings,
    KnownTests,
    Plan,
    Review,
    Role,
    RoleLoss,
    RunState,
    VerifyResult,
)
from .tools.base import Tool, Toolbox
from .tools.edit import edit_tools
from .tools.explorer import explorer_tools
from .tools.gitread import GitHistory
from .tools.shell import DEFAULT_DENY, CommandPolicy, run_command, scrubbed_env, shell_tool
from .verify import DirSource, FileSource, GitCommitSource, Verified, verify_findings


def policy_of(ctx: RunContext) -> CommandPolicy:
    """The built-in deny list plus the role map's own; ``allow`` patterns win over both."""
    settings = ctx.roles.policy
    return CommandPolicy(allow=list(settings.allow), deny=[*DEFAULT_DENY, *settings.deny])


def _toolbox(ctx: RunContext, role: Role) -> Toolbox:
    wanted = set(ctx.agents[role].tools)
    available: list[Tool] = list(explorer_tools(ctx.worktree, history=_history(ctx)))
    if role == "builder":
        available += edit_tools(ctx.worktree, edit_format=ctx.roles.model_for(role).edits)
        if ctx.sandbox is not None:
            available.append(
                shell_tool(
                    ctx.worktree,
                    sandbox=ctx.sandbox,
                    policy=policy_of(ctx),
                    timeout=ctx.roles.run.command_timeout_s,
                    output_cap=30_000,
                    env=scrubbed_env(ctx.env),
                )
            )
    return Toolbox.of(t for t in available if t.name in wanted)


def _history(ctx: RunContext) -> GitHistory:
    """git_log/git_blame read the user's (trusted) repository, never a builder-writable .git."""
    if ctx.workspace is None:
        return GitHistory(root=ctx.worktree)
    return GitHistory(root=ctx.worktree, git_dir=ctx.workspace.git_dir, rev=ctx.base_commit)


async def _session(ctx: RunContext, role: Role, task: str, n: int):
    agent = ctx.agents[role]
    spec = ctx.roles.roles[role]
    session = Session(
        # derived from the state, never a counter: a resumed run must send the same ids
        session_id=f"{role}-{n}",
        agent=agent,
        client=ctx.pool.for_role(role),
        toolbox=_toolbox(ctx, role),
        telemetry=ctx.telemetry,
        max_turns=agent.max_turns or spec.max_turns,
        policy=policy_for(spec, ctx.roles.model_for(role)),
        summarizer=_summarizer(ctx) if role != "summarizer" else None,
        run_dir=ctx.run_dir,
    )
    return await session.run(task)


def _summarizer(ctx: RunContext) -> Summarizer | None:
    """The summarizer role's own agent, client and window, for the handoffs of forks."""
    agent, spec = ctx.agents["summarizer"], ctx.roles.roles["summarizer"]
    try:
        client = ctx.pool.for_role("summarizer")
    except MissingCredentials:  # forks then get a plain handoff instead of failing the role
        return None
    return Summarizer(agent=agent, client=client,
                      policy=policy_for(spec, ctx.roles.model_for("summarizer")),
                      max_turns=agent.max_turns or spec.max_turns)


async def plan(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    planner = ctx.agents["planner"]
    # --- localisation hook (issue 15, phase A): the acceptance commands run before any model
    # call; issue 14's registry-built graph can move this into a node of its own.
    loc = state.localization
    if loc is None and state.mode == "run":
        loc = await preflight(ctx, list(ctx.roles.verify.commands), policy_of(ctx))
    if state.mode == "explore":
        task = planner.render_task("explore", question=state.task)
    else:
        task = planner.render_task(task=state.task, localized=_localized(loc))
    outcome = await _session(ctx, "planner", task, n=1)
    result = _clean_questions(ctx, cast(Plan, outcome.payload), state, [planner.system, task])
    if state.mode == "explore" and not result.questions:  # a question is its own sub-question
        result = result.model_copy(update={"questions": [state.task]})
    if loc is None and state.mode == "run":  # only the plan named the commands
        loc = await preflight(ctx, list(result.acceptance), policy_of(ctx))
    if state.mode == "explore" or state.tests is not None:
        return {"plan": result, "localization": loc}
    tests = await asyncio.to_thread(_known_tests, ctx, result, state.task, loc)
    return {"plan": result, "localization": loc, "tests": tests}


def _known_tests(ctx: RunContext, plan: Plan, task: str,
                 loc: localize.Localization | None) -> KnownTests | None:
    """What explorers are told about the tests: the preflight's failures when it ran, else what
    the plan says (read at the run's commit)."""
    commands = list(ctx.roles.verify.commands) or list(plan.acceptance)
    with _source(ctx) as src:
        return known_tests(src, commands=commands, files=plan.files_to_touch, task=task,
                           localization=loc)


def _localized(loc: localize.Localization | None) -> str:
    text = localize.render(loc) if loc is not None else ""
    return f"{text}\n" if text else ""


def _clean_questions(ctx: RunContext, plan: Plan, state: RunState, prompt: list[str]) -> Plan:
    """Explorers only for real, distinct questions (small planners copy their prompt)."""
    kept, dropped = questions.clean(plan.questions, prompt=prompt, allowed=[state.task])
    if not dropped:
        return plan
    ctx.telemetry.emit("warning", role="planner", session="planner-1",
                       message=f"{len(dropped)} question(s) dropped: " + "; ".join(dropped)[:500])
    return plan.model_copy(update={"questions": kept})


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


async def explore(payload: ExploreTask, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """One explorer: answer one question, then keep only the claims that verify.

    A refused call (key, unknown model) fails the run: the role map is wrong for every
    explorer. Any other error loses this explorer only; the run goes on and reports the loss.
    """
    ctx = runtime.context
    question, index = payload["question"], payload["index"]
    sid = f"explorer-{index + 1}"
    known = payload.get("tests")
    task = ctx.agents["explorer"].render_task(question=question, task=payload["task"],
                                              known=for_explorer(known))
    limit = ctx.roles.run.explorer_timeout_s
    lost: RoleLoss | None = None
    try:
        outcome = await asyncio.wait_for(_session(ctx, "explorer", task, n=index + 1), limit)
    except (BudgetExhausted, ModelRefused):
        raise  # a budget stops the run resumably (this explorer runs again on resume)
    except TimeoutError:
        result = ExplorerResult(question=question, index=index,
                                error=f"timed out after {limit:g}s (run.explorer_timeout_s)")
        lost = RoleLoss(role="explorer", session=sid, code="timeout",
                        message=f"{_where(ctx, 'explorer')} ({sid}): {result.error}")
    except (OrchestrateError, OSError) as exc:
        result = ExplorerResult(question=question, index=index, error=_one_line(str(exc)))
        text = result.error if str(result.error).startswith("role ") else (
            f"{_where(ctx, 'explorer')} ({sid}): {result.error}")
        lost = RoleLoss(role="explorer", session=sid, message=text,
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
    model = _served_model(ctx, sid) or ctx.roles.model_for("explorer").id
    result = result.model_copy(update={"model": model})
    _keep_partial(ctx, result)  # on disk before anyone is told, so a cut run keeps it
    ctx.telemetry.emit(
        "explorer_finished", role="explorer", session=sid, model=result.model,
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


def _served_model(ctx: RunContext, session: str) -> str:
    """The model that answered the explorer's last call (its forks included), "" if none did
    (then the explorer is counted against the role's configured model)."""
    calls = [c for c in ctx.telemetry.calls if c.role == "explorer" and c.error is None
             and (c.session == session or c.session.startswith(session + "."))]
    return (calls[-1].served_model or calls[-1].requested_model) if calls else ""


@contextlib.contextmanager
def _source(ctx: RunContext) -> Iterator[FileSource]:
    """Files at the run's commit, or the working tree for `explore`."""
    if ctx.workspace is None:
        yield DirSource(ctx.worktree)
        return
    with GitCommitSource(ctx.repo, ctx.base_commit) as source:
        yield source


def _verify(ctx: RunContext, findings: Findings, tool_calls: int,
            known: KnownTests | None) -> Verified:
    """Check citations; the run's explorers share one count of the repository's lines."""
    with _source(ctx) as source:
        return verify_findings(source, findings, tool_calls=tool_calls,
                               line_counts=ctx.line_counts, known=known)


async def gather(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    settings = runtime.context.roles.run
    digest = build_digest(
        state.explorers,
        per_explorer_tokens=settings.digest_tokens_per_explorer,
        total_tokens=settings.digest_tokens_total,
        known=state.tests,
    )
    return {"digest": digest}


def _plan_text(plan: Plan | None) -> str:
    if plan is None:
        return "(no plan)"
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(plan.steps, 1))
    accept = "\n".join(f"  $ {c}" for c in plan.acceptance) or "  (none)"
    return f"Goal: {plan.goal}\n{steps}\nAcceptance commands:\n{accept}"


def acceptance_commands(ctx: RunContext, state: RunState) -> list[str]:
    configured = list(ctx.roles.verify.commands)
    return configured or (list(state.plan.acceptance) if state.plan else [])


async def build(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    feedback = f"Feedback from the last attempt:\n{state.feedback}\n" if state.feedback else ""
    task = ctx.agents["builder"].render_task(
        localized=_localized(state.localization),
        task=state.task,
        plan=_plan_text(state.plan) + _commands_note(acceptance_commands(ctx, state)),
        digest=state.digest or "(none)",
        feedback=feedback,
    )
    outcome = await _session(ctx, "builder", task, n=state.attempts + 1)
    report = cast(BuildReport, outcome.payload)
    return {"build": report, "attempts": state.attempts + 1,
            "worktree_tree": await _tree(ctx)}


async def _tree(ctx: RunContext) -> str:
    """The worktree's files as a tree object, recorded in the checkpoint for an exact resume."""
    return await asyncio.to_thread(ctx.workspace.snapshot) if ctx.workspace else ""


def _commands_note(commands: list[str]) -> str:
    if not commands:
        return ""
    return "\nThese acceptance commands decide whether the task is done:\n" + "\n".join(
        f"  $ {c}" for c in commands
    )


async def verify(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Run the acceptance commands in the worktree; failures become the builder's feedback."""
    ctx = runtime.context
    checks: list[CheckResult] = []
    if ctx.sandbox is None:
        raise OrchestrateError("verify needs the run's sandbox; none was set up")
    for command in acceptance_commands(ctx, state):
        with ctx.telemetry.busy("tool"):
            try:
                res = await run_command(
                    command,
                    cwd=ctx.worktree,
                    sandbox=ctx.sandbox,
                    timeout=ctx.roles.run.command_timeout_s,
                    env=scrubbed_env(ctx.env),
                    policy=policy_of(ctx),
                )
            except ToolError as exc:  # refused by the policy, or the sandbox could not start it
                checks.append(CheckResult(command=command, exit_code=126,
                                          output=f"refused: {exc}", duration_s=0.0))
                continue
        output = res.output[-8000:]
        if res.limit_note:
            output = f"{res.limit_note}\n{output}"
        checks.append(
            CheckResult(command=command, exit_code=res.exit_code, output=output,
                        duration_s=res.duration_s)
        )
    result = VerifyResult(passed=all(c.exit_code == 0 for c in checks), checks=checks)
    tree = await _tree(ctx)  # the commands may have written files
    failed = [c for c in checks if c.exit_code]
    ctx.telemetry.emit(
        "test_result", role="verify", passed=result.passed, attempt=state.attempts,
        commands=[c.command for c in checks], exit_codes=[c.exit_code for c in checks],
    )
    if result.passed:
        return {"verify": result, "feedback": "", "worktree_tree": tree}
    feedback = "The acceptance commands failed:\n" + "\n\n".join(
        failures.trim(c.output, command=c.command, exit_code=c.exit_code, root=str(ctx.worktree))
        for c in failed
    )
    sig = " || ".join(failures.signature(c.command, c.exit_code, c.output) for c in failed)
    return {"verify": result, "feedback": feedback, "failures": [sig], "worktree_tree": tree}


async def review(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    ctx = runtime.context
    diff = await asyncio.to_thread(ctx.workspace.patch) if ctx.workspace else ""
    verdict = "passed" if state.verify and state.verify.passed else "not passed"
    task = ctx.agents["reviewer"].render_task(
        task=state.task, verify=verdict, digest=state.digest or "(none)",
        diff=diff[:40_000] or "(empty diff)",
    )
    outcome = await _session(ctx, "reviewer", task, n=state.reviews + 1)
    result = cast(Review, outcome.payload)
    ctx.telemetry.emit("review", role="reviewer", verdict=result.verdict, comments=result.comments)
    feedback = ""
    if result.verdict == "request_changes":
        feedback = "The reviewer requested changes:\n" + "\n".join(f"- {c}" for c in result.comments)
    return {"review": result, "reviews": state.reviews + 1, "feedback": feedback}


async def report(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Commit the work on the run branch and decide the outcome."""
    ctx = runtime.context
    if state.plan_rejected:
        return {"status": "failed", "reason": "the plan was rejected; nothing was changed"}
    passed = bool(state.verify and state.verify.passed)
    ws = ctx.workspace
    if ws is not None:
        first_line = " ".join(state.task.split())[:72]
        await asyncio.to_thread(ws.commit, f"orchestrate: {first_line}\n\n{state.task}\n\nRun: {ctx.run_id}")
        await asyncio.to_thread(ws.write_patch)
    if passed and not state.verify.checks:  # type: ignore[union-attr]
        return {"status": "succeeded", "reason": "no acceptance commands: the change is unverified"}
    if passed:
        return {"status": "succeeded", "reason": "acceptance commands passed"}
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


