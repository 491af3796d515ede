"""The generic agent node: any role, given its kind, runs as one session of its agent.

``agent_node(role, kind)`` renders the role's task from its kind's values (``_STEPS``: what the
planner, the builder or a judge is told), runs the session on the role's model with the tools
its agent file asks for, and turns the submission into the run's state update. A judge may run
commands; what they write is put back, so a judge never changes the result.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, cast

from langgraph.runtime import Runtime
from pydantic import BaseModel

from orchestrator.config.kinds import EDIT_TOOLS, RUN_TOOL, Kind
from orchestrator.config.prompts import text
from orchestrator.engine import oneshot
from orchestrator.engine.preflight import preflight
from orchestrator.engine.race import race, session_of, temperature_of
from orchestrator.engine.runtime import RunContext
from orchestrator.errors import MissingCredentials
from orchestrator.evidence import questions
from orchestrator.evidence.known import known_tests
from orchestrator.evidence.verify import DirSource, FileSource, GitCommitSource
from orchestrator.localize import localization as localize
from orchestrator.session.account import SessionOutcome
from orchestrator.session.context import policy_for
from orchestrator.session.handoff import Summarizer
from orchestrator.session.loop import Session
from orchestrator.state import BuildReport, KnownTests, Plan, Race, Review, Role, RunState
from orchestrator.tools.base import Tool, Toolbox, WriteWatch
from orchestrator.tools.edit import edit_tools
from orchestrator.tools.explorer import explorer_tools
from orchestrator.tools.gitread import GitHistory
from orchestrator.tools.shell import DEFAULT_DENY, CommandPolicy, scrubbed_env, shell_tool
from orchestrator.workspace.ahead import TreeAhead

NodeFn = Callable[..., Awaitable[dict[str, Any]]]


def policy_of(ctx: RunContext) -> CommandPolicy:
    """The built-in deny list plus the role map's own; ``allow`` patterns win over both."""
    settings = ctx.roles.policy
    return CommandPolicy(allow=list(settings.allow), deny=[*DEFAULT_DENY, *settings.deny])


def _toolbox(ctx: RunContext, role: Role, protected: frozenset[str] = frozenset(),
             watch: WriteWatch | None = None) -> Toolbox:
    """The tools the role's agent file asks for (its kind has allowed them already)."""
    wanted = set(ctx.agents[role].tools)
    available: list[Tool] = list(explorer_tools(ctx.worktree, history=_history(ctx)))
    if wanted & set(EDIT_TOOLS):
        available += edit_tools(ctx.worktree, edit_format=ctx.roles.model_for(role).edits,
                                protected=protected)
    if RUN_TOOL in wanted and ctx.sandbox is not None:
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
    return Toolbox.of((t for t in available if t.name in wanted), watch)


def _history(ctx: RunContext) -> GitHistory:
    """git_log/git_blame read the user's (trusted) repository, never a builder-writable .git."""
    if ctx.workspace is None:
        return GitHistory(root=ctx.worktree)
    return GitHistory(root=ctx.worktree, git_dir=ctx.workspace.git_dir, rev=ctx.base_commit)


async def run_session(ctx: RunContext, role: Role, task: str, n: int, *, candidate: int = 1,
                      temperature: float | None = None,
                      protected: frozenset[str] = frozenset(),
                      tools: bool = True, watch: WriteWatch | None = None) -> SessionOutcome:
    """One session of ``role`` on ``task``; ``candidate`` > 1 is a racing build's other
    candidates (``race.py``); ``temperature`` overrides the model's; ``protected`` files (the
    failing tests) cannot be edited; without ``tools`` the session can only submit; ``watch``
    sees its writing tools run."""
    agent = ctx.agents[role]
    spec = ctx.roles.roles[role]
    session = Session(
        # derived from the state, never a counter: a resumed run must send the same ids
        session_id=session_of(role, n, candidate),
        agent=agent,
        client=ctx.pool.for_role(role, temperature=temperature),
        toolbox=_toolbox(ctx, role, protected, watch) if tools else Toolbox.of(()),
        telemetry=ctx.telemetry,
        max_turns=spec.max_turns,
        policy=policy_for(spec, ctx.roles.model_for(role)),
        summarizer=_summarizer(ctx) if agent.kind != "summarize" else None,
        run_dir=ctx.run_dir,
    )
    return await session.run(task)


def _summarizer(ctx: RunContext) -> Summarizer | None:
    """The summarizer role's own agent, client and window, for the handoffs of forks."""
    role = ctx.pipeline.summarizer
    agent, spec = ctx.agents[role], ctx.roles.roles[role]
    try:
        client = ctx.pool.for_role(role)
    except MissingCredentials:  # forks then get a plain handoff instead of failing the role
        return None
    return Summarizer(agent=agent, client=client, policy=policy_for(spec, ctx.roles.model_for(role)),
                      max_turns=spec.max_turns)


# --- the generic agent node ----------------------------------------------------------------------

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


@dataclass(frozen=True)
class _Step:
    """What a kind of role is told, which session it is, and what its submission changes."""

    ask: Callable[[RunContext, RunState, Role], Awaitable[Asked]]
    session: Callable[[RunState, Role], int]
    apply: Callable[[RunContext, RunState, Asked, BaseModel], Awaitable[Values]]


def agent_node(role: Role, kind: Kind, name: str | None = None) -> NodeFn:
    """The node that runs ``role``: a session on its model with its tools and prompts."""
    step = _STEPS[kind]

    async def node(state: RunState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        ctx = runtime.context
        asked = await step.ask(ctx, state, role)
        task = ctx.agents[role].render_task(asked.template, **asked.values)
        n = step.session(state, role)
        built: Values = {}  # a build's result: the worktree's tree (and its race)
        spec = ctx.roles.roles[role]
        if kind == "build" and spec.parallel > 1 and ctx.workspace is not None:
            record, outcome = await _race(ctx, state, role, task, n)
            built = {"races": [*state.races, record], "worktree_tree": await worktree_tree(ctx)}
        elif kind == "build":  # attempt n samples at temperatures[n - 1]: a retry differs
            temperature = temperature_of(spec.temperatures, n)
            protected = protected_tests(ctx, state)
            once = (await _one_shot(ctx, state, role, n, temperature, protected)
                    if spec.one_shot and n <= spec.one_shot_attempts else None)
            ahead = TreeAhead(ctx.workspace.snapshot if ctx.workspace else lambda: "")
            try:
                outcome = once or await run_session(ctx, role, task, n=n, protected=protected,
                                                    temperature=temperature, watch=ahead)
                built = {"worktree_tree": await ahead.tree()}
            finally:
                await ahead.settle()
        else:
            outcome = await run_session(ctx, role, task, n=n, tools=_browses(ctx, kind, asked))
        update = await step.apply(ctx, state, replace(asked, task=task), outcome.payload)
        return {**asked.update, **update, **built}

    node.__name__ = name or role
    return node


def _browses(ctx: RunContext, kind: Kind, asked: Asked) -> bool:
    """Whether the role gets its tools: a plan role whose failure is pinned may not need them
    (``run.plan_tools_when_pinned``)."""
    loc = asked.update.get("localization")
    return not (kind == "plan" and isinstance(loc, localize.Localization) and loc.pinned
                and not ctx.roles.run.plan_tools_when_pinned)


async def _plan_ask(ctx: RunContext, state: RunState, role: Role) -> Asked:
    # localisation (issue 15): the configured acceptance commands run before any model call
    loc = state.localization
    if loc is None and state.mode == "run":
        loc = await preflight(ctx, list(ctx.roles.verify.commands), policy_of(ctx))
    located = _localized(loc)
    if loc is not None and loc.pinned:  # questions only for what the failure does not show
        located += text("evidence", "localized_pinned") + "\n"
    values = {"task": state.task, "question": state.task, "repo_rules": ctx.repo_rules,
              "localized": f"\n{located}" if located else ""}
    template = "explore" if state.mode == "explore" else "task"
    return Asked(role, template, values, {"localization": loc} if loc is not None else {})


async def _plan_apply(ctx: RunContext, state: RunState, asked: Asked, payload: BaseModel) -> Values:
    result = _clean_questions(ctx, cast(Plan, payload), state, asked)
    if state.mode == "explore" and not result.questions:  # a question is its own sub-question
        result = result.model_copy(update={"questions": [state.task]})
    update: Values = {"plan": result}
    if state.mode != "run":
        return update
    loc = asked.update.get("localization")
    if loc is None:  # only the plan named the commands
        loc = update["localization"] = await preflight(ctx, list(result.acceptance),
                                                       policy_of(ctx))
    if state.tests is None:  # what explorers are told about the tests (issue 16)
        update["tests"] = await asyncio.to_thread(_known_tests, ctx, result, state.task, loc)
    if _skip_explore(ctx, result, loc):
        update["explore_skipped"] = True
        ctx.telemetry.emit(
            "explore_skipped", role=ctx.pipeline.explore, questions=list(result.questions),
            suspects=list(loc.suspects) if loc else [],
            reason="the failing tests already point at the code to change "
                   "(run.explore_when_pinned = true explores anyway)")
    return update


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
    with source_of(ctx) as src:
        return known_tests(src, commands=commands, files=plan.files_to_touch, task=task,
                           localization=loc)


@contextlib.contextmanager
def source_of(ctx: RunContext) -> Iterator[FileSource]:
    """Files at the run's commit, or the working tree for `explore`."""
    if ctx.workspace is None:
        yield DirSource(ctx.worktree)
        return
    if ctx.citations is not None:  # the run's one reader of its commit
        yield ctx.citations
        return
    with GitCommitSource(ctx.repo, ctx.base_commit) as source:
        yield source


def _localized(loc: localize.Localization | None) -> str:
    found = localize.render(loc) if loc is not None else ""
    return f"{found}\n" if found else ""


def _clean_questions(ctx: RunContext, plan: Plan, state: RunState, asked: Asked) -> Plan:
    """Explorers only for real, distinct questions (small planners copy their prompt)."""
    prompt = [ctx.agents[asked.role].system, asked.task]
    kept, dropped = questions.clean(plan.questions, prompt=prompt, allowed=[state.task])
    if not dropped:
        return plan
    ctx.telemetry.emit("warning", role=asked.role, session=f"{asked.role}-1",
                       message=f"{len(dropped)} question(s) dropped: " + "; ".join(dropped)[:500])
    return plan.model_copy(update={"questions": kept})


async def _build_ask(ctx: RunContext, state: RunState, role: Role) -> Asked:
    feedback = text("pipeline", "feedback", feedback=state.feedback) + "\n" if state.feedback else ""
    return Asked(role, "task", {
        "task": state.task, "repo_rules": ctx.repo_rules, "feedback": feedback,
        "plan": plan_text(state.plan) + commands_note(acceptance_commands(ctx, state)),
        "digest": state.digest or text("pipeline", "none"),
        "localized": _localized(state.localization),
    })


async def _race(ctx: RunContext, state: RunState, role: Role, task: str, n: int
                ) -> tuple[Race, SessionOutcome]:
    """k candidate builds of ``task`` race (``race.py``); the kept one's files are the build."""

    protected = protected_tests(ctx, state)

    async def candidate(own: RunContext, index: int, temperature: float | None
                        ) -> SessionOutcome:
        return await run_session(own, role, task, n, candidate=index, temperature=temperature,
                                 protected=protected)

    return await race(ctx, role, n, commands=acceptance_commands(ctx, state),
                      policy=policy_of(ctx), session=candidate, protected=protected)


async def _one_shot(ctx: RunContext, state: RunState, role: Role, n: int,
                    temperature: float | None, protected: frozenset[str]) -> SessionOutcome | None:
    """Build attempt ``n`` as one call for whole files (``oneshot.py``); ``None`` when the
    failure pins no file small enough to show whole (the tool loop runs instead). A later
    attempt is shown the files as they are now, the failure verify saw and what the attempt
    before did."""
    loc = state.localization
    again = n > 1
    if again and (state.verify is None or state.verify.passed or not state.feedback):
        return None  # a judge's requested changes: the tool loop takes those
    shown = await asyncio.to_thread(oneshot.shown_files, ctx.worktree, loc)
    if shown is None or loc is None:
        return None
    sid = session_of(role, n, 1)
    client = ctx.pool.for_role(role, temperature=temperature)
    previous = state.build.summary if state.build else text("pipeline", "none")
    messages = oneshot.messages(
        system=text("oneshot", "system"), task=state.task, loc=loc, shown=shown,
        commands=acceptance_commands(ctx, state),
        failure=state.feedback if again else None, goal=state.plan.goal if state.plan else "",
        feedback=text("oneshot", "again", previous=previous) if again else "")
    route = client.route
    ctx.telemetry.emit("role_started", role=role, session=sid, model=route.model.id,
                       provider=route.provider_name, tier=route.tier, effort=route.effort,
                       purpose="one_shot", window=route.model.context_window)
    started = time.monotonic()
    with ctx.telemetry.busy("call"):
        completion = await client.complete(messages, session=sid)
    record = completion.record
    ctx.telemetry.call(record, (started, time.monotonic()), messages=messages,
                       reply=completion.content)
    # the tests are parsed too, so that rewriting one is refused by the jail, and said
    changed = oneshot.parse_files(completion.content or "", [*shown.sources, *shown.tests])
    written, refused = await oneshot.write_files(ctx.worktree, changed, protected)
    for why in refused:
        ctx.telemetry.emit("warning", role=role, session=sid, message=f"one-shot write refused: {why}")
    used = (record.prompt_tokens or 0) + record.output_tokens
    peak = round(used / route.model.context_window, 4) if route.model.context_window else 0.0
    ctx.telemetry.emit("role_finished", role=role, session=sid, turns=1, tool_calls=len(written),
                       peak_context=peak, lineage_peak_context=peak, forks=0, masked=0, paged=0,
                       root=sid)
    why = "; ".join(refused) or "no fenced file under a path it may change"
    summary = (text("oneshot", "wrote", files=", ".join(written)) if written else
               text("oneshot", "wrote_nothing", why=why))
    return SessionOutcome(sid, BuildReport(summary=summary, files_changed=written),
                          tool_calls=len(written), turns=1, messages=messages, peak_context=peak,
                          lineage=(sid,))


def protected_tests(ctx: RunContext, state: RunState) -> frozenset[str]:
    """The failing tests the preflight found: they define the task, so builders may not edit
    them (``run.protect_tests``); verify puts back what a command changed in them."""
    loc = state.localization
    if loc is None or loc.passed or not ctx.roles.run.protect_tests:
        return frozenset()
    return frozenset(loc.tests)


async def _build_apply(ctx: RunContext, state: RunState, asked: Asked, payload: BaseModel
                       ) -> Values:
    # the worktree's tree comes with it from the node (``TreeAhead``)
    return {"build": cast(BuildReport, payload), "attempts": state.attempts + 1}


async def _judge_ask(ctx: RunContext, state: RunState, role: Role) -> Asked:
    # the tree verify checked: judges put back whatever their commands write, so it is the
    # worktree's, and its diff was asked once
    tree = state.worktree_tree or None
    diff = await asyncio.to_thread(ctx.workspace.patch, tree) if ctx.workspace else ""
    passed = state.verify is not None and state.verify.passed
    return Asked(role, "task", {
        "task": state.task, "role": role, "repo_rules": ctx.repo_rules,
        "verify": text("pipeline", "verify_passed" if passed else "verify_not_passed"),
        "digest": state.digest or text("pipeline", "none"), "plan": plan_text(state.plan),
        "diff": diff[:40_000] or text("pipeline", "empty_diff"),
    })


async def _judge_apply(ctx: RunContext, state: RunState, asked: Asked, payload: BaseModel
                       ) -> Values:
    role = asked.role
    result = cast(Review, payload)
    await _discard_changes(ctx, state, role)
    ctx.telemetry.emit("review", role=role, verdict=result.verdict, comments=result.comments)
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
    if await worktree_tree(ctx) != state.worktree_tree:
        await asyncio.to_thread(ws.restore, state.worktree_tree or None)
        ctx.telemetry.emit("warning", role=role, message=f"{role}'s commands changed files in "
                           "the worktree; the changes were discarded (judges are read-only)")


_STEPS: dict[str, _Step] = {
    "plan": _Step(_plan_ask, lambda state, role: 1, _plan_apply),
    "build": _Step(_build_ask, lambda state, role: state.attempts + 1, _build_apply),
    "review": _Step(_judge_ask, lambda state, role: state.reviews + 1, _judge_apply),
    "check": _Step(_judge_ask, lambda state, role: state.check_rounds.get(role, 0) + 1,
                   _judge_apply),
}


def plan_text(plan: Plan | None) -> str:
    """The plan as the builder and the judges read it."""
    if plan is None:
        return text("pipeline", "no_plan")
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(plan.steps, 1))
    accept = "\n".join(text("pipeline", "command", command=c) for c in plan.acceptance)
    return text("pipeline", "plan", goal=plan.goal, steps=steps,
                acceptance=accept or text("pipeline", "no_commands"))


def acceptance_commands(ctx: RunContext, state: RunState) -> list[str]:
    configured = list(ctx.roles.verify.commands)
    return configured or (list(state.plan.acceptance) if state.plan else [])


async def worktree_tree(ctx: RunContext) -> str:
    """The worktree's files as a tree object, recorded in the checkpoint for an exact resume."""
    return await asyncio.to_thread(ctx.workspace.snapshot) if ctx.workspace else ""


def commands_note(commands: list[str]) -> str:
    if not commands:
        return ""
    listed = "\n".join(text("pipeline", "command", command=c) for c in commands)
    return text("pipeline", "commands_note", commands=listed)
