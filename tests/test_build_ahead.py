"""``run.first_build``: the first one-shot's prompt (the task, the pinned files, the tests) needs
no plan, so with ``with_plan`` its call goes out while the planner works (the build uses that
reply when it asks the very same request), and with ``before_plan`` it is asked and checked
before the planner, which plans only when it fails. Judged by the simulator's request log (when each request started
and finished, how many the builder sent), the run branch's files and the run's own accounts."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

from conftest import scenario_with, sim_scenario
from rich.console import Console
from routing_kit import BUGGY_LINE, RIGHT_LINE, TEST_FILE, demo_run, show

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK
from orchestrator.faces.render import print_run_summary
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply

PLANNER_S = 0.6  # the planner's reply takes this long: the builder's call fits inside it


def _fixed(repo: Path) -> str:
    head, _, _ = (repo / "stats.py").read_text(encoding="utf-8").rpartition(
        "    return ordered[mid]\n")
    return head + RIGHT_LINE


def _slow_planner(sim, repo: Path) -> None:
    planner = sim_scenario().models["sim-planner"].model_copy(update={"delay_s": PLANNER_S})
    sim.set_scenario(scenario_with(**{
        "sim-planner": planner,
        "sim-builder": ModelBehavior(script=[Reply(
            content=f"stats.py\n```python\n{_fixed(repo)}```\n")])}))


async def test_the_first_one_shot_is_asked_while_the_planner_works(fresh_sim, sample_repo):
    _slow_planner(fresh_sim, sample_repo)
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "run.first_build=with_plan",
        "run.explore_when_pinned=false"))
    assert result.status == "succeeded", result.reason
    assert RIGHT_LINE in show(sample_repo, f"{result.branch}:stats.py")
    planned = max(r.finished for r in fresh_sim.state.requests_for("sim-planner"))
    built = fresh_sim.state.requests_for("sim-builder")
    assert len(built) == 1  # asked once: the build took the reply asked ahead
    assert built[0].started < planned  # and it went out while the planner worked
    # the call is the run's, paid and counted like any other (not a journal replay)
    calls = [e for e in events if e.kind == "call_finished" and e.role == "builder"]
    assert len(calls) == 1 and not [e for e in events if e.kind == "call_replayed"]
    builder = result.per_role["builder"]
    assert builder.calls == 1 and builder.prompt_tokens > 0 and result.replayed_calls == 0
    assert [a.strategy for a in result.attempt_log] == ["one_shot"]
    # the test file the prompt showed is unchanged on the branch
    assert show(sample_repo, f"{result.branch}:{TEST_FILE}") == \
        show(sample_repo, f"HEAD:{TEST_FILE}")


async def test_without_it_or_when_explorers_will_run_the_build_waits_for_the_plan(
        fresh_sim, sample_repo):
    for sets in (("builder.one_shot=true", "run.explore_when_pinned=false"),
                 ("builder.one_shot=true", "run.first_build=with_plan", "run.explore_when_pinned=true")):
        fresh_sim.state.clear()
        _slow_planner(fresh_sim, sample_repo)
        result = await api.arun(DEMO_TASK, **demo_run(fresh_sim, sample_repo, *sets))
        assert result.status == "succeeded", result.reason
        planned = max(r.finished for r in fresh_sim.state.requests_for("sim-planner"))
        built = fresh_sim.state.requests_for("sim-builder")
        assert len(built) == 1 and built[0].started >= planned, sets
        first = json.dumps(built[0].body.get("messages"))
        assert "stats.py" in first


async def test_a_reply_asked_ahead_for_another_request_is_dropped_and_its_call_cancelled():
    """What the build asks is the check: other messages or another temperature, and the call
    ahead is cancelled (the build asks its own); a run that ends first cancels it too."""
    import asyncio

    from orchestrator.engine.ahead import Ahead

    asked = [{"role": "user", "content": "fix stats.py"}]
    for other, temperature in (([{"role": "user", "content": "fix paging.py"}], 0.0),
                               (asked, 0.6), (None, None)):
        ahead = Ahead()
        started = asyncio.Event()

        async def call(started: asyncio.Event = started) -> None:
            started.set()
            await asyncio.sleep(30)

        ahead.ask_first_build(asked, 0.0, call())  # type: ignore[arg-type]
        await started.wait()
        task = ahead._build[2]  # type: ignore[index]
        if other is None:
            ahead.close()
        else:
            assert await ahead.first_build(other, temperature) is None
        await asyncio.sleep(0)
        assert task.cancelled()
        assert await ahead.first_build(asked, 0.0) is None  # used up: asked once


def _first_fails_then_fixed(sim, repo: Path) -> None:
    """The first one-shot breaks mean() and leaves the median bug; the next fixes median()."""
    stats = (repo / "stats.py").read_text(encoding="utf-8")
    broken = stats.replace("    return sum(values) / len(values)\n",
                           "    return sum(values) // len(values)\n")

    def respond(req: ChatRequestView) -> Reply:
        user = req.messages[-1]["content"]
        if "The attempt before:" not in user:
            return Reply(content=f"stats.py\n```python\n{broken}```\n")
        head, _, _ = stats.rpartition(BUGGY_LINE)
        return Reply(content=f"stats.py\n```python\n{head + RIGHT_LINE}```\n")

    sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=respond)}))


BEFORE_PLAN = ("builder.one_shot=true", "builder.one_shot_attempts=2", "run.max_attempts=2",
               "run.first_build=before_plan", "run.explore_when_pinned=false")


async def test_before_plan_a_first_one_shot_that_passes_needs_no_planner(fresh_sim, sample_repo):
    _slow_planner(fresh_sim, sample_repo)
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append],
                            **demo_run(fresh_sim, sample_repo, *BEFORE_PLAN))
    assert result.status == "succeeded", result.reason
    assert RIGHT_LINE in show(sample_repo, f"{result.branch}:stats.py")
    assert fresh_sim.state.requests_for("sim-planner") == []  # never asked
    assert len(fresh_sim.state.requests_for("sim-builder")) == 1
    deferred = [e for e in events if e.kind == "plan_deferred"]
    assert len(deferred) == 1 and "stats.py" in deferred[0].suspects
    assert result.plan is None and "planner" not in result.per_role
    assert result.plan_skipped  # and the result says so (the CLI prints it)
    report = json.loads((Path(result.run_dir) / "report.json").read_text(encoding="utf-8"))
    assert report["plan_skipped"] is True
    assert [a.strategy for a in result.attempt_log] == ["one_shot"]


async def test_before_plan_a_failing_first_attempt_goes_to_the_planner_then_the_next(
        fresh_sim, sample_repo):
    _first_fails_then_fixed(fresh_sim, sample_repo)
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append],
                            **demo_run(fresh_sim, sample_repo, *BEFORE_PLAN))
    assert result.status == "succeeded", result.reason
    planned = fresh_sim.state.requests_for("sim-planner")
    built = fresh_sim.state.requests_for("sim-builder")
    assert len(built) == 2 and planned  # the planner was asked, once the first attempt failed
    assert built[0].finished <= min(r.started for r in planned)
    assert max(r.finished for r in planned) <= built[1].started
    assert result.plan is not None and not result.plan_skipped  # its plan is the run's
    kinds = [e.kind for e in events]
    assert kinds.index("plan_deferred") < kinds.index("attempt_finished")
    assert [(a.changed, a.passed) for a in result.attempt_log] == [(True, False), (True, True)]
    branch = show(sample_repo, f"{result.branch}:stats.py")
    assert RIGHT_LINE in branch and "sum(values) // len(values)" not in branch
    row = _plan_value(result)  # what bench/plan_value.py reads of this run
    assert row is not None and row["planner"] == "sim-planner" and row["passed"]
    assert row["planner_s"] is not None and row["passed_by"] == result.attempt_log[1].strategy
    assert row["attempts"] == 2


def _plan_value(result) -> dict | None:
    """``bench/plan_value.py``'s row for a finished run, from the run's own events file."""
    run_row = runpy.run_path(str(Path(__file__).resolve().parent.parent / "bench"
                                 / "plan_value.py"))["run_row"]
    lines = (Path(result.run_dir) / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return run_row([json.loads(line) for line in lines if line])


async def test_before_plan_waits_for_the_plan_when_explorers_will_run(fresh_sim, sample_repo):
    _slow_planner(fresh_sim, sample_repo)
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **demo_run(
        fresh_sim, sample_repo, *BEFORE_PLAN[:-1], "run.explore_when_pinned=true"))
    assert result.status == "succeeded", result.reason
    planned = max(r.finished for r in fresh_sim.state.requests_for("sim-planner"))
    assert min(r.started for r in fresh_sim.state.requests_for("sim-builder")) >= planned
    assert not [e for e in events if e.kind == "plan_deferred"]


# run.plan_when_pinned = false: a pinned failure is never planned; the attempts go on from it

UNPLANNED = (*BEFORE_PLAN, "run.plan_when_pinned=false")


async def test_unplanned_a_failing_first_attempt_goes_straight_to_the_next(
        fresh_sim, sample_repo):
    _first_fails_then_fixed(fresh_sim, sample_repo)
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append],
                            **demo_run(fresh_sim, sample_repo, *UNPLANNED))
    assert result.status == "succeeded", result.reason
    assert fresh_sim.state.requests_for("sim-planner") == []  # never asked, before or after
    assert len(fresh_sim.state.requests_for("sim-builder")) == 2
    assert [(a.changed, a.passed) for a in result.attempt_log] == [(True, False), (True, True)]
    assert RIGHT_LINE in show(sample_repo, f"{result.branch}:stats.py")
    told = [e for e in events if e.kind == "plan_from_task"]
    assert len(told) == 1 and told[0].questions == []
    assert "run.plan_when_pinned = false" in told[0].reason
    assert not [e for e in events if e.kind in ("plan_deferred", "diagnosis_checked")]
    assert "planner" not in result.per_role and result.plan is not None
    assert result.plan.goal == DEMO_TASK and result.plan.questions == []
    assert result.plan_unasked and not result.plan_skipped and not result.plan_from_task
    report = json.loads((Path(result.run_dir) / "report.json").read_text(encoding="utf-8"))
    assert report["plan_unasked"] is True
    row = _plan_value(result)
    assert row is not None and row["planner"] is None and row["planner_s"] is None
    assert row["passed"] and not row["diagnosis_kept"]
    console = Console(record=True, width=200)
    print_run_summary(console, result)  # what `orchestrate run` prints, and `show` after it
    assert "plan      not asked: the failing tests point at the code" in console.export_text()


async def test_unplanned_still_plans_when_explorers_or_a_human_wait_for_the_plan(
        fresh_sim, sample_repo):
    _slow_planner(fresh_sim, sample_repo)
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **demo_run(
        fresh_sim, sample_repo, *UNPLANNED, "run.explore_when_pinned=true"))
    assert result.status == "succeeded", result.reason
    assert fresh_sim.state.requests_for("sim-planner")  # the explorers need its questions
    assert not result.plan_unasked and not [e for e in events if e.kind == "plan_from_task"]
    paused = await api.arun(DEMO_TASK, approve_plan=True, **demo_run(
        fresh_sim, sample_repo, *UNPLANNED))
    assert paused.status == "awaiting_approval" and paused.plan is not None
    assert not paused.plan_unasked
