"""The explore node: one explorer per question (a ``Send``), and only the claims that verify.

Before its model is asked, the question is turned into candidate windows of the code
(``localize/retrieve.py``), shown in its first prompt with their real paths and line numbers, so
a small model can often answer in one turn. The session checks each submission's citations
against what it was shown and copies the quotes for it (``evidence/cite.py``); what still cites
a place it was never shown is dropped before verification, which stays as strict as ever
(``evidence/verify.py``).

A refused call (key, unknown model) fails the run: the role map is wrong for every explorer. Any
other error loses this explorer only; the run goes on and reports the loss. The run's time
budget stops an explorer too (``deadline.py``); the run then goes to its report.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

from langgraph.runtime import Runtime

from orchestrator.config.prompts import text
from orchestrator.engine.agentstep import NodeFn
from orchestrator.engine.deadline import OutOfTime, bounded
from orchestrator.engine.runtime import RunContext
from orchestrator.engine.sessions import run_session
from orchestrator.errors import BudgetExhausted, OrchestrateError
from orchestrator.evidence.cite import Cited
from orchestrator.evidence.known import for_explorer
from orchestrator.evidence.sources import DirSource
from orchestrator.evidence.verify import Verified, verify_findings
from orchestrator.localize.retrieve import Window, render
from orchestrator.models.errors import ModelRefused
from orchestrator.record.events import ExplorerFinished
from orchestrator.session.account import SessionOutcome
from orchestrator.state import ExplorerResult, ExploreTask, Findings, KnownTests, Role, RoleLoss

CHARS_PER_TOKEN = 3.5
CANDIDATE_SHARE = 0.12  # of the explorer model's window: what its candidate windows may take
CANDIDATE_CHARS = (1200, 4000)  # and never less or more than this many characters


def explore_node(role: Role) -> NodeFn:
    """The node that runs one explorer of ``role`` per ``Send``."""

    async def explore(payload: ExploreTask, runtime: Runtime[RunContext]) -> dict[str, Any]:
        return await explore_one(role, payload, runtime.context)

    return explore


async def explore_one(role: Role, payload: ExploreTask, ctx: RunContext) -> dict[str, Any]:
    """One explorer: candidates, a session with checked citations, verification."""
    question, index = payload["question"], payload["index"]
    sid = f"{role}-{index + 1}"
    known = payload.get("tests")
    started = time.monotonic()
    _count_lines_ahead(ctx)
    windows = await asyncio.to_thread(_candidates, ctx, role, question, payload["task"])
    task = ctx.agents[role].render_task(question=question, task=payload["task"],
                                        known=for_explorer(known),
                                        candidates=_candidates_text(windows))
    first = bool(windows) and ctx.roles.run.explore_answer_first
    cited = Cited(files=ctx.retriever().files,
                  verify=(lambda f: _backed(ctx, f, known)) if first else None)
    limit = ctx.roles.run.explorer_timeout_s
    lost: RoleLoss | None = None
    try:
        outcome = await bounded(ctx, lambda: asyncio.wait_for(
            run_session(ctx, role, task, n=index + 1, check=cited.check, submit_first=first),
            limit))
    except (BudgetExhausted, ModelRefused):
        raise  # a budget stops the run resumably (this explorer runs again on resume)
    except OutOfTime:  # the run's time budget: gather sends a run to its report
        result = ExplorerResult(question=question, index=index, error=(
            f"stopped by the run's time budget of {ctx.roles.run.time_budget_s:g} s "
            "(run.time_budget_s)"))
        lost = RoleLoss(role=role, session=sid, code="out_of_time",
                        message=f"{_where(ctx, role)} ({sid}): {result.error}")
    except TimeoutError:
        result = ExplorerResult(question=question, index=index,
                                error=f"timed out after {limit:g}s (run.explorer_timeout_s)")
        lost = RoleLoss(role=role, session=sid, code="timeout",
                        message=f"{_where(ctx, role)} ({sid}): {result.error}")
    except (OrchestrateError, OSError) as exc:
        error = _one_line(str(exc))
        result = ExplorerResult(question=question, index=index, error=error)
        said = error if error.startswith("role ") else f"{_where(ctx, role)} ({sid}): {error}"
        lost = RoleLoss(role=role, session=sid, message=said,
                        code=getattr(exc, "code", "os_error"))
    else:
        result = await asyncio.to_thread(_checked, ctx, question, index, outcome, cited, known)
    model = _served_model(ctx, role, sid) or ctx.roles.model_for(role).id
    result = result.model_copy(update={
        "model": model, "wall_s": round(time.monotonic() - started, 3),
        "candidates": [f"{w.path}:{w.start}-{w.end}" for w in windows]})
    _keep_partial(ctx, result)  # on disk before anyone is told, so a cut run keeps it
    ctx.telemetry.emit(ExplorerFinished(
        role=role, session=sid, model=result.model,
        question=question, submitted=result.submitted, verified=result.verified,
        adds_nothing=result.adds_nothing, dropped=result.dropped, error=result.error,
        drops=[v.kind for v in result.verdicts if v.kind], candidates=result.candidates,
        wall_s=result.wall_s, refused=cited.refusals,
    ))
    if lost is not None:
        ctx.telemetry.lose(lost)
    return {"explorers": [result]}


def _candidates(ctx: RunContext, role: Role, question: str, task: str) -> list[Window]:
    """The question's candidate windows, sized to the explorer model's window (the code they
    call ranked by the ``task``'s words); none when ``run.explore_candidates`` is 0."""
    limit = ctx.roles.run.explore_candidates
    if limit <= 0:
        return []
    window = ctx.roles.model_for(role).context_window
    low, high = CANDIDATE_CHARS
    budget = int(min(high, max(low, window * CANDIDATE_SHARE * CHARS_PER_TOKEN)))
    return ctx.retriever().windows(question, budget_chars=budget, limit=limit, context=task)


def _candidates_text(windows: list[Window]) -> str:
    return text("evidence", "candidates", windows=render(windows)) + "\n" if windows else ""


def _checked(ctx: RunContext, question: str, index: int, outcome: SessionOutcome, cited: Cited,
             known: KnownTests | None) -> ExplorerResult:
    """The explorer's claims after the screen (places never shown) and verification."""
    findings = cast(Findings, outcome.payload)
    screened, unseen = cited.screen(findings, outcome.messages)
    checked = _verify(ctx, screened, outcome.tool_calls, known)
    verdicts = _renumbered(findings, screened, checked, unseen)
    drops = dict(checked.drops)
    for v in unseen:
        drops[str(v.kind)] = drops.get(str(v.kind), 0) + 1
    return ExplorerResult(
        question=question, index=index, claims=checked.claims, answer=findings.answer,
        submitted=len(findings.claims), verified=checked.verified,
        adds_nothing=checked.adds_nothing, dropped=checked.dropped + len(unseen),
        tool_calls=outcome.tool_calls,
        drop_reasons=([f"claim {v.index} dropped ({v.kind}): {v.reason}" for v in unseen]
                      + checked.reasons)[:20],
        drops=drops, verdicts=verdicts[:100])


def _backed(ctx: RunContext, findings: Findings, known: KnownTests | None
            ) -> tuple[int, list[str]]:
    """How many claims of an answer verify, and why the others do not (answer first)."""
    checked = _verify(ctx, findings, 1, known)
    return checked.verified + checked.adds_nothing, checked.reasons


def _renumbered(findings: Findings, screened: Findings, checked: Verified,
                unseen: list[Any]) -> list[Any]:
    """Verdicts numbered as the model submitted its claims (the screen took some out)."""
    dropped = {v.index for v in unseen}
    kept = [i for i in range(1, len(findings.claims) + 1) if i not in dropped]
    by_index = {v.index: v for v in unseen}
    for v in checked.verdicts:
        by_index[kept[v.index - 1]] = v.model_copy(update={"index": kept[v.index - 1]})
    return [by_index[i] for i in sorted(by_index)]


def _verify(ctx: RunContext, findings: Findings, tool_calls: int,
            known: KnownTests | None) -> Verified:
    """Check citations; the run's explorers share one count of the repository's lines."""
    with ctx.source() as source:
        return verify_findings(source, findings, tool_calls=tool_calls, screened=True,
                               line_counts=ctx.ahead.line_counts, known=known)


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
