"""A failing assertion restated as a fact (``localize/facts.py``) and a diagnosis checked
against the file (``localize/diagnosis.py``): pure functions over real test runners' output
and real file text."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from orchestrator.localize.diagnosis import check
from orchestrator.localize.facts import facts
from orchestrator.localize.failures import parse

CODE = '''def page(items, n, size):
    start = (n - 1) * size
    return items[start:start + size - 1]


def median(xs):
    s = sorted(xs)
    return s[len(s) // 2]


def ratio(a, b):
    return a / b
'''
TESTS = '''import unittest
from code_under_test import median, page, ratio


def test_page():
    assert page([1, 2, 3, 4], 1, 3) == [1, 2, 3]


def test_named():
    got = page([1, 2, 3, 4], 1, 3)
    assert got == [1, 2, 3]


def test_median():
    assert median([1, 2, 3, 4]) == 2.5


def test_reversed():
    assert 2.5 == median([4, 3, 2, 1, 0, 9])


def test_ratio():
    assert ratio(1, 0) == 0


class T(unittest.TestCase):
    def test_u(self):
        self.assertEqual(median([1, 2, 3, 4]), 2.5)
'''


def _run(tmp_path: Path, *command: str) -> str:
    (tmp_path / "code_under_test.py").write_text(CODE, encoding="utf-8")
    (tmp_path / "test_code.py").write_text(TESTS, encoding="utf-8")
    done = subprocess.run([sys.executable, *command], cwd=tmp_path, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_pytest_assertions_become_what_was_returned_and_what_was_expected(tmp_path):
    out = _run(tmp_path, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_code.py")
    said = facts([parse(out)])
    assert "test_code.py::test_page: `page([1, 2, 3, 4], 1, 3)` returned `[1, 2]`, the test " \
           "expects `[1, 2, 3]`" in said
    assert "test_code.py::test_named: `got` is `[1, 2]`, the test expects `[1, 2, 3]`" in said
    assert "test_code.py::test_median: `median([1, 2, 3, 4])` returned `3`, the test " \
           "expects `2.5`" in said
    assert any("`median([4, 3, 2, 1, 0, 9])` returned `3`, the test expects `2.5`" in f
               for f in said)  # the call on the right of ==
    assert len(said) == 4  # at most MAX_FACTS


def test_an_error_is_named_by_the_line_that_raised_it(tmp_path):
    out = _run(tmp_path, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_code.py::test_ratio")
    assert facts([parse(out)]) == [
        "test_code.py::test_ratio: `return a / b` raised ZeroDivisionError: division by zero"]


def test_unittest_assert_equal_reads_got_then_expected(tmp_path):
    out = _run(tmp_path, "-m", "unittest", "test_code.T")
    said = facts([parse(out)])
    assert len(said) == 1
    assert said[0].endswith("`median([1, 2, 3, 4])` returned `3`, the test expects `2.5`")


def test_output_without_values_gives_no_fact():
    assert facts([parse("make: *** [all] Error 2\n", command="make", exit_code=2)]) == []


def _read(files: dict[str, str]):
    return files.get


def test_a_diagnosis_holds_only_where_the_file_says_what_it_quotes():
    files = {"code.py": CODE}
    ok = dict(files=["code.py"], read=_read(files))
    assert check("code.py", 3, "return items[start:start + size - 1]", **ok) == ""
    assert check("./code.py", 3, "  return   items[start:start + size - 1]  ", **ok) == ""
    assert "no line 40" in check("code.py", 40, "return a / b", **ok)
    assert "reads" in check("code.py", 2, "return a / b", **ok)
    assert "not a file the failure points at" in check("other.py", 1, "x = 1", **ok)
    assert "too short" in check("code.py", 3, " ) ", **ok)
    assert "cannot be read" in check("code.py", 1, "def page", files=["code.py"],
                                     read=_read({}))


REPORT = '''def slow(durations, threshold=5000):
    return [f"request {i:03d} took {ms} ms" for i, ms in enumerate(durations) if ms > threshold]


def taxes(amount):
    return {"employment insurance": 11.41, "income tax with a long name": round(amount * 0.1, 2),
            "pension plan": 40.89}
'''
REPORT_TESTS = '''import unittest
from report import slow, taxes


class T(unittest.TestCase):
    def test_slow(self):
        self.assertEqual(slow([6120, 1840, 730, 20]), [
            "request 000 took 6120 ms", "request 001 took 1840 ms", "request 002 took 730 ms"])

    def test_taxes(self):
        self.assertEqual(taxes(1031.0), {"employment insurance": 11.41,
                                         "income tax with a long name": 103.11,
                                         "pension plan": 40.9})
'''


def test_unittests_shortened_values_are_said_by_the_items_that_differ(tmp_path):
    """unittest prints long values shortened (``['req[20 chars]ms']``) on the assertion's line
    and their difference below it: the fact is the differing items, not the shortened line."""
    (tmp_path / "report.py").write_text(REPORT, encoding="utf-8")
    (tmp_path / "test_report.py").write_text(REPORT_TESTS, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "unittest", "test_report"], cwd=tmp_path,
                          capture_output=True, text=True, check=False)
    assert "chars]" in done.stderr  # the first line is shortened
    said = sorted(facts([parse(done.stderr)]))
    assert said[0].endswith(
        "`slow([6120, 1840, 730, 20])` lacks `'request 001 took 1840 ms'`, `'request 002 "
        "took 730 ms'`, which the test expects")
    assert said[1].endswith(
        "`taxes(1031.0)` has `'income tax with a long name': 103.1` where the test expects "
        "`'income tax with a long name': 103.11`; `'pension plan': 40.89` where the test "
        "expects `'pension plan': 40.9`")
    assert not any("chars]" in f for f in said)
