"""Runs that last: SIGKILL then resume, plan approval across processes, the bot API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import cli, run_env, scenario_with, sim_roles, snapshot

import orchestrator
from orchestrator import api
from orchestrator.demo import DEMO_TASK, scenario_path
from orchestrator.sim import ModelBehavior, Reply, ToolCallSpec

ROOT = Path(__file__).resolve().parent.parent


def _planner(questions: list[str]) -> ModelBehavior:
    plan = {"goal": "fix median", "steps": ["fix"], "questions": questions, "acceptance": []}
    return ModelBehavior(script=[Reply(tool_calls=[ToolCallSpec(name="submit", arguments=plan)])])


def _cli_args(sim, repo: Path, *extra: str) -> list[str]:
    return ["--repo", str(repo), "--roles", str(scenario_path("demo-roles.toml")),
            "--set", f'providers.sim.base_url="{sim.base_url}"', *extra]


def _body_key(body: dict) -> str:
    return json.dumps(body, sort_keys=True)


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
                              r.body["messages"][-1:]) for r in sim.state.requests_for("sim-explorer"))}
    count_before = len(sim.state.requests)

    (run_id,) = [p.name for p in (sample_repo / "workspaces").iterdir() if p.is_dir()]
    result = api.resume(run_id, repo=sample_repo, env=run_env())
    assert result.status == "succeeded", result.reason
    after = sim.state.requests[count_before:]
    assert not [r for r in after if _body_key(r.body) in done_before], "a completed call was paid twice"
    assert len(result.explorers) == 4 and all(e.verified == 1 for e in result.explorers)
    for r in after:
        if r.model == "sim-explorer":
            assert not any(q in json.dumps(r.body["messages"][1]) for q in finished_questions)
    assert snapshot(sample_repo) == before
    report = json.loads((Path(result.run_dir) / "report.json").read_text())
    assert {c["role"] for c in report["calls"]} >= {"planner", "explorer", "builder"}


def test_plan_approval_pauses_and_resumes_across_processes(fresh_sim, sample_repo):
    first = cli("run", DEMO_TASK, *_cli_args(fresh_sim, sample_repo, "--approve-plan", "--json"))
    assert first.returncode == 0, first.stderr
    paused = json.loads(first.stdout)
    assert paused["status"] == "awaiting_approval" and paused["plan"]["questions"]
    assert not fresh_sim.state.requests_for("sim-explorer")
    runs = json.loads(cli("runs", "--repo", str(sample_repo), "--json").stdout)
    assert runs[0]["state"] == "awaiting_approval"
    second = cli("resume", paused["run_id"], "--repo", str(sample_repo), "--approve", "--json")
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


def test_ci_bot_example_writes_markdown(sim, sample_repo, tmp_path):
    sim.set_scenario(scenario_with())
    out = tmp_path / "comment.md"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "ci_bot.py"), DEMO_TASK, "--repo", str(sample_repo),
         "--out", str(out), "--roles", str(scenario_path("demo-roles.toml")),
         "--set", f'providers.sim.base_url="{sim.base_url}"'],
        capture_output=True, text=True, env=run_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert text.startswith("## ✅ orchestrate") and "stats.py" in text and "| builder |" in text
