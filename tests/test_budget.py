"""Run budgets stop a run cleanly in a resumable state; `orchestrate quota` shows the ledger."""

from __future__ import annotations

import json

from conftest import cli, run_env, sim_roles, snapshot

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK, scenario_path


def test_token_budget_stops_cleanly_and_resume_finishes(fresh_sim, sample_repo, tmp_path):
    before = snapshot(sample_repo)
    quota = tmp_path / "quota.sqlite"
    stopped = api.run(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env(),
                      max_tokens=2500, quota_path=quota)
    assert stopped.status == "stopped" and stopped.exit_code == 1
    assert "run budget reached" in stopped.reason and "--max-tokens 2,500" in stopped.reason
    assert "orchestrate resume" in stopped.reason
    assert not fresh_sim.state.requests_for("sim-builder")
    paid = len(fresh_sim.state.requests)
    done = api.resume(stopped.run_id, repo=sample_repo, env=run_env(), quota_path=quota)
    assert done.status == "succeeded", done.reason
    again = [r for r in fresh_sim.state.requests[paid:] if r.model == "sim-planner"]
    assert not again  # the plan was finished before the stop: not redone
    assert done.explorers and not any(e.error for e in done.explorers)
    assert snapshot(sample_repo) == before


def test_cli_budget_and_quota(sim, sample_repo, tmp_path):
    sim.state.clear()
    env = run_env(XDG_STATE_HOME=str(tmp_path / "state"))
    args = ["--repo", str(sample_repo), "--roles", str(scenario_path("demo-roles.toml")),
            "--set", f'providers.sim.base_url="{sim.base_url}"']
    proc = cli("run", DEMO_TASK, *args, "--max-usd", "0.001", env=env)
    assert proc.returncode == 1 and "run budget reached" in proc.stdout
    rows = json.loads(cli("quota", *args, "--json", env=env).stdout)["usage"]
    used = {r["model"]: r for r in rows if r["tokens"]}
    assert "sim/sim-planner" in used and used["sim/sim-planner"]["usd"] > 0
