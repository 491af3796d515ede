"""The call journal in the shared database, so a run resumed on another machine replays what
the first one paid for.

One table, ``orchestrate_calls``, keyed by run id and request key: the reply (``NULL`` while
the request was sent and never answered: the call in flight when a worker died) and the
(session, turn) it answered. It behaves as ``CallJournal`` (``journal.py``) does: read once as
the run opens, every completed call written before the session acts on it, every request
recorded as asked before it goes out. A dropped connection (a database restart) is opened
again once before a write is given up.
"""

from __future__ import annotations

import threading
from typing import Any

from orchestrator.models.base import Completion
from orchestrator.models.journal import CallJournal, _from_json
from orchestrator.record.store import SharedConnection, database_errors

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS orchestrate_calls (run_id TEXT NOT NULL, key TEXT NOT NULL, "
    "reply TEXT, session TEXT, turn INTEGER, PRIMARY KEY (run_id, key))",
)


class PostgresJournal(CallJournal):
    """The completed (and asked) calls of run ``run_id`` in ``orchestrate_calls``."""

    def __init__(self, database_url: str, run_id: str) -> None:
        # not super().__init__ (the file's): the same counters over its own storage
        self._url, self._run_id = database_url, run_id
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._opening = None
        self.replayed = self.repeated = 0
        self.repeats: list[tuple[str, int]] = []
        with database_errors(database_url, "create the call journal in"):
            self._shared = SharedConnection(database_url)
            self._shared.create("orchestrate.journal", _SCHEMA, None)
            rows = self._run("SELECT key, reply IS NOT NULL, session, turn FROM "
                             "orchestrate_calls WHERE run_id = %s", (run_id,))
        self._keys = {k for k, done, _, _ in rows if done}
        self._turns = {(s, t): k for k, done, s, t in rows if done and s is not None}
        self._asked = {k for k, done, _, _ in rows if not done}

    def _run(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """One statement; a broken connection is opened again once (a database restart)."""
        return self._shared.run(sql, args)

    def _ready(self) -> None:
        return None

    def _write_asked(self, key: str) -> None:
        self._run("INSERT INTO orchestrate_calls (run_id, key) VALUES (%s, %s) "
                  "ON CONFLICT DO NOTHING", (self._run_id, key))

    def _write(self, rows: list[tuple[str, str, str, int]]) -> None:
        for key, reply, session, turn in rows:
            self._run(
                "INSERT INTO orchestrate_calls (run_id, key, reply, session, turn) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (run_id, key) DO UPDATE SET "
                "reply = excluded.reply, session = excluded.session, turn = excluded.turn",
                (self._run_id, key, reply, session, turn))

    def get(self, key: str) -> Completion | None:
        if key not in self._keys:
            return None
        rows = self._run("SELECT reply FROM orchestrate_calls WHERE run_id = %s AND key = %s",
                         (self._run_id, key))
        completion = _from_json(rows[0][0]) if rows and rows[0][0] is not None else None
        if completion is not None:
            self.replayed += 1
        return completion

    def close(self) -> None:
        self._shared.close()
        self.check()
