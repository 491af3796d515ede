"""Every claim's verdict and every explorer model's drop rates, where people look: the run
summary, `orchestrate show`, `orchestrate runs` and `orchestrate quota` (history per model)."""

from __future__ import annotations

import json

import pytest
from conftest import cli, run_env, scenario_with, sim_roles

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK, scenario_path
from orchestrator.sim import ModelBehavior, Reply, ToolCallSpec

QUESTIONS = ["Where is `def median` defined?", "Which test covers `median([4`?"]


@pytest.fixture
def fabricated_run(fresh_sim, sample_repo, tmp_path):
    plan = {"goal": "fix median", "steps": ["fix it"], "questions": QUESTIONS,
            "files_to_touch": ["stats.py"], "acceptance": ["python -m unittest discover -s tests"]}
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": ModelBehavior(script=[Reply(tool_calls=[
            ToolCallSpec(name="submit", arguments=plan)])]),
        "sim-explorer": ModelBehavior(behavior="explorer-fabricate"),
    }))
    env = run_env(XDG_STATE_HOME=str(tmp_path / "state"))
    result = api.run(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=env)
    assert result.status == "succeeded", result.reason
    return result, env


def test_verdicts_and_drop_rates_reach_every_view(fabricated_run, sample_repo):
    result, env = fabricated_run
    code, test = result.explorers
    assert [v.status for v in code.verdicts] == ["dropped", "verified"]
    assert [v.status for v in test.verdicts] == ["dropped", "adds_nothing"]
    stats = result.claims_by_model["sim-explorer"]
    assert (stats.submitted, stats.verified, stats.adds_nothing, stats.path) == (4, 1, 1, 2)

    shown = cli("show", result.run_id, "--repo", str(sample_repo), env=env).stdout
    assert "✘ claim 1: def median is defined in src/imaginary.py" in shown
    assert "dropped (path): no such file: src/imaginary.py" in shown
    assert "≡ claim 2" in shown and "adds nothing: only restates tests/test_stats.py" in shown
    assert "explorer claims per model" in shown and "sim-explorer" in shown

    listed = cli("runs", "--repo", str(sample_repo), env=env).stdout
    assert "1/4 sim-explorer" in listed and "explorer claims per model over these 1 run(s)" in listed

    args = ["--repo", str(sample_repo), "--roles", str(scenario_path("demo-roles.toml"))]
    quota = json.loads(cli("quota", *args, "--json", env=env).stdout)
    (row,) = [c for c in quota["claims"] if c["model"] == "sim-explorer"]
    assert (row["runs"], row["explorers"]) == (1, 2)
    assert {k: v for k, v in row["counts"].items() if v} == {
        "submitted": 4, "verified": 1, "adds_nothing": 1, "dropped": 2, "path": 2}
    bad = cli("quota", *args, "--days", "0", env=env)
    assert bad.returncode == 2 and "--days must be at least 1" in bad.stderr


def test_the_run_summary_and_quota_tables_name_the_model_and_its_drops(fabricated_run):
    from datetime import UTC, datetime

    from rich.console import Console

    from orchestrator.faces.render import print_quota, print_run_summary
    from orchestrator.models.quota_pg import build_ledger

    result, env = fabricated_run
    console = Console(record=True, width=200)
    print_run_summary(console, result)
    ledger = build_ledger(None, env)
    try:
        print_quota(console, ledger.rows(None), ledger.claim_rows(datetime.now(UTC)))
    finally:
        ledger.close()
    text = console.export_text()
    assert "explorers (claims submitted / verified / adding nothing / dropped)" in text
    assert "explorer claims per model" in text and "sim-explorer" in text
    assert "explorer claims per model since" in text and "2 50%" in text  # bad paths


async def test_a_ledger_that_refuses_the_counts_costs_a_warning_not_the_answer(
        fresh_sim, sample_repo, tmp_path):
    import sqlite3

    from orchestrator.models.quota import default_ledger_path

    env = run_env(XDG_STATE_HOME=str(tmp_path / "state"))
    path = default_ledger_path(env)
    path.parent.mkdir(parents=True)
    db = sqlite3.connect(path)  # a column we do not know and cannot fill: every insert fails
    db.execute("CREATE TABLE claims (run_id TEXT, session TEXT, day TEXT, model TEXT, "
               "alien TEXT NOT NULL, PRIMARY KEY (run_id, session))")
    db.commit()
    db.close()
    events = []
    result = await api.aexplore("Where is `def median` defined?", repo=sample_repo,
                                roles=sim_roles(fresh_sim), env=env, listeners=[events.append])
    assert result.explorers[0].verified == 1
    warnings = [e.data["message"] for e in events if e.kind == "warning"]
    assert any("not recorded in the quota ledger" in w for w in warnings), warnings
