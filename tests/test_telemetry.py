"""Telemetry: the time split counts overlaps once; a resumed run takes in its history."""

from __future__ import annotations

import json

from orchestrator.record.telemetry import Telemetry, _union
from orchestrator.state import CallRecord


def test_union_counts_overlapping_intervals_once():
    assert _union([(0, 2), (1, 3), (5, 6)]) == 4
    assert _union([]) == 0


def test_history_brings_back_calls_and_policy_violations(tmp_path):
    log = tmp_path / "events.jsonl"
    first = Telemetry("r1", log_path=log, env={"OPENAI_API_KEY": "sk-secret-123456"})
    first.call(CallRecord(role="builder", session="builder-1", requested_model="m",
                          prompt_tokens=10, output_tokens=2, cost_usd=0.5), (0.0, 1.0))
    first.emit("warning", role="builder", category="policy_violation", message="refused: git push")
    first.emit("warning", role="builder", category="fallback", message="policy violation? no")
    first.emit("warning", message="leaked sk-secret-123456")
    first.close()
    assert "sk-secret-123456" not in log.read_text()
    assert json.loads(log.read_text().splitlines()[-1])["message"] == "leaked ***"

    second = Telemetry("r1", log_path=log)
    assert second.load_history(log) == 1
    assert second.counters["policy_violations"] == 1
    assert second.per_role()["builder"].cost_usd == 0.5
    second.close()
