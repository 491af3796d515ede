"""The failing tests define the task: builders cannot edit them, a command that changes them
has its change put back before verify, and a retry samples at its own temperature (issue 15:
live, small builders "fixed" tests instead of code and repeated a failed attempt word for word).
Judged by effect against the simulator: the run branch's files and the requests sent."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from conftest import scenario_with
from routing_kit import BUGGY, RIGHT, TEST_FILE, call, demo_run, show, submit

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply

EXPECTED = "self.assertEqual(median([4, 1, 3, 2]), 2.5)"
CHEAT = "self.assertEqual(median([4, 1, 3, 2]), 3)"
SUBMIT = submit("done")


def _scripted(*turns: Reply) -> ModelBehavior:
    return ModelBehavior(script=list(turns))


def _last_history(sim, model: str) -> str:
    """The whole conversation as the model's last request carried it."""
    return json.dumps(ChatRequestView.from_body(sim.state.requests_for(model)[-1].body).messages)


async def test_the_edit_tools_refuse_the_failing_tests(fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": _scripted(
        call("replace", path=TEST_FILE, old=EXPECTED, new=CHEAT),
        call("write_file", path=TEST_FILE, content="import unittest\n"),
        call("replace", path="stats.py", old=BUGGY, new=RIGHT),
        SUBMIT)}))
    result = await api.arun(DEMO_TASK, **demo_run(fresh_sim, sample_repo))
    assert result.status == "succeeded", result.reason
    assert show(sample_repo, f"{result.branch}:{TEST_FILE}") == \
        show(sample_repo, f"HEAD:{TEST_FILE}")
    said = _last_history(fresh_sim, "sim-builder")
    assert said.count("is a failing test of this task") == 2


async def test_a_command_that_changes_the_tests_has_it_put_back(fresh_sim, sample_repo):
    cheat = f"sed -i 's/2.5)/3)/' {TEST_FILE} && sed -i 's/\\[mid\\]$/[mid + 0]/' stats.py"
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": _scripted(
        call("run", command=cheat), SUBMIT)}))
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append],
                            **demo_run(fresh_sim, sample_repo, "run.max_attempts=1"))
    assert result.status == "failed"  # the tests as written still fail
    assert show(sample_repo, f"{result.branch}:{TEST_FILE}") == \
        show(sample_repo, f"HEAD:{TEST_FILE}")
    warned = [e for e in events if e.kind == "warning" and e.category == "tests_put_back"]
    assert warned and TEST_FILE in warned[0].message


async def test_feedback_says_the_tests_were_put_back_and_a_retry_samples_differently(
        fresh_sim, sample_repo):
    def respond(req: ChatRequestView) -> Reply:
        task = next(m["content"] for m in req.messages if m.get("role") == "user")
        if "they were put back" not in task:  # attempt 1 cheats through the shell
            turns = [call("run", command=f"sed -i 's/2.5)/3)/' {TEST_FILE}"), SUBMIT]
        else:
            turns = [call("replace", path="stats.py", old=BUGGY, new=RIGHT), SUBMIT]
        return turns[min(req.assistant_turns, len(turns) - 1)]

    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=respond)}))
    result = await api.arun(DEMO_TASK, **demo_run(fresh_sim, sample_repo,
                                                "builder.temperatures=[0.0, 0.8]"))
    assert result.status == "succeeded", result.reason and result.attempts == 2
    temps = [r.body.get("temperature") for r in fresh_sim.state.requests_for("sim-builder")]
    assert temps == [0.0, 0.0, 0.8, 0.8]
    assert RIGHT in show(sample_repo, f"{result.branch}:stats.py")


async def test_protect_tests_off_lets_the_builder_edit_them(fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": _scripted(
        call("replace", path=TEST_FILE, old=EXPECTED, new=CHEAT), SUBMIT)}))
    result = await api.arun(DEMO_TASK, **demo_run(fresh_sim, sample_repo,
                                                "run.protect_tests=false", "run.max_attempts=1"))
    assert result.status == "succeeded", result.reason  # what the user asked for, literally
    assert CHEAT in show(sample_repo, f"{result.branch}:{TEST_FILE}")


async def test_putting_back_never_writes_through_a_link(fresh_sim, sample_repo, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    swap = f"rm -rf tests && ln -s {outside} tests"
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": _scripted(
        call("run", command=swap), call("replace", path="stats.py", old=BUGGY, new=RIGHT),
        SUBMIT)}))
    result = await api.arun(DEMO_TASK, **demo_run(fresh_sim, sample_repo, "run.max_attempts=1",
                                                'sandbox.mode="none"'))
    assert list(outside.iterdir()) == []  # nothing written through the builder's link
    assert result.status == "succeeded", result.reason  # the tests were put back, and pass
    assert show(sample_repo, f"{result.branch}:{TEST_FILE}") == \
        show(sample_repo, f"HEAD:{TEST_FILE}")


def _digest(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()}


@pytest.mark.parametrize("reader", ["git", "run's cat-file reader"])
def test_put_back_writes_nothing_outside_the_worktree(sample_repo, tmp_path, reader):
    """Paths that would leave the worktree are ignored and links and FIFOs the builder left in
    place of a test are replaced, never written through; judged by effect on the user's files,
    their .git and a sentinel outside, with either way of reading the start commit."""
    from orchestrator.evidence.sources import GitCommitSource
    from orchestrator.workspace.worktree import Workspace

    outside = tmp_path / "outside"
    outside.mkdir()
    sentinel = outside / "test_stats.py"
    sentinel.write_text("mine\n")
    ws = Workspace.create(sample_repo, "20990101-000000-putback")
    before = (_digest(outside), _digest(sample_repo / ".git"), show(sample_repo, "HEAD:stats.py"),
              (sample_repo / TEST_FILE).read_bytes())
    tests_dir = ws.worktree / "tests"
    (tests_dir / "test_stats.py").unlink()
    os.link(sentinel, tests_dir / "test_stats.py")  # a hard link to a file outside
    os.mkfifo(tests_dir / "test_more.py")           # a FIFO where a test was (never opened)
    hostile = [str(sentinel), f"../../../{outside.name}/test_stats.py", ".git/config",
               "/etc/hostname", "tests/../../x", "tests/test_more.py"]
    with GitCommitSource(sample_repo, ws.start_commit or ws.base_commit, resolved=True) as src:
        read = src.raw if reader != "git" else None
        assert ws.put_back([*hostile, TEST_FILE], read) == [TEST_FILE]
    assert sentinel.read_text() == "mine\n"  # the hard link was replaced, not written through
    assert EXPECTED in (ws.worktree / TEST_FILE).read_text()
    assert stat.S_ISFIFO(os.lstat(tests_dir / "test_more.py").st_mode)  # not in the commit: left
    assert before == (_digest(outside), _digest(sample_repo / ".git"),
                      show(sample_repo, "HEAD:stats.py"), (sample_repo / TEST_FILE).read_bytes())
