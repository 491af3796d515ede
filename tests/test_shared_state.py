"""A run with ORCHESTRATE_DATABASE_URL keeps its checkpoints, registry and quota in Postgres."""

from __future__ import annotations

import psycopg
from conftest import run_env, sim_roles

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK
from orchestrator.record.registry import open_registry

pytest_plugins = ["pg"]


def test_run_with_a_database_url_shares_state_in_postgres(fresh_sim, sample_repo, pg_url):
    env = run_env(ORCHESTRATE_DATABASE_URL=pg_url)
    paused = api.run(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=env,
                     approve_plan=True)
    assert paused.status == "awaiting_approval"
    assert not (sample_repo / ".orchestrate" / "state" / "checkpoints.sqlite").exists()
    with psycopg.connect(pg_url) as conn:
        threads = {r[0] for r in conn.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    assert paused.run_id in threads
    with open_registry(sample_repo, pg_url) as registry:
        assert registry.get(paused.run_id).state == "awaiting_approval"

    done = api.resume(paused.run_id, repo=sample_repo, env=env, approve=True)
    assert done.status == "succeeded"
    with open_registry(sample_repo, pg_url) as registry:
        record = registry.get(paused.run_id)
    assert record.state == "succeeded" and record.commit == done.commit
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT count(*) FROM orchestrate_quota_usage").fetchone()
    assert rows[0] > 0  # usage recorded in the shared ledger
