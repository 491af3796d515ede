"""A fleet job's end written through a database restart (``faces/fleet_fence.through_restart``),
against the PostgreSQL cluster this test session started, stopped and started again."""

from __future__ import annotations

import asyncio
import threading

import pytest

from orchestrator.errors import DatabaseUnavailable
from orchestrator.faces.fleet_fence import through_restart
from orchestrator.record.database import connect_postgres

pytest.importorskip("procrastinate", reason="the fleet extra is not installed")
pytest_plugins = ["pg"]


def _writer(url: str, done: list[int]):
    async def write() -> None:
        conn = await asyncio.to_thread(connect_postgres, url)
        try:
            done.append(conn.execute("SELECT 1").fetchone()[0])
        finally:
            conn.close()
    return write


async def test_a_job_s_end_is_written_once_the_database_is_back(pg_cluster, pg_url):
    if pg_cluster is None:
        pytest.skip("needs the PostgreSQL cluster this test session started (to stop it)")
    done: list[int] = []
    pg_cluster.down()
    back = threading.Timer(1.5, pg_cluster.up)
    back.start()
    try:
        await through_restart(_writer(pg_url, done), job_id=1, away_s=60)
    finally:
        back.join()
    assert done == [1]


async def test_a_database_away_longer_than_allowed_is_still_an_error(pg_cluster, pg_url):
    if pg_cluster is None:
        pytest.skip("needs the PostgreSQL cluster this test session started (to stop it)")
    done: list[int] = []
    pg_cluster.down()
    try:
        with pytest.raises(DatabaseUnavailable, match="cannot connect to the database"):
            await through_restart(_writer(pg_url, done), job_id=1, away_s=1.0)
    finally:
        pg_cluster.up()
    assert done == []
    await through_restart(_writer(pg_url, done), job_id=1, away_s=1.0)
    assert done == [1]
