"""Roles are data: agent files in our format and Claude Code's, the registry's layers, the
pipeline they make, and one clear line for every file that does not fit."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import cli

from orchestrator.config.definitions import Registry, load_registry, parse_agent
from orchestrator.config.layers import load_roles
from orchestrator.config.pipeline import Judge, pipeline_of
from orchestrator.engine.graph import build_graph, judge_routes
from orchestrator.errors import ConfigError
from orchestrator.state import Review, RunState, VerifyResult, submit_model

CLAUDE_AGENT = """\
---
name: security-auditor
description: Looks for injection and leaked secrets in the change.
tools: Read, Grep, Glob, Bash
model: sonnet
color: red
maxTurns: 7
---
You are a security auditor.
"""


def _agent(repo: Path, folder: str, name: str, text: str) -> Path:
    path = repo / folder / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_claude_code_agent_reads_as_it_is():
    agent = parse_agent(CLAUDE_AGENT, ".claude/agents/security-auditor.md", format="claude")
    assert (agent.role, agent.kind, submit_model(agent).__name__) == ("security-auditor", "check", "Review")
    assert agent.tools == ("read", "search", "list", "run")  # names, not characters
    assert agent.model == "sonnet" and agent.max_turns == 7
    assert agent.system == "You are a security auditor."
    assert "request_changes" in agent.render_task(task="t", verify="passed", plan="p",
                                                   digest="d", diff="x", role="r", repo_rules="")


def test_our_format_is_a_superset():
    text = ("---\nname: tester\nkind: check\ndescription: d\ntools: [read, search]\n"
            "disallowedTools: Grep\nmodel: inherit\neffort: high\nmax_turns: 5\n"
            "task: 'Look at $diff for $task'\n---\nYou write tests.\n")
    agent = parse_agent(text, "tester.md")
    assert agent.tools == ("read",) and agent.model is None
    assert agent.defaults() == {"effort": "high", "max_turns": 5}
    assert agent.render_task(task="T", diff="D", verify="v") == "Look at D for T"
    with pytest.raises(ConfigError, match=r"tester.md \(task\): the template needs \$diff"):
        agent.render_task(task="T")


@pytest.mark.parametrize(("front", "needle"), [
    ("tools: Read, WebFetch, TodoWrite", "tools WebFetch, TodoWrite: not available in orchestrate"),
    ("tools: Read, Edit", "tool replace is not for a check role (it edits files); give it kind: build"),
    ("hooks: {}", "hooks: orchestrate cannot run Claude Code hooks"),
    ("mcpServers: [x]", "mcpServers: orchestrate cannot run Claude Code MCP servers"),
    ("temperature: 0", "unknown front matter key temperature"),
    ("kind: judge", "kind 'judge' is not one of plan, explore, build, review, check, summarize"),
    ("submit: Plan", "a check role submits Review, not 'Plan'"),
    ("maxTurns: 0", "max_turns must be a whole number from 1 to 500"),
])
def test_a_file_that_does_not_fit_is_one_line_naming_it(front, needle):
    text = f"---\nname: auditor\ndescription: d\n{front}\n---\nbody\n"
    with pytest.raises(ConfigError) as info:
        parse_agent(text, ".claude/agents/auditor.md")
    assert needle in str(info.value) and ".claude/agents/auditor.md" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("name", "needle"), [
    ("review", "is taken by a step of the graph"),
    ("Security Reviewer", "is not a role name"),
])
def test_role_names(name, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_agent(f"---\nname: {name}\n---\nx\n", "a.md")


def test_registry_layers_packaged_user_claude_then_ours(tmp_path):
    repo, user = tmp_path / "repo", tmp_path / "user"
    _agent(user, "agents", "reviewer", "---\nname: reviewer\n---\nthe user's reviewer\n")
    _agent(repo, ".claude/agents", "security-auditor", CLAUDE_AGENT)
    _agent(repo, ".claude/agents", "planner", "---\nname: planner\n---\nClaude's planner\n")
    _agent(repo, ".claude/agents", "fetcher", "---\nname: fetcher\ntools: WebFetch\n---\nx\n")
    _agent(repo, ".orchestrate/agents", "builder", "---\nname: builder\n---\nour builder\n")
    registry = load_registry(repo, user_dir=user)
    assert registry["reviewer"].system == "the user's reviewer"
    assert registry["builder"].system == "our builder" and registry["builder"].kind == "build"
    assert registry["security-auditor"].format == "claude"
    assert registry["planner"].source == "agents/planner.md"  # .claude/ adds, never replaces
    assert any("planner.md: role planner is defined by agents/planner.md" in n
               for n in registry.notes)
    assert "fetcher" not in registry and "WebFetch" in registry.unusable["fetcher"]
    with pytest.raises(ConfigError, match="WebFetch"):
        registry["fetcher"]  # noqa: B018 (fails only once something asks for it)
    with pytest.raises(ConfigError, match="no agent definition for role 'nobody'"):
        registry["nobody"]  # noqa: B018


def test_snapshot_rebuilds_the_same_definitions(tmp_path):
    _agent(tmp_path, ".claude/agents", "security-auditor", CLAUDE_AGENT)
    registry = load_registry(tmp_path)
    again = Registry.from_snapshot(registry.snapshot())
    assert set(again) == set(registry)
    assert again["security-auditor"] == registry["security-auditor"]


def _pipeline(*steps: str, repo: Path | None = None, sets: tuple[str, ...] = ()):
    listed = ", ".join(f'"{s}"' for s in steps)
    roles = load_roles(repo=repo, sets=[f"pipeline.steps=[{listed}]", *sets])
    return pipeline_of(roles, load_registry(repo))


@pytest.mark.parametrize(("steps", "needle"), [
    (("explorer", "planner", "builder"), "the first step must be a plan role"),
    (("planner", "builder", "builder"), "a role appears twice"),
    (("planner", "reviewer", "builder"), "reviewer (kind review) cannot come there"),
    (("planner", "explorer"), "a run needs a build role"),
    (("planner", "builder", "summarizer"), "summarizer (kind summarize) cannot come there"),
])
def test_pipelines_that_cannot_run_are_refused(steps, needle):
    with pytest.raises(ConfigError) as info:
        _pipeline(*steps)
    assert needle in str(info.value)


def test_a_check_role_from_a_claude_file_joins_the_pipeline(tmp_path):
    _agent(tmp_path, ".claude/agents", "security-auditor", CLAUDE_AGENT)
    with pytest.raises(ConfigError, match="security-auditor.md: roles.security-auditor.model: "
                       "unknown model alias 'sonnet'.*a model: in an agent file is a default"):
        _pipeline("planner", "builder", "security-auditor", "reviewer", repo=tmp_path)
    pipeline = _pipeline("planner", "builder", "security-auditor", "reviewer", repo=tmp_path,
                         sets=('security-auditor.model="sol"',))
    assert pipeline.explore is None
    assert pipeline.judges == (Judge("security-auditor", "check"), Judge("reviewer", "review"))
    nodes = set(build_graph(pipeline).compile().get_graph().nodes)
    assert {"plan", "build", "verify", "security-auditor", "review", "report"} <= nodes
    assert "explore" not in nodes and "gather" not in nodes


def test_judges_run_in_order_and_send_the_build_back():
    judges = (Judge("tester", "check"), Judge("reviewer", "review"))
    after_verify, (after_tester, after_reviewer) = judge_routes(judges)
    passed = RunState(task="t", verify=VerifyResult(passed=True), max_reviews=1, max_attempts=3,
                      attempts=1)
    assert after_verify(passed) == "tester"
    asked = passed.model_copy(update={"checks": {"tester": Review(verdict="request_changes")},
                                      "check_rounds": {"tester": 1}})
    assert after_tester(asked) == "build"
    assert after_verify(asked) == "review"  # the tester has used its round
    assert after_tester(asked.model_copy(update={"attempts": 3})) == "report"
    fine = passed.model_copy(update={"checks": {"tester": Review(verdict="approve")},
                                     "check_rounds": {"tester": 1}})
    assert after_tester(fine) == "review"
    assert after_reviewer(fine.model_copy(update={"reviews": 1,
                                                  "review": Review(verdict="approve")})) == "report"


def test_cli_roles_lists_kinds_files_and_unusable_agents(tmp_path):
    repo = tmp_path / "repo"
    _agent(repo, ".claude/agents", "security-auditor", CLAUDE_AGENT)
    _agent(repo, ".claude/agents", "fetcher", "---\nname: fetcher\ntools: WebFetch\n---\nx\n")
    (repo / "roles.toml").write_text(
        '[pipeline]\nsteps = ["planner", "builder", "reviewer", "security-auditor"]\n'
        '[roles.security-auditor]\nmodel = "sol"\n')
    proc = cli("roles", "--repo", str(repo), "--json")
    assert proc.returncode == 2 and "not a git repository" in proc.stderr
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    proc = cli("roles", "--repo", str(repo), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    agents = {a["role"]: a for a in data["agents"]}
    assert agents["security-auditor"]["kind"] == "check" and agents["security-auditor"]["in_pipeline"]
    assert agents["security-auditor"]["tools"] == ["read", "search", "list", "run"]
    assert not agents["explorer"]["in_pipeline"] and "WebFetch" in data["unusable_agents"]["fetcher"]
    assert data["pipeline"]["steps"] == ["planner", "builder", "reviewer", "security-auditor"]
    proc = cli("roles", "--repo", str(repo))
    assert proc.returncode == 0
    assert "planner → builder ⇄ verify → reviewer → security-auditor" in proc.stdout
    # the pipeline takes the file that cannot run: one line naming the file and the tool
    (repo / "roles.toml").write_text(
        '[pipeline]\nsteps = ["planner", "builder", "reviewer", "fetcher"]\n')
    proc = cli("roles", "--repo", str(repo))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")
    assert ".claude/agents/fetcher.md: tools WebFetch: not available in orchestrate" in proc.stderr
