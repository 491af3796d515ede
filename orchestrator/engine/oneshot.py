"""A build attempt without a tool loop: ask once for the whole new text of the files the failure
points at (``[roles.<build>] one_shot = true``).

Small models fail at tool loops (invented tools, ``replace`` with text that is not there, a
claim that the tests pass) yet often write a right file when they are shown it whole with the
failure: the live suite's "one model asked once" solved more tasks than the 1.5B driving tools
(issue 15). So the first attempt of a one-shot builder is that prompt, as one model asked once
is asked: the task, the non-test files the preflight pinned (whole) and the failing tests (to
read, not to change), with no failure output and no planner's reading (probed live on the 13
pinned suite tasks, the 1.5B at temperature 0 fixed 8 so, 6 with the output, 6 with the output
and the 0.5B planner's goal, which named the wrong function on py-paging). The reply's fenced
blocks, each under a line naming one of the shown source files, are written through the edit
tools (inside the worktree, never through a link, never the protected tests); then verify
decides. A planner's diagnosis that checked goes to the later one-shots. A later one-shot (the ladder's
``one_shot_fact`` rung, ``ladder.py``) is shown the files as they are now, verify's failure
restated as facts (``localize/facts.py``), what the attempt before did and the one function
around the failing line, which it may answer with alone (``splice``); each prompt is built once
(``Prompt``) so best-of-k samples (``samples.py``) send it byte for byte. A judge's requested
changes always go to the tool loop. Each call is a session of its own
(``builder-<n>``) in the events, the journal (a resume replays it) and the bench's token
counts: it starts, calls and finishes through a session's own ``Account``
(``session/account.py``), as the tool loop does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from orchestrator.config.prompts import text
from orchestrator.engine import mutants, oneline
from orchestrator.engine.places import defined, focus_span, found_span
from orchestrator.engine.prompting import acceptance_commands
from orchestrator.engine.race import session_of
from orchestrator.engine.replyfiles import fenced, parse_files, relabelled, spliced, stalled
from orchestrator.engine.runtime import RunContext
from orchestrator.errors import PolicyViolation, ToolError
from orchestrator.localize import facts, failures
from orchestrator.localize.candidates import file_factor
from orchestrator.localize.localization import Localization, Span
from orchestrator.models.base import Choice, Completion, ModelClient
from orchestrator.record.events import Warned
from orchestrator.session.account import Account, SessionOutcome
from orchestrator.state import BuildReport, CallRecord, Role, RunState
from orchestrator.tools.base import Toolbox
from orchestrator.tools.edit import edit_tools
from orchestrator.tools.jail import Jail, open_regular

MAX_FILE_CHARS = 16_000  # a pinned file larger than this is not shown whole: no one-shot
MAX_TOTAL_CHARS = 24_000  # all shown files together (an 8k-token window holds the rest)
MAX_FILES = 4


@dataclass(frozen=True)
class Shown:
    """What a one-shot prompt shows: the files it may change and the tests it may not."""

    sources: dict[str, str]
    tests: dict[str, str]


def shown_files(root: Path, loc: Localization | None, found: Sequence[str] = ()) -> Shown | None:
    """The source files to change (whole) and the failing tests, read from the worktree:
    first the files the explorers found (``found``: those their verified claims cite, then those
    of the windows they were shown), then those the failure pins; ``None`` when there is nothing pinned or found, or
    the files are too large to show whole."""
    if loc is None or not (loc.pinned or found):
        return None
    jail = Jail(root)
    sources: dict[str, str] = {}
    used = 0
    failing = set(loc.tests)
    for path in list(dict.fromkeys([*(f for f in found if f not in failing), *loc.suspects]))[
            :MAX_FILES]:
        body = read_source(jail, path)
        if body is None or len(body) > MAX_FILE_CHARS or used + len(body) > MAX_TOTAL_CHARS:
            continue
        sources[path] = body
        used += len(body)
    if not sources:
        return None
    tests: dict[str, str] = {}
    for path in loc.tests[:MAX_FILES]:
        body = read_source(jail, path)
        if body is not None and used + len(body) <= MAX_TOTAL_CHARS:
            tests[path] = body
            used += len(body)
    return Shown(sources, tests)


def read_source(jail: Jail, path: str) -> str | None:
    try:
        target = jail.resolve(path)
        if ".git" in PurePosixPath(jail.relative(target)).parts:
            return None  # the builder's own repository: never a file of the task
        with open_regular(target, path) as fh:
            data = fh.read(MAX_FILE_CHARS * 4 + 1)
        return data.decode("utf-8")
    except (OSError, ToolError, PolicyViolation, UnicodeDecodeError, ValueError):
        return None


def messages(*, system: str, task: str, loc: Localization, shown: Shown, commands: Sequence[str],
             feedback: str = "", failure: str | None = None, told: str = "", first: bool = False
             ) -> list[dict[str, str]]:
    """The one-shot prompt: system, then the task, failure, files and answer format.
    ``failure`` is what the commands print now when that is no longer the preflight's (a later
    attempt: verify's output). The ``first`` attempt's shows no failure output: the task, the
    files and the tests, as one model asked once is asked, and ``told`` (the explorers' place)."""
    files = "\n\n".join(fenced(p, b) for p, b in shown.sources.items())
    tests = "\n\n".join(fenced(p, b) for p, b in shown.tests.items()) or text("pipeline", "none")
    listed = "\n".join(text("pipeline", "command", command=c) for c in commands)
    if first:
        body = text("oneshot", "first", task=task, commands=listed, files=files, tests=tests,
                    told=f"\n{told.strip()}\n" if told.strip() else "")
        return [{"role": "system", "content": system}, {"role": "user", "content": body}]
    failing = (failure if failure is not None else
               "\n\n".join(failures.render(r, limit=1500) for r in loc.reports))
    if told.strip():
        failing += "\n\n" + told.strip()
    body = text(
        "oneshot", "task", task=task, failure=failing or text("pipeline", "none"),
        commands=listed, files=files, tests=tests,
        feedback=f"\n{feedback}\n" if feedback else "",
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": body}]


async def write_files(root: Path, changed: Mapping[str, str], protected: frozenset[str]
                      ) -> tuple[list[str], list[str]]:
    """Write each changed file with the edit tools (so the jail's rules hold); the files written
    and, for each refused one, why."""
    tools = Toolbox.of(edit_tools(root, edit_format="whole", protected=protected))
    written, refused = [], []
    for path, body in changed.items():
        outcome = await tools.call("write_file", {"path": path, "content": body})
        if outcome.ok:
            written.append(path)
        else:
            refused.append(f"{path}: {outcome.text}")
    return written, refused


def found_files(state: RunState) -> list[str]:
    """The source files the explorers' verified claims cite, most cited first; then those of
    the candidate windows they were shown (found mechanically for their questions, best
    first): a small explorer often cites the first window when the second holds the bug. A
    doc or a test they cite is no file to change: live on xp-js-weekly-runs (r72) a README
    cited twice took one of the prompt's ``MAX_FILES`` and left out ``ranges.js``, whose
    wrong line the other explorer had cited."""
    counts: dict[str, int] = {}
    for explorer in state.explorers:
        for claim in explorer.claims:
            for c in claim.citations:
                path = c.path.removeprefix("./")
                if file_factor(path) == 1.0:
                    counts[path] = counts.get(path, 0) + 1
    shown = [w.rsplit(":", 1)[0] for e in state.explorers for w in e.candidates]
    return list(dict.fromkeys([*sorted(counts, key=lambda p: -counts[p]),
                               *(p for p in shown if file_factor(p) == 1.0)]))


@dataclass(frozen=True)
class Prompt:
    """A one-shot attempt's prompt, built once: every sample of it sends these messages."""

    messages: list[dict[str, str]]
    shown: Shown
    diagnosed: bool = False
    focus: Span | None = None  # the function a reply may give alone (``splice``)
    line: Span | None = None  # a one-line request: the reply corrects lines of this code
    alternatives: int = 1  # a one-line request for this many corrections, each checked alone

    @property
    def place(self) -> str:
        """Where a one-line request points ("path:start-end"); "" for whole files."""
        return "" if self.line is None else f"{self.line.path}:{self.line.start}-{self.line.end}"


async def prompt_for(ctx: RunContext, state: RunState, n: int, *, restate: bool = False
                     ) -> Prompt | None:
    """The prompt of one-shot attempt ``n``; ``None`` when the failure pins no file small
    enough to show whole, or a judge asked for changes (the tool loop takes those). A later
    attempt is shown the files as they are now, the failure verify saw and what the attempt
    before did; with ``restate`` also the assertion's values and the function to change."""
    loc = state.localization
    again = n > 1
    if again and (state.verify is None or state.verify.passed or not state.feedback):
        return None
    shown = await asyncio.to_thread(shown_files, ctx.worktree, loc, found_files(state))
    if shown is None or loc is None:
        return None
    previous = state.build.summary if state.build else text("pipeline", "none")
    told = told_facts(loc, state) if restate else ""
    # the place the explorers' verified claims point at, when the failure does not pin one:
    # shown on every one-shot, and a reply may give that definition alone
    found = None if loc.pinned else await asyncio.to_thread(
        found_span, state, shown.sources)
    if found is not None:
        told = told_facts(loc, state, found) if restate else _focus_text(found, "found")
    first = not again and not restate
    if state.diagnosis is not None and not first:
        d = state.diagnosis
        told += "\n\n" + text("oneshot", "diagnosed", path=d.path, line=d.line,
                                quote=d.quote.strip(), should=" ".join(d.should.split()))
    prompt = messages(
        system=text("oneshot", "system"), task=state.task, loc=loc, shown=shown,
        commands=acceptance_commands(ctx, state),
        failure=state.feedback if again else None, first=first,
        feedback=text("oneshot", "again", previous=previous) if again else "", told=told)
    focus = found or (focus_span(loc, state.task) if restate else None)
    if focus is not None and not (focus.text and defined(focus.text[0])):
        focus = None  # lines around the failure, not a function: whole files only
    return Prompt(prompt, shown, diagnosed=state.diagnosis is not None and not first,
                  focus=focus)


def told_facts(loc: Localization, state: RunState, found: Span | None = None) -> str:
    """The failure restated as facts (the values the failing assertions compared, from verify's
    output when there is one) and the one function around the failing line (or the place the
    explorers ``found``)."""
    parts = [said] if (said := failure_facts(loc, state)) else []
    span = found or focus_span(loc, state.task)
    if span is not None:
        parts.append(_focus_text(span, "found" if found else "focus"))
    return "\n\n".join(parts)


def failure_facts(loc: Localization, state: RunState) -> str:
    """The values the failing assertions compared, from verify's output when there is one."""
    reports = [failures.parse(c.output, command=c.command, exit_code=c.exit_code)
               for c in (state.verify.checks if state.verify else []) if c.exit_code]
    return facts_said(reports or list(loc.reports))


def facts_said(reports: Sequence[failures.FailureReport]) -> str:
    """The values ``reports``' failing assertions compared, as the prompts say them."""
    said = facts.facts(reports)
    return text("oneshot", "facts", facts="\n".join(f"- {f}" for f in said)) if said else ""


def failure_output(ctx: RunContext, state: RunState) -> str:
    """What the failing acceptance commands printed: verify's feedback after an attempt, the
    preflight's before the first; "" when nothing failed."""
    if state.verify is not None:
        return "" if state.verify.passed else state.feedback
    loc = state.localization
    failed = [c for c in loc.checks if c.exit_code] if loc is not None else []
    return text("pipeline", "verify_failed", failures="\n\n".join(
        failures.trim(c.output, command=c.command, exit_code=c.exit_code,
                      root=str(ctx.worktree)) for c in failed)) if failed else ""


def _line_named(root: Path, span: Span, reply: str) -> tuple[int, str] | None:
    """The line of ``span`` a reply that changed nothing named as wrong, and its text now."""
    current = read_source(Jail(root), span.path)
    line = None if current is None else oneline.named_line(current, span, reply)
    if current is None or line is None:
        return None
    return line, current.splitlines()[line - 1].strip()


def _pieces(root: Path, span: Span, reply: str, limit: int
            ) -> tuple[dict[str, str], tuple[str, ...]]:
    """The file the first piece of ``reply`` makes of ``span``'s, and the further pieces
    that each make a different edit (``oneline.alternatives``); nothing when none edits."""
    current = read_source(Jail(root), span.path)
    pieces = [] if current is None else oneline.alternatives(current, span, reply, limit)
    if current is None or not pieces:
        return {}, ()
    new, _ = oneline.line_edit(current, span, pieces[0])
    return ({span.path: new} if new is not None else {}), tuple(pieces[1:])


def _line_changed(root: Path, span: Span, reply: str) -> tuple[dict[str, str], str]:
    """The file ``reply``'s corrected lines make of ``span``'s file, or nothing and why."""
    current = read_source(Jail(root), span.path)
    if current is None:
        return {}, f"{span.path} cannot be read"
    new, why = oneline.line_edit(current, span, reply)
    return ({span.path: new}, "") if new is not None else ({}, why)


def _focus_text(span: Span, key: str) -> str:
    """``span`` in a prompt: numbered lines, which a reply may give alone when they are one
    definition (``key``: "focus" or "found"), else lines to look at."""
    alone = bool(span.text) and defined(span.text[0]) is not None
    return text("oneshot", key if alone else "focus_lines", path=span.path, start=span.start,
                end=span.end, body=oneline.numbered(span))


def _spliced(root: Path, changed: dict[str, str], focus: Span | None) -> dict[str, str]:
    """``replyfiles.spliced`` with the focus file as it is in ``root``."""
    if focus is None or focus.path not in changed:
        return changed
    return spliced(changed, focus, read_source(Jail(root), focus.path))


@dataclass(frozen=True)
class Asked:
    """What one one-shot call did: the session's outcome, the call's record (both turns' when
    it was asked once more), the further replies it holds for later samples, and the time of
    that second turn (0.0 when there was none)."""

    outcome: SessionOutcome
    record: CallRecord
    more: tuple[Choice, ...] = ()
    again_s: float = 0.0
    alternatives: tuple[str, ...] = ()  # further corrections of its reply, each checked alone
    lines: tuple[int, ...] = ()  # a one-line request's lines the reply changed or named


async def ask(ctx: RunContext, role: Role, session: str, prompt: Prompt, *,
              temperature: float | None, protected: frozenset[str], model_step: int = 0,
              choices: int = 1, reply: Completion | None = None) -> Asked:
    """One call of ``prompt``; the reply's files are written into ``ctx.worktree``. With
    ``choices`` > 1 the call asks for that many replies and returns the others (``more``) for
    the samples after this one; such a further reply comes back as ``reply``: no call of its
    own, its record the call's share (``samples.py``). A reply that names a file and stops, or
    a one-line reply that names a line and gives it no new text, is asked once more in the
    same session for that file or line. A one-line request for several corrections
    (``prompt.alternatives``) writes the first edit its reply makes and returns the pieces of
    the reply that make the others (``oneline.alternatives``), for samples of their own."""
    # a one-line reply is a reason and a line or two: live, 13 of 693 ran on to the 1.5B's 800
    # (40 s of generation each, r21-r29); capped, it still has room to reprint the code shown
    cap = None if prompt.line is None else oneline.reply_cap(
        ctx.roles.roles[role].line_max_output, prompt.line, prompt.alternatives)

    def asking(replies: int) -> ModelClient:
        return ctx.pool.for_role(role, temperature=temperature, start=model_step,
                                 max_output=cap, choices=replies)

    client = asking(choices)
    account = Account(ctx.telemetry, role, session, ctx.agents[role].kind)
    window = client.route.model.context_window
    account.started(client.route, window=window, purpose="one_shot")
    if reply is not None:
        completion = reply
    else:
        ready = (await ctx.ahead.first_build(prompt.messages, temperature)
                 if not model_step and choices == 1 else None)
        completion = await account.call(client, prompt.messages, window=window, ready=ready)
    record, more = completion.record, completion.more  # more: the replies for later samples
    account.turns = 1
    shown = prompt.shown
    # the tests are parsed too, so that rewriting one is refused by the jail, and said
    unread = ""
    again_s = 0.0

    async def once_more(warning: str, question: str) -> Completion:
        """The reply named a line or a file and gave no text for it: ask it, in the same
        session, for that text (the prompt and the reply are the server's cached prefix, so
        this costs the text's generation); one reply, the question is this sample's own."""
        nonlocal again_s, record
        ctx.telemetry.emit(Warned(role=role, session=account.session, message=warning))
        again = [*prompt.messages, {"role": "assistant", "content": completion.content or ""},
                 {"role": "user", "content": question}]
        then = await account.call(client if choices == 1 else asking(1), again, window=window)
        account.turns = 2
        again_s = then.record.duration_s
        record = _both(record, then.record)
        return then

    alternatives: tuple[str, ...] = ()
    chosen: tuple[int, ...] = ()
    if prompt.line is not None:
        span = prompt.line
        said = oneline.whole_lines(completion.content or "", completion.finish_reason)
        changed: dict[str, str] = {}
        if prompt.alternatives > 1 and reply is None:  # a held reply is one correction
            changed, alternatives = await asyncio.to_thread(
                _pieces, ctx.worktree, span, said, prompt.alternatives + 1)
        if not changed:
            changed, unread = await asyncio.to_thread(_line_changed, ctx.worktree, span, said)
        # read whole: a reply cut at its cap may have quoted its line before it ran on
        named_line = None if changed else await asyncio.to_thread(
            _line_named, ctx.worktree, span, completion.content or "")
        if named_line is not None:
            line, quote = named_line
            completion = await once_more(
                f"one-line reply named line {line} of {span.path} and gave it no new text: "
                "asked once more for that line",
                text("oneshot", "line_again", line=line, path=span.path, quote=quote))
            said = oneline.whole_lines(completion.content or "", completion.finish_reason)
            changed, unread = await asyncio.to_thread(_line_changed, ctx.worktree, span, said)
        current = await asyncio.to_thread(read_source, Jail(ctx.worktree), span.path)
        chosen = mutants.chosen(current, changed.get(span.path), span,
                                named_line[0] if named_line else None)
    else:
        texts = {**shown.sources, **shown.tests}
        changed = parse_files(completion.content or "", texts)
        named = None if changed else stalled(completion.content or "", shown.sources)
        if named is not None:
            completion = await once_more(
                f"one-shot reply named {named} and stopped: asked once more for its text",
                text("oneshot", "go_on", path=named))
            changed = parse_files(completion.content or "", texts)
        changed, moved = relabelled(changed, texts)
        for note in moved:
            ctx.telemetry.emit(Warned(role=role, session=account.session,
                                      message=f"one-shot reply relabelled: {note}"))
        changed = await asyncio.to_thread(_spliced, ctx.worktree, changed, prompt.focus)
    written, refused = await write_files(ctx.worktree, changed, protected)
    refused += [unread] if unread else []
    account.tool_calls = len(written)
    for why in refused:
        ctx.telemetry.emit(Warned(role=role, session=account.session,
                                  message=f"one-shot write refused: {why}"))
    why = "; ".join(refused) or "no fenced file under a path it may change"
    summary = (text("oneshot", "wrote", files=", ".join(written)) if written else
               text("oneshot", "wrote_nothing", why=why))
    report = BuildReport(summary=summary, files_changed=written)
    return Asked(account.finished(report, prompt.messages), record, more, again_s,
                 alternatives, chosen)


def _both(first: CallRecord, then: CallRecord) -> CallRecord:
    """A one-shot asked once more, as one call: what both cost, the first's time to a token."""
    return then.model_copy(update={
        "prompt_tokens": first.prompt_tokens + then.prompt_tokens,
        "cached_tokens": first.cached_tokens + then.cached_tokens,
        "output_tokens": first.output_tokens + then.output_tokens,
        "reasoning_tokens": first.reasoning_tokens + then.reasoning_tokens,
        "duration_s": first.duration_s + then.duration_s,
        "cost_usd": first.cost_usd + then.cost_usd, "ttft_s": first.ttft_s})


async def build(ctx: RunContext, state: RunState, role: Role, n: int, *,
                temperature: float | None, protected: frozenset[str], restate: bool = False,
                model_step: int = 0) -> SessionOutcome | None:
    """Build attempt ``n`` as one call for whole files; ``None`` when the one-shot does not
    apply (``prompt_for``): the tool loop runs instead."""
    prompt = await prompt_for(ctx, state, n, restate=restate)
    if prompt is None:
        return None
    asked = await ask(ctx, role, session_of(role, n, 1), prompt, temperature=temperature,
                      protected=protected, model_step=model_step)
    return asked.outcome
