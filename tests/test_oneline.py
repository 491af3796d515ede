"""The one-line request (issue 27's "the one line to change"): the code the explorers found or
the failure points at, numbered; the reply corrects lines of it. The edit's rules on strings,
then whole runs against the simulator (a builder that copies the file back on its one-shot
and names the wrong line when asked for one), judged by the run branch's file."""

from __future__ import annotations

import json
import re

import pytest
from conftest import scenario_with
from routing_kit import (
    BUGGY_LINE,
    RIGHT_LINE,
    asked_line,
    copies_back_then_answers,
    demo_run,
    median_line_number,
    show,
)
from test_oneshot import QC_FOUND, QC_QUESTION, _explore_task_one_shot

from orchestrator import api
from orchestrator.engine.ladder import rungs
from orchestrator.engine.oneline import line_edit
from orchestrator.faces.demo import DEMO_TASK
from orchestrator.localize.localization import Span
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply

CODE = "RATES = {\n    \"AB\": 5,\n    \"QC\": 5,  # GST + QST\n}\n\n\ndef rate(p):\n    return RATES[p]\n"
SPAN = Span(path="rates.py", start=1, end=4, focus=3, text=tuple(CODE.splitlines()[:4]),
            why="found")


@pytest.mark.parametrize("reply", [
    '3: "QC": 15,  # GST + QST',                       # the form asked for
    'Line 3: `"QC": 15,  # GST + QST`',                # a word before, backticks around
    '```\n   3|     "QC": 15,  # GST + QST\n```',       # the prompt's own numbering, fenced
    'The corrected line should be `3|     "QC": 15,  # GST + QST`, since',  # inline, numbered
    # the whole block reprinted with the one line changed
    '1| RATES = {\n2|     "AB": 5,\n3|     "QC": 15,  # GST + QST\n4| }',
])
def test_a_corrected_line_replaces_that_line_with_the_files_indentation(reply):
    new, why = line_edit(CODE, SPAN, reply)
    assert why == "" and new == CODE.replace('"QC": 5,', '"QC": 15,')


@pytest.mark.parametrize(("reply", "said"), [
    ('3:     "QC": 5,  # GST + QST', "was given a new text"),   # the line as it is
    ('7: def rate(province):', "was given a new text"),          # outside the code shown
    ("The QC rate is wrong.", "was given a new text"),           # no line at all
    ("1: A = 1\n2: B = 2\n3: C = 3\n4: D = 4", "more than 3"),   # a rewrite, not a line
])
def test_a_line_given_back_outside_or_missing_changes_nothing_and_says_why(reply, said):
    new, why = line_edit(CODE, SPAN, reply)
    assert new is None and said in why


# Two live replies of the r16 suite (the 1.5B, reason-first): the right fix in backticks or alone
# in a fence, with no number; every numbered line of those runs was a copy.
SERVICE = ("async function rename(store, id, name) {\n  const record = await store.get(id);\n"
           "  if (!record) throw new Error(`no record ${id}`);\n"
           "  store.save(id, { ...record, name });\n  return store.get(id);\n}\n")
CONFIG = ('DEFAULTS = {"timeout": 30, "retries": 3, "verbose": False}\n\n\n'
          "def load_settings(user):\n    merged = dict(user)\n    merged.update(DEFAULTS)\n"
          "    return merged\n")


def _span(path: str, code: str) -> Span:
    lines = tuple(code.splitlines())
    return Span(path=path, start=1, end=len(lines), focus=1, text=lines, why="pinned")


@pytest.mark.parametrize(("code", "reply", "old", "fixed"), [
    (SERVICE, "The line `store.save(id, { ...record, name });` is wrong because it does not wait "
     "for the save operation to complete before returning the record. The correct line should be "
     "`await store.save(id, { ...record, name });` to ensure that the save operation is completed "
     "before returning the record.",
     "  store.save(id", "  await store.save(id"),
    (CONFIG, "The issue is that the code incorrectly updates the `merged` dictionary with "
     "`DEFAULTS`. The corrected line should read:\n```python\nmerged.update({k: v for k, v in "
     "DEFAULTS.items() if k not in merged})\n```\nThis ensures that only new key-value pairs are "
     "added.", "merged.update(DEFAULTS)",
     "merged.update({k: v for k, v in DEFAULTS.items() if k not in merged})"),
])
def test_a_corrected_line_given_without_its_number_goes_to_the_line_it_corrects(
        code, reply, old, fixed):
    new, why = line_edit(code, _span("f", code), reply)
    assert why == "" and new == code.replace(old, fixed, 1)


@pytest.mark.parametrize("reply", [
    "The line `return store.get(id);` is wrong: it reads back too early.",  # the wrong line quoted
    "The bug: `store.get(id)` runs before the save has finished.",          # a piece of a line
    "The `record` is stale and `name` is lost; use `Promise.all` here.",    # like no line
])
def test_code_in_a_reason_that_corrects_no_line_changes_nothing(reply):
    new, why = line_edit(SERVICE, _span("service.js", SERVICE), reply)
    assert new is None and "was given a new text" in why


def test_the_rung_follows_the_first_one_shot_only_when_the_role_asks_for_it():
    from orchestrator.config.schema import RoleSpec
    plain = RoleSpec(model="m", one_shot=True, one_shot_attempts=2)
    lined = plain.model_copy(update={"one_line": True})
    assert [r.strategy for r in rungs(plain, 1)] == ["one_shot", "one_shot_fact", "tool_loop"]
    assert [r.strategy for r in rungs(lined, 1)] == ["one_shot", "one_line", "one_shot_fact",
                                                     "tool_loop"]


async def test_a_builder_that_copies_the_file_back_is_asked_for_the_one_line(fresh_sim,
                                                                             sample_repo):
    """The demo's median bug, pinned by its failing test: the one-shot gives stats.py back
    unchanged; the one-line request shows the failing function numbered, the model names the
    last line with its fix (no indentation), and the run passes on that line alone."""
    original = (sample_repo / "stats.py").read_text(encoding="utf-8")

    respond = copies_back_then_answers(original, iter([RIGHT_LINE]))
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=respond)}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_line=true"))
    assert result.status == "succeeded", result.reason
    head, _, tail = original.rpartition(BUGGY_LINE)
    assert show(sample_repo, f"{result.branch}:stats.py") == head + RIGHT_LINE + tail
    assert [(a.strategy, a.changed) for a in result.attempt_log] == [
        ("one_shot", False), ("one_line", True)]
    [_, asked] = [ChatRequestView.from_body(r.body)
                  for r in fresh_sim.state.requests_for("sim-builder")]
    assert "The failure points at this code (stats.py lines" in asked.messages[-1]["content"]


async def test_the_line_is_asked_of_the_code_the_explorers_found(fresh_sim, tmp_path):
    """An explore task the failure does not pin: the explorer cites the QC line of the rate
    table two modules away. The failure pins nothing and the explore step left places to point
    at, so the one-line request comes first (no whole-file one-shot before it): shown the table
    numbered as what the explorers found, the builder corrects the QC line alone."""
    def respond(req: ChatRequestView) -> Reply:
        if asked_line(req):
            return Reply(content='18: "QC": Decimal("0.14975"),     # Quebec: GST 5% + QST 9.975%')
        return Reply(content="invoicer/tax/jurisdictions.py\n```python\n"
                             + (tmp_path / "repo/invoicer/tax/jurisdictions.py").read_text()
                             + "```\n")

    task, result, _ = await _explore_task_one_shot(
        fresh_sim, tmp_path, "xp-invoice-tax", QC_QUESTION, QC_FOUND,
        builder=ModelBehavior(respond=respond), sets=["builder.one_line=true"])
    assert result.status == "succeeded", result.reason
    assert [(a.strategy, a.changed) for a in result.attempt_log] == [("one_line", True)]
    fixed = show(tmp_path / "repo", f"{result.branch}:{task.sim.path}")
    assert task.sim.new in fixed and task.sim.old not in fixed
    builder = [ChatRequestView.from_body(r.body) for r in fresh_sim.state.requests_for(
        "sim-builder")]
    assert len(builder) == 1 and asked_line(builder[0])
    asked = builder[0].messages[-1]["content"]
    assert "The explorers found this code (invoicer/tax/jurisdictions.py lines 7-21" in asked


async def test_the_line_is_asked_of_the_function_the_task_names_not_of_its_caller(fresh_sim,
                                                                              tmp_path):
    """The live py-id-validation (r15): the failing test calls ``register`` in accounts.py,
    which calls the wrong ``is_valid_id`` in validate.py; the traceback's first source frame is
    the caller, and every later one-shot of both maps was pointed at accounts.py and gave it
    back. The task names ``is_valid_id``: the one-line request shows that function, and a
    builder that corrects what it is shown passes (shown the caller, it could not)."""
    from test_oneshot import _call, _setup

    from orchestrator.benchmark.suite import copy_repo, load_suite

    task = load_suite("live").select(["py-id-validation"]).tasks[0]
    repo = copy_repo(task.repo, tmp_path / "repo")
    caller = (repo / "accounts.py").read_text(encoding="utf-8")

    def respond(req: ChatRequestView) -> Reply:
        shown = req.messages[-1]["content"]
        if asked_line(req):  # corrects the return line of whatever function it is shown
            n = re.findall(r"^ *(\d+)\|\s+return ", shown, re.M)
            fix = "return ID_PATTERN.fullmatch(text) is not None"
            return Reply(content=f"{n[-1]}: {fix}" if "def is_valid_id" in shown
                         else f"{n[-1]}: return accounts")
        return Reply(content=f"accounts.py\n```python\n{caller}```\n")

    plan = {"goal": "fix it", "steps": ["fix it"], "acceptance": list(task.acceptance)}
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": ModelBehavior(script=[_call("submit", **plan)]),
        "sim-builder": ModelBehavior(respond=respond)}))
    result = await api.arun(task.instruction, **_setup(
        fresh_sim, repo, "builder.one_line=true", f'verify.commands=["{task.acceptance[0]}"]'))
    assert result.status == "succeeded", result.reason
    assert [(a.strategy, a.changed) for a in result.attempt_log] == [
        ("one_shot", False), ("one_line", True)]
    assert "fullmatch" in show(repo, f"{result.branch}:validate.py")
    asked = [ChatRequestView.from_body(r.body)
             for r in fresh_sim.state.requests_for("sim-builder")][-1].messages[-1]["content"]
    # from the pattern the function uses (shown the function alone, the live 1.5B said its
    # ID_PATTERN was "not defined anywhere")
    assert "The failure points at this code (validate.py lines 3-8)" in asked
    assert '3| ID_PATTERN = re.compile(r"[a-z]+[0-9]+")' in asked


async def test_line_samples_ask_the_line_again_at_the_highest_temperature_until_one_passes(
        fresh_sim, sample_repo):
    """``line_samples = 3``: the demo's one-shot gives stats.py back; the one-line request's
    first sample says what is wrong and names no line, its second corrects the line. Both send the very same
    messages (the server's cache serves the second), the first at the attempt's temperature
    and the second at the role's highest; the third is never asked, and the pass is the
    one-line rung's."""
    from orchestrator.sim.scenario import CacheSpec
    original = (sample_repo / "stats.py").read_text(encoding="utf-8")
    lines: list[str] = []

    def respond(req: ChatRequestView) -> Reply:
        if not asked_line(req):
            return Reply(content=f"stats.py\n```python\n{original}```\n")
        n = median_line_number(req.messages[-1]["content"])
        lines.append(n)
        if len(lines) == 1:
            return Reply(content="The median of an even count is the mean of the middle two.")
        return Reply(content=f"{n}: {RIGHT_LINE.strip()}")

    scenario = scenario_with(**{"sim-builder": ModelBehavior(respond=respond)})
    fresh_sim.set_scenario(scenario.model_copy(update={"cache": CacheSpec(min_tokens=0,
                                                                          block=1)}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_line=true",
        "builder.line_samples=3", "builder.temperatures=[0.0, 0.3, 0.9, 0.6]"))
    assert result.status == "succeeded", result.reason
    assert [(a.strategy, a.changed) for a in result.attempt_log] == [
        ("one_shot", False), ("one_line", True)]
    head, _, tail = original.rpartition(BUGGY_LINE)
    assert show(sample_repo, f"{result.branch}:stats.py") == head + RIGHT_LINE + tail
    asked = [r for r in fresh_sim.state.requests_for("sim-builder")
             if asked_line(ChatRequestView.from_body(r.body))]
    assert len(asked) == 2  # stopped at the first pass
    assert json.dumps(asked[0].body["messages"]) == json.dumps(asked[1].body["messages"])
    assert [r.body.get("temperature") for r in asked] == [0.3, 0.9]
    samples = result.attempt_log[1].samples
    assert [(s.index, s.changed, s.passed) for s in samples] == [(1, False, False),
                                                                 (2, True, True)]
    assert samples[1].cached_tokens > 0


def test_the_line_request_shows_a_function_from_the_constant_just_above_it_only():
    from orchestrator.engine.places import NEAR_CONSTANT, line_span
    from orchestrator.localize.localization import Localization

    far = NEAR_CONSTANT + 1
    body = ("LIMIT = 3\n" + "\n" * far + "PATTERN = 1\n\n\ndef check(x):\n"
            "    return x < LIMIT and x != PATTERN\n")
    lines = body.splitlines()
    at = {name: n for n, line in enumerate(lines, 1) for name in ("LIMIT", "PATTERN", "def")
          if line.startswith(name)}
    fn = Span(path="m.py", start=at["def"], end=at["def"] + 1, focus=at["def"],
              text=tuple(lines[at["def"] - 1:at["def"] + 1]), why="")

    def const(path: str, name: str) -> Span:
        return Span(path=path, start=at[name], end=at[name], focus=at[name],
                    text=(lines[at[name] - 1],), why="")
    loc = Localization(suspects=("m.py", "n.py"), spans=(
        fn, const("m.py", "LIMIT"), const("m.py", "PATTERN"), const("n.py", "PATTERN")))
    shown = line_span(loc, fn, body)
    assert shown.start == at["PATTERN"] and shown.end == fn.end  # LIMIT is too far above
    assert shown.text == tuple(lines[at["PATTERN"] - 1:fn.end])
    alone = Localization(suspects=("m.py",), spans=(fn, const("n.py", "PATTERN")))
    assert line_span(alone, fn, body) == fn  # a constant of another file is not this one's


def test_the_focus_is_the_definition_the_task_names_else_its_file_else_the_first():
    from orchestrator.engine.places import focus_span
    from orchestrator.localize.localization import Localization

    def span(path: str, first: str) -> Span:
        return Span(path=path, start=1, end=2, focus=1, text=(first, "  pass"), why="")

    spans = (span("app/toolbar.js", "function clickAll(count) {"),
             span("app/handlers.js", "function makeHandlers(count) {"),
             span("app/report.sh", "set -e"))
    loc = Localization(suspects=("app/toolbar.js", "app/handlers.js", "app/report.sh"),
                       spans=spans)
    assert focus_span(loc, "makeHandlers(3) reports 3").path == "app/handlers.js"
    assert focus_span(loc, "report.sh exits 0 when its input is missing").path == "app/report.sh"
    assert focus_span(loc, "the report.shell exits 0").path == "app/toolbar.js"  # not its file
    assert focus_span(loc, "buttons report the wrong index").path == "app/toolbar.js"
    assert focus_span(loc).path == "app/toolbar.js"


def test_a_number_one_off_goes_to_the_line_the_text_corrects_and_a_copy_changes_nothing():
    # the live 1.5B numbered the QC line 18 as 19, and copied lines of the table back
    new, why = line_edit(CODE, SPAN, '4: "QC": 15,  # GST + QST')
    assert why == "" and new == CODE.replace('"QC": 5,', '"QC": 15,')
    # ... and numbered it 10 for 18 once: the AB line here must stay
    new, why = line_edit(CODE, SPAN, '2: "QC": Decimal("0.05") + Decimal("0.09975"),')
    assert why == "" and '"AB": 5' in new and '"QC": 5' not in new
    new, why = line_edit(CODE, SPAN, '2: RATES = {\n3:     "QC": 5,  # GST + QST\n4: }')
    assert new is None and "was given a new text" in why


def test_the_live_reply_that_numbered_the_qc_line_10_corrects_qc_and_keeps_manitoba():
    """Live, 17:59: the 1.5B answered '10: "QC": Decimal("0.05") + Decimal("0.09975"),' for
    the rate table (QC is line 18, line 10 is Manitoba); taken at its word it had replaced
    Manitoba's rate and the tests still passed."""
    from orchestrator.benchmark.suite import load_suite

    task = load_suite("live").select(["xp-invoice-tax"]).tasks[0]
    current = (task.repo / task.sim.path).read_text(encoding="utf-8")
    lines = current.splitlines()
    span = Span(path=task.sim.path, start=7, end=21, focus=18, text=tuple(lines[6:21]),
                why="found")
    new, why = line_edit(current, span, '10: "QC": Decimal("0.05") + Decimal("0.09975"),')
    assert why == "" and new is not None
    assert new.splitlines()[9] == lines[9] and '"MB": Decimal("0.12")' in new
    assert new.splitlines()[17] == '    "QC": Decimal("0.05") + Decimal("0.09975"),'


async def test_a_corrected_line_never_reaches_a_file_through_a_link_or_a_fifo(tmp_path):
    """The one-line edit reads and writes the span's file as every one-shot write does: a
    symlink or hard link out of the worktree, or a FIFO, put where the file was is refused, and
    the file outside is left as it was (judged by its bytes)."""
    import os

    from orchestrator.engine.oneshot import _line_changed, write_files

    outside = tmp_path / "outside.py"
    outside.write_text(CODE)
    root = tmp_path / "wt"
    root.mkdir()
    before = outside.read_bytes()
    (root / "rates.py").symlink_to(outside)
    changed, why = _line_changed(root, SPAN, '3: "QC": 15,')
    assert changed == {} and "cannot be read" in why
    (root / "rates.py").unlink()
    os.mkfifo(root / "rates.py")
    changed, why = _line_changed(root, SPAN, '3: "QC": 15,')
    assert changed == {} and "cannot be read" in why
    (root / "rates.py").unlink()
    os.link(outside, root / "linked.py")  # a hard link: the edit replaces the worktree's name
    linked = SPAN.model_copy(update={"path": "linked.py"})
    changed, why = _line_changed(root, linked, '3: "QC": 15,  # GST + QST')
    written, refused = await write_files(root, {**changed, "../outside.py": "x = 1\n",
                                                str(outside): "x = 1\n"}, frozenset())
    assert written == ["linked.py"] and len(refused) == 2
    assert '"QC": 15' in (root / "linked.py").read_text()
    assert outside.read_bytes() == before


# The label table of xp-js-label-address, and live replies of the 1.5B that rewrote it or the
# function below it in another shape (bench/line_samples.py, 2026-12-05).
TABLE = ("'use strict';\n\nconst ADDRESS_FOR = {\n  invoice: 'billing',\n  packingSlip: 'shipping',\n"
         "  label: 'billing',\n};\n\nfunction lastNDays(today, days) {\n"
         "  return { start: addDays(today, -days), end: today };\n}\n")


@pytest.mark.parametrize(("reply", "old", "fixed"), [
    # the table folded onto one line, the right fix in it
    ("To fix this, the line should be changed to `const ADDRESS_FOR = { invoice: 'billing', "
     "packingSlip: 'shipping', label: 'shipping', };`.", "label: 'billing'", "label: 'shipping'"),
    # the function reprinted whole in a fence, unnumbered, one line changed
    ("The corrected line should be:\n```javascript\nfunction lastNDays(today, days) {\n  return "
     "{ start: addDays(today, -(days - 1)), end: today };\n}\n```", "-days)", "-(days - 1))"),
    # the prompt's numbering kept on some lines of the reprint, not on others
    ("```\n   9| function lastNDays(today, days) {\n  return { start: addDays(today, -days + 1), "
     "end: today };\n}\n```", "-days)", "-days + 1)"),
])
def test_code_rewritten_in_another_shape_changes_only_the_tokens_it_changes(reply, old, fixed):
    span = _span("resolve.js", TABLE)
    new, why = line_edit(TABLE, span, reply)
    assert why == "" and new == TABLE.replace(old, fixed, 1)


MERGE = ('DEFAULTS = {"timeout": 30, "retries": 3}\n\n\ndef load_settings(user):\n'
         '    merged = dict(user)\n    merged.update(DEFAULTS)\n    return merged\n')


def test_a_short_rewrite_that_keeps_each_lines_name_is_read_though_much_of_it_is_new():
    """Live (r42, py-config-merge): the right fix as two unnumbered lines, 10 of its 16 tokens
    the code's (under ``ALIGNED``), each line still assigning or calling what it did."""
    reply = ("The problem lies in the `merged.update(DEFAULTS)` line.\n\nHere's the corrected line:"
             "\n\n```python\nmerged = dict(DEFAULTS.copy())\nmerged.update(user)\n```\n\nThis "
             "ensures that the original `DEFAULTS` dictionary remains unchanged.")
    new, why = line_edit(MERGE, _span("config.py", MERGE), reply)
    assert why == "" and new == MERGE.replace("dict(user)", "dict(DEFAULTS.copy())").replace(
        "update(DEFAULTS)", "update(user)")


@pytest.mark.parametrize("reply", [
    # as much new, but a line calls another name (live, r39: a signature become a return)
    "```\nmerged = dict(DEFAULTS)\nmerged.setdefault(user, 1)\n```",
    # a line added next to the one it changes
    "```\nmerged = dict(DEFAULTS)\nprint(merged)\nmerged.update(user)\n```",
])
def test_a_short_rewrite_that_renames_or_adds_lines_changes_nothing(reply):
    new, why = line_edit(MERGE, _span("config.py", MERGE), reply)
    assert new is None and "was given a new text" in why


def test_a_reprint_numbered_from_the_wrong_line_is_read_by_its_tokens():
    """Live (r6): the label table (lines 3-7 here) reprinted numbered 7-11, no fence: its
    numbered lines read as a copy (7) and as lines outside the code (8-11)."""
    lines = TABLE.splitlines()
    span = Span(path="resolve.js", start=3, end=7, focus=6, text=tuple(lines[2:7]), why="found")
    reply = ("The line 7 is wrong. The correct line should be:\n7| const ADDRESS_FOR = {\n8|   "
             "invoice: 'billing',\n9|   packingSlip: 'shipping',\n10|   label: 'shipping',\n11| };")
    new, why = line_edit(TABLE, span, reply)
    assert why == "" and new == TABLE.replace("label: 'billing'", "label: 'shipping'")


@pytest.mark.parametrize("reply", [
    # the wrong table folded and given back (its last comma dropped: layout, not a change)
    "```\nconst ADDRESS_FOR = { invoice: 'billing', packingSlip: 'shipping', label: 'billing' };\n```",
    # code that is mostly not this code
    "The fix: `combined_rate = COMBINED_RATES[invoice.province] * subtotal`.",
    # a reprint that leaves out the middle of the code (elided) is not an edit
    "```\nconst ADDRESS_FOR = {\n  // ...\n};\nfunction lastNDays(today, days) {\n  return { start: "
    "addDays(today, -(days - 1)), end: today };\n}\n```",
    # a rewrite of more lines than one request may change
    "```\nconst ADDRESS_FOR = { invoice: 'shipping', packingSlip: 'billing', label: 'shipping' };\n"
    "function lastNDays(today, n) {\n  return { start: addDays(today, 1 - n), end: addDays(today, 1) };"
    "\n}\n```",
])
def test_a_rewrite_that_copies_strays_or_elides_changes_nothing(reply):
    new, why = line_edit(TABLE, _span("resolve.js", TABLE), reply)
    assert new is None and "was given a new text" in why


def test_a_rewritten_piece_that_fits_more_than_one_place_changes_nothing():
    """Live (r6): 'the value for Quebec ... should be changed to `Decimal("0.14975")`' fits the
    rate of each of five provinces at 5 %: which one is not the reader's guess."""
    from orchestrator.benchmark.suite import load_suite

    task = load_suite("live").select(["xp-invoice-tax"]).tasks[0]
    current = (task.repo / task.sim.path).read_text(encoding="utf-8")
    lines = current.splitlines()
    span = Span(path=task.sim.path, start=7, end=21, focus=18, text=tuple(lines[6:21]),
                why="found")
    new, why = line_edit(current, span, 'The value for Quebec in the `COMBINED_RATES` dictionary '
                         'should be changed to `Decimal("0.14975")`.')
    assert new is None and "was given a new text" in why
    new, why = line_edit(current, span, 'It should be `"QC": Decimal("0.14975"),`, since')
    assert why == "" and new is not None and '"QC": Decimal("0.14975")' in new  # that one line
    assert [a for a, b in zip(lines, new.splitlines(), strict=True) if a != b] == [lines[17]]


@pytest.mark.parametrize(("reply", "fixed"), [
    # live (r37): the old text on two lines, the reply names which
    ("The line number 6 is wrong because it should read `'shipping'` instead of `'billing'` "
     "for the label.", TABLE.replace("label: 'billing'", "label: 'shipping'")),
    ("Change `-days` to `-(days - 1)` so the range has seven days.",
     TABLE.replace("-days)", "-(days - 1))")),
    ("The start is off by one: it should go from `addDays(today, -days)` to "
     "`addDays(today, 1 - days)`.", TABLE.replace("-days)", "1 - days)")),
    # ambiguous: `'billing'` is on two lines and no line is named
    ("It should read `'shipping'` instead of `'billing'`.", None),
    # the old text is on no line of the code
    ("Replace `ADDRESS_FOR.label` with `ADDRESS_FOR.shipping`.", None),
])
def test_a_change_said_as_a_substitution_is_made_on_the_one_line_holding_it(reply, fixed):
    new, why = line_edit(TABLE, _span("resolve.js", TABLE), reply)
    assert new == fixed and (why == "") == (fixed is not None)


def test_a_substitution_said_of_the_bug_gives_way_to_the_corrected_code():
    """Live (r38, solo): "it sets the `label` property to `'billing'` instead of `'shipping'`"
    describes the bug; read as a fix it turned packingSlip to billing. The corrected table the
    same reply gives at its end is the edit."""
    lines = TABLE.splitlines()
    span = Span(path="resolve.js", start=3, end=7, focus=6, text=tuple(lines[2:7]), why="found")
    reply = ("The line `const ADDRESS_FOR = { invoice: 'billing', packingSlip: 'shipping', label: "
             "'billing', };` is wrong because it sets the `label` property to `'billing'` instead "
             "of `'shipping'`. The corrected line should be `const ADDRESS_FOR = { invoice: "
             "'billing', packingSlip: 'shipping', label: 'shipping', };`.")
    new, why = line_edit(TABLE, span, reply)
    assert why == "" and new == TABLE.replace("label: 'billing'", "label: 'shipping'")
    new, why = line_edit(TABLE, span, "It sets the `label` property to `'billing'` instead of "
                         "`'shipping'` on line 6.")
    assert new is None and "was given a new text" in why  # the bug, said alone: no edit

