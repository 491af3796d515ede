"""The one-line request's prompts (``oneline.py`` reads the replies): the code the explorers
found or the failure points at, and the request's other places (``localize/leads.py``): when
the failure pins no code, after the explorers' place (before the code the failure passes
through, when they verified nothing), each place the task's words lead to, one prompt each.
Every prompt is ``line_prompt_for``'s but for the code at its end, so a server's cache serves
the rest (``building.interleaved`` orders the samples)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from orchestrator.config.prompts import text
from orchestrator.engine import oneline
from orchestrator.engine.oneshot import (
    Prompt,
    Shown,
    failure_facts,
    failure_output,
    found_files,
    read_source,
    shown_files,
)
from orchestrator.engine.places import FOUND, FOUND_LINES, focus_span, found_span, line_span
from orchestrator.engine.runtime import RunContext
from orchestrator.localize.localization import Span
from orchestrator.state import Attempt, RunState
from orchestrator.tools.jail import Jail

LEAD = "the task's words lead here"  # why a lead is shown


async def line_prompt_for(ctx: RunContext, state: RunState, n: int) -> Prompt | None:
    """The one-line request of attempt ``n`` (``oneline.py``): the code the explorers found, or
    else the function the failure points at (``places.line_span``), as the file is now,
    numbered; ``None`` when there is no such code or nothing failed."""
    loc = state.localization
    output = failure_output(ctx, state)
    if loc is None or not output:
        return None
    shown = await asyncio.to_thread(shown_files, ctx.worktree, loc, found_files(state))
    if shown is None:
        return None
    span = None if loc.pinned else await asyncio.to_thread(found_span, state, shown.sources)
    where = "line_found"
    pinned = focus_span(loc, state.task)
    if span is None and pinned is not None and pinned.path in shown.sources:
        span, where = line_span(loc, pinned, shown.sources[pinned.path]), "line_failure"
    if span is None or not span.text:
        return None
    return Prompt(line_messages(state.task, failure_facts(loc, state), output, span, where),
                  shown, line=span)


_COUNTS = {2: "two", 3: "three", 4: "four", 5: "five"}


def question(alternatives: int) -> str:
    """The one-line request's question: its corrected line, or ``alternatives`` of them."""
    if alternatives < 2:
        return text("oneshot", "line_ask")
    return text("oneshot", "line_ask_alternatives",
                count=_COUNTS.get(alternatives, str(alternatives)))


def listing(prompt: Prompt, alternatives: int) -> Prompt:
    """One-line request ``prompt`` asking for ``alternatives`` different corrections instead
    of one: the same messages up to the question, so a server's cache serves them."""
    one = question(1)
    system, user = prompt.messages
    body = user["content"]
    if prompt.line is None or alternatives < 2 or not body.endswith(one):
        return prompt
    return replace(prompt, alternatives=alternatives, messages=[
        system, {**user, "content": body[:-len(one)] + question(alternatives)}])


def listed_again(asked: Sequence[Prompt], alternatives: int,
                 before: Mapping[str, bool] | None = None) -> list[Prompt]:
    """Sample i's prompt when a place asked again asks for ``alternatives`` corrections: each
    place's first sample asks for one line, its later ones for a list (the same object per
    place, so ``first_lists`` finds the list's first visit); a place an earlier attempt asked
    (``before``: ``visited``) asks for the list from its first visit. Live at the fix's place
    of seven tasks where both maps wrote a wrong line (r80-r82), the request for one line
    passed 0 of 7 greedy samples and 0 of 21 at 0.8, the request for three corrections 3 of 7
    and 3 of 21; on seven tasks that both maps solve, greedy, one line passed 6 of 7 and three
    corrections 4 of 7 (``bench/line_samples.py --variant alternatives``,
    results/line-samples/r64-*, r65-*): one line first, then the list."""
    lists: dict[int, Prompt] = {}
    seen: set[int] = set()
    out = []
    for prompt in asked:
        key = id(prompt)
        if alternatives > 1 and (key in seen or prompt.place in (before or {})):
            prompt = lists.setdefault(key, listing(prompt, alternatives))
        seen.add(key)
        out.append(prompt)
    return out


def visited(attempts: Sequence[Attempt], low: float | None) -> dict[str, bool]:
    """The places (``Prompt.place``) earlier ``attempts``' one-line requests asked, each with
    whether one of them asked a list there at ``low`` (the role's lowest temperature)."""
    out: dict[str, bool] = {}
    for sample in (s for a in attempts for s in a.samples if s.place and not s.alternative):
        listed = sample.corrections > 1 and low is not None and sample.temperature == low
        out[sample.place] = out.get(sample.place, False) or listed
    return out


def first_lists(asked: Sequence[Prompt], before: Mapping[str, bool] | None = None
                ) -> list[bool]:
    """Per sample of ``asked``: whether it is the first list its place asks with none asked
    there at the lowest temperature before (``visited``): ``building.first_visits`` asks it
    greedy, in any attempt. At the fix's place of the seven tasks above, a list passed 3 of 7
    greedy and 3 of 21 at 0.8; until 2026-12-07 a place first visited in attempt 1 asked its
    list in a later attempt at that attempt's temperature (0.6, 0.8 resampled), never
    greedy."""
    done = {place for place, greedy in (before or {}).items() if greedy}
    out = []
    for prompt in asked:
        first = prompt.alternatives > 1 and prompt.place not in done
        if first:
            done.add(prompt.place)
        out.append(first)
    return out


def line_messages(task: str, said: str, output: str, span: Span, where: str = "line_failure",
                  alternatives: int = 1) -> list[dict[str, str]]:
    """The one-line request's messages: the task, the failure (its facts ``said`` and the end
    of its ``output``), ``span`` numbered under ``where`` ("line_found" or "line_failure"),
    and the question: its corrected line, or ``alternatives`` different corrections of it."""
    failing = "\n\n".join(p for p in (said, output[-3000:]) if p.strip())
    body = text("oneshot", "line_task", task=task, failure=failing,
                where=text("oneshot", where, path=span.path, start=span.start, end=span.end),
                body=oneline.numbered(span), ask=question(alternatives))
    return [{"role": "system", "content": text("oneshot", "line_system")},
            {"role": "user", "content": body}]


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
