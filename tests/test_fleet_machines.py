"""A fleet across machines, as a team runs one: PostgreSQL, a bare origin reached by URL, and
two workers with their own home and working directories (two machines). One is killed with
SIGKILL while the builder's second call is in flight; the other continues the same run from
what the first left in the database and on the origin, asking the simulator again for at most
that one call, and its report counts exactly what the simulator saw asked twice. The branch is
on the origin; ``runs``/``jobs`` from a third directory show the run with its host and cost,
and ``orchestrate apply`` merges the branch fetched from there."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter

import pytest

from orchestrator.faces.demo import (
    DEMO_TASK,
    scenario_path,
)
from orchestrator.faces.fleet import jobs

pytest_plugins = ["pg", "fleet_kit"]
pytest.importorskip("procrastinate", reason="the fleet extra is not installed")


def _asked_twice(sim, model: str) -> int:
    """Requests the simulator received more than once (the same body), counted at the server."""
    seen = Counter(json.dumps(r.body, sort_keys=True) for r in sim.state.requests_for(model))
    return sum(n - 1 for n in seen.values())


# killed in the builder's second call (the last checkpoint: before the build, the start's
# files), or in the reviewer's first (the last checkpoint holds the builder's files: the other
# machine gets them from the snapshot ref)
@pytest.mark.parametrize(("model", "nth"), [("sim-builder", 2), ("sim-reviewer", 1)])
async def test_a_run_killed_on_one_machine_finishes_on_another_paying_once(
        fleet, pg_url, fresh_sim, tmp_path, model, nth):
    fleet.slowed(fresh_sim, model, 1.0)
    origin = fleet.origin()
    job_id = await fleet.submit(fresh_sim, f"{DEMO_TASK} [two machines]", f"file://{origin}")
    first = fleet.worker("machine-a", machine=True, push=True, poll_s=0.3)

    async def nth_call():  # it is in flight for 1 s from its arrival
        return len(fresh_sim.state.requests_for(model)) >= nth

    try:
        await fleet.until(nth_call, 90, f"{model}'s call {nth}")
    except AssertionError:
        raise AssertionError(first.text()[-3000:]) from None
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(10)
    in_flight_at_kill = len(fresh_sim.state.requests_for(model))
    second = fleet.worker("machine-b", machine=True, push=True, poll_s=0.3)

    async def finished():
        (job,) = await jobs(pg_url)
        assert job.status != "failed", second.text()[-3000:]
        return job if job.status == "succeeded" else None

    job = await fleet.until(finished, 120, "the second machine to finish the run")
    fleet.stop()
    lines = second.lines()
    (done,) = [x for x in lines if x["event"] == "job done"]
    repeated = sum(_asked_twice(fresh_sim, m) for m in
                   ("sim-planner", "sim-explorer", "sim-builder", "sim-reviewer"))
    # only the call in flight at the kill was asked again, and the report counts exactly that
    assert in_flight_at_kill == nth and repeated == 1
    assert _asked_twice(fresh_sim, model) == 1
    assert done["paid_calls_repeated"] == repeated
    # the calls the node had completed before it came from the journal
    assert done["replayed_calls"] == nth - 1
    assert done["run_id"] == job.run_id and done["job_id"] == job_id and done["attempt"] == 2
    assert any(x["event"] == "resumes run" and x["adopted"] for x in lines)
    # the branch is on the origin, at the run's commit
    remote = subprocess.run(["git", "ls-remote", str(origin), f"refs/heads/orchestrate/{job.run_id}"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert remote and remote[0] == job.commit
    # a third machine sees it in the shared registry, with host and cost
    third = tmp_path / "third"
    third.mkdir()
    listed = fleet.cli(third, "runs", "--json")
    assert listed.returncode == 0, listed.stderr
    (run,) = json.loads(listed.stdout)
    assert (run["run_id"], run["state"], run["host"]) == (job.run_id, "succeeded", "machine-b")
    assert run["commit"] == job.commit and run["cost_usd"] > 0 and run["job_id"] == job_id
    queued = fleet.cli(third, "jobs", "--json")
    assert queued.returncode == 0, queued.stderr
    (row,) = json.loads(queued.stdout)
    assert (row["run_id"], row["host"], row["state"]) == (job.run_id, "machine-b", "succeeded")
    assert row["cost_usd"] == run["cost_usd"] and row["branch"] == f"orchestrate/{job.run_id}"
    # and the branch, fetched from the origin, applies in a checkout of it
    checkout = third / "checkout"
    subprocess.run(["git", "clone", "-q", str(origin), str(checkout)], check=True)
    subprocess.run(["git", "fetch", "-q", "origin", f"orchestrate/{job.run_id}"], cwd=checkout,
                   check=True)
    subprocess.run(["git", "branch", "-q", f"orchestrate/{job.run_id}", "FETCH_HEAD"],
                   cwd=checkout, check=True)
    before = (checkout / "stats.py").read_text()
    applied = fleet.cli(checkout, "apply", job.run_id, "--json")
    assert applied.returncode == 0, applied.stderr
    assert (checkout / "stats.py").read_text() != before
    assert os.path.exists(checkout / ".git")
    print(f"asked again {repeated}, replayed {done['replayed_calls']}, cost {run['cost_usd']}")


async def test_a_stalled_worker_woken_after_a_takeover_finishes_nothing(fleet, pg_url, fresh_sim):
    """A worker stopped (SIGSTOP: not dead) in the builder's call; its job goes to the other
    worker, which resumes the run. Woken while the other still works, the first finds the run's
    lease taken and stops: the origin's branch, the job row and the run row hold only the
    second worker's result."""
    fleet.slowed(fresh_sim, "sim-builder", 1.0)
    origin = fleet.origin()
    job_id = await fleet.submit(fresh_sim, f"{DEMO_TASK} [stalled]", f"file://{origin}")
    first = fleet.worker("machine-a", machine=True, push=True, poll_s=0.3)

    async def building():
        return len(fresh_sim.state.requests_for("sim-builder")) >= 1

    await fleet.until(building, 90, "the first machine's builder call")
    first.proc.send_signal(signal.SIGSTOP)
    second = fleet.worker("machine-b", machine=True, push=True, poll_s=0.3)

    async def resumed():  # the second machine took the run over and is building
        return ('"resumes run"' in second.text()
                and len(fresh_sim.state.requests_for("sim-builder")) >= 2)

    await fleet.until(resumed, 90, "the second machine to take the run over")
    first.proc.send_signal(signal.SIGCONT)

    async def first_ended():  # the first machine's job ended, one way or the other
        text = first.text()
        return '"event": "job done"' in text or '"event": "job failed"' in text

    await fleet.until(first_ended, 60, "the first machine to end its part")

    async def finished():
        (job,) = await jobs(pg_url)
        return job if job.status in ("succeeded", "failed") else None

    job = await fleet.until(finished, 120, "the job to finish")
    fleet.stop()
    a_lines, b_lines = first.lines(), second.lines()
    (done,) = [x for x in b_lines if x["event"] == "job done"]
    assert not [x for x in a_lines if x["event"] == "job done"]
    assert any("to worker machine-b" in x.get("error", "") for x in a_lines), a_lines[-5:]
    # the job row: the second machine's success (not the first's failure or abort)
    assert (job.job_id, job.status, job.attempts) == (job_id, "succeeded", 2)
    # the run row: the second machine's, its commit
    assert (job.run_id, job.host, job.state) == (done["run_id"], "machine-b", "succeeded")
    assert job.commit == done["commit"]
    # the origin's branch: the second machine's commit
    remote = subprocess.run(["git", "ls-remote", str(origin), f"refs/heads/orchestrate/{job.run_id}"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert remote and remote[0] == job.commit


async def test_a_job_carries_the_agent_files_its_role_map_names(fleet, pg_url, fresh_sim, tmp_path):
    """The submitter's own agents/reviewer.md (not the packaged one) travels with the job: a
    worker with another home runs the review with it; an agent file the role map does not
    name stays home."""
    from orchestrator.config.packaged import packaged_agents

    (packaged,) = [f for f in packaged_agents() if f.name == "reviewer.md"]
    own = tmp_path / "submitter" / ".config" / "orchestrate" / "agents"
    own.mkdir(parents=True)
    marker = "Sign every review with the word SUBMITTERS-OWN-REVIEWER."
    (own / "reviewer.md").write_text(packaged.read_text() + "\n" + marker + "\n")
    (own / "unused.md").write_text("---\nname: unused\nkind: review\n---\nNot named.\n")
    origin = fleet.origin()
    env = {"HOME": str(tmp_path / "submitter"), "XDG_CONFIG_HOME": ""}
    await fleet.submit(fresh_sim, f"{DEMO_TASK} [agents]", f"file://{origin}", env=env)
    worker = fleet.worker("machine-a", machine=True)

    async def finished():
        (job,) = await jobs(pg_url)
        assert job.status != "failed", worker.text()[-3000:]
        return job if job.status == "succeeded" else None

    await fleet.until(finished, 120, "the run to finish")
    fleet.stop()
    assert not (tmp_path / "machine-a" / "home" / ".config" / "orchestrate" / "agents").exists()
    systems = [m["content"] for r in fresh_sim.state.requests_for("sim-reviewer")
               for m in r.body["messages"] if m["role"] == "system"]
    assert systems and all(marker in str(s) for s in systems)
    from orchestrator.faces.fleet_job import agent_contents, role_contents

    carried = agent_contents(role_contents([scenario_path("demo-roles.toml")]), [], env)
    assert [a["name"] for a in carried] == ["reviewer.md"]  # unused.md is not named
