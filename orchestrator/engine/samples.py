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
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from orchestrator.engine import oneshot
from orchestrator.engine.race import FATAL, CandidateRun, adopt, attempt, best, prepare
from orchestrator.engine.runtime import RunContext
from orchestrator.errors import OrchestrateError
from orchestrator.record.events import SampleFinished
from orchestrator.session.account import SessionOutcome
from orchestrator.state import CallRecord, Role, Sample
from orchestrator.tools.shell import CommandPolicy


async def best_of(ctx: RunContext, role: Role, n: int, prompts: Sequence[oneshot.Prompt], *,
                  k: int,
                  commands: list[str], policy: CommandPolicy, protected: frozenset[str],
                  samples: list[Sample],
                  model_step: int = 0, temperatures: tuple[float, ...] | None = None
                  ) -> SessionOutcome:
    """Up to ``k`` samples for build attempt ``n``, sample i of the i-th of ``prompts`` (the
    last when there are fewer) at the i-th of ``temperatures`` (default: the role's); the first
    that passes (else the one with the fewest failing commands) is adopted into
    ``ctx.worktree``. Each sample is appended to ``samples`` as it ends, so an attempt the
    time budget cuts still records the samples it asked."""
    assert ctx.workspace is not None, "samples need the run's workspace"
    spec = ctx.roles.roles[role]
    main = ctx.workspace
    tree = await asyncio.to_thread(main.snapshot)
    runs: list[CandidateRun] = []
    try:
        await _ask_each(ctx, role, n, prompts, k=k, tree=tree, runs=runs, samples=samples,
                        commands=commands, policy=policy, protected=protected,
                        model_step=model_step,
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
                    model_step: int, temperatures: tuple[float, ...]) -> None:
    """Sample after sample, each checked in its own worktree, until one passes."""
    for index in range(1, k + 1):
        prompt = prompts[min(index, len(prompts)) - 1]
        run = await prepare(ctx, role, n, index, tree, temperatures)
        runs.append(run)
        calls: list[CallRecord] = []

        async def session(own: RunContext, i: int, temperature: float | None,
                          calls: list[CallRecord] = calls, run: CandidateRun = run,
                          prompt: oneshot.Prompt = prompt) -> SessionOutcome:
            outcome, record = await oneshot.ask(own, role, run.session, prompt,
                                                temperature=temperature, protected=protected,
                                                model_step=model_step)
            calls.append(record)
            return outcome

        try:
            await attempt(run, commands, policy, session, sorted(protected))
        except FATAL:
            raise
        except Exception as exc:  # one sample's failure is not the attempt's
            run.error = " ".join(str(exc).split())[:500] or type(exc).__name__
        sample = _sample(run, calls, changed=bool(run.tree) and run.tree != tree,
                         place=_place(prompt))
        samples.append(sample)
        _announce(ctx, role, run, sample, n)
        if run.passed:
            break


def _place(prompt: oneshot.Prompt) -> str:
    """Where a one-line request pointed ("path:start-end"); "" for whole files."""
    line = prompt.line
    return "" if line is None else f"{line.path}:{line.start}-{line.end}"


def _sample(run: CandidateRun, calls: list[CallRecord], *, changed: bool, place: str = ""
            ) -> Sample:
    call = calls[-1] if calls else CallRecord(role="", session="", requested_model="")
    return Sample(index=run.index, temperature=run.temperature, call_s=round(call.duration_s, 3),
                  ttft_s=None if call.ttft_s is None else round(call.ttft_s, 3),
                  checks_s=round(sum(c.duration_s for c in run.checks or []), 3),
                  prompt_tokens=call.prompt_tokens, cached_tokens=call.cached_tokens,
                  output_tokens=call.output_tokens, changed=changed, passed=run.passed,
                  place=place)


def _announce(ctx: RunContext, role: Role, run: CandidateRun, sample: Sample, n: int) -> None:
    ctx.telemetry.emit(SampleFinished(
        role=role, session=run.session, attempt=n, index=sample.index,
        temperature=sample.temperature, call_s=sample.call_s, ttft_s=sample.ttft_s,
        checks_s=sample.checks_s,
        prompt_tokens=sample.prompt_tokens, cached_tokens=sample.cached_tokens,
        output_tokens=sample.output_tokens, changed=sample.changed, passed=sample.passed,
        place=sample.place, error=run.error, wall_s=round(time.monotonic() - run.started, 3)))
