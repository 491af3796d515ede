"""A journal of completed model calls, so a resumed run never pays for the same call twice.

LangGraph's checkpoints restore finished nodes and finished explorer branches; a node that was
in flight when the process died runs again from its start. Its sessions then send the same
requests they sent before, and this journal answers those from disk instead of the provider.
The journal wraps the client pool, so nodes and sessions do not know it is there.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.models.base import (
    Choice,
    Completion,
    ModelClient,
    Progress,
    Route,
    ToolCallData,
    Until,
)
from orchestrator.models.fallback import demote
from orchestrator.record.sqlite import connect
from orchestrator.state import CallRecord, Role
from orchestrator.timing import phase


def _key(session: str, model: str, messages: Any, tools: Any, response_format: Any) -> str:
    """A request's journal key (the reference form; ``RequestKeys`` gets the same incrementally)."""
    blob = json.dumps([session, model, messages, tools, response_format], sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, default=str).encode()


class RequestKeys:
    """One session's journal keys and turns, the history hashed once per message.

    The key hashes ``[session, model, messages, tools, response_format]`` as sorted JSON (the
    form ``_key`` writes in one go, so journals of either kind match). The hash state after each
    message is kept with the message, so the next request hashes only what was added; a message
    replaced in place of another (a masked output) rehashes from there on.
    """

    def __init__(self) -> None:
        self._head = b""
        self._chain: list[tuple[Any, int]] = []  # (sha256 state, turn) after each message
        self._messages: list[Mapping[str, Any]] = []  # the messages the chain hashed
        self._tail_of: tuple[Any, Any] = (None, None)  # (tools, response_format) and
        self._tail = b""  # their JSON

    def key(self, session: str, model: str, messages: Sequence[Mapping[str, Any]],
            tools: Any, response_format: Any) -> tuple[str, int]:
        """(the request's key, its turn: how many replies the session already had)."""
        head = b"[" + _json(session) + b", " + _json(model) + b", ["
        n = 0
        if head == self._head:
            n = _common_prefix(self._messages, messages)
        else:
            self._head = head
        del self._chain[n:], self._messages[n:]
        if n:
            hashed, turn = self._chain[n - 1]
            hashed = hashed.copy()
        else:
            hashed, turn = hashlib.sha256(head), 0
        for i in range(n, len(messages)):
            message = messages[i]
            hashed.update(b", " + _json(message) if i else _json(message))
            turn += message.get("role") == "assistant"
            self._chain.append((hashed.copy(), turn))
            self._messages.append(message)
        tail_of = (None if tools is None else list(tools), response_format)
        if tail_of != self._tail_of:
            self._tail_of = tail_of
            self._tail = b"], " + _json(tools) + b", " + _json(response_format) + b"]"
        hashed.update(self._tail)
        return hashed.hexdigest(), turn


def _common_prefix(old: list[Mapping[str, Any]], new: Sequence[Mapping[str, Any]]) -> int:
    """How many leading messages ``new`` shares with ``old`` (the same objects, or equal)."""
    n = len(old)
    if len(new) >= n and list(new[:n]) == old:  # the usual case, at C speed
        return n
    i = 0
    while i < min(n, len(new)) and new[i] is old[i]:
        i += 1
    return i


_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, reply TEXT);
CREATE TABLE IF NOT EXISTS turns (session TEXT, turn INTEGER, key TEXT, PRIMARY KEY (session, turn));
CREATE TABLE IF NOT EXISTS asked (key TEXT PRIMARY KEY);
"""


def turn_of(messages: Sequence[Mapping[str, Any]]) -> int:
    """A call's position in its session: how many replies the session already had."""
    return sum(1 for m in messages if m.get("role") == "assistant")


def _reply_json(completion: Completion) -> str:
    return json.dumps({
        "content": completion.content,
        "tool_calls": [vars(c) for c in completion.tool_calls],
        "finish_reason": completion.finish_reason,
        "reasoning": completion.reasoning,
        "record": completion.record.model_dump(mode="json"),
        "more": [vars(c) for c in completion.more],
    })


def _from_json(text: str) -> Completion:
    data = json.loads(text)
    record = CallRecord.model_validate(data["record"]).model_copy(update={"replayed": True})
    return Completion(
        content=data["content"],
        tool_calls=tuple(ToolCallData(**c) for c in data["tool_calls"]),
        finish_reason=data["finish_reason"],
        record=record,
        reasoning=data.get("reasoning"),
        more=tuple(Choice(**c) for c in data.get("more") or ()),
    )


def kept_replies(path: Path) -> dict[tuple[str, int], Completion]:
    """The replies a finished run's journal holds, by (session, turn), read without writing
    to it (``bench/kept_replies.py`` reads kept live runs so)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT t.session, t.turn, c.reply FROM turns t "
                          "JOIN calls c ON c.key = t.key").fetchall()
    finally:
        db.close()
    return {(session, turn): _from_json(reply) for session, turn, reply in rows}


class CallJournal:
    """Completed calls of one run, keyed by session and the exact request.

    It also remembers which request completed at each (session, turn), and every request that
    was sent (``ask``, before it goes out): a resumed run that sends a request an earlier
    process had sent but never got back (the call in flight when it died), or a *different*
    request at a turn that had completed, asks the provider again — ``repeated`` counts those
    (measured: what the provider is asked again, nothing assumed); an exact resume of a run
    stopped between calls keeps it at 0.

    The keys and turns are read once when the journal opens and kept in memory, so a call that
    was never made costs no lookup on disk. ``put`` writes a completed call before it returns,
    on the caller's thread, in a transaction of its own: the session acts on a reply only once
    it is in the file (WAL, ``synchronous=NORMAL``: a killed process cannot lose it), so a
    killed run replays every call it acted on exactly. No sync to disk is waited for (a power
    cut may lose the last calls, which are then paid again). Such a write is a WAL append,
    ~0.1-0.4 ms; handing it to a writer thread and waiting for it cost more (the hand-over and
    the interpreter lock going back and forth: ~1 ms a call, ``bench/overhead.py``). A new
    run's file (switching it to WAL takes syncs to disk) is made on a thread of its own as the
    journal opens, so the first reply does not wait for it. A journal that could not write
    stops the run: the failed ``put`` raises, and so does every later one (``check``).
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._error: BaseException | None = None
        self._keys: set[str] = set()
        self._turns: dict[tuple[str, int], str] = {}
        self._opening: threading.Thread | None = None
        self._asked: set[str] = set()  # sent by an earlier process of this run
        if path.exists():  # a resumed run: what it paid for before
            db = self._open()
            self._keys = {k for (k,) in db.execute("SELECT key FROM calls")}
            self._turns = {(s, t): k for s, t, k in db.execute(
                "SELECT session, turn, key FROM turns")}
            self._asked = {k for (k,) in db.execute("SELECT key FROM asked")} - self._keys
        else:
            self._opening = threading.Thread(target=self._create, name="call-journal-open",
                                             daemon=True)
            self._opening.start()
        self.replayed = 0
        self.repeated = 0
        self.repeats: list[tuple[str, int]] = []

    def _create(self) -> None:
        try:
            with self._lock:
                self._open()
        except BaseException as exc:  # raised by the first put
            self._error = exc

    def _ready(self) -> None:
        if self._opening is not None:
            self._opening.join()
            self._opening = None

    def check_repeat(self, session: str, turn: int, key: str) -> bool:
        """Record a paid call at a turn that had completed with another request."""
        known = self._turns.get((session, turn))
        if key in self._asked:  # sent before, its reply never came: asked again now
            self._asked.discard(key)
        elif known is None or known == key:
            return False
        self.repeated += 1
        self.repeats.append((session, turn))
        return True

    def ask(self, key: str) -> None:
        """Record that the request ``key`` is about to be sent (before it goes out)."""
        self._ready()
        self.check()
        try:
            self._write_asked(key)
        except Exception as exc:
            self._error = exc
            raise

    def _write_asked(self, key: str) -> None:
        with self._lock:
            self._open().execute("INSERT OR IGNORE INTO asked VALUES (?)", (key,))

    def knows(self, key: str) -> bool:
        """Whether a completed call with this key is in the journal (no disk access)."""
        return key in self._keys

    def get(self, key: str) -> Completion | None:
        """The completed call with this key, marked replayed; None if there is none."""
        if key not in self._keys:
            return None
        with self._lock:
            row = self._open().execute("SELECT reply FROM calls WHERE key = ?",
                                       (key,)).fetchone()
        completion = None if row is None else _from_json(row[0])
        if completion is not None:
            self.replayed += 1
        return completion

    def put(self, key: str, completion: Completion, session: str, turn: int) -> None:
        """Journal a completed call: in the file when this returns, or raises the write's
        error (and every later ``put`` raises it too)."""
        self._ready()
        self.check()
        try:
            self._write([(key, _reply_json(completion), session, turn)])
        except Exception as exc:
            self._error = exc
            raise
        self._keys.add(key)
        self._turns.setdefault((session, turn), key)

    def check(self) -> None:
        """Raise the error of a journal write that failed: no call is worth paying for when
        its reply cannot be kept."""
        if self._error is not None:
            raise self._error

    def _write(self, rows: list[tuple[str, str, str, int]]) -> None:
        calls = [(key, reply) for key, reply, _, _ in rows]
        turns = [(session, turn, key) for key, _, session, turn in rows]
        with self._lock:
            db = self._open()
            db.execute("BEGIN")
            try:
                db.executemany("INSERT OR REPLACE INTO calls VALUES (?, ?)", calls)
                db.executemany("INSERT OR IGNORE INTO turns VALUES (?, ?, ?)", turns)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def _open(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = connect(str(self._path), schema="PRAGMA synchronous=NORMAL;" + _SCHEMA)
        return self._db

    def close(self) -> None:
        """Close the file; raises the error of a write that failed, if one did."""
        self._ready()
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
        self.check()


class JournaledClient:
    """A ``ModelClient`` that answers repeated requests from the journal."""

    def __init__(self, inner: ModelClient, journal: CallJournal) -> None:
        self.inner = inner
        self.journal = journal
        self._keys = RequestKeys()

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
        until: Until | None = None,
    ) -> Completion:
        with phase("journal"):
            key, turn = self._keys.key(session, self.inner.route.model.id, messages, tools,
                                       response_format)
            self.journal.check()
        if self.journal.knows(key):  # a resumed run: read it off the event loop
            with phase("journal"):
                cached = await asyncio.to_thread(self.journal.get, key)
            if cached is not None:
                return cached
        self.journal.check_repeat(session, turn, key)
        with phase("journal"):
            self.journal.ask(key)
        completion = await self.inner.complete(
            messages, session=session, tools=tools, response_format=response_format,
            progress=progress, until=until,
        )
        # in the journal's file before the session acts on it: a run killed from here on
        # replays it instead of paying again
        with phase("journal"):
            self.journal.put(key, completion, session, turn)
        return completion


class JournaledPool:
    """The client pool with every role's client journaled; everything else passes through."""

    def __init__(self, pool: Any, journal: CallJournal) -> None:
        self._pool = pool
        self.journal = journal

    def for_role(self, role: Role, *, temperature: float | None = None, start: int = 0,
                 max_output: int | None = None, choices: int = 1) -> ModelClient:
        return JournaledClient(self._pool.for_role(role, temperature=temperature, start=start,
                                                   max_output=max_output, choices=choices),
                               self.journal)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)
