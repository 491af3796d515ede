"""One build attempt: the rung of the strategy ladder it is (``ladder.py``), run within what
is left of the run's time budget, and recorded as an ``Attempt``.

The rung decides the way: a race of candidates (``parallel`` > 1, ``race.py``), a one-shot
call for whole files (``oneshot.py``; with ``samples`` = k, best-of-k checked samples,
``samples.py``), the same with the failure restated as facts, the tool loop, or the next model
of the role's chain. A judge's requested changes always go to the tool loop. Whether the
attempt changed anything is measured (the worktree's tree before and after, the failing tests
left out, since verify puts those back; the trees are read by the run's open ``cat-file``,
``workspace/treediff.py``): an attempt that changed nothing is not a failed fix,
so the same-failure stop does not count it (``graph._repeating``) and the next attempt climbs.
``run.time_budget_s`` bounds the whole run (``deadline.py``): the attempt under way is stopped
when it runs out, and the run fails, saying so. Each attempt starts from
the kept tree (``undo``): the start's, or the last attempt's that fixed a failing test and broke
none; a failed attempt's other changes are undone, and the next prompt says so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from orchestrator.config.prompts import text
from orchestrator.engine import leadlines, oneshot
from orchestrator.engine.deadline import OutOfTime, bounded
from orchestrator.engine.ladder import ONE_SHOTS, Rung, rung_for
from orchestrator.engine.prompting import acceptance_commands
from orchestrator.engine.race import race, session_of, temperature_of
from orchestrator.engine.runtime import RunContext
from orchestrator.engine.samples import best_of
from orchestrator.engine.sessions import run_session
from orchestrator.engine.toolbox import policy_of, protected_tests
from orchestrator.record.events import Warned
from orchestrator.session.account import SessionOutcome
from orchestrator.state import Attempt, BuildReport, Role, RunState, Sample, Strategy
from orchestrator.workspace.treediff import Unreadable, differs_outside

Values = dict[str, Any]


def usable_steps(ctx: RunContext, role: Role) -> list[int]:
    """Positions in the role's model chain the ladder may climb to: its model, and each
    fallback whose provider has a key (the pool leaves the others out)."""
    roles = ctx.roles
    chain = roles.chain(role)
    return [0, *(i for i, alias in enumerate(chain) if i and ctx.env.get(
        roles.providers[roles.models[alias].provider].api_key_env))]


async def attempt(ctx: RunContext, state: RunState, role: Role, task: str, n: int
                  ) -> tuple[SessionOutcome, Values]:
    """Build attempt ``n`` of ``role`` on ``task``: its outcome and what the state gains (the
    worktree's tree, the attempt's record, the race's)."""
    spec = ctx.roles.roles[role]
    steps = usable_steps(ctx, role)
    loc = state.localization
    line_first = loc is not None and not loc.pinned and bool(state.leads)
    rung, last = rung_for(spec, len(steps), n, line_first=line_first)
    rung = Rung(rung.strategy, steps[rung.model_step], rung.resampled)
    started = time.monotonic()
    undone = await undo(ctx, state, role, n)
    before = await ctx.ahead.first_tree(ctx.worktree_tree)
    samples: list[Sample] = []
    try:
        strategy, outcome, built, diagnosed = await bounded(ctx, lambda: _run(
            ctx, state, role, task, n, rung, samples, undone=undone))
    except OutOfTime:
        strategy, diagnosed = rung.strategy, False
        built = {"out_of_time": True, "out_of_time_in": "building",
                 "worktree_tree": await ctx.worktree_tree()}
        outcome = SessionOutcome(session_of(role, n, 1), BuildReport(
            summary=text("pipeline", "out_of_time", budget=ctx.roles.run.time_budget_s)), 0, 0)
    after = built.get("worktree_tree") or await ctx.worktree_tree()
    changed = await _changed(ctx, state, before, after)
    record = Attempt(n=n, strategy=strategy, model_step=rung.model_step, changed=changed,
                     duration_s=round(time.monotonic() - started, 3), last_rung=last,
                     samples=samples, diagnosis=diagnosed)
    # a race's next round builds on its kept candidate (``race.py``): nothing is undone there
    keeps = not state.kept_tree and ctx.workspace is not None and spec.parallel <= 1
    start = {"kept_tree": before, "start_tree": before} if keeps else {}
    return outcome, {**start, **built, "attempt_log": [*state.attempt_log, record]}


def needs_no_plan(ctx: RunContext, state: RunState) -> bool:
    """Whether nothing the plan or the explorers say can change the first one-shot's prompt:
    the failure pins the code, the explorers will be skipped, the commands are configured, no
    human approves the plan first, and the build role's first attempt is one plain one-shot."""
    role = ctx.pipeline.build
    loc = state.localization
    if (role is None or state.mode != "run" or state.approve_plan or ctx.workspace is None
            or loc is None or not loc.pinned or not ctx.roles.verify.commands
            or (ctx.pipeline.explore is not None and ctx.roles.run.explore_when_pinned)):
        return False
    spec = ctx.roles.roles[role]
    return spec.one_shot and spec.parallel <= 1 and spec.samples <= 1


async def ask_ahead(ctx: RunContext, state: RunState) -> None:
    """With ``run.first_build = "with_plan"``: ask the first one-shot now, while the planner
    works, when it needs no plan (``needs_no_plan``); attempt 1 uses the reply if it asks the
    very same request (``Ahead.first_build``)."""
    role = ctx.pipeline.build
    if role is None or ctx.roles.run.first_build != "with_plan" or not needs_no_plan(ctx, state):
        return
    prompt = await oneshot.prompt_for(ctx, state, 1)
    if prompt is None:
        return
    spec = ctx.roles.roles[role]
    temperature = temperature_of(spec.temperatures, 1)
    client = ctx.pool.for_role(role, temperature=temperature)
    ctx.ahead.ask_first_build(prompt.messages, temperature, client.complete(
        prompt.messages, session=session_of(role, 1, 1)))


async def undo(ctx: RunContext, state: RunState, role: Role, n: int) -> bool:
    """Put the kept tree back before attempt ``n`` when verify did not keep the attempt
    before's (``nodes._kept``: it fixed no failing test without breaking another). A one-shot
    is a fresh sample, not a repair of the last one's damage: in the live suite a one-line
    answer wrote a statement into a dict, and every later attempt was shown that file.
    Whether it put them back."""
    ws = ctx.workspace
    if (ws is None or not state.kept_tree or state.verify is None or state.verify.passed
            or await ctx.worktree_tree() == state.kept_tree):
        return False
    await asyncio.to_thread(ws.restore, state.kept_tree)
    since = "the start" if state.kept_failing is None else "the last attempt that fixed a test"
    ctx.telemetry.emit(Warned(role=role, category="attempt_undone", message=(
        f"attempt {n - 1} fixed no failing test without breaking another: its changes were "
        f"undone, attempt {n} starts from the files of {since}")))
    return True


def as_kept(state: RunState) -> RunState:
    """``state`` as the files an undone attempt's successor starts from would have it: verify's
    word on the kept tree (the preflight's when that is the start), not on the undone files.
    A one-line request shows that code, so it shows that failure: live (r22, r26, r27) the
    rounds after an undone one were shown the failure of another line's wrong edit beside the
    code as it was, and none of 25 draws at the right place passed, against 11 of 33 in the
    first rounds (and about one in four at 0.8 off line: ``bench/line_samples.py --at-fix``)."""
    if state.kept_failing is not None and state.kept_verify is None:
        return state  # a kept attempt's word was not recorded (a run resumed from before it)
    return state.model_copy(update={"verify": state.kept_verify,
                                    "feedback": state.kept_feedback})


async def _changed(ctx: RunContext, state: RunState, before: str, after: str) -> bool:
    """Whether the attempt changed a file besides the failing tests (verify puts those back)."""
    protected = protected_tests(ctx, state)
    if ctx.workspace is None or not before or not after or before == after or not protected:
        return before != after  # trees differ exactly when a file does: no git to ask
    if ctx.citations is not None:  # the trees read by the run's open `cat-file`: no process
        try:
            return await asyncio.to_thread(differs_outside, ctx.citations.tree, before, after,
                                           protected)
        except (Unreadable, OSError, ValueError):
            pass  # git says it instead
    paths = await asyncio.to_thread(ctx.workspace.changed_between, before, after)
    return any(p not in protected for p in paths)


async def _run(ctx: RunContext, state: RunState, role: Role, task: str, n: int, rung: Rung,
               samples: list[Sample], *, undone: bool
               ) -> tuple[Strategy, SessionOutcome, Values, bool]:
    """The attempt's way, its outcome, what the state gains, and whether a checked diagnosis
    was in its prompt."""
    spec = ctx.roles.roles[role]
    if spec.parallel > 1 and ctx.workspace is not None:
        outcome, built = await _race(ctx, state, role, task, n)
        return "race", outcome, built, False
    if state.verify is not None and state.verify.passed and state.feedback:
        outcome, built = await _tool_loop(ctx, state, role, task, n)  # a judge's changes
        return "changes", outcome, built, False
    one_shot = rung.strategy in ONE_SHOTS or (rung.strategy == "next_model" and spec.one_shot)
    if one_shot:
        once = await _one_shot(ctx, state, role, n, rung, samples, undone=undone)
        if once is not None:
            return once[0], once[1], {"worktree_tree": await ctx.worktree_tree()}, once[2]
    outcome, built = await _tool_loop(ctx, state, role, task, n, model_step=rung.model_step)
    return ("next_model" if rung.model_step else "tool_loop"), outcome, built, False


async def _one_shot(ctx: RunContext, state: RunState, role: Role, n: int, rung: Rung,
                    samples: list[Sample], *, undone: bool
                    ) -> tuple[Strategy, SessionOutcome, bool] | None:
    """One call for whole files (or for one line), or best-of-k checked samples of it, and
    the strategy it was; None when the one-shot does not apply (nothing pinned small enough,
    a judge's changes). A ``one_line`` rung with no code to point at asks for whole files
    with the facts (``one_shot_fact``)."""
    spec = ctx.roles.roles[role]
    strategy = rung.strategy
    prompts = (await leadlines.line_prompts_for(ctx, as_kept(state) if undone else state, n)
               if strategy == "one_line" else [])
    if not prompts:
        strategy = "one_shot_fact" if strategy == "one_line" else strategy
        whole = await oneshot.prompt_for(ctx, state, n, restate=strategy != "one_shot")
        prompts = [whole] if whole is not None else []
    if not prompts:
        return None
    prompt = prompts[0]
    protected = protected_tests(ctx, state)
    temps = (max(spec.temperatures),) if rung.resampled and spec.temperatures else spec.temperatures
    line = prompt.line is not None
    k = spec.line_samples if line and spec.line_samples > 1 else spec.samples
    low = min(spec.temperatures, default=None)  # a first list's, even in a resampled round
    before = leadlines.visited(state.attempt_log, low) if line else {}
    asked = leadlines.listed_again(
        interleaved(prompts, k if not line or leadlines.favoured(prompt) else 1, n),
        spec.line_alternatives, before)
    temperatures = first_visits(asked, temps, n, leadlines.first_lists(asked, before),
                                low) if line else temps
    if len(asked) > 1 and ctx.workspace is not None and ctx.sandbox is not None:
        outcome = await best_of(ctx, role, n, asked, k=len(asked),
                                commands=acceptance_commands(ctx, state),
                                policy=policy_of(ctx), protected=protected, samples=samples,
                                model_step=rung.model_step, temperatures=temperatures,
                                task=state.task)
        return strategy, outcome, prompt.diagnosed
    asked1 = await oneshot.ask(ctx, role, session_of(role, n, 1), prompt,
                               temperature=temperature_of(temps, n), protected=protected,
                               model_step=rung.model_step)
    return strategy, asked1.outcome, prompt.diagnosed


def interleaved(prompts: list[oneshot.Prompt], k: int, n: int = 1) -> list[oneshot.Prompt]:
    """Sample i's prompt in attempt ``n``. The first attempt: the first ``k`` times, each other
    once, the first's between the others' (P, L1, P, L2, P, L3, L4 ...): live, the explorers'
    place held the bug on three of eight explore-needed tasks (one passed on its third sample)
    and a caller on three, where a lead held it. A later attempt: as many samples, spread
    evenly over the places from one further along each time (attempt 2: L1, L2, L3, L4, P,
    L1 ...): the first attempt's favourite has failed by then, and live (routed r26-r30) in 10
    of the 17 explore-needed runs that failed, the line to fix lay in a lead that got under a
    third of the samples, the rest going to the explorers' place. Tried and set aside (r64):
    P, L1 ... Ln, P, P — the temperatures then cycled by sample (0, 0.8, 0.8), so the order
    also said which place got the greedy sample, and xp-js-label-address's lead, which had
    passed greedy in every draw, got only 0.8 and failed (now each place's first sample is
    at the attempt's temperature, ``first_visits``)."""
    if n > 1 and len(prompts) > 1:
        start = (n - 1) % len(prompts)
        order = prompts[start:] + prompts[:start]
        return [order[i % len(order)] for i in range(k + len(prompts) - 1)]
    first, rest = prompts[:1] * k, list(prompts[1:])
    out: list[oneshot.Prompt] = []
    while first or rest:
        out += [first.pop()] if first else []
        out += [rest.pop(0)] if rest else []
    return out


def first_visits(asked: list[oneshot.Prompt], temps: tuple[float, ...], n: int,
                 greedy: Sequence[bool] = (), low: float | None = None) -> tuple[float, ...]:
    """Each asked line's temperature in attempt ``n``: a place's first sample at the attempt's
    own, its repeats at the highest of ``temps`` (a line is a few tokens: at one temperature
    a repeat would mostly give them back), the samples ``greedy`` flags (a place's first
    list, ``leadlines.first_lists``) at ``low`` (default: the lowest); none when the role
    sets none. Over five live draws (r42-r62) the samples at the fix's lines passed 7 of 22 on
    a place's first visit at temperature 0, 7 of 43 on a first visit at 0.8 and 0 of 27 on a
    repeat (r87, the lists greedy: 4 of 8 routed, 3 of 7 solo, at 0.8 2 of 11, 2 of 13); before,
    temperatures cycled by sample index (0, 0.8, 0.8), so a lead's first visit was greedy
    only when it fell on every third sample. (Whole-file samples take ``temps`` in turn.)"""
    first = temperature_of(temps, n)
    if first is None:
        return ()
    low = min(temps) if low is None else low
    return tuple(low if i < len(greedy) and greedy[i] else
                 max(temps) if prompt in asked[:i] else first for i, prompt in enumerate(asked))


async def _tool_loop(ctx: RunContext, state: RunState, role: Role, task: str, n: int, *,
                     model_step: int = 0) -> tuple[SessionOutcome, Values]:
    """The builder's tool loop; attempt n samples at ``temperatures[n - 1]`` (a retry
    differs). The worktree's tree is taken while the model writes (``Ahead.trees``)."""
    temperature = temperature_of(ctx.roles.roles[role].temperatures, n)
    ahead = ctx.ahead.trees(ctx.workspace)
    try:
        outcome = await run_session(ctx, role, task, n=n, protected=protected_tests(ctx, state),
                                    temperature=temperature, watch=ahead, model_step=model_step)
        return outcome, {"worktree_tree": await ahead.tree()}
    finally:
        await ahead.settle()


async def _race(ctx: RunContext, state: RunState, role: Role, task: str, n: int
                ) -> tuple[SessionOutcome, Values]:
    """k candidate builds of ``task`` race (``race.py``); the kept one's files are the build."""
    protected = protected_tests(ctx, state)

    async def candidate(own: RunContext, index: int, temperature: float | None
                        ) -> SessionOutcome:
        return await run_session(own, role, task, n, candidate=index, temperature=temperature,
                                 protected=protected)

    record, outcome = await race(ctx, role, n, commands=acceptance_commands(ctx, state),
                                 policy=policy_of(ctx), session=candidate, protected=protected)
    return outcome, {"races": [*state.races, record], "worktree_tree": await ctx.worktree_tree()}
