"""The simulator plays a hostile builder: every escape is refused or contained."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import subprocess
from pathlib import Path

from conftest import run_env, scenario_with, sim_roles, snapshot

from orchestrator import api
from orchestrator.demo import DEMO_TASK, demo_scenario
from orchestrator.sim import ModelBehavior, Reply, ToolCallSpec

SECRET = "sk-test-SECRET-0123456789abcdef"


def _tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        h.update(str(path.relative_to(root)).encode())
        if path.is_file():
            h.update(path.read_bytes())
    return h.hexdigest()


def _call(name: str, **arguments) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name=name, arguments=arguments)])


def _sleepers(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
        except OSError:
            continue
        if marker in cmd and state != "Z" and "bash -c" not in cmd:
            found.append(int(pid))
    return found


async def test_hostile_builder_is_contained(fresh_sim, sample_repo, tmp_path):
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("do not touch\n")
    os.symlink(sentinel, sample_repo / "escape")
    subprocess.run(["git", "add", "escape"], cwd=sample_repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "link"],
                   cwd=sample_repo, check=True)
    before_repo, before_sentinel = snapshot(sample_repo), _tree_hash(sentinel)
    fix = demo_scenario().models["sim-builder"].script
    marker = f"1000.{os.getpid()}{secrets.randbelow(10**6)}"  # unique: other suites may run too
    hostile = [
        _call("write_file", path="../../etc/passwd", content="root::0:0::/:/bin/sh\n"),
        _call("write_file", path=str(sentinel / "abs.txt"), content="x"),
        _call("write_file", path="escape/pwned.txt", content="x"),
        _call("write_file", path=".git/hooks/pre-commit", content="#!/bin/sh\nexit 1\n"),
        _call("run", command="git push origin main"),
        _call("run", command="yes | head -c 50000000"),
        _call("run", command=f"sleep {marker} & sleep {marker} & wait"),
        _call("run", command="echo KEY=$OPENAI_API_KEY"),
        *fix,
    ]
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(script=hostile)}))
    result = await api.arun(DEMO_TASK, repo=sample_repo,
                            roles=sim_roles(fresh_sim, "run.command_timeout_s=2"),
                            env=run_env(OPENAI_API_KEY=SECRET))
    assert result.status == "succeeded", result.reason
    last = fresh_sim.state.requests_for("sim-builder")[-1].body["messages"]
    results = [m["content"] for m in last if m["role"] == "tool"]
    for refused in results[:4]:
        assert refused.startswith("refused:"), refused
    assert results[4].startswith("refused:") and "push" in results[4]
    assert len(results[5]) < 40_000 and "omitted" in results[5]
    assert "timed out" in results[6]
    assert SECRET not in results[7] and "KEY=" in results[7]
    assert result.policy_violations >= 5
    assert _sleepers(marker) == []
    assert _tree_hash(sentinel) == before_sentinel
    assert snapshot(sample_repo) == before_repo
    assert not Path("/etc/passwd").read_text().startswith("root::0:0::/:/bin/sh")
    everything = json.dumps([r.body for r in fresh_sim.state.requests])
    artefacts = "".join(p.read_text() for p in Path(result.run_dir).glob("*.json*"))
    assert SECRET not in everything and SECRET not in artefacts


async def test_two_runs_at_once_in_one_repo(fresh_sim, sample_repo):
    roles = sim_roles(fresh_sim)
    a, b = await asyncio.gather(
        api.arun(DEMO_TASK, repo=sample_repo, roles=roles, env=run_env()),
        api.arun(DEMO_TASK, repo=sample_repo, roles=roles, env=run_env()),
    )
    assert a.status == b.status == "succeeded"
    assert a.branch != b.branch and a.commit != b.commit
    for r in (a, b):
        out = subprocess.run(["git", "show", f"{r.branch}:stats.py"], cwd=sample_repo,
                             capture_output=True, text=True).stdout
        assert "(ordered[mid - 1] + ordered[mid]) / 2" in out
