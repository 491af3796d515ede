"""The quota ledger: tokens and USD per model per UTC day, and exhausted-until times, in SQLite.

One file per user (``$XDG_STATE_HOME/orchestrate/quota.sqlite``), shared by every run and
process, so routing can be proactive: a model that is out of quota is skipped without a call.
Daily caps are enforced by reserving tokens with a single guarded ``UPDATE`` before a call and
settling the real count after it, so two processes never overspend a cap together. The ledger
also keeps each explorer's claim counts (verified, dropped and why) per model, one row per run
and session, so ``orchestrate quota`` can show which models' citations hold up over time. A run
uses the ledger through ``WriteBehindLedger``, which keeps its writes off the event loop.
``Ledger`` is what routing and a run rely on, whichever ledger it is; ``LedgerStore`` is a
ledger's storage (SQLite here, Postgres in ``quota_pg.py``) as ``WriteBehindLedger`` uses it.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from orchestrator.record.sqlite import connect
from orchestrator.record.writer import Writer

_SCHEMA = """
CREATE TABLE IF NOT EXISTS usage (
    day TEXT NOT NULL, model TEXT NOT NULL,
    tokens INTEGER NOT NULL DEFAULT 0, usd REAL NOT NULL DEFAULT 0, calls INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, model));
CREATE TABLE IF NOT EXISTS exhausted (
    model TEXT PRIMARY KEY, until TEXT NOT NULL, reason TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS claims (
    run_id TEXT NOT NULL, session TEXT NOT NULL, day TEXT NOT NULL, model TEXT NOT NULL,
    submitted INTEGER NOT NULL DEFAULT 0, verified INTEGER NOT NULL DEFAULT 0,
    adds_nothing INTEGER NOT NULL DEFAULT 0, dropped INTEGER NOT NULL DEFAULT 0,
    path INTEGER NOT NULL DEFAULT 0, quote INTEGER NOT NULL DEFAULT 0,
    trivial INTEGER NOT NULL DEFAULT 0, unrelated INTEGER NOT NULL DEFAULT 0,
    uncited INTEGER NOT NULL DEFAULT 0, unchecked INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (run_id, session));
"""
CLAIM_COUNTS = ("submitted", "verified", "adds_nothing", "dropped", "path", "quote", "trivial",
                "unrelated", "uncited", "unchecked", "failed")


Settled = tuple[str, int, int, float, datetime]  # model, reserved, tokens, usd, when


def ledger_name(provider: str, model_id: str) -> str:
    """The ledger's name for a model: ``provider/model-id``."""
    return f"{provider}/{model_id}"


def default_ledger_path(env: Mapping[str, str]) -> Path:
    """``$XDG_STATE_HOME/orchestrate/quota.sqlite``, else ``~/.local/state/orchestrate/...``."""
    state = env.get("XDG_STATE_HOME")
    base = Path(state) if state else Path(env.get("HOME") or Path.home()) / ".local" / "state"
    return base / "orchestrate" / "quota.sqlite"


@dataclass(frozen=True)
class QuotaRow:
    """One line of ``orchestrate quota``: a model's use today and whether it is exhausted."""

    model: str
    day: str
    tokens: int
    usd: float
    calls: int
    cap_tokens: int | None = None
    exhausted_until: datetime | None = None
    reason: str = ""


@dataclass(frozen=True)
class ClaimRow:
    """One model's explorer claims since a day: runs, explorer sessions, ``CLAIM_COUNTS``."""

    model: str
    since: str
    runs: int
    explorers: int
    counts: dict[str, int]


class Ledger(Protocol):
    """Tokens and USD per model key (``provider/model-id``) per UTC day, exhaustion marks and
    explorer claim counts. Safe to call from several threads."""

    def exhausted_until(self, model: str, now: datetime) -> datetime | None:
        """The reset time if ``model`` is marked exhausted and not yet reset."""
        ...

    def mark_exhausted(self, model: str, until: datetime, reason: str) -> None:
        """Skip ``model`` until ``until``, every process that shares the ledger."""
        ...

    def used_today(self, model: str, now: datetime) -> int:
        """Tokens ``model`` used (or has reserved) on ``now``'s UTC day."""
        ...

    def reserve(self, model: str, tokens: int, cap: int | None, now: datetime) -> bool:
        """Take ``tokens`` from today's cap atomically; False if they do not fit."""
        ...

    def settle(self, model: str, reserved: int, tokens: int, usd: float, now: datetime) -> None:
        """Replace a reservation by what the call really used (0 tokens for a failed call)."""
        ...

    def record_claims(self, run_id: str, session: str, model: str, counts: Mapping[str, int],
                      now: datetime) -> None:
        """One explorer's claim counts; the same run and session again replaces them."""
        ...

    def claim_rows(self, since: datetime) -> list[ClaimRow]:
        """Per model: explorer claims recorded on or after ``since``'s UTC day."""
        ...

    def rows(self, now: datetime | None = None, caps: Mapping[str, int | None] | None = None
             ) -> list[QuotaRow]:
        """Today's usage and current exhaustion per model, for ``orchestrate quota``."""
        ...

    def close(self) -> None:
        """Write out what is pending and release the storage."""
        ...


class LedgerStore(Ledger, Protocol):
    """A ledger's own storage: what ``WriteBehindLedger`` reads and writes in batches."""

    def exhausted_map(self) -> dict[str, datetime]:
        """Every model marked exhausted, with the time its mark runs out."""
        ...

    def settle_many(self, settled: Sequence[Settled]) -> None:
        """``settle`` for many calls in one transaction."""
        ...


def _day(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m-%d")


def claim_values(counts: Mapping[str, int]) -> tuple[int, ...]:
    """The counts in ``CLAIM_COUNTS`` order (missing ones are 0)."""
    return tuple(int(counts.get(k, 0)) for k in CLAIM_COUNTS)


class QuotaLedger:
    """Usage and exhaustion per model key (``provider/model-id``); ``path=None`` keeps it in memory."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        target = str(self.path) if self.path is not None else ":memory:"
        self._db = connect(target, schema=_SCHEMA)
        self._lock = threading.Lock()
        self._add_missing_columns()

    def _add_missing_columns(self) -> None:
        """A ledger file written by an older version gains the claim counts added since."""
        have = {row[1] for row in self._run("PRAGMA table_info(claims)")}
        for column in CLAIM_COUNTS:
            if column not in have:
                try:
                    self._run(f"ALTER TABLE claims ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0")
                except sqlite3.OperationalError:  # another process added it first
                    pass

    def _run(self, sql: str, args: tuple = ()) -> sqlite3.Cursor:
        with self._lock:
            return self._db.execute(sql, args)

    def exhausted_until(self, model: str, now: datetime) -> datetime | None:
        """The reset time if ``model`` is marked exhausted and not yet reset."""
        row = self._run("SELECT until FROM exhausted WHERE model = ?", (model,)).fetchone()
        if row is None:
            return None
        until = datetime.fromisoformat(row[0])
        return until if until > now else None

    def mark_exhausted(self, model: str, until: datetime, reason: str) -> None:
        self._run(
            "INSERT INTO exhausted (model, until, reason) VALUES (?, ?, ?) "
            "ON CONFLICT(model) DO UPDATE SET until = excluded.until, reason = excluded.reason",
            (model, until.astimezone(UTC).isoformat(), reason[:500]),
        )

    def exhausted_map(self) -> dict[str, datetime]:
        """Every model marked exhausted, with the time its mark runs out."""
        return {m: datetime.fromisoformat(u) for m, u in self._run(
            "SELECT model, until FROM exhausted")}

    def used_today(self, model: str, now: datetime) -> int:
        row = self._run("SELECT tokens FROM usage WHERE day = ? AND model = ?",
                        (_day(now), model)).fetchone()
        return row[0] if row else 0

    def reserve(self, model: str, tokens: int, cap: int | None, now: datetime) -> bool:
        """Take ``tokens`` from today's cap in one atomic statement; False if they do not fit."""
        day = _day(now)
        self._run("INSERT OR IGNORE INTO usage (day, model) VALUES (?, ?)", (day, model))
        if cap is None:
            self._run("UPDATE usage SET tokens = tokens + ? WHERE day = ? AND model = ?",
                      (tokens, day, model))
            return True
        cur = self._run(
            "UPDATE usage SET tokens = tokens + ? WHERE day = ? AND model = ? AND tokens + ? <= ?",
            (tokens, day, model, tokens, cap),
        )
        return cur.rowcount == 1

    def settle(self, model: str, reserved: int, tokens: int, usd: float, now: datetime) -> None:
        """Replace a reservation by what the call really used (0 tokens for a failed call)."""
        self.settle_many([(model, reserved, tokens, usd, now)])

    def settle_many(self, settled: Sequence[Settled]) -> None:
        """``settle`` for many calls in one transaction (one sync to disk)."""
        with self._lock:
            self._db.execute("BEGIN")
            try:
                for model, reserved, tokens, usd, now in settled:
                    self._db.execute("INSERT OR IGNORE INTO usage (day, model) VALUES (?, ?)",
                                     (_day(now), model))
                    self._db.execute(
                        "UPDATE usage SET tokens = MAX(0, tokens - ? + ?), usd = usd + ?, "
                        "calls = calls + ? WHERE day = ? AND model = ?",
                        (reserved, tokens, usd, 1 if tokens else 0, _day(now), model),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def rows(self, now: datetime | None = None, caps: Mapping[str, int | None] | None = None
             ) -> list[QuotaRow]:
        """Today's usage and current exhaustion per model, for ``orchestrate quota``."""
        now = now or datetime.now(UTC)
        caps = caps or {}
        used = {m: (t, u, c) for m, t, u, c in self._run(
            "SELECT model, tokens, usd, calls FROM usage WHERE day = ?", (_day(now),))}
        names = sorted(set(used) | set(caps) | {m for (m,) in self._run(
            "SELECT model FROM exhausted")})
        out = []
        for name in names:
            tokens, usd, calls = used.get(name, (0, 0.0, 0))
            row = self._run("SELECT reason FROM exhausted WHERE model = ?", (name,)).fetchone()
            until = self.exhausted_until(name, now)
            out.append(QuotaRow(name, _day(now), tokens, usd, calls, caps.get(name), until,
                                row[0] if row and until else ""))
        return out

    def record_claims(self, run_id: str, session: str, model: str, counts: Mapping[str, int],
                      now: datetime) -> None:
        """One explorer's claim counts; recording the same run and session again replaces them."""
        cols = ", ".join(CLAIM_COUNTS)
        marks = ", ".join("?" for _ in CLAIM_COUNTS)
        self._run(f"INSERT OR REPLACE INTO claims (run_id, session, day, model, {cols}) "
                  f"VALUES (?, ?, ?, ?, {marks})",
                  (run_id, session, _day(now), model, *claim_values(counts)))

    def claim_rows(self, since: datetime) -> list[ClaimRow]:
        """Per model: explorer claims recorded on or after ``since``'s UTC day."""
        sums = ", ".join(f"SUM({c})" for c in CLAIM_COUNTS)
        day = _day(since)
        rows = self._run(f"SELECT model, COUNT(DISTINCT run_id), COUNT(*), {sums} FROM claims "
                         "WHERE day >= ? GROUP BY model ORDER BY model", (day,)).fetchall()
        return [ClaimRow(r[0], day, r[1], r[2], dict(zip(CLAIM_COUNTS, map(int, r[3:]), strict=True)))
                for r in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()


def quota_rows(path: Path, *, caps: Mapping[str, int | None] | None = None,
               now: datetime | None = None) -> list[QuotaRow]:
    """Rows for ``orchestrate quota`` from the ledger at ``path`` (empty if it does not exist)."""
    if not path.is_file():
        return []
    ledger = QuotaLedger(path)
    try:
        return ledger.rows(now, caps)
    finally:
        ledger.close()


class WriteBehindLedger:
    """A ledger (SQLite or Postgres) that the event loop never waits for.

    Settled usage and exhaustion marks go to the ledger on a writer thread (``writer.py``),
    batched into one transaction; marks are read from memory, refreshed in the background every
    ``refresh_s`` seconds, so a mark another process writes is seen within that (and a model
    that is out answers ``insufficient_quota`` anyway, which marks it here at once). Daily caps
    stay exact: ``reserve`` is the ledger's own atomic statement, and ``used_today`` counts what
    is still on its way to the ledger. ``close`` writes everything out.
    """

    def __init__(self, inner: LedgerStore, *, refresh_s: float = 2.0) -> None:
        self.inner = inner
        self.path: Path | None = getattr(inner, "path", None)
        self._refresh_s = refresh_s
        self._marks: dict[str, datetime] = inner.exhausted_map()
        self._ours: dict[str, datetime] = {}  # marks made here, even before they are written
        self._read = time.monotonic()
        self._refreshing = False
        self._queued: dict[tuple[str, str], int] = {}  # (day, model) -> tokens not yet written
        self._lock = threading.Lock()
        self._writer: Writer[tuple[str, Any]] = Writer(self._apply, name="quota-ledger")

    def exhausted_until(self, model: str, now: datetime) -> datetime | None:
        """The reset time if ``model`` is marked exhausted and not yet reset."""
        if not self._refreshing and time.monotonic() - self._read > self._refresh_s:
            self._refreshing = True
            self._writer.submit(("refresh", None))
        until = max(self._marks.get(model, _NEVER), self._ours.get(model, _NEVER))
        return until if until > now else None

    def mark_exhausted(self, model: str, until: datetime, reason: str) -> None:
        self._ours[model] = until
        self._writer.submit(("mark", (model, until, reason)))

    def used_today(self, model: str, now: datetime) -> int:
        with self._lock:
            queued = self._queued.get((_day(now), model), 0)
        return int(self.inner.used_today(model, now)) + queued

    def reserve(self, model: str, tokens: int, cap: int | None, now: datetime) -> bool:
        return bool(self.inner.reserve(model, tokens, cap, now))

    def settle(self, model: str, reserved: int, tokens: int, usd: float, now: datetime) -> None:
        with self._lock:
            key = (_day(now), model)
            self._queued[key] = self._queued.get(key, 0) + tokens - reserved
        self._writer.submit(("settle", (model, reserved, tokens, usd, now)))

    def _apply(self, batch: list[tuple[str, Any]]) -> None:
        settled: list[Settled] = [args for kind, args in batch if kind == "settle"]
        if settled:
            self.inner.settle_many(settled)
            with self._lock:
                for model, reserved, tokens, _, now in settled:
                    key = (_day(now), model)
                    self._queued[key] = self._queued.get(key, 0) - (tokens - reserved)
        for kind, args in batch:
            if kind == "mark":
                self.inner.mark_exhausted(*args)
        if any(kind == "refresh" for kind, _ in batch):
            self._marks = self.inner.exhausted_map()
            self._read, self._refreshing = time.monotonic(), False

    def flush(self) -> None:
        """Wait until everything settled or marked so far is in the ledger."""
        self._writer.flush()

    def record_claims(self, run_id: str, session: str, model: str, counts: Mapping[str, int],
                      now: datetime) -> None:
        """Written at once: called off the event loop as a run ends, and its error is the
        caller's to report (claim history never fails a run, so not via the writer)."""
        self.inner.record_claims(run_id, session, model, counts, now)

    def claim_rows(self, since: datetime) -> list[ClaimRow]:
        self.flush()
        return list(self.inner.claim_rows(since))

    def rows(self, now: datetime | None = None, caps: Mapping[str, int | None] | None = None
             ) -> list[QuotaRow]:
        self.flush()
        return list(self.inner.rows(now, caps))

    def close(self) -> None:
        try:
            self._writer.close()
        finally:
            self.inner.close()


_NEVER = datetime.min.replace(tzinfo=UTC)
