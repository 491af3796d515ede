"""The run's time budget bounds every model call, not only the builds (``engine/deadline.py``):
a planner, an explorer or a judge that would outlast it is stopped, the run ends by the budget
with a reason that says where the time went, and the user's checkout is untouched. Live (r49)
a planner and its explorers on shared cores overran a 300 s budget to 552 s. Against the
simulator, a model that takes 60 s to answer; judged by the run's end, its events, the
requests the simulator recorded and the checkout before and after."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from conftest import scenario_with, snapshot
from routing_kit import call, demo_run, show

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply
from orchestrator.sim.behaviors import explorer_cite

SLOW = ModelBehavior(script=[Reply(content="thinking", delay_s=60.0)])


async def _run(sim, repo, budget: float, *sets: str, **models: ModelBehavior):
    sim.set_scenario(scenario_with(**models))
    before = snapshot(repo)
    events: list = []
    started = time.monotonic()
    result = await api.arun(DEMO_TASK, listeners=[events.append], **demo_run(
        sim, repo, f"run.time_budget_s={budget:g}", *sets))
    took = time.monotonic() - started
    assert snapshot(repo) == before  # the user's checkout: never touched
    finished = next(e for e in events if e.kind == "run_finished")
    assert finished.t <= budget, finished.t  # the whole run, its finish included
    assert took < 30  # the 60 s reply was not waited for
    return result, events


async def test_a_planner_the_budget_outlasts_is_stopped_and_nothing_is_built(fresh_sim,
                                                                            sample_repo):
    result, events = await _run(fresh_sim, sample_repo, 4, **{"sim-planner": SLOW})
    assert result.status == "failed"
    assert result.reason.startswith("the time budget of 4 s (run.time_budget_s) ran out while "
                                    "planning, before any build attempt"), result.reason
    assert result.attempts == 0 and not fresh_sim.state.requests_for("sim-builder")
    assert not fresh_sim.state.requests_for("sim-explorer")
    said = [e for e in events if e.kind == "warning" and e.category == "out_of_time"]
    assert len(said) == 1 and said[0].role == "planner"
    assert show(sample_repo, f"{result.branch}:stats.py") == show(sample_repo, "HEAD:stats.py")


async def test_explorers_the_budget_outlasts_are_stopped_before_the_build(fresh_sim,
                                                                          sample_repo):
    """The planner asks two questions at once; both explorers take 60 s: both are stopped when
    the budget runs out, each says so, and no build is started on no time."""
    result, events = await _run(fresh_sim, sample_repo, 5, "run.explore_when_pinned=true",
                                **{"sim-explorer": SLOW})
    assert result.status == "failed"
    assert "ran out while exploring, before any build attempt" in result.reason, result.reason
    assert result.attempts == 0 and not fresh_sim.state.requests_for("sim-builder")
    stopped = [e for e in events if e.kind == "explorer_finished"]
    assert len(stopped) == 2
    assert all("stopped by the run's time budget of 5 s" in (e.error or "") for e in stopped)
    assert len(fresh_sim.state.requests_for("sim-explorer")) == 2
    said = [e for e in events if e.kind == "warning" and e.category == "out_of_time"]
    assert [e.role for e in said] == ["explorer"] and "(2 of 2 stopped)" in said[0].message
    assert sorted(loss.code for loss in result.losses) == ["out_of_time", "out_of_time"]


async def test_an_explore_the_budget_cuts_answers_with_what_finished_and_says_so(fresh_sim,
                                                                                sample_repo):
    """`orchestrate explore` under a budget: the explorer asked where median() is defined
    answers at once, the other would take 60 s and is stopped. The answer keeps the first's
    verified claim and exits 3 (an explorer lost), not 0."""
    def respond(req: ChatRequestView) -> Reply:
        if "`def median`" in json.dumps(req.messages):
            return explorer_cite(req)
        return Reply(content="thinking", delay_s=60.0)

    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": ModelBehavior(respond=respond)}))
    before = snapshot(sample_repo)
    started = time.monotonic()
    result = await api.aexplore("How does median() handle even lengths?", **demo_run(
        fresh_sim, sample_repo, "run.time_budget_s=5"))
    assert time.monotonic() - started < 30 and snapshot(sample_repo) == before
    answered = {e.index: e for e in result.explorers}
    assert answered[0].claims and not answered[1].claims
    assert "def median" in result.digest  # the answer is what the first explorer found
    assert "stopped by the run's time budget of 5 s" in (answered[1].error or "")
    assert result.exit_code == 3 and [loss.code for loss in result.losses] == ["out_of_time"]


async def test_a_judge_the_budget_outlasts_leaves_the_verified_build_a_success(fresh_sim,
                                                                              sample_repo):
    """The build passes; the reviewer would take 60 s: it is stopped, and the run succeeds on
    its acceptance commands, saying the verdict is missing."""
    result, events = await _run(fresh_sim, sample_repo, 6, **{"sim-reviewer": SLOW})
    assert result.status == "succeeded", result.reason
    assert "ran out while reviewer judged it, so its verdict is missing" in result.reason
    assert result.attempts == 1
    assert show(sample_repo, f"{result.branch}:stats.py") != show(sample_repo, "HEAD:stats.py")
    said = [e for e in events if e.kind == "warning" and e.category == "out_of_time"]
    assert [e.role for e in said] == ["reviewer"]


async def test_a_budget_with_time_to_spare_changes_nothing(fresh_sim, sample_repo):
    """Planner, explorers, builder and reviewer all answer well within the budget."""
    result, events = await _run(fresh_sim, sample_repo, 25, "run.explore_when_pinned=true")
    assert result.status == "succeeded" and result.reason == "acceptance commands passed"
    verified = [e.verified for e in events if e.kind == "explorer_finished"]
    assert len(verified) == 2 and all(verified)
    assert not [e for e in events if e.kind == "warning" and e.category == "out_of_time"]
    assert not result.losses


AUDITOR = """\
---
name: test-auditor
kind: check
description: Runs the tests itself before it judges.
tools: [read, search, run]
---
You audit test runs.
"""
STAMP = "sleep 61.25"  # a command line no other process here has


def _auditor_writes_then_hangs(req: ChatRequestView) -> Reply:
    return call("run", command=f"echo scratch > auditor-was-here.txt && {STAMP}")


async def test_a_judge_cut_mid_command_leaves_no_file_and_no_process(fresh_sim, sample_repo):
    """A team's check role runs a command that writes into the worktree and then hangs past
    the budget: the run ends by the budget on the build's files alone (the judge's file is not
    in the result branch) and the command's processes are gone."""
    (sample_repo / ".orchestrate/agents").mkdir(parents=True)
    (sample_repo / ".orchestrate/agents/test-auditor.md").write_text(AUDITOR)
    (sample_repo / "roles.toml").write_text(
        '[pipeline]\nsteps = ["planner", "explorer", "builder", "test-auditor", "reviewer"]\n'
        '[models.checker-sim]\nprovider = "sim"\nid = "sim-checker"\ncontext_window = 16_000\n'
        'max_output = 2_000\n[roles.test-auditor]\nmodel = "checker-sim"\n')
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "."], cwd=sample_repo, check=True)
    subprocess.run([*git, "commit", "-qm", "team roles"], cwd=sample_repo, check=True)
    result, events = await _run(fresh_sim, sample_repo, 10, **{
        "sim-checker": ModelBehavior(respond=_auditor_writes_then_hangs)})
    assert result.status == "succeeded", result.reason
    assert "ran out while test-auditor judged it, so its verdict is missing" in result.reason
    files = subprocess.run(["git", "show", "--name-only", "--format=", result.branch],
                           cwd=sample_repo, capture_output=True, text=True, check=True).stdout
    assert files.split() == ["stats.py"]
    worktree = Path(result.run_dir) / "worktree"  # the run's own tree, as `orchestrate show` has it
    assert (worktree / "stats.py").is_file() and not (worktree / "auditor-was-here.txt").exists()
    assert fresh_sim.state.requests_for("sim-checker")  # it did run its command
    warned = [e.message for e in events if e.kind == "warning"]
    assert any("test-auditor's commands changed files" in w for w in warned), warned
    assert subprocess.run(["pgrep", "-f", STAMP], capture_output=True).returncode == 1
