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


class CallJournal:
    """Completed calls of one run, keyed by session and the exact request."""

    def __init__(self, path: Path) -> None:
        self._db = connect(str(path),
                           schema="CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, reply TEXT);")
        self._lock = threading.Lock()
        self.replayed = 0

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
        )

    def put(self, key: str, completion: Completion) -> None:
        reply = json.dumps({
            "content": completion.content,
            "tool_calls": [vars(c) for c in completion.tool_calls],
            "finish_reason": completion.finish_reason,
            "record": completion.record.model_dump(mode="json"),
        })
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO calls VALUES (?, ?)", (key, reply))

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
        completion = await self.inner.complete(
            messages, session=session, tools=tools, response_format=response_format,
            progress=progress,
        )
        self.journal.put(key, completion)
        return completion


class JournaledPool:
    """The client pool with every role's client journaled; everything else passes through."""

    def __init__(self, pool: Any, journal: CallJournal) -> None:
        self._pool = pool
        self.journal = journal

    def for_role(self, role: Role) -> ModelClient:
        return JournaledClient(self._pool.for_role(role), self.journal)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)
