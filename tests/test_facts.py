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
