"""Best-of-k one-shot samples (``[roles.<build>] samples = k``): the same prompt asked up to k
times, each answer written into a worktree and sandbox of its own and checked by the
acceptance commands there, one after another, stopping at the first that passes.

One after another, not at once: on one machine a second request in flight only halves the
first's speed, while a sample sent after the first finds the prompt in the server's cache
(llama.cpp keeps the KV cache of the shared prefix; hosted APIs discount cached input). So
every sample sends the very same messages, byte for byte (``oneshot.Prompt``, built once):
only the sampling differs (``temperatures[i]``). Each sample's call time, prompt and cached
tokens are recorded (``Sample``, ``SampleFinished``) so the bench can say what the 2nd..kth
cost against the first. The kept sample's files become the run's worktree (``race.adopt``) and
verify judges them there again. Sample i is session ``builder-N-c<i>`` (1: ``builder-N``), so a
resume replays each from the journal.

A one-line request for several corrections (``line_alternatives``) makes a sample of each
further edit its reply makes, right after it: no call of its own (``Sample.alternative``: its
place among the reply's corrections), numbered after the k drawn samples.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from orchestrator.engine import mutants, oneshot
from orchestrator.engine.oneshot import read_source
from orchestrator.engine.race import (
    FATAL,
    CandidateRun,
    SessionRunner,
    adopt,
    attempt,
    best,
    prepare,
    temperature_of,
)
from orchestrator.engine.runtime import RunContext
from orchestrator.errors import OrchestrateError
from orchestrator.models.base import Choice, Completion
from orchestrator.record.events import SampleFinished, Warned
from orchestrator.session.account import SessionOutcome
from orchestrator.state import CallRecord, Role, Sample
from orchestrator.tools.jail import Jail
from orchestrator.tools.shell import CommandPolicy


async def best_of(ctx: RunContext, role: Role, n: int, prompts: Sequence[oneshot.Prompt], *,
                  k: int,
                  commands: list[str], policy: CommandPolicy, protected: frozenset[str],
                  samples: list[Sample],
                  model_step: int = 0, temperatures: tuple[float, ...] | None = None,
                  task: str = "") -> SessionOutcome:
    """Up to ``k`` samples for build attempt ``n``, sample i of the i-th of ``prompts`` (the
    last when there are fewer) at the i-th of ``temperatures`` (default: the role's); the first
    that passes (else the one with the fewest failing commands) is adopted into
    ``ctx.worktree``. Each sample is appended to ``samples`` as it ends, so an attempt the
    time budget cuts still records the samples it asked. ``task`` gives mechanical edits its
    numbers (``[roles.<build>] mutants``)."""
    assert ctx.workspace is not None, "samples need the run's workspace"
    spec = ctx.roles.roles[role]
    main = ctx.workspace
    tree = await asyncio.to_thread(main.snapshot)
    runs: list[CandidateRun] = []
    try:
        await _ask_each(ctx, role, n, prompts, k=k, tree=tree, runs=runs, samples=samples,
                        commands=commands, policy=policy, protected=protected,
                        model_step=model_step, numbers=tuple(mutants.task_numbers(task)),
                        temperatures=spec.temperatures if temperatures is None else temperatures)
    except BaseException:  # stopped (the time budget, a fatal error): no worktree is left
        for run in runs:
            with contextlib.suppress(OSError, OrchestrateError):
                run.ws.remove()  # at once: the task is being cancelled
        raise
    if all(r.error for r in runs):
        raise OrchestrateError(f"role {role}: every one-shot sample failed; sample 1: "
                               f"{runs[0].error}")
    kept = best(runs, "first")
    await asyncio.to_thread(adopt, main, kept, runs)
    assert kept.outcome is not None
    return kept.outcome


async def _ask_each(ctx: RunContext, role: Role, n: int, prompts: Sequence[oneshot.Prompt], *,
                    k: int,
                    tree: str, runs: list[CandidateRun], samples: list[Sample],
                    commands: list[str], policy: CommandPolicy, protected: frozenset[str],
                    model_step: int, temperatures: tuple[float, ...],
                    numbers: tuple[str, ...] = ()) -> None:
    """Sample after sample, each checked in its own worktree, until one passes. Samples 2..k
    that share a prompt and a temperature are asked ``sample_batch`` to a call: the call's
    further replies are held for the samples next, each still checked on its own. A failed
    one-line sample's further corrections are checked next, then (``mutants``) the mechanical
    edits of the lines it chose that no sample of the run has had yet."""
    batch = ctx.roles.roles[role].sample_batch
    edits = ctx.roles.roles[role].mutants
    # further replies of calls made, by the sample they answer, with how many their call gave
    held: dict[int, tuple[Completion, int]] = {}
    extra = k  # samples of further corrections are numbered after the k drawn ones
    for index in range(1, k + 1):
        prompt = _prompt_at(prompts, index)
        run = await prepare(ctx, role, n, index, tree, temperatures)
        runs.append(run)
        calls: list[CallRecord] = []
        more: list[tuple[Choice, ...]] = []
        again: list[float] = []  # a second turn's time (it named a file or line and stopped)
        pieces: list[tuple[str, ...]] = []  # the reply's further corrections
        chosen: list[tuple[int, ...]] = []  # the lines its one-line reply changed or named
        reply, share = held.pop(index, (None, 1))
        answers = [index] if reply is not None else _answers(prompts, temperatures, index, k,
                                                             batch)
        choices = len(answers)

        async def session(own: RunContext, i: int, temperature: float | None,
                          calls: list[CallRecord] = calls, run: CandidateRun = run,
                          prompt: oneshot.Prompt = prompt, reply: Completion | None = reply,
                          choices: int = choices, more: list[tuple[Choice, ...]] = more,
                          again: list[float] = again,
                          pieces: list[tuple[str, ...]] = pieces,
                          chosen: list[tuple[int, ...]] = chosen) -> SessionOutcome:
            asked = await oneshot.ask(
                own, role, run.session, prompt, temperature=temperature, protected=protected,
                model_step=model_step, choices=choices, reply=reply)
            calls.append(asked.record)
            more.append(asked.more)
            again.append(asked.again_s)
            pieces.append(asked.alternatives)
            chosen.append(asked.lines)
            return asked.outcome

        await _checked(run, commands, policy, session, protected)
        if reply is None:  # this sample's own call: it answered itself and the ones it holds
            further = [_further(c, calls[0]) for c in more[0]] if more and calls else []
            share = 1 + len(further)
            held.update((i, (c, share)) for i, c in zip(answers[1:], further, strict=False))
        sample = _sample(run, calls, changed=bool(run.tree) and run.tree != tree,
                         place=prompt.place, share=share, again_s=sum(again),
                         corrections=prompt.alternatives)
        samples.append(sample)
        _announce(ctx, role, run, sample, n)
        if run.passed:
            break
        further_pieces = pieces[0] if pieces and calls else ()
        if further_pieces and await _further_edits(
                ctx, role, n, run, prompt, further_pieces, calls[0], first=extra + 1,
                tree=tree, runs=runs, samples=samples, commands=commands, policy=policy,
                protected=protected, model_step=model_step, temperatures=temperatures):
            return
        extra += len(further_pieces)
        mechanical = (_mechanical(ctx, role, prompt, chosen[0], tree, numbers, edits)
                      if edits and chosen and calls else [])
        if mechanical and await _further_edits(
                ctx, role, n, run, prompt, [p for p, _ in mechanical], calls[0],
                first=extra + 1, tree=tree, runs=runs, samples=samples, commands=commands,
                policy=policy, protected=protected, model_step=model_step,
                temperatures=temperatures, kinds=[o for _, o in mechanical]):
            return
        extra += len(mechanical)


def _mechanical(ctx: RunContext, role: Role, prompt: oneshot.Prompt, lines: tuple[int, ...],
                tree: str, numbers: tuple[str, ...], limit: int) -> list[tuple[str, str]]:
    """The mechanical edits (``mutants.pieces``) of ``lines`` of the prompt's code, as it is
    in ``tree``, that no sample of the run has checked yet (``RunContext.mutated``); with
    ``mutant_lines``, of every line of a place that short, ``lines`` first."""
    span = prompt.line
    if span is None:
        return []
    lines = mutants.place_lines(span, lines, ctx.roles.roles[role].mutant_lines)
    fresh = tuple(k for k in lines if (tree, span.path, k) not in ctx.mutated)
    current = read_source(Jail(ctx.worktree), span.path) if fresh else None
    if current is None:
        return []
    ctx.mutated.update((tree, span.path, k) for k in fresh)
    return mutants.pieces(current, span, fresh, numbers=numbers, limit=limit)


async def _further_edits(ctx: RunContext, role: Role, n: int, run: CandidateRun,
                         prompt: oneshot.Prompt, pieces: Sequence[str], record: CallRecord, *,
                         first: int, tree: str, runs: list[CandidateRun],
                         samples: list[Sample], commands: list[str], policy: CommandPolicy,
                         protected: frozenset[str], model_step: int,
                         temperatures: tuple[float, ...], kinds: Sequence[str] = ()) -> bool:
    """Each further correction of ``run``'s reply (``pieces``) checked in a worktree of its
    own, as samples ``first``, ``first + 1`` ... with no call; whether one passed. With
    ``kinds`` the pieces are mechanical edits, each made by the operator of its kind."""
    for j, piece in enumerate(pieces, 2):
        kind = kinds[j - 2] if kinds else ""
        alt = await prepare(ctx, role, n, first + j - 2, tree, temperatures)
        alt.temperature = run.temperature
        runs.append(alt)
        given = _alternative(piece, record)

        async def one(own: RunContext, i: int, temperature: float | None,
                      alt: CandidateRun = alt, given: Completion = given) -> SessionOutcome:
            asked = await oneshot.ask(own, role, alt.session, prompt, temperature=temperature,
                                      protected=protected, model_step=model_step, reply=given)
            return asked.outcome

        await _checked(alt, commands, policy, one, protected)
        sample = _sample(alt, [given.record], changed=bool(alt.tree) and alt.tree != tree,
                         place=prompt.place, alternative=0 if kind else j,
                         corrections=prompt.alternatives, mutant=kind)
        samples.append(sample)
        _announce(ctx, role, alt, sample, n)
        if alt.passed:
            if kind:
                ctx.telemetry.emit(Warned(role=role, session=alt.session, message=(
                    f"the passing change is a mechanical edit ({kind}) of {prompt.place}, "
                    f"written by no model: `{piece}`; review it"), category="mechanical_edit"))
            return True
    return False


async def _checked(run: CandidateRun, commands: list[str], policy: CommandPolicy,
                   session: SessionRunner, protected: frozenset[str]) -> None:
    """``run``'s session and its acceptance commands; an error is the sample's, not the
    attempt's (the time budget and a refusal stop the attempt)."""
    try:
        await attempt(run, commands, policy, session, sorted(protected))
    except FATAL:
        raise
    except Exception as exc:  # one sample's failure is not the attempt's
        run.error = " ".join(str(exc).split())[:500] or type(exc).__name__


def _alternative(piece: str, record: CallRecord) -> Completion:
    """A further correction of ``record``'s reply, as a reply of its own: no call, no time and
    no tokens of its own (its call's record holds them)."""
    return Completion(content=piece, tool_calls=(), finish_reason="stop",
                      record=record.model_copy(update={
                          "prompt_tokens": 0, "cached_tokens": 0, "output_tokens": 0,
                          "reasoning_tokens": 0, "cost_usd": 0.0, "duration_s": 0.0,
                          "ttft_s": None}))


def _prompt_at(prompts: Sequence[oneshot.Prompt], index: int) -> oneshot.Prompt:
    return prompts[min(index, len(prompts)) - 1]


def _answers(prompts: Sequence[oneshot.Prompt], temperatures: tuple[float, ...], index: int,
             k: int, batch: int) -> list[int]:
    """The samples sample ``index``'s call answers: itself alone when it is sample 1 (it reads
    the prompt and may pass alone), else up to ``batch`` of those from it on that share its
    prompt and temperature (interleaved places, ``building.interleaved``, may lie between:
    their replies wait for their turn)."""
    if index == 1 or batch <= 1:
        return [index]
    prompt, temperature = _prompt_at(prompts, index), temperature_of(temperatures, index)
    alike = [i for i in range(index + 1, k + 1) if _prompt_at(prompts, i) is prompt
             and temperature_of(temperatures, i) == temperature]
    return [index, *alike][:batch]


def _further(choice: Choice, record: CallRecord) -> Completion:
    """A further reply of ``record``'s call, as a completion of its own: no tokens of its own
    (the call's record holds them all), the call's times (each sample takes its share)."""
    return Completion(content=choice.content, tool_calls=(), finish_reason=choice.finish_reason,
                      record=record.model_copy(update={
                          "prompt_tokens": 0, "cached_tokens": 0, "output_tokens": 0,
                          "reasoning_tokens": 0, "cost_usd": 0.0}))


def _sample(run: CandidateRun, calls: list[CallRecord], *, changed: bool, place: str = "",
            share: int = 1, again_s: float = 0.0, alternative: int = 0,
            corrections: int = 1, mutant: str = "") -> Sample:
    call = calls[-1] if calls else CallRecord(role="", session="", requested_model="")
    return Sample(index=run.index, temperature=run.temperature,
                  call_s=round((call.duration_s - again_s) / share + again_s, 3), batch=share,
                  ttft_s=None if call.ttft_s is None else round(call.ttft_s / share, 3),
                  checks_s=round(sum(c.duration_s for c in run.checks or []), 3),
                  prompt_tokens=call.prompt_tokens, cached_tokens=call.cached_tokens,
                  output_tokens=call.output_tokens, changed=changed, passed=run.passed,
                  place=place, again_s=round(again_s, 3), alternative=alternative,
                  corrections=corrections, mutant=mutant)


def _announce(ctx: RunContext, role: Role, run: CandidateRun, sample: Sample, n: int) -> None:
    ctx.telemetry.emit(SampleFinished(
        role=role, session=run.session, attempt=n, index=sample.index,
        temperature=sample.temperature, call_s=sample.call_s, ttft_s=sample.ttft_s,
        batch=sample.batch,
        checks_s=sample.checks_s,
        prompt_tokens=sample.prompt_tokens, cached_tokens=sample.cached_tokens,
        output_tokens=sample.output_tokens, changed=sample.changed, passed=sample.passed,
        place=sample.place, again_s=sample.again_s, alternative=sample.alternative,
        corrections=sample.corrections, mutant=sample.mutant,
        error=run.error, wall_s=round(time.monotonic() - run.started, 3)))
