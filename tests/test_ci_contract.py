"""The CI contract: with ``--json`` or ``--events`` every exit prints exactly one JSON object on
stdout that ``orchestrate schema`` describes (a result, or ``{"kind": "error", ...}`` with the
run id when a run was opened), and the exit statuses tell the outcomes apart (README: exit
codes). Each failure is driven through the real ``orchestrate`` process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from conftest import cli, run_env, scenario_with

from orchestrator.faces.demo import DEMO_TASK, scenario_path
from orchestrator.sim import FaultSpec, ModelBehavior, Reply

DEMO_ROLES = str(scenario_path("demo-roles.toml"))  # its provider is 127.0.0.1:9: nobody there


@pytest.fixture(scope="module")
def schemas() -> dict[str, dict]:
    found = {}
    for what in ("events", "result", "error"):
        proc = cli("schema", what)
        assert proc.returncode == 0, proc.stderr
        found[what] = json.loads(proc.stdout)
        jsonschema.Draft202012Validator.check_schema(found[what])
    return found


def _sim_args(sim, repo: Path, *extra: str) -> list[str]:
    return ["--repo", str(repo), "--roles", DEMO_ROLES,
            "--set", f'providers.sim.base_url="{sim.base_url}"', *extra]


def _validate(instance: object, schema: dict) -> None:
    """``jsonschema.validate`` without checking the schema itself again each time (the
    ``schemas`` fixture did, once: ~0.5 s for the events' schema, 40 lines a run)."""
    jsonschema.Draft202012Validator(schema).validate(instance)


def _stdout_objects(proc_stdout: str, schemas: dict, *, events: bool) -> list[dict]:
    """The objects on stdout, each checked against the schema of what it is."""
    if not events:  # --json: the whole of stdout is one object
        one = json.loads(proc_stdout)
        _validate(one, schemas["error" if one.get("kind") == "error" else "result"])
        return [one]
    lines = [json.loads(line) for line in proc_stdout.splitlines()]
    for line in lines:
        _validate(line, schemas["events"])
    return lines


def _ends_with_one(lines: list[dict], kind: str) -> dict:
    finals = [x for x in lines if x["kind"] in ("result", "error")]
    assert len(finals) == 1 and lines[-1] is finals[0], [x["kind"] for x in lines]
    assert finals[0]["kind"] == kind
    return finals[0]


FAILURES = {  # name: (command line, expected exit code, expected error code)
    "missing key": (["run", "fix it"], 2, "missing_credentials"),
    "bad repository": (["run", "fix it", "--repo", "/nonexistent/repo"], 2, "usage"),
    "bad role map": (["run", "fix it", "--roles", "/nonexistent/roles.toml"], 2, "config"),
    "bad --set": (["run", "fix it", "--set", "builder.nonsense=1"], 2, "config"),
    "unknown option": (["run", "fix it", "--max-attempts", "2"], 2, "usage"),
    "missing task": (["run"], 2, "usage"),
    "unknown run": (["resume", "nosuch-run"], 2, "usage"),
}


@pytest.mark.parametrize("mode", ["--json", "--events"])
@pytest.mark.parametrize("name", list(FAILURES))
def test_every_failure_prints_one_error_object(name, mode, schemas, sample_repo):
    args, exit_code, code = FAILURES[name]
    env = {k: v for k, v in run_env().items() if k != "OPENAI_API_KEY"}
    proc = cli(*args, mode, env=env, cwd=sample_repo)
    assert proc.returncode == exit_code, (proc.stdout, proc.stderr)
    error = _ends_with_one(_stdout_objects(proc.stdout, schemas, events=mode == "--events"),
                           "error")
    assert error["code"] == code and error["exit_code"] == exit_code
    assert error["message"] and "\n" not in error["message"]
    if name == "unknown run":
        assert error["run_id"] == "nosuch-run"
    assert "Traceback" not in proc.stderr


def test_explore_and_the_other_json_commands_fail_as_one_object(schemas, sample_repo):
    env = {k: v for k, v in run_env().items() if k != "OPENAI_API_KEY"}
    for args, code in ((["explore", "Where is median?"], "missing_credentials"),
                       (["show", "nosuch-run"], "usage"), (["apply", "nosuch-run"], "usage"),
                       (["jobs"], "usage")):
        proc = cli(*args, "--json", env={**env, "ORCHESTRATE_DATABASE_URL": ""},
                   cwd=sample_repo)
        assert proc.returncode == 2, (args, proc.stderr)
        (error,) = _stdout_objects(proc.stdout, schemas, events=False)
        assert error["kind"] == "error" and error["code"] == code, (args, error)


@pytest.mark.parametrize("mode", ["--json", "--events"])
def test_an_unreachable_model_names_the_run_to_resume(mode, schemas, sample_repo):
    proc = cli("run", DEMO_TASK, "--repo", str(sample_repo), "--roles", DEMO_ROLES, mode)
    assert proc.returncode == 1, proc.stderr
    lines = _stdout_objects(proc.stdout, schemas, events=mode == "--events")
    error = _ends_with_one(lines, "error")
    assert error["code"] == "model_unavailable" and error["exit_code"] == 1
    run_dir = sample_repo / "workspaces" / error["run_id"]
    assert (run_dir / "events.jsonl").is_file()  # the id is the run's, resumable and showable
    shown = cli("show", error["run_id"], "--repo", str(sample_repo), "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["run_id"] == error["run_id"]


def test_interrupted_run_prints_an_error_object_with_its_run_id(sim, sample_repo, schemas):
    slow = ModelBehavior(script=[Reply(content="thinking", delay_s=30.0)])
    sim.set_scenario(scenario_with(**{"sim-planner": slow}))
    sim.state.clear()
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", DEMO_TASK, "--events",
                             *_sim_args(sim, sample_repo)], env=run_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not sim.state.requests_for("sim-planner"):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    lines = _stdout_objects(stdout, schemas, events=True)
    error = _ends_with_one(lines, "error")
    assert error["code"] == "interrupted" and error["run_id"] == lines[0]["run_id"]
    assert lines[0]["kind"] == "run_started"


def test_a_run_streams_only_lines_the_schema_knows(sim, sample_repo, schemas):
    sim.set_scenario(scenario_with())
    proc = cli("run", DEMO_TASK, "--events", *_sim_args(sim, sample_repo))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = _stdout_objects(proc.stdout, schemas, events=True)
    result = _ends_with_one(lines, "result")["result"]
    assert result["status"] == "succeeded" and result["exit_code"] == 0
    _validate(result, schemas["result"])


def test_a_plan_awaiting_approval_is_not_a_success(sim, sample_repo, schemas):
    sim.set_scenario(scenario_with())
    proc = cli("run", DEMO_TASK, "--approve-plan", "--events", *_sim_args(sim, sample_repo))
    assert proc.returncode == 4, proc.stderr[-2000:]
    result = _ends_with_one(_stdout_objects(proc.stdout, schemas, events=True), "result")
    assert result["result"]["status"] == "awaiting_approval"
    assert result["result"]["exit_code"] == 4


def test_bench_with_no_server_says_how_to_start_one(tmp_path, schemas):
    proc = cli("bench", "builtin", "--roles", DEMO_ROLES, "--task", "sh-count-lines",
               "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == 1
    assert "127.0.0.1:9" in proc.stderr and "scripts/live-model/start.sh" in proc.stderr
    assert not (tmp_path / "o" / "runs.csv").exists()  # stopped before any run
    machine = cli("bench", "builtin", "--roles", DEMO_ROLES, "--task", "sh-count-lines",
                  "--out", str(tmp_path / "o"), "--json", cwd=tmp_path)
    assert machine.returncode == 1
    error = _stdout_objects(machine.stdout, schemas, events=False)[0]
    assert error["code"] == "model_unavailable"


def test_bench_whose_runs_err_exits_non_zero(sim, tmp_path):
    refused = Reply(error=FaultSpec(status=401, type="invalid_request_error",
                                    code="invalid_api_key", message="Incorrect API key"))
    sim.set_scenario(scenario_with(**{"sim-planner": ModelBehavior(script=[refused])}))
    sim.state.clear()
    roles = tmp_path / "roles.toml"
    roles.write_text(Path(DEMO_ROLES).read_text(encoding="utf-8").replace(
        "http://127.0.0.1:9/v1", sim.base_url), encoding="utf-8")
    no_key = {k: v for k, v in run_env().items() if k != "ORCHESTRATE_SIM_KEY"}
    proc = cli("bench", "builtin", "--roles", str(roles), "--task", "sh-count-lines", "--out",
               str(tmp_path / "o"), "--json", cwd=tmp_path, env=no_key)
    assert proc.returncode == 2 and "export ORCHESTRATE_SIM_KEY=" in proc.stderr
    assert json.loads(proc.stdout)["code"] == "missing_credentials"  # once, before any run
    assert not sim.state.requests
    # --warm: the cache eviction's one request would take the planner's scripted reply
    proc = cli("bench", "builtin", "--roles", str(roles), "--task", "sh-count-lines", "--out",
               str(tmp_path / "o"), "--json", "--warm", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert [r["outcome"] for r in report["records"]] == ["error"]
