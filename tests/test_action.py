"""The GitHub Action (``action.yml``): its run step (``scripts/ci/action.sh``) driven here as the
runner would, against the simulator, with ``GITHUB_OUTPUT`` and ``GITHUB_STEP_SUMMARY`` as temp
files; and the action's YAML, every input and output it refers to checked to exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import SIM_ENV, scenario_with

from orchestrator.faces.demo import DEMO_TASK, scenario_path

ROOT = Path(__file__).resolve().parent.parent
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
SCRIPT = ROOT / "scripts" / "ci" / "action.sh"
KEY = "sk-action-test-6a1f0c"  # the secret's value: it must reach no output, summary or artefact


def _outputs(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text(encoding="utf-8").splitlines())


def _run_step(tmp_path: Path, repo: Path, sim_url: str | None, **inputs: str):
    roles = tmp_path / "ci-roles.toml"
    roles.write_text(scenario_path("demo-roles.toml").read_text(encoding="utf-8").replace(
        "http://127.0.0.1:9/v1", sim_url or "http://127.0.0.1:9/v1"), encoding="utf-8")
    files = {name: tmp_path / name for name in ("outputs", "summary.md")}
    bin_dir = str(Path(sys.executable).parent)  # the orchestrate command of this environment
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")
           and k not in SIM_ENV and not k.startswith(("INPUT_", "GITHUB_"))}
    env.update(PATH=f"{bin_dir}:{env['PATH']}", GITHUB_OUTPUT=str(files["outputs"]),
               GITHUB_STEP_SUMMARY=str(files["summary.md"]), RUNNER_TEMP=str(tmp_path),
               INPUT_TASK=DEMO_TASK, INPUT_ROLES=str(roles), INPUT_REPO=str(repo),
               INPUT_API_KEY_ENV="ORCHESTRATE_SIM_KEY", INPUT_API_KEY=KEY,
               ORCHESTRATE_USERNS_SYSCTL=str(tmp_path / "no-such-knob"))
    env.update(inputs)
    proc = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=repo)
    return proc, _outputs(files["outputs"]) if files["outputs"].exists() else {}, \
        files["summary.md"].read_text(encoding="utf-8") if files["summary.md"].exists() else ""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_the_step_runs_a_task_and_reports_it(sim, sample_repo, tmp_path):
    sim.set_scenario(scenario_with())
    proc, out, summary = _run_step(tmp_path, sample_repo, sim.base_url)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert set(ACTION["outputs"]) <= set(out)  # every output the action declares is written
    assert out["status"] == "succeeded" and out["exit-code"] == "0"
    assert out["branch"] == f"orchestrate/{out['run-id']}"
    assert _git(sample_repo, "rev-parse", out["branch"]) == out["commit"]
    patch = Path(out["patch"])
    assert patch.is_file() and "stats.py" in patch.read_text(encoding="utf-8")
    assert Path(out["report"]).is_file() and Path(out["events"]).is_file()
    assert "**succeeded** (exit 0)" in summary and out["run-id"] in summary
    assert "| role | models |" in summary and "| reviewer |" in summary
    for text in (proc.stdout, proc.stderr, summary, patch.read_text(encoding="utf-8"),
                 Path(out["report"]).read_text(encoding="utf-8"),
                 Path(out["events"]).read_text(encoding="utf-8"), repr(out)):
        assert KEY not in text
    assert not (tmp_path / "comment-posted").exists()  # comment-on-pr is off by default


def test_a_failure_still_reports_and_comments_on_the_pr(sim, sample_repo, tmp_path):
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    gh = fake_bin / "gh"  # GitHub's CLI is the network edge: this one keeps what it was given
    gh.write_text(f'#!/bin/sh\nprintf "%s " "$@" > {tmp_path}/comment-posted\n'
                  f'cp "$5" {tmp_path}/comment-body\n', encoding="utf-8")
    gh.chmod(0o755)
    event = tmp_path / "event.json"
    event.write_text('{"pull_request": {"number": 42}}', encoding="utf-8")
    proc, out, summary = _run_step(
        tmp_path, sample_repo, None, INPUT_API_KEY="", INPUT_COMMENT_ON_PR="true",
        GITHUB_EVENT_PATH=str(event), PATH=f"{fake_bin}:{Path(sys.executable).parent}:"
        f"{os.environ['PATH']}")
    assert proc.returncode == 2, proc.stderr[-2000:]  # the key is missing: exit 2, said so
    assert out["status"] == "error" and out["error-code"] == "missing_credentials"
    assert out["exit-code"] == "2" and out["run-id"] == "" and out["patch"] == ""
    assert "could not run (exit 2, `missing_credentials`)" in summary
    assert "ORCHESTRATE_SIM_KEY" in summary
    posted = (tmp_path / "comment-posted").read_text(encoding="utf-8").split()
    assert posted[:3] == ["pr", "comment", "42"]
    assert (tmp_path / "comment-body").read_text(encoding="utf-8") == summary


@pytest.mark.parametrize("sudo_works", [True, False], ids=["sudo", "no-sudo"])
def test_the_apparmor_userns_restriction_is_lifted_or_explained(sample_repo, tmp_path,
                                                                  sudo_works):
    knob = tmp_path / "apparmor_restrict_unprivileged_userns"
    knob.write_text("1\n", encoding="utf-8")
    sudo = tmp_path / "fake-sudo"
    sudo.write_text(f'#!/bin/sh\nprintf "%s " "$@" > {tmp_path}/sudo-args\n'
                    f"{'exit 0' if sudo_works else 'exit 1'}\n", encoding="utf-8")
    sudo.chmod(0o755)
    proc, out, _ = _run_step(tmp_path, sample_repo, None, INPUT_API_KEY="",
                             ORCHESTRATE_USERNS_SYSCTL=str(knob), ORCHESTRATE_SUDO=str(sudo))
    assert proc.returncode == 2 and out["error-code"] == "missing_credentials"
    asked = (tmp_path / "sudo-args").read_text(encoding="utf-8").split()
    assert asked == ["-n", "sysctl", "-w", "kernel.apparmor_restrict_unprivileged_userns=0"]
    if sudo_works:
        assert "set kernel.apparmor_restrict_unprivileged_userns=0" in proc.stdout
    else:
        assert "::warning::" in proc.stdout
        assert "sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0" in proc.stdout


def test_the_action_refers_only_to_what_it_declares():
    steps = ACTION["runs"]["steps"]
    text = (ROOT / "action.yml").read_text(encoding="utf-8")
    assert ACTION["runs"]["using"] == "composite"
    used_inputs = set(re.findall(r"inputs\.([a-z0-9-]+)", text))
    assert used_inputs and used_inputs <= set(ACTION["inputs"]), used_inputs - set(ACTION["inputs"])
    assert set(ACTION["inputs"]) <= used_inputs, "an input nothing reads"
    ids = {s["id"] for s in steps if "id" in s}
    script = SCRIPT.read_text(encoding="utf-8") + (SCRIPT.parent / "summarize.py").read_text(
        encoding="utf-8")
    for step, name in re.findall(r"steps\.([a-z0-9-]+)\.outputs\.([a-z0-9-]+)", text):
        assert step in ids, step
        assert f'"{name}"' in script, f"the run step never writes output {name}"
    run = next(s for s in steps if s.get("id") == "run")
    given = set(run["env"])
    read = set(re.findall(r"\b(INPUT_[A-Z_]+)", SCRIPT.read_text(encoding="utf-8")))
    assert read - {"INPUT_PR_NUMBER"} <= given, read - given  # PR number: from the event
    assert "scripts/ci/action.sh" in run["run"] and SCRIPT.is_file()
    uses = [s["uses"] for s in steps if "uses" in s]
    assert any(u.startswith("actions/upload-artifact@") for u in uses)
    assert all(s.get("shell") == "bash" for s in steps if "run" in s)


def test_the_documented_workflow_uses_the_action_as_declared():
    workflow = yaml.safe_load((ROOT / "examples" / "orchestrate-workflow.yml").read_text(
        encoding="utf-8"))
    steps = workflow["jobs"]["orchestrate"]["steps"]
    (ours,) = [s for s in steps if "orchestrate@" in s.get("uses", "")]
    assert set(ours["with"]) <= set(ACTION["inputs"])
    required = {name for name, spec in ACTION["inputs"].items() if spec.get("required")}
    assert required <= set(ours["with"])
    used = re.findall(r"steps\.orchestrate\.outputs\.([a-z0-9-]+)", yaml.safe_dump(workflow))
    assert used and set(used) <= set(ACTION["outputs"])
