"""Retention: ``orchestrate jobs --prune --older-than DAYS`` removes finished jobs and finished
runs (with their journal, run files, leases) older than that, and never what still runs."""

from __future__ import annotations

import json

import pytest
from conftest import run_env

from orchestrator.faces.fleet import jobs, submit
from orchestrator.faces.fleet_share import EVENTS, RunFiles
from orchestrator.faces.fleet_worker import WorkerConfig, run_worker
from orchestrator.models.journal_pg import PostgresJournal
from orchestrator.record.lease import RunLease
from orchestrator.record.registry import PostgresRegistry, new_record
from orchestrator.record.store import connect_postgres

pytest_plugins = ["pg", "fleet_kit"]
pytest.importorskip("procrastinate", reason="the fleet extra is not installed")


def _run(url: str, run_id: str, job_id: int | None, state: str) -> None:
    """A run as a worker leaves it: registry row, journal rows, mirrored files, lease."""
    registry = PostgresRegistry(url)
    try:
        registry.record_start(new_record(run_id, "t", "/r", f"orchestrate/{run_id}", job_id=job_id))
        if state != "running":
            registry.record_finish(run_id, state, "", 0.1, None)  # type: ignore[arg-type]
    finally:
        registry.close()
    journal = PostgresJournal(url, run_id)
    journal.ask(f"key-{run_id}")
    journal.close()
    files = RunFiles(url)
    files.append(run_id, EVENTS, '{"kind": "run_started"}\n')
    files.close()
    lease = RunLease(url, "w", job_id)
    lease.take(run_id)
    lease.close()


def _count(url: str, table: str, run_id: str) -> int:
    with connect_postgres(url) as conn:
        return conn.execute(f"SELECT count(*) FROM {table} WHERE run_id = %s",
                            (run_id,)).fetchone()[0]


async def test_prune_removes_what_ended_long_ago_and_nothing_that_runs(fleet, pg_url, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()  # not a repository: a worker fails these jobs at once
    old_job = await submit("old", str(plain), database_url=pg_url)
    new_job = await submit("new", str(plain), database_url=pg_url)
    await run_worker(WorkerConfig(database_url=pg_url, cache_dir=tmp_path / "c", drain=True,
                                  env=run_env(), poll_s=0.2))
    waiting = await submit("waiting", str(plain), database_url=pg_url)  # todo: never pruned
    _run(pg_url, "old-done", old_job, "succeeded")
    _run(pg_url, "old-running", None, "running")
    _run(pg_url, "old-stopped-of-waiting-job", waiting, "stopped")  # its job will resume it
    _run(pg_url, "new-done", new_job, "failed")
    with connect_postgres(pg_url) as conn:  # forty days pass for the "old" ones
        conn.execute("UPDATE procrastinate_events SET at = at - interval '40 days' "
                     "WHERE job_id = %s", (old_job,))
        conn.execute("UPDATE orchestrate_runs SET updated_at = updated_at - interval '40 days'"
                     " WHERE run_id LIKE 'old-%%'")

    refused = fleet.cli(tmp_path, "jobs", "--prune")
    assert refused.returncode == 2 and "--older-than" in refused.stderr
    bad = fleet.cli(tmp_path, "jobs", "--prune", "--older-than", "0")
    assert bad.returncode == 2 and "above 0" in bad.stderr
    counted = fleet.cli(tmp_path, "jobs", "--prune", "--older-than", "30", "--dry-run",
                   "--json")
    assert counted.returncode == 0, counted.stderr
    assert json.loads(counted.stdout) == {"jobs": 1, "runs": 1, "rows": 3,
                                          "older_than_days": 30.0, "dry_run": True}
    assert len(await jobs(pg_url)) == 3  # the dry run removed nothing
    done = fleet.cli(tmp_path, "jobs", "--prune", "--older-than", "30")
    assert done.returncode == 0, done.stderr
    assert "removed 1 finished jobs and 1 finished runs" in done.stdout

    left = {j.job_id: j.status for j in await jobs(pg_url)}
    assert left == {new_job: "failed", waiting: "todo"}
    registry = PostgresRegistry(pg_url)
    try:
        runs = {r.run_id for r in registry.list()}
    finally:
        registry.close()
    assert runs == {"old-running", "old-stopped-of-waiting-job", "new-done"}
    for table in ("orchestrate_calls", "orchestrate_run_files", "orchestrate_leases"):
        assert _count(pg_url, table, "old-done") == 0, table
        assert _count(pg_url, table, "old-running") == 1, table
        assert _count(pg_url, table, "new-done") == 1, table
    again = fleet.cli(tmp_path, "jobs", "--prune", "--older-than", "30", "--json")
    assert json.loads(again.stdout)["runs"] == 0
