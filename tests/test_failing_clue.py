"""The failing test's name as a clue for the explorers (``questions.failing_clue``): when the
failure pins no code and no planner is asked (``run.unpinned_questions = "task"``), one of the
two questions is about the rarest word of the failing test's name that the code holds — the
task may quote only the command it ran (xp-loyalty-tier: ``--data`` and ``statement``, where
its test, ``test_member_with_exactly_1000_points_is_gold``, names the tier table's ``gold``).
Checked on the live suite's vendored repositories with the real retriever (ripgrep)."""

from __future__ import annotations

import pytest
from test_leads import UNPINNED

from orchestrator.evidence.questions import CLUE_FILES, failing_clue, failing_title, with_clue
from orchestrator.localize.retrieve import Retriever
from orchestrator.localize.terms import terms


def _task(name: str):
    return next(t for t in UNPINNED if t.name == name)


@pytest.mark.parametrize(("name", "title"), [
    ("test_member_with_exactly_1000_points_is_gold "
     "(tests.test_statement.StatementTest.test_member_with_exactly_1000_points_is_gold)",
     "member with exactly 1000 points is gold"),
    ("tests/test_cli.py::CliTest::test_parcel_in_pounds[lb]", "parcel in pounds"),
    ("testHalfCentIsRoundedUp", "Half Cent Is Rounded Up"),
    ("a week is the last 7 days, today included", "a week is the last 7 days, today included"),
    ("testing the loader", "testing the loader"),  # a sentence starting "testing" stays whole
])
def test_a_failing_tests_name_reads_as_words(name, title):
    assert failing_title(name) == title


def test_the_loyalty_tests_name_gives_the_tier_tables_word():
    """Both questions of the task's own terms lead nowhere near ``tiers.py`` (the explorers
    verified nothing in every live routed run); the test's ``gold`` is held by two source
    files, ``tiers.py`` one of them, and replaces the task's second term."""
    task = _task("xp-loyalty-tier")
    found = Retriever(task.repo)
    specific = found.specific(task.instruction)
    assert [t.pattern for t in specific] == ["--data", "statement"]
    name = ("test_member_with_exactly_1000_points_is_gold "
            "(tests.test_statement.StatementTest.test_member_with_exactly_1000_points_is_gold)")
    clue = failing_clue([name], found.holding, specific, task.instruction)
    assert clue is not None and (clue.term.pattern, clue.files) == ("gold", 2)
    assert "loyalty/program/tiers.py" in found.holding(clue.term)
    # asked as the code spells it: a backquoted name is searched as written, and live (r71)
    # "`gold`" found no candidate window (the table says "Gold") and its explorer nothing
    assert clue.spelt == "Gold"
    asked = with_clue(specific, task.instruction, clue)
    assert asked == [
        "Where does the code read the `--data` option, and what does it do with its value?",
        "Where does the code handle `Gold`?"]
    assert "loyalty/program/tiers.py" in {w.path for w in found.windows(asked[1])}
    # without the test's name the questions are the task's, as before
    assert with_clue(specific, task.instruction, None)[1] == "Where does the code handle `statement`?"


def test_a_test_about_what_the_task_asks_gives_no_clue():
    """xp-catalog-sort's ``test_newest_first`` names the task's own ``newest``: its questions
    stay the task's (``first`` would be a worse second question, in two files as well)."""
    task = _task("xp-catalog-sort")
    found = Retriever(task.repo)
    specific = found.specific(task.instruction)
    assert "newest" in [t.pattern for t in specific]
    assert failing_clue(["test_newest_first (tests.test_cli.CliTest.test_newest_first)"],
                     found.holding, specific, task.instruction) is None


def test_a_word_many_files_hold_is_no_clue():
    """xp-parcel-weight's ``test_parcel_in_pounds``: ``parcel`` is in more than CLUE_FILES
    source files and ``pounds`` in none (the code says ``lb``): no clue."""
    task = _task("xp-parcel-weight")
    found = Retriever(task.repo)
    (parcel,) = [t for t in terms("parcel") if t.kind == "word"]
    assert len(found.holding(parcel)) > CLUE_FILES
    assert failing_clue(["test_parcel_in_pounds"], found.holding, found.specific(task.instruction),
                     task.instruction) is None


@pytest.mark.parametrize("order", [0, 1])
def test_a_word_the_task_uses_too_comes_first(order):
    """xp-payslip-rounding fails two tests: ``net`` (of test_deductions_and_net) is held by as
    few files as ``half`` (of test_half_cent_is_rounded_up), but only ``half`` is a word of the
    task ("half a cent rounded up"), whichever test the runner lists first."""
    task = _task("xp-payslip-rounding")
    found = Retriever(task.repo)
    names = ["test_deductions_and_net (tests.test_payroll.PayrollTest.test_deductions_and_net)",
             "test_half_cent_is_rounded_up (tests.test_payroll.PayrollTest.test_half_cent_is_"
             "rounded_up)"]
    names = names if order == 0 else names[::-1]
    clue = failing_clue(names, found.holding, found.specific(task.instruction), task.instruction)
    assert clue is not None and clue.term.pattern == "half"
    assert failing_clue(names[:1] if order == 0 else names[1:], found.holding, (), "") is not None
