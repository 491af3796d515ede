"""A ladder without the tool loop (``[roles.<build>] tool_loop = false``, issue 27: "speed buys
attempts"): after the one-shot rungs the sampled requests cycle at the role's highest
temperature until the budget or the attempts end. Live, the 1.5B's tool loop passed 1 of 446
attempts and its one-shots 87 of 397: the time is worth more as new draws."""

from __future__ import annotations

import pytest
from conftest import scenario_with
from routing_kit import (
    BUGGY,
    BUGGY_LINE,
    RIGHT,
    RIGHT_LINE,
    copies_back_then_answers,
    demo_run,
    show,
)

from orchestrator import api
from orchestrator.config.schema import RoleSpec
from orchestrator.engine.ladder import rung_for
from orchestrator.errors import ConfigError
from orchestrator.faces.demo import DEMO_TASK
from orchestrator.sim import ModelBehavior, Reply, ToolCallSpec

WRONG_LINE = RIGHT_LINE.replace("return", "return 0 * ")


def test_without_the_tool_loop_the_sampled_requests_cycle_and_none_is_the_last():
    spec = RoleSpec(model="m", one_shot=True, one_line=True, one_shot_attempts=2,
                    tool_loop=False)
    got = [rung_for(spec, 1, n) for n in range(1, 9)]
    assert [r.strategy for r, _ in got] == ["one_shot", "one_line", "one_shot_fact", "one_line",
                                            "one_shot_fact", "one_line", "one_shot_fact",
                                            "one_line"]
    assert not any(last for _, last in got)
    assert [r.resampled for r, _ in got] == [False] * 3 + [True] * 5
    # the explore-needed order (the line first) cycles the same way
    assert rung_for(spec, 1, 2, line_first=True)[0].strategy == "one_shot"
    assert rung_for(spec, 1, 4, line_first=True)[0].strategy == "one_line"
    # with the tool loop the ladder is as it was: its last rung repeats and is the last
    with_loop = spec.model_copy(update={"tool_loop": True})
    assert rung_for(with_loop, 1, 7) == (rung_for(with_loop, 1, 4)[0], True)
    assert rung_for(with_loop, 1, 7)[0].strategy == "tool_loop"


def test_a_role_without_the_tool_loop_and_without_the_one_shot_is_refused():
    with pytest.raises(ValueError, match="tool_loop = false needs one_shot = true"):
        RoleSpec(model="m", tool_loop=False)


async def test_a_run_without_the_tool_loop_refused_when_nothing_can_build(fresh_sim, sample_repo):
    with pytest.raises(ConfigError, match="tool_loop = false needs one_shot = true"):
        await api.arun(DEMO_TASK, **demo_run(fresh_sim, sample_repo, "builder.tool_loop=false"))


async def test_the_budget_buys_new_draws_not_the_tool_loop(fresh_sim, sample_repo):
    """The demo's median bug: the builder gives stats.py back unchanged when asked for whole
    files, and names the right line with a wrong fix twice before the right one. Without the
    tool loop, attempts 4..6 are the cycle (one line, the facts, one line), each at the role's
    highest temperature; the wrong fixes changed the file and failed the same way, and that
    does not stop the cycle; the sixth attempt passes and no request offered the tools."""
    original = (sample_repo / "stats.py").read_text(encoding="utf-8")
    respond = copies_back_then_answers(original, iter([WRONG_LINE, WRONG_LINE, RIGHT_LINE]))

    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=respond)}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_line=true",
        "builder.one_shot_attempts=2", "builder.tool_loop=false", "run.max_attempts=8",
        "builder.temperatures=[0.0, 0.7, 0.2, 0.1]"))
    assert result.status == "succeeded", result.reason
    assert [a.strategy for a in result.attempt_log] == [
        "one_shot", "one_line", "one_shot_fact", "one_line", "one_shot_fact", "one_line"]
    assert [a.changed for a in result.attempt_log] == [False, True, False, True, False, True]
    head, _, tail = original.rpartition(BUGGY_LINE)
    assert show(sample_repo, f"{result.branch}:stats.py") == head + RIGHT_LINE + tail
    asked = [r.body for r in fresh_sim.state.requests_for("sim-builder")]
    assert len(asked) == 6 and not any(body.get("tools") for body in asked)
    # attempts 1-3 at their own temperatures, the cycle's at the highest
    assert [body.get("temperature") for body in asked] == [0.0, 0.7, 0.2, 0.7, 0.7, 0.7]


async def test_with_no_code_to_show_an_attempt_still_drives_the_tools(fresh_sim, sample_repo):
    """No preflight, so nothing is pinned and no one-shot prompt can be built: without the tool
    loop the attempt still builds, with the tools, rather than failing for want of a strategy."""
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(script=[
        Reply(tool_calls=[ToolCallSpec(name="replace", arguments={
            "path": "stats.py", "old": BUGGY, "new": RIGHT})]),
        Reply(tool_calls=[ToolCallSpec(name="submit", arguments={
            "summary": "fixed", "files_changed": ["stats.py"]})])])}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, "run.preflight=false", "builder.one_shot=true",
        "builder.one_line=true", "builder.tool_loop=false"))
    assert result.status == "succeeded", result.reason
    assert result.attempt_log[0].strategy == "tool_loop"
    asked = [r.body for r in fresh_sim.state.requests_for("sim-builder")]
    assert asked and all(body.get("tools") for body in asked)
