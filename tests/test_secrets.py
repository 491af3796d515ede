"""Secret files stay home, judged by what the simulator received: a git-ignored ``.env``, a
committed private key and a key-shaped value in a tracked file never reach a model, whether an
explorer, the planner or the builder (its tools or its shell) asks for them."""

from __future__ import annotations

import json
import secrets
import subprocess
from pathlib import Path

import pytest
from conftest import run_env, scenario_with, sim_roles
from test_hostile import call, sh

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK, demo_scenario
from orchestrator.sim import ModelBehavior
from orchestrator.tools.explorer import explorer_tools
from orchestrator.tools.secretfiles import SecretFiles, mask

MARK = "mark" + secrets.token_hex(12)


def _plant(repo: Path) -> None:
    (repo / ".gitignore").write_text(".env\nlocal_settings.py\n")
    (repo / ".env").write_text(f"DATABASE_PASSWORD={MARK}\n")
    (repo / "local_settings.py").write_text(f"PASSWORD = '{MARK}'\n")  # ignored, not secret-named
    (repo / "deploy.pem").write_text(
        f"-----BEGIN PRIVATE KEY-----\n{MARK}\n-----END PRIVATE KEY-----\n")
    (repo / "settings.py").write_text(f'API_KEY = "sk-live-{MARK}"\nDEBUG = False\n')
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "add", ".gitignore", "deploy.pem", "settings.py"], cwd=repo,
                   check=True)
    subprocess.run(["git", *ident, "commit", "-qm", "config"], cwd=repo, check=True)


_PEEK = [call("read", path=".env"), call("read", path="deploy.pem"),
         call("read", path="local_settings.py"), call("search", pattern="PASSWORD"),
         call("read", path="settings.py"), call("search", pattern="mark[0-9a-f]{24}"),
         call("search", pattern="DATABASE_PASSWORD", context=2),
         call("search", pattern="PRIVATE", glob="*.pem"), call("list", glob=".env*"),
         call("list")]


def _sent(sim) -> str:
    return json.dumps([r.body for r in sim.state.requests])


async def test_explorers_do_not_send_secret_files(fresh_sim, sample_repo: Path) -> None:
    _plant(sample_repo)
    explorer = ModelBehavior(first=_PEEK, behavior="explorer-cite")
    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": explorer}))
    roles = sim_roles(fresh_sim, "run.explore_candidates=0")
    await api.aexplore("Where is `median` defined?", repo=sample_repo, roles=roles,
                       env=run_env(), split=False)
    sent = _sent(fresh_sim)
    assert fresh_sim.state.requests_for("sim-explorer")
    assert "settings.py" in sent and "DEBUG = False" in sent  # the file was read, its key not
    assert MARK not in sent


async def test_the_planner_and_builder_do_not_send_secret_files(fresh_sim,
                                                                sample_repo: Path) -> None:
    _plant(sample_repo)
    planner = demo_scenario().models["sim-planner"].script or []
    builder = demo_scenario().models["sim-builder"].script or []
    shell = [sh("cat deploy.pem settings.py; cat .env; git log -p -3 | head -50; env")]
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": ModelBehavior(script=[*_PEEK, *planner]),
        "sim-builder": ModelBehavior(script=[*_PEEK, *shell, *builder])}))
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim),
                            env=run_env())
    assert result.status == "succeeded", result.reason
    sent = _sent(fresh_sim)
    assert "DEBUG = False" in sent and MARK not in sent
    artefacts = "".join(p.read_text(errors="replace") for p in Path(result.run_dir).rglob("*")
                        if p.is_file() and p.suffix in (".json", ".jsonl", ".txt", ".md"))
    assert MARK not in artefacts


def test_a_role_map_may_allow_a_secret_file(tmp_path: Path) -> None:
    (tmp_path / "dev.env").write_text("LOCAL=1\n")
    denied = {t.name: t for t in explorer_tools(tmp_path)}
    allowed = {t.name: t for t in explorer_tools(
        tmp_path, secrets=SecretFiles(allow=("dev.env",)))}
    args = denied["read"].args(path="dev.env")
    with pytest.raises(Exception, match="secret_allow"):
        denied["read"].fn(args)  # type: ignore[call-arg]
    assert "LOCAL=1" in str(allowed["read"].fn(args))  # type: ignore[call-arg]


@pytest.mark.parametrize("key", [
    "sk-proj-" + "a1" * 20, "AKIA" + "ABCDEFGHIJKLMNOP", "ghp_" + "x" * 36,
    "xoxb-1234567890-abcdef", "-----BEGIN RSA PRIVATE KEY-----\nMIIEabc\n-----END RSA PRIVATE KEY-----",
])
def test_key_formats_are_masked(key: str) -> None:
    shown = mask(f"before {key} after")
    assert key not in shown and shown.startswith("before ") and shown.endswith(" after")


async def test_a_key_the_tests_print_is_masked_in_the_prompts(fresh_sim, sample_repo: Path) -> None:
    # a failing test that prints a key: the preflight's localisation and verify's feedback
    (sample_repo / "tests" / "test_env.py").write_text(
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_key(self):\n"
        f"        self.assertEqual('sk-live-{MARK}', '')\n")
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "add", "-A"], cwd=sample_repo, check=True)
    subprocess.run(["git", *ident, "commit", "-qm", "env test"], cwd=sample_repo, check=True)
    result = await api.arun(DEMO_TASK, repo=sample_repo,
                            roles=sim_roles(fresh_sim, "run.max_attempts=1"), env=run_env())
    assert result.status == "failed"
    sent = _sent(fresh_sim)
    i = sent.find(MARK)
    assert "test_key" in sent and MARK not in sent, sent[max(0, i - 300):i + 100]
