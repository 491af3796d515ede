"""End to end against the simulator: a team's own check role (an agent file and a few lines of
roles.toml, no Python) sends the build back; a Claude Code sub-agent file runs as a judge whose
commands cannot change the result; the repository's AGENTS.md reaches the planner and the
builder; `run --json --events` streams the run as JSON lines."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import cli, run_env, scenario_with

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK, demo_roles_sets, demo_scenario, scenario_path
from orchestrator.record.events import parse_event
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply, ToolCallSpec

SECURITY_REVIEWER = """\
---
name: security-reviewer
kind: check
description: Reads the change for unexplained arithmetic.
tools: [read, search]
---
{prompt} Every change to stats.py must say why, in a `# NOTE:` comment.
"""
CHECKER_MODEL = """
[models.checker-sim]
provider = "sim"
id = "sim-checker"
context_window = 16_000
max_output = 2_000
"""
NOTE = "    # NOTE: even lengths average the two middle values\n"
FIXED = "    return (ordered[mid - 1] + ordered[mid]) / 2\n"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                          capture_output=True, text=True, check=True).stdout.strip()


def _commit(repo: Path, files: dict[str, str]) -> None:
    for name, body in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(body)
    _git(repo, "add", *files)  # agents and roles.toml are the team's: git takes them
    _git(repo, "commit", "-q", "-m", "team roles")


def _call(name: str, **arguments) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name=name, arguments=arguments)])


def _task(req: ChatRequestView) -> str:
    return next(m["content"] for m in req.messages if m.get("role") == "user")


def _wants_a_note(req: ChatRequestView) -> Reply:
    """The security reviewer: reads stats.py, then approves only a diff with a NOTE."""
    if not req.tool_results():
        return _call("read", path="stats.py")
    if "NOTE:" in _task(req):
        return _call("submit", verdict="approve", comments=[])
    return _call("submit", verdict="request_changes",
                 comments=["stats.py: say why with a `# NOTE:` comment above the even return"])


def _follows_feedback(req: ChatRequestView) -> Reply:
    """The demo builder, and on a judge's feedback it adds the NOTE the reviewer asked for."""
    if "requested changes" not in _task(req):
        return demo_scenario().models["sim-builder"].reply_for(req)
    if req.assistant_turns == 0:
        return _call("replace", path="stats.py", old=FIXED, new=NOTE + FIXED)
    return _call("submit", summary="added the NOTE the security reviewer asked for")


def _team_repo(repo: Path, prompt: str) -> None:
    _commit(repo, {
        ".orchestrate/agents/security-reviewer.md": SECURITY_REVIEWER.format(prompt=prompt),
        "roles.toml": '[pipeline]\nsteps = ["planner", "explorer", "builder", '
                      '"security-reviewer", "reviewer"]\n' + CHECKER_MODEL
                      + '[roles.security-reviewer]\nmodel = "checker-sim"\ntier = "flex"\n'
                        'effort = "high"\n',
    })


async def test_a_teams_check_role_sends_the_build_back_and_resumes_with_its_own_prompt(
        fresh_sim, sample_repo):
    _team_repo(sample_repo, "ORIGINAL PROMPT.")
    fresh_sim.set_scenario(scenario_with(**{
        "sim-checker": ModelBehavior(respond=_wants_a_note),
        "sim-builder": ModelBehavior(respond=_follows_feedback)}))
    setup = dict(repo=sample_repo, role_files=[scenario_path("demo-roles.toml")], env=run_env(),
                 sets=[*demo_roles_sets(fresh_sim.local_url), "run.max_reviews=2"])
    paused = await api.arun(DEMO_TASK, approve_plan=True, **setup)
    assert paused.status == "awaiting_approval", paused.reason
    assert _git(sample_repo, "check-ignore", "-q", ".orchestrate/state/runs.sqlite") == ""
    # the team edits the agent while the run waits: the run keeps the prompts it started with
    (sample_repo / ".orchestrate/agents/security-reviewer.md").write_text(
        SECURITY_REVIEWER.format(prompt="CHANGED PROMPT."))
    events = []
    result = await api.aresume(paused.run_id, repo=sample_repo, env=run_env(), approve=True,
                               listeners=[events.append])
    assert result.status == "succeeded", result.reason
    assert result.checks["security-reviewer"].verdict == "approve" and result.review
    assert NOTE.strip() in _git(sample_repo, "show", f"{result.branch}:stats.py")
    verdicts = [(e.role, e.verdict) for e in events if e.kind == "review" and e.role != "human"]
    assert verdicts == [("security-reviewer", "request_changes"),
                        ("security-reviewer", "approve"), ("reviewer", "approve")]

    checks = fresh_sim.state.requests_for("sim-checker")
    first = ChatRequestView.from_body(checks[0].body)
    assert "ORIGINAL PROMPT." in first.system_text() and "CHANGED" not in first.system_text()
    assert first.tool_names == ["search", "read", "read_artifact", "submit"]
    assert {(r.body["service_tier"], r.body["reasoning_effort"]) for r in checks} == {("flex", "high")}
    second_build = [ChatRequestView.from_body(r.body) for r in fresh_sim.state.requests_for("sim-builder")
                    if "requested changes" in json.dumps(r.body["messages"])]
    assert second_build and "The security-reviewer requested changes:" in _task(second_build[0])
    assert result.per_role["security-reviewer"].models == ["sim-checker"]
    sessions = {e.session for e in events if e.kind == "role_started"}
    assert {"security-reviewer-1", "security-reviewer-2", "reviewer-1", "builder-2"} <= sessions
    assert json.loads((Path(result.run_dir) / "agents.json").read_text())[
        "security-reviewer"]["text"].count("ORIGINAL PROMPT.") == 1


CLAUDE_AUDITOR = """\
---
name: test-auditor
description: Runs the tests the way CI does and checks nothing else changed.
tools: Read, Grep, Bash
model: sonnet
color: green
---
You audit test runs. Run the test suite yourself before you judge.
"""
AGENTS_MD = "# Working here\n\n- Run the unit tests with `python -m unittest` before you submit.\n"


def _audits_by_running(req: ChatRequestView) -> Reply:
    """A judge that runs a command writing a file into the worktree, then approves."""
    if req.assistant_turns == 0:
        return _call("run", command="echo scratch > auditor-was-here.txt && "
                                    "python3 -m unittest discover -s tests")
    return _call("submit", verdict="approve", comments=["tests pass when I run them"])


def test_a_claude_code_agent_judges_in_a_cli_run_streaming_json_events(sim, sample_repo):
    _commit(sample_repo, {
        ".claude/agents/test-auditor.md": CLAUDE_AUDITOR, "AGENTS.md": AGENTS_MD,
        "roles.toml": '[pipeline]\nsteps = ["planner", "explorer", "builder", "test-auditor", '
                      '"reviewer"]\n' + CHECKER_MODEL + '[roles.test-auditor]\nmodel = "checker-sim"\n',
    })
    sim.set_scenario(scenario_with(**{"sim-checker": ModelBehavior(respond=_audits_by_running)}))
    sim.state.clear()
    proc = cli("run", DEMO_TASK, "--repo", str(sample_repo), "--json", "--events",
               "--roles", str(scenario_path("demo-roles.toml")),
               *[arg for s in demo_roles_sets(sim.base_url) for arg in ("--set", s)])
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    *streamed, last = lines
    events = [parse_event(e) for e in streamed]
    assert None not in events and last["kind"] == "result"
    result = last["result"]
    assert result["status"] == "succeeded" and result["checks"]["test-auditor"]["verdict"] == "approve"
    assert events[0].kind == "run_started" and events[-1].kind == "run_finished"
    assert ("test-auditor", "approve") in [(e.role, e.verdict) for e in events if e.kind == "review"]
    warned = [e.message for e in events if e.kind == "warning"]
    assert any("test-auditor's commands changed files" in w for w in warned)
    files = _git(sample_repo, "show", "--name-only", "--format=", result["branch"])
    assert files.splitlines() == ["stats.py"]  # the judge's scratch file is not in the result

    audit = ChatRequestView.from_body(sim.state.requests_for("sim-checker")[0].body)
    assert audit.tool_names == ["search", "read", "run", "read_artifact", "submit"]  # Read, Grep, Bash
    assert audit.system_text().startswith("You audit test runs.")
    quoted = "--- AGENTS.md, lines 1-3 of 3 ---"
    for model in ("sim-planner", "sim-builder"):
        task = _task(ChatRequestView.from_body(sim.state.requests_for(model)[0].body))
        assert quoted in task and "python -m unittest` before you submit" in task
    review = _task(ChatRequestView.from_body(sim.state.requests_for("sim-reviewer")[0].body))
    assert "AGENTS.md" not in review
