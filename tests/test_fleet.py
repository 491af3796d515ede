"""The fleet against a real PostgreSQL queue and the simulator: worker processes drain a queue,
each run happens once, and a worker killed mid-run leaves its run to another, which resumes it."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest
from conftest import run_env

from orchestrator.faces.demo import (
    DEMO_TASK,
    make_sample_repo,
    scenario_path,
)
from orchestrator.faces.fleet import checkout, is_url, jobs
from orchestrator.record.registry import open_registry

pytest_plugins = ["pg", "fleet_kit"]
pytest.importorskip("procrastinate", reason="the fleet extra is not installed")


def _plannings(sim, marker: str) -> int:
    """Planner conversations begun for the task containing ``marker`` (first turns only)."""
    return sum(
        1 for r in sim.state.requests_for("sim-planner")
        if marker in json.dumps(r.body["messages"])
        and not any(m.get("role") == "assistant" for m in r.body["messages"])
    )


def test_checkout_uses_paths_as_they_are_and_clones_urls_once(tmp_path):
    origin = make_sample_repo(tmp_path / "origin")
    assert is_url("https://example.invalid/x.git") and is_url("git@host:org/x.git")
    assert not is_url(str(origin)) and not is_url("relative/dir")
    assert checkout(str(origin), tmp_path / "cache") == origin
    first = checkout(f"file://{origin}", tmp_path / "cache")
    assert (first / "stats.py").exists() and first.parent == tmp_path / "cache"
    (origin / "NEW.md").write_text("new\n")
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A"], cwd=origin, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "new"], cwd=origin,
                   check=True)
    assert checkout(f"file://{origin}", tmp_path / "cache") == first
    assert (first / "NEW.md").exists()


async def test_two_workers_drain_four_tasks_each_run_once(fleet, pg_url, fresh_sim, tmp_path):
    repos = [make_sample_repo(tmp_path / f"repo{i}") for i in range(4)]
    # Two repositories by path, two by URL: those are cloned into each worker's cache.
    targets = [str(repos[0]), str(repos[1]), f"file://{repos[2]}", f"file://{repos[3]}"]
    tasks = [f"{DEMO_TASK} [fleet task {i}]" for i in range(4)]
    ids = [await fleet.submit(fresh_sim, t, r) for t, r in zip(tasks, targets, strict=True)]
    assert {j.status for j in await jobs(pg_url)} == {"todo"}
    workers = [fleet.worker(f"w{i}") for i in range(2)]

    async def all_done():
        listed = await jobs(pg_url)
        assert not any(j.status == "failed" for j in listed), [w.text() for w in workers]
        return all(j.status == "succeeded" for j in listed)

    await fleet.until(all_done, 90, "the queue to drain")
    fleet.stop()
    assert sorted(j.job_id for j in await jobs(pg_url)) == sorted(ids)
    assert all(j.attempts == 1 for j in await jobs(pg_url))  # one start each, no retry
    for i in range(4):
        assert _plannings(fresh_sim, f"[fleet task {i}]") == 1, i
    with open_registry(tmp_path, pg_url) as reg:
        runs = reg.list()
    assert len(runs) == 4 and {r.state for r in runs} == {"succeeded"}
    assert sorted(r.job_id for r in runs) == sorted(ids)
    assert all(r.commit and r.branch.startswith("orchestrate/") for r in runs)
    by_path = {r.repo for r in runs}
    assert str(repos[0]) in by_path and str(repos[2]) not in by_path  # URLs ran in a clone
    took = [w.text().count('"event": "new run"') for w in workers]
    assert sum(took) == 4 and min(took) >= 1, took


async def test_a_killed_worker_leaves_its_run_to_another_which_resumes_it(
        fleet, pg_url, fresh_sim, tmp_path):
    fleet.slowed(fresh_sim, "sim-builder", 0.8)
    repo = make_sample_repo(tmp_path / "repo")
    job_id = await fleet.submit(fresh_sim, f"{DEMO_TASK} [kill me]", str(repo))
    first = fleet.worker("w0")

    async def building():
        return bool(fresh_sim.state.requests_for("sim-builder"))

    await fleet.until(building, 60, "the first worker to reach the builder")
    second = fleet.worker("w1")
    first.proc.send_signal(signal.SIGKILL)
    first.proc.wait(10)

    async def done():
        (job,) = await jobs(pg_url)
        return job if job.status == "succeeded" else None

    job = await fleet.until(done, 90, "the second worker to finish the run")
    fleet.stop()
    assert job.job_id == job_id and job.attempts == 2  # retried once, after its worker died
    assert "queued again" in second.text()
    assert '"event": "resumes run"' in second.text()
    with open_registry(tmp_path, pg_url) as reg:
        (run,) = reg.list()
    assert run.state == "succeeded" and run.job_id == job_id and run.commit
    assert _plannings(fresh_sim, "[kill me]") == 1  # resumed from its checkpoint, not re-planned


async def test_a_job_that_cannot_run_fails_visibly_and_is_not_retried(fleet, pg_url, sim, tmp_path):
    from orchestrator.faces.fleet_worker import WorkerConfig, run_worker

    not_a_repo = tmp_path / "plain"
    not_a_repo.mkdir()
    job_id = await fleet.submit(sim, "fix it", str(not_a_repo))
    await run_worker(WorkerConfig(database_url=pg_url, cache_dir=tmp_path / "cache", drain=True,
                                  env=run_env(), poll_s=0.2, allow_set=fleet.ALLOW))
    (job,) = await jobs(pg_url)
    assert (job.job_id, job.status, job.attempts, job.stalled) == (job_id, "failed", 1, False)
    assert job.task == "fix it" and job.repo == str(not_a_repo)


async def test_a_worker_refuses_a_job_that_redirects_keys_or_turns_the_sandbox_off(
        fleet, pg_url, fresh_sim, tmp_path):
    """Protected settings from the queue (where keys go, the sandbox) are taken only when the
    worker's owner allows them; a refused job fails at once, before any model is called, and
    the worker's JSON log line says which keys and how to allow them."""
    import io

    from orchestrator.faces.fleet_worker import WorkerConfig, run_worker
    from orchestrator.faces.logs import setup_logging

    repo = make_sample_repo(tmp_path / "repo")
    redirected = await fleet.submit(fresh_sim, "fix it [redirect]", str(repo))
    sandbox_off = await fleet.submit(fresh_sim, "fix it [no sandbox]", str(repo),
                                     sets=['sandbox.mode="none"'])
    logged = io.StringIO()
    setup_logging(json=True, stream=logged)
    # a worker whose owner allows a job nothing protected (no --allow-set, no job_may_set)
    await run_worker(WorkerConfig(database_url=pg_url, cache_dir=tmp_path / "c0", drain=True,
                                  env=run_env(HOME=str(tmp_path)), poll_s=0.2))
    lines = [json.loads(line) for line in logged.getvalue().splitlines()]
    assert not fresh_sim.state.requests  # no model was asked anything
    listed = {j.job_id: j for j in await jobs(pg_url)}
    assert listed[redirected].status == listed[sandbox_off].status == "failed"
    assert listed[redirected].attempts == 1 and listed[redirected].run_id is None
    refusals = {line["job_id"]: line["error"] for line in lines if line["event"] == "job failed"}
    assert "providers.sim.base_url" in refusals[redirected]
    assert "--allow-set providers.*.base_url" in refusals[redirected]
    assert "sandbox.mode" in refusals[sandbox_off]
    assert all({"event", "level", "timestamp", "worker"} <= set(line) for line in lines)
    assert all(line["attempt"] == 1 for line in lines if line["event"] == "job failed")


async def test_sigterm_drains_the_running_job_and_the_log_is_json_lines(
        fleet, pg_url, fresh_sim, tmp_path):
    """SIGTERM while a run is building: the worker takes no new job but finishes the one it
    has, then exits 0; every line it logged is a JSON object, role events at info carrying the
    job id, run id and attempt."""
    fleet.slowed(fresh_sim, "sim-builder", 0.5)
    repo = make_sample_repo(tmp_path / "repo")
    job_id = await fleet.submit(fresh_sim, f"{DEMO_TASK} [drain]", str(repo))
    waiting = await fleet.submit(fresh_sim, f"{DEMO_TASK} [never taken]", str(repo))
    worker = fleet.worker("w")

    async def building():
        return bool(fresh_sim.state.requests_for("sim-builder"))

    await fleet.until(building, 60, "the worker to reach the builder")
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.proc.wait(90) == 0
    listed = {j.job_id: j for j in await jobs(pg_url)}
    assert listed[job_id].status == "succeeded" and listed[job_id].commit
    assert listed[waiting].status == "todo"  # drained: nothing new was taken
    lines = [json.loads(line) for line in worker.text().splitlines()]
    roles = [x for x in lines if x["event"] in ("role_started", "role_finished")]
    assert roles and all(x["level"] == "info" for x in roles)
    assert all((x["job_id"], x["run_id"], x["attempt"]) == (job_id, listed[job_id].run_id, 1)
               for x in roles)
    assert {"planner", "builder"} <= {x.get("role") for x in roles}


def test_what_a_job_may_set_is_the_workers_owners_word(tmp_path):
    """``--allow-set`` patterns and ``[fleet] job_may_set`` of the owner's own roles.toml; a
    repository's roles.toml cannot widen it (the key is protected)."""
    from orchestrator.config.trust import is_protected
    from orchestrator.errors import ConfigError
    from orchestrator.faces.fleet_job import (
        JobRefused,
        asked_settings,
        check_job,
        is_allowed,
        owner_allows,
        role_contents,
    )

    roles = role_contents([scenario_path("demo-roles.toml")])
    assert roles[0]["text"] == scenario_path("demo-roles.toml").read_text()  # content, not a path
    asked = asked_settings(roles, ['sandbox.mode="none"'], True)
    assert asked == ["providers.sim.base_url", "providers.sim.api_key_env", "sandbox.mode",
                     "trust_repo_config"]
    assert is_allowed("sandbox.mode", ["sandbox"]) and is_allowed("providers.x.base_url",
                                                                   ["providers.*.base_url"])
    assert not is_allowed("providers.x.api_key_env", ["providers.*.base_url"])
    assert is_protected(("fleet", "job_may_set")) and not is_protected(("fleet", "push"))
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": ""}
    assert owner_allows(env) == ()
    (tmp_path / ".config" / "orchestrate").mkdir(parents=True)
    own = tmp_path / ".config" / "orchestrate" / "roles.toml"
    own.write_text('[fleet]\njob_may_set = ["providers.*.base_url", "providers.*.api_key_env"]\n')
    allowed = owner_allows(env)
    check_job(1, roles, [], False, allowed)  # the owner allows the provider: taken
    with pytest.raises(JobRefused) as refused:
        check_job(2, roles, ['sandbox.mode="none"'], False, allowed)
    assert "sandbox.mode" in str(refused.value) and "providers" not in str(refused.value)
    own.write_text("[fleet]\njob_may_set = \"everything\"\n")
    with pytest.raises(ConfigError):
        owner_allows(env)


async def test_a_database_restart_mid_run_is_survived(pg_cluster, fleet, pg_url, fresh_sim,
                                                     tmp_path):
    """PostgreSQL restarts (every connection dropped) while the builder works: the worker stays
    up, the job is queued again if the run could not go on, and the same run finishes once,
    planned once."""
    if pg_cluster is None:
        pytest.skip("needs the PostgreSQL cluster this test session started (to restart it)")
    fleet.slowed(fresh_sim, "sim-builder", 1.0)
    repo = make_sample_repo(tmp_path / "repo")
    job_id = await fleet.submit(fresh_sim, f"{DEMO_TASK} [restart]", str(repo))
    worker = fleet.worker("w")

    async def building():
        return bool(fresh_sim.state.requests_for("sim-builder"))

    await fleet.until(building, 60, "the worker to reach the builder")
    pg_cluster.restart()

    async def done():
        try:
            (job,) = await jobs(pg_url)
        except Exception:  # the database may still be starting
            return None
        assert job.status != "failed", worker.text()[-3000:]
        return job if job.status == "succeeded" else None

    job = await fleet.until(done, 120, "the run to finish after the restart")
    assert worker.proc.poll() is None, worker.text()[-3000:]  # the worker survived it
    fleet.stop()
    assert job.job_id == job_id and job.state == "succeeded" and job.commit
    with open_registry(tmp_path, pg_url) as reg:
        (run,) = reg.list()
    assert run.run_id == job.run_id and run.state == "succeeded"
    assert _plannings(fresh_sim, "[restart]") == 1  # resumed from its checkpoint, not re-planned


def test_a_run_that_cannot_continue_is_recorded_with_what_it_cost(pg_url):
    """What a run paid for is read back from its mirrored event log (its calls' cost)."""
    from orchestrator.faces.fleet_share import EVENTS, RunFiles, spent

    files = RunFiles(pg_url)
    try:
        files.append("r1", EVENTS, json.dumps({"kind": "call_finished", "cost_usd": 0.25}) + "\n")
        files.append("r1", EVENTS, json.dumps({"kind": "role_started", "role": "builder"}) + "\n"
                     + json.dumps({"kind": "call_finished", "cost_usd": 0.5}) + "\n")
        files.append("r2", EVENTS, json.dumps({"kind": "call_finished", "cost_usd": 9.0}) + "\n")
        assert files.size("r1", EVENTS) == len(files.get("r1")[EVENTS].encode())
    finally:
        files.close()
    assert spent(pg_url, "r1") == 0.75 and spent(pg_url, "nothing") == 0.0
