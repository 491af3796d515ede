"""Citations must support their claims: checked on real lines of a repository nobody here wrote
(click 8.5.1, vendored as the built-in explore suite's repository) and on the word rules."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from orchestrator.benchmark.explore_suite import builtin_explore_path
from orchestrator.evidence.support import (
    claim_terms,
    marked_names,
    parts,
    quote_names,
    shared_name,
    uninformative,
)
from orchestrator.evidence.verify import (
    DirSource,
    GitCommitSource,
    LineCounts,
    judge_citation,
    verify_findings,
)
from orchestrator.state import Citation, Claim, Findings

CLICK = builtin_explore_path() / "repo"


def cite(path: str, start: int, end: int, quote: str) -> Citation:
    return Citation(path=f"src/click/{path}", start_line=start, end_line=end, quote=quote)


@pytest.fixture(scope="module")
def click() -> tuple[DirSource, LineCounts]:
    return DirSource(CLICK), LineCounts()


def judge(click, claim: str, citation: Citation, *, counted: bool = True):
    src, counts = click
    count = (lambda line: counts.of(src).get(line, 0)) if counted else None
    return judge_citation(src, claim, citation, count)


def test_the_vendored_lines_are_where_these_tests_expect_them():
    lines = (CLICK / "src/click/exceptions.py").read_text().splitlines()
    assert lines[34] == "class ClickException(Exception):"
    assert lines[113] == "class BadParameter(UsageError):"
    assert (CLICK / "src/click/parser.py").read_text().startswith('"""\n')


def test_a_lone_docstring_quote_supports_nothing(click):
    v = judge(click, "The option parser is defined in parser.py", cite("parser.py", 1, 1, '"""'))
    assert v.kind == "trivial" and "punctuation, keywords or generic names" in v.reason


def test_a_line_about_another_exception_does_not_support_the_claim(click):
    claim = "Click raises BadParameter when a parameter value is invalid"
    wrong = judge(click, claim, cite("exceptions.py", 35, 35, "class ClickException(Exception):"))
    assert wrong.kind == "unrelated" and "ClickException" in wrong.reason
    right = judge(click, claim, cite("exceptions.py", 114, 114, "class BadParameter(UsageError):"))
    assert right.kind is None


def test_a_generic_name_counts_only_when_the_claim_spells_it(click):
    quote = cite("exceptions.py", 35, 35, "class ClickException(Exception):")
    assert judge(click, "The BadParameter exception is raised", quote).kind == "unrelated"
    assert judge(click, "ClickException subclasses Exception", quote).kind is None
    assert judge(click, "It derives from Exception", quote).kind is None


def test_a_line_repeated_all_over_the_repository_says_nothing(click):
    citation = cite("types.py", 179, 179, "def convert(")
    counted = judge(click, "StringParamType has a convert method", citation)
    assert counted.kind == "trivial" and "occurs 13 times in the repository" in counted.reason
    assert judge(click, "StringParamType has a convert method", citation, counted=False).kind is None


def test_supporting_quotes_pass_with_plurals_tenses_and_compound_names(click):
    cases = [
        ("ParamType.fail raises BadParameter", cite("types.py", 222, 222,
                                                   "raise BadParameter(message, ctx=ctx, param=param)")),
        ("IntRange clamps the value to the bound", cite("types.py", 681, 681, "if self.clamp:")),
        ("Help text wrapping keeps paragraphs", cite("formatting.py", 31, 31, "def wrap_text(")),
        ("UsageError exits with code 2", cite("exceptions.py", 77, 77, "exit_code: t.ClassVar[int] = 2")),
        ("An option like --name=value is split at the first '='",
         cite("parser.py", 475, 476, 'if "=" in arg:\n    long_opt, explicit_value = arg.split("=", 1)')),
        ("The boolean type looks strings up in bool_states",
         cite("types.py", 868, 868, "return BoolParamType.bool_states.get(value.strip().lower())")),
        # a private name shares its word: `_clamp` and "clamped"
        ("a number above the maximum is clamped", cite("types.py", 761, 761, "def _clamp(")),
    ]
    for claim, citation in cases:
        assert judge(click, claim, citation).kind is None, (claim, judge(click, claim, citation))


def test_the_issues_small_model_findings_are_all_dropped_with_reasons(click):
    """What a 0.5B explorer submitted on click: invented paths, a docstring, an unrelated line."""
    findings = Findings(answer="BadParameter", claims=[
        Claim(text="MyClass parses the options",
              citations=[Citation(path="src/main/java/com/example/MyClass.java", start_line=1,
                                  end_line=3, quote="public class MyClass {")]),
        Claim(text="The cart is in cart.cpp", citations=[Citation(
            path="src/cart/cart.cpp", start_line=10, end_line=12, quote="int total()")]),
        Claim(text="The parser lives in parser.py", citations=[cite("parser.py", 1, 1, '"""')]),
        Claim(text="BadParameter is raised for invalid values",
              citations=[cite("exceptions.py", 35, 35, "class ClickException(Exception):")]),
        Claim(text="BadParameter is raised for invalid values",
              citations=[cite("exceptions.py", 114, 115, "class BadParameter")]),
        Claim(text="Values are checked", citations=[cite("types.py", 1, 1, "no such text")]),
    ])
    src, counts = click
    result = verify_findings(src, findings, tool_calls=4, line_counts=counts)
    assert (result.submitted, result.verified, result.dropped) == (6, 1, 5)
    assert result.drops == {"path": 2, "trivial": 1, "unrelated": 1, "quote": 1}
    assert [v.status for v in result.verdicts] == ["dropped"] * 4 + ["verified", "dropped"]
    assert "no such file: src/main/java/com/example/MyClass.java" in result.verdicts[0].reason
    assert any("dropped (unrelated)" in r for r in result.reasons)


def test_line_counts_are_built_once_and_shared_between_threads(click, tmp_path: Path):
    repo = tmp_path / "r"
    repo.mkdir()
    for i in range(8):
        (repo / f"m{i}.py").write_text(f'"""Module {i}."""\nimport os\n\nvalue_{i} = os.sep\n')
    ident = ["-c", "user.name=t", "-c", "user.email=t@x"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "x"]):
        subprocess.run(["git", *ident, *args], cwd=repo, check=True, capture_output=True)
    counts, seen = LineCounts(), []
    with GitCommitSource(repo, "HEAD") as src:
        threads = [threading.Thread(target=lambda: seen.append(counts.of(src)))
                   for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len({id(c) for c in seen}) == 1 and counts.files == 8
    assert seen[0]["import os"] == 8 and seen[0]["value_3 = os.sep"] == 1
    count = seen[0].get
    assert uninformative("import os", lambda line: count(line, 0)) is not None
    assert "each line" in uninformative("import os\n   import os", lambda line: count(line, 0))
    assert uninformative("import os\nvalue_3 = os.sep", lambda line: count(line, 0)) is None
    assert DirSource(repo).paths() == [f"m{i}.py" for i in range(8)]


def test_word_rules():
    assert parts("_OptionParser") == ["option", "parser"]
    assert parts("type_cast_value") == ["type", "cast", "value"]
    assert parts("HTTPServer") == ["http", "server"]
    assert {"clamp", "wrap", "raise", "convert"} <= claim_terms("clamps wrapping raises converted")
    assert "line" not in claim_terms("found at line 12 of the file")
    assert quote_names("return self, None") == ()
    assert quote_names("def echo(message: str) -> None:") == ("echo", "message")
    assert shared_name("The option parser splits arguments", "class _OptionParser:") == "_OptionParser"
    assert shared_name("The parser splits arguments", "class ClickException(Exception):") is None
    # words that are keywords somewhere but names in most code still count
    assert shared_name("range is defined in range.js", "function range(start, end) {") == "range"
    assert shared_name("the default comes from the option", "default=self.default,") == "default"


def test_a_claim_about_a_marked_name_needs_a_quote_that_shows_it(click):
    # the live 1.5B's answer to "which exception does a parameter type raise": `ValueError`,
    # cited by a signature line that shares only the word "value" with the claim
    claim = ("The exception raised when a click parameter type cannot convert a value is "
             "`ValueError`.")
    signature = "self, value: _ValueT_contra, param: Parameter | None, ctx: Context | None"
    assert shared_name(claim, signature) is None
    assert shared_name(claim, "except ValueError as exc:") == "ValueError"
    # one marked name shown is enough; dotted names and calls count by their last part
    assert shared_name("`UsageError` has `exit_code` set to 2", "exit_code = 2") == "exit_code"
    assert shared_name("`Session.send` sends it", "    def send(self, request, **kwargs):") == "send"
    assert shared_name("`wrap_text()` wraps it", "def wrap_text(") == "wrap_text"
    # keywords, generic names and literals in backticks are no code names to show
    assert marked_names("returns `True` or `None` for `self` and `x`") == ()
    assert shared_name("parse returns `True`", "def parse(value):") == "parse"


def test_a_claim_whose_marked_name_its_quote_lacks_is_dropped_saying_so(click):
    src, _ = click
    quote = "self, value: _ValueT_contra, param: Parameter | None, ctx: Context | None"
    verdict = judge_citation(src, "The exception is `ValueError`.",
                             Citation(path="src/click/types.py", start_line=276, end_line=276,
                                      quote=quote))
    assert verdict.kind == "unrelated"
    assert "names `ValueError`, which its quote does not show" in verdict.reason


def test_an_all_caps_name_that_runs_two_claim_words_together_supports_it():
    # the live 1.5B's answer to the default pool size, dropped before as unrelated
    claim = "The default size of the HTTP adapter's connection pools is 10."
    assert shared_name(claim, "DEFAULT_POOLSIZE = 10") == "DEFAULT_POOLSIZE"
    assert shared_name("the default timeout of the pool", "DEFAULT_POOLSIZE = 10") is None
