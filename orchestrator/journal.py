"""A journal of completed model calls, so a resumed run never pays for the same call twice.

LangGraph's checkpoints restore finished nodes and finished explorer branches; a node that was
in flight when the process died runs again from its start. Its sessions then send the same
requests they sent before, and this journal answers those from disk instead of the provider.
The journal wraps the client pool, so nodes and sessions do not know it is there.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .models.client import Completion, ModelClient, Progress, Route, ToolCallData
from .models.fallback import demote
from .sqlite import connect
from .state import CallRecord, Role


def _key(session: str, model: str, messages: Any, tools: Any, response_format: Any) -> str:
    blob = json.dumps([session, model, messages, tools, response_format], sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, reply TEXT);
CREATE TABLE IF NOT EXISTS turns (session TEXT, turn INTEGER, key TEXT, PRIMARY KEY (session, turn));
"""


def turn_of(messages: Sequence[Mapping[str, Any]]) -> int:
    """A call's position in its session: how many replies the session already had."""
    return sum(1 for m in messages if m.get("role") == "assistant")


class CallJournal:
    """Completed calls of one run, keyed by session and the exact request.

    It also remembers which request completed at each (session, turn): a resumed run that sends
    a *different* request at a turn that had completed pays for it again — ``repeated`` counts
    those, and an exact resume keeps it at 0.
    """

    def __init__(self, path: Path) -> None:
        self._db = connect(str(path), schema=_SCHEMA)
        self._lock = threading.Lock()
        self.replayed = 0
        self.repeated = 0
        self.repeats: list[tuple[str, int]] = []

    def check_repeat(self, session: str, turn: int, key: str) -> bool:
        """Record a paid call at a turn that had completed with another request."""
        with self._lock:
            row = self._db.execute("SELECT key FROM turns WHERE session = ? AND turn = ?",
                                   (session, turn)).fetchone()
            if row is None or row[0] == key:
                return False
            self.repeated += 1
            self.repeats.append((session, turn))
            return True

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._db.execute("SELECT reply FROM calls WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        data = json.loads(row[0])
        record = CallRecord.model_validate(data["record"]).model_copy(update={"replayed": True})
        self.replayed += 1
        return Completion(
            content=data["content"],
            tool_calls=tuple(ToolCallData(**c) for c in data["tool_calls"]),
            finish_reason=data["finish_reason"],
            record=record,
            reasoning=data.get("reasoning"),
        )

    def put(self, key: str, completion: Completion) -> None:
        reply = json.dumps({
            "content": completion.content,
            "tool_calls": [vars(c) for c in completion.tool_calls],
            "finish_reason": completion.finish_reason,
            "reasoning": completion.reasoning,
            "record": completion.record.model_dump(mode="json"),
        })
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO calls VALUES (?, ?)", (key, reply))

    def put_turn(self, session: str, turn: int, key: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO turns VALUES (?, ?, ?)", (session, turn, key))

    def close(self) -> None:
        self._db.close()


class JournaledClient:
    """A ``ModelClient`` that answers repeated requests from the journal."""

    def __init__(self, inner: ModelClient, journal: CallJournal) -> None:
        self.inner = inner
        self.journal = journal

    @property
    def route(self) -> Route:  # the serving route can change under a fallback chain
        return self.inner.route

    def demote(self, reason: str) -> bool:
        return demote(self.inner, reason)

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        session: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
        response_format: Mapping[str, Any] | None = None,
        progress: Progress | None = None,
    ) -> Completion:
        key = _key(session, self.inner.route.model.id, messages, tools, response_format)
        cached = self.journal.get(key)
        if cached is not None:
            return cached
        turn = turn_of(messages)
        self.journal.check_repeat(session, turn, key)
        completion = await self.inner.complete(
            messages, session=session, tools=tools, response_format=response_format,
            progress=progress,
        )
        self.journal.put(key, completion)
        self.journal.put_turn(session, turn, key)
        return completion


class JournaledPool:
    """The client pool with every role's client journaled; everything else passes through."""

    def __init__(self, pool: Any, journal: CallJournal) -> None:
        self._pool = pool
        self.journal = journal

    def for_role(self, role: Role, *, temperature: float | None = None) -> ModelClient:
        return JournaledClient(self._pool.for_role(role, temperature=temperature), self.journal)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)
