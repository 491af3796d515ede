"""The quota ledger: reset times, atomic caps across connections, and proactive routing that
carries over from one run to the next through the same SQLite file."""

from __future__ import annotations

import sqlite3
import threading
from datetime import UTC, datetime, timedelta

import pytest
from conftest import scenario_with
from routing_kit import MESSAGES, PLAN, call, planner_session, pool_for

from orchestrator.models.errors import parse_duration, quota_reset, retry_after_s
from orchestrator.models.quota import QuotaLedger, default_ledger_path, quota_rows
from orchestrator.sim import ModelBehavior, Reply

# every simulator test runs on both wire APIs; the pools it makes are closed after it
pytestmark = [pytest.mark.both_apis, pytest.mark.usefixtures("pools_closed")]

NOW = datetime(2026, 3, 1, 15, 30, tzinfo=UTC)


def test_durations_and_reset_times_from_headers():
    assert parse_duration("6m0s") == 360 and parse_duration("20ms") == 0.02
    assert parse_duration("1h2m3.5s") == 3723.5 and parse_duration("7") == 7
    assert parse_duration("soon") is None
    assert retry_after_s({"Retry-After-Ms": "250"}, NOW) == 0.25
    assert retry_after_s({"retry-after": "Sun, 01 Mar 2026 15:31:00 GMT"}, NOW) == 60
    assert quota_reset({"x-ratelimit-reset-tokens": "2h0m0s"}, NOW) == NOW + timedelta(hours=2)
    assert quota_reset({}, NOW) == datetime(2026, 3, 2, tzinfo=UTC)


def test_default_path_follows_xdg_state_home(tmp_path):
    assert default_ledger_path({"XDG_STATE_HOME": str(tmp_path)}) == (
        tmp_path / "orchestrate" / "quota.sqlite")
    assert default_ledger_path({"HOME": "/home/u"}).as_posix() == (
        "/home/u/.local/state/orchestrate/quota.sqlite")


def test_two_writers_never_overspend_a_cap_together(tmp_path):
    path = tmp_path / "quota.sqlite"
    granted: list[int] = []

    def spend() -> None:
        ledger = QuotaLedger(path)  # its own connection, as another process would have
        for _ in range(200):
            if ledger.reserve("sim/m", 7, 500, NOW):
                granted.append(7)
        ledger.close()

    threads = [threading.Thread(target=spend) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(granted) == 497  # the largest multiple of 7 under the cap, across 4 writers
    assert QuotaLedger(path).used_today("sim/m", NOW) == 497


def test_exhaustion_expires_at_its_reset_and_rows_show_it(tmp_path):
    ledger = QuotaLedger(tmp_path / "q.sqlite")
    ledger.mark_exhausted("sim/a", NOW + timedelta(hours=1), "insufficient_quota")
    ledger.settle("sim/b", 0, 1200, 0.5, NOW)
    assert ledger.exhausted_until("sim/a", NOW) == NOW + timedelta(hours=1)
    assert ledger.exhausted_until("sim/a", NOW + timedelta(hours=2)) is None
    rows = {r.model: r for r in quota_rows(tmp_path / "q.sqlite", now=NOW, caps={"sim/b": 5000})}
    assert rows["sim/a"].exhausted_until is not None and rows["sim/a"].reason
    assert (rows["sim/b"].tokens, rows["sim/b"].usd, rows["sim/b"].calls) == (1200, 0.5, 1)
    assert rows["sim/b"].cap_tokens == 5000
    assert quota_rows(tmp_path / "missing.sqlite") == []


async def test_quota_runs_out_mid_run_and_the_next_run_starts_on_the_fallback(
        fresh_sim, sample_repo, tmp_path):
    steps = [call("list"), call("read", path="stats.py"), call("submit", **PLAN)]
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": ModelBehavior(quota_tokens=1, script=steps),  # the first call spends it
        "sim-backup": ModelBehavior(script=steps),
    }))
    path = tmp_path / "state" / "quota.sqlite"
    pool, events = pool_for(fresh_sim, ledger=QuotaLedger(path))
    outcome, _, telemetry = await planner_session(pool, sample_repo)
    assert outcome.payload.goal == "g"
    assert [c.served_model for c in telemetry.calls] == ["sim-planner", "sim-backup", "sim-backup"]
    assert len(fresh_sim.state.requests_for("sim-planner")) == 2  # served, then insufficient_quota
    assert any("served by fallback" in w for w in events.warnings())

    fresh_sim.state.clear()
    pool, events = pool_for(fresh_sim, ledger=QuotaLedger(path))  # the next run
    chain = pool.for_role("planner")
    assert chain.route.alias == "backup-sim"  # proactive: known before any call
    outcome, _, telemetry = await planner_session(pool, sample_repo, "planner-2")
    assert not fresh_sim.state.requests_for("sim-planner")
    assert {c.served_model for c in telemetry.calls} == {"sim-backup"}
    assert any("skipped, quota exhausted until" in w for w in events.warnings())
    rows = {r.model: r for r in quota_rows(path)}
    assert rows["sim/sim-planner"].exhausted_until is not None
    assert rows["sim/sim-backup"].calls == 5


async def test_daily_cap_in_the_role_map_routes_proactively(fresh_sim, tmp_path):
    fresh_sim.set_scenario(scenario_with(**{"sim-backup": ModelBehavior(script=[Reply(content="b")])}))
    ledger = QuotaLedger(tmp_path / "q.sqlite")
    pool, events = pool_for(fresh_sim, "models.planner-sim.quota_tokens_per_day=100",
                            ledger=ledger)
    first = await pool.for_role("planner").complete(MESSAGES, session="p-1")
    assert first.record.served_model == "sim-planner"
    ledger.settle("sim/sim-planner", 0, 100, 0.0, datetime.now(UTC))  # another process spent it
    second = await pool.for_role("planner").complete(MESSAGES, session="p-2")
    assert second.content == "b" and len(fresh_sim.state.requests_for("sim-planner")) == 1
    assert any("daily quota of 100 tokens is used" in w for w in events.warnings())


async def test_the_summarizer_follows_its_own_chain_when_the_main_model_is_exhausted(
        fresh_sim, tmp_path):
    quota = Reply(error={"status": 429, "code": "insufficient_quota", "type": "insufficient_quota",
                         "message": "You exceeded your current quota."})
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": ModelBehavior(script=[quota]),
        "sim-summarizer": ModelBehavior(script=[Reply(content="handoff")]),
        "sim-backup": ModelBehavior(script=[Reply(content="plan")]),
    }))
    pool, _ = pool_for(fresh_sim, 'summarizer.model="planner-sim"',
                       'summarizer.fallback=["summarizer-sim"]',
                       ledger=QuotaLedger(tmp_path / "q.sqlite"))
    planner = await pool.for_role("planner").complete(MESSAGES, session="planner-1")
    assert planner.record.served_model == "sim-backup"
    summary = await pool.for_role("summarizer").complete(MESSAGES, session="summarizer-1")
    assert summary.content == "handoff" and summary.record.fallback_step == 1
    assert len(fresh_sim.state.requests_for("sim-planner")) == 1  # only the planner's attempt


def test_a_ledger_from_an_older_version_gains_the_new_claim_columns(tmp_path):
    path = tmp_path / "quota.sqlite"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE claims (run_id TEXT NOT NULL, session TEXT NOT NULL, day TEXT NOT "
                "NULL, model TEXT NOT NULL, submitted INTEGER NOT NULL DEFAULT 0, "
                "PRIMARY KEY (run_id, session))")
    old.execute("INSERT INTO claims VALUES ('r0', 'explorer-1', '2026-03-01', 'm', 3)")
    old.commit()
    old.close()
    ledger = QuotaLedger(path)
    ledger.record_claims("r1", "explorer-1", "m", {"submitted": 2, "failed": 1, "path": 2}, NOW)
    (row,) = ledger.claim_rows(NOW)
    assert (row.runs, row.counts["submitted"], row.counts["failed"], row.counts["path"]) == (2, 5, 1, 2)
    ledger.close()
