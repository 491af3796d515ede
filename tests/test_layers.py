"""Config layers people expect: packaged < user < repository < --roles < --team < ORCHESTRATE_*
< --set, each value's source shown by --explain; `orchestrate init`; run state git-excluded
while a team's agents and roles.toml are committable; the repository's AGENTS.md quoted."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import cli, run_env

from orchestrator.config.layers import env_layers, explain, resolve
from orchestrator.errors import ConfigError, UsageError
from orchestrator.faces.starter import starter_roles, write_starter
from orchestrator.localize.reporules import repo_rules
from orchestrator.record.database import state_dir
from orchestrator.record.events import parse_event, read_events
from orchestrator.record.eventschema import event_schema
from orchestrator.workspace.worktree import Workspace


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                          capture_output=True, text=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    _git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("# r\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "init")
    return path


def test_each_layer_wins_over_the_one_below_and_explain_names_it(tmp_path, repo):
    user = tmp_path / "user"
    user.mkdir()
    (user / "roles.toml").write_text("[roles.explorer]\nparallel = 2\neffort = \"medium\"\n"
                                     "[roles.builder]\nmax_turns = 11\n")
    (repo / "roles.toml").write_text("[roles.explorer]\nparallel = 3\n"
                                     "[teams.web.roles.explorer]\nmax_turns = 9\n")
    extra = tmp_path / "extra.toml"
    extra.write_text("[roles.explorer]\nparallel = 4\ncontext_fork_at = 0.6\n")
    env = {"ORCHESTRATE_EXPLORER__PARALLEL": "5", "ORCHESTRATE_RUN__MAX_ATTEMPTS": "4",
           "ORCHESTRATE_DATABASE_URL": "postgresql://x/y"}  # no "__": not a role map key
    found = resolve(repo=repo, files=[extra], team="web", env=env, user_dir=user,
                    sets=["explorer.context_fork_at=0.5"])
    explorer = found.roles.roles["explorer"]
    assert (explorer.parallel, explorer.effort, explorer.max_turns) == (5, "medium", 9)
    assert explorer.context_fork_at == 0.5 and found.roles.run.max_attempts == 4
    sources = {k: s for k, _, s in explain(found)}
    assert sources["roles.explorer.parallel"] == "$ORCHESTRATE_EXPLORER__PARALLEL"
    assert sources["roles.explorer.effort"] == str(user / "roles.toml")
    assert sources["roles.builder.max_turns"] == str(user / "roles.toml")
    assert sources["roles.explorer.max_turns"] == f"{repo / 'roles.toml'} [teams.web]"
    assert sources["roles.explorer.context_fork_at"] == "--set explorer.context_fork_at=0.5"
    assert sources["roles.planner.model"] == "packaged roles.toml"
    assert sources["roles.planner.parallel"] == "built-in default"
    without_env = resolve(repo=repo, files=[extra], user_dir=user)
    assert without_env.roles.roles["explorer"].parallel == 4


def test_environment_variables_name_roles_sections_and_dashed_roles():
    layers = env_layers({"ORCHESTRATE_SECURITY_REVIEWER__MODEL": "sol",
                         "ORCHESTRATE_MODELS__SPARK__ID": '"gpt-x"',
                         "ORCHESTRATE_LIVE": "1"}, roles={"security-reviewer"})
    assert [data for _, data, *_ in layers] == [
        {"models": {"spark": {"id": "gpt-x"}}},
        {"roles": {"security-reviewer": {"model": "sol"}}}]
    with pytest.raises(ConfigError, match=r"\$ORCHESTRATE_EXPLORER__: expected"):
        env_layers({"ORCHESTRATE_EXPLORER__": "1"}, roles=())


def test_an_agent_files_model_is_its_roles_default_beneath_every_role_map(repo):
    agents = repo / ".orchestrate" / "agents"
    agents.mkdir(parents=True)
    (agents / "tester.md").write_text("---\nname: tester\nkind: check\nmodel: luna\n"
                                      "effort: low\n---\nYou check the tests.\n")
    steps = 'pipeline.steps=["planner", "builder", "tester"]'
    found = resolve(repo=repo, sets=[steps])
    assert (found.roles.roles["tester"].model, found.roles.roles["tester"].effort) == ("luna", "low")
    assert found.source(("roles", "tester", "model")) == str(agents / "tester.md")
    found = resolve(repo=repo, sets=[steps, 'tester.model="sol"'])
    assert found.roles.roles["tester"].model == "sol"  # the role map wins
    with pytest.raises(ConfigError, match="pipeline role nobody has no \\[roles.nobody\\]"):
        resolve(repo=repo, sets=['pipeline.steps=["planner", "builder", "nobody"]'])


def test_cli_roles_explain_json_and_an_environment_value(repo):
    env = run_env(ORCHESTRATE_BUILDER__EFFORT="high")
    proc = cli("roles", "--repo", str(repo), "--explain", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    rows = {r["key"]: r for r in json.loads(proc.stdout)}
    assert rows["roles.builder.effort"] == {"key": "roles.builder.effort", "value": "high",
                                            "source": "$ORCHESTRATE_BUILDER__EFFORT"}
    bad = run_env(ORCHESTRATE_BUILDER__EFFORT="enormous")
    proc = cli("roles", "--repo", str(repo), env=bad)
    assert proc.returncode == 2 and "$ORCHESTRATE_BUILDER__EFFORT: roles.builder.effort" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_init_writes_a_checked_starter_and_never_prompts_without_a_terminal(repo):
    proc = cli("init", "--repo", str(repo), "--model", "builder=qwen2.5-coder", "--json")
    assert proc.returncode == 0, proc.stderr
    text = (repo / "roles.toml").read_text()
    assert "[models.qwen2-5-coder]" in text and 'id = "qwen2.5-coder"' in text
    found = resolve(repo=repo)
    assert found.roles.models[found.roles.roles["builder"].model].id == "qwen2.5-coder"
    assert found.source(("roles", "builder", "model")) == str(repo / "roles.toml")
    proc = cli("init", "--repo", str(repo))  # no terminal, no flags: no prompt, and no clobber
    assert proc.returncode == 2 and "exists; edit it, or pass --force" in proc.stderr
    with pytest.raises(UsageError, match="not a role"):
        starter_roles(models={"painter": "x"})
    local = starter_roles(provider="local", base_url="http://127.0.0.1:9/v1", models={"all": "m"})
    path = write_starter(repo, local, force=True)
    found = resolve(repo=repo, trust_repo=True)  # a base_url needs trust, as any repo file's
    assert found.roles.providers["local"].base_url == "http://127.0.0.1:9/v1"
    assert path == repo / "roles.toml"


def test_run_state_is_excluded_and_a_teams_agents_are_committable(repo):
    exclude = repo / ".git" / "info" / "exclude"
    exclude.write_text("# mine\n/.orchestrate/\n")  # what older versions wrote
    Workspace.create(repo, "r1")
    lines = exclude.read_text().splitlines()
    assert "# mine" in lines and "/.orchestrate/" not in lines and "/.orchestrate/state/" in lines
    assert state_dir(repo) == repo / ".orchestrate" / "state"
    (repo / ".orchestrate" / "state" / "runs.sqlite").write_bytes(b"")
    agent = repo / ".orchestrate" / "agents" / "tester.md"
    agent.parent.mkdir(parents=True)
    agent.write_text("---\nname: tester\n---\nx\n")
    (repo / "roles.toml").write_text("")
    assert _git(repo, "add", ".orchestrate/agents/tester.md", "roles.toml").returncode == 0
    status = _git(repo, "status", "--porcelain").stdout.splitlines()
    assert sorted(status) == ["A  .orchestrate/agents/tester.md", "A  roles.toml"]


def test_runs_from_before_keep_their_state_where_it_was(repo):
    legacy = repo / ".orchestrate"
    legacy.mkdir()
    (legacy / "runs.sqlite").write_bytes(b"")
    assert state_dir(repo) == legacy
    Workspace.create(repo, "r1")
    assert _git(repo, "check-ignore", "-q", ".orchestrate/runs.sqlite").returncode == 0
    assert _git(repo, "check-ignore", "-q", ".orchestrate/agents/x.md").returncode == 1
    _git(repo, "add", "-f", ".orchestrate/runs.sqlite")  # state that came with the repository
    assert state_dir(repo) == legacy / "state"


def test_repo_rules_are_capped_cited_and_not_repeated():
    files = {"AGENTS.md": ["# Rules", "- run `make test`", *[f"line {i}" for i in range(400)]],
             "CLAUDE.md": ["@AGENTS.md"]}
    quoted = repo_rules(files.get, max_tokens=100)
    assert "--- AGENTS.md, lines 1-" in quoted and "of 402, cut at the cap ---" in quoted
    assert "run `make test`" in quoted and "line 399" not in quoted and "CLAUDE.md" not in quoted
    both = repo_rules({"AGENTS.md": ["a"], "CLAUDE.md": ["b"]}.get, max_tokens=100)
    assert "(AGENTS.md, CLAUDE.md)" in both
    assert repo_rules({}.get, max_tokens=100) == ""
    assert repo_rules(files.get, max_tokens=0) == ""


def test_events_have_one_schema_and_older_logs_still_read(tmp_path):
    schema = event_schema()
    kinds = {branch["properties"]["kind"]["const"] for branch in schema["$defs"].values()
             if "kind" in branch.get("properties", {})}
    assert {"run_started", "call_finished", "fork", "review", "role_lost", "progress"} <= kinds
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join([
        json.dumps({"event": "run_started", "run_id": "r", "repo": "/x", "kind": "explore",
                    "timestamp": "2026-01-01T00:00:00Z", "role": None, "session": None}),
        json.dumps({"event": "warning", "run_id": "r", "kind": "policy_violation",
                    "message": "refused", "role": "builder", "session": "builder-1"}),
        json.dumps({"event": "some_future_kind", "run_id": "r"}),
        '{"kind": "cut sho',
    ]) + "\n")
    started, warned = read_events(log)
    assert (started.kind, started.mode, started.at) == ("run_started", "explore",
                                                        "2026-01-01T00:00:00Z")
    assert (warned.category, warned.session) == ("policy_violation", "builder-1")
    assert parse_event(warned.model_dump(mode="json")) == warned
    # what --events prints: every event, then the result line or the error line
    from orchestrator.results import stream_schema

    proc = cli("schema", "events")
    assert proc.returncode == 0 and json.loads(proc.stdout) == stream_schema()
    assert set(schema["$defs"]) < set(stream_schema()["$defs"])
