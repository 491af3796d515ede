"""The generic agent node: any role, given its kind, runs as one session of its agent.

``agent_node(role, kind)`` renders the role's task from its kind's values (``_STEPS``: what the
planner, the builder or a judge is told), runs it the way its kind and settings say (``_way``:
one session; for a build the tool loop, a one-shot call first, or a race of candidates), and
turns the submission into the run's state update. A judge may run commands; what they write
is put back, so a judge never changes the result. The tools a role gets are ``toolbox.py``'s,
its session ``sessions.py``'s, the pieces of its prompt ``prompting.py``'s.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, cast

from langgraph.runtime import Runtime
from pydantic import BaseModel

from orchestrator.config.kinds import RUN_TOOL, Kind
from orchestrator.config.prompts import text
from orchestrator.engine import building
from orchestrator.engine.deadline import OutOfTime, bounded, ran_out
from orchestrator.engine.preflight import preflight
from orchestrator.engine.prompting import (
    acceptance_commands,
    commands_note,
    localized,
    plan_text,
)
from orchestrator.engine.runtime import RunContext
from orchestrator.engine.sessions import run_session
from orchestrator.engine.toolbox import output_mask, policy_of
from orchestrator.evidence import questions
from orchestrator.evidence.known import known_tests
from orchestrator.localize import diagnosis
from orchestrator.localize import localization as localize
from orchestrator.record.events import (
    DiagnosisChecked,
    ExploreSkipped,
    PlanDeferred,
    PlanFromTask,
    Verdict,
    Warned,
)
from orchestrator.session.account import SessionOutcome
from orchestrator.state import (
    BuildReport,
    Diagnosis,
    KnownTests,
    Plan,
    Review,
    Role,
    RunState,
)

NodeFn = Callable[..., Awaitable[dict[str, Any]]]
Values = dict[str, Any]


@dataclass(frozen=True)
class Asked:
    """What a role is asked: its template's name and values, what the state gains before the
    session (the localisation a plan step ran), and the task as rendered."""

    role: Role
    template: str
    values: Values
    update: Values = field(default_factory=dict)
    task: str = ""
    skip: bool = False  # no session: the node's update is ``update`` alone


@dataclass(frozen=True)
class _Step:
    """What a kind of role is told, which session it is, and what its submission changes."""

    ask: Callable[[RunContext, RunState, Role], Awaitable[Asked]]
    session: Callable[[RunState, Role], int]
    apply: Callable[[RunContext, RunState, Asked, BaseModel], Awaitable[Values]]


# how a role's session runs: (context, state, what it is asked, its task, session number) ->
# the session's outcome and what the state gains besides its submission (a build's tree)
Way = Callable[[RunContext, RunState, Asked, str, int], Awaitable[tuple[SessionOutcome, Values]]]


def agent_node(role: Role, kind: Kind, name: str | None = None) -> NodeFn:
    """The node that runs ``role``: a session on its model with its tools and prompts."""
    step = _STEPS[kind]

    async def node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        ctx = runtime.context
        asked = await step.ask(ctx, state, role)
        if asked.skip:
            return dict(asked.update)
        task = ctx.agents[role].render_task(asked.template, **asked.values)
        n = step.session(state, role)
        try:
            outcome, built = await _way(ctx, kind, asked, n)(ctx, state, asked, task, n)
        except OutOfTime:  # a plan's or a judge's session: the run goes to its report
            # a judge cut mid-command may have written files: the result stays the build's
            await _discard_changes(ctx, state, role)
            return {**asked.update, **_stopped(ctx, role, kind)}
        update = await step.apply(ctx, state, replace(asked, task=task), outcome.payload)
        return {**asked.update, **update, **built}

    node.__name__ = name or role
    return node


def _way(ctx: RunContext, kind: Kind, asked: Asked, n: int) -> Way:
    """A build climbs the strategy ladder (``building.py``: a race, one call for whole files,
    the failure as facts, the tool loop, the next model); any other kind is one session."""
    if kind != "build":
        return functools.partial(_session, tools=_browses(ctx, kind, asked))
    return _build


def _browses(ctx: RunContext, kind: Kind, asked: Asked) -> bool:
    """Whether the role gets its tools: a plan role whose failure is pinned may not need them
    (``run.plan_tools_when_pinned``)."""
    loc = asked.update.get("localization")
    return not (kind == "plan" and isinstance(loc, localize.Localization) and loc.pinned
                and not ctx.roles.run.plan_tools_when_pinned)


async def _session(ctx: RunContext, state: RunState, asked: Asked, task: str, n: int, *,
                   tools: bool = True) -> tuple[SessionOutcome, Values]:
    """One session of the role (without ``tools`` it can only submit), within the run's time
    budget (``deadline.bounded``)."""
    return await bounded(ctx, lambda: run_session(ctx, asked.role, task, n=n, tools=tools)), {}


def _stopped(ctx: RunContext, role: Role, kind: Kind) -> Values:
    """What the state gains when the time budget stopped ``role``'s session, said as an event."""
    doing = "planning" if kind == "plan" else "judging"
    ctx.telemetry.emit(Warned(role=role, category="out_of_time",
                              message=f"{ran_out(ctx)} while {role} was {doing}; the run stops"))
    return {"out_of_time": True, "out_of_time_in": "planning" if kind == "plan" else role}


async def _build(ctx: RunContext, state: RunState, asked: Asked, task: str, n: int
                 ) -> tuple[SessionOutcome, Values]:
    """A build attempt: the ladder's rung for attempt ``n`` (``building.py``)."""
    return await building.attempt(ctx, state, asked.role, task, n)


# --- what each kind is told, and what its submission changes -----------------------------------

async def _plan_ask(ctx: RunContext, state: RunState, role: Role) -> Asked:
    # localisation (issue 15): the configured acceptance commands run before any model call
    loc = state.localization
    if loc is None and state.mode == "run":
        loc = await preflight(ctx, list(ctx.roles.verify.commands), policy_of(ctx))
    if loc is not None and _unplanned(ctx, state, loc):
        return _plan_of_failure(ctx, state, role, loc)
    if loc is not None and state.localization is None:  # run.first_build: the first one-shot
        located_state = state.model_copy(update={"localization": loc})
        if (ctx.roles.run.first_build == "before_plan"
                and building.needs_no_plan(ctx, located_state)):
            ctx.telemetry.emit(PlanDeferred(role=role, suspects=list(loc.suspects), reason=(
                "the failing tests already point at the code and the first one-shot needs no "
                "plan: the planner plans only if that attempt fails (run.first_build)")))
            return Asked(role, "task", {}, {"localization": loc, "plan_deferred": True},
                         skip=True)
        await building.ask_ahead(ctx, located_state)
    if loc is not None and _of_task(ctx, state, loc):
        return await _task_questions(ctx, state, role, loc)
    located = localized(loc)
    if loc is not None and loc.pinned:  # questions only for what the failure does not show
        located += text("evidence", "localized_pinned") + "\n"
    values = {"task": state.task, "question": state.task, "repo_rules": await ctx.rules(),
              "localized": f"\n{located}" if located else ""}
    template = "explore" if state.mode == "explore" else "task"
    return Asked(role, template, values, {"localization": loc} if loc is not None else {})


def _configured_failing(ctx: RunContext, state: RunState, loc: localize.Localization) -> bool:
    """A run whose configured acceptance commands ran before any model call and failed."""
    return (state.mode == "run" and bool(ctx.roles.verify.commands) and bool(loc.checks)
            and not loc.passed)


def _of_task(ctx: RunContext, state: RunState, loc: localize.Localization) -> bool:
    """``run.unpinned_questions = "task"``: a run whose configured tests fail without naming
    the code to change asks its explorers what the task names, and no planner."""
    return (ctx.roles.run.unpinned_questions == "task" and ctx.pipeline.explore is not None
            and _configured_failing(ctx, state, loc) and not loc.pinned)


def _unplanned(ctx: RunContext, state: RunState, loc: localize.Localization) -> bool:
    """``run.plan_when_pinned = false``: a run whose configured tests fail at lines of the code
    asks no planner (nobody approves a plan, and no explorer waits for its questions)."""
    run = ctx.roles.run
    return (not run.plan_when_pinned and not state.approve_plan
            and _configured_failing(ctx, state, loc) and loc.pinned
            and not (ctx.pipeline.explore is not None and run.explore_when_pinned))


def _plan_without_model(ctx: RunContext, state: RunState, role: Role, asked: list[str],
                        reason: str) -> Plan:
    """The plan the plan step stands for when no planner is asked: the task as its goal, the
    explorers' questions ``asked``, the role map's acceptance commands; said as an event."""
    ctx.telemetry.emit(PlanFromTask(role=role, questions=asked, reason=reason))
    return Plan(goal=state.task, steps=[], questions=asked,
                acceptance=list(ctx.roles.verify.commands))


def _plan_of_failure(ctx: RunContext, state: RunState, role: Role,
                     loc: localize.Localization) -> Asked:
    """The plan step without its model when the failure pins the code: the goal is the task,
    the acceptance commands the role map's, no question, no diagnosis. In the live r61-r76
    runs the 0.5B planner's diagnosis checked in none of the 32 pinned runs it was asked in, and
    no pass needed the 1.5B's (the one-line request, which passed most, is not shown it)."""
    plan = _plan_without_model(ctx, state, role, [], reason=(
        "the failing tests point at the code to change: the attempts go on from the failure, "
        "and no planner (run.plan_when_pinned = false)"))
    return Asked(role, "task", {}, {"localization": loc, "plan": plan, "plan_deferred": False,
                                    "plan_unasked": True}, skip=True)


async def _task_questions(ctx: RunContext, state: RunState, role: Role,
                          loc: localize.Localization) -> Asked:
    """The plan step without its model: the explorers' questions are the ones a planner's
    unusable questions fall back to (``_clean_questions``), the acceptance commands the role
    map's. In the live r21-r29 runs the 0.5B planner's questions on the explore-needed tasks
    were all unusable in 22 of 25 runs (and replaced by these), its diagnosis checked in none,
    at 25 s a run."""
    retriever = ctx.retriever()
    specific = retriever.specific(state.task)
    names = [f.name for r in loc.reports for f in r.failures if f.name != "(command)"]
    clue = await asyncio.to_thread(questions.failing_clue, names, retriever.holding, specific,
                                   state.task)
    asked = questions.with_clue(specific, state.task, clue) or [state.task]
    plan = _plan_without_model(ctx, state, role, asked, reason=(
        "the failing tests pin no code: the explorers are asked about the names the task "
        "quotes" + (f" and the word `{clue.term.pattern}` of the failing test's name "
                    f"\"{clue.title}\"" if clue else "")
        + ", and no planner (run.unpinned_questions = task)"))
    update: Values = {"localization": loc, "plan": plan, "plan_deferred": False,
                      "plan_from_task": True}
    if state.tests is None:
        update["tests"] = await asyncio.to_thread(_known_tests, ctx, plan, state.task, loc)
    return Asked(role, "task", {}, update, skip=True)


async def _plan_apply(ctx: RunContext, state: RunState, asked: Asked, payload: BaseModel) -> Values:
    result = _clean_questions(ctx, cast(Plan, payload), state, asked)
    if state.mode == "explore" and not result.questions:  # a question is its own sub-question
        result = result.model_copy(update={"questions": [state.task]})
    update: Values = {"plan": result, "plan_deferred": False}
    if state.mode != "run":
        return update
    loc = asked.update.get("localization")
    if loc is None:  # only the plan named the commands
        loc = update["localization"] = await preflight(ctx, list(result.acceptance),
                                                       policy_of(ctx))
    if result.diagnosis is not None:
        update["diagnosis"] = await asyncio.to_thread(_checked, ctx, result, loc, asked.role)
    if state.tests is None:  # what explorers are told about the tests (issue 16)
        update["tests"] = await asyncio.to_thread(_known_tests, ctx, result, state.task, loc)
    if _skip_explore(ctx, result, loc):
        update["explore_skipped"] = True
        ctx.telemetry.emit(ExploreSkipped(
            role=ctx.pipeline.explore, questions=list(result.questions),
            suspects=list(loc.suspects) if loc else [],
            reason="the failing tests already point at the code to change "
                   "(run.explore_when_pinned = true explores anyway)"))
    return update


def _checked(ctx: RunContext, plan: Plan, loc: localize.Localization | None, role: Role
             ) -> Diagnosis | None:
    """The plan's diagnosis when its line exists in a file the failure points at and reads
    what it quotes (``localize/diagnosis.py``); else dropped, with an event saying why."""
    d = plan.diagnosis
    assert d is not None
    files = list(dict.fromkeys([*(loc.suspects if loc else ()), *plan.files_to_touch]))
    files = [f for f in files if not localize.is_test(f)]

    def read(path: str) -> str | None:
        with ctx.source() as src:
            lines = src.lines(path)
        return None if lines is None else "\n".join(lines)

    why = diagnosis.check(d.path, d.line, d.quote, files=files, read=read)
    ctx.telemetry.emit(DiagnosisChecked(role=role, kept=not why, path=d.path, line=d.line,
                                        reason=why))
    return None if why else d.model_copy(update={"path": d.path.strip().removeprefix("./")})


def _skip_explore(ctx: RunContext, plan: Plan, loc: localize.Localization | None) -> bool:
    """Explorers are skipped when the preflight's failures already name the non-test code
    (and its lines) to change: the builder gets those lines, and a search adds cost, not facts."""
    return (loc is not None and loc.pinned and bool(plan.questions)
            and ctx.pipeline.explore is not None and not ctx.roles.run.explore_when_pinned)


def _known_tests(ctx: RunContext, plan: Plan, task: str,
                 loc: localize.Localization | None) -> KnownTests | None:
    """What explorers are told about the tests: the preflight's failures when it ran, else what
    the plan says (read at the run's commit)."""
    commands = list(ctx.roles.verify.commands) or list(plan.acceptance)
    with ctx.source() as src:
        return known_tests(src, commands=commands, files=plan.files_to_touch, task=task,
                           localization=loc)


def _clean_questions(ctx: RunContext, plan: Plan, state: RunState, asked: Asked) -> Plan:
    """Explorers only for real, distinct questions (small planners copy their prompt)."""
    # the submit tool's description is part of what it read (the 0.5B asked "Submit your final
    # result (Plan). Ends the session." on xp-parcel-weight)
    prompt = [ctx.agents[asked.role].system, asked.task,
              text("session", "submit_description", schema=type(plan).__name__)]
    kept, dropped = questions.clean(plan.questions, prompt=prompt, allowed=[state.task],
                                    task=state.task)
    if not dropped:
        return plan
    note = ""
    if not kept and state.mode == "run" and not _pinned(state):
        # the planner wanted the code explored but asked nothing searchable: the explorers ask
        # about what the task itself quotes or names (the rarest in the code first), else the
        # task's own words are what they look for
        kept = (questions.from_terms(ctx.retriever().specific(state.task), state.task)
                or [state.task])
        note = ("; asked instead: " + " | ".join(kept) if kept[0] != state.task
                else "; the task itself is asked instead")
    ctx.telemetry.emit(Warned(
        role=asked.role, session=f"{asked.role}-1",
        message=f"{len(dropped)} question(s) dropped: " + "; ".join(dropped)[:500] + note))
    return plan.model_copy(update={"questions": kept})


def _pinned(state: RunState) -> bool:
    loc = state.localization
    return loc is not None and loc.pinned


async def _build_ask(ctx: RunContext, state: RunState, role: Role) -> Asked:
    feedback = text("pipeline", "feedback", feedback=state.feedback) + "\n" if state.feedback else ""
    return Asked(role, "task", {
        "task": state.task, "repo_rules": await ctx.rules(), "feedback": feedback,
        "plan": plan_text(state.plan) + commands_note(acceptance_commands(ctx, state)),
        "digest": state.digest or text("pipeline", "none"),
        "localized": localized(state.localization) + _diagnosed(state),
    })


def _diagnosed(state: RunState) -> str:
    """The checked diagnosis, for the tool loop's task (the one-shot prompt has its own)."""
    d = state.diagnosis
    if d is None:
        return ""
    return "\n" + text("oneshot", "diagnosed", path=d.path, line=d.line, quote=d.quote.strip(),
                       should=" ".join(d.should.split())) + "\n"


async def _build_apply(ctx: RunContext, state: RunState, asked: Asked, payload: BaseModel
                       ) -> Values:
    # the worktree's tree comes with it from the node's way (``Ahead.trees``)
    return {"build": cast(BuildReport, payload), "attempts": state.attempts + 1}


async def _judge_ask(ctx: RunContext, state: RunState, role: Role) -> Asked:
    # the tree verify checked: judges put back whatever their commands write, so it is the
    # worktree's, and its diff was asked once
    tree = state.worktree_tree or None
    diff = await asyncio.to_thread(ctx.workspace.patch, tree) if ctx.workspace else ""
    passed = state.verify is not None and state.verify.passed
    return Asked(role, "task", {
        "task": state.task, "role": role, "repo_rules": await ctx.rules(),
        "verify": text("pipeline", "verify_passed" if passed else "verify_not_passed"),
        "digest": state.digest or text("pipeline", "none"), "plan": plan_text(state.plan),
        # a secret file the builder copied into its result is not shown to the judges either
        "diff": output_mask(ctx)(diff[:40_000]) or text("pipeline", "empty_diff"),
    })


async def _judge_apply(ctx: RunContext, state: RunState, asked: Asked, payload: BaseModel
                       ) -> Values:
    role = asked.role
    result = cast(Review, payload)
    await _discard_changes(ctx, state, role)
    ctx.telemetry.emit(Verdict(role=role, verdict=result.verdict, comments=result.comments))
    feedback, unaddressed = "", ""
    if result.verdict == "request_changes":
        comments = "\n".join(f"- {c}" for c in result.comments)
        feedback = text("pipeline", "changes_requested", role=role, comments=comments)
        # the same test the routing makes: no attempt left means nobody will make the changes
        unaddressed = role if state.attempts >= state.max_attempts else ""
    update: Values = {"feedback": feedback, "unaddressed": unaddressed}
    if ctx.agents[role].kind == "review":
        return {**update, "review": result, "reviews": state.reviews + 1}
    rounds = state.check_rounds.get(role, 0) + 1
    return {**update, "checks": {**state.checks, role: result},
            "check_rounds": {**state.check_rounds, role: rounds}}


async def _discard_changes(ctx: RunContext, state: RunState, role: Role) -> None:
    """A judge may run commands; whatever they wrote is put back, so the result is the build's."""
    ws = ctx.workspace
    if ws is None or RUN_TOOL not in ctx.agents[role].tools:
        return
    if await ctx.worktree_tree() != state.worktree_tree:
        await asyncio.to_thread(ws.restore, state.worktree_tree or None)
        ctx.telemetry.emit(Warned(role=role, message=f"{role}'s commands changed files in the "
                                  "worktree; the changes were discarded (judges are read-only)"))


_STEPS: dict[str, _Step] = {
    "plan": _Step(_plan_ask, lambda state, role: 1, _plan_apply),
    "build": _Step(_build_ask, lambda state, role: state.attempts + 1, _build_apply),
    "review": _Step(_judge_ask, lambda state, role: state.reviews + 1, _judge_apply),
    "check": _Step(_judge_ask, lambda state, role: state.check_rounds.get(role, 0) + 1,
                   _judge_apply),
}
