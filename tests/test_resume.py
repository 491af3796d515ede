"""Runs that last: SIGKILL then resume, plan approval across processes, the bot API."""

from __future__ import annotations

import json
import os
import runpy
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import cli, cli_process, run_env, scenario_with, sim_roles, snapshot

import orchestrator
from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK, scenario_path
from orchestrator.sim import ModelBehavior, Reply, ToolCallSpec

ROOT = Path(__file__).resolve().parent.parent


def _planner(questions: list[str]) -> ModelBehavior:
    plan = {"goal": "fix median", "steps": ["fix"], "questions": questions, "acceptance": []}
    return ModelBehavior(script=[Reply(tool_calls=[ToolCallSpec(name="submit", arguments=plan)])])


def _cli_args(sim, repo: Path, *extra: str) -> list[str]:
    return ["--repo", str(repo), "--roles", str(scenario_path("demo-roles.toml")),
            "--set", f'providers.sim.base_url="{sim.base_url}"',
            "--set", f'providers.sim.api="{getattr(sim, "wire_api", "chat")}"', *extra]


def _body_key(body: dict) -> str:
    return json.dumps(body, sort_keys=True)


@pytest.mark.both_apis  # the call journal keys and replays Responses calls too
def test_sigkill_during_explore_then_resume_pays_for_nothing_twice(fresh_sim, sample_repo):
    sim = fresh_sim
    questions = [f"Where is `{w}`?" for w in ("median", "mean", "ordered", "StatsTest")]
    sim.set_scenario(scenario_with(**{
        "sim-planner": _planner(questions),
        "sim-explorer": ModelBehavior(delay_s=0.4, behavior="explorer-cite"),
    }))
    before = snapshot(sample_repo)
    args = ["run", DEMO_TASK, *_cli_args(sim, sample_repo, "--set", "explorer.parallel=2", "--json")]
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", *args], env=run_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    # 3 replies per explorer, 2 at a time: the 8th request means explorers 1-2 are done
    while time.monotonic() < deadline and len(sim.state.requests_for("sim-explorer")) < 8:
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert not sim.state.requests_for("sim-builder"), "killed too late: explore had finished"
    done_before = {_body_key(r.body) for r in sim.state.requests if r.status == 200 and r.finished}
    finished_questions = {q for q in questions
                          if any(q in json.dumps(r.body) and '"submit"' in json.dumps(
                              r.messages[-1:]) for r in sim.state.requests_for("sim-explorer"))}
    count_before = len(sim.state.requests)

    (run_id,) = [p.name for p in (sample_repo / "workspaces").iterdir() if p.is_dir()]
    result = api.resume(run_id, repo=sample_repo, env=run_env())
    assert result.status == "succeeded", result.reason
    after = sim.state.requests[count_before:]
    assert not [r for r in after if _body_key(r.body) in done_before], "a completed call was paid twice"
    assert len(result.explorers) == 4 and all(e.verified == 1 for e in result.explorers)
    for r in after:
        if r.model == "sim-explorer":
            assert not any(q in json.dumps(r.messages[1]) for q in finished_questions)
            assert r.api == getattr(sim, "wire_api", "chat")
    assert snapshot(sample_repo) == before
    report = json.loads((Path(result.run_dir) / "report.json").read_text())
    assert {c["role"] for c in report["calls"]} >= {"planner", "explorer", "builder"}


def test_plan_approval_pauses_and_resumes_across_processes(fresh_sim, sample_repo):
    first = cli("run", DEMO_TASK, *_cli_args(fresh_sim, sample_repo, "--approve-plan", "--json"))
    assert first.returncode == 4, first.stderr  # paused is not a success
    paused = json.loads(first.stdout)
    assert paused["status"] == "awaiting_approval" and paused["plan"]["questions"]
    assert not fresh_sim.state.requests_for("sim-explorer")
    runs = json.loads(cli("runs", "--repo", str(sample_repo), "--json").stdout)
    assert runs[0]["state"] == "awaiting_approval"
    # resumed by a process of its own: nothing of the first run's is left in memory
    second = cli_process("resume", paused["run_id"], "--repo", str(sample_repo), "--approve", "--json")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["status"] == "succeeded"
    assert len(fresh_sim.state.requests_for("sim-planner")) == 2  # the plan was not redone


def test_rejected_plan_changes_nothing(fresh_sim, sample_repo):
    paused = api.run(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env(),
                     approve_plan=True)
    assert paused.status == "awaiting_approval"
    rejected = api.resume(paused.run_id, repo=sample_repo, env=run_env(), approve=False)
    assert rejected.status == "failed" and "rejected" in rejected.reason
    assert rejected.commit is None and not fresh_sim.state.requests_for("sim-builder")


async def test_library_api_as_a_bot_with_event_stream(fresh_sim, sample_repo):
    seen_plans = []

    def approver(plan: orchestrator.Plan) -> bool:
        seen_plans.append(plan)
        return True

    handle = orchestrator.start(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim),
                                env=run_env(), approve_plan=True, approver=approver)
    events = [e async for e in handle.events()]
    result = await handle.result()
    assert isinstance(result, orchestrator.RunResult) and result.status == "succeeded"
    assert seen_plans and seen_plans[0].questions
    kinds = [e.kind for e in events]
    for kind in ("run_started", "role_started", "call_finished", "explorer_finished",
                 "test_result", "run_finished"):
        assert kind in kinds, kind
    call = next(e for e in events if e.kind == "call_finished")
    assert call.data["prompt_tokens"] > 0 and call.data["requested_model"]
    assert result.verified_findings and result.verified_findings[0].citations[0].path


def test_ci_bot_example_writes_markdown(sim, sample_repo, tmp_path, monkeypatch, capsys):
    """``python examples/ci_bot.py ...`` run in this process as the interpreter would run it
    (test_packaging runs the wheel's copy in a process of its own)."""
    sim.set_scenario(scenario_with())
    out = tmp_path / "comment.md"
    for name in [k for k in os.environ if k.endswith("_API_KEY")]:
        monkeypatch.delenv(name)
    for name, value in run_env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", [
        str(ROOT / "examples" / "ci_bot.py"), DEMO_TASK, "--repo", str(sample_repo),
        "--out", str(out), "--roles", str(scenario_path("demo-roles.toml")),
        "--set", f'providers.sim.base_url="{sim.base_url}"'])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(ROOT / "examples" / "ci_bot.py"), run_name="__main__")
    assert done.value.code == 0, capsys.readouterr().err
    text = out.read_text()
    assert text.startswith("## ✅ orchestrate") and "stats.py" in text and "| builder |" in text
    assert "| reviewer | approve |" in text


# --- exact resume: the worktree goes back to the checkpoint, nothing is paid for twice --------

_FIXED = "        return ordered[mid]\n    return (ordered[mid - 1] + ordered[mid]) / 2\n"
_BUGGY = "        return ordered[mid]\n    return ordered[mid]\n"


def _builder_with_slow_third_call() -> ModelBehavior:
    """read, replace, then a slow third reply: killed while it is in flight."""
    def call(name: str, delay: float = 0.0, **args) -> Reply:
        return Reply(tool_calls=[ToolCallSpec(name=name, arguments=args)], delay_s=delay)

    return ModelBehavior(script=[
        call("read", path="stats.py"),
        call("replace", path="stats.py", old=_BUGGY, new=_FIXED),
        call("read", delay=3.0, path="stats.py"),  # in flight when killed, and again on resume
        call("run", command="python3 -m unittest discover -s tests"),
        call("submit", summary="median fixed", files_changed=["stats.py"]),
    ])


def _completed(sim) -> dict[str, int]:
    bodies: dict[str, int] = {}
    for r in sim.state.requests:
        if r.status == 200 and r.finished:
            bodies[_body_key(r.body)] = bodies.get(_body_key(r.body), 0) + 1
    return bodies


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["kill-9", "sigint"])
def test_interrupted_in_the_builders_third_call_resumes_exactly(fresh_sim, sample_repo, sig):
    sim = fresh_sim
    sim.set_scenario(scenario_with(**{"sim-builder": _builder_with_slow_third_call()}))
    before = snapshot(sample_repo)
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", DEMO_TASK,
                             *_cli_args(sim, sample_repo, "--json")], env=run_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and len(sim.state.requests_for("sim-builder")) < 3:
        time.sleep(0.02)
    assert len(sim.state.requests_for("sim-builder")) == 3, proc.stderr.read1().decode()
    # What had come back before the signal: the sim ends the slow third reply 3 s after it
    # began whether or not anyone still listens, and a graceful exit on a loaded box can take
    # longer than that, so "finished" after the wait would count a reply nobody received.
    done_before = _completed(sim)
    assert sim.state.requests_for("sim-builder")[2].finished is None
    os.kill(proc.pid, sig)
    proc.wait(timeout=30)
    count_before = len(sim.state.requests)
    (run_id,) = [p.name for p in (sample_repo / "workspaces").iterdir() if p.is_dir()]
    worktree = sample_repo / "workspaces" / run_id / "worktree"
    assert _FIXED in (worktree / "stats.py").read_text()  # the edit after the checkpoint

    result = api.resume(run_id, repo=sample_repo, env=run_env())
    after = sim.state.requests[count_before:]
    repeated = [r for r in after if _body_key(r.body) in done_before]
    assert repeated == [], "a completed call was sent again"
    builder_after = [r for r in after if r.model == "sim-builder"]
    assert len(builder_after) == 3  # the third (never finished), then run and submit
    # the third call was sent before the interruption and is sent again: counted, not assumed
    asked_before = {_body_key(r.body) for r in sim.state.requests[:count_before]}
    asked_again = [r for r in after if _body_key(r.body) in asked_before]
    assert len(asked_again) == 1 and asked_again[0] is builder_after[0]
    assert result.replayed_calls == 2 and result.paid_calls_repeated == len(asked_again)
    assert result.status == "succeeded", result.reason
    assert "(ordered[mid - 1] + ordered[mid]) / 2" in subprocess.run(
        ["git", "show", f"{result.branch}:stats.py"], cwd=sample_repo, capture_output=True,
        text=True).stdout
    report = json.loads((Path(result.run_dir) / "report.json").read_text())
    assert report["replayed_calls"] == 2 and report["paid_calls_repeated"] == 1
    assert snapshot(sample_repo) == before


def test_resume_without_restoring_would_pay_twice(fresh_sim, sample_repo):
    """The check above can fail: skip the restore and the journal misses."""
    from orchestrator.models.base import Completion
    from orchestrator.models.journal import CallJournal, turn_of
    from orchestrator.state import CallRecord

    done = Completion("ok", (), "stop", CallRecord(role="builder", session="builder-1",
                                                   requested_model="m"))
    journal = CallJournal(sample_repo / "j.sqlite")
    journal.put("key-a", done, "builder-1", 1)
    assert journal.check_repeat("builder-1", 1, "key-b") and journal.repeated == 1
    assert not journal.check_repeat("builder-1", 1, "key-a")
    assert not journal.check_repeat("builder-1", 2, "key-c")
    assert turn_of([{"role": "system"}, {"role": "user"}, {"role": "assistant"},
                    {"role": "tool"}]) == 1
    journal.close()
    again = CallJournal(sample_repo / "j.sqlite")  # what the next process finds on disk
    assert again.check_repeat("builder-1", 1, "key-b")
    replayed = again.get("key-a")
    assert replayed is not None and replayed.content == "ok" and replayed.record.replayed
    again.close()


@pytest.mark.parametrize("mode", ["bwrap", "none"])
def test_a_command_alive_at_kill_9_is_gone_after_resume(fresh_sim, sample_repo, mode):
    from test_hostile import live_processes

    from orchestrator.sandbox import PidsCgroup

    stamp = f"{os.getpid()}{int(time.time() * 1000) % 10000}"
    marker, escaped = f"{900 + (mode == 'none')}.{stamp}", f"{910 + (mode == 'none')}.{stamp}"
    long_call = Reply(tool_calls=[ToolCallSpec(name="run", arguments={
        "command": f"(setsid sleep {escaped} &); sleep {marker}"})])
    fix = scenario_with().models["sim-builder"].script
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        script=[long_call, *fix[:1], *fix[1:]])}))
    sets = ["--set", "run.command_timeout_s=3"]
    if mode == "none":
        sets += ["--set", 'sandbox.mode="none"']
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", DEMO_TASK,
                             *_cli_args(fresh_sim, sample_repo, *sets, "--json")], env=run_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not live_processes(f"sleep {marker}"):
        time.sleep(0.02)
    assert live_processes(f"sleep {marker}")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    time.sleep(0.5)
    alive_after_kill = live_processes(f"sleep {marker}")
    if mode == "bwrap":
        assert alive_after_kill == []  # --die-with-parent and the PID namespace: gone at once
    (run_id,) = [p.name for p in (sample_repo / "workspaces").iterdir() if p.is_dir()]
    try:
        result = api.resume(run_id, repo=sample_repo, env=run_env())
        assert result.status == "succeeded", result.reason
        assert live_processes(f"sleep {marker}") == []  # the one from before the kill included
        if mode == "bwrap" or PidsCgroup.available():
            assert live_processes(f"sleep {escaped}") == []
    finally:
        for pid in live_processes(marker) + live_processes(escaped):
            os.kill(pid, signal.SIGKILL)
