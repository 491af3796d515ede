"""End to end: `run` against the simulator, with real git, real ripgrep and real tests."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import cli, run_env, scenario_with, sim_roles, snapshot

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK, demo_scenario, scenario_path
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply, ToolCallSpec, register_behavior


@register_behavior("plan-or-approve")
def _plan_or_approve(req: ChatRequestView) -> Reply:
    """The demo planner, unless it is asked to review (its submit tool wants a verdict)."""
    submit = next(t for t in req.tools if t["function"]["name"] == "submit")
    if "verdict" in submit["function"]["parameters"]["properties"]:
        return Reply(tool_calls=[ToolCallSpec(name="submit", arguments={"verdict": "approve"})])
    return demo_scenario().models["sim-planner"].reply_for(req)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          check=True).stdout.strip()


async def test_demo_task_is_fixed_on_a_run_branch_and_checkout_untouched(fresh_sim, sample_repo):
    (sample_repo / "notes.txt").write_text("my uncommitted notes\n")  # untracked user file
    before = snapshot(sample_repo)
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env())
    assert result.status == "succeeded", result.reason
    assert result.exit_code == 0
    assert snapshot(sample_repo) == before
    assert result.branch == f"orchestrate/{result.run_id}"
    assert result.commit and _git(sample_repo, "rev-parse", result.branch) == result.commit
    changed = _git(sample_repo, "diff", "--name-only", f"{result.base_commit}..{result.branch}")
    assert changed.splitlines() == ["stats.py"]
    fixed = _git(sample_repo, "show", f"{result.branch}:stats.py")
    assert "(ordered[mid - 1] + ordered[mid]) / 2" in fixed
    assert "orchestrate:" in _git(sample_repo, "log", "-1", "--format=%s", result.branch)
    run_dir = Path(result.run_dir)
    report = json.loads((run_dir / "report.json").read_text())
    assert set(report["per_role"]) == {"planner", "explorer", "builder", "reviewer"}
    assert report["time_split"]["wall_s"] >= report["time_split"]["model_s"] > 0
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert {"run_started", "call_finished", "test_result", "run_finished"} <= {e["kind"] for e in events}
    assert (run_dir / "patch.diff").read_text().startswith("diff --git a/stats.py")
    assert _git(sample_repo, "status", "--porcelain") == "?? notes.txt"


async def test_each_role_reaches_its_model_tier_and_effort(fresh_sim, sample_repo):
    roles = sim_roles(fresh_sim)
    await api.arun(DEMO_TASK, repo=sample_repo, roles=roles, env=run_env())
    expected = {
        "sim-planner": ("default", "high"),
        "sim-explorer": ("priority", "low"),
        "sim-builder": ("priority", "medium"),
        "sim-reviewer": ("flex", "medium"),
    }
    for model, (tier, effort) in expected.items():
        seen = fresh_sim.state.requests_for(model)
        assert seen, model
        assert {(r.body.get("service_tier"), r.body.get("reasoning_effort")) for r in seen} == {(tier, effort)}
    assert not fresh_sim.state.requests_for("sim-summarizer")
    assert "authorization" not in {k.lower() for r in fresh_sim.state.requests for k in r.headers}


async def test_changing_the_role_map_changes_what_is_sent(fresh_sim, sample_repo):
    roles = sim_roles(fresh_sim, 'reviewer.model="planner-sim"', 'reviewer.tier="standard"',
                      'reviewer.effort="xhigh"', 'explorer.effort="max"', 'explorer.tier="flex"')
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": ModelBehavior(behavior="plan-or-approve")}))
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=roles, env=run_env())
    assert result.status == "succeeded", result.reason
    assert not fresh_sim.state.requests_for("sim-reviewer")
    reviewer_calls = [r for r in fresh_sim.state.requests_for("sim-planner")
                      if r.body.get("reasoning_effort") == "xhigh"]
    assert reviewer_calls and {r.body.get("service_tier") for r in reviewer_calls} == {"default"}
    explorer = fresh_sim.state.requests_for("sim-explorer")
    assert {(r.body["service_tier"], r.body["reasoning_effort"]) for r in explorer} == {("flex", "xhigh")}
    assert result.per_role["reviewer"].models == ["sim-planner"]


async def test_explorers_run_in_parallel(fresh_sim, sample_repo):
    planner = _planner_with_questions([f"Where is `{w}`?" for w in ("median", "mean", "ordered", "StatsTest")])
    one_reply = Reply(tool_calls=[ToolCallSpec(name="submit", arguments={"answer": "x", "claims": []})])
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": planner,
        "sim-explorer": ModelBehavior(delay_s=1.0, script=[one_reply]),
    }))
    events = []
    # one reply each (answering first would refuse an answer with no claim and ask again)
    result = await api.arun(DEMO_TASK, repo=sample_repo,
                            roles=sim_roles(fresh_sim, "run.explore_answer_first=false"),
                            env=run_env(), listeners=[events.append])
    assert len(result.explorers) == 4
    starts = [e.t for e in events if e.kind == "role_started" and e.role == "explorer"]
    ends = [e.t for e in events if e.kind == "explorer_finished"]
    assert len(starts) == 4 and len(ends) == 4
    assert max(ends) - min(starts) < 2.0
    assert fresh_sim.state.overlapped("sim-explorer")
    assert fresh_sim.state.max_in_flight["sim-explorer"] >= 2


def _planner_with_questions(questions: list[str]) -> ModelBehavior:
    plan = {"goal": "g", "steps": ["fix"], "questions": questions, "acceptance": []}
    return ModelBehavior(script=[Reply(tool_calls=[ToolCallSpec(name="submit", arguments=plan)])])


async def test_failing_tests_go_back_to_builder_and_run_ends_with_failure(fresh_sim, sample_repo):
    lazy = Reply(tool_calls=[ToolCallSpec(name="submit", arguments={"summary": "done (not really)"})])
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(script=[lazy])}))
    before = snapshot(sample_repo)
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim, "run.max_attempts=3"),
                            env=run_env())
    assert result.status == "failed" and result.exit_code == 1
    assert "acceptance still failing" in result.reason and "unittest" in result.reason
    builder_requests = fresh_sim.state.requests_for("sim-builder")
    assert 2 <= len(builder_requests) <= 3  # stops early once the same failure repeats
    second_prompt = json.dumps(builder_requests[1].body["messages"])
    assert "test_median_even" in second_prompt and "AssertionError" in second_prompt
    assert snapshot(sample_repo) == before


def test_cli_run_exit_codes_and_summary(sim, sample_repo, tmp_path):
    sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(script=[
        Reply(tool_calls=[ToolCallSpec(name="submit", arguments={"summary": "nothing"})])])}))
    args = ["run", DEMO_TASK, "--repo", str(sample_repo), "--roles", str(scenario_path("demo-roles.toml")),
            "--set", f'providers.sim.base_url="{sim.base_url}"', "--set", "run.max_attempts=1",
            "--set", 'verify.commands=["python3 -m unittest discover -s tests"]']
    proc = cli(*args)
    assert proc.returncode == 1, proc.stderr
    assert "task not achieved" in proc.stdout and "acceptance still failing" in proc.stdout
    assert "Traceback" not in proc.stderr
    sim.set_scenario(scenario_with())
    proc = cli(*args[:-4], "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["status"] == "succeeded" and data["branch"].startswith("orchestrate/")


def test_missing_key_says_which_variable(tmp_path, sample_repo):
    env = {k: v for k, v in run_env().items() if k != "OPENAI_API_KEY"}
    proc = cli("run", "do something", "--repo", str(sample_repo), env=env)
    assert proc.returncode == 2
    assert "OPENAI_API_KEY" in proc.stderr and "orchestrate demo" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert _git(sample_repo, "branch", "--list", "orchestrate/*") == ""


def test_not_a_repository_is_a_usage_error(tmp_path):
    proc = cli("run", "x", "--repo", str(tmp_path))
    assert proc.returncode == 2 and "not a git repository" in proc.stderr


async def test_acceptance_runs_before_any_model_and_planner_and_builder_see_the_failure(
        fresh_sim, sample_repo):
    events: list = []
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim),
                            env=run_env(), listeners=[events.append])
    assert result.status == "succeeded", result.reason
    (loc,) = [e for e in events if e.kind == "localized"]
    first_call = next(i for i, e in enumerate(events) if e.kind == "call_finished")
    assert events.index(loc) < first_call  # before any model was asked
    assert loc.data["suspects"] == ["stats.py"] and not loc.data["passed"]
    assert loc.data["failing"] and loc.data["pinned"]

    def first_prompt(model: str) -> str:
        return fresh_sim.state.requests_for(model)[0].body["messages"][1]["content"]

    for model in ("sim-planner", "sim-builder"):
        prompt = first_prompt(model)
        assert "The acceptance commands were run before any change:" in prompt, model
        assert "AssertionError" in prompt and "traceback (most recent call last)" in prompt
        assert "stats.py lines" in prompt and "def median(values):" in prompt
        assert "Symbols of these files:" in prompt
    # explorers get what the failing tests show (issue 16's KnownTests slot), not the whole map
    explorer = first_prompt("sim-explorer")
    assert "what they printed when run before any change:" in explorer
    assert "AssertionError" in explorer and "the failure points at: stats.py" in explorer
    assert "Symbols of these files:" not in explorer


async def test_preflight_can_be_turned_off(fresh_sim, sample_repo):
    events: list = []
    result = await api.arun(DEMO_TASK, repo=sample_repo,
                            roles=sim_roles(fresh_sim, "run.preflight=false"), env=run_env(),
                            listeners=[events.append])
    assert result.status == "succeeded", result.reason
    assert not [e for e in events if e.kind == "localized"]
    prompt = fresh_sim.state.requests_for("sim-planner")[0].body["messages"][1]["content"]
    assert "before any change" not in prompt


async def test_a_plan_whose_questions_name_nothing_explores_the_task_itself(fresh_sim, sample_repo):
    """A small planner asks "What is the function called?", copies a tool note ("Call only:
    submit.") and the submit tool's description (the 0.5B on xp-parcel-weight): none names code
    or anything the task mentions, so all are dropped, and the explorers look for what the task
    itself says instead of being skipped."""
    planner = _planner_with_questions(["What is the function called?", "Call only: submit.",
                                       "Submit your final result (Plan). Ends the session."])
    one_reply = Reply(tool_calls=[ToolCallSpec(name="submit", arguments={"answer": "x", "claims": []})])
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": planner, "sim-explorer": ModelBehavior(script=[one_reply])}))
    events = []
    result = await api.arun(DEMO_TASK, repo=sample_repo,
                            roles=sim_roles(fresh_sim, "run.explore_answer_first=false"),
                            env=run_env(), listeners=[events.append])
    assert [e.question for e in result.explorers] == [DEMO_TASK]
    (asked,) = fresh_sim.state.requests_for("sim-explorer")[:1]
    assert DEMO_TASK in json.dumps(asked.body)
    (dropped,) = [e for e in events if e.kind == "warning" and "question(s) dropped" in e.message]
    assert "names no code and nothing the task mentions" in dropped.message
    assert "'Submit your final result (Plan). Ends the session.': copied from the planner's " \
        "own prompt" in dropped.message
    assert "the task itself is asked instead" in dropped.message


async def test_a_plan_whose_questions_name_nothing_asks_about_what_the_task_quotes(
        fresh_sim, sample_repo):
    """The same small planner, on a task that quotes the command it ran: the explorers ask
    where the code handles the quoted word the code holds, not the whole task."""
    planner = _planner_with_questions(["What is the function called?", "Call only: submit."])
    one_reply = Reply(tool_calls=[ToolCallSpec(name="submit", arguments={"answer": "x", "claims": []})])
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": planner, "sim-explorer": ModelBehavior(script=[one_reply])}))
    task = "`python3 -c 'import stats; print(stats.median([1, 2, 3, 4]))'` prints 2, not 2.5."
    events = []
    result = await api.arun(task, repo=sample_repo,
                            roles=sim_roles(fresh_sim, "run.explore_answer_first=false"),
                            env=run_env(), listeners=[events.append])
    asked = [e.question for e in result.explorers]
    assert asked == ["Where does the code handle `stats`?",
                     "Where does the code handle `median`?"], asked
    (dropped,) = [e for e in events if e.kind == "warning" and "question(s) dropped" in e.message]
    assert "asked instead: Where" in dropped.message
