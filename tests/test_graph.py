"""The graph's shape is a snapshot, and its routing functions are pure."""

from __future__ import annotations

from pathlib import Path

from orchestrator.config.pipeline import Judge, Pipeline
from orchestrator.engine.graph import (
    _after_approve,
    _after_gather,
    _to_approval,
    after_review,
    after_verify,
    build_explore_graph,
    build_graph,
    fan_out,
)
from orchestrator.state import CheckResult, Plan, Review, RunState, VerifyResult

SNAPSHOTS = Path(__file__).parent / "snapshots"


def test_graph_shapes_match_their_snapshots():
    """If this fails on purpose, regenerate with draw_mermaid() and review the diff."""
    drawn = build_graph().compile().get_graph().draw_mermaid()
    assert drawn == (SNAPSHOTS / "graph.mmd").read_text()
    explore = build_explore_graph().compile().get_graph().draw_mermaid()
    assert explore == (SNAPSHOTS / "explore_graph.mmd").read_text()
    judged = Pipeline(explore=None, judges=(Judge("security-reviewer", "check"),
                                            Judge("reviewer", "review")))
    drawn = build_graph(judged).compile().get_graph().draw_mermaid()
    assert drawn == (SNAPSHOTS / "graph_check.mmd").read_text()  # no explorers, two judges


def _failed(attempts: int, failures: list[str]) -> RunState:
    verify = VerifyResult(passed=False, checks=[CheckResult(command="t", exit_code=1, output="x",
                                                             duration_s=0.1)])
    return RunState(task="t", verify=verify, attempts=attempts, max_attempts=3, failures=failures)


def test_routing():
    assert fan_out(RunState(task="t", plan=Plan(goal="g", steps=[]))) == "gather"
    sends = fan_out(RunState(task="t", plan=Plan(goal="g", steps=[], questions=["a", "b"])))
    assert [s.arg["question"] for s in sends] == ["a", "b"]
    assert fan_out(RunState(task="t", plan_rejected=True)) == "report"
    # the approval step only when a human is asked
    after_plan = _to_approval(fan_out)
    planned = Plan(goal="g", steps=[], questions=["a"])
    assert after_plan(RunState(task="t", plan=planned, approve_plan=True)) == "approve"
    assert [s.arg["question"] for s in after_plan(RunState(task="t", plan=planned))] == ["a"]
    assert after_verify(_failed(1, ["A"])) == "build"
    # a first attempt asked before the planner (run.first_build): its failure goes to the plan
    deferred = _failed(1, ["A"]).model_copy(update={"plan_deferred": True})
    assert after_verify(deferred) == "plan"
    assert after_verify(deferred.model_copy(update={"max_attempts": 1})) == "report"
    assert after_verify(_failed(2, ["A", "A"])) == "report"  # the same failure twice
    assert after_verify(_failed(3, ["A", "B", "C"])) == "report"  # out of attempts
    passed = RunState(task="t", verify=VerifyResult(passed=True), reviews=0, max_reviews=1)
    assert after_verify(passed) == "review"
    assert after_verify(passed.model_copy(update={"reviews": 1})) == "report"
    changes = RunState(task="t", review=Review(verdict="request_changes"), attempts=1)
    assert after_review(changes) == "build"
    assert after_review(changes.model_copy(update={"attempts": 3})) == "report"


def test_a_spent_time_budget_routes_to_the_report():
    """A planner, explorers or judge the time budget stopped (``deadline.py``): no explorer is
    sent, no build starts, and a stopped judge's old verdict does not send the run back."""
    asked = Plan(goal="g", steps=[], questions=["Where is `median`?"])
    assert len(fan_out(RunState(task="t", plan=asked))) == 1  # type: ignore[arg-type]
    stopped = RunState(task="t", plan=asked, out_of_time=True)
    assert fan_out(stopped) == "gather"
    assert _after_gather(stopped) == "report" and _after_approve(stopped) == "report"
    assert _after_gather(RunState(task="t", plan=asked)) == "build"
    changes = RunState(task="t", review=Review(verdict="request_changes"), attempts=1)
    assert after_review(changes.model_copy(update={"out_of_time": True})) == "report"
