"""Speed buys attempts: k candidate builds race in worktrees and sandboxes of their own, against
the simulator (issue 15). Judged by effect: which files the run branch holds, which requests the
model got at which temperature, which processes are left, what the user's checkout looks like.
Also: explorers are skipped when the failing tests already point at the code."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from conftest import cli, run_env, scenario_with, snapshot

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK, demo_roles_sets, scenario_path
from orchestrator.record.events import read_events
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply, ToolCallSpec

BUGGY = "        return ordered[mid]\n    return ordered[mid]\n"
RIGHT = "        return ordered[mid]\n    return (ordered[mid - 1] + ordered[mid]) / 2\n"
WRONG = "        return ordered[mid]\n    return ordered[mid - 1]\n"
# right too, but a bigger change: a comment and a variable more
WORDY = ("        return ordered[mid]\n    # even: the mean of the two middle values\n"
         "    low, high = ordered[mid - 1], ordered[mid]\n    return (low + high) / 2\n")


def _call(name: str, **arguments) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name=name, arguments=arguments)])


def _fix(new: str, *, delay: float = 0.0, first: Reply | None = None) -> list[Reply]:
    """A candidate's turns: maybe a first call, then the edit and the submission."""
    turns = [first] if first else []
    turns += [_call("replace", path="stats.py", old=BUGGY, new=new),
              _call("submit", summary="median fixed", files_changed=["stats.py"])]
    return [t.model_copy(update={"delay_s": delay}) for t in turns]


def _by_temperature(plans: dict[float, list[Reply]]):
    """The builder model answers each candidate by the temperature it samples at."""

    def respond(req: ChatRequestView) -> Reply:
        turns = plans[float(req.body["temperature"])]
        return turns[min(req.assistant_turns, len(turns) - 1)]

    return respond


def _setup(sim, repo: Path, *sets: str) -> dict:
    return dict(repo=repo, role_files=[scenario_path("demo-roles.toml")], env=run_env(),
                sets=[*demo_roles_sets(sim.base_url), *sets])


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          check=True).stdout


def _alive(marker: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line]


async def test_first_passing_candidate_wins_and_the_others_are_stopped(fresh_sim, sample_repo):
    marker = f"race-marker-{time.monotonic_ns()}"
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=_by_temperature({
        0.0: _fix(WRONG),  # quick, and wrong: its acceptance run fails
        0.5: _fix(RIGHT, delay=0.4),  # right, a little later
        # still in a long command when the race is decided
        1.0: _fix(RIGHT, first=_call("run", command=f"sleep 90 # {marker}")),
    }))}))
    before = snapshot(sample_repo)
    events: list = []
    started = time.monotonic()
    result = await api.arun(DEMO_TASK, listeners=[events.append], **_setup(
        fresh_sim, sample_repo, "builder.parallel=3", "builder.temperatures=[0.0, 0.5, 1.0]"))
    took = time.monotonic() - started

    assert result.status == "succeeded", result.reason
    assert took < 60  # nobody waited for the 90 s command
    assert RIGHT in _git(sample_repo, "show", f"{result.branch}:stats.py")
    (race,) = result.races
    assert race.winner == 2 and race.pick == "first"
    assert {c.index: c.status for c in race.candidates} == {1: "failed", 2: "passed",
                                                            3: "cancelled"}
    assert [c.session for c in race.candidates] == ["builder-1", "builder-1-c2", "builder-1-c3"]
    assert race.candidates[0].failing and race.candidates[1].files_changed == 1
    temps = {ChatRequestView.from_body(r.body).body["temperature"]
             for r in fresh_sim.state.requests_for("sim-builder")}
    assert temps == {0.0, 0.5, 1.0}
    # the run's own verify judged the kept files again, in the run's worktree
    assert result.tests is not None and result.tests.passed
    kinds = [e.kind for e in events]
    assert kinds.count("candidate_finished") == 3 and kinds.count("race_finished") == 1
    assert kinds.index("race_finished") < kinds.index("test_result")

    deadline = time.monotonic() + 5
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive(marker) == []  # the cancelled candidate's command is gone
    run_dir = Path(result.run_dir)
    for i in (1, 2, 3):
        assert not (run_dir / "candidates" / f"1-c{i}" / "worktree").exists()
    assert "ordered[mid - 1]" in (run_dir / "candidates" / "1-c1" / "patch.diff").read_text()
    assert snapshot(sample_repo) == before  # the user's checkout is untouched
    logged = {e.kind for e in read_events(run_dir / "events.jsonl")}
    assert {"candidate_finished", "race_finished"} <= logged
    shown = cli("show", result.run_id, "--repo", str(sample_repo))
    assert shown.returncode == 0, shown.stderr
    assert "candidate builds" in shown.stdout and "cancelled" in shown.stdout


async def test_smallest_passing_change_wins_when_every_candidate_finishes(fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=_by_temperature({
        0.2: _fix(WORDY),  # passes first, with the bigger change
        0.9: _fix(RIGHT, delay=0.3),  # passes later, smaller
    }))}))
    result = await api.arun(DEMO_TASK, **_setup(
        fresh_sim, sample_repo, "builder.parallel=2", "builder.temperatures=[0.2, 0.9]",
        'builder.pick="smallest"'))
    assert result.status == "succeeded", result.reason
    (race,) = result.races
    assert race.winner == 2 and [c.status for c in race.candidates] == ["passed", "passed"]
    assert race.candidates[0].diff_lines > race.candidates[1].diff_lines
    assert RIGHT in _git(sample_repo, "show", f"{result.branch}:stats.py")


async def test_a_round_nobody_wins_feeds_the_next_round(fresh_sim, sample_repo):
    def respond(req: ChatRequestView) -> Reply:
        task = next(m["content"] for m in req.messages if m.get("role") == "user")
        second = "Feedback from the last attempt" in task
        if not second:
            turns = _fix(WRONG)
        elif req.body["temperature"] == 0.7:  # round 2 starts from the kept candidate's files
            turns = [_call("replace", path="stats.py", old=WRONG, new=RIGHT), _fix(RIGHT)[1]]
        else:
            turns = [_fix(RIGHT)[1]]  # submits the still wrong files again
        return turns[min(req.assistant_turns, len(turns) - 1)]

    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=respond)}))
    result = await api.arun(DEMO_TASK, **_setup(
        fresh_sim, sample_repo, "builder.parallel=2", "builder.temperatures=[0.0, 0.7]"))
    assert result.status == "succeeded", result.reason
    first, second = result.races
    assert first.winner is None and {c.status for c in first.candidates} == {"failed"}
    assert second.winner == 2 and result.attempts == 2
    assert [c.session for c in second.candidates] == ["builder-2", "builder-2-c2"]


async def test_explorers_are_skipped_when_the_failing_test_points_at_the_code(fresh_sim,
                                                                             sample_repo):
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **_setup(
        fresh_sim, sample_repo, "run.explore_when_pinned=false"))
    assert result.status == "succeeded", result.reason
    assert result.explore_skipped and result.explorers == []
    assert fresh_sim.state.requests_for("sim-explorer") == []
    (skipped,) = [e for e in events if e.kind == "explore_skipped"]
    assert skipped.suspects == ["stats.py"] and skipped.questions
    plan = ChatRequestView.from_body(fresh_sim.state.requests_for("sim-planner")[0].body)
    assert "already shows the code to change" in json.dumps(plan.messages)
    # the builder still got the lines the failure points at
    build = ChatRequestView.from_body(fresh_sim.state.requests_for("sim-builder")[0].body)
    first_user = next(m["content"] for m in build.messages if m.get("role") == "user")
    assert "return ordered[mid]" in first_user


def test_a_race_killed_mid_flight_resumes_exactly(fresh_sim, sample_repo):
    """kill -9 while both candidates wait for their third reply: resume rebuilds each
    candidate's worktree, replays its completed calls from the journal, pays for none twice
    (only the two calls in flight at the kill are asked again, and counted)."""
    import os
    import signal
    import sys

    from orchestrator.faces.demo import DEMO_TASK as task

    def turns(new: str) -> list[Reply]:
        return [_call("read", path="stats.py"), _call("replace", path="stats.py", old=BUGGY, new=new),
                _call("read", path="stats.py").model_copy(update={"delay_s": 3.0}),
                _call("submit", summary="median fixed", files_changed=["stats.py"])]

    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=_by_temperature({
        0.0: turns(RIGHT), 0.5: turns(WRONG)}))}))
    before = snapshot(sample_repo)
    args = ["run", task, "--repo", str(sample_repo), "--roles", str(scenario_path("demo-roles.toml")),
            "--set", f'providers.sim.base_url="{fresh_sim.base_url}"', "--set", "builder.parallel=2",
            "--set", "builder.temperatures=[0.0, 0.5]", "--json"]
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", *args], env=run_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(fresh_sim.state.requests_for("sim-builder")) < 6:
        time.sleep(0.02)
    assert len(fresh_sim.state.requests_for("sim-builder")) == 6, proc.stderr.read1().decode()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)

    def key(body: dict) -> str:
        return json.dumps(body, sort_keys=True)

    done = {key(r.body) for r in fresh_sim.state.requests if r.status == 200 and r.finished}
    count = len(fresh_sim.state.requests)
    (run_id,) = [p.name for p in (sample_repo / "workspaces").iterdir() if p.is_dir()]
    result = api.resume(run_id, repo=sample_repo, env=run_env())
    after = fresh_sim.state.requests[count:]
    assert [r for r in after if key(r.body) in done] == [], "a completed call was sent again"
    assert result.status == "succeeded", result.reason
    # each candidate's third call was in flight at the kill: sent again, and counted so
    sent = {key(r.body) for r in fresh_sim.state.requests[:count]}
    asked_again = [r for r in after if key(r.body) in sent]
    assert len(asked_again) == 2
    assert result.replayed_calls == 4 and result.paid_calls_repeated == len(asked_again)
    (race,) = result.races
    assert race.winner == 1
    assert RIGHT in _git(sample_repo, "show", f"{result.branch}:stats.py")
    assert snapshot(sample_repo) == before


async def test_a_candidate_cannot_touch_the_runs_worktree_or_another_candidate(fresh_sim,
                                                                               sample_repo):
    """Each candidate's sandbox writes only its own worktree (judged by effect)."""
    attack = ("for d in ../../../worktree ../../1-c1/worktree; do echo pwned > $d/stats.py; "
              "echo pwned > $d/../planted; done; echo pwned > ../../../planted; true")
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=_by_temperature({
        0.0: _fix(RIGHT, delay=0.5),
        0.5: _fix(WRONG, first=_call("run", command=attack)),
    }))}))
    before = snapshot(sample_repo)
    result = await api.arun(DEMO_TASK, **_setup(
        fresh_sim, sample_repo, "builder.parallel=2", "builder.temperatures=[0.0, 0.5]"))
    assert result.status == "succeeded", result.reason
    assert result.races[0].winner == 1
    run_dir = Path(result.run_dir)
    assert "pwned" not in _git(sample_repo, "show", f"{result.branch}:stats.py")
    assert not list(run_dir.rglob("planted"))
    assert "pwned" not in (run_dir / "worktree" / "stats.py").read_text()
    assert snapshot(sample_repo) == before


def test_checkpoints_keep_every_model_the_state_holds():
    """A resumed run gets its localisation and races back (the serializer's allow-list is
    derived from RunState, so a new field's type cannot be dropped on resume)."""
    from orchestrator.localize.localization import Check, Localization
    from orchestrator.record.store import serializer
    from orchestrator.state import Candidate, Race, RunState

    state = RunState(task="t", localization=Localization(
        checks=(Check(command="c", exit_code=1, output="o"),), suspects=("a.py",)),
        races=[Race(round=1, pick="first", winner=1, candidates=[
            Candidate(index=1, session="builder-1", status="passed")])])
    from pydantic import BaseModel

    from orchestrator.record import store

    serde = serializer()
    back = serde.loads_typed(serde.dumps_typed(state))
    assert back == state and isinstance(back.localization, Localization)

    def models(value) -> set[type]:
        found: set[type] = set()
        if isinstance(value, BaseModel):
            found.add(type(value))
            value = dict(value)
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, (list, tuple)):
            for item in value:
                found |= models(item)
        return found

    # each of them deserializes as itself, not by LangGraph's unregistered-type fallback
    assert models(state) <= set(store._STATE_TYPES)
