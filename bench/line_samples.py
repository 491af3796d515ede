"""How often the one-line request fixes a task when asked k times (issue 27: cheap samples,
verified), and what the 2nd..kth sample costs against the first.

For each task of a suite whose failure pins code: the one-line request the engine asks after a
failed first one-shot (``leadlines.line_prompt_for``: the task, the failure as facts and output,
the definition the task names else the failure's first, from a module constant it uses
just above, numbered: ``places.line_span``), built once from the
preflight's failure (the engine shows verify's, which after an unchanged first reply is the
same), sent ``--k`` times one after another, byte for byte, the first at ``--first`` and the rest
at ``--rest`` degrees. Each answer is applied to a fresh copy of the repository the engine's way
(``oneline.line_edit``) and checked by the task's acceptance commands (sandboxed). Prints a line
per sample and, per task, the samples that passed; the 2nd..kth samples' wall time against the
first's. ``--variant bare`` sends the request as it was before a reason was asked first (the
line alone), to compare. ``--caps 256,640`` asks each prompt k times under each reply cap (the
role's ``line_max_output`` by default), raised as the engine raises it for long code
(``oneline.reply_cap``), and prints per cap the samples that passed and were cut.

``--at-fix`` asks instead of the place the explorers' verified claims would show if they cited
the task's reference fix (its ``[sim]`` line: ``places.found_span``; ``--with-uses`` from the
module-level definitions above it that it uses, a variant the engine does not ask: live it
passed 7 of 18 samples against 11 of 18, ``results/line-samples/r62-place-uses``), so explore-needed tasks
can be probed too, and ``--where`` names how the prompt introduces that code (comma-separated,
each asked ``--k`` times): ``found`` (the explorers' place), ``lead`` (a place the task's words
lead to), ``failure`` (the code the failure points at), ``suspect`` (the code named only as
where the bug likely is) or ``traced`` (the explorers' place without "verified").

    python bench/line_samples.py --roles live-routed --k 4
    python bench/line_samples.py --roles live-routed --k 6 --task py-id-validation --json out.json
    python bench/line_samples.py --roles live-routed --k 3 --first 0 --rest 0.8 --at-fix \
        --where found,lead --task xp-invoice-tax

``--reread FILE`` asks no model: it reads again the replies a ``--json`` file of an earlier run
kept, with the engine's reader as it is now, checks each edit the same way, and prints per task
the samples that passed then and now (the reader's own figure; replies kept whole since r6).

    python bench/line_samples.py --roles live-routed --reread results/line-samples/r6-at-fix-found-k6.json
"""

from __future__ import annotations

import argparse
import asyncio
import difflib
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path
from string import Template
from types import SimpleNamespace
from typing import Any

from first_prompt import chosen, localized, task_args

from orchestrator.benchmark.reach import evict_prompt_caches
from orchestrator.benchmark.spec import check_acceptance
from orchestrator.benchmark.suite import Task, materialize
from orchestrator.config.prompts import text
from orchestrator.config.schema import RoleMap
from orchestrator.engine import oneline
from orchestrator.engine.leadlines import line_messages, question
from orchestrator.engine.oneshot import facts_said, failure_output, shown_files
from orchestrator.engine.places import FOUND_LINES, defined, focus_span, found_span, line_span
from orchestrator.localize.localization import Localization, Span
from orchestrator.models.pool import ClientPool
from orchestrator.state import Citation, Claim, ExplorerResult, RunState

WHERE = {"found": "line_found", "lead": "line_lead", "failure": "line_failure"}
OTHER = {"suspect": "The bug is most likely in this code ($path lines $start-$end):",
         "traced": "The explorers traced the task to this code ($path lines $start-$end):"}

BARE = ("Which one of these lines is wrong? Answer with one line in this form: the line's "
        "number, a colon, then the whole line as it should read:\n<number>: <the corrected "
        "line>\nChange what makes the tests fail: a line given back as it is fixes nothing.")
ALTERNATIVES = 3  # corrections asked for in one reply by --variant alternatives and told
LISTED = ("alternatives", "told")
# --variant told (a probe only; live it passed 0 of 16 greedy and 0 of 16 at 0.8 at the fix of
# four tasks no request had fixed, r66-told: the 1.5B gave the lines it was told again)
TOLD = ("Already tried in this code, and the tests still fail with each of these:\n$tried\n"
        "None of them is the fix: do not give them again.")
BARE_SYSTEM = ("You are a programmer fixing a bug. You cannot run anything. You answer with "
               "only the line that is wrong, corrected: its number, a colon, and its new text.")


def _request(task: Task, loc: Localization, span: Span, variant: str, where: str = "failure",
             repo: Path | None = None) -> list[dict[str, str]]:
    output = "\n".join(c.output for c in loc.checks if c.exit_code)
    if repo is not None:  # the failure as the engine's first attempt shows it, byte for byte
        state = RunState(task=task.instruction, localization=loc)
        output = failure_output(SimpleNamespace(worktree=repo), state)  # type: ignore[arg-type]
    messages = line_messages(task.instruction, facts_said(loc.reports), output, span,
                             WHERE.get(where, "line_found"),
                             ALTERNATIVES if variant in LISTED else 1)
    if where in OTHER:
        at = {"path": span.path, "start": span.start, "end": span.end}
        messages[1]["content"] = messages[1]["content"].replace(
            text("oneshot", "line_found", **at), Template(OTHER[where]).substitute(at))
    if variant == "bare":  # the request before a reason was asked first (to 2026-12-03)
        body = messages[1]["content"]
        messages = [{"role": "system", "content": BARE_SYSTEM},
                    {"role": "user", "content": body[:body.rindex("Which one of")] + BARE}]
    return messages


NEAR_USES = 24  # lines above a place searched for the definitions it uses (--with-uses)


_WORD = re.compile(r"[A-Za-z_$][\w$]*")


def told_messages(messages: list[dict[str, str]], question: str, tried: list[str]
                  ) -> list[dict[str, str]]:
    """``messages`` (ending with ``question``) told, just before the question, the lines
    ``tried`` already that failed: the same prefix, so the server's cache serves it."""
    system, user = messages
    body = user["content"]
    if not tried or not body.endswith(question):
        return messages
    said = Template(TOLD).substitute(tried="\n".join(tried[-6:]))
    return [system, {**user, "content": f"{body[:-len(question)]}{said}\n\n{question}"}]


def changed_lines(current: str, new: str) -> list[str]:
    """The lines ``new`` gives ``current`` a new text, as ``N: text`` (numbered in ``new``)."""
    old, lines = current.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(a=old, b=lines, autojunk=False)
    return [f"{j + 1}: {lines[j].strip()}" for tag, _, _, j1, j2 in matcher.get_opcodes()
            if tag in ("replace", "insert") for j in range(j1, j2)][:3]


def with_uses(span: Span, body: str) -> Span:
    """``span`` (a place the failure does not pin) as ``--with-uses`` shows it, ``body`` being
    its file as it is now: from the earliest module-level definition at most
    ``NEAR_USES`` lines above it that it uses, directly or through another such definition
    (a constant table, a helper), when the whole stays within ``FOUND_LINES`` lines. Tried
    because the live 1.5B, shown ``to_kg`` alone (``value / _factor(KG_PER, ...)``), said
    KG_PER's pound factor was 2.90 (xp-parcel-weight, r60); at the fix it did worse so."""
    lines = body.splitlines()
    if not 0 < span.start <= span.end <= len(lines):
        return span
    above: dict[str, int] = {}  # a module-level name defined above the span -> its line
    for n in range(max(1, span.start - NEAR_USES), span.start):
        line = lines[n - 1]
        name = None if line[:1].isspace() else defined(line)
        if name is not None:
            above.setdefault(name, n)
    start = span.start
    used = set(_WORD.findall("\n".join(lines[start - 1:span.end])))
    while True:
        earlier = [n for name, n in above.items()
                   if name in used and n < start and span.end - n + 1 <= FOUND_LINES]
        if not earlier:
            break
        new = min(earlier)
        used |= set(_WORD.findall("\n".join(lines[new - 1:start - 1])))
        start = new
    if start == span.start:
        return span
    return span.model_copy(update={"start": start, "text": tuple(lines[start - 1:span.end])})


def _fix_span(repo: Path, task: Task, loc: Localization, uses: bool = False) -> Span | None:
    """The place the engine shows when the explorers' verified claims cite the line the task's
    reference fix changes (``places.found_span``); with ``uses``, from the definitions above
    it that it uses (``with_uses``, a variant the engine does not ask)."""
    if task.sim is None:
        return None
    body = (repo / task.sim.path).read_text(encoding="utf-8")
    first = task.sim.old.strip().splitlines()[0].strip()
    line = next((n for n, t in enumerate(body.splitlines(), 1) if first in t), None)
    if line is None:
        return None
    cite = Citation(path=task.sim.path, start_line=line, end_line=line, quote="")
    state = RunState(task=task.instruction, localization=loc,
                     explorers=[ExplorerResult(question="q", index=1, claims=[Claim(text="t",
                                                                            citations=[cite])])])
    span = found_span(state, {task.sim.path: body})
    return with_uses(span, body) if span is not None and uses else span


async def _task(pool: ClientPool, roles: RoleMap, role: str, task: Task, k: int,
                temps: tuple[float, float], tmp: Path, variant: str,
                at_fix: str = "", wheres: tuple[str, ...] = ("failure",),
                caps: tuple[int | None, ...] = (None,), batches: tuple[int, ...] = (1,)
                ) -> list[dict[str, Any]]:
    repo = materialize(task, repo_of(task, tmp))
    loc = await asyncio.to_thread(localized, repo, task.acceptance)
    if at_fix:
        span = _fix_span(repo, task, loc, uses=at_fix == "uses")
    else:
        span = focus_span(loc, task.instruction) if shown_files(repo, loc) is not None else None
        if span is not None and span.text:
            span = line_span(loc, span, (repo / span.path).read_text(encoding="utf-8"))
    if span is None or not span.text:
        print(f"{task.name:22} skipped: the failure pins no code", flush=True)
        return []
    rows = []
    for where in wheres:
        prompt = _request(task, loc, span, variant, where, repo if at_fix else None)
        for cap in caps:
            for batch in batches:
                if len(batches) > 1:  # each way's sample 1 reads the prompt cold
                    await evict_prompt_caches(roles, os.environ)
                rows += await _samples(pool, roles, role, task, k, temps, tmp, span, prompt,
                                       where, cap, batch, each=variant in LISTED,
                                       told=variant == "told")
    return rows


async def _samples(pool: ClientPool, roles: RoleMap, role: str, task: Task, k: int,
                   temps: tuple[float, float], tmp: Path, span: Span,
                   prompt: list[dict[str, str]], where: str, max_output: int | None = None,
                   batch: int = 1, each: bool = False, told: bool = False
                   ) -> list[dict[str, Any]]:
    """k samples of ``prompt``: the first alone, the rest ``batch`` to a call (the engine's
    ``sample_batch``); a call's time is shared by the samples it answered, its tokens are on
    the first of them, and each sample's wall time is its share plus its own check. ``told``:
    each call told the lines the edits checked before it tried (``told_messages``)."""
    rows: list[dict[str, Any]] = []
    tried: list[str] = []
    asked = prompt
    i = 1
    while i <= k:
        if told:
            asked = told_messages(prompt, question(ALTERNATIVES), tried)
        temperature = temps[0] if i == 1 else temps[1]
        # as the engine asks: the cap, or room to reprint the code shown (``oneline.reply_cap``)
        client = pool.for_role(role, temperature=temperature,
                               max_output=oneline.reply_cap(max_output, span),
                               choices=1 if i == 1 else min(batch, k - i + 1))
        started = time.monotonic()
        done = await client.complete(asked, session=f"{role}-{task.name}-{where}-b{batch}-{i}")
        call_wall = time.monotonic() - started
        replies = [(done.content, done.finish_reason),
                   *((c.content, c.finish_reason) for c in done.more)]
        rec, m = done.record, len(replies)
        for j, (content, finish) in enumerate(replies):
            began = time.monotonic()
            said = oneline.whole_lines(content or "", finish)  # as the engine reads
            pieces = [said]
            current = (repo_of(task, tmp) / span.path).read_text(encoding="utf-8")
            if each:  # as the engine reads several corrections: each edit alone
                pieces = oneline.alternatives(current, span, said, ALTERNATIVES + 1) or [said]
            changed = passed = False
            why = ""
            for n, one in enumerate(pieces):
                copy = materialize(task, tmp / f"{task.name}-{where}-{max_output}-b{batch}-"
                                   f"{i + j}-{n}")
                c, p, why = await _checked(roles, task, copy, span, one)
                changed, passed = changed or c, passed or p
                if told and c and not p:
                    new = (copy / span.path).read_text(encoding="utf-8")
                    tried += [x for x in changed_lines(current, new) if x not in tried]
                if passed:
                    why = f"alternative {n + 1} of {len(pieces)}"
                    break
            rows.append({"task": task.name, "where": where, "sample": i + j, "batch": m,
                         "way": batch,
                         "temperature": temperature,
                         "span": f"{span.path}:{span.start}-{span.end}", "changed": changed,
                         "passed": passed, "why": why, "reply": content or "",
                         "tried": len(pieces), "told": len(tried) if told else 0,
                         "output_tokens": rec.output_tokens if j == 0 else 0, "cap": max_output,
                         "cut": finish == "length",
                         "call_s": round(rec.duration_s / m, 2),
                         "ttft_s": None if rec.ttft_s is None else round(rec.ttft_s / m, 2),
                         "prompt_tokens": rec.prompt_tokens if j == 0 else 0,
                         "cached_tokens": rec.cached_tokens if j == 0 else 0,
                         "wall_s": round(call_wall / m + time.monotonic() - began, 2)})
            r = rows[-1]
            print(f"{task.name:22} {where:7} {r['span']:22} cap={max_output} b={m} #{i + j} "
                  f"t={temperature} out={r['output_tokens']} changed={r['changed']!s:5} "
                  f"passed={passed!s:5} tried={len(pieces)} {r['call_s']:5.1f}s "
                  f"cached={r['cached_tokens']}/{r['prompt_tokens']} {r['reply'][-70:]!r}",
                  flush=True)
        i += m
    return rows


def repo_of(task: Task, tmp: Path) -> Path:
    """The task's repository as materialized for its preflight (``_task``)."""
    return tmp / f"{task.name}-preflight"


async def _checked(roles: RoleMap, task: Task, copy: Path, span: Span, reply: str
                   ) -> tuple[bool, bool, str]:
    """Whether the engine's reader makes an edit of ``reply`` in ``copy`` (a fresh copy of
    the task's repository), whether the task's acceptance commands then pass, and why not."""
    current = (copy / span.path).read_text(encoding="utf-8")
    new, why = oneline.line_edit(current, span, reply)
    if new is None:
        return False, False, why
    (copy / span.path).write_text(new, encoding="utf-8")
    passed = await check_acceptance(task, copy, dict(os.environ), roles.run.command_timeout_s,
                                    sandbox=roles.sandbox, objects=copy / ".git" / "objects")
    return True, passed, why


async def _reread(roles: RoleMap, tasks: list[Task], rows: list[dict[str, Any]]) -> None:
    """The kept replies of ``rows`` read by the engine's reader as it is now, each edit
    checked in a fresh copy of its task's repository."""
    named = {t.name: t for t in tasks}
    rows = [r for r in rows if r["task"] in named]  # the tasks --task names, else all
    tally: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, r in enumerate(rows):
            task = named[r["task"]]
            path, lines = r["span"].rsplit(":", 1)
            start, end = (int(x) for x in lines.split("-"))
            copy = materialize(task, Path(tmp) / f"{task.name}-{i}")
            source = (copy / path).read_text(encoding="utf-8").splitlines()
            span = Span(path=path, start=start, end=end, focus=start, why="found",
                        text=tuple(source[start - 1:end]))
            said = oneline.whole_lines(r["reply"], "length" if r.get("cut") else "stop")
            # a reply to --variant alternatives (its rows say how many edits were tried): each
            # edit the engine's reader finds in it, alone, in a fresh copy, until one passes
            pieces = ([said] if "tried" not in r else oneline.alternatives(
                (copy / path).read_text(encoding="utf-8"), span, said, ALTERNATIVES + 1)
                or [said])
            changed = passed = False
            for j, piece in enumerate(pieces):
                one = copy if j == 0 else materialize(task, Path(tmp) / f"{task.name}-{i}-{j}")
                c, p, _ = await _checked(roles, task, one, span, piece)
                changed, passed = changed or c, passed or p
                if passed:
                    break
            print(f"{task.name:22} {r['where']:7} #{r['sample']} then changed={r['changed']!s:5} "
                  f"passed={r['passed']!s:5} now changed={changed!s:5} "
                  f"passed={passed!s:5}", flush=True)
            counts = tally.setdefault(task.name, [0, 0, 0])
            counts[0] += 1
            counts[1] += r["passed"]
            counts[2] += passed
    for name, (n, then, now) in tally.items():
        print(f"{name:22} passed then {then}/{n}, now {now}/{n}")
    print(f"all: passed then {sum(c[1] for c in tally.values())}/{len(rows)}, now "
          f"{sum(c[2] for c in tally.values())}/{len(rows)}")


async def _run(roles: RoleMap, role: str, tasks: list[Task], k: int,
               temps: tuple[float, float], variant: str, at_fix: str,
               wheres: tuple[str, ...], caps: tuple[int | None, ...],
               batches: tuple[int, ...] = (1,)) -> list[dict[str, Any]]:
    pool = ClientPool(roles, dict(os.environ))
    rows: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for task in tasks:
                rows += await _task(pool, roles, role, task, k, temps, Path(tmp), variant,
                                    at_fix, wheres, caps, batches)
    finally:
        await pool.aclose()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    task_args(ap)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--first", type=float, default=0.6, help="the first sample's temperature")
    ap.add_argument("--rest", type=float, default=0.6, help="samples 2..k's temperature")
    ap.add_argument("--variant", choices=("engine", "bare", "alternatives", "told"),
                    default="engine",
                    help="engine: the engine's request (a sentence on what is wrong, then the "
                    "line); bare: the line alone, as it was asked before; alternatives: three "
                    "corrections in one reply (line_alternatives = 3), each edit checked "
                    "alone; told: the same, each later call told the edits checked before it "
                    "that failed "
                    "(told_messages)")
    ap.add_argument("--at-fix", action="store_true",
                    help="ask of the place the explorers would show citing the reference fix")
    ap.add_argument("--with-uses", action="store_true",
                    help="with --at-fix: that place from the module-level definitions above it "
                    "that it uses (a variant tried and set aside: r62-place-uses)")
    ap.add_argument("--where", default="failure",
                    help=f"how the code is introduced, a list of: {', '.join([*WHERE, *OTHER])}")
    ap.add_argument("--caps", default="",
                    help="reply caps in tokens to ask each prompt under, k samples each, e.g. "
                    "256,512 (default: the role's line_max_output, as the engine asks)")
    ap.add_argument("--batch", default="1",
                    help="samples 2..k asked this many to a call (the engine's sample_batch); "
                    "a list, e.g. 1,2, asks each prompt k times each way, caches emptied "
                    "before each, and compares the ways side by side")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--reread", type=Path,
                    help="read again the replies an earlier --json kept (no model asked)")
    args = ap.parse_args()
    if args.reread:
        roles, tasks = chosen(args)
        asyncio.run(_reread(roles, tasks, json.loads(args.reread.read_text(encoding="utf-8"))))
        return
    wheres = tuple(w for w in args.where.split(",") if w)
    if bad := [w for w in wheres if w not in (*WHERE, *OTHER)]:
        raise SystemExit(f"unknown --where {', '.join(bad)}: choose from "
                         f"{', '.join([*WHERE, *OTHER])}")
    roles, tasks = chosen(args)
    caps = tuple(int(c) for c in args.caps.split(",") if c) or (
        roles.roles[args.role].line_max_output,)
    batches = tuple(int(b) for b in args.batch.split(",") if b) or (1,)
    rows = asyncio.run(_run(roles, args.role, tasks, args.k, (args.first, args.rest),
                           args.variant, ("uses" if args.with_uses else "found")
                           if args.at_fix else "", wheres, caps, batches))
    _by_batch(rows, batches)
    for where in wheres if len(wheres) > 1 else ():
        mine = [r for r in rows if r["where"] == where]
        tasks_passed = {r["task"] for r in mine if r["passed"]}
        print(f"{where:8} samples passed {sum(r['passed'] for r in mine)}/{len(mine)}, "
              f"unchanged {sum(not r['changed'] for r in mine)}, first sample passed "
              f"{sum(r['passed'] for r in mine if r['sample'] == 1)}, tasks passed "
              f"{len(tasks_passed)}")
    for cap in caps if len(caps) > 1 else ():
        mine = [r for r in rows if r["cap"] == cap]
        cut = [r for r in mine if r["cut"]]
        print(f"cap {cap}: samples passed {sum(r['passed'] for r in mine)}/{len(mine)} "
              f"(tasks {len({r['task'] for r in mine if r['passed']})}), cut at the cap "
              f"{len(cut)} (passed {sum(r['passed'] for r in cut)}), unchanged "
              f"{sum(not r['changed'] for r in mine)}, median call "
              f"{statistics.median(r['call_s'] for r in mine):.1f} s")
    asks = list(dict.fromkeys((r["task"], r["where"]) for r in rows))  # a task per wording
    first = [r for r in rows if r["sample"] == 1 and r["passed"]]
    any_ = [n for n in asks if any(r["passed"] for r in rows if (r["task"], r["where"]) == n)]
    print(f"\nfirst sample passed: {len(first)}/{len(asks)}   any of {args.k}: "
          f"{len(any_)}/{len(asks)} "
          f"({', '.join(t if len(wheres) == 1 else f'{t} ({w})' for t, w in any_) or 'none'})")
    later = [r["wall_s"] for r in rows if r["sample"] > 1]
    firsts = [r["wall_s"] for r in rows if r["sample"] == 1]
    if later and firsts:
        print(f"median wall: first {statistics.median(firsts):.1f} s, 2nd..kth "
              f"{statistics.median(later):.1f} s "
              f"({statistics.median(later) / statistics.median(firsts):.2f} of the first)")
    print(f"load average {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")


def _by_batch(rows: list[dict[str, Any]], batches: tuple[int, ...]) -> None:
    """Per way of asking (--batch): sample 1's wall time, samples 2..k's (each its share of
    its call plus its check) and their ratio; then each way's 2..k against one to a call."""
    if len(batches) < 2:
        return
    later: dict[int, float] = {}
    for b in batches:
        mine = [r for r in rows if r["way"] == b]
        firsts = [r["wall_s"] for r in mine if r["sample"] == 1]
        rest = [r for r in mine if r["sample"] > 1]
        if not firsts or not rest:
            continue
        first, later[b] = statistics.median(firsts), statistics.median(r["wall_s"] for r in rest)
        reading = statistics.median(r["ttft_s"] or 0.0 for r in rest)
        gen = statistics.median(r["call_s"] - (r["ttft_s"] or 0.0) for r in rest)
        print(f"batch {b}: sample 1 {first:.1f} s, samples 2..k {later[b]:.1f} s each "
              f"({later[b] / first:.2f}× the first; their call's share: reading {reading:.2f} s, "
              f"generating {gen:.2f} s), passed {sum(r['passed'] for r in mine)}/{len(mine)}")
    for b in batches[1:]:
        if b in later and batches[0] in later:
            print(f"samples 2..k at {b} to a call cost {later[b] / later[batches[0]]:.2f}× "
                  f"those at {batches[0]}")


if __name__ == "__main__":
    main()
