"""The one-line request's other places (``localize/leads.py``): when the failure pins no code,
after the explorers' place (before the code the failure passes through, when they verified
nothing), each place the task's words lead to, one prompt each. Every prompt
is ``oneshot.line_prompt_for``'s but for the code at its end, so a server's cache serves the
rest (``building.interleaved`` orders the samples)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from orchestrator.engine.oneshot import (
    Prompt,
    Shown,
    failure_facts,
    failure_output,
    line_messages,
    line_prompt_for,
    read_source,
)
from orchestrator.engine.places import FOUND, FOUND_LINES
from orchestrator.engine.runtime import RunContext
from orchestrator.localize.localization import Span
from orchestrator.state import RunState
from orchestrator.tools.jail import Jail

LEAD = "the task's words lead here"  # why a lead is shown


async def line_prompts_for(ctx: RunContext, state: RunState, n: int) -> list[Prompt]:
    """The one-line requests of attempt ``n``: ``line_prompt_for``'s, then, when the failure
    pins no code, one for each place the task's words lead to (``state.leads``,
    ``localize/leads.py``) that it does not show. When that first is not the explorers' place
    but only code the failure passes through, it goes last, and a lead showing any of it
    instead. Each is built once and differs from the others only at its end (the code
    shown), so a server's cache serves the rest."""
    first = await line_prompt_for(ctx, state, n)
    loc = state.localization
    output = failure_output(ctx, state)
    if loc is None or loc.pinned or not state.leads or not output:
        return [first] if first is not None else []
    spans = await asyncio.to_thread(lead_spans, ctx.worktree, state.leads)
    found = first is not None and first.line is not None and first.line.why == FOUND
    prompts = [first] if first is not None and found else []
    said = failure_facts(loc, state)
    for span, body in spans:
        if any(_overlap(p.line, span) for p in prompts):
            continue  # the explorers' place shows it already
        prompts.append(Prompt(line_messages(state.task, said, output, span, "line_lead"),
                              Shown({span.path: body}, {}), line=span))
    if first is not None and not found and not any(_overlap(p.line, first.line)
                                                   for p in prompts):
        prompts.append(first)  # no finding: the code the failure passes through, last
    return prompts


def _overlap(a: Span | None, b: Span | None) -> bool:
    return a is not None and b is not None and a.path == b.path and a.start <= b.end \
        and b.start <= a.end


def favoured(prompt: Prompt) -> bool:
    """Whether ``prompt``'s place, first of the one-line requests, is asked most
    (``building.interleaved``): the explorers' place or the code a pinned failure points at,
    not a lead. When the failure pins no code and the explorers verified nothing, the leads
    come first, each once, and the code the failure passes through (often its entry point)
    last: live on xp-loyalty-tier the explorers verified nothing in 7 of 7 routed runs
    (r60-r68) and that place, ``loyalty/__main__.py`` lines 1-5, took 3-4 of each run's 11-17
    samples and passed none (0 of 22 over the 7), while the fix's lead was asked twice."""
    return prompt.line is None or prompt.line.why != LEAD


def lead_spans(root: Path, refs: Sequence[str]) -> list[tuple[Span, str]]:
    """The code of each ``path:start-end`` lead as it is now, with its file's text; a lead whose
    file cannot be read, or whose lines are gone, is left out."""
    jail = Jail(root)
    out: list[tuple[Span, str]] = []
    for ref in refs:
        path, _, lines = ref.rpartition(":")
        start, _, end = lines.partition("-")
        body = read_source(jail, path) if path and start.isdigit() and end.isdigit() else None
        if body is None:
            continue
        text = body.splitlines()
        first, last = int(start), min(int(end), len(text), int(start) + FOUND_LINES - 1)
        if 0 < first <= last:
            out.append((Span(path=path, start=first, end=last, focus=first,
                             text=tuple(text[first - 1:last]),
                             why=LEAD), body))
    return out
