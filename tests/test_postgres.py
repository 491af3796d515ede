"""Shared state in a real PostgreSQL server: checkpoints, the run registry (one contract suite
for both backends) and the quota ledger, with concurrent writers in separate processes."""

from __future__ import annotations

import multiprocessing
import operator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph

from orchestrator.errors import UsageError
from orchestrator.record.registry import PostgresRegistry, SqliteRegistry, new_record, open_registry
from orchestrator.record.store import open_checkpointer

pytest_plugins = ["pg"]

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


class _Counter(TypedDict):
    steps: Annotated[list[str], operator.add]


def _graph() -> StateGraph:
    g = StateGraph(_Counter)

    async def one(_s: _Counter) -> dict:
        return {"steps": ["one"]}

    async def two(_s: _Counter) -> dict:
        return {"steps": ["two"]}

    g.add_node("one", one)
    g.add_node("two", two)
    g.add_edge(START, "one")
    g.add_edge("one", "two")
    g.add_edge("two", END)
    return g


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_checkpointer_keeps_a_thread_across_connections(backend, tmp_path, request):
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    cfg = {"configurable": {"thread_id": "run-1"}}
    async with open_checkpointer(tmp_path, url) as saver:
        app = _graph().compile(checkpointer=saver, interrupt_before=["two"])
        await app.ainvoke({"steps": []}, cfg, durability="sync")
    async with open_checkpointer(tmp_path, url) as saver:  # a new connection, as after a crash
        app = _graph().compile(checkpointer=saver)
        assert (await app.aget_state(cfg)).next == ("two",)
        out = await app.ainvoke(None, cfg, durability="sync")
    assert out["steps"] == ["one", "two"]
    assert (tmp_path / ".orchestrate" / "state" / "checkpoints.sqlite").exists() == (url is None)


async def test_checkpointer_refuses_a_url_that_is_not_postgres(tmp_path):
    with pytest.raises(UsageError, match="not a PostgreSQL URL"):
        async with open_checkpointer(tmp_path, "mysql://x@127.0.0.1/db"):
            pass


async def test_two_checkpointers_set_up_one_database_at_once(pg_url, tmp_path):
    import asyncio

    async def open_one() -> None:
        async with open_checkpointer(tmp_path, pg_url):
            pass

    await asyncio.gather(*(open_one() for _ in range(4)))


# --- run registry: one contract, two backends ----------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def registry(request, tmp_path):
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    with open_registry(tmp_path, url) as reg:
        yield reg


def test_registry_records_a_run_from_start_to_finish(registry):
    assert registry.get("r1") is None and registry.list() == []
    registry.record_start(new_record("r1", "fix it", "/repos/a", "orchestrate/r1", now=T0))
    run = registry.get("r1")
    assert run and run.state == "running" and run.created_at == T0 and run.host
    registry.record_finish("r1", "succeeded", "tests pass", 0.25, "abc123")
    run = registry.get("r1")
    assert (run.state, run.reason, run.cost_usd, run.commit) == (
        "succeeded", "tests pass", 0.25, "abc123")
    assert run.created_at == T0 and run.updated_at > T0


def test_registry_lists_newest_first_and_filters_by_repo(registry):
    for i, repo in enumerate(["/a", "/b", "/a"]):
        registry.record_start(new_record(f"r{i}", f"t{i}", repo, f"b{i}",
                                         now=T0 + timedelta(minutes=i)))
    assert [r.run_id for r in registry.list()] == ["r2", "r1", "r0"]
    assert [r.run_id for r in registry.list("/a")] == ["r2", "r0"]
    assert registry.list("/nowhere") == []


def test_registry_resume_keeps_created_at_and_job_link(registry):
    registry.record_start(new_record("r1", "t", "/a", "b", job_id=7, now=T0))
    registry.record_finish("r1", "stopped", "killed", 0.1, None)
    registry.record_start(new_record("r1", "t", "/a", "b", now=T0 + timedelta(hours=1)))
    run = registry.get("r1")
    assert run.state == "running" and run.created_at == T0 and run.job_id == 7
    assert registry.for_job(7).run_id == "r1" and registry.for_job(8) is None
    registry.record_finish("unknown", "failed", "x", 0.0, None)  # ignored
    assert registry.get("unknown") is None


def _finish_many(url: str | None, path: str, worker: int) -> None:
    with open_registry(Path(path), url) as reg:
        for i in range(20):
            reg.record_start(new_record(f"w{worker}-{i}", "t", "/a", "b"))
            reg.record_finish(f"w{worker}-{i}", "succeeded", "", 0.01, None)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_registry_takes_writes_from_several_processes(backend, tmp_path, request):
    url = request.getfixturevalue("pg_url") if backend == "postgres" else None
    ctx = multiprocessing.get_context("fork")  # spawn re-imports langgraph: seconds
    procs = [ctx.Process(target=_finish_many, args=(url, str(tmp_path), w)) for w in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    with open_registry(tmp_path, url) as reg:
        runs = reg.list()
    assert len(runs) == 60 and {r.state for r in runs} == {"succeeded"}


def test_registry_backend_follows_the_url(tmp_path, pg_url):
    with open_registry(tmp_path) as local, open_registry(tmp_path, pg_url) as shared:
        assert isinstance(local, SqliteRegistry) and isinstance(shared, PostgresRegistry)
    assert (tmp_path / ".orchestrate" / "state" / "runs.sqlite").exists()


# --- quota ledger: the SQLite one's behaviour, shared by processes --------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def ledger(request, tmp_path):
    from orchestrator.models.quota_pg import build_ledger

    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    led = build_ledger(url, {"XDG_STATE_HOME": str(tmp_path)})
    yield led
    led.close()


def test_ledger_caps_settles_and_marks_like_the_sqlite_one(ledger):
    assert ledger.reserve("sim/a", 600, 1000, T0) and not ledger.reserve("sim/a", 500, 1000, T0)
    ledger.settle("sim/a", 600, 450, 0.02, T0)
    assert ledger.used_today("sim/a", T0) == 450
    assert ledger.reserve("sim/a", 550, 1000, T0) and ledger.used_today("sim/a", T0) == 1000
    assert not ledger.reserve("sim/a", 1, 1000, T0)
    assert ledger.reserve("sim/a", 10, 1000, T0 + timedelta(days=1))  # a new UTC day
    assert ledger.reserve("sim/b", 10**9, None, T0) and not ledger.reserve("sim/c", 11, 10, T0)
    assert ledger.exhausted_until("sim/a", T0) is None
    ledger.mark_exhausted("sim/a", T0 + timedelta(hours=2), "insufficient_quota")
    assert ledger.exhausted_until("sim/a", T0) == T0 + timedelta(hours=2)
    assert ledger.exhausted_until("sim/a", T0 + timedelta(hours=3)) is None
    rows = {r.model: r for r in ledger.rows(T0, {"sim/a": 1000, "sim/d": 5})}
    assert {"sim/a", "sim/b", "sim/d"} <= set(rows) <= {"sim/a", "sim/b", "sim/c", "sim/d"}
    assert rows.get("sim/c") is None or rows["sim/c"].tokens == 0  # a refused first draw
    a = rows["sim/a"]
    assert (a.tokens, a.usd, a.calls, a.cap_tokens, a.reason) == (1000, 0.02, 1, 1000,
                                                                  "insufficient_quota")
    assert rows["sim/d"].tokens == 0 and rows["sim/b"].exhausted_until is None


def test_ledger_keeps_explorer_claims_per_model_once_per_run_and_session(ledger):
    """Recording one explorer again (a resumed run) replaces its row instead of adding to it."""
    tag = f"m-{T0.timestamp():.0f}-{id(ledger)}"
    first = {"submitted": 4, "verified": 1, "dropped": 3, "path": 2, "trivial": 1}
    ledger.record_claims("run-1", "explorer-1", f"{tag}-a", first, T0)
    ledger.record_claims("run-1", "explorer-1", f"{tag}-a", first, T0)
    ledger.record_claims("run-1", "explorer-2", f"{tag}-a", {"submitted": 2, "verified": 2}, T0)
    ledger.record_claims("run-2", "explorer-1", f"{tag}-a", {"submitted": 1, "dropped": 1,
                                                             "unrelated": 1}, T0 + timedelta(days=1))
    ledger.record_claims("run-3", "explorer-1", f"{tag}-b", {"submitted": 3, "verified": 3},
                         T0 - timedelta(days=3))
    rows = {r.model: r for r in ledger.claim_rows(T0) if r.model.startswith(tag)}
    assert set(rows) == {f"{tag}-a"}  # b was recorded before the window
    a = rows[f"{tag}-a"]
    assert (a.runs, a.explorers, a.since) == (2, 3, "2026-03-01")
    assert {k: v for k, v in a.counts.items() if v} == {
        "submitted": 7, "verified": 3, "dropped": 4, "path": 2, "trivial": 1, "unrelated": 1}
    older = {r.model for r in ledger.claim_rows(T0 - timedelta(days=7))}
    assert {f"{tag}-a", f"{tag}-b"} <= older


def _draw(url: str, start, granted) -> None:
    from orchestrator.models.quota_pg import PostgresQuotaLedger

    ledger = PostgresQuotaLedger(url)
    start.wait(30)
    count = 0
    while ledger.reserve("sim/shared", 10, 5_000, T0):
        ledger.settle("sim/shared", 10, 10, 0.0001, T0)
        count += 1
    granted.put(count)
    ledger.close()


def test_two_processes_on_one_budget_stop_at_the_budget_not_twice_it(pg_url):
    from orchestrator.models.quota_pg import PostgresQuotaLedger

    ctx = multiprocessing.get_context("fork")
    start, granted = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_draw, args=(pg_url, start, granted)) for _ in range(2)]
    for p in procs:
        p.start()
    start.set()
    counts = [granted.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    assert sum(counts) == 500, counts  # 5,000 tokens, 10 at a time, whoever drew them
    ledger = PostgresQuotaLedger(pg_url)
    (row,) = ledger.rows(T0)
    ledger.close()
    assert (row.tokens, row.calls) == (5_000, 500) and row.usd == pytest.approx(0.05)


def test_a_shared_connection_the_server_dropped_is_closed_and_opened_again(pg_url):
    """The one connection class the registry, ledger, journal, run files and leases use: a
    backend terminated under it is closed (not left open) and the statement runs on a new one."""
    import psycopg

    from orchestrator.record.store import SharedConnection

    shared = SharedConnection(pg_url)
    try:
        ((first_pid,),) = shared.run("SELECT pg_backend_pid()")
        dropped = shared._conn
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (first_pid,))
        ((second_pid,),) = shared.run("SELECT pg_backend_pid()")
        assert second_pid != first_pid and dropped is not None and dropped.closed
        with pytest.raises(psycopg.errors.UndefinedTable):  # not dropped: raised as it is
            shared.run("SELECT * FROM no_such_table")
        ((third_pid,),) = shared.run("SELECT pg_backend_pid()")
        assert third_pid == second_pid
    finally:
        shared.close()
