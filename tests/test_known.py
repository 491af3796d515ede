"""What a run knows about its tests before exploring: derived from the plan on real repositories,
told to explorers, given to the builder in the digest, and used to mark claims adding nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_env, scenario_with, sim_roles

from orchestrator import api
from orchestrator.benchmark import builtin_suite, materialize
from orchestrator.evidence.digest import build_digest
from orchestrator.evidence.known import counterparts, for_explorer, is_test_path, known_tests
from orchestrator.evidence.verify import DirSource, GitCommitSource, verify_findings
from orchestrator.faces.demo import DEMO_TASK
from orchestrator.sim import ModelBehavior, Reply, ToolCallSpec
from orchestrator.state import Citation, Claim, ExplorerResult, Findings, KnownTests


def _task(name: str):
    return next(t for t in builtin_suite().tasks if t.name == name)


@pytest.mark.parametrize(("name", "files", "test_file", "first_line"), [
    ("py-clamp", ["clamp.py"], "test_clamp.py", "self.assertEqual(clamp(2, 0, 3), 2)"),
    ("js-range", [], "range.test.js", "test('includes both ends', () => assert.deepEqual(range(1, 3), [1, 2, 3]));"),
    ("sh-max", ["max.sh"], "test.sh", "check 10 9 10 2"),
])
def test_known_tests_from_the_plan_on_the_builtin_tasks(name, files, test_file, first_line, tmp_path):
    task = _task(name)
    repo = materialize(task, tmp_path / name)
    with GitCommitSource(repo, "HEAD") as src:
        known = known_tests(src, commands=list(task.acceptance), files=files, task=task.instruction)
    assert known is not None and known.source == "plan"
    assert known.files == [test_file]
    assert known.lines[0].path == test_file and known.lines[0].text == first_line
    assert all(line.path == test_file for line in known.lines) and len(known.lines) == 3


def test_a_directory_in_the_command_and_no_commands(sample_repo: Path):
    src = DirSource(sample_repo)
    known = known_tests(src, commands=["python -m unittest discover -s tests"], files=["stats.py"])
    assert known is not None and known.files == ["tests/test_stats.py"]
    assert [a.line for a in known.lines] == [8, 11, 14]
    assert known_tests(src, commands=[], files=["stats.py"]) is None
    unknown = known_tests(src, commands=["make check"], files=["README.md"])
    assert unknown is not None and unknown.files == [] and for_explorer(unknown) == ""


def test_test_file_names():
    assert all(map(is_test_path, ["test_a.py", "a_test.py", "tests/helpers.py", "a.test.js",
                                  "b.spec.ts", "test.sh", "x_test.go", "FooTest.java"]))
    assert not any(map(is_test_path, ["a.py", "tests/__init__.py", "contest.py", "src/test.txt/a"]))
    tests = ["tests/test_cart.py", "shop/test_cart.py", "test_pricing.py"]
    assert counterparts("shop/cart.py", tests) == ["shop/test_cart.py", "tests/test_cart.py"]


def test_claims_citing_only_the_known_tests_add_nothing(sample_repo: Path):
    known = known_tests(DirSource(sample_repo), commands=["python -m unittest discover -s tests"])
    assert known is not None
    cite_test = Citation(path="tests/test_stats.py", start_line=14, end_line=14,
                         quote="self.assertEqual(median([4, 1, 3, 2]), 2.5)")
    cite_code = Citation(path="stats.py", start_line=15, end_line=15, quote="return ordered[mid]")
    findings = Findings(answer="a", claims=[
        Claim(text="median of [4, 1, 3, 2] must be 2.5", citations=[cite_test]),
        Claim(text="median returns ordered[mid] for even lengths", citations=[cite_test, cite_code]),
    ])
    result = verify_findings(DirSource(sample_repo), findings, tool_calls=2, known=known)
    assert [v.status for v in result.verdicts] == ["adds_nothing", "verified"]
    assert (result.verified, result.adds_nothing, result.dropped) == (1, 1, 0)
    assert "tests/test_stats.py, which the builder already has" in result.verdicts[0].reason
    digest = build_digest([ExplorerResult(question="q", index=0, claims=result.claims,
                                          answer="a", submitted=2, verified=1, adds_nothing=1,
                                          tool_calls=2)], known=known)
    assert digest.startswith("Tests (from the plan; nothing was run yet): tests/test_stats.py")
    assert "tests/test_stats.py:14: self.assertEqual(median([4, 1, 3, 2]), 2.5)" in digest
    assert "(1 claim(s) only restated the tests above)" in digest
    assert build_digest([], known=known).endswith("(no verified findings)")


def test_a_failure_report_from_a_check_fills_the_same_slot():
    known = KnownTests(source="check", commands=["pytest -q"], files=["tests/test_a.py"],
                       report="FAILED tests/test_a.py::test_x - assert 1 == 2",
                       suspects=["src/a.py"])
    text = for_explorer(known)
    assert "what they printed when run before any change:" in text and "assert 1 == 2" in text
    assert "the failure points at: src/a.py" in text
    digest = build_digest([], known=known)
    assert digest.startswith("Tests (run before any change; their failures are above): tests/test_a.py")
    assert "assert 1 == 2" not in digest  # the builder's prompt opens with the report already


def _planner_with_test_question() -> ModelBehavior:
    plan = {"goal": "fix median", "steps": ["fix it"],
            "questions": ["Where is `def median` defined?", "Which test covers `median([4`?"],
            "files_to_touch": ["stats.py"], "acceptance": ["python -m unittest discover -s tests"]}
    return ModelBehavior(script=[Reply(tool_calls=[ToolCallSpec(name="submit", arguments=plan)])])


async def test_a_run_tells_explorers_what_the_failing_tests_show(fresh_sim, sample_repo):
    """The preflight ran the tests before any model call: explorers get its failures."""
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": _planner_with_test_question()}))
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env())
    assert result.status == "succeeded", result.reason
    known = result.known_tests
    assert known is not None and known.source == "check"
    assert known.files == ["tests/test_stats.py"] and known.suspects == ["stats.py"]
    assert "test_median_even" in known.report and "2.5" in known.report
    first = fresh_sim.state.requests_for("sim-explorer")[0].body["messages"][1]["content"]
    assert "What the builder already has (citing it adds nothing):" in first
    assert "what they printed when run before any change:" in first and "test_median_even" in first
    assert "the failure points at: stats.py" in first
    code, test = result.explorers
    assert code.verified == 1 and code.model == "sim-explorer"
    assert test.verified == 0 and test.adds_nothing == 1
    builder = fresh_sim.state.requests_for("sim-builder")[0].body["messages"][1]["content"]
    assert "Tests (run before any change; their failures are above): tests/test_stats.py" in builder
    assert "(1 claim(s) only restated the tests above)" in builder
    stats = result.claims_by_model["sim-explorer"]
    assert (stats.explorers, stats.submitted, stats.verified, stats.adds_nothing) == (2, 2, 1, 1)
    report = json.loads((Path(result.run_dir) / "report.json").read_text())
    assert report["explorers"][1]["verdicts"][0]["status"] == "adds_nothing"
    assert report["claims_by_model"]["sim-explorer"]["adds_nothing"] == 1
    assert report["known_tests"]["source"] == "check"


async def test_without_the_preflight_the_plan_tells_what_the_tests_are(fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": _planner_with_test_question()}))
    roles = sim_roles(fresh_sim, "run.preflight=false")
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=roles, env=run_env())
    assert result.status == "succeeded", result.reason
    known = result.known_tests
    assert known is not None and known.source == "plan" and not known.report
    assert known.files == ["tests/test_stats.py"] and [a.line for a in known.lines] == [8, 11, 14]
    first = fresh_sim.state.requests_for("sim-explorer")[0].body["messages"][1]["content"]
    assert "tests/test_stats.py:14: self.assertEqual(median([4, 1, 3, 2]), 2.5)" in first
    assert result.explorers[1].adds_nothing == 1
    builder = fresh_sim.state.requests_for("sim-builder")[0].body["messages"][1]["content"]
    assert "Tests (from the plan; nothing was run yet): tests/test_stats.py" in builder
