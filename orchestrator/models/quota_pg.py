"""The quota ledger in PostgreSQL: a ``quota.LedgerStore`` like ``quota.QuotaLedger``, shared by a fleet.

Every machine that routes calls draws on one daily cap per model. A reservation is a single
guarded upsert (it takes the tokens only if they still fit under the cap, and says whether it
did), so two workers reserving at the same moment never overspend the cap together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any

from orchestrator.models.quota import (
    CLAIM_COUNTS,
    ClaimRow,
    LedgerStore,
    QuotaLedger,
    QuotaRow,
    Settled,
    claim_values,
    default_ledger_path,
)
from orchestrator.record.store import SharedConnection

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS orchestrate_quota_usage ("
    " day DATE NOT NULL, model TEXT NOT NULL, tokens BIGINT NOT NULL DEFAULT 0,"
    " usd DOUBLE PRECISION NOT NULL DEFAULT 0, calls INTEGER NOT NULL DEFAULT 0,"
    " PRIMARY KEY (day, model))",
    "CREATE TABLE IF NOT EXISTS orchestrate_quota_exhausted ("
    " model TEXT PRIMARY KEY, until TIMESTAMPTZ NOT NULL, reason TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS orchestrate_claims ("
    " run_id TEXT NOT NULL, session TEXT NOT NULL, day DATE NOT NULL, model TEXT NOT NULL, "
    + ", ".join(f"{c} INTEGER NOT NULL DEFAULT 0" for c in CLAIM_COUNTS)
    + ", PRIMARY KEY (run_id, session))",
    # a table created by an older version gains the claim counts added since
    *(f"ALTER TABLE orchestrate_claims ADD COLUMN IF NOT EXISTS {c} INTEGER NOT NULL DEFAULT 0"
      for c in CLAIM_COUNTS),
)
# Takes the tokens only when they fit: the row's lock makes the check and the add one step.
_RESERVE = """
INSERT INTO orchestrate_quota_usage AS u (day, model, tokens)
SELECT %(day)s, %(model)s, %(tokens)s WHERE %(tokens)s <= %(cap)s
ON CONFLICT (day, model) DO UPDATE SET tokens = u.tokens + excluded.tokens
    WHERE u.tokens + excluded.tokens <= %(cap)s
RETURNING tokens
"""
_SETTLE = """
INSERT INTO orchestrate_quota_usage AS u (day, model, tokens, usd, calls)
VALUES (%(day)s, %(model)s, GREATEST(0, %(tokens)s - %(reserved)s), %(usd)s, %(calls)s)
ON CONFLICT (day, model) DO UPDATE SET
    tokens = GREATEST(0, u.tokens - %(reserved)s + %(tokens)s),
    usd = u.usd + %(usd)s, calls = u.calls + %(calls)s
"""


def _day(now: datetime) -> date:
    return now.astimezone(UTC).date()


class PostgresQuotaLedger:
    """``QuotaLedger``'s methods on the ``orchestrate_quota_*`` tables of a shared database."""

    def __init__(self, database_url: str) -> None:
        self._db = SharedConnection(database_url)
        self._db.create("orchestrate.quota", _SCHEMA, "create the quota tables in")

    def _run(self, sql: str, args: Mapping[str, Any] | tuple = ()) -> list[tuple]:
        return self._db.run(sql, args)

    def exhausted_until(self, model: str, now: datetime) -> datetime | None:
        """The reset time if ``model`` is marked exhausted and not yet reset."""
        rows = self._run("SELECT until FROM orchestrate_quota_exhausted WHERE model = %s", (model,))
        return rows[0][0] if rows and rows[0][0] > now else None

    def mark_exhausted(self, model: str, until: datetime, reason: str) -> None:
        self._run(
            "INSERT INTO orchestrate_quota_exhausted (model, until, reason) VALUES (%s, %s, %s) "
            "ON CONFLICT (model) DO UPDATE SET until = excluded.until, reason = excluded.reason",
            (model, until.astimezone(UTC), reason[:500]),
        )

    def exhausted_map(self) -> dict[str, datetime]:
        """Every model marked exhausted, with the time its mark runs out."""
        return {m: until for m, until in self._run(
            "SELECT model, until FROM orchestrate_quota_exhausted")}

    def used_today(self, model: str, now: datetime) -> int:
        rows = self._run("SELECT tokens FROM orchestrate_quota_usage WHERE day = %s AND model = %s",
                         (_day(now), model))
        return int(rows[0][0]) if rows else 0

    def reserve(self, model: str, tokens: int, cap: int | None, now: datetime) -> bool:
        """Take ``tokens`` from today's cap in one atomic statement; False if they do not fit."""
        limit = cap if cap is not None else 2**62
        rows = self._run(_RESERVE, {"day": _day(now), "model": model, "tokens": tokens,
                                    "cap": limit})
        return bool(rows)

    def settle(self, model: str, reserved: int, tokens: int, usd: float, now: datetime) -> None:
        """Replace a reservation by what the call really used (0 tokens for a failed call)."""
        self._run(_SETTLE, {"day": _day(now), "model": model, "reserved": reserved,
                            "tokens": tokens, "usd": usd, "calls": 1 if tokens else 0})

    def settle_many(self, settled: Sequence[Settled]) -> None:
        """``settle`` for many calls, in one transaction."""
        with self._db.transaction() as conn:
            for model, reserved, tokens, usd, now in settled:
                conn.execute(_SETTLE, {"day": _day(now), "model": model,
                                           "reserved": reserved, "tokens": tokens, "usd": usd,
                                           "calls": 1 if tokens else 0})

    def rows(self, now: datetime | None = None, caps: Mapping[str, int | None] | None = None
             ) -> list[QuotaRow]:
        """Today's usage and current exhaustion per model, for ``orchestrate quota``."""
        now = now or datetime.now(UTC)
        caps = caps or {}
        used = {m: (int(t), float(u), int(c)) for m, t, u, c in self._run(
            "SELECT model, tokens, usd, calls FROM orchestrate_quota_usage WHERE day = %s",
            (_day(now),))}
        marks = {m: (until, reason) for m, until, reason in self._run(
            "SELECT model, until, reason FROM orchestrate_quota_exhausted")}
        out = []
        for name in sorted(set(used) | set(caps) | set(marks)):
            tokens, usd, calls = used.get(name, (0, 0.0, 0))
            until, reason = marks.get(name, (None, ""))
            live = until if until is not None and until > now else None
            out.append(QuotaRow(name, _day(now).isoformat(), tokens, usd, calls, caps.get(name),
                                live, reason if live else ""))
        return out

    def record_claims(self, run_id: str, session: str, model: str, counts: Mapping[str, int],
                      now: datetime) -> None:
        """One explorer's claim counts; recording the same run and session again replaces them."""
        cols = ", ".join(CLAIM_COUNTS)
        marks = ", ".join("%s" for _ in CLAIM_COUNTS)
        updates = ", ".join(f"{c} = excluded.{c}" for c in ("day", "model", *CLAIM_COUNTS))
        self._run(f"INSERT INTO orchestrate_claims (run_id, session, day, model, {cols}) "
                  f"VALUES (%s, %s, %s, %s, {marks}) "
                  f"ON CONFLICT (run_id, session) DO UPDATE SET {updates}",
                  (run_id, session, _day(now), model, *claim_values(counts)))

    def claim_rows(self, since: datetime) -> list[ClaimRow]:
        """Per model: explorer claims recorded on or after ``since``'s UTC day."""
        sums = ", ".join(f"SUM({c})" for c in CLAIM_COUNTS)
        day = _day(since)
        rows = self._run(f"SELECT model, COUNT(DISTINCT run_id), COUNT(*), {sums} FROM orchestrate_claims "
                         "WHERE day >= %s GROUP BY model ORDER BY model", (day,))
        return [ClaimRow(r[0], day.isoformat(), int(r[1]), int(r[2]),
                         dict(zip(CLAIM_COUNTS, map(int, r[3:]), strict=True))) for r in rows]

    def close(self) -> None:
        self._db.close()


def build_ledger(database_url: str | None, env: Mapping[str, str]) -> LedgerStore:
    """The shared ledger for a database URL, else the user's SQLite ledger file."""
    if database_url:
        return PostgresQuotaLedger(database_url)
    return QuotaLedger(default_ledger_path(env))
