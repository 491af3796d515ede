"""Persistence: the checkpointer factory for a target repository's ``.orchestrate/`` folder.

Checkpoints are written with ``durability="sync"`` by the API, so model spend and git side
effects never re-run after a crash. The serializer allow-lists our own state types, so loading
a checkpoint never deserialises anything else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiosqlite
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from . import state

STATE_DIR = ".orchestrate"
_STATE_TYPES = [
    state.RunState, state.Plan, state.Citation, state.Claim, state.Findings, state.BuildReport,
    state.Review, state.ExplorerResult, state.CheckResult, state.VerifyResult, state.Handoff,
    state.CallRecord,
]


def state_dir(repo: Path) -> Path:
    path = repo / STATE_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


def serializer() -> JsonPlusSerializer:
    return JsonPlusSerializer(allowed_msgpack_modules=_STATE_TYPES)


@asynccontextmanager
async def sqlite_checkpointer(repo: Path) -> AsyncIterator[AsyncSqliteSaver]:
    """An ``AsyncSqliteSaver`` on ``<repo>/.orchestrate/checkpoints.sqlite``."""
    conn = await aiosqlite.connect(str(state_dir(repo) / "checkpoints.sqlite"))
    try:
        await conn.execute("PRAGMA journal_mode=WAL")
        yield AsyncSqliteSaver(conn, serde=serializer())
    finally:
        await conn.close()
