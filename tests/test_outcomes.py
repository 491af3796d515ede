"""No silent success: a role stopped by an error fails the run with one line naming role, model
and provider, or, where the run goes on without it, is a warning with its own exit status (3)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import cli, run_env, scenario_with, sim_roles

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK, scenario_path
from orchestrator.models.errors import ModelRefused
from orchestrator.sim import (
    BEHAVIORS,
    ChatRequestView,
    FaultSpec,
    ModelBehavior,
    Reply,
    ToolCallSpec,
    register_behavior,
)

QUESTIONS = ["Where is `median` defined?", "Where is the `doomed` helper?"]


def _planner(questions: list[str]) -> ModelBehavior:
    plan = {"goal": "fix median", "steps": ["fix stats.median for even lengths"],
            "questions": questions, "acceptance": []}
    return ModelBehavior(script=[Reply(tool_calls=[ToolCallSpec(name="submit", arguments=plan)])])


def _doomed(req: ChatRequestView) -> bool:
    return "doomed" in json.dumps(req.messages[1])


@register_behavior("explorer-404-when-doomed")
def _not_found_when_doomed(req: ChatRequestView) -> Reply:
    if _doomed(req):
        return Reply(error=FaultSpec(status=404, type="invalid_request_error",
                                     code="model_not_found", message="The model does not exist"))
    return BEHAVIORS["explorer-cite"](req)


@register_behavior("explorer-500-when-doomed")
def _outage_when_doomed(req: ChatRequestView) -> Reply:
    if _doomed(req):
        return Reply(error=FaultSpec(status=500, type="server_error", message="simulated outage"))
    return BEHAVIORS["explorer-cite"](req)


def _scenario(explorer: str):
    return scenario_with(**{"sim-planner": _planner(QUESTIONS),
                            "sim-explorer": ModelBehavior(behavior=explorer)})


def _cli_args(sim, repo: Path, *extra: str) -> list[str]:
    return ["--repo", str(repo), "--roles", str(scenario_path("demo-roles.toml")),
            "--set", f'providers.sim.base_url="{sim.base_url}"', *extra]


async def test_404_on_one_explorer_fails_the_run_naming_role_model_provider(fresh_sim, sample_repo):
    fresh_sim.set_scenario(_scenario("explorer-404-when-doomed"))
    try:
        await api.arun(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env())
    except ModelRefused as exc:
        message = str(exc)
    else:
        raise AssertionError("a run whose explorer's model is unknown must not succeed")
    assert "role explorer: model explorer-sim (sim-explorer) at provider sim" in message
    assert "unknown model" in message and "\n" not in message
    assert not fresh_sim.state.requests_for("sim-builder")  # stopped before spending on a build
    (run_dir,) = sample_repo.glob("workspaces/*")
    report = json.loads((run_dir / "report.json").read_text())
    assert report["status"] == "failed" and "role explorer" in report["reason"]
    assert report["exit_code"] == 2


def test_cli_404_on_one_explorer_is_one_line_exit_2_and_listed_failed(sim, sample_repo):
    sim.set_scenario(_scenario("explorer-404-when-doomed"))
    for command in (["run", DEMO_TASK], ["explore", "Where is everything?"]):
        proc = cli(*command, *_cli_args(sim, sample_repo, "--json"))
        assert proc.returncode == 2, proc.stderr
        errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
        assert len(errors) == 1 and "Traceback" not in proc.stderr
        assert "role explorer: model explorer-sim (sim-explorer) at provider sim" in errors[0]
        error = json.loads(proc.stdout)  # --json: the error object, with the run to show
        assert error["kind"] == "error" and error["exit_code"] == 2 and error["run_id"]
        assert error["message"] == errors[0].removeprefix("error: ")
    listed = json.loads(cli("runs", "--repo", str(sample_repo), "--json").stdout)
    assert sorted(r["state"] for r in listed) == ["failed", "failed"]


async def test_an_explorer_lost_to_an_outage_is_a_warning_and_exit_3(fresh_sim, sample_repo):
    fresh_sim.set_scenario(_scenario("explorer-500-when-doomed"))
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env())
    assert result.status == "succeeded", result.reason
    assert result.exit_code == 3
    (loss,) = result.losses
    assert (loss.role, loss.session, loss.code) == ("explorer", "explorer-2", "model_unavailable")
    assert "role explorer" in loss.message and "sim-explorer" in loss.message
    assert loss.message in result.warnings
    report = json.loads((Path(result.run_dir) / "report.json").read_text())
    assert report["exit_code"] == 3 and report["losses"][0]["role"] == "explorer"


def test_cli_lost_explorer_exit_3_in_json_and_text(sim, sample_repo):
    sim.set_scenario(_scenario("explorer-500-when-doomed"))
    proc = cli("run", DEMO_TASK, *_cli_args(sim, sample_repo, "--json"))
    assert proc.returncode == 3, proc.stderr
    data = json.loads(proc.stdout)
    assert data["status"] == "succeeded" and data["exit_code"] == 3
    assert data["losses"][0]["role"] == "explorer" and data["warnings"]
    proc = cli("explore", "Where is everything?", *_cli_args(sim, sample_repo))
    assert proc.returncode == 3, proc.stderr
    assert "warning" in proc.stdout and "simulated outage" in proc.stdout
    assert "! lost:" in proc.stderr  # the live progress says so as it happens


async def test_a_clean_run_is_exit_0_with_no_losses(fresh_sim, sample_repo):
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env())
    assert result.status == "succeeded" and result.exit_code == 0 and result.losses == []
    assert json.loads(result.model_dump_json())["exit_code"] == 0
