"""``run.build_ahead``: the first one-shot's call goes out while the planner works, since its
prompt (the task, the pinned files, the tests) needs no plan; the build uses that reply when it
asks the very same request. Judged by the simulator's request log (when each request started
and finished, how many the builder sent), the run branch's files and the run's own accounts."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import scenario_with, sim_scenario
from routing_kit import RIGHT_LINE, TEST_FILE, demo_run, show

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK
from orchestrator.sim import ModelBehavior, Reply

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
        fresh_sim, sample_repo, "builder.one_shot=true", "run.build_ahead=true",
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
                 ("builder.one_shot=true", "run.build_ahead=true", "run.explore_when_pinned=true")):
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
