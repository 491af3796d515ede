"""Runs after the fact: list, clean, apply, --include-dirty, and an interrupted run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import cli, run_env, scenario_with, sim_roles, snapshot

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK, scenario_path
from orchestrator.sim import ModelBehavior


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=u", "-c", "user.email=u@x", *args], cwd=repo,
                          capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def finished_run(fresh_sim, sample_repo):
    result = api.run(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env())
    assert result.status == "succeeded"
    return result


def test_runs_clean_and_apply(finished_run, sample_repo):
    runs = json.loads(cli("runs", "--repo", str(sample_repo), "--json").stdout)
    assert [(r["run_id"], r["state"], r["has_worktree"]) for r in runs] == [
        (finished_run.run_id, "succeeded", True)]
    proc = cli("clean", "--repo", str(sample_repo))
    assert proc.returncode == 0 and finished_run.run_id in proc.stdout
    assert not (Path(finished_run.run_dir) / "worktree").exists()
    assert _git(sample_repo, "branch", "--list", finished_run.branch)
    assert (Path(finished_run.run_dir) / "report.json").exists()

    proc = cli("apply", finished_run.run_id, "--repo", str(sample_repo))
    assert proc.returncode == 0, proc.stderr
    assert "(ordered[mid - 1] + ordered[mid]) / 2" in (sample_repo / "stats.py").read_text()
    assert _git(sample_repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"
    again = cli("apply", finished_run.run_id, "--repo", str(sample_repo))
    assert again.returncode == 2 and "nothing" in again.stderr


def test_apply_refuses_a_dirty_checkout(finished_run, sample_repo):
    (sample_repo / "README.md").write_text("edited, not committed\n")
    before = snapshot(sample_repo)
    proc = cli("apply", finished_run.run_id, "--repo", str(sample_repo))
    assert proc.returncode == 2 and "uncommitted changes" in proc.stderr
    assert snapshot(sample_repo) == before


def test_apply_refuses_conflicts_and_changes_nothing(finished_run, sample_repo):
    stats = sample_repo / "stats.py"
    stats.write_text(stats.read_text().replace("    return ordered[mid]\n", "    return None\n"))
    _git(sample_repo, "commit", "-qam", "conflicting change")
    before = snapshot(sample_repo)
    proc = cli("apply", finished_run.run_id, "--repo", str(sample_repo))
    assert proc.returncode == 2 and "conflicts in stats.py" in proc.stderr
    assert snapshot(sample_repo) == before


def test_include_dirty_starts_from_uncommitted_work(fresh_sim, sample_repo):
    (sample_repo / "README.md").write_text("# sample\n\nwork in progress\n")
    (sample_repo / "new_notes.md").write_text("untracked\n")
    before = snapshot(sample_repo)
    plain = api.run(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env())
    assert plain.dirty and not plain.included_dirty
    assert "work in progress" not in _git(sample_repo, "show", f"{plain.branch}:README.md")
    dirty = api.run(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env(),
                    include_dirty=True)
    assert dirty.status == "succeeded" and dirty.included_dirty
    subjects = _git(sample_repo, "log", "--format=%s", f"{dirty.base_commit}..{dirty.branch}")
    assert subjects.splitlines()[-1] == "orchestrate: include uncommitted changes"
    assert "work in progress" in _git(sample_repo, "show", f"{dirty.branch}:README.md")
    assert _git(sample_repo, "show", f"{dirty.branch}:new_notes.md") == "untracked"
    assert snapshot(sample_repo) == before


def test_interrupted_run_leaves_a_state_clean_can_handle(fresh_sim, sample_repo):
    sim = fresh_sim
    sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(delay_s=30, script=["..."])}))
    before = snapshot(sample_repo)
    args = ["run", DEMO_TASK, "--repo", str(sample_repo), "--roles",
            str(scenario_path("demo-roles.toml")), "--set", f'providers.sim.base_url="{sim.base_url}"']
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", *args], env=run_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not sim.state.requests_for("sim-builder"):
        time.sleep(0.1)
    assert sim.state.requests_for("sim-builder"), "the run never reached the builder"
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    runs = json.loads(cli("runs", "--repo", str(sample_repo), "--json").stdout)
    assert [r["state"] for r in runs] == ["stopped"]
    assert cli("clean", "--repo", str(sample_repo)).returncode == 0
    assert snapshot(sample_repo) == before
    assert _git(sample_repo, "worktree", "list").count("\n") == 0
