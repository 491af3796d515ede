"""Mechanical edits of a line a model chose (``engine/mutants.py``, ``[roles.<build>] mutants``):
the edits each operator makes on the live suite's one-token bugs, what is never edited, then
whole runs against the simulator (the real SDK over HTTP) where a builder keeps writing the
wrong fix on the right line, judged by the run branch's file, the samples and the events."""

from __future__ import annotations

import re
import subprocess

from conftest import scenario_with
from routing_kit import asked_line, demo_run, show

from orchestrator import api
from orchestrator.engine.mutants import (
    chosen,
    comment_for,
    mutants,
    pieces,
    place_lines,
    swaps,
    task_numbers,
)
from orchestrator.engine.oneline import line_edit
from orchestrator.faces.demo import DEMO_TASK
from orchestrator.localize.localization import Span
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply


def _texts(line: str, **kw) -> dict[str, str]:
    return {m.text: m.operator for m in mutants(line, **kw)}


def test_the_live_suite_s_one_token_fixes_are_among_their_line_s_edits():
    # xp-loyalty-tier, xp-parcel-weight, py-paging, xp-js-weekly-runs, xp-logstat-slow
    assert _texts("        if lifetime_points > needed:")[
        "        if lifetime_points >= needed:"] == "boundary"
    assert _texts('    return value / _factor(KG_PER, unit, "weight")')[
        '    return value * _factor(KG_PER, unit, "weight")'] == "arithmetic"
    assert _texts("    return items[start:start + size - 1]")[
        "    return items[start:start + size]"] == "offset"
    js = "  return { start: addDays(today, -days), end: today };"
    assert _texts(js, comment="//")[
        "  return { start: addDays(today, -(days - 1)), end: today };"] == "operand"
    numbers = tuple(task_numbers("misses most: 1840 ms and 730 ms; slower than 500 ms"))
    assert numbers == ("1840", "730", "500")
    assert _texts("def slow_requests(requests, threshold_ms=5000):", numbers=numbers)[
        "def slow_requests(requests, threshold_ms=500):"] == "number"


def test_strings_comments_calls_keys_and_declarations_are_left_alone():
    edits = _texts('    label = "a < b - 1"  # 3 > 2', numbers=("7",))
    assert edits == {}  # the assigned name, a string, a comment: nothing to edit
    # a call's name, an attribute, a key and what a line assigns are no operands
    js = "  const total = items.reduce(sum, { count: limit });"
    assert set(_texts(js, comment="//")) == {
        "  const total = items.reduce((sum - 1), { count: limit });",
        "  const total = items.reduce((sum + 1), { count: limit });",
        "  const total = items.reduce(sum, { count: (limit - 1) });",
        "  const total = items.reduce(sum, { count: (limit + 1) });"}
    # `//` is Python's floor division, a comment in JavaScript
    assert _texts("    return a // b", comment="#") and not _texts("    x; // a - 1", comment="//")
    assert comment_for("src/time/ranges.js") == "//" and comment_for("tool.py") == "#"
    assert comment_for("run.sh") == "#"


def test_operands_after_keywords_and_in_slices_are_edited_declarations_and_steps_are_not():
    got = set(_texts("        if lifetime_points > needed:"))
    assert "        if lifetime_points > (needed - 1):" in got  # a block's `:` ends no key
    assert "        if (lifetime_points + 1) > needed:" in got  # a name after `if` is a value
    assert "    return items[(start - 1):start + size - 1]" in _texts(
        "    return items[start:start + size - 1]")  # a slice's bound; `items[` is indexed
    assert not any("(items" in t for t in _texts("    return items[start:start + size - 1]"))
    loop = _texts("    for (var i = 0; i < count; i++) {", comment="//")
    assert not any("-+" in t or ")++" in t for t in loop)  # `i++` is a step, not `i + +`
    assert "    for (var i = 0; i <= count; i++) {" in loop
    assert set(_texts("def f(a: int, b=2):")) == {"def f(a: int, b=3):", "def f(a: int, b=1):"}
    assert _texts("    key=lambda r: (-r.ms, r.time)") == {}


def test_edits_are_different_in_operator_order_and_limited():
    line = "    if n > 1 and n * 2 < limit:"
    got = mutants(line, limit=40)
    assert len({m.text for m in got}) == len(got)
    order = ["boundary", "arithmetic", "offset", "number", "operand"]
    kinds = [m.operator for m in got]
    assert kinds == sorted(kinds, key=order.index)
    assert len(mutants(line, limit=3)) == 3


def test_two_names_are_swapped_within_a_line_and_with_the_next():
    # py-config-merge: the user's values are overwritten by the defaults
    assert swaps("    merged = dict(user)", "    merged.update(DEFAULTS)") == [
        ("    merged = dict(DEFAULTS)", "    merged.update(user)")]
    # `unknown` is on both lines; within one line nothing is swapped (`a > b` is no `b > a`)
    assert swaps("    unknown = set(user) - set(DEFAULTS)", "    if unknown:") == []
    assert swaps("    return a - b") == [] and swaps("  if [[ $n > $max ]]; then") == []
    # a declaration's names are parameters; a string's prefix is no name; calls stay
    assert swaps("def f(a, b):", "    return g(b)") == []
    assert swaps('    raise KeyError(f"{a}")', "    b = c") == []
    assert swaps("    total = price(n)", "    return total") == []


def test_a_short_place_has_every_line_edited_the_chosen_first_and_a_swap_is_two_lines():
    span = Span(path="config.py", start=4, end=11, focus=9, text=(), why="found")
    assert place_lines(span, (9,), 12) == (9, 4, 5, 6, 7, 8, 10, 11)
    assert place_lines(span, (9,), 7) == (9,)  # longer than that: the chosen lines only
    assert place_lines(span, (9,), 0) == (9,)
    code = ('DEFAULTS = {"timeout": 30}\n\n\ndef load_settings(user):\n    """Doc."""\n'
            "    unknown = set(user) - set(DEFAULTS)\n    if unknown:\n"
            '        raise KeyError(f"unknown settings: {sorted(unknown)}")\n'
            "    merged = dict(user)\n    merged.update(DEFAULTS)\n    return merged\n")
    got = pieces(code, span, place_lines(span, (9,), 12))
    assert got[:3] == [("9: merged = dict((user - 1))", "operand"),
                       ("9: merged = dict((user + 1))", "operand"),
                       ("9: merged = dict(DEFAULTS)\n10: merged.update(user)", "swap")]
    assert not any(p.startswith("4:") for p, _ in got)  # the def line: parameters
    assert not any("KeyError(" in p and "f\"" not in p for p, _ in got)  # f"..." is a string
    fixed, why = line_edit(code, span, got[2][0])
    assert why == "" and fixed == code.replace(
        "dict(user)\n    merged.update(DEFAULTS)", "dict(DEFAULTS)\n    merged.update(user)")
    # the line below chosen: swapped with the line above; the place ends there
    last = Span(path="config.py", start=4, end=10, focus=10, text=(), why="found")
    assert pieces(code, last, (10,)) == [("10: merged.update((DEFAULTS - 1))", "operand"),
                                         ("10: merged.update((DEFAULTS + 1))", "operand"),
                                         (got[2][0], "swap")]
    assert [p for p, _ in pieces(code, last, (9, 10))].count(got[2][0]) == 1  # once


def test_the_task_s_numbers_skip_dates_and_read_thousands():
    assert task_numbers("from 2024-03-03 to 2024-03-10, over 1,000 points; 8 days not 7") == [
        "1000", "8", "7"]


def test_the_lines_chosen_are_those_changed_and_the_one_named_within_the_code_shown():
    code = "a = 1\nb = 2\nc = 3\nd = 4\n"
    span = Span(path="m.py", start=2, end=3, focus=2, text=("b = 2", "c = 3"), why="found")
    assert chosen(code, "a = 1\nb = 5\nc = 3\nd = 4\n", span, None) == (2,)
    assert chosen(code, "a = 9\nb = 2\nc = 3\nd = 4\n", span, None) == ()  # outside the span
    assert chosen(code, None, span, 3) == (3,)  # named, nothing written
    assert chosen(code, "a = 1\nb = 5\nc = 3\nd = 4\n", span, 3) == (3, 2)
    got = pieces(code, span, (2,), numbers=("7",))
    assert ("2: b = 7", "number") in got and ("2: b = 3", "number") in got


# the demo's median with a one-token bug: the lower middle is taken twice
_ONE_TOKEN = "    return (ordered[mid] + ordered[mid]) / 2\n"
_FIXED = "    return (ordered[(mid - 1)] + ordered[mid]) / 2\n"


def _one_token_repo(repo):
    path = repo / "stats.py"
    text = path.read_text(encoding="utf-8")
    head, _, tail = text.rpartition("    return ordered[mid]\n")
    path.write_text(head + _ONE_TOKEN + tail, encoding="utf-8")
    ident = ["-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgSign=false"]
    subprocess.run(["git", *ident, "commit", "-qam", "one token"], cwd=repo, check=True)
    return head, tail


def _wrong_on_the_line(seen: list[ChatRequestView]):
    """A builder that gives whole files back unchanged and, asked for one line, writes the
    wrong fix on the right line (the upper middle added)."""
    def respond(req: ChatRequestView) -> Reply:
        seen.append(req)
        if not asked_line(req):
            return Reply(content="I see no bug in stats.py.")
        shown = req.messages[-1]["content"]
        n = re.findall(r"(\d+)\|     return \(ordered\[mid\] \+ ordered\[mid\]\) / 2$",
                       shown, re.M)[-1]
        return Reply(content="It adds the same middle twice.\n"
                             f"{n}: return (ordered[mid] + ordered[mid + 1]) / 2\n")
    return respond


async def test_a_wrong_fix_on_the_right_line_is_followed_by_its_line_s_edits_and_one_passes(
        fresh_sim, sample_repo):
    head, tail = _one_token_repo(sample_repo)
    seen: list[ChatRequestView] = []
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        respond=_wrong_on_the_line(seen))}))
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_line=true",
        "builder.line_samples=2", "builder.mutants=12"))
    assert result.status == "succeeded", result.reason
    assert show(sample_repo, f"{result.branch}:stats.py") == head + _FIXED + tail
    attempt = result.attempt_log[1]
    assert attempt.strategy == "one_line" and attempt.passed
    kept = [s for s in attempt.samples if s.passed]
    assert [(s.mutant, s.call_s, s.output_tokens, s.alternative) for s in kept] == [
        ("operand", 0.0, 0, 0)]
    model_samples = [s for s in attempt.samples if not s.mutant]
    assert len(model_samples) == 1  # the first sample's edits passed before a second call
    assert sum(asked_line(r) for r in seen) == 1
    said = [e.message for e in events if e.kind == "warning" and "mechanical" in e.message]
    assert said and "written by no model" in said[0] and "(mid - 1)" in said[0]
    finished = [e for e in events if e.kind == "sample_finished" and e.mutant]
    assert finished[-1].passed and all(not e.passed for e in finished[:-1])


async def test_without_mutants_the_same_builder_fails(fresh_sim, sample_repo):
    _one_token_repo(sample_repo)
    seen: list[ChatRequestView] = []
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        respond=_wrong_on_the_line(seen))}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_line=true",
        "builder.line_samples=2", "run.max_attempts=2"))
    assert result.status == "failed"
    assert not any(s.mutant for a in result.attempt_log for s in a.samples)


async def test_a_line_s_edits_are_checked_once_a_run(fresh_sim, sample_repo):
    """The demo's own bug needs a new expression, no one-token edit: each sample writes the
    same wrong line, and that line's edits are checked after the first only."""
    seen: list[ChatRequestView] = []

    def respond(req: ChatRequestView) -> Reply:
        seen.append(req)
        if not asked_line(req):
            return Reply(content="I see no bug in stats.py.")
        n = re.findall(r"(\d+)\|     return ordered\[mid\]$", req.messages[-1]["content"],
                       re.M)[-1]
        return Reply(content=f"Wrong middle.\n{n}: return ordered[mid + 1]\n")

    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=respond)}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_line=true",
        "builder.line_samples=3", "builder.mutants=6", "run.max_attempts=2"))
    assert result.status == "failed"
    samples = result.attempt_log[1].samples
    edits = [s for s in samples if s.mutant]
    assert 0 < len(edits) <= 6 and not any(s.passed for s in edits)
    # sample 1, its edits, then samples 2 and 3 with none: the line was edited once
    assert [bool(s.mutant) for s in samples] == [False, *[True] * len(edits), False, False]


def test_a_mechanical_pass_is_counted_apart_and_left_out_of_the_per_request_figures():
    from orchestrator.benchmark.attempts import sample_lines, summarize_attempts
    from orchestrator.benchmark.compare import passed_at_first_call
    from orchestrator.benchmark.records import RunRecord, drawn
    from orchestrator.faces.render import _attempt_cell
    from orchestrator.runs import _attempts
    from orchestrator.state import Attempt, Sample

    samples = [Sample(index=1, call_s=5.0, changed=True),
               Sample(index=4, changed=True, checks_s=0.2, mutant="boundary"),
               Sample(index=5, changed=True, passed=True, checks_s=0.3, mutant="operand")]
    attempt = Attempt(n=1, strategy="one_line", passed=True, samples=samples)
    record = RunRecord(role_map="m", task="t", repeat=0, outcome="passed",
                       status="succeeded", wall_s=9.0, attempt_log=[attempt])
    assert record.strategy == "one_line+mutant"
    assert [(s.index, s.passed) for s in drawn(samples)] == [(1, False)]  # the model's request
    assert passed_at_first_call(record)  # one request: its edits asked nothing more
    summary = summarize_attempts("m", [record])
    assert summary.passed_by == {"one_line+mutant": 1}
    cost = summary.samples
    assert (cost.mutants, cost.mutant_runs, cost.mutants_passed) == (2, 1, 1)
    assert any("2 mechanical edits" in line and "1 passed" in line
               for line in sample_lines([summary]))
    assert "passed by a mechanical edit (operand), written by no model" in _attempt_cell(attempt)
    assert _attempts({"attempt_log": [attempt.model_dump()]}) == ("one_line+mutant",)
    # a model's pass stays the model's
    own = attempt.model_copy(update={"samples": [samples[0].model_copy(update={"passed": True})]})
    assert record.model_copy(update={"attempt_log": [own]}).strategy == "one_line"


_SLOW = ('def slow(values, threshold=50):\n    """The values above the threshold, largest first."""\n'
         "    out = [v for v in values if v > threshold]\n    return sorted(out, reverse=True)\n")
_SLOW_TEST = ("import unittest\n\nfrom limits import slow\n\n\n"
              "class SlowTest(unittest.TestCase):\n    def test_above_ten(self):\n"
              "        self.assertEqual(slow([70, 20, 10, 6]), [70, 20])\n")
_SLOW_TASK = "slow() misses values: slow([70, 20, 10, 6]) must return [70, 20], all above 10."


def _slow_repo(tmp_path):
    repo = tmp_path / "slow"
    (repo / "tests").mkdir(parents=True)
    (repo / "limits.py").write_text(_SLOW, encoding="utf-8")
    (repo / "tests" / "__init__.py").write_text("", encoding="utf-8")
    (repo / "tests" / "test_limits.py").write_text(_SLOW_TEST, encoding="utf-8")
    ident = ["-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgSign=false"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", *ident, "commit", "-qm", "slow"], cwd=repo, check=True)
    return repo


def _changes_the_sort(req: ChatRequestView) -> Reply:
    """A builder that, asked for one line, always rewrites the sort (the line below the
    threshold's, as the live 1.5B did at xp-logstat-slow)."""
    if not asked_line(req):
        return Reply(content="I see no bug in limits.py.")
    n = re.findall(r"(\d+)\|     return sorted\(out, reverse=True\)$",
                   req.messages[-1]["content"], re.M)[-1]
    return Reply(content=f"The order is wrong.\n{n}: return sorted(out)\n")


async def test_a_short_place_s_other_lines_are_edited_and_the_threshold_passes(
        fresh_sim, tmp_path):
    repo = _slow_repo(tmp_path)
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        respond=_changes_the_sort)}))
    events: list = []
    sets = ["builder.one_shot=true", "builder.one_line=true", "builder.line_samples=2",
            "builder.mutants=16", "run.max_attempts=2"]
    result = await api.arun(_SLOW_TASK, listeners=[events.append], **demo_run(
        fresh_sim, repo, *sets, "builder.mutant_lines=12"))
    assert result.status == "succeeded", result.reason
    assert show(repo, f"{result.branch}:limits.py") == _SLOW.replace("=50", "=10")
    kept = [s for a in result.attempt_log for s in a.samples if s.passed]
    assert [s.mutant for s in kept] == ["number"]
    said = [e.message for e in events if e.kind == "warning" and "mechanical" in e.message]
    assert said and "threshold=10" in said[0]
    # the same builder, only the chosen line edited: the sort's line has no passing edit
    again = await api.arun(_SLOW_TASK, **demo_run(fresh_sim, repo, *sets))
    assert again.status == "failed"
    tried = [s for a in again.attempt_log for s in a.samples if s.mutant]
    assert tried and not any(s.passed for s in tried)
