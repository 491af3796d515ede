"""Where a task's words lead (``localize/leads.py``) and the one-line request that tries each
lead once: ranking on the live suite's explore-needed repositories (vendored, nobody ran a
model on them for this), then whole runs against the simulator where the explorers cite a
caller — the live r17 failure on three of eight tasks — and the bug is two calls away."""

from __future__ import annotations

import json
import re

import pytest
from routing_kit import asked_line
from test_oneshot import _explore_task_one_shot

from orchestrator.benchmark import load_suite
from orchestrator.benchmark.fixplace import fix_lines
from orchestrator.engine.leadlines import lead_spans
from orchestrator.localize.candidates import file_factor
from orchestrator.localize.leads import LEADS, leads
from orchestrator.localize.localization import is_test
from orchestrator.localize.retrieve import Retriever
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply

UNPINNED = [t for t in load_suite("live").tasks if t.name.startswith("xp-")]


FIXES = fix_lines(load_suite("live"))  # task -> the lines its reference fix changes


def test_a_tasks_words_lead_to_the_line_to_fix_in_most_explore_tasks():
    """From the instruction alone (no model, no question), the reference fix's line lies in one
    of the leads for at least 7 of the 8 explore-needed tasks, and every lead is source code
    (no test, doc or data file), at most ``LEADS`` of them, none overlapping another."""
    missed = []
    for task in UNPINNED:
        found = leads(Retriever(task.repo), task.instruction)
        assert 0 < len(found) <= LEADS
        assert all(not re.search(r"(^|/)tests?/|\.(md|json)$", w.path) for w in found), found
        for i, a in enumerate(found):
            assert not any(a.path == b.path and a.start <= b.end and b.start <= a.end
                           for b in found[i + 1:]), found
        line = FIXES[task.name][1]
        if not any(w.path == task.sim.path and w.start <= line <= w.end for w in found):
            missed.append((task.name, [(w.path, w.start, w.end) for w in found]))
    assert len(missed) <= 1, missed


def test_the_bug_two_calls_past_the_entry_point_is_a_lead_before_the_entry_points_callers():
    """xp-payslip-rounding: no sentence of the task names ``money/amounts.py``; the calls from
    the windows its words bring reach ``to_cents``, which holds the task's rarest words
    ("nearest cent", "half") and comes first."""
    task = next(t for t in UNPINNED if t.name == "xp-payslip-rounding")
    found = leads(Retriever(task.repo), task.instruction)
    assert (found[0].path, found[0].start) == ("payroll/money/amounts.py", 17)


def test_a_file_the_task_names_is_a_lead_however_few_of_its_words_it_holds_and_a_test_never():
    """sh-pipeline-status (live r31): the task names ``report.sh``, five lines holding few of
    its words; the script that calls it and the shell test held more. Every one-line place of
    both maps was the caller or ``test.sh`` (a test, counted as code), never the named file."""
    task = next(t for t in load_suite("live").tasks if t.name == "sh-pipeline-status")
    found = [(w.path, w.start, w.end) for w in leads(Retriever(task.repo), task.instruction)]
    line = FIXES[task.name][1]
    assert any(p == "report.sh" and s <= line <= e for p, s, e in found), found
    assert all(p != "test.sh" for p, _, _ in found), found


@pytest.mark.parametrize("path", ["test.sh", "tests.sh", "test-all.sh", "ci/test_run.sh",
                                  "tests.py", "test.py", "x_test.sh", "stats.test.js",
                                  "tests/helpers.py", "spec/a.rb"])
def test_what_the_localisation_calls_a_test_retrieval_ranks_as_one(path):
    assert is_test(path) and file_factor(path) < 1.0


@pytest.mark.parametrize("path", ["testing.py", "contest.sh", "attest.py", "report.sh"])
def test_names_that_only_contain_test_are_code(path):
    assert not is_test(path) and file_factor(path) == 1.0


def test_a_lead_is_read_as_the_file_is_now_and_a_bad_one_is_left_out(tmp_path):
    (tmp_path / "a.py").write_text("".join(f"x{i} = {i}\n" for i in range(1, 61)))
    (tmp_path / "link.py").symlink_to("/etc/passwd")
    spans = lead_spans(tmp_path, ["a.py:3-5", "a.py:58-99", "a.py:1-60", "missing.py:1-2",
                                  "link.py:1-2", "../a.py:1-2", "a.py:x-2", "a.py:70-80",
                                  "garbage"])
    got = [(s.path, s.start, s.end, s.text[0]) for s, _ in spans]
    assert got == [("a.py", 3, 5, "x3 = 3"), ("a.py", 58, 60, "x58 = 58"),
                   ("a.py", 1, 40, "x1 = 1")]  # at most FOUND_LINES lines


CALLER_FOUND = {"answer": "run_payroll in payroll/app.py", "claims": [{
    "text": "run_payroll builds each payslip with make_payslip",
    "citations": [{"path": "payroll/app.py", "start_line": 8, "end_line": 11, "quote": ""}]}]}


CENTS = re.compile(r"^ *(\d+)\| +return money\(amount\)\.quantize", re.M)  # to_cents's line
PAYROLL = re.compile(r"^ *(\d+)\| +return \[make_payslip", re.M)  # run_payroll's last line
LINES = ["builder.one_line=true", "builder.line_samples=1", "builder.tool_loop=false",
         "builder.temperatures=[0.0, 0.6]", "run.explore_when_pinned=false", "run.max_attempts=4"]


def _copied(shown: str) -> Reply:
    """A one-line reply that changes nothing and picks no line (a reply that picks one is
    asked once more for it: ``test_line_again``)."""
    assert re.search(r"^ *\d+\| ", shown, re.M), "asked with no numbered code"
    return Reply(content="This looks right: no line of it needs a change.")


def _payslip_builder(tmp_path, fix: str, *, copies: int = 0, breaks: str = ""):
    """xp-payslip-rounding's builder: whole files come back as they are; asked for a line, it
    changes nothing for its first ``copies`` line requests and for any code
    but ``to_cents``, whose ``fix`` it gives from then on. With ``breaks``, within those first
    requests ``run_payroll``'s last line is given as that instead (a wrong edit elsewhere)."""
    asked = {"lines": 0}

    def respond(req: ChatRequestView) -> Reply:
        shown = req.messages[-1]["content"]
        if asked_line(req):
            asked["lines"] += 1
            m = CENTS.search(shown)
            if m and asked["lines"] > copies:
                return Reply(content=f"Half a cent must round up.\n{m.group(1)}: {fix}")
            wrong = PAYROLL.search(shown)
            if breaks and wrong and asked["lines"] <= copies:
                return Reply(content=f"The list is built wrong.\n{wrong.group(1)}: {breaks}")
            return _copied(shown)
        path = "payroll/app.py"
        return Reply(content=f"{path}\n```python\n"
                     + (tmp_path / "repo" / path).read_text(encoding="utf-8") + "```\n")

    return respond


async def test_when_the_explorers_cite_a_caller_the_line_is_asked_of_each_lead_once(
        fresh_sim, tmp_path):
    """xp-payslip-rounding as the live 0.5B explored it (r17): its one verified claim cites
    ``run_payroll``, the caller. The builder copies whole files back and, asked for a line,
    corrects ``to_cents`` when it is shown it and otherwise gives a shown line back as it is.
    The one-line attempt asks of the explorers' place first, then of the task's first lead
    (``to_cents``, its prompt the same as the first but for the code at its end), which passes;
    each sample says where it pointed, and nothing is asked after the pass."""
    task = next(t for t in UNPINNED if t.name == "xp-payslip-rounding")
    fix = task.sim.new.strip()
    respond = _payslip_builder(tmp_path, fix)

    task, result, _ = await _explore_task_one_shot(
        fresh_sim, tmp_path, task.name, "Where is `run_payroll` defined?", CALLER_FOUND,
        builder=ModelBehavior(respond=respond),
        sets=["builder.one_line=true", "builder.line_samples=2",
              "builder.temperatures=[0.0, 0.7]", "run.explore_when_pinned=false"])
    assert result.status == "succeeded", result.reason
    # the failure pins nothing and the explore step left leads: the line comes first, asked
    # with the preflight's failure (no whole-file one-shot spent before it)
    assert [(a.strategy, a.changed, a.passed) for a in result.attempt_log] == [
        ("one_line", True, True)]
    line = result.attempt_log[-1]
    places = [s.place for s in line.samples]
    assert places[0].startswith("payroll/app.py:")  # the explorers' place first
    assert places[1:] == ["payroll/money/amounts.py:17-19"] and line.samples[-1].passed
    assert not line.samples[0].passed
    # the lead's first sample is greedy too: not the 0.7 its index once gave it
    assert [s.temperature for s in line.samples] == [0.0, 0.0]
    fixed = (tmp_path / "repo").joinpath(task.sim.path)  # the user's checkout: untouched
    assert task.sim.old in fixed.read_text(encoding="utf-8")
    from routing_kit import show
    assert fix in show(tmp_path / "repo", f"{result.branch}:{task.sim.path}")
    asked = [ChatRequestView.from_body(r.body).messages
             for r in fresh_sim.state.requests_for("sim-builder")]
    lines = [m for m in asked if "Which one of these lines is wrong?" in json.dumps(m)]
    assert len(lines) == len(places)
    # one prefix: the system message and the task and failure are byte for byte the same
    assert len({json.dumps(m[0]) for m in lines}) == 1
    heads = {m[-1]["content"].split("The task's words")[0].split("The explorers found")[0]
             for m in lines}
    assert len(heads) == 1
    assert "test_half_cent_is_rounded_up" in lines[0][-1]["content"]  # the preflight's failure
    assert "The task's words and the calls they lead to reach this code " \
           "(payroll/money/amounts.py lines 17-19)" in lines[-1][-1]["content"]


def test_the_explorers_place_is_sampled_between_the_leads_each_lead_once():
    """P, L1, P, L2, P, L3, L4: the explorers' place its ``line_samples`` times, the first
    first (it held the bug on three of eight tasks live), each lead once in its rank order."""
    from orchestrator.engine.building import interleaved
    assert interleaved(["P", "L1", "L2", "L3", "L4"], 3) == [  # type: ignore[list-item]
        "P", "L1", "P", "L2", "P", "L3", "L4"]
    assert interleaved(["P"], 3) == ["P"] * 3  # type: ignore[list-item]
    assert interleaved(["P"], 3, 2) == ["P"] * 3  # type: ignore[list-item]


def test_each_place_is_first_asked_at_the_attempts_temperature_and_again_at_the_highest():
    """A line asked again at temperature 0 gives the same few tokens back; a place's first
    sample is its best draw (live: 7 of 22 at the fix greedy, 7 of 43 at 0.8, repeats 0 of
    27), wherever the order puts it."""
    from orchestrator.engine.building import first_visits, interleaved
    asked = interleaved(["P", "L1", "L2", "L3"], 3)  # type: ignore[list-item]
    temps = (0.0, 0.6, 0.6, 0.8)
    assert first_visits(asked, temps, 1) == (0.0, 0.0, 0.8, 0.0, 0.8, 0.0)
    later = interleaved(["P", "L1", "L2"], 3, 2)  # type: ignore[list-item]
    assert later == ["L1", "L2", "P", "L1", "L2"]
    assert first_visits(later, temps, 2) == (0.6, 0.6, 0.6, 0.8, 0.8)
    assert first_visits(["P"] * 3, temps, 1) == (0.0, 0.8, 0.8)  # type: ignore[list-item]
    assert first_visits(["P"] * 3, (0.8,), 5) == (0.8,) * 3  # type: ignore[list-item]
    assert first_visits(asked, (), 1) == ()  # the model's own temperature


def test_a_later_attempt_spreads_its_samples_over_the_places_from_one_further_along():
    """As many samples as the first attempt's, each place as often (give or take one), the
    first a different place each attempt: the explorers' place no longer takes most draws
    after it has failed."""
    from orchestrator.engine.building import interleaved
    places = ["P", "L1", "L2", "L3", "L4"]
    assert interleaved(places, 3, 2) == [  # type: ignore[arg-type]
        "L1", "L2", "L3", "L4", "P", "L1", "L2"]
    assert interleaved(places, 3, 3) == [  # type: ignore[arg-type]
        "L2", "L3", "L4", "P", "L1", "L2", "L3"]
    assert interleaved(["P", "L1"], 4, 2) == ["L1", "P", "L1", "P", "L1"]  # type: ignore[arg-type]
    assert interleaved(places, 3, 6) == [  # type: ignore[arg-type]
        "P", "L1", "L2", "L3", "L4", "P", "L1"]
    assert interleaved(["P", "L1"], 1) == ["P", "L1"]  # type: ignore[list-item]
    assert interleaved(["P", "L1", "L2"], 4) == [  # type: ignore[list-item]
        "P", "L1", "P", "L2", "P", "P"]


def test_the_line_comes_before_the_whole_files_only_when_the_failure_pins_nothing():
    from orchestrator.config.schema import RoleSpec
    from orchestrator.engine.ladder import rung_for, rungs
    spec = RoleSpec(model="m", one_shot=True, one_line=True, one_shot_attempts=2)
    assert [r.strategy for r in rungs(spec, 1)] == [
        "one_shot", "one_line", "one_shot_fact", "tool_loop"]
    assert [r.strategy for r in rungs(spec, 2, line_first=True)] == [
        "one_line", "one_shot", "one_shot_fact", "tool_loop", "next_model"]
    plain = RoleSpec(model="m", one_shot=True)  # no one-line request: nothing to put first
    assert rungs(plain, 1, line_first=True) == rungs(plain, 1)
    assert rung_for(spec, 1, 9, line_first=True)[0].strategy == "tool_loop"


def test_the_explorers_place_is_code_never_a_doc_or_a_test_they_cite():
    """Live on xp-js-label-address (r18) the explorers' most cited place was README.md lines
    3-9, and three one-line samples asked which line of the README was wrong. A doc or a test
    they cite stays a finding; the place the line is asked of is the code they cite."""
    from orchestrator.engine.places import found_span
    from orchestrator.state import Citation, Claim, ExplorerResult, RunState

    def cites(path: str, line: int) -> Claim:
        return Claim(text="t", citations=[Citation(path=path, start_line=line, end_line=line,
                                                   quote="")])
    sources = {"README.md": "# Labels\n\nLabels ship to the billing address.\n",
               "test/labels.test.js": "test('x', () => {\n  label();\n});\n",
               "src/resolve.js": "const FOR = {\n  label: 'billing',\n};\n"}
    many = [cites("README.md", 3), cites("README.md", 3), cites("test/labels.test.js", 2)]
    state = RunState(task="t", explorers=[ExplorerResult(
        question="q", index=0, claims=[*many, cites("src/resolve.js", 2)])])
    span = found_span(state, sources)
    assert span is not None and (span.path, span.focus) == ("src/resolve.js", 2)
    only_docs = RunState(task="t", explorers=[ExplorerResult(question="q", index=0,
                                                             claims=many)])
    assert found_span(only_docs, sources) is None


def test_the_explorers_place_is_their_first_cited_line_of_code_not_a_docstring():
    """Live on xp-loyalty-tier (r18) the 0.5B's one finding cited ``loyalty/__init__.py`` line
    1, the package's docstring: three one-line samples were asked which line of it was wrong.
    A cited range's first line of code is the place; a citation of no code is none."""
    from orchestrator.engine.places import found_span
    from orchestrator.state import Citation, Claim, ExplorerResult, RunState

    def state(*cited: tuple[str, int, int]) -> RunState:
        claims = [Claim(text="t", citations=[Citation(path=p, start_line=a, end_line=b,
                                                      quote="")]) for p, a, b in cited]
        return RunState(task="t", explorers=[ExplorerResult(question="q", index=0,
                                                            claims=claims)])
    sources = {"pkg/__init__.py": '"""Bakery loyalty program: points, tiers."""\n',
               "pkg/tiers.py": '"""Tiers."""\nimport os\n\nTIERS = [("Gold", 1000)]\n'}
    assert found_span(state(("pkg/__init__.py", 1, 1)), sources) is None
    span = found_span(state(("pkg/__init__.py", 1, 1), ("pkg/__init__.py", 1, 1),
                            ("pkg/tiers.py", 1, 4)), sources)
    assert span is not None and (span.path, span.focus) == ("pkg/tiers.py", 4)


def test_of_two_cited_files_the_one_the_failing_code_imports_is_the_place():
    """Live on xp-js-weekly-runs (r71) the explorers cited, among others, ``bin/runlog.js``
    (the command-line script, which nothing the test runs imports) and, asked about the test's
    ``included``, the very line to fix in ``src/time/ranges.js`` (which ``summary.js``, a
    suspect, requires). Each was cited once and neither is a suspect; the script came first
    and took three of the attempt's eight samples. Now the file the failure's code imports is
    the place."""
    from orchestrator.engine.places import found_span
    from orchestrator.localize.localization import Localization
    from orchestrator.state import Citation, Claim, ExplorerResult, RunState

    task = next(t for t in UNPINNED if t.name == "xp-js-weekly-runs")
    suspects = ("src/index.js", "src/services/summary.js")
    paths = [*suspects, "bin/runlog.js", "src/time/ranges.js"]
    sources = {p: (task.repo / p).read_text(encoding="utf-8") for p in paths}

    def claim(*cited: tuple[str, int]) -> Claim:
        return Claim(text="t", citations=[Citation(path=p, start_line=n, end_line=n, quote="")
                                          for p, n in cited])
    chain = claim(("src/index.js", 8), ("bin/runlog.js", 14), ("src/services/summary.js", 11),
                  ("src/services/summary.js", 16))
    state = RunState(task=task.instruction, localization=Localization(suspects=suspects),
                     explorers=[ExplorerResult(question="a", index=0, claims=[chain]),
                                ExplorerResult(question="b", index=1, claims=[claim(
                                    ("src/time/ranges.js", 8), ("README.md", 8))])])
    span = found_span(state, sources)
    assert span is not None and (span.path, span.focus) == ("src/time/ranges.js", 8)
    assert task.sim.old in span.text
    # without the import the script, cited first, is still the place (nothing else changed)
    alone = state.model_copy(update={"explorers": state.explorers[:1]})
    got = found_span(alone, sources)
    assert got is not None and got.path == "bin/runlog.js"
    # ...and the file is among those the prompt shows: the README the second claim cites
    # (twice, as in r72) takes none of the MAX_FILES places a cited source file needs
    from orchestrator.engine.oneshot import MAX_FILES, found_files, shown_files
    twice = claim(("src/time/ranges.js", 8), ("README.md", 8), ("README.md", 5))
    r72 = state.model_copy(update={"explorers": [state.explorers[0], ExplorerResult(
        question="b", index=1, claims=[twice])]})
    assert "README.md" not in found_files(r72)
    shown = shown_files(task.repo, r72.localization, found_files(r72))
    assert shown is not None and len(shown.sources) <= MAX_FILES
    span = found_span(r72, shown.sources)
    assert span is not None and (span.path, span.focus) == ("src/time/ranges.js", 8)


def test_on_an_explore_needed_task_lines_only_makes_every_attempt_the_one_line_request():
    from orchestrator.config.schema import RoleSpec
    from orchestrator.engine.ladder import rung_for, rungs
    spec = RoleSpec(model="m", one_shot=True, one_line=True, one_shot_attempts=2,
                    tool_loop=False, unpinned_lines_only=True)
    got = [rung_for(spec, 1, n, line_first=True) for n in range(1, 6)]
    assert [(r.strategy, r.resampled, last) for r, last in got] == [
        ("one_line", False, False)] + [("one_line", True, False)] * 4
    # a pinned failure (no leads first) climbs the whole ladder as before
    assert [rung_for(spec, 1, n)[0].strategy for n in range(1, 6)] == [
        "one_shot", "one_line", "one_shot_fact", "one_line", "one_shot_fact"]
    # with the tool loop and a fallback model, those follow the one line
    looped = spec.model_copy(update={"tool_loop": True})
    assert [r.strategy for r in rungs(looped, 2, line_first=True)] == [
        "one_line", "tool_loop", "next_model"]


def test_lines_only_without_the_one_line_request_is_refused():
    import pytest

    from orchestrator.config.schema import RoleSpec
    with pytest.raises(ValueError, match="unpinned_lines_only = true needs one_shot = true"):
        RoleSpec(model="m", one_shot=True, unpinned_lines_only=True)


async def test_an_explore_needed_task_spends_its_attempts_on_new_draws_of_the_line(
        fresh_sim, tmp_path):
    """xp-payslip-rounding, the explorers citing the caller: the builder gives every shown line
    back as it is in its first round of one-line samples and corrects ``to_cents`` from its
    second round on. With ``unpinned_lines_only`` the second attempt is the one-line request
    again, sampled anew at the role's highest temperature (not a whole-file one-shot), and it
    passes; no request ever asked for whole files. Without it, the second attempt is the
    whole-file one-shot, as before."""
    task = next(t for t in UNPINNED if t.name == "xp-payslip-rounding")
    fix = task.sim.new.strip()
    task, result, _ = await _explore_task_one_shot(
        fresh_sim, tmp_path, task.name, "Where is `run_payroll` defined?", CALLER_FOUND,
        builder=ModelBehavior(respond=_payslip_builder(tmp_path, fix, copies=2)),
        sets=[*LINES, "builder.unpinned_lines_only=true"])
    assert result.status == "succeeded", result.reason
    assert [(a.strategy, a.passed) for a in result.attempt_log] == [
        ("one_line", False), ("one_line", True)]
    first, second = result.attempt_log
    places = [s.place for s in first.samples]  # the explorers' place, then each lead once
    assert places[0].startswith("payroll/app.py:") and len(set(places)) == len(places) > 2
    assert "payroll/money/amounts.py:17-19" in places
    # the second round asks the same places again, from the first lead on, up to the pass,
    # as new draws
    assert [s.place for s in second.samples] == (places[1:] + places[:1])[:len(second.samples)]
    assert second.samples[-1].place == "payroll/money/amounts.py:17-19"
    # each place's first sample at the attempt's temperature, its repeats at the highest
    assert [s.temperature for s in first.samples] == [
        0.6 if s.place in places[:i] else 0.0 for i, s in enumerate(first.samples)]
    assert {s.temperature for s in first.samples} == {0.0}  # line_samples=1: each place once
    assert {s.temperature for s in second.samples} == {0.6}  # new draws at the highest
    asked = [ChatRequestView.from_body(r.body) for r in fresh_sim.state.requests_for("sim-builder")]
    assert asked and all(asked_line(req) for req in asked)  # never whole files

    fresh_sim.state.requests.clear()
    plain = tmp_path / "plain"
    _, before, _ = await _explore_task_one_shot(
        fresh_sim, plain, task.name, "Where is `run_payroll` defined?", CALLER_FOUND,
        builder=ModelBehavior(respond=_payslip_builder(plain, fix, copies=2)), sets=LINES)
    assert [a.strategy for a in before.attempt_log][:2] == ["one_line", "one_shot"]


async def test_after_an_undone_round_the_line_is_asked_with_the_failure_of_the_code_shown(
        fresh_sim, tmp_path):
    """xp-payslip-rounding, lines only: in the first round the builder rewrites
    ``run_payroll``'s return into one that raises, and that wrong edit is the attempt's kept
    sample; verify finds it fixed nothing and undoes it. The second round shows the code as it
    was, so it shows the failure of that code (the preflight's), not the wrong edit's: each of
    its requests is byte for byte the first round's at the same place (a server's cache serves
    it), no request after the first round names the wrong edit's error, and the run passes."""
    task = next(t for t in UNPINNED if t.name == "xp-payslip-rounding")
    fix = task.sim.new.strip()
    breaks = 'raise RuntimeError("payslips-went-nowhere")'
    sets = [*LINES, "builder.unpinned_lines_only=true"]
    task, result, _ = await _explore_task_one_shot(
        fresh_sim, tmp_path, task.name, "Where is `run_payroll` defined?", CALLER_FOUND,
        builder=ModelBehavior(respond=_payslip_builder(tmp_path, fix, copies=5,
                                                       breaks=breaks)),
        sets=sets)
    assert result.status == "succeeded", result.reason
    assert [(a.strategy, a.changed, a.passed) for a in result.attempt_log][:1] == [
        ("one_line", True, False)]
    assert result.attempt_log[-1].passed
    first = result.attempt_log[0]
    assert first.samples[0].place.startswith("payroll/app.py:") and first.samples[0].changed
    asked = [ChatRequestView.from_body(r.body) for r in fresh_sim.state.requests_for("sim-builder")]
    rounds = [len(a.samples) for a in result.attempt_log]
    one, later = asked[:rounds[0]], asked[rounds[0]:]
    assert later and all("payslips-went-nowhere" not in r.messages[-1]["content"] for r in later)
    assert "test_half_cent_is_rounded_up" in later[0].messages[-1]["content"]
    by_place = {a.place: r.messages for a, r in zip(first.samples, one, strict=True)}
    again = [s.place for a in result.attempt_log[1:] for s in a.samples]
    assert all(r.messages == by_place[place] for place, r in zip(again, later, strict=True))


async def test_after_an_undone_round_the_line_sees_the_kept_attempts_failure(fresh_sim, tmp_path):
    """xp-payslip-rounding, lines only, three rounds. Round 1: ``to_cents`` is given
    ROUND_UP, which fixes one of the two failing tests and breaks none, so it is kept. Round 2
    (its first sample at ``to_cents``, the first lead): ``to_cents`` is rewritten to raise;
    verify undoes that. Round 3 starts from the kept ROUND_UP files, so it is shown their
    failure (the one test left), not the raise's: its request at ``to_cents`` is byte for byte
    round 2's, and its fix passes."""
    task = next(t for t in UNPINNED if t.name == "xp-payslip-rounding")
    seen = {"cents": 0}

    def respond(req: ChatRequestView) -> Reply:
        shown = req.messages[-1]["content"]
        cents = CENTS.search(shown)
        if cents:
            seen["cents"] += 1
            if seen["cents"] == 2:
                return Reply(content=f"Wrong rounding.\n{cents.group(1)}: "
                                     'raise RuntimeError("payslips-went-nowhere")')
            mode = {1: "ROUND_UP", 3: "ROUND_HALF_UP"}.get(seen["cents"])
            if mode:
                return Reply(content=f"Round half up.\n{cents.group(1)}: return money(amount)"
                                     f".quantize(CENT, rounding=decimal.{mode})")
        return _copied(shown)

    sets = [*LINES, "builder.unpinned_lines_only=true"]
    task, result, _ = await _explore_task_one_shot(
        fresh_sim, tmp_path, task.name, "Where is `run_payroll` defined?", CALLER_FOUND,
        builder=ModelBehavior(respond=respond), sets=sets)
    assert result.status == "succeeded", result.reason
    assert [(a.changed, a.passed) for a in result.attempt_log] == [
        (True, False), (True, False), (True, True)]
    asked = [ChatRequestView.from_body(r.body).messages
             for r in fresh_sim.state.requests_for("sim-builder")]
    at_cents = [m for m in asked if CENTS.search(m[-1]["content"])]
    assert len(at_cents) == 3
    third = at_cents[2][-1]["content"]
    assert "ROUND_UP" in third and "payslips-went-nowhere" not in third
    assert "test_deductions_and_net" in third and "test_half_cent_is_rounded_up" not in third
    assert at_cents[2] == at_cents[1]  # byte for byte round 2's request there


def test_a_constant_table_and_the_lead_below_that_reads_it_are_one_place(tmp_path):
    """xp-loyalty-tier (live r60-r68): the ``TIERS`` table and ``tier_for`` three lines below
    it were the fourth and fifth leads, each asked alone. Now one lead shows both, fourth; no
    other explore-needed task's leads change (none has a constant's lead with its reader
    below it). A constant joins only a lead a few lines below it that names it."""
    task = next(t for t in UNPINNED if t.name == "xp-loyalty-tier")
    found = [(w.path, w.start, w.end) for w in leads(Retriever(task.repo), task.instruction)]
    assert found[3] == ("loyalty/program/tiers.py", 3, 16)
    assert FIXES[task.name][1] == 14 and sum(p.endswith("tiers.py") for p, _, _ in found) == 1

    from orchestrator.localize.leads import _with_constants
    from orchestrator.localize.retrieve import Window

    def window(start: int, end: int, *text: str) -> Window:
        return Window(path="a.py", start=start, end=end,
                      lines=tuple(zip(range(start, end + 1), text, strict=False)))
    table = window(1, 3, "RATES = {", '    "x": 1,', "}")
    reads = window(6, 7, "def rate(k):", "    return RATES[k]")
    other = window(6, 7, "def rate(k):", "    return 1")
    far = window(20, 21, "def rate(k):", "    return RATES[k]")
    joined = _with_constants([reads, window(30, 31, "def b():", "    pass"), table])
    assert [(w.start, w.end) for w in joined] == [(1, 7), (30, 31)]
    assert [n for n, _ in joined[0].lines] == [1, 2, 3, 6, 7]
    assert _with_constants([table, other]) == [table, other]  # does not name it
    assert _with_constants([table, far]) == [table, far]  # too far below
    assert _with_constants([reads, window(9, 10, "RATES = {", "}")])[0] == reads  # above only


TIER_LINE = re.compile(r"^ *(\d+)\| +if lifetime_points > needed:", re.M)


async def test_without_a_finding_the_leads_come_first_each_once_and_the_entry_point_last(
        fresh_sim, tmp_path):
    """xp-loyalty-tier as the live 0.5B explored it (r60-r68): nothing verified. The code the
    failure passes through (``loyalty/__main__.py``, the entry point) was asked first and
    between every lead, 3-4 samples a run, none passing. Now the leads come first, each once
    (``line_samples`` repeats only a place the explorers verified or a pinned failure points
    at), that place last; the builder here corrects ``tier_for`` only from its second round,
    which starts from the second lead and passes at the table-and-``tier_for`` lead."""
    task = next(t for t in UNPINNED if t.name == "xp-loyalty-tier")
    nothing = {"answer": "statements", "claims": [{
        "text": "the statement is printed by loyalty/statement_text.py",
        "citations": [{"path": "loyalty/statement_text.py", "start_line": 1, "end_line": 4,
                       "quote": ""}]}]}
    asked = {"lines": 0}

    def respond(req: ChatRequestView) -> Reply:
        shown = req.messages[-1]["content"]
        asked["lines"] += 1
        m = TIER_LINE.search(shown)
        if m and asked["lines"] > 6:
            return Reply(content=f"1,000 points is Gold.\n{m.group(1)}: "
                                 "        if lifetime_points >= needed:")
        return _copied(shown)

    task, result, _ = await _explore_task_one_shot(
        fresh_sim, tmp_path, task.name, "Where does the code handle `statement`?", nothing,
        builder=ModelBehavior(respond=respond),
        sets=[*LINES, "builder.line_samples=3", "builder.unpinned_lines_only=true"])
    assert result.status == "succeeded", result.reason
    assert [(a.strategy, a.passed) for a in result.attempt_log] == [
        ("one_line", False), ("one_line", True)]
    first, second = result.attempt_log
    places = [s.place for s in first.samples]
    assert len(places) == len(set(places)) == 6  # each place once: five leads, then the entry
    assert places[0] == "loyalty/services/statements.py:10-17"
    assert places[3] == "loyalty/program/tiers.py:3-16"
    assert places[-1].startswith("loyalty/__main__.py:")
    assert {s.temperature for s in first.samples} == {0.0}  # every first visit greedy
    assert [s.place for s in second.samples] == places[1:4]  # from the second place on
    assert second.samples[-1].passed and {s.temperature for s in second.samples} == {0.6}
