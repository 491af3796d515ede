"""The explorer swarm end to end: fan-out, failure isolation, verification, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from conftest import cli, run_env, scenario_with, sim_roles, snapshot

from orchestrator import api
from orchestrator.faces.demo import scenario_path
from orchestrator.sim import (
    BEHAVIORS,
    ChatRequestView,
    FaultSpec,
    ModelBehavior,
    Reply,
    ToolCallSpec,
    register_behavior,
)


def _planner(questions: list[str]) -> ModelBehavior:
    plan = {"goal": "answer", "steps": [], "questions": questions, "acceptance": []}
    return ModelBehavior(script=[Reply(tool_calls=[ToolCallSpec(name="submit", arguments=plan)])])


@register_behavior("explorer-cite-unless-doomed")
def _cite_unless_doomed(req: ChatRequestView) -> Reply:
    if "doomed" in json.dumps(req.messages[1]):
        return Reply(error=FaultSpec(status=500, type="server_error", message="simulated outage"))
    return BEHAVIORS["explorer-cite"](req)


async def test_twenty_explorers_one_failing_still_give_a_digest(fresh_sim, sample_repo):
    words = ["median", "mean", "ordered", "sorted", "values", "StatsTest", "unittest", "assertEqual",
             "len", "sum", "mid", "return", "import", "class", "def", "sample", "statistics",
             "Middle", "Arithmetic"]
    questions = [f"Where is `{w}` used?" for w in words] + ["Where is the `doomed` thing?"]
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": _planner(questions),
        "sim-explorer": ModelBehavior(delay_s=0.2, behavior="explorer-cite-unless-doomed"),
    }))
    roles = sim_roles(fresh_sim)
    result = await api.aexplore("Where is everything?", repo=sample_repo, roles=roles,
                                env=run_env(), parallel=20)
    assert len(result.explorers) == 20
    failed = result.failures
    assert len(failed) == 1 and "doomed" in failed[0].question
    assert "simulated outage" in failed[0].error or "InternalServerError" in failed[0].error
    assert sum(e.verified for e in result.explorers) >= 15
    assert "median" in result.digest and "doomed" not in result.digest
    assert fresh_sim.state.max_in_flight["sim-explorer"] >= 10
    assert result.exit_code == 3 and [loss.session for loss in result.losses] == ["explorer-20"]


async def test_explorer_without_tool_calls_contributes_nothing(fresh_sim, sample_repo):
    """It cites a file it was never shown (no tool call, and no candidate showed README.md):
    the claim is dropped before verification, as unchecked, with the reason."""
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": _planner(["Where is `median`?", "What is the entry point?"]),
        "sim-explorer": ModelBehavior(behavior="explorer-no-tools"),
    }))
    result = await api.aexplore("q", repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env())
    for e in result.explorers:
        assert e.tool_calls == 0 and e.verified == 0 and e.dropped == 1 and not e.claims
        assert "never shown" in e.drop_reasons[0] and e.drops == {"unchecked": 1}
        assert "README.md" not in " ".join(e.candidates)
    assert result.digest == "(no verified findings)"


async def test_fabricated_citations_are_dropped_real_ones_kept(fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": _planner(["Where is `def median`?"]),
        "sim-explorer": ModelBehavior(behavior="explorer-fabricate"),
    }))
    result = await api.aexplore("q", repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env())
    (e,) = result.explorers
    assert (e.submitted, e.verified, e.dropped) == (2, 1, 1)
    assert [c.path for c in e.claims[0].citations] == ["stats.py"]
    assert any("imaginary" in r for r in e.drop_reasons)
    assert "imaginary" not in result.digest


def test_cli_explore_prints_citations_and_leaves_checkout_untouched(sim, sample_repo):
    sim.set_scenario(scenario_with(**{"sim-planner": _planner(["Where is `def median` defined?"])}))
    before = snapshot(sample_repo)
    args = ["explore", "Where is median defined?", "--repo", str(sample_repo),
            "--roles", str(scenario_path("demo-roles.toml")),
            "--set", f'providers.sim.base_url="{sim.base_url}"', "--parallel", "4"]
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr
    assert "stats.py:" in proc.stdout and "1 verified" in proc.stdout
    assert snapshot(sample_repo) == before  # files, index, branch, HEAD: only read
    branches = subprocess.run(["git", "branch", "--list", "orchestrate/*"], cwd=sample_repo,
                              capture_output=True, text=True).stdout
    assert branches == "" and not list(sample_repo.glob("workspaces/*/worktree"))
    data = json.loads(cli(*args, "--json").stdout)
    assert data["explorers"][0]["claims"][0]["citations"][0]["path"] == "stats.py"
    assert data["exit_code"] == 0 and data["losses"] == []


async def test_a_slow_explorer_times_out_without_sinking_the_rest(fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": _planner(["Where is `median`?", "Where is the `slowpoke`?"]),
        "sim-explorer": ModelBehavior(behavior="explorer-cite-or-stall"),
    }))
    roles = sim_roles(fresh_sim, "run.explorer_timeout_s=1.5")
    result = await api.aexplore("q", repo=sample_repo, roles=roles, env=run_env())
    fast, slow = result.explorers
    assert fast.verified == 1 and slow.error and "timed out after 1.5s" in slow.error
    (loss,) = result.losses
    assert loss.code == "timeout" and "role explorer: model explorer-sim" in loss.message


@register_behavior("explorer-cite-or-stall")
def _cite_or_stall(req: ChatRequestView) -> Reply:
    reply = BEHAVIORS["explorer-cite"](req)
    if "slowpoke" in json.dumps(req.messages[1]):
        return reply.model_copy(update={"delay_s": 30})
    return reply


async def test_parallel_caps_the_explorers_in_flight(fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": _planner([f"Where is `{w}`?" for w in ("median", "mean", "ordered",
                                                              "sorted", "values", "len")]),
        "sim-explorer": ModelBehavior(delay_s=0.3, behavior="explorer-cite"),
    }))
    result = await api.aexplore("q", repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env(),
                                parallel=3)
    assert len(result.explorers) == 6
    # peak overlap of this test's explorer requests (a stalled request of an earlier test may
    # still be open at the simulator); ends trimmed by 20 ms so a session's next request
    # following its previous one at once is not counted as overlap
    edges = sorted([(r.started, 1) for r in fresh_sim.state.requests_for("sim-explorer")]
                   + [(r.finished - 0.02, -1) for r in fresh_sim.state.requests_for("sim-explorer")])
    peak = running = 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    assert peak == 3


async def test_a_plan_without_questions_explores_the_question_itself(fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": _planner([])}))
    roles = sim_roles(fresh_sim, "models.explorer-sim.temperature=0.0")
    result = await api.aexplore("Where is `def median`?", repo=sample_repo, roles=roles,
                                env=run_env())
    assert result.sub_questions == ["Where is `def median`?"]
    assert result.explorers[0].verified == 1
    sent = fresh_sim.state.requests_for("sim-explorer")
    assert {r.body.get("temperature") for r in sent} == {0.0}
    assert all("temperature" not in r.body for r in fresh_sim.state.requests_for("sim-planner"))


async def test_explore_keeps_its_record_like_run(fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": _planner(["Where is `median`?", "Where is `mean`?"])}))
    result = await api.aexplore("q", repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env())
    run_dir = sample_repo / "workspaces" / result.run_id
    assert result.run_dir == str(run_dir) and result.exit_code == 0
    partial = [json.loads(line) for line in (run_dir / "explorers.jsonl").read_text().splitlines()]
    assert sorted(p["question"] for p in partial) == ["Where is `mean`?", "Where is `median`?"]
    events = [json.loads(line)["kind"] for line in (run_dir / "events.jsonl").read_text().splitlines()]
    assert events[0] == "run_started" and events.count("explorer_finished") == 2
    assert events[-1] == "run_finished"
    report = json.loads((run_dir / "report.json").read_text())
    assert report["kind"] == "explore" and report["status"] == "succeeded" and report["calls"]
    listed = json.loads(cli("runs", "--repo", str(sample_repo), "--json").stdout)
    assert [(r["run_id"], r["state"], r["branch"]) for r in listed] == [
        (result.run_id, "succeeded", "")]
    shown = cli("show", result.run_id, "--repo", str(sample_repo))
    assert shown.returncode == 0 and "explorer-2" in shown.stdout
    for command in ("resume", "apply"):
        proc = cli(command, result.run_id, "--repo", str(sample_repo))
        assert proc.returncode == 2 and "explore` run" in proc.stderr, proc.stderr


def test_a_cut_explore_streams_progress_and_keeps_partial_results(sim, sample_repo):
    """`explore --json` killed mid-run: stderr showed progress as it went, and the workspace
    holds the finished explorer's result and the events so far."""
    sim.set_scenario(scenario_with(**{
        "sim-planner": _planner(["Where is `median`?", "Where is the `slowpoke`?"]),
        "sim-explorer": ModelBehavior(behavior="explorer-cite-or-stall")}))
    args = ["explore", "q", "--json", "--repo", str(sample_repo),
            "--roles", str(scenario_path("demo-roles.toml")),
            "--set", f'providers.sim.base_url="{sim.base_url}"']
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", *args], env=run_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: list[str] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            line = proc.stderr.readline()  # type: ignore[union-attr]
            if not line:
                break
            seen.append(line)
            if "claims verified" in line:  # the fast explorer is done; the other one stalls
                break
    finally:
        proc.kill()
        stdout, _ = proc.communicate(timeout=30)
    assert any("▶ explorer-1" in s for s in seen) and any("claims verified 1/1" in s for s in seen)
    assert stdout == ""
    (run_dir,) = sample_repo.glob("workspaces/*")
    (partial,) = [json.loads(x) for x in (run_dir / "explorers.jsonl").read_text().splitlines()]
    assert partial["question"] == "Where is `median`?" and partial["verified"] == 1
    assert "explorer_finished" in (run_dir / "events.jsonl").read_text()
    listed = json.loads(cli("runs", "--repo", str(sample_repo), "--json").stdout)
    assert [r["state"] for r in listed] == ["stopped"]
