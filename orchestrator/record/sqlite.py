"""One way to open the small SQLite files that several runs and processes share.

WAL lets readers and a writer work at once, and the busy timeout makes writers wait. The one
moment the timeout does not cover is a new file's switch to WAL (and its first schema) while
another connection holds it: that part is retried for a while instead of failing the run.
"""

from __future__ import annotations

import sqlite3
import time

_LOCKED = ("locked", "busy")


def connect(path: str, *, schema: str = "", timeout: float = 30.0, wal: bool = True,
            attempts: int = 100) -> sqlite3.Connection:
    """An autocommit connection usable from any thread (callers serialise their own use)."""
    db = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    setup = ("PRAGMA journal_mode=WAL;" if wal and path != ":memory:" else "") + schema
    for attempt in range(attempts):
        try:
            if setup:
                db.executescript(setup)
            return db
        except sqlite3.OperationalError as exc:
            if not any(word in str(exc) for word in _LOCKED) or attempt == attempts - 1:
                db.close()
                raise
            time.sleep(0.05)
    return db
