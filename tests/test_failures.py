"""Failure feedback from real runners: pytest (long, short, native tracebacks; a plugin warning
on stderr), unittest, node --test and plain shell exit codes, each run for real in a temp dir."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.localize import failures

CART = '''\
class Cart:
    def __init__(self, items=[]):
        self.items = items

    def add(self, name):
        self.items.append(name)
        return self.total()

    def total(self):
        return len(self.items) // 0
'''

PYTEST_TESTS = '''\
import warnings
from cart import Cart


def test_fresh():
    warnings.warn("old api", DeprecationWarning)
    Cart().items.append("x")
    assert Cart().items == []


def test_total():
    assert Cart([1]).add(2) == 2


def test_passes():
    assert True
'''

NOISE = "PytestDeprecationWarning"  # pytest-asyncio's, on stderr before every run without config


def _run(args: list[str], cwd: Path) -> tuple[int, str]:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stderr + proc.stdout  # stderr first, as a terminal shows it


@pytest.fixture(scope="module")
def cart_repo(tmp_path_factory) -> Path:
    repo = tmp_path_factory.mktemp("cart")
    (repo / "cart.py").write_text(CART)
    (repo / "test_cart.py").write_text(PYTEST_TESTS)
    # a plugin whose import warns on stderr, as pytest-asyncio's unset loop scope does
    return repo


@pytest.mark.parametrize("tb", ["auto", "short", "native", "long"])
def test_pytest_failures_put_the_error_and_traceback_first_without_the_noise(cart_repo, tb):
    code, out = _run([sys.executable, "-m", "pytest", f"--tb={tb}", "-p", "no:cacheprovider"],
                     cart_repo)
    assert code == 1 and NOISE in out and "warnings summary" in out
    report = failures.parse(out, command="pytest", exit_code=code)
    assert report.runner == "pytest"
    assert [f.name for f in report.failures] == ["test_cart.py::test_fresh",
                                                 "test_cart.py::test_total"]
    fresh, total = report.failures
    assert "assert ['x'] == []" in fresh.error[0]
    assert total.error == ("ZeroDivisionError: integer division or modulo by zero",)
    where = [(Path(f.path).name, f.line) for f in total.frames]
    assert where == [("test_cart.py", 12), ("cart.py", 7), ("cart.py", 10)]
    assert total.frames[-1].code == "return len(self.items) // 0"
    assert "2 failed" in report.summary and "1 passed" in report.summary
    text = failures.render(report)
    assert NOISE not in text and "DeprecationWarning" not in text and "rootdir" not in text
    assert text.index("FAILED test_cart.py::test_fresh") < text.index("ZeroDivisionError")
    assert "cart.py:10 in total: return len(self.items) // 0" in text


def test_unittest_failures_and_errors(cart_repo):
    (cart_repo / "test_u.py").write_text(
        "import unittest\nfrom cart import Cart\n\nclass T(unittest.TestCase):\n"
        "    def test_total(self):\n        self.assertEqual(Cart([1]).total(), 1)\n\n"
        "    def test_eq(self):\n        self.assertEqual([1, 2], [1, 2, 3])\n")
    try:
        code, out = _run([sys.executable, "-m", "unittest", "-q", "test_u"], cart_repo)
    finally:
        (cart_repo / "test_u.py").unlink()
    report = failures.parse(out, command="python -m unittest", exit_code=code)
    assert report.runner == "unittest" and report.summary == "FAILED (failures=1, errors=1)"
    by_name = {f.name.split(" ")[0]: f for f in report.failures}
    assert set(by_name) == {"test_total", "test_eq"}
    assert by_name["test_eq"].error[0] == "AssertionError: Lists differ: [1, 2] != [1, 2, 3]"
    frames = by_name["test_total"].frames
    assert [(Path(f.path).name, f.line, f.function) for f in frames] == [
        ("test_u.py", 6, "test_total"), ("cart.py", 10, "total")]
    assert failures.failing_tests(out)[0].startswith("test_")


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
@pytest.mark.parametrize("reporter", ["tap", "spec"])
def test_node_test_runner(tmp_path, reporter):
    (tmp_path / "range.js").write_text(
        "function range(a, b) {\n  const out = [];\n  for (let i = a; i < b; i++) out.push(i);\n"
        "  if (b > 9) throw new RangeError('too far: ' + b);\n  return out;\n}\n"
        "module.exports = { range };\n")
    (tmp_path / "range.test.js").write_text(
        "const test = require('node:test');\nconst assert = require('node:assert');\n"
        "const { range } = require('./range');\n"
        "test('inclusive', () => {\n  assert.deepStrictEqual(range(1, 3), [1, 2, 3]);\n});\n"
        "test('far', () => {\n  range(1, 10);\n});\n"
        "test('ok', () => {\n  assert.ok(true);\n});\n")
    code, out = _run(["node", "--test", f"--test-reporter={reporter}", "range.test.js"], tmp_path)
    report = failures.parse(out, command="node --test", exit_code=code)
    assert report.runner == "node" and code == 1
    by_name = {f.name: f for f in report.failures}
    assert set(by_name) == {"inclusive", "far"}
    assert any("strictly deep-equal" in e for e in by_name["inclusive"].error)
    far = by_name["far"]
    assert any("RangeError" in e or "too far: 10" in e for e in far.error), far.error
    assert [(Path(f.path).name, f.line) for f in far.frames][-2:] == [("range.test.js", 8),
                                                                      ("range.js", 4)]
    text = failures.render(report)
    assert "node:internal" not in text and "duration_ms" not in text


def test_plain_shell_exit_code_names_the_line(tmp_path):
    (tmp_path / "s.sh").write_text("set -e\necho start\nx=$(( 1 / 0 ))\n")
    code, out = _run(["bash", "s.sh"], tmp_path)
    report = failures.parse(out, command="bash s.sh", exit_code=code)
    assert report.runner == "plain" and code == 1
    (only,) = report.failures
    assert only.frames == (failures.Frame(path="s.sh", line=3),)
    assert "division by 0" in only.error[0]
    assert failures.render(report).startswith("$ bash s.sh  (exit 1)\nerror:")


def test_a_python_script_crash_is_a_traceback(tmp_path):
    (tmp_path / "check.py").write_text("def f(d):\n    return d['k']\n\nf({})\n")
    code, out = _run([sys.executable, "check.py"], tmp_path)
    (only,) = failures.parse(out, exit_code=code).failures
    assert only.error == ("KeyError: 'k'",)
    assert [(f.line, f.function) for f in only.frames] == [(4, "<module>"), (2, "f")]


def test_output_nothing_recognises_ends_with_its_cleaned_tail():
    out = "\n".join(f"line {i}" for i in range(40))
    text = failures.trim(out, command="make check", exit_code=2)
    assert text.startswith("$ make check  (exit 2)\nend of output:")
    assert "line 39" in text and "line 10" not in text


def test_render_is_capped_and_collapses_repeats():
    same = failures.TestFailure(name="t1", error=("E" * 50,),
                                frames=(failures.Frame(path="a.py", line=1),))
    many = tuple(same.model_copy(update={"name": f"t{i}"}) for i in range(9))
    text = failures.render(failures.FailureReport(failures=many))
    assert text.count("the same error and traceback as above") == 4
    assert "... 4 more failing: t5, t6, t7, t8" in text
    big = failures.FailureReport(failures=tuple(
        failures.TestFailure(name=f"t{i}", error=(f"{i}" * 280,)) for i in range(5)))
    assert len(failures.render(big, limit=600)) <= 600


def test_signature_ignores_timings_and_temp_paths():
    a = "FAILED t.py::test_x - assert 1 == 2\n1 failed in 0.12s"
    b = "FAILED t.py::test_x - assert 1 == 2\n1 failed in 3.40s"
    assert failures.signature("pytest", 1, a) == failures.signature("pytest", 1, b)
    c = "FAILED t.py::test_y - assert 1 == 2\n1 failed in 0.12s"
    assert failures.signature("pytest", 1, a) != failures.signature("pytest", 1, c)
