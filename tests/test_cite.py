"""Citing by reference: an explorer cites what it was shown, the quote is copied for it, and a
place it was never shown is refused at submit (it can correct itself) or dropped with a reason,
never an error. Whole explorers against the simulator, with a model that invents paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_env, scenario_with, sim_roles

from orchestrator import api
from orchestrator.evidence.cite import MAX_REFUSALS, Cited, clean_path
from orchestrator.evidence.verify import DirSource, verify_findings
from orchestrator.localize.retrieve import Retriever, render
from orchestrator.sim import ModelBehavior, Reply, ToolCallSpec
from orchestrator.state import Citation, Claim, Findings

WINDOW = """Question: where is median?

Candidate places:

[W1] stats.py:9-15 (function median)
   9| def median(values):
  10|     \"\"\"Middle value of a non-empty list.\"\"\"
   …
  15|     return ordered[mid]
"""
READ = "tests/test_stats.py (lines 12-14 of 20):\n  12|     def test_median_even(self):\n" \
       "  13|         self.assertEqual(median([4, 1, 3, 2]), 2.5)\n  14| "
SEARCH = "2 matches in 1 files:\nstats.py:4: def mean(values):\nstats.py:6:     return sum(v)"
MESSAGES = [{"role": "system", "content": "sys"}, {"role": "user", "content": WINDOW},
            {"role": "assistant", "content": None},
            {"role": "tool", "tool_call_id": "1", "content": READ},
            {"role": "tool", "tool_call_id": "2", "content": SEARCH}]
FILES = ["stats.py", "tests/test_stats.py", "README.md"]


def _findings(*cites: Citation, text: str = "median returns ordered[mid] for even lengths"):
    return Findings(answer="a", claims=[Claim(text=text, citations=list(cites))])


def _cite(path: str, start: int = 9, end: int | None = None, quote: str = "") -> Citation:
    return Citation(path=path, start_line=start, end_line=start if end is None else end,
                    quote=quote)


def test_a_window_id_becomes_its_lines_and_the_quote_is_copied_from_the_line_that_backs_it():
    cited = Cited(files=lambda: FILES)
    ok, said = cited.check(_findings(_cite("W1", 1, 99)), MESSAGES)
    assert said == "" and isinstance(ok, Findings)
    [c] = ok.claims[0].citations
    assert (c.path, c.start_line, c.end_line) == ("stats.py", 15, 15)
    assert c.quote == "return ordered[mid]"  # shares "ordered" and "mid" with the claim


def test_a_quote_the_model_got_right_is_kept_and_lines_from_read_and_search_count():
    cited = Cited(files=lambda: FILES)
    mine = _cite("tests/test_stats.py", 13, 13, "self.assertEqual(median([4, 1, 3, 2]), 2.5)")
    ok, _ = cited.check(_findings(mine, text="test_median_even expects median 2.5"), MESSAGES)
    assert isinstance(ok, Findings) and ok.claims[0].citations[0] == mine
    ok, _ = cited.check(_findings(_cite("./stats.py", 4), text="mean is defined"), MESSAGES)
    assert isinstance(ok, Findings)
    assert ok.claims[0].citations[0].quote == "def mean(values):"


def test_an_invented_path_is_refused_with_the_nearest_paths_then_taken_as_it_is():
    cited = Cited(files=lambda: FILES)
    invented = _findings(_cite("src/statistics/stats_utils.py", 9))
    for _ in range(MAX_REFUSALS):
        ok, said = cited.check(invented, MESSAGES)
        assert ok is None and "src/statistics/stats_utils.py was never shown" in said
        assert "stats.py" in said and "Files shown so far: stats.py, tests/test_stats.py" in said
    ok, said = cited.check(invented, MESSAGES)
    assert isinstance(ok, Findings) and said == ""
    screened, dropped = cited.screen(ok, MESSAGES)
    assert screened.claims == [] and dropped[0].kind == "path"
    assert "no such file: src/statistics/stats_utils.py (never shown)" in dropped[0].reason


def test_lines_never_shown_of_a_shown_file_are_refused_and_screened_as_unchecked():
    cited = Cited(files=lambda: FILES)
    ok, said = cited.check(_findings(_cite("stats.py", 1, 3)), MESSAGES)
    assert ok is None and "lines 1-3 of stats.py were never shown; shown: 4, 6, 9-10, 15" in said
    screened, dropped = cited.screen(_findings(_cite("stats.py", 1, 3)), MESSAGES)
    assert not screened.claims and dropped[0].kind == "unchecked"
    assert "README.md" in Cited(files=lambda: FILES).screen(
        _findings(_cite("README.md", 1)), MESSAGES)[1][0].reason


@pytest.mark.parametrize("path", [
    "IntRange.clamping. This is a sentence about the code " * 20,  # a sentence as a path
    "x" * 10_000, "a\0b.py", "/etc/passwd", "../../etc/passwd", "~/.ssh/id_rsa",
    "stats.py\n", "", "   ", "W99",
])
def test_any_path_at_all_is_refused_or_dropped_with_a_reason_never_an_error(path):
    cited = Cited(files=lambda: FILES)
    findings = _findings(_cite(path, 9))
    ok, said = cited.check(findings, MESSAGES)
    if path == "stats.py\n":  # a stray newline around a real path is forgiven
        assert isinstance(ok, Findings) and ok.claims[0].citations[0].path == "stats.py"
        return
    assert ok is None and said.startswith("error: these citations")
    assert len(said) < 2000  # a 10 KB "path" is not echoed whole
    screened, dropped = cited.screen(findings, MESSAGES)
    assert not screened.claims and dropped[0].kind in ("path", "unchecked")


def test_clean_path_says_why_a_path_is_none():
    assert clean_path(" ./src/a.py ") == ("src/a.py", "")
    assert clean_path("src//a.py") == ("src/a.py", "")
    assert "absolute" in clean_path("/etc/passwd")[1]
    assert "'..'" in clean_path("a/../../b")[1]
    assert "not a file path" in clean_path("a\0b")[1]


# --- whole explorers against the simulator ------------------------------------------------------


def _explorer(*replies: Reply) -> ModelBehavior:
    return ModelBehavior(script=list(replies))


def _submit(findings: dict) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name="submit", arguments=findings)])


async def test_one_turn_no_tool_call_a_candidate_cited_by_id_verifies(fresh_sim, sample_repo):
    """The candidates answer the question: the explorer submits at once, citing W1 with no
    quote; the quote is copied from the file and the claim verifies."""
    findings = {"answer": "stats.py median", "claims": [
        {"text": "median returns ordered[mid] for even lengths",
         "citations": [{"path": "W1", "start_line": 9, "end_line": 15, "quote": ""}]}]}
    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": _explorer(_submit(findings))}))
    result = await api.aexplore("Where is `median` defined?", repo=sample_repo,
                                roles=sim_roles(fresh_sim), env=run_env(), split=False)
    [e] = result.explorers
    assert e.tool_calls == 0 and e.verified == 1 and e.candidates == ["stats.py:9-15"]
    [c] = e.claims[0].citations
    assert c.path == "stats.py" and c.quote == "return ordered[mid]"
    first = fresh_sim.state.requests_for("sim-explorer")[0]
    assert "[W1] stats.py:9-15 (function median)" in json.dumps(first.body)


async def test_an_invented_path_is_refused_at_submit_and_the_model_corrects_it(fresh_sim,
                                                                               sample_repo):
    wrong = {"answer": "in the stats helper", "claims": [
        {"text": "median returns ordered[mid]",
         "citations": [{"path": "src/stats_helpers/median.py", "start_line": 3, "end_line": 9,
                        "quote": "def median(values):"}]}]}
    right = {"answer": "stats.py", "claims": [
        {"text": "median returns ordered[mid]",
         "citations": [{"path": "stats.py", "start_line": 15, "end_line": 15, "quote": ""}]}]}
    fresh_sim.set_scenario(scenario_with(**{
        "sim-explorer": _explorer(_submit(wrong), _submit(right))}))
    result = await api.aexplore("Where is `median` defined?", repo=sample_repo,
                                roles=sim_roles(fresh_sim), env=run_env(), split=False)
    [e] = result.explorers
    assert e.verified == 1 and e.dropped == 0 and e.claims[0].citations[0].path == "stats.py"
    second = fresh_sim.state.requests_for("sim-explorer")[1]
    refusal = json.dumps(second.body)
    assert "src/stats_helpers/median.py was never shown" in refusal and "stats.py" in refusal


async def test_an_explorer_that_keeps_inventing_has_its_claim_dropped_not_verified(
        fresh_sim, sample_repo):
    wrong = {"answer": "x", "claims": [
        {"text": "median is in utils", "citations": [
            {"path": "src/utils/median.py", "start_line": 1, "end_line": 2, "quote": "def median"}]},
        {"text": "median returns ordered[mid]", "citations": [
            {"path": "stats.py", "start_line": 15, "end_line": 15, "quote": "return ordered[mid]"}]}]}
    fresh_sim.set_scenario(scenario_with(**{
        "sim-explorer": _explorer(*[_submit(wrong)] * (MAX_REFUSALS + 1))}))
    result = await api.aexplore("Where is `median` defined?", repo=sample_repo,
                                roles=sim_roles(fresh_sim), env=run_env(), split=False)
    [e] = result.explorers
    assert e.submitted == 2 and e.verified == 1 and e.drops == {"path": 1}
    assert [v.index for v in e.verdicts] == [1, 2] and e.verdicts[0].kind == "path"
    assert any("src/utils/median.py" in r and "never shown" in r for r in e.drop_reasons)


async def test_answer_first_an_unbacked_answer_opens_the_tools(fresh_sim, sample_repo):
    """Shown candidates, the explorer may only submit; its first answer cites a candidate that
    does not back the claim, so it is told why and its tools open; it searches, then cites
    what the search showed."""
    unbacked = {"answer": "x", "claims": [
        {"text": "the test suite class is StatsTest", "citations": [
            {"path": "W1", "start_line": 9, "end_line": 15, "quote": ""}]}]}
    backed = {"answer": "tests/test_stats.py", "claims": [
        {"text": "StatsTest is the test class", "citations": [
            {"path": "tests/test_stats.py", "start_line": 6, "end_line": 6, "quote": ""}]}]}
    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": _explorer(
        _submit(unbacked),
        Reply(tool_calls=[ToolCallSpec(name="search", arguments={"pattern": "class StatsTest"})]),
        _submit(backed))}))
    result = await api.aexplore("Where is `median` tested?", repo=sample_repo,
                                roles=sim_roles(fresh_sim), env=run_env(), split=False)
    [e] = result.explorers
    assert e.verified == 1 and e.tool_calls == 1
    requests = fresh_sim.state.requests_for("sim-explorer")
    assert _tools(requests[0]) == ["submit"]  # answer first
    assert "search" in _tools(requests[1]) and "submit" not in _tools(requests[1])  # look first
    assert "submit" in _tools(requests[2])
    assert "none of your claims is backed" in json.dumps(requests[1].body)


async def test_answer_first_can_be_turned_off(fresh_sim, sample_repo):
    findings = {"answer": "stats.py", "claims": [{"text": "median returns ordered[mid]",
                "citations": [{"path": "W1", "start_line": 9, "end_line": 15, "quote": ""}]}]}
    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": _explorer(_submit(findings))}))
    roles = sim_roles(fresh_sim, "run.explore_answer_first=false")
    result = await api.aexplore("Where is `median` defined?", repo=sample_repo, roles=roles,
                                env=run_env(), split=False)
    assert result.explorers[0].verified == 1
    assert "search" in _tools(fresh_sim.state.requests_for("sim-explorer")[0])


def _tools(request) -> list[str]:
    return [t.get("function", {}).get("name", "") for t in request.body.get("tools") or []]


# --- prose quoted: the code it describes is cited beside it ------------------------------------

CLICK = Path(__file__).resolve().parents[1] / "orchestrator/benchmark/suites/builtin-explore/repo"
CLAMP_Q = "When clamping is enabled on `IntRange`, what does a number above the maximum become?"


def _clamp_window() -> list[dict]:
    """The explorer's first prompt for the live bench's clamp question: the candidate windows
    retrieval shows on the vendored click (IntRange's docstring and its `_clamp`)."""
    shown = render(Retriever(CLICK).windows(CLAMP_Q))
    assert "761|     def _clamp(" in shown and "752|" in shown
    return [{"role": "system", "content": "sys"},
            {"role": "user", "content": f"Question: {CLAMP_Q}\n\nCandidate places:\n\n{shown}"}]


@pytest.mark.parametrize(("text", "line", "quote"), [
    # the live 0.5B: the docstring's sentence, cited at its own line
    ("a number above the maximum is clamped to the boundary instead of failing", 752,
     "If ``clamp`` is enabled, a value outside the range is clamped to the"),
    # the live 1.5B: the class header for a claim that names `_clamp`
    ("The claim is supported by the code in the `IntRange` class, specifically in the "
     "`_clamp` method.", 744, "class IntRange(_NumberRangeBase[int, int], IntParamType):"),
])
def test_a_prose_quote_or_one_missing_a_marked_name_gets_the_code_line_beside_it(text, line,
                                                                               quote):
    messages = _clamp_window()
    cited = Cited(files=lambda: ["src/click/types.py"])
    ok, said = cited.check(_findings(_cite("src/click/types.py", line, line, quote), text=text),
                           messages)
    assert said == "" and isinstance(ok, Findings)
    mine, code = ok.claims[0].citations
    assert (mine.start_line, mine.quote) == (line, quote)  # the model's own stays first
    assert (code.start_line, code.end_line) == (761, 761) and code.quote.startswith("def _clamp(")
    verified = verify_findings(DirSource(CLICK), ok, tool_calls=0, screened=True)
    assert verified.verified == 1  # the code line supports the claim by itself
    assert 761 in {c.start_line for c in verified.claims[0].citations}


def test_a_code_quote_that_shows_what_the_claim_names_gets_nothing_added():
    messages = _clamp_window()
    cited = Cited(files=lambda: ["src/click/types.py"])
    own = _cite("src/click/types.py", 761, 761, "def _clamp(self, bound: int, dir: t.Literal[1, -1]")
    ok, _ = cited.check(_findings(own, text="`_clamp` returns the bound when it is closed"),
                        messages)
    assert isinstance(ok, Findings) and ok.claims[0].citations == [own]
