"""Writes moved off the event loop still land: the writer thread applies batches in order and
raises their errors; the write-behind quota ledger keeps caps exact and writes everything."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest

from orchestrator.models.quota import QuotaLedger, WriteBehindLedger
from orchestrator.record.writer import Writer


def test_a_writer_applies_batches_in_order_and_reports_errors():
    seen: list[list[int]] = []
    started, gate = threading.Event(), threading.Event()

    def apply(batch: list[int]) -> None:
        started.set()
        gate.wait(5)
        if 13 in batch:
            raise ValueError("thirteen")
        seen.append(batch)

    writer: Writer[int] = Writer(apply, name="test-writer")
    writer.submit(0)
    assert started.wait(5)  # the thread took item 0 alone and waits at the gate
    for i in range(1, 6):
        writer.submit(i)
    gate.set()
    writer.flush()
    assert [i for batch in seen for i in batch] == list(range(6))
    assert len(seen) == 2  # item 0 alone, then the five that queued meanwhile together
    writer.submit(13)
    with pytest.raises(ValueError, match="thirteen"):
        writer.flush()
    with pytest.raises(ValueError, match="thirteen"):
        writer.close()


def test_a_write_behind_ledger_keeps_caps_exact_and_writes_everything(tmp_path):
    path, now = tmp_path / "quota.sqlite", datetime.now(UTC)
    ledger = WriteBehindLedger(QuotaLedger(path), refresh_s=0.0)
    assert ledger.reserve("sim/m", 100, 1000, now)
    ledger.settle("sim/m", 100, 400, 0.5, now)  # queued: counted before it is written
    assert ledger.used_today("sim/m", now) == 400
    ledger.mark_exhausted("sim/x", now + timedelta(hours=1), "insufficient_quota")
    assert ledger.exhausted_until("sim/x", now) is not None  # at once, before it is written
    ledger.flush()
    other = QuotaLedger(path)  # another process marks another model
    other.mark_exhausted("sim/y", now + timedelta(hours=1), "usage limit")
    assert ledger.exhausted_until("sim/y", now) is None  # not yet seen: a refresh is asked for
    ledger.flush()
    assert ledger.exhausted_until("sim/y", now) is not None
    ledger.close()
    rows = {r.model: r for r in other.rows(now)}
    assert (rows["sim/m"].tokens, rows["sim/m"].calls, rows["sim/m"].usd) == (400, 1, 0.5)
    assert rows["sim/x"].exhausted_until is not None
    other.close()
